/* The report as one self-contained HTML page (report_set.h): the table, the
 * plots inlined as data: URIs of their SVG (each SVG stays a separate
 * document, so gnuplot's element ids never collide), and what every number
 * means. No scripts, no fonts or files from elsewhere: it opens offline.
 * Not here: the plots themselves (report_plot.c). */
#include "bench/report/report_set.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/io/tmp_dir.h"

void rhtml_esc(FILE *f, const char *s) {
    static const char *const ENTITY[256] = {
        ['<'] = "&lt;", ['>'] = "&gt;", ['&'] = "&amp;", ['"'] = "&quot;"};
    for (; *s; s++) {
        const char *ent = ENTITY[(unsigned char)*s];
        if (ent)
            fputs(ent, f);
        else
            fputc(*s, f);
    }
}

bool rhtml_row_head(FILE *f, const rset_point *p, int span) {
    fputs("<tr><td class=l>", f);
    rhtml_esc(f, p->label);
    fputs("</td>", f);
    if (!p->has_result) {
        fprintf(f, "<td colspan=%d class=l>no result (bench exit status %d)</td></tr>\n", span,
                p->exit_status);
        return false;
    }
    fprintf(f, "<td>%llu / %llu</td>", (unsigned long long)p->r.completed,
            (unsigned long long)p->r.failed);
    return true;
}

