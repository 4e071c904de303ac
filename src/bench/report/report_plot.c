/* SVG plots of a set of bench results (report_set.h), drawn by gnuplot
 * (Debian gnuplot-nox) from scripts this file writes: NAME.gp beside
 * NAME.svg in the output folder, each with its data inline, so a plot can be
 * re-drawn or restyled by hand. gnuplot's messages go to NAME.log.
 * Not here: deciding what varies (report_set.c), the page (report_html.c). */
#include "bench/report/report_set.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

extern char **environ;

/* ---- script plumbing --------------------------------------------------------------------- */

/* s as the body of a gnuplot "..." string (no quotes or backslashes inside). */
void rplot_gp_str(char *out, size_t cap, const char *s) {
    size_t k = 0;
    for (; *s && k + 1 < cap; s++)
        out[k++] = *s == '"' ? '\'' : *s == '\\' ? '/' : *s;
    out[k] = 0;
}

/* path as the body of a gnuplot '...' string ('' is a quote). */
static void gp_path(FILE *f, const char *path) {
    fputc('\'', f);
    for (; *path; path++) {
        if (*path == '\'') fputc('\'', f);
        fputc(*path, f);
    }
    fputc('\'', f);
}

FILE *rplot_script_open(const char *dir, const char *name, int w, int h, tps_err *e) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.gp", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        tps_fail(e, TPS_EIO, "cannot write '%s': %s", path, strerror(errno));
        return NULL;
    }
    fprintf(f, "# written by tps report; run `gnuplot %s.gp` here to redraw %s.svg\n", name, name);
    fprintf(f,
            "set terminal svg size %d,%d dynamic noenhanced font 'sans,12' background rgb "
            "'white'\n",
            w, h);
    snprintf(path, sizeof path, "%s/%s.svg", dir, name);
    fprintf(f, "set output ");
    gp_path(f, path);
    fprintf(f, "\nset datafile missing '?'\nset grid lc rgb '#dddddd'\nset border lc rgb "
               "'#555555'\nset key outside right top box lc rgb '#bbbbbb'\n");
    return f;
}

/* Closes the script and runs gnuplot on it. */
int rplot_script_run(FILE *f, const char *dir, const char *name, tps_err *e) {
    bool bad = ferror(f) != 0;
    if (fclose(f) || bad) return tps_fail(e, TPS_EIO, "cannot write %s/%s.gp", dir, name);
    char gp[1024], log[1024];
    snprintf(gp, sizeof gp, "%s/%s.gp", dir, name);
    snprintf(log, sizeof log, "%s/%s.log", dir, name);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    char *argv[] = {"gnuplot", gp, NULL};
    pid_t pid;
    int rc = posix_spawnp(&pid, "gnuplot", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc)
        return tps_fail(e, TPS_ENOENT,
                        "cannot run gnuplot (%s): install gnuplot-nox (scripts/install-deps.sh) "
                        "for the plots",
                        strerror(rc));
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        if (WIFEXITED(ws) && WEXITSTATUS(ws) == 127)
            return tps_fail(e, TPS_ENOENT,
                            "gnuplot not found: install gnuplot-nox (scripts/install-deps.sh) "
                            "for the plots");
        return tps_fail(e, TPS_EIO, "gnuplot failed on %s (its messages: %s)", gp, log);
    }
    return TPS_OK;
}

static void add_plot(rplot_list *l, const char *file, const char *title, const char *caption) {
    if (l->n == RSET_MAX_PLOTS) return;
    rplot *p = &l->p[l->n++];
    snprintf(p->file, sizeof p->file, "%.63s", file);
    snprintf(p->title, sizeof p->title, "%.159s", title);
    snprintf(p->caption, sizeof p->caption, "%.511s", caption);
}

static double pct_ms(const hist *h, double p) {
    return hist_count(h) ? hist_percentile(h, p) / 1e6 : -1;
}

