/* A set of bench results side by side (report_set.h): reading sweep
 * documents, bench results and capacity searches, deciding what varies, and
 * the terminal tables with bars. Not here: plots (report_plot.c), HTML (report_html.c). */
#include "bench/report/report_set.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "bench/io/json_file.h"
#include "bench/result/verdict.h" /* VERDICT_MULTI_SHARE: when several tokens an event needs a word */
#include "metrics/roofline.h"     /* roofline_flag: a share of the bandwidth that needs a word */

/* The axis plotted along x: the first of these that varies. */
static const sweep_axis X_ORDER[SWEEP_AXES] = {SWEEP_CONCURRENCY, SWEEP_RATE, SWEEP_INPUT_LEN,
                                               SWEEP_OUTPUT_LEN, SWEEP_MODEL};

void rset_init(rset *s) {
    memset(s, 0, sizeof *s);
    s->xaxis = -1;
}

void rset_free(rset *s) {
    for (size_t i = 0; i < s->n; i++)
        if (s->p[i].has_result) result_free(&s->p[i].r);
    free(s->p);
    for (size_t i = 0; i < s->ncaps; i++)
        capacity_result_free(&s->caps[i].r);
    free(s->caps);
    memset(s, 0, sizeof *s);
}

static const char *base_name(const char *path) {
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

/* model path -> "15M-q8_0" */
static void model_name(char *out, size_t cap, const char *path) {
    snprintf(out, cap, "%s", base_name(path));
    size_t n = strlen(out);
    if (n > 5 && !strcmp(out + n - 5, ".gguf")) out[n - 5] = 0;
}

static rset_point *new_point(rset *s, const char *source, tps_err *e) {
    if (s->n == RSET_MAX_POINTS) {
        tps_fail(e, TPS_ERANGE, "more than %d points", RSET_MAX_POINTS);
        return NULL;
    }
    if (TPS_GROW(s->p, s->cap, s->n + 1, 16)) {
        tps_fail(e, TPS_ENOMEM, "out of memory");
        return NULL;
    }
    rset_point *p = &s->p[s->n];
    memset(p, 0, sizeof *p);
    snprintf(p->source, sizeof p->source, "%s", source);
    return p;
}

/* Axis values from a result's config. */
static void axes_from_config(rset_point *p, const json_t *cfg) {
    json_t *c = json_object_get(cfg, "concurrency");
    if (json_is_integer(c))
        snprintf(p->axis[SWEEP_CONCURRENCY], sizeof p->axis[0], "%lld",
                 (long long)json_integer_value(c));
    json_t *r = json_object_get(cfg, "rate");
    if (json_is_number(r) && json_number_value(r) > 0)
        snprintf(p->axis[SWEEP_RATE], sizeof p->axis[0], "%g", json_number_value(r));
    const char *in = json_string_value(json_object_get(cfg, "input_len"));
    const char *out = json_string_value(json_object_get(cfg, "output_len"));
    const char *model = json_string_value(json_object_get(cfg, "model"));
    if (in) snprintf(p->axis[SWEEP_INPUT_LEN], sizeof p->axis[0], "%s", in);
    if (out) snprintf(p->axis[SWEEP_OUTPUT_LEN], sizeof p->axis[0], "%s", out);
    if (model && !p->axis[SWEEP_MODEL][0])
        snprintf(p->axis[SWEEP_MODEL], sizeof p->axis[0], "%s", model);
}

static int add_result(rset *s, const json_t *res, const char *source, const json_t *sweep_point,
                      tps_err *e) {
    rset_point *p = new_point(s, source, e);
    if (!p) return TPS_ENOMEM;
    if (sweep_point) {
        const char *model = json_string_value(json_object_get(sweep_point, "model"));
        if (model) model_name(p->axis[SWEEP_MODEL], sizeof p->axis[0], model);
        for (int a = SWEEP_CONCURRENCY; a < SWEEP_AXES; a++) { /* as asked, when no result */
            const char *v = json_string_value(json_object_get(sweep_point, sweep_axis_name(a)));
            if (v) snprintf(p->axis[a], sizeof p->axis[0], "%s", v);
        }
        json_t *st = json_object_get(sweep_point, "exit_status");
        p->exit_status = json_is_integer(st) ? (int)json_integer_value(st) : 0;
        json_t *m = json_object_get(sweep_point, "server_metrics");
        if (json_is_object(m)) {
            p->has_server = true;
            sweep_counters_read(&p->srv, m);
        }
    }
    if (json_is_object(res)) {
        int rc = result_from_json(&p->r, res, e);
        if (rc) return rc; /* p is not counted */
        p->has_result = true;
        axes_from_config(p, p->r.config);
    }
    s->n++;
    return TPS_OK;
}

/* A capacity search: kept whole, and each probe's result added as a point. */
static int add_capacity(rset *s, const json_t *doc, const char *source, tps_err *e) {
    if (s->ncaps == RSET_MAX_CAPACITY)
        return tps_fail(e, TPS_ERANGE, "%s: more than %d capacity searches", source,
                        RSET_MAX_CAPACITY);
    rset_capacity *caps = realloc(s->caps, (s->ncaps + 1) * sizeof *caps);
    if (!caps) return tps_fail(e, TPS_ENOMEM, "out of memory");
    s->caps = caps;
    rset_capacity *c = &caps[s->ncaps];
    memset(c, 0, sizeof *c);
    snprintf(c->source, sizeof c->source, "%s", source);
    int rc = capacity_from_json(&c->r, &c->o, doc, e);
    if (rc) {
        char m[sizeof e->msg];
        snprintf(m, sizeof m, "%s", e->msg);
        capacity_result_free(&c->r);
        return tps_fail(e, rc, "%s: %s", source, m);
    }
    s->ncaps++;
    size_t i;
    json_t *pj;
    json_array_foreach(json_object_get(doc, "probes"), i, pj) {
        json_t *res = json_object_get(pj, "result");
        if (!json_is_object(res)) continue;
        rc = add_result(s, res, source, NULL, e);
        if (rc) {
            char m[sizeof e->msg];
            snprintf(m, sizeof m, "%s", e->msg);
            return tps_fail(e, rc, "%s: probe %zu: %s", source, i + 1, m);
        }
    }
    return TPS_OK;
}

int rset_add_json(rset *s, const json_t *doc, const char *source, tps_err *e) {
    const char *schema = json_string_value(json_object_get(doc, "schema"));
    if (schema && !strcmp(schema, BENCH_RESULT_SCHEMA)) return add_result(s, doc, source, NULL, e);
    if (schema && !strcmp(schema, CAPACITY_SCHEMA)) return add_capacity(s, doc, source, e);
    if (!schema || strcmp(schema, SWEEP_SCHEMA))
        return tps_fail(e, TPS_EINVAL,
                        "%s: neither a sweep (%s), a bench result (%s) nor a "
                        "capacity search (%s)",
                        source, SWEEP_SCHEMA, BENCH_RESULT_SCHEMA, CAPACITY_SCHEMA);
    json_t *v = json_object_get(doc, "version");
    if (!json_is_integer(v) || json_integer_value(v) != SWEEP_VERSION)
        return tps_fail(e, TPS_EUNSUP, "%s: sweep version %lld; this tps reads version %d", source,
                        json_is_integer(v) ? (long long)json_integer_value(v) : -1LL,
                        SWEEP_VERSION);
    json_t *points = json_object_get(doc, "points");
    if (!json_is_array(points)) return tps_fail(e, TPS_EINVAL, "%s: no \"points\" array", source);
    size_t i;
    json_t *pt;
    json_array_foreach(points, i, pt) {
        int rc = add_result(s, json_object_get(pt, "result"), source, pt, e);
        if (rc) {
            char m[sizeof e->msg];
            snprintf(m, sizeof m, "%s", e->msg);
            return tps_fail(e, rc, "%s: point %zu: %s", source, i, m);
        }
    }
    return TPS_OK;
}

int rset_add_file(rset *s, const char *path, tps_err *e) {
    json_t *j = json_file_load(path, e);
    if (!j) return TPS_EINVAL;
    int rc = rset_add_json(s, j, path, e);
    json_decref(j);
    if (!rc) {
        size_t n = strlen(s->sources);
        if (n + strlen(path) + 3 < sizeof s->sources)
            snprintf(s->sources + n, sizeof s->sources - n, "%s%s", n ? ", " : "", path);
    }
    return rc;
}

/* ---- what varies -------------------------------------------------------------------------- */

static bool is_number(const char *v, double *out) {
    char *end;
    *out = strtod(v, &end);
    return *v && !*end;
}

/* Which axes differ between points, and the x axis: the first varying one
 * in X_ORDER (-1: none varies). */
static void find_varying(rset *s) {
    for (int a = 0; a < SWEEP_AXES; a++) {
        s->varies[a] = false;
        for (size_t i = 1; i < s->n; i++)
            if (strcmp(s->p[i].axis[a], s->p[0].axis[a])) s->varies[a] = true;
    }
    s->xaxis = -1;
    for (int k = 0; k < SWEEP_AXES && s->xaxis < 0; k++)
        if (s->varies[X_ORDER[k]]) s->xaxis = X_ORDER[k];
    snprintf(s->xname, sizeof s->xname, "%s",
             s->xaxis >= 0 ? sweep_axis_name((sweep_axis)s->xaxis) : "point");
}

/* Each point's label: the values of the varying axes; with none, the one
 * point's load, or the file it came from. */
static void label_points(rset *s) {
    for (size_t i = 0; i < s->n; i++) {
        rset_point *p = &s->p[i];
        size_t n = 0;
        p->label[0] = 0;
        for (int a = 0; a < SWEEP_AXES; a++) {
            if (!s->varies[a] || n >= sizeof p->label) continue;
            n +=
                (size_t)snprintf(p->label + n, sizeof p->label - n, "%s%s=%s", n ? " " : "",
                                 sweep_axis_label((sweep_axis)a), p->axis[a][0] ? p->axis[a] : "-");
        }
        if (!p->label[0]) {
            if (s->n == 1)
                snprintf(p->label, sizeof p->label, "%s=%s", p->axis[SWEEP_RATE][0] ? "rate" : "c",
                         p->axis[SWEEP_RATE][0] ? p->axis[SWEEP_RATE] : p->axis[SWEEP_CONCURRENCY]);
            else
                snprintf(p->label, sizeof p->label, "%.200s #%zu", base_name(p->source), i + 1);
        }
        size_t n2 = strlen(p->label);
        if (rset_point_predicted(p) && n2 + 11 < sizeof p->label)
            snprintf(p->label + n2, sizeof p->label - n2, " predicted");
    }
}

/* The first point (up to j itself) with point j's x value. */
static size_t first_with_x(const rset *s, size_t j) {
    size_t k = 0;
    while (k < j && strcmp(s->p[k].axis[s->xaxis], s->p[j].axis[s->xaxis]))
        k++;
    return k;
}

/* x ranks: numeric order when every value is a number, else first appearance. */
static void rank_x(rset *s) {
    bool numeric = s->xaxis >= 0;
    double dummy;
    for (size_t i = 0; numeric && i < s->n; i++)
        numeric = is_number(s->p[i].axis[s->xaxis], &dummy);
    s->nx = 0;
    for (size_t i = 0; i < s->n; i++) {
        rset_point *p = &s->p[i];
        size_t j = s->xaxis < 0 ? i : first_with_x(s, i);
        p->x = j < i ? s->p[j].x : s->nx++;
    }
    if (!numeric) return;
    for (size_t i = 0; i < s->n; i++) { /* rank = how many distinct values are smaller */
        double v;
        is_number(s->p[i].axis[s->xaxis], &v);
        size_t rank = 0;
        for (size_t j = 0; j < s->n; j++) {
            double w;
            is_number(s->p[j].axis[s->xaxis], &w);
            if (first_with_x(s, j) == j && w < v) rank++; /* each distinct value once */
        }
        s->p[i].x = rank;
    }
}

/* Curves: one per combination of the other varying axes. */
static void group_curves(rset *s) {
    s->ngroups = 0;
    for (size_t i = 0; i < s->n; i++) {
        size_t j = 0;
        for (; j < i; j++) {
            bool same = true;
            for (int a = 0; a < SWEEP_AXES && same; a++)
                if (a != s->xaxis && s->varies[a] && strcmp(s->p[i].axis[a], s->p[j].axis[a]))
                    same = false;
            if (same) break;
        }
        s->p[i].group = j < i ? s->p[j].group : s->ngroups++;
    }
}

void rset_finish(rset *s) {
    find_varying(s);
    label_points(s);
    rank_x(s);
    group_curves(s);
}

const char *rset_x_label(const rset *s, size_t k) {
    for (size_t i = 0; i < s->n; i++)
        if (s->p[i].x == k) return s->xaxis >= 0 ? s->p[i].axis[s->xaxis] : s->p[i].label;
    return "?";
}

void rset_group_label(const rset *s, size_t g, char *out, size_t cap) {
    out[0] = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->p[i].group != g) continue;
        size_t n = 0;
        for (int a = 0; a < SWEEP_AXES && n < cap; a++)
            if (a != s->xaxis && s->varies[a])
                n += (size_t)snprintf(out + n, cap - n, "%s%s=%s", n ? " " : "",
                                      sweep_axis_label((sweep_axis)a), s->p[i].axis[a]);
        break;
    }
    if (!out[0]) snprintf(out, cap, "all");
}

