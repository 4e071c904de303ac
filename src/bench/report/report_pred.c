/* Predicted beside measured (report_set.h): each point tps plan predicted
 * (its result's config says "predicted": true) beside the point measured
 * under the same load, when the set holds one: output tok/s over the
 * steady window, TTFT and ITL at p50 and p99, and the prediction's error.
 * "The same load" is the configuration the bench echoes, less what names
 * the endpoint (url, model), the seed (each run draws its own unless
 * --seed is given: a prediction is of the load, not of its prompts) and
 * the plan's own fields. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "bench/report/report_set.h"

/* The load's fields a prediction and a measurement must share. */
static const char *const LOAD_KEYS[] = {
    "endpoint",    "concurrency", "rate",          "arrival",      "burstiness", "requests",
    "duration_s",  "input_len",   "output_len",    "dataset",      "prefix_len", "prefixes",
    "prefix_dist", "turns",       "conversations", "think_time_s", NULL,
};

bool rset_point_predicted(const rset_point *p) {
    return p->has_result && json_is_true(json_object_get(p->r.config, "predicted"));
}

static bool same_load(const rset_point *a, const rset_point *b) {
    for (const char *const *k = LOAD_KEYS; *k; k++) {
        json_t *x = json_object_get(a->r.config, *k), *y = json_object_get(b->r.config, *k);
        if (!x != !y || (x && !json_equal(x, y))) return false;
    }
    return true;
}

/* The measured point of p's load: the first one not predicted. */
static const rset_point *measured_for(const rset *s, const rset_point *p) {
    for (size_t i = 0; i < s->n; i++) {
        const rset_point *q = &s->p[i];
        if (q->has_result && !rset_point_predicted(q) && same_load(p, q)) return q;
    }
    return NULL;
}

static double steady_tps(const bench_result *r) {
    return r->steady.valid ? r->steady.tps.output_tps : r->run.tps.output_tps;
}

static double ms(const bench_result *r, result_hist_id h, double q) {
    return hist_count(r->h[h]) ? hist_percentile(r->h[h], q) / 1e6 : NAN;
}

/* The five figures of a pair: predicted, measured. */
static void figures(double pred[5], double meas[5], const bench_result *p, const bench_result *m) {
    const bench_result *rs[2] = {p, m};
    double *out[2] = {pred, meas};
    for (int i = 0; i < 2; i++) {
        out[i][0] = steady_tps(rs[i]);
        out[i][1] = ms(rs[i], RH_TTFT, 50);
        out[i][2] = ms(rs[i], RH_ITL, 50);
        out[i][3] = ms(rs[i], RH_TTFT, 99);
        out[i][4] = ms(rs[i], RH_ITL, 99);
    }
}

/* A figure's pair and the error; a measurement of about 0 (ITL p50 when
 * the client read several steps' tokens at once) has no relative error. */
static void cell(FILE *f, double pred, double meas) {
    double err = 100 * (pred - meas) / meas;
    if (isnan(pred) || isnan(meas))
        fprintf(f, " %8s %8s %6s", "-", "-", "-");
    else if (!(meas >= 0.05) || fabs(err) > 999)
        fprintf(f, " %8.1f %8.1f %6s", pred, meas, "-");
    else
        fprintf(f, " %8.1f %8.1f %+5.0f%%", pred, meas, err);
}

size_t rset_print_predicted(FILE *f, const rset *s) {
    size_t pairs = 0;
    for (size_t i = 0; i < s->n; i++) {
        const rset_point *p = &s->p[i];
        const rset_point *m = rset_point_predicted(p) ? measured_for(s, p) : NULL;
        if (!m) continue;
        if (!pairs++) {
            fprintf(f, "\npredicted (tps plan) beside measured (tps bench), the same load; error = "
                       "predicted / measured - 1\n");
            fprintf(f, "%-22s %24s %24s %24s %24s %24s\n", "", "out tok/s [steady]", "TTFT p50 ms",
                    "ITL p50 ms", "TTFT p99 ms", "ITL p99 ms");
            fprintf(f, "%-22s", "point");
            for (int k = 0; k < 5; k++)
                fprintf(f, " %8s %8s %6s", "pred", "meas", "error");
            fputc('\n', f);
        }
        double pred[5], meas[5];
        figures(pred, meas, &p->r, &m->r);
        fprintf(f, "%-22.22s", m->label);
        for (int k = 0; k < 5; k++)
            cell(f, pred[k], meas[k]);
        fputc('\n', f);
    }
    return pairs;
}