static void num_or_missing(FILE *f, double v, bool positive_only) {
    if (!(v >= 0) || (positive_only && v <= 0))
        fprintf(f, " ?");
    else
        fprintf(f, " %.6g", v);
}

/* The point of curve g at x rank k; NULL if none (or no result). */
static const rset_point *at(const rset *s, size_t g, size_t k) {
    for (size_t i = 0; i < s->n; i++)
        if (s->p[i].group == g && s->p[i].x == k && s->p[i].has_result) return &s->p[i];
    return NULL;
}

static double best_tps(const bench_result *r) {
    return r->steady.valid ? r->steady.tps.output_tps : r->run.tps.output_tps;
}

/* $gG: x  "xlabel"  steady  run  ttft50 ttft99 itl50 itl99 best_tps */
/* Group g's label, quoted for a gnuplot string. */
static void group_label_gp(const rset *s, size_t g, char *gl, size_t cap) {
    rset_group_label(s, g, gl, cap);
    rplot_gp_str(gl, cap, gl);
}

static void curve_blocks(FILE *f, const rset *s) {
    for (size_t g = 0; g < s->ngroups; g++) {
        fprintf(f, "$g%zu << EOD\n", g);
        for (size_t k = 0; k < s->nx; k++) {
            const rset_point *p = at(s, g, k);
            if (!p) continue;
            char xl[160];
            rplot_gp_str(xl, sizeof xl, rset_x_label(s, k));
            const bench_result *r = &p->r;
            fprintf(f, "%zu \"%s\"", k, xl);
            num_or_missing(f, r->steady.valid ? r->steady.tps.output_tps : -1, false);
            num_or_missing(f, r->run.tps.output_tps, false);
            num_or_missing(f, pct_ms(r->h[RH_TTFT], 50), true);
            num_or_missing(f, pct_ms(r->h[RH_TTFT], 99), true);
            num_or_missing(f, pct_ms(r->h[RH_ITL], 50), true);
            num_or_missing(f, pct_ms(r->h[RH_ITL], 99), true);
            num_or_missing(f, best_tps(r), false);
            fprintf(f, "\n");
        }
        fprintf(f, "EOD\n");
    }
}

/* One series per curve g on the plot line. fmt takes, in order: the
 * separator ("" first, then ", "), g's data block, its colour (g + 1), its
 * label, the block and colour again, the label again (%.0s where it is not
 * shown twice). */
static void curve_series(FILE *f, const rset *s, const char *fmt) {
    char gl[160];
    for (size_t g = 0; g < s->ngroups; g++) {
        group_label_gp(s, g, gl, sizeof gl);
        fprintf(f, fmt, g ? ", " : "", g, g + 1, gl, g, g + 1, gl);
    }
}

/* ---- the plots ------------------------------------------------------------------------------ */