double rset_point_gbs(const rset_point *p) {
    if (!p->has_server || p->srv.step_seconds <= 0 || p->srv.weight_bytes <= 0) return -1;
    return (p->srv.weight_bytes + p->srv.kv_bytes) / p->srv.step_seconds / 1e9;
}

double rset_point_bw_fraction(const rset_point *p) {
    double g = rset_point_gbs(p);
    double limit = p->limit_bps > 0 ? p->limit_bps : p->srv.machine_read_bps;
    if (g < 0 || limit <= 0) return -1;
    return g * 1e9 / limit;
}

double rset_point_cached_pct(const rset_point *p) {
    const result_cached *c = &p->r.cached;
    return p->has_result && c->requests && c->prompt ? 100.0 * (double)c->tokens / (double)c->prompt
                                                     : -1;
}

const char *rset_point_bw_flag(const rset_point *p) {
    double frac = rset_point_bw_fraction(p);
    if (frac < 0) return NULL;
    machine_limits m = {.busy = p->limit_bps > 0 ? p->limit_busy : p->srv.machine_busy > 0};
    const char *why = roofline_flag(frac, &m, true);
    return why ? why : p->limit_note[0] ? p->limit_note : NULL;
}

double rset_point_mb_per_token(const rset_point *p) {
    if (!p->has_server || p->srv.weight_bytes <= 0 || p->srv.generation_tokens <= 0) return -1;
    return (p->srv.weight_bytes + p->srv.kv_bytes) / p->srv.generation_tokens / 1e6;
}