/* Writes the file at path as base64; false if it cannot be read. */
static bool base64_file(FILE *out, const char *path) {
    static const char T[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    FILE *in = fopen(path, "rb");
    if (!in) return false;
    unsigned char b[3 * 1024];
    size_t n;
    while ((n = fread(b, 1, sizeof b, in)) > 0) {
        size_t i = 0;
        for (; i + 3 <= n; i += 3) {
            unsigned v = (unsigned)b[i] << 16 | (unsigned)b[i + 1] << 8 | b[i + 2];
            fputc(T[v >> 18], out), fputc(T[v >> 12 & 63], out);
            fputc(T[v >> 6 & 63], out), fputc(T[v & 63], out);
        }
        if (i < n) { /* only at the end of the file: the buffer is a multiple of 3 */
            unsigned v = (unsigned)b[i] << 16 | (i + 1 < n ? (unsigned)b[i + 1] << 8 : 0);
            fputc(T[v >> 18], out), fputc(T[v >> 12 & 63], out);
            fputc(i + 1 < n ? T[v >> 6 & 63] : '=', out), fputc('=', out);
        }
    }
    bool ok = !ferror(in);
    fclose(in);
    return ok;
}

static void td_ms(FILE *f, const hist *h, double p) {
    if (hist_count(h))
        fprintf(f, "<td>%.1f</td>", hist_percentile(h, p) / 1e6);
    else
        fputs("<td>-</td>", f);
}

/* Each point's TTFO and thinking share, when any point thought. */
static void ttfo_notes(FILE *f, const rset *s) {
    if (!rset_has_thinking(s)) return;
    fputs("<p>TTFO, the first answer token after the thinking (ms, p50 / p99):", f);
    for (size_t i = 0; i < s->n; i++) {
        const rset_point *p = &s->p[i];
        if (!p->has_result) continue;
        fputs("<br>", f);
        rhtml_esc(f, p->label);
        fprintf(f, ": %.1f / %.1f, thinking %.0f%% of the output",
                hist_percentile(p->r.h[RH_TTFO], 50) / 1e6,
                hist_percentile(p->r.h[RH_TTFO], 99) / 1e6, 100 * rset_thinking_share(&p->r));
    }
    fputs("</p>\n", f);
}

static void table(FILE *f, const rset *s) {
    fputs("<table><thead><tr><th rowspan=2>point</th><th rowspan=2>requests<br>ok / failed</th>"
          "<th colspan=3>output tok/s</th><th rowspan=2>steady<br>window (s)</th>"
          "<th colspan=2>TTFT ms</th><th colspan=3>ITL ms</th><th colspan=2>E2E ms</th>"
          "<th colspan=2>tokens / step</th><th rowspan=2>GB/s<br>read</th>"
          "<th rowspan=2>% of<br>bandwidth</th><th rowspan=2>input from<br>cache %</th></tr>"
          "<tr><th>[steady]</th><th>[run]</th><th>[peak 1 s bin]</th><th>p50</th><th>p99</th>"
          "<th>p50</th><th>p99</th><th>per arrival p50</th><th>p50</th><th>p99</th><th>prefill</th>"
          "<th>decode</th></tr>"
          "</thead><tbody>\n",
          f);
    for (size_t i = 0; i < s->n; i++) {
        const rset_point *p = &s->p[i];
        if (!rhtml_row_head(f, p, 18)) continue;
        const bench_result *r = &p->r;
        if (r->steady.valid)
            fprintf(f, "<td><b>%.1f</b></td>", r->steady.tps.output_tps);
        else
            fputs("<td>-</td>", f);
        fprintf(f, "<td>%.1f</td><td>%.1f</td>", r->run.tps.output_tps, r->peak_tps);
        if (r->steady.valid)
            fprintf(f, "<td>%.1f&ndash;%.1f</td>", r->steady.tps.w.t0 / 1e9,
                    r->steady.tps.w.t1 / 1e9);
        else
            fputs("<td>-</td>", f);
        for (size_t k = 0; k < RSET_MS_COLS; k++)
            td_ms(f, r->h[rset_ms_cols[k].h], rset_ms_cols[k].pct);
        double prefill, decode;
        if (rset_point_step_tokens(p, &prefill, &decode))
            fprintf(f, "<td>%.1f</td><td>%.1f</td>", prefill, decode);
        else
            fputs("<td>-</td><td>-</td>", f);
        double gbs = rset_point_gbs(p), frac = rset_point_bw_fraction(p);
        if (gbs >= 0)
            fprintf(f, "<td>%.2f</td>", gbs);
        else
            fputs("<td>-</td>", f);
        if (frac >= 0)
            fprintf(f, "<td>%.1f%s</td>", 100 * frac, rset_point_bw_flag(p) ? "!" : "");
        else
            fputs("<td>-</td>", f);
        double cached = rset_point_cached_pct(p);
        if (cached >= 0)
            fprintf(f, "<td>%.1f</td>", cached);
        else
            fputs("<td>-</td>", f);
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
    rset_bw_notes(f, s, true);
    ttfo_notes(f, s);
}

void rset_bw_notes(FILE *f, const rset *s, bool html) {
    /* each distinct why once (roofline_flag's static strings, or points'
     * limit notes: compared by their words), with the points it is said of */
    const char *said[8] = {0};
    size_t n_said = 0;
    for (size_t j = 0; j < s->n && n_said < 8; j++) {
        const char *why = s->p[j].has_result ? rset_point_bw_flag(&s->p[j]) : NULL;
        bool seen = !why;
        for (size_t k = 0; k < n_said && !seen; k++)
            seen = !strcmp(said[k], why);
        if (seen) continue;
        said[n_said++] = why;
        fputs(html ? "<p class=note>! % of bandwidth of " : "  ! % of bandwidth of ", f);
        for (size_t i = j, first = 1; i < s->n; i++) {
            const char *its = s->p[i].has_result ? rset_point_bw_flag(&s->p[i]) : NULL;
            if (!its || strcmp(its, why)) continue;
            fputs(first ? "" : ", ", f);
            first = 0;
            if (html)
                rhtml_esc(f, s->p[i].label);
            else
                fputs(s->p[i].label, f);
        }
        fputs(": ", f);
        if (html) {
            rhtml_esc(f, why);
            fputs("</p>\n", f);
        } else {
            fprintf(f, "%s\n", why);
        }
    }
}

bool rhtml_figure(FILE *f, const rplot *p, const char *svg_dir, const char *cls) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", svg_dir, p->file);
    fprintf(f, "<figure class=%s><img alt=\"", cls);
    rhtml_esc(f, p->title);
    fputs("\" src=\"data:image/svg+xml;base64,", f);
    bool ok = base64_file(f, path);
    fputs("\">", f);
    if (p->caption[0]) {
        fputs("<figcaption>", f);
        rhtml_esc(f, p->caption);
        fputs("</figcaption>", f);
    }
    fputs("</figure>\n", f);
    return ok;
}

const char rhtml_css[] =
    "body{font:15px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px auto;"
    "max-width:1160px;padding:0 16px;color:#1d2330;background:#fff}"
    "h1{font-size:26px;margin:0 0 4px}h2{font-size:19px;margin:30px 0 8px;"
    "border-bottom:2px solid #3b6fb6;padding-bottom:3px}"
    ".meta{color:#556;font-size:13px}"
    "table{border-collapse:collapse;font-size:13px;margin:8px 0;width:100%}"
    "th,td{border:1px solid #c9d1de;padding:4px 7px;text-align:right}"
    "th{background:#eef3fb}th:first-child{text-align:left}td.l{text-align:left;white-space:nowrap}"
    "tbody tr:nth-child(even){background:#f7f9fc}"
    "figure{margin:12px 0}figure img{width:100%;border:1px solid #e2e6ee}"
    "figcaption{font-size:13px;color:#445}"
    ".grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(360px,1fr));gap:10px}"
    ".grid figure{margin:0}.note{background:#fff6e0;border:1px solid #f0d890;padding:8px}"
    "dl{font-size:13px}dt{font-weight:600}dd{margin:0 0 6px 18px}";

void rhtml_when(char *buf, size_t size) {
    time_t now = time(NULL);
    struct tm tmv;
    strftime(buf, size, "%Y-%m-%d %H:%M UTC", gmtime_r(&now, &tmv));
}

int rhtml_close(file_out *o, bool missing, const char *svg_dir, tps_err *e) {
    int rc = file_out_close(o, e);
    if (rc) return rc;
    if (missing) return tps_fail(e, TPS_EIO, "some SVG files in '%s' could not be read", svg_dir);
    return TPS_OK;
}

/* The document's head, the title and the line saying what the page holds. */
static void page_head(FILE *f, const rset *s) {
    char when[64];
    rhtml_when(when, sizeof when);
    fprintf(f,
            "<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
            "<meta name=viewport content=\"width=device-width,initial-scale=1\">"
            "<title>tps report</title><style>%s</style></head><body>\n",
            rhtml_css);
    fputs("<h1>tps report: what moves tokens per second</h1>\n<p class=meta>", f);
    fprintf(f, "%zu point%s", s->n, s->n == 1 ? "" : "s");
    if (s->xaxis >= 0) {
        fputs("; varying:", f);
        for (int a = 0; a < SWEEP_AXES; a++)
            if (s->varies[a]) fprintf(f, " %s", sweep_axis_name((sweep_axis)a));
    }
    if (s->sources[0]) {
        fputs("; from ", f);
        rhtml_esc(f, s->sources);
    }
    for (size_t i = 0; i < s->n; i++)
        if (s->p[i].has_result) {
            const char *url = json_string_value(json_object_get(s->p[i].r.config, "url"));
            if (url) {
                fputs("; endpoint ", f);
                rhtml_esc(f, url);
            }
            break;
        }
    fprintf(f, "; rendered %s.</p>\n", when);
}

/* The plots: the sweep's own, then each point's time series in a grid (or
 * why there are none). False when an SVG could not be read. */
static bool plots_section(FILE *f, const rplot_list *plots, const char *svg_dir,
                          const char *plot_note) {
    if (!plots || plots->n == 0) {
        fputs("<p class=note>No plots: ", f);
        rhtml_esc(f, plot_note ? plot_note : "none were drawn");
        fputs("</p>\n", f);
        return true;
    }
    bool ok = true;
    for (size_t i = 0; i < plots->first_series; i++) {
        fputs("<h2>", f);
        rhtml_esc(f, plots->p[i].title);
        fputs("</h2>\n", f);
        ok &= rhtml_figure(f, &plots->p[i], svg_dir, "wide");
    }
    if (plots->n > plots->first_series) {
        fputs("<h2>Output tokens per second over each run</h2>\n<p class=meta>Bars: output "
              "tokens that arrived in each bin / the bin's length. Shaded: the point's "
              "steady window; the dashed line is its mean rate over that window.</p>\n"
              "<div class=grid>\n",
              f);
        for (size_t i = plots->first_series; i < plots->n; i++)
            ok &= rhtml_figure(f, &plots->p[i], svg_dir, "small");
        fputs("</div>\n", f);
    }
    return ok;
}

static void definitions_section(FILE *f) {
    fputs("<h2>Definitions</h2>\n<dl>"
          "<dt>output token</dt><dd>a model token the server generated, counted from the "
          "server's usage (else token ids in the stream, else re-tokenized text); never a word, "
          "byte or SSE event.</dd>"
          "<dt>tokens per second</dt><dd>output tokens whose arrival lies in the window / the "
          "window's length. The same run gives different rates over different windows.</dd>"
          "<dt>TTFT</dt><dd>first streamed output token &minus; request start (the pause before "
          "anything prints).</dd>"
          "<dt>ITL</dt><dd>gap between consecutive output tokens of one stream (the rhythm once "
          "streaming is underway).</dd>"
          "<dt>E2E</dt><dd>last byte of the response &minus; request start.</dd>"
          "<dt>GB/s read, % of bandwidth</dt><dd>the server's weight and KV bytes read by its "
          "steps over the point / the steps' time (tps_weight_bytes_read_total, "
          "tps_kv_bytes_read_total, tps_step_seconds_total), and that over the machine's measured "
          "read bandwidth (tps machine): how close decode is to the memory roofline.</dd>"
          "<dt>tokens per step</dt><dd>the server's prompt (prefill) and generated (decode) "
          "tokens per engine iteration over the point, from /metrics.</dd>"
          "</dl>\n<p class=meta>Written by <code>tps report</code>; docs/metrics.md has the exact "
          "definitions, docs/report.md how this page is made.</p>\n</body></html>\n",
          f);
}

/* Predictions beside measurements, when the set pairs any: the terminal's
 * table, as text. */
static void predicted_section(FILE *f, const rset *s) {
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) return;
    size_t pairs = rset_print_predicted(m, s);
    fclose(m);
    if (pairs && buf) {
        fputs("<h2>Predicted beside measured</h2>\n<pre>", f);
        rhtml_esc(f, buf);
        fputs("</pre>\n", f);
    }
    free(buf);
}