static int plot_throughput(rplot_list *l, const rset *s, const char *dir, tps_err *e) {
    FILE *f = rplot_script_open(dir, "throughput", 960, 760, e);
    if (!f) return TPS_EIO;
    curve_blocks(f, s);
    char gl[160];
    fprintf(f, "set xrange [-0.5:%zu.5]\nset xlabel '%s'\n", s->nx - 1, s->xname);
    fprintf(f, "set multiplot layout 2,1\n");
    fprintf(f,
            "set title 'output tokens/s vs %s (solid: steady window of each point; dashed: run "
            "window)'\nset ylabel 'output tok/s'\nset yrange [0:*]\nplot ",
            s->xname);
    curve_series(f, s,
                 "%s$g%zu using 1:3:xtic(2) with linespoints lw 2 pt 7 ps 1.2 lc %zu title "
                 "\"%s [steady]\", $g%zu using 1:4 with linespoints lw 1 dt 2 pt 6 lc %zu title "
                 "\"%s [run]\"");
    fprintf(f, "\nset title 'latency (ms, completed requests, from the scheduled start; log "
               "scale)'\nset ylabel 'ms'\nset logscale y\nset yrange [*:*]\nplot ");
    static const char *const names[4] = {"TTFT p50", "TTFT p99", "ITL p50", "ITL p99"};
    static const int pts[4] = {7, 7, 5, 5};
    for (size_t g = 0; g < s->ngroups; g++) {
        group_label_gp(s, g, gl, sizeof gl);
        for (int m = 0; m < 4; m++)
            fprintf(f,
                    "%s$g%zu using 1:%d:xtic(2) with linespoints lw 2 dt %zu pt %d lc %d title "
                    "\"%s%s%s\"",
                    g || m ? ", " : "", g, 5 + m, g + 1, pts[m], m + 1, names[m],
                    s->ngroups > 1 ? " " : "", s->ngroups > 1 ? gl : "");
    }
    fprintf(f, "\nunset multiplot\n");
    int rc = rplot_script_run(f, dir, "throughput", e);
    if (!rc) {
        char title[160];
        snprintf(title, sizeof title, "Output tokens per second and latency vs %s", s->xname);
        add_plot(l, "throughput.svg", title,
                 "Top: output tokens/s over each point's steady window (solid) and its whole run "
                 "window (dashed). Bottom: TTFT and ITL percentiles in ms over completed "
                 "requests. Batching raises aggregate tokens/s while each reader's waits grow.");
    }
    return rc;
}

static int plot_latency_throughput(rplot_list *l, const rset *s, const char *dir, tps_err *e) {
    FILE *f = rplot_script_open(dir, "latency_throughput", 960, 460, e);
    if (!f) return TPS_EIO;
    curve_blocks(f, s);
    fprintf(f,
            "set title 'latency-throughput: ITL p99 vs output tokens/s (steady window; labels: "
            "%s)'\nset xlabel 'output tok/s [steady window]'\nset ylabel 'ITL p99 (ms, log "
            "scale)'\nset xrange [0:*]\nset logscale y\nplot ",
            s->xname);
    curve_series(f, s,
                 "%s$g%zu using 9:8 with linespoints lw 2 pt 7 ps 1.2 lc %zu title \"%s\", $g%zu "
                 "using 9:8:2 with labels offset 1.2,0.8 tc lt %zu notitle%.0s");
    fprintf(f, "\n");
    int rc = rplot_script_run(f, dir, "latency_throughput", e);
    if (!rc)
        add_plot(l, "latency_throughput.svg", "Latency-throughput curve",
                 "Each point: output tokens/s over its steady window (the run window when it has "
                 "none) against the 99th percentile inter-token latency. Up and to the right: "
                 "more throughput bought with choppier streams.");
    return rc;
}