bool rset_point_step_tokens(const rset_point *p, double *prefill, double *decode) {
    if (!p->has_server || p->srv.steps <= 0) return false;
    *prefill = p->srv.prompt_tokens / p->srv.steps;
    *decode = p->srv.generation_tokens / p->srv.steps;
    return true;
}

const rset_ms_col rset_ms_cols[RSET_MS_COLS] = {
    {RH_TTFT, 50, false},       {RH_TTFT, 99, false}, {RH_ITL, 50, false}, {RH_ITL, 99, false},
    {RH_ARRIVAL_GAP, 50, true}, {RH_E2E, 50, false},  {RH_E2E, 99, false},
};

const char *rset_cell(char *buf, size_t cap, const char *fmt, double v, double *shown) {
    if (!isfinite(v)) {
        snprintf(buf, cap, "-");
        if (shown) *shown = NAN;
        return buf;
    }
    snprintf(buf, cap, fmt, v);
    if (shown) *shown = strtod(buf, NULL);
    return buf;
}

/* ---- terminal ----------------------------------------------------------------------------- */

static void ms_cell(FILE *f, const hist *h, double p) {
    if (hist_count(h) == 0)
        fprintf(f, " %8s", "-");
    else
        fprintf(f, " %8.1f", hist_percentile(h, p) / 1e6);
}

