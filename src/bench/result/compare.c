/* Two results side by side with the noise of each figure (compare.h).
 * Not here: reading files, printing anything but the comparison. */
#include "bench/result/compare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/workload/load.h"

/* ---- the figures ------------------------------------------------------------------------ */

typedef enum fig_kind { FIG_OUT_TPS, FIG_REQ_RATE, FIG_PCT, FIG_REASONING } fig_kind;

typedef struct figure {
    const char *name;
    fig_kind kind;
    result_hist_id h; /* FIG_PCT */
    double p;         /* FIG_PCT */
} figure;

static const figure FIGS[] = {
    {"output t/s", FIG_OUT_TPS, 0, 0},       {"requests/s", FIG_REQ_RATE, 0, 0},
    {"TTFT p50 ms", FIG_PCT, RH_TTFT, 50},   {"TTFT p99 ms", FIG_PCT, RH_TTFT, 99},
    {"TTFO p50 ms", FIG_PCT, RH_TTFO, 50},   {"TTFO p99 ms", FIG_PCT, RH_TTFO, 99},
    {"ITL p50 ms", FIG_PCT, RH_ITL, 50},     {"ITL p99 ms", FIG_PCT, RH_ITL, 99},
    {"TPOT p50 ms", FIG_PCT, RH_TPOT, 50},   {"TPOT p99 ms", FIG_PCT, RH_TPOT, 99},
    {"E2E p50 ms", FIG_PCT, RH_E2E, 50},     {"E2E p99 ms", FIG_PCT, RH_E2E, 99},
    {"thinking share", FIG_REASONING, 0, 0},
};
#define N_FIGS (sizeof FIGS / sizeof FIGS[0])

/* The window both rates are read from: steady when both have one, else run. */
static const result_window *rate_window(const bench_result *r, bool steady) {
    return steady ? &r->steady : &r->run;
}

static double reported(const figure *f, const bench_result *r, bool steady) {
    switch (f->kind) {
    case FIG_OUT_TPS:
        return rate_window(r, steady)->tps.output_tps;
    case FIG_REQ_RATE:
        return rate_window(r, steady)->tps.request_rate;
    case FIG_PCT:
        return (double)hist_percentile(r->h[f->h], f->p) / 1e6;
    case FIG_REASONING: /* of the output tokens, thinking */
        return r->output_tokens ? (double)r->reasoning_tokens / (double)r->output_tokens : 0;
    }
    return 0;
}

/* ---- histogram bounds ------------------------------------------------------------------- */

/* One result's 95% interval of a figure by the histogram-bounds method;
 * false when it cannot be formed. */
static bool hist_interval(const figure *f, const bench_result *r, bool steady, double *lo,
                          double *hi) {
    const double v = reported(f, r, steady);
    if (f->kind == FIG_REASONING) return false;
    if (f->kind == FIG_REQ_RATE) {
        uint64_t c = rate_window(r, steady)->tps.completed;
        if (!c) return false;
        double rel = 1.96 / sqrt((double)c);
        *lo = v * (1 - rel), *hi = v * (1 + rel);
        return true;
    }
    if (f->kind == FIG_OUT_TPS) { /* the per-bin series' standard error (full bins) */
        size_t k = r->nbins > 1 ? r->nbins - 1 : 0;
        if (k < 3) return false;
        double m = 0, s = 0;
        for (size_t i = 0; i < k; i++)
            m += (double)r->series_out[i];
        m /= (double)k;
        for (size_t i = 0; i < k; i++)
            s += ((double)r->series_out[i] - m) * ((double)r->series_out[i] - m);
        if (!(m > 0)) return false;
        double rel = 1.96 * sqrt(s / (double)(k - 1)) / sqrt((double)k) / m;
        *lo = v * (1 - rel), *hi = v * (1 + rel);
        return true;
    }
    const hist *h = r->h[f->h];
    const double n = (double)hist_count(h), q = f->p / 100;
    if (n < 1) return false;
    const double half = 1.96 * sqrt(n * q * (1 - q));
    const double err = hist_error_bound(h);
    *lo = (double)hist_percentile(h, 100 * fmax(0, n * q - half) / n) / 1e6 * (1 - err);
    *hi = (double)hist_percentile(h, 100 * fmin(n, n * q + half + 1) / n) / 1e6 * (1 + err);
    return true;
}

/* ---- bootstrap over per-request records -------------------------------------------------- */

typedef struct sample {
    size_t n;            /* completed, non-warm-up requests */
    double *v[RH_COUNT]; /* per request: TTFT, TPOT, E2E in ms (NAN: undefined) */
    size_t *itl_off;     /* (n + 1,) each request's gaps in itl[] */
    double *itl;         /* every gap, ms */
} sample;