static int plot_cdf(rplot_list *l, const rset *s, const char *dir, result_hist_id id,
                    const char *name, const char *what, tps_err *e) {
    bool any = false;
    for (size_t i = 0; i < s->n; i++)
        if (s->p[i].has_result && hist_count(s->p[i].r.h[id])) any = true;
    if (!any) return TPS_OK;
    char file[64];
    snprintf(file, sizeof file, "cdf_%s", name);
    FILE *f = rplot_script_open(dir, file, 960, 420, e);
    if (!f) return TPS_EIO;
    for (size_t i = 0; i < s->n; i++) {
        const rset_point *p = &s->p[i];
        fprintf(f, "$c%zu << EOD\n", i);
        if (p->has_result && hist_count(p->r.h[id])) {
            const hist *h = p->r.h[id];
            const double total = (double)hist_count(h);
            double cum = (double)hist_underflow(h);
            hist_iter it;
            hist_bucket b;
            hist_iter_init(&it, h);
            bool first = true;
            for (size_t k = 0; k < 100000 && hist_iter_next(&it, &b); k++) {
                if (first && b.lo > 0) fprintf(f, "%.6g %.6g\n", b.lo / 1e6, cum / total);
                cum += (double)b.count;
                if (b.hi > 0) {
                    fprintf(f, "%.6g %.6g\n", b.hi / 1e6, cum / total);
                    first = false;
                }
            }
        }
        fprintf(f, "EOD\n");
    }
    fprintf(f,
            "set title '%s distribution (CDF over completed requests; from the exported "
            "histograms)'\nset xlabel '%s (ms, log scale)'\nset ylabel 'fraction <= x'\n"
            "set logscale x\nset yrange [0:1.02]\nset key outside right top\nplot ",
            what, what);
    bool started = false;
    for (size_t i = 0; i < s->n; i++) {
        const rset_point *p = &s->p[i];
        if (!p->has_result || !hist_count(p->r.h[id])) continue;
        char lb[300];
        rplot_gp_str(lb, sizeof lb, p->label);
        fprintf(f, "%s$c%zu using 1:2 with steps lw 2 lc %zu title \"%s\"", started ? ", " : "", i,
                i + 1, lb);
        started = true;
    }
    fprintf(f, "\n");
    int rc = rplot_script_run(f, dir, file, e);
    if (!rc) {
        char title[160], svg[80], cap[512];
        snprintf(title, sizeof title, "%s distribution", what);
        snprintf(svg, sizeof svg, "%s.svg", file);
        snprintf(cap, sizeof cap,
                 "Cumulative distribution of %s per point (completed requests; times from the "
                 "scheduled start), drawn from the bucketed histograms stored in each result "
                 "(0.39%% bucket width).%s",
                 what,
                 id == RH_ITL ? " Zero gaps (several tokens in one event) sit below the left edge "
                                "of the log axis: the curve starts at their share."
                              : "");
        add_plot(l, svg, title, cap);
    }
    return rc;
}

static int plot_series(rplot_list *l, const rset *s, size_t i, const char *dir, tps_err *e) {
    const rset_point *p = &s->p[i];
    const bench_result *r = &p->r;
    if (!p->has_result || !r->nbins || !(r->bin_s > 0)) return TPS_OK;
    char name[32];
    snprintf(name, sizeof name, "series_%02zu", i + 1);
    FILE *f = rplot_script_open(dir, name, 640, 280, e);
    if (!f) return TPS_EIO;
    const double t0 = r->run.tps.w.t0 / 1e9;
    fprintf(f, "$s << EOD\n");
    for (size_t k = 0; k < r->nbins; k++)
        fprintf(f, "%.6g %.6g\n", t0 + (k + 0.5) * r->bin_s, (double)r->series_out[k] / r->bin_s);
    fprintf(f, "EOD\n");
    char lb[300];
    rplot_gp_str(lb, sizeof lb, p->label);
    fprintf(f, "set title \"%s: output tok/s per %.3g s bin over the run\"\n", lb, r->bin_s);
    fprintf(f, "set xlabel 's since the first send'\nset ylabel 'output tok/s'\nset yrange "
               "[0:*]\nset key inside right bottom opaque\nset style fill solid 0.55 noborder\n");
    if (r->steady.valid) {
        const double a = r->steady.tps.w.t0 / 1e9, b = r->steady.tps.w.t1 / 1e9;
        fprintf(f,
                "set object 1 rect from %.6g, graph 0 to %.6g, graph 1 behind fc rgb '#dbe7ff' "
                "fs solid 1.0 noborder\n",
                a, b);
        fprintf(f, "$m << EOD\n%.6g %.6g\n%.6g %.6g\nEOD\n", a, r->steady.tps.output_tps, b,
                r->steady.tps.output_tps);
        fprintf(f,
                "plot $s using 1:2:(%.6g) with boxes lc rgb '#3b6fb6' title 'per bin', $m using "
                "1:2 with lines lw 2 dt 2 lc rgb '#c0392b' title 'steady window (shaded): "
                "%.1f tok/s over %.1f-%.1f s'\n",
                r->bin_s, r->steady.tps.output_tps, a, b);
    } else {
        fprintf(f,
                "plot $s using 1:2:(%.6g) with boxes lc rgb '#3b6fb6' title 'per bin (no "
                "steady window)'\n",
                r->bin_s);
    }
    int rc = rplot_script_run(f, dir, name, e);
    if (!rc) {
        char svg[64], title[300];
        snprintf(svg, sizeof svg, "%s.svg", name);
        snprintf(title, sizeof title, "%s", p->label);
        add_plot(l, svg, title, "");
    }
    return rc;
}