/* Each capacity search: what it searched under, the probes, the answer. */
static void print_capacity(FILE *f, const rset *s) {
    for (size_t i = 0; i < s->ncaps; i++) {
        const rset_capacity *c = &s->caps[i];
        fprintf(f, "\ncapacity search (%s): goodput target %.0f%% of requests within", c->source,
                100 * c->o.goodput_target);
        if (c->o.slo.ttft_ns) fprintf(f, " TTFT %.0f ms", c->o.slo.ttft_ns / 1e6);
        if (c->o.slo.tpot_ns) fprintf(f, " ITL %.0f ms", c->o.slo.tpot_ns / 1e6);
        if (c->o.slo.e2e_ns) fprintf(f, " E2E %.0f ms", c->o.slo.e2e_ns / 1e6);
        fprintf(f, "%s\n", c->o.check_p99 ? " (and each probe's p99 within them)" : "");
        capacity_print(f, &c->r);
    }
}

static void print_bars(FILE *f, const rset *s, double top);
static void print_ttfo(FILE *f, const rset *s);

/* One point's row of the terminal table (after its label). */
static void print_row(FILE *f, const rset_point *p) {
    const bench_result *r = &p->r;
    char req[32];
    snprintf(req, sizeof req, "%llu/%llu", (unsigned long long)r->completed,
             (unsigned long long)r->failed);
    fprintf(f, " %9s", req);
    if (r->steady.valid)
        fprintf(f, " %9.1f", r->steady.tps.output_tps);
    else
        fprintf(f, " %9s", "-");
    fprintf(f, " %9.1f", r->run.tps.output_tps);
    if (r->steady.valid)
        fprintf(f, " %7.1f", r->steady.tps.seconds);
    else
        fprintf(f, " %7s", "-");
    fprintf(f, " %9.1f", r->peak_tps);
    for (size_t k = 0; k < RSET_MS_COLS; k++)
        if (!rset_ms_cols[k].page_only) ms_cell(f, r->h[rset_ms_cols[k].h], rset_ms_cols[k].pct);
    double prefill, decode;
    if (rset_point_step_tokens(p, &prefill, &decode))
        fprintf(f, " %7.1f+%-7.1f", prefill, decode);
    else
        fprintf(f, " %15s", "-");
    double cached = rset_point_cached_pct(p);
    if (cached >= 0)
        fprintf(f, " %7.1f\n", cached);
    else
        fprintf(f, " %7s\n", "-");
}

