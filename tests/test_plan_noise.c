/* tps plan's served steps' spread: the step-noise fit keeps the quantiles
 * of what the step fit leaves, a served spread lengthens the predicted
 * tail and not the median, and calibrating against a real tps serve keeps
 * the spread of its steps. Split from test_plan.c (the simulation). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/experiment/bench_spec.h"
#include "engine/cost/step_fit.h"
#include "plan/plan.h"
#include "plan/plan_calib.h"
#include "support/bench_workload.h"
#include "support/plan_env.h"
#include "support/server_fixture.h"
#include "support/test_support.h"

/* ---- the served steps' spread ---------------------------------------------------- */

Test(plan, step_noise_keeps_the_quantiles_of_what_the_fit_leaves) {
    enum { N = 1000 };
    double took[N], fit[N];
    for (int i = 0; i < N; i++) { /* ratios 1.000, 1.001, ..., 1.999, shuffled against the fit */
        fit[i] = 1e6 + 1e3 * ((i * 7) % 13);
        took[i] = fit[i] * (1 + 1e-3 * ((i * 389) % N));
    }
    step_noise z;
    tps_err e = {{0}};
    cr_assert_eq(step_noise_fit(&z, took, fit, N, &e), 0, "%s", e.msg);
    cr_expect_eq(z.n, N);
    for (int k = 0; k < STEP_NOISE_Q; k++) {
        double want = 1 + step_noise_p(k) * (N - 1) * 1e-3;
        cr_expect(fabs(z.q[k] - want) < 1e-9, "p%g: x%.4f, want x%.4f", step_noise_p(k), z.q[k],
                  want);
        cr_expect_float_eq(step_noise_at(&z, step_noise_p(k)), z.q[k], 1e-6);
    }
    cr_expect_float_eq(step_noise_at(&z, 0.0), z.q[0], 1e-6, "the ends are held");
    cr_expect_float_eq(step_noise_at(&z, 0.99999), z.q[STEP_NOISE_Q - 1], 1e-6);
    cr_expect(fabs(step_noise_at(&z, 0.25) - (1 + 0.25 * (N - 1) * 1e-3)) < 1e-9, "interpolated");
    z.n = 0;
    cr_expect_float_eq(step_noise_at(&z, 0.5), 1.0, 1e-12, "none measured: the fit as it is");
    cr_expect_eq(step_noise_fit(&z, took, fit, 15, &e), TPS_EINVAL, "too few steps");
    double rows[N];
    for (int i = 0; i < N; i++)
        rows[i] = i < 500 ? 1 : 8;
    step_noise one, rest;
    cr_assert_eq(step_noise_fit_split(&one, &rest, rows, took, fit, N, &e), 0, "%s", e.msg);
    cr_expect(one.n == 500 && rest.n == 500, "split %llu / %llu", (unsigned long long)one.n,
              (unsigned long long)rest.n);
    rows[0] = 8; /* 499 one-row steps against 501 */
    for (int i = 1; i < N; i++)
        rows[i] = i < 990 ? 8 : 1; /* ... and now only 10: all in one */
    cr_assert_eq(step_noise_fit_split(&one, &rest, rows, took, fit, N, &e), 0, "%s", e.msg);
    cr_expect(one.n == 0 && rest.n == N, "too few one-row steps: every step in the rest");
}

/* The ITL gaps of one request's timeline, sorted. */
static size_t sorted_gaps(double *gap, const timeline *tl) {
    size_t n = 0;
    for (size_t i = 1; i < tl->n_events; i++)
        gap[n++] = (double)(tl->events[i].t_ns - tl->events[i - 1].t_ns);
    for (size_t i = 1; i < n; i++) /* insertion sort: a few hundred */
        for (size_t j = i; j > 0 && gap[j] < gap[j - 1]; j--) {
            double t = gap[j];
            gap[j] = gap[j - 1];
            gap[j - 1] = t;
        }
    return n;
}

/* A calibrated cost whose served steps take 6 times the fit at their top 5%:
 * one stream's token gaps keep their median and gain that tail, drawn
 * the same way from the same seed. */