static int plot_steps(rplot_list *l, const rset *s, const char *dir, tps_err *e) {
    bool any = false;
    for (size_t i = 0; i < s->n; i++)
        if (s->p[i].has_server && s->p[i].srv.steps > 0) any = true;
    if (!any) return TPS_OK;
    FILE *f = rplot_script_open(dir, "tokens_per_step", 960, 420, e);
    if (!f) return TPS_EIO;
    fprintf(f, "$d << EOD\n");
    for (size_t i = 0; i < s->n; i++) {
        const rset_point *p = &s->p[i];
        if (!p->has_server || !(p->srv.steps > 0)) continue;
        char lb[300];
        rplot_gp_str(lb, sizeof lb, p->label);
        fprintf(f, "\"%s\" %.6g %.6g\n", lb, p->srv.prompt_tokens / p->srv.steps,
                p->srv.generation_tokens / p->srv.steps);
    }
    fprintf(f, "EOD\n");
    fprintf(f, "set title 'tokens per engine step, mean over each point (server /metrics "
               "deltas)'\nset ylabel 'tokens per step'\nset yrange [0:*]\nset style data "
               "histograms\nset style histogram rowstacked\nset style fill solid 0.8 border -1\n"
               "set boxwidth 0.6\nset xtics rotate by -20\n"
               "plot $d using 2:xtic(1) lc rgb '#e67e22' title 'prefill (prompt) tokens', '' using "
               "3 lc rgb '#2e86c1' title 'decode (generated) tokens'\n");
    int rc = rplot_script_run(f, dir, "tokens_per_step", e);
    if (!rc)
        add_plot(l, "tokens_per_step.svg", "Tokens per engine step: prefill and decode",
                 "The server's own counters read before and after each point: prompt tokens "
                 "computed / steps and generated tokens / steps (tps_prompt_tokens_total, "
                 "tps_generation_tokens_total, tps_steps_total; recomputation after preemption "
                 "counts as prompt). A step with more rows reads the weights once for all of "
                 "them: that is why batching raises tokens/s.");
    return rc;
}

/* A capacity search: goodput fraction (left axis, the target dotted) and
 * TTFT p99 (right axis, the SLO dotted) against the probed rate, passing
 * probes filled, the answer a vertical line. */