/* What a row cannot say: no steady window, or tokens that arrived together. */
static void print_row_notes(FILE *f, const rset *s) {
    for (size_t i = 0; i < s->n; i++)
        if (s->p[i].has_result && !s->p[i].r.steady.valid)
            fprintf(f, "  %s: no steady window (%s); its bar below uses the run window\n",
                    s->p[i].label, s->p[i].r.steady.why);
    for (size_t i = 0; i < s->n; i++) {
        const bench_result *r = &s->p[i].r;
        if (!s->p[i].has_result || result_multi_arrival_share(r) < VERDICT_MULTI_SHARE) continue;
        fprintf(f,
                "  %s: %.1f%% of token arrivals brought several tokens, so ITL p50 counts zero "
                "gaps; the gap per arrival was %.2f ms at p50\n",
                s->p[i].label, 100 * result_multi_arrival_share(r),
                hist_percentile(r->h[RH_ARRIVAL_GAP], 50) / 1e6);
    }
}

void rset_print(FILE *f, const rset *s) {
    if (s->n == 0) { /* capacity searches whose probes kept no result */
        print_capacity(f, s);
        return;
    }
    fprintf(f, "tps report: %zu point%s", s->n, s->n == 1 ? "" : "s");
    if (s->xaxis >= 0) {
        fprintf(f, "; varying:");
        for (int a = 0; a < SWEEP_AXES; a++)
            if (s->varies[a]) fprintf(f, " %s", sweep_axis_name((sweep_axis)a));
    }
    if (s->sources[0]) fprintf(f, "; from %s", s->sources);
    fprintf(f, "\n");
    fprintf(f,
            "windows: [steady] = each point's steady window (target load reached -> first\n"
            "completion after the last send, or --warmup/--cooldown trimmed); [run] = first send\n"
            "-> last byte; [peak 1s] = the busiest full bin of the run's time series. Latencies\n"
            "in ms over completed requests, from the scheduled start. tok/step: the server's\n"
            "prompt and generated tokens per engine step over the point (/metrics deltas).\n"
            "input cached%%: prompt tokens the server's prefix cache served (its usage).\n\n");
    fprintf(f, "%-22s %9s %9s %9s %7s %9s %8s %8s %8s %8s %8s %8s %15s %7s\n", "", "requests",
            "out tok/s", "out tok/s", "steady", "out tok/s", "TTFT", "TTFT", "ITL", "ITL", "E2E",
            "E2E", "tok/step", "input");
    fprintf(f, "%-22s %9s %9s %9s %7s %9s %8s %8s %8s %8s %8s %8s %15s %7s\n", "point", "ok/failed",
            "[steady]", "[run]", "s", "[peak 1s]", "p50", "p99", "p50", "p99", "p50", "p99",
            "prefill+decode", "cached%");
    double top = 0;
    for (size_t i = 0; i < s->n; i++) {
        const rset_point *p = &s->p[i];
        fprintf(f, "%-22.22s", p->label);
        if (!p->has_result) {
            fprintf(f, " (no result: bench exit status %d)\n", p->exit_status);
            continue;
        }
        print_row(f, p);
        double t = p->r.steady.valid ? p->r.steady.tps.output_tps : p->r.run.tps.output_tps;
        if (t > top) top = t;
    }
    print_row_notes(f, s);
    print_ttfo(f, s);
    if (top > 0) print_bars(f, s, top);
    rset_print_predicted(f, s);
    print_capacity(f, s);
}