static void sample_free(sample *s) {
    for (int i = 0; i < RH_COUNT; i++)
        free(s->v[i]);
    free(s->itl_off);
    free(s->itl);
    memset(s, 0, sizeof *s);
}

static double jnum(const json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* The records of a result's per_request array. */
static int sample_load(sample *s, const bench_result *r, tps_err *e) {
    memset(s, 0, sizeof *s);
    const size_t m = json_array_size(r->per_request);
    size_t gaps = 0;
    for (size_t i = 0; i < m; i++)
        gaps += (size_t)fmax(0, jnum(json_array_get(r->per_request, i), "output_tokens"));
    static const result_hist_id H[] = {RH_TTFT, RH_TPOT, RH_E2E, RH_TTFO};
    for (size_t k = 0; k < 4; k++)
        s->v[H[k]] = malloc((m ? m : 1) * sizeof(double));
    s->itl_off = malloc((m + 1) * sizeof(size_t));
    s->itl = malloc((gaps ? gaps : 1) * sizeof(double));
    if (!s->v[RH_TTFT] || !s->v[RH_TPOT] || !s->v[RH_E2E] || !s->v[RH_TTFO] || !s->itl_off ||
        !s->itl)
        return sample_free(s), tps_fail(e, TPS_ENOMEM, "out of memory");
    size_t g = 0;
    for (size_t i = 0; i < m; i++) {
        const json_t *o = json_array_get(r->per_request, i);
        const json_t *ev = json_object_get(o, "events");
        const char *st = json_string_value(json_object_get(o, "status"));
        if (!st || strcmp(st, "ok") || json_is_true(json_object_get(o, "warmup")) ||
            !json_array_size(ev))
            continue;
        const double sched = jnum(o, "sched_ns"), end = jnum(o, "end_ns"),
                     out = jnum(o, "output_tokens");
        const json_t *e0 = json_array_get(ev, 0);
        const double t0 = json_number_value(json_array_get(e0, 0));
        size_t k = s->n++;
        s->v[RH_TTFT][k] = (t0 - sched) / 1e6;
        s->v[RH_E2E][k] = (end - sched) / 1e6;
        s->v[RH_TPOT][k] = out >= 2 ? (end - t0) / (out - 1) / 1e6 : NAN;
        s->v[RH_TTFO][k] = (jnum(o, "answer_ns") - sched) / 1e6; /* NAN without an answer */
        s->itl_off[k] = g;
        double prev = t0;
        for (size_t x = 0; x < json_array_size(ev); x++) {
            const json_t *p = json_array_get(ev, x);
            const double t = json_number_value(json_array_get(p, 0));
            const double tok = json_number_value(json_array_get(p, 1));
            if (x && g < gaps) s->itl[g++] = (t - prev) / 1e6;
            for (double z = 1; z < tok && g < gaps; z++)
                s->itl[g++] = 0;
            prev = t;
        }
    }
    s->itl_off[s->n] = g;
    return TPS_OK;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of v[0..n) (sorted here). */
static double pct(double *v, size_t n, double p) {
    if (!n) return NAN;
    qsort(v, n, sizeof *v, cmp_d);
    size_t r = (size_t)ceil(p / 100 * (double)n);
    return v[(r < 1 ? 1 : r) - 1];
}

/* One resample's figure f; idx (s->n,) picks the requests; scratch is big enough. */
static double resampled(const figure *f, const sample *s, const size_t *idx, double *scratch) {
    size_t m = 0;
    if (f->h == RH_ITL) {
        for (size_t i = 0; i < s->n; i++)
            for (size_t g = s->itl_off[idx[i]]; g < s->itl_off[idx[i] + 1]; g++)
                scratch[m++] = s->itl[g];
    } else {
        for (size_t i = 0; i < s->n; i++)
            if (!isnan(s->v[f->h][idx[i]])) scratch[m++] = s->v[f->h][idx[i]];
    }
    return pct(scratch, m, f->p);
}

/* The 95% interval of B/A for figure f by resampling both results. */
static bool boot_interval(const figure *f, const sample *sa, const sample *sb, double *lo,
                          double *hi, tps_err *e) {
    if (!sa->n || !sb->n) return false;
    size_t cap = sa->n > sb->n ? sa->n : sb->n;
    size_t gmax = sa->itl_off[sa->n] > sb->itl_off[sb->n] ? sa->itl_off[sa->n] : sb->itl_off[sb->n];
    /* a resample of requests can hold up to every gap of the largest requests n times over */
    size_t big = 0;
    for (int k = 0; k < 2; k++) {
        const sample *s = k ? sb : sa;
        for (size_t i = 0; i < s->n; i++)
            if (s->itl_off[i + 1] - s->itl_off[i] > big) big = s->itl_off[i + 1] - s->itl_off[i];
    }
    size_t scap = f->kind == FIG_PCT && f->h == RH_ITL ? cap * big : cap;
    if (scap < gmax) scap = gmax;
    size_t *idx = malloc(cap * sizeof *idx);
    double *scratch = malloc((scap ? scap : 1) * sizeof *scratch);
    double *ratios = malloc(COMPARE_RESAMPLES * sizeof *ratios);
    if (!idx || !scratch || !ratios) {
        free(idx), free(scratch), free(ratios);
        tps_fail(e, TPS_ENOMEM, "out of memory");
        return false;
    }
    tps_rng rng;
    tps_rng_seed(&rng, 0x7470735f636d70ULL); /* fixed: the same files give the same answer */
    size_t nr = 0;
    for (int b = 0; b < COMPARE_RESAMPLES; b++) {
        double v[2];
        for (int k = 0; k < 2; k++) {
            const sample *s = k ? sb : sa;
            for (size_t i = 0; i < s->n; i++)
                idx[i] = (size_t)load_rng_below(&rng, s->n);
            v[k] = resampled(f, s, idx, scratch);
        }
        if (v[0] > 0 && !isnan(v[1])) ratios[nr++] = v[1] / v[0];
    }
    bool ok = nr >= COMPARE_RESAMPLES / 2;
    if (ok) {
        qsort(ratios, nr, sizeof *ratios, cmp_d);
        *lo = ratios[(size_t)(0.025 * (double)(nr - 1))];
        *hi = ratios[(size_t)ceil(0.975 * (double)(nr - 1))];
    }
    free(idx), free(scratch), free(ratios);
    return ok;
}

/* A token rate's 95% interval from the per-request records: the window cut
 * into COMPARE_RATE_BINS bins, the tokens of each counted at their events'
 * arrivals, and the measured rate -+ 1.96 standard errors of the bins'
 * mean. Resampling requests cannot show this noise: with equal lengths
 * every resample holds the same tokens. */
#define COMPARE_RATE_BINS 20
static bool events_rate_interval(const bench_result *r, const result_window *w, double v,
                                 double *lo, double *hi) {
    const double t0 = (double)w->tps.w.t0, t1 = (double)w->tps.w.t1;
    if (!(t1 > t0) || !(v > 0)) return false;
    double bins[COMPARE_RATE_BINS] = {0};
    size_t i;
    const json_t *o;
    json_array_foreach(r->per_request, i, o) {
        size_t k;
        const json_t *ev;
        json_array_foreach(json_object_get(o, "events"), k, ev) {
            double t = json_number_value(json_array_get(ev, 0));
            if (t <= t0 || t > t1) continue;
            size_t b = (size_t)((t - t0) / (t1 - t0) * COMPARE_RATE_BINS);
            bins[b < COMPARE_RATE_BINS ? b : COMPARE_RATE_BINS - 1] +=
                json_number_value(json_array_get(ev, 1));
        }
    }
    double m = 0, ss = 0;
    for (int b = 0; b < COMPARE_RATE_BINS; b++)
        m += bins[b];
    m /= COMPARE_RATE_BINS;
    for (int b = 0; b < COMPARE_RATE_BINS; b++)
        ss += (bins[b] - m) * (bins[b] - m);
    if (!(m > 0)) return false;
    double rel = 1.96 * sqrt(ss / (COMPARE_RATE_BINS - 1)) / sqrt(COMPARE_RATE_BINS) / m;
    *lo = v * (1 - rel), *hi = v * (1 + rel);
    return true;
}

/* ---- the comparison ----------------------------------------------------------------------- */

int compare_results(compare_out *out, const bench_result *a, const bench_result *b, tps_err *e) {
    memset(out, 0, sizeof *out);
    const bool boot = a->per_request && b->per_request;
    out->method = boot ? COMPARE_BOOTSTRAP : COMPARE_HIST_BOUNDS;
    const bool steady = a->steady.valid && b->steady.valid;
    out->host_a = a->host;
    out->host_b = b->host;
    sample sa = {0}, sb = {0};
    if (boot) {
        int rc = sample_load(&sa, a, e);
        if (!rc) rc = sample_load(&sb, b, e);
        if (rc) {
            sample_free(&sa);
            return rc;
        }
    }
    for (size_t i = 0; i < N_FIGS; i++) {
        const figure *f = &FIGS[i];
        /* a figure neither run has (no thinking, no stream) is no row */
        if (f->kind == FIG_PCT && !hist_count(a->h[f->h]) && !hist_count(b->h[f->h])) continue;
        if (f->h == RH_TTFO && !a->reasoning_tokens && !b->reasoning_tokens) continue;
        if (f->kind == FIG_REASONING && !a->reasoning_tokens && !b->reasoning_tokens) continue;
        compare_row *row = &out->rows[out->n++];
        snprintf(row->name, sizeof row->name, "%s%s",
                 f->kind == FIG_PCT ? ""
                 : steady           ? "steady "
                                    : "run ",
                 f->name);
        row->higher_better = f->kind != FIG_PCT && f->kind != FIG_REASONING;
        row->a = reported(f, a, steady);
        row->b = reported(f, b, steady);
        row->ratio = row->a > 0 ? row->b / row->a : 0;
        if (boot && f->kind == FIG_PCT) {
            row->known = boot_interval(f, &sa, &sb, &row->lo, &row->hi, e);
        } else if (boot && f->kind == FIG_OUT_TPS) {
            double la, ha, lb, hb;
            row->known = events_rate_interval(a, rate_window(a, steady), row->a, &la, &ha) &&
                         events_rate_interval(b, rate_window(b, steady), row->b, &lb, &hb) &&
                         ha > 0 && la > 0;
            if (row->known) row->lo = lb / ha, row->hi = hb / la;
        } else {
            double la, ha, lb, hb;
            row->known = hist_interval(f, a, steady, &la, &ha) &&
                         hist_interval(f, b, steady, &lb, &hb) && ha > 0 && la > 0;
            if (row->known) row->lo = lb / ha, row->hi = hb / la;
        }
        row->exceeds_noise = row->known && (row->lo > 1 || row->hi < 1);
    }
    sample_free(&sa);
    sample_free(&sb);
    return TPS_OK;
}

const char *compare_method_name(compare_method m) {
    return m == COMPARE_BOOTSTRAP ? "bootstrap over per-request records"
                                  : "histogram bounds (no per-request records in both results)";
}

static const char *judgement(const compare_row *r) {
    if (!r->known) return "noise unknown";
    if (!r->exceeds_noise) return "within noise";
    const bool up = r->ratio > 1;
    return up == r->higher_better ? "better" : "worse";
}

bool compare_steal_differs(const compare_out *c) {
    return c->host_a.known && c->host_b.known &&
           fabs(c->host_a.steal - c->host_b.steal) >= COMPARE_STEAL_DIFF;
}

/* "12.5%", or "unknown" */
static void steal_text(char *out, size_t cap, const cpu_contention *h) {
    if (h->known)
        snprintf(out, cap, "%.1f%%", 100 * h->steal);
    else
        snprintf(out, cap, "unknown");
}

void compare_print(FILE *f, const compare_out *c, const char *name_a, const char *name_b) {
    fprintf(f, "tps bench compare  A: %s  B: %s\n", name_a, name_b);
    fprintf(f, "  noise: %s, 95%% interval of B/A%s\n\n", compare_method_name(c->method),
            c->method == COMPARE_BOOTSTRAP
                ? " (1000 resamples; output t/s: 20 bins of its window; requests/s: Poisson)"
                : "");
    fprintf(f, "  %-22s %12s %12s %8s %21s  %s\n", "figure", "A", "B", "B/A", "95% interval of B/A",
            "difference");
    for (size_t i = 0; i < c->n; i++) {
        const compare_row *r = &c->rows[i];
        char iv[32] = "-";
        if (r->known) snprintf(iv, sizeof iv, "%.3f-%.3f", r->lo, r->hi);
        fprintf(f, "  %-22s %12.3f %12.3f %8.3f %21s  %s\n", r->name, r->a, r->b, r->ratio, iv,
                judgement(r));
    }
    char sa[16], sb[16];
    steal_text(sa, sizeof sa, &c->host_a);
    steal_text(sb, sizeof sb, &c->host_b);
    fprintf(f, "\n  the hypervisor stole %s of A's machine's CPU time, %s of B's%s\n", sa, sb,
            compare_steal_differs(c) ? ": the machines differed, and a difference above may be "
                                       "theirs, not the server's"
                                     : "");
}

json_t *compare_json(const compare_out *c, const char *name_a, const char *name_b) {
    json_t *rows = json_array();
    for (size_t i = 0; i < c->n; i++) {
        const compare_row *r = &c->rows[i];
        json_array_append_new(rows,
                              json_pack("{s:s, s:f, s:f, s:f, s:o, s:o, s:b, s:s}", "figure",
                                        r->name, "a", r->a, "b", r->b, "ratio", r->ratio, "lo",
                                        r->known ? json_real(r->lo) : json_null(), "hi",
                                        r->known ? json_real(r->hi) : json_null(), "exceeds_noise",
                                        r->exceeds_noise, "judgement", judgement(r)));
    }
    return json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:b}", "schema", "tps.bench.compare", "a",
                     name_a, "b", name_b, "noise", compare_method_name(c->method), "figures", rows,
                     "steal_a", c->host_a.known ? json_real(c->host_a.steal) : json_null(),
                     "steal_b", c->host_b.known ? json_real(c->host_b.steal) : json_null(),
                     "machines_differ", compare_steal_differs(c));
}