static int plot_capacity(rplot_list *l, const rset *s, size_t i, const char *dir, tps_err *e) {
    const rset_capacity *c = &s->caps[i];
    char name[32];
    if (s->ncaps == 1)
        snprintf(name, sizeof name, "capacity");
    else
        snprintf(name, sizeof name, "capacity_%02zu", i + 1);
    FILE *f = rplot_script_open(dir, name, 960, 460, e);
    if (!f) return TPS_EIO;
    fprintf(f, "$c << EOD\n");
    bool positive = c->r.n > 0;
    for (double last = -1;;) { /* in rate order */
        const capacity_probe *next = NULL;
        for (size_t k = 0; k < c->r.n; k++)
            if (c->r.probes[k].rate > last && (!next || c->r.probes[k].rate < next->rate))
                next = &c->r.probes[k];
        if (!next) break;
        if (!(next->rate > 0)) positive = false;
        fprintf(f, "%.6g %.6g %.6g %d\n", next->rate, next->good_fraction, next->ttft_p99_ms,
                next->pass ? 7 : 6);
        last = next->rate;
    }
    fprintf(f, "EOD\n");
    char src[300];
    rplot_gp_str(src, sizeof src, c->source);
    fprintf(f,
            "set title \"capacity search (%s): goodput fraction and TTFT p99 vs probed rate\"\n"
            "set xlabel 'probed rate (requests/s)'\nset ylabel 'goodput fraction (good / sent)'\n"
            "set yrange [0:1.05]\nset ytics nomirror\nset y2label 'TTFT p99 (ms)'\nset y2tics\n"
            "set y2range [0:*]\n%s",
            src, positive ? "set logscale x 2\n" : "");
    if (c->r.max_rate > 0)
        fprintf(f,
                "set arrow from %.6g, graph 0 to %.6g, graph 1 nohead lw 2 dt 2 lc rgb '#27ae60'\n"
                "set label 'max rate %.2f/s%s' at %.6g, graph 0.5 left offset 0.5,0 tc rgb "
                "'#27ae60'\n",
                c->r.max_rate, c->r.max_rate, c->r.max_rate,
                c->r.fail_rate > 0 ? "" : " (at least)", c->r.max_rate);
    fprintf(f,
            "plot $c using 1:2:4 with linespoints pt variable ps 1.4 lw 2 lc rgb '#2e86c1' title "
            "'goodput fraction (filled: pass)', %.6g with lines dt 3 lc rgb '#2e86c1' title "
            "'goodput target', $c using 1:3 axes x1y2 with linespoints pt 5 lw 2 lc rgb "
            "'#e67e22' title 'TTFT p99 (ms)'",
            c->o.goodput_target);
    if (c->o.slo.ttft_ns)
        fprintf(f, ", %.6g axes x1y2 with lines dt 3 lc rgb '#e67e22' title 'TTFT limit'",
                c->o.slo.ttft_ns / 1e6);
    fprintf(f, "\n");
    int rc = rplot_script_run(f, dir, name, e);
    if (!rc) {
        char svg[64], title[160];
        snprintf(svg, sizeof svg, "%s.svg", name);
        snprintf(title, sizeof title, "Capacity search: goodput and TTFT p99 vs rate (%.100s)",
                 c->source);
        add_plot(l, svg, title,
                 "Each probe is an open-loop run at one rate. Left: the share of sent requests "
                 "that met every SLO limit (filled points passed the probe's verdict, dotted: "
                 "the target). Right: TTFT p99 in ms from the scheduled send. The dashed "
                 "vertical line is the answer: the highest rate that passed.");
    }
    return rc;
}

int rset_plot(rplot_list *out, const rset *s, const char *dir, tps_err *e) {
    memset(out, 0, sizeof *out);
    if (mkdir(dir, 0755) && errno != EEXIST)
        return tps_fail(e, TPS_EIO, "cannot create '%s': %s", dir, strerror(errno));
    bool any = false;
    for (size_t i = 0; i < s->n; i++)
        any = any || s->p[i].has_result;
    if (!any && !s->ncaps) return tps_fail(e, TPS_EINVAL, "no point has a result: nothing to plot");
    int rc = TPS_OK;
    for (size_t i = 0; !rc && i < s->ncaps; i++)
        rc = plot_capacity(out, s, i, dir, e);
    if (!rc && any) rc = plot_throughput(out, s, dir, e);
    if (!rc && any) rc = plot_latency_throughput(out, s, dir, e);
    if (!rc && any) rc = plot_cdf(out, s, dir, RH_TTFT, "ttft", "TTFT", e);
    if (!rc && any) rc = plot_cdf(out, s, dir, RH_ITL, "itl", "ITL", e);
    if (!rc && any) rc = plot_cdf(out, s, dir, RH_E2E, "e2e", "E2E", e);
    if (!rc && any) rc = plot_steps(out, s, dir, e);
    out->first_series = out->n;
    for (size_t i = 0; !rc && i < s->n; i++)
        rc = plot_series(out, s, i, dir, e);
    return rc;
}