bool rset_has_thinking(const rset *s) {
    for (size_t i = 0; i < s->n; i++)
        if (s->p[i].has_result && s->p[i].r.reasoning_tokens > 0) return true;
    return false;
}

double rset_thinking_share(const bench_result *r) {
    return r->output_tokens ? (double)r->reasoning_tokens / (double)r->output_tokens : 0.0;
}

/* The terminal's TTFO lines (the page's: report_html.c). */
static void print_ttfo(FILE *f, const rset *s) {
    if (!rset_has_thinking(s)) return;
    fprintf(f, "\nTTFO, the first answer token after the thinking (ms, p50 / p99):\n");
    for (size_t i = 0; i < s->n; i++) {
        const rset_point *p = &s->p[i];
        if (!p->has_result) continue;
        const hist *h = p->r.h[RH_TTFO];
        fprintf(f, "  %-22.22s %9.1f / %.1f, thinking %.0f%% of the output\n", p->label,
                hist_percentile(h, 50) / 1e6, hist_percentile(h, 99) / 1e6,
                100 * rset_thinking_share(&p->r));
    }
}

static void print_bars(FILE *f, const rset *s, double top) {
    const int width = 48;
    fprintf(f, "\noutput tok/s, steady window of each point (# = %.1f tok/s)\n", top / width);
    for (size_t i = 0; i < s->n; i++) {
        const rset_point *p = &s->p[i];
        if (!p->has_result) continue;
        double t = p->r.steady.valid ? p->r.steady.tps.output_tps : p->r.run.tps.output_tps;
        int k = (int)lround(t / top * width);
        fprintf(f, "  %-22.22s |", p->label);
        for (int j = 0; j < width; j++)
            fputc(j < k ? '#' : ' ', f);
        fprintf(f, " %.1f\n", t);
    }
}