Test(plan, a_served_spread_lengthens_the_tail_not_the_median) {
    REQUIRE_SHARED(MODEL);
    model_env v;
    plan_env_open(&v);
    step_calib c = {.threads = 1, .n_kv = 1, .kv_type = {GGML_TYPE_F16}, .source = "test"};
    step_calib_model_of(&c.model, v.m);
    step_fit_init(&c.fit[0]);
    for (int r = 1; r <= 256; r *= 2)
        for (int k = 1; k <= 1024; k *= 4) {
            step_shape s = {r, r, r * (double)k, r * (double)k, r};
            step_fit_add(&c.fit[0], &s, 1e6 + r * 1e4 + s.kv_read * 10, 1e5);
        }
    tps_err e = {{0}};
    cr_assert_eq(step_fit_solve(&c.fit[0], &e), 0, "%s", e.msg);
    enum { N = 1000 };
    double took[N], fit[N];
    for (int i = 0; i < N; i++)
        fit[i] = 1e6, took[i] = i % 20 == 0 ? 6e6 : 1e6 + (i % 7) * 1e4 - 3e4;
    double gap[2][512];
    size_t n[2];
    for (int with = 0; with < 2; with++) {
        c.fit[0].noise.n = 0;
        if (with) cr_assert_eq(step_noise_fit(&c.fit[0].noise, took, fit, N, &e), 0, "%s", e.msg);
        cr_assert_eq(plan_cost_calibrated(&v.cost, &c, "test", v.m, GGML_TYPE_F16, &e), 0, "%s",
                     e.msg);
        bench_spec s;
        spec_plan_closed(&s, &v, "16", "400", 1, 1);
        workload wl;
        bench_run_out out;
        plan_once(&out, &v, &s, &wl);
        cr_assert_eq(out.n, 1);
        n[with] = sorted_gaps(gap[with], &out.recs[0].tl);
        bench_run_free(&out);
        workload_free(&wl);
    }
    cr_assert(n[0] >= 300 && n[0] == n[1], "%zu and %zu gaps", n[0], n[1]);
    const size_t p50 = n[0] / 2, p99 = n[0] * 99 / 100;
    cr_expect(gap[0][p99] - gap[0][0] < 0.05 * gap[0][0], "without a spread every gap is one step");
    cr_expect(fabs(gap[1][p50] - gap[0][p50]) < 0.05 * gap[0][p50], "median %.3f ms, was %.3f ms",
              gap[1][p50] / 1e6, gap[0][p50] / 1e6);
    cr_expect(gap[1][p99] > gap[0][p99] + 3e6, "p99 %.3f ms, was %.3f ms: the tail is drawn",
              gap[1][p99] / 1e6, gap[0][p99] / 1e6);
    plan_env_close(&v);
}

/* tps plan calibrate on a real model: the grid, then the served phase
 * against a real server on a loopback port with a real client; the served
 * steps join the fit and their spread is kept, ordered, about 1 at its
 * middle (the fit is made on them), with a tail above it. */
Test(plan, calibrate_serves_the_model_and_keeps_the_spread_of_its_steps) {
    REQUIRE_SHARED(MODEL);
    model_env v;
    plan_env_open(&v);
    plan_calib_opts o = {.m = v.m,
                         .tok = v.tok,
                         .n_threads = 1,
                         .kv_types = {GGML_TYPE_F16},
                         .n_kv = 1,
                         .max_seqs = 8,
                         .max_batch_tokens = 64,
                         .quick = true,
                         .model_path = v.path,
                         .served_s = 3};
    step_calib c;
    tps_err e = {{0}};
    cr_assert_eq(plan_calibrate(&c, &o, &e), 0, "%s", e.msg);
    const step_noise *z = &c.fit[0].noise;
    cr_assert_geq(z->n, 100, "served steps kept: %llu", (unsigned long long)z->n);
    cr_expect_gt(c.fit[0].n, z->n, "the grid's shapes and the served steps, in one fit");
    for (int k = 1; k < STEP_NOISE_Q; k++)
        cr_expect_geq(z->q[k], z->q[k - 1], "quantile %d out of order", k);
    /* The fit is least squares over the served steps: it meets their mean,
     * so it runs through their spread, and a fit off by a unit or not fed
     * them would not. Load cannot move that, but it moves the median: on a
     * loaded machine a few steps stalled by other processes pull the mean
     * up, and the median fell to x0.31 (load average 3), under the x0.5
     * once asserted here. It can only fall (a stall makes a step longer,
     * never shorter), so the bound above holds under any load. */
    const double top = z->q[STEP_NOISE_Q - 1], mid = step_noise_at(z, 0.5);
    cr_expect(z->q[0] > 0 && z->q[0] < 1 && top > 1,
              "the fit within the served steps' spread: p0.1%% x%.3f, p99.9%% x%.2f", z->q[0], top);
    cr_expect(mid > 0 && mid < 2, "a served step's median over the fit x%.2f", mid);
    cr_expect_gt(step_noise_at(z, 0.99), step_noise_at(z, 0.5));
    cr_expect_gt(c.fit[0].noise_one.n, 0, "one stream's one-row steps spread on their own");
    const step_prime *pr = &c.fit[0].prime;
    cr_expect(pr->n >= 2 && pr->t1_ns > 0 && pr->tn_ns > pr->t1_ns,
              "the served engine's warm-up, from its trace: %u rows %.0f ns, one %.0f ns", pr->n,
              pr->tn_ns, pr->t1_ns);
    cr_expect(c.has_steal && c.steal >= 0 && c.steal <= 1,
              "the hypervisor's steal while it ran is measured (Linux: /proc/stat): %.3f", c.steal);
    const step_noise *t = &c.turnaround;
    cr_assert_geq(t->n, 16, "closed-loop turnarounds from the engine's trace: %llu",
                  (unsigned long long)t->n);
    cr_expect(t->q[0] > 0 && step_noise_at(t, 0.5) < 1e9,
              "a request's end to the next one queued: p50 %.3f ms", step_noise_at(t, 0.5) / 1e6);
    plan_cost pc;
    cr_assert_eq(plan_cost_calibrated(&pc, &c, "test", v.m, GGML_TYPE_F16, &e), 0, "%s", e.msg);
    cr_expect_float_eq(plan_cost_ingress_ns(&pc, 0, 0.5), step_noise_at(t, 0.5) - pc.deliver_ns,
                       1.0, "the way in is the turnaround less the delivery");
    plan_env_close(&v);
}