int rset_write_html(const rset *s, const rplot_list *plots, const char *svg_dir,
                    const char *plot_note, const char *path, tps_err *e) {
    file_out out;
    int rc = file_out_open(&out, path, e);
    if (rc) return rc;
    FILE *f = out.f;
    page_head(f, s);
    fputs("<h2>Points</h2>\n<p class=meta>Every rate names its window: <b>[steady]</b> = the "
          "point's steady window (target load reached &rarr; first completion after the last "
          "send, or trimmed by --warmup/--cooldown); <b>[run]</b> = first send &rarr; last byte; "
          "<b>[peak 1 s bin]</b> = the busiest full bin of the run's time series. Latencies are "
          "over completed requests, from the scheduled start.</p>\n",
          f);
    table(f, s);
    predicted_section(f, s);
    const bool missing = !plots_section(f, plots, svg_dir, plot_note);
    definitions_section(f);
    return rhtml_close(&out, missing, svg_dir, e);
}

/* ---- plots + page ------------------------------------------------------------------------ */

int rhtml_render(char *tmpl, const char *svg_dir, bool make_svg_dir, rhtml_plots_fn *plots,
                 rhtml_page_fn *page, void *ctx, const char *html_path, tps_err *e) {
    const char *dir;
    int rc = tmp_dir_pick(&dir, tmpl, svg_dir, make_svg_dir, e);
    if (rc) return rc;
    tps_err pe = {{0}};
    const int prc = plots(ctx, dir, &pe);
    if (html_path) rc = page(ctx, dir, prc ? pe.msg : NULL, html_path, e);
    if (!rc && prc) rc = tps_fail(e, prc, "%s", pe.msg);
    if (!svg_dir) tmp_dir_remove(tmpl);
    return rc;
}

typedef struct rset_render_ctx {
    const rset *s;
    rplot_list *plots;
} rset_render_ctx;

static int rset_plots(void *ctx, const char *dir, tps_err *e) {
    const rset_render_ctx *c = ctx;
    return rset_plot(c->plots, c->s, dir, e);
}

static int rset_page(void *ctx, const char *dir, const char *plot_err, const char *html_path,
                     tps_err *e) {
    const rset_render_ctx *c = ctx;
    return rset_write_html(c->s, plot_err ? NULL : c->plots, dir, plot_err ? plot_err : "",
                           html_path, e);
}

int rset_render(const rset *s, const char *html_path, const char *svg_dir, tps_err *e) {
    rset_render_ctx c = {s, calloc(1, sizeof *c.plots)};
    if (!c.plots) return tps_fail(e, TPS_ENOMEM, "out of memory");
    char tmp[] = "/tmp/tps-report-XXXXXX";
    int rc = rhtml_render(tmp, svg_dir, false, rset_plots, rset_page, &c, html_path, e);
    free(c.plots);
    return rc;
}
