/* tps plan's simulation (plan/plan.h) against the engine it models.
 *
 * Against a real `tps serve` (in process, stories260K): a seeded workload
 * that queues (more streams than --max-seqs), chunks prompts (longer than
 * --max-batch-tokens), cuts chunks to the automatic ITL target and hits
 * the prefix cache (a shared prefix) is run for real with the engine's
 * trace on, then replayed by the simulation with the real run's arrivals
 * and step times: the planner must make the engine's decisions step for
 * step (rows, prefix hits, intake) and give every request the engine's
 * token counts, and the per-request server times must match. On one
 * stream at a time (no timing in any decision) the predicted run, with
 * the serve's own calibration, must also take the real step count.
 *
 * Alone: the closed loop's step count from the shape of the work, the open
 * loop's sends from the seed's schedule, conversations hitting the prefix
 * cache from their second turn, refusals, determinism; the step fit
 * recovering a known cost model, the calibration file round trip. The
 * served steps' spread (step noise) is test_plan_noise.c's. */
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
#include "plan/plan_replay.h"
#include "support/bench_workload.h"
#include "support/plan_env.h"
#include "support/server_fixture.h"
#include "support/test_support.h"

/* v opened, and s a plan of prompts and replies of these lengths, `requests`
 * of them `concurrency` at a time (0 and 0: bench's defaults, for a test
 * that sets its own load). */
static void open_plan(model_env *v, bench_spec *s, const char *input_len, const char *output_len,
                      uint32_t concurrency, uint64_t requests) {
    plan_env_open(v);
    spec_plan_closed(s, v, input_len, output_len, concurrency, requests);
}

/* A plan and what it needs: the model and its server, the spec, the
 * workload made of it and the planned run. */
typedef struct planned {
    model_env v;
    bench_spec s;
    workload wl;
    bench_run_out out;
} planned;

/* p->s planned on p->v into p->out (p->wl its workload). */
static void plan_it(planned *p) {
    plan_once(&p->out, &p->v, &p->s, &p->wl);
}

static void planned_free(planned *p) {
    bench_run_free(&p->out);
    workload_free(&p->wl);
    plan_env_close(&p->v);
}

/* ---- the simulation alone ----------------------------------------------------- */

Test(plan, one_stream_takes_its_prompt_chunks_then_one_step_a_token) {
    REQUIRE_SHARED(MODEL);
    planned p;
    open_plan(&p.v, &p.s, "150", "9", 1, 5);
    p.v.srv.ep.max_batch_tokens = 64;
    plan_it(&p);
    cr_assert_eq(p.out.n, 5);
    uint64_t want = 0;
    for (size_t i = 0; i < p.out.n; i++) {
        const bench_record *r = &p.out.recs[i];
        cr_expect_eq(r->err, BENCH_OK);
        cr_expect_eq(r->usage_completion, 9, "ignore_eos: max_tokens generated");
        cr_expect_eq(r->tl.n_events, 9, "one event a token");
        /* one request at a time: its prompt in chunks of at most 64 rows,
         * then a step per token after the first */
        want += (r->usage_prompt + 63) / 64 + 8;
    }
    cr_expect_eq(p.v.srv.stats.steps, want, "steps %llu, the work's shape says %llu",
                 (unsigned long long)p.v.srv.stats.steps, (unsigned long long)want);
    planned_free(&p);
}

/* Three requests one after another, 32 prompt tokens and 9 out each (a
 * step a token after the first), on p->v's model, planned into p->out as
 * its cost stands (the quiet plan; a test then changes the cost). */
static void three_short_requests(planned *p) {
    open_plan(&p->v, &p->s, "32", "9", 1, 3);
    plan_it(p);
    workload_free(&p->wl);
}

/* Request i's 9 token gaps in b are exactly `times` those in a. */
static void expect_gaps_scaled(const bench_run_out *a, const bench_run_out *b, size_t i,
                               double times) {
    const timeline *x = &a->recs[i].tl, *y = &b->recs[i].tl;
    cr_assert_eq(x->n_events, 9);
    cr_assert_eq(y->n_events, 9);
    for (size_t k = 1; k < x->n_events; k++) {
        double gx = (double)(x->events[k].t_ns - x->events[k - 1].t_ns),
               gy = (double)(y->events[k].t_ns - y->events[k - 1].t_ns);
        cr_expect_float_eq(gy, times * gx, 2.0, "request %zu, gap %zu: %.0f then %.0f ns", i, k, gx,
                           gy);
    }
}

/* p planned again at its cost as it stands now: as many requests as the
 * quiet plan (p->out), the first one's token gaps `first` times the quiet
 * plan's, the others' `rest` times. Frees both plans and the workload (p->v
 * stays open). */
static void expect_replan_scaled(planned *p, double first, double rest) {
    bench_run_out b;
    plan_once(&b, &p->v, &p->s, &p->wl);
    cr_assert_eq(b.n, p->out.n);
    for (size_t i = 0; i < p->out.n; i++)
        expect_gaps_scaled(&p->out, &b, i, i ? rest : first);
    bench_run_free(&p->out);
    bench_run_free(&b);
    workload_free(&p->wl);
}

/* --steal-series: a step runs at the steal of the bin it starts in, about
 * the run's mean. Bins of (1 - mean)/(1 - s) each; bins not read and time
 * past the last at the mean. In a plan of three requests one after
 * another, a first bin at no steal and the rest at half: the first
 * request's token gaps are the quiet plan's, the others' exactly twice
 * (one thread). */
Test(plan, a_steal_series_slows_the_steps_that_start_in_each_bin) {
    REQUIRE_SHARED(MODEL);
    planned p;
    three_short_requests(&p);
    const bench_run_out *a = &p.out;
    cr_assert_eq(a->n, 3);
    const timeline *first = &a->recs[0].tl;
    cr_assert_eq(first->n_events, 9);
    /* the first bin ends just after the first request's last token */
    const double bin_s = (double)(first->events[8].t_ns - a->t_start_ns + 1) * 1e-9;
    tps_err e = {{0}};
    const double one_bin[] = {0.5};
    plan_cost pc = p.v.cost;
    cr_assert_eq(plan_cost_steal_series(&pc, one_bin, 1, bin_s, 0.2, "run.json", &e), 0, "%s",
                 e.msg);
    cr_expect_float_eq(pc.scale, 1.25, 1e-12, "the mean first, as --steal 0.2");
    cr_expect_float_eq(plan_cost_scale_at(&pc, 0), 0.8 / 0.5, 1e-12, "then bin 0 about it");
    cr_expect_float_eq(plan_cost_scale_at(&pc, (uint64_t)(2 * bin_s * 1e9)), 1, 1e-12,
                       "past the last bin: the mean");
    cr_expect(strstr(pc.source, "1 of 1") && strstr(pc.source, "50-50%"), "%s", pc.source);
    const double unread[] = {-1};
    pc = p.v.cost;
    cr_assert_eq(plan_cost_steal_series(&pc, unread, 1, bin_s, 0.2, "run.json", &e), 0, "%s",
                 e.msg);
    cr_expect_float_eq(plan_cost_scale_at(&pc, 0), 1, 1e-12, "a bin not read: the mean");
    pc = p.v.cost;
    cr_expect_eq(plan_cost_steal_series(&pc, unread, 0, bin_s, 0.2, "run.json", &e), TPS_EINVAL);
    cr_expect(strstr(e.msg, "--steal-series run.json"), "%s", e.msg);

    /* none stolen in the first bin, then half, for as long as the plan can
     * last at half speed */
    double bins[64] = {0};
    const timeline *last = &a->recs[2].tl;
    const size_t n =
        2 + (size_t)(2 * (double)(last->events[8].t_ns - a->t_start_ns) * 1e-9 / bin_s);
    cr_assert_leq(n, 64);
    for (size_t k = 1; k < n; k++)
        bins[k] = 0.5;
    cr_assert_eq(plan_cost_steal_series(&p.v.cost, bins, n, bin_s, 0, "run.json", &e), 0, "%s",
                 e.msg);
    expect_replan_scaled(&p, 1, 2);
    plan_env_close(&p.v);
}

/* tps plan --steal-series RESULT: a result that does not say its steal
 * (a plan's) is refused with the reason; one that does (its host.steal
 * and series.steal, written here into a plan's result) drives the plan,
 * which says so in its cost; with --steal or a capacity search it is an
 * error, not a flag one of them ignores. */
Test(plan, the_cli_follows_a_run_s_steal_series_and_refuses_what_it_cannot, .timeout = 60) {
    REQUIRE_SHARED(MODEL);
    char *model = shared_path(MODEL);
    char dir[] = "/tmp/tps-test-series-XXXXXX";
    cr_assert(mkdtemp(dir));
    char load[768], args[2048], path[600];
    snprintf(load, sizeof load,
             "plan -m '%s' --concurrency 1 --requests 3 --input-len 16 --output-len 8 --quiet",
             model);
    char *out = NULL;
    snprintf(args, sizeof args, "%s --json %s/plan.json", load, dir);
    cr_assert_eq(run_tps(args, true, &out), 0, "%s", out);
    free(out);
    snprintf(args, sizeof args, "%s --steal-series %s/plan.json", load, dir);
    cr_expect_eq(run_tps(args, true, &out), 1, "%s", out);
    cr_expect(strstr(out, "does not say what the hypervisor stole"), "%s", out);
    free(out);

    snprintf(path, sizeof path, "%s/plan.json", dir);
    json_t *r = json_load_file(path, 0, NULL);
    cr_assert_not_null(r);
    json_object_set_new(r, "host", json_pack("{s:f, s:f}", "steal", 0.1, "others_cpu", 0.0));
    json_t *series = json_object_get(r, "series");
    json_t *steal = json_array();
    for (size_t k = 0; k < json_array_size(json_object_get(series, "output_tokens")); k++)
        json_array_append_new(steal, json_real(0.3));
    json_object_set_new(series, "steal", steal);
    snprintf(path, sizeof path, "%s/run.json", dir);
    cr_assert_eq(json_dump_file(r, path, 0), 0);
    json_decref(r);
    snprintf(args, sizeof args, "%s --steal-series %s --json %s/series.json", load, path, dir);
    cr_expect_eq(run_tps(args, true, &out), 0, "%s", out);
    free(out);
    snprintf(path, sizeof path, "%s/series.json", dir);
    r = json_load_file(path, 0, NULL);
    cr_assert_not_null(r);
    const char *cost = json_string_value(
        json_object_get(json_object_get(json_object_get(r, "config"), "plan"), "cost"));
    cr_expect(cost && strstr(cost, "10.0% stolen") && strstr(cost, "as the steal went"), "%s",
              cost ? cost : "(no cost)");
    json_decref(r);

    snprintf(path, sizeof path, "%s/run.json", dir);
    snprintf(args, sizeof args, "%s --steal-series %s --steal 0.1", load, path);
    cr_expect_eq(run_tps(args, true, &out), 2, "%s", out);
    cr_expect(strstr(out, "--steal-series"), "%s", out);
    free(out);
    snprintf(args, sizeof args,
             "plan -m '%s' --find-max-rate --slo ttft=1000 --duration 2 --steal-series %s", model,
             path);
    cr_expect_eq(run_tps(args, true, &out), 2, "%s", out);
    cr_expect(strstr(out, "capacity search"), "%s", out);
    free(out);
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    cr_expect_eq(system(args), 0);
    free(model);
}

/* A solved 2-thread calibration of m: one-row steps of 1.1 ms, 0.1 ms a
 * row more, 50 us after each. */
static void small_calib(step_calib *c, const llama_model *m) {
    *c = (step_calib){.threads = 2, .n_kv = 1, .kv_type = {GGML_TYPE_F16}, .source = "test"};
    step_calib_model_of(&c->model, m);
    step_fit_init(&c->fit[0]);
    for (int r = 1; r <= 64; r *= 2) {
        step_shape sh = {r, r, r * 100.0, r * 100.0, r};
        step_fit_add(&c->fit[0], &sh, 1e6 + r * 1e5, 5e4);
    }
    tps_err e = {{0}};
    cr_assert_eq(step_fit_solve(&c->fit[0], &e), 0, "%s", e.msg);
}

/* --steal: every step (and the warm-up that sets the ITL target) slower by
 * ((1 - the cost's steal) / (1 - S))^threads: one stream's token gaps, a
 * step each, grow by exactly that; a calibration that does not say its own
 * steal cannot be moved, and a share of 1 or more is refused. */
Test(plan, a_stolen_share_of_the_cpus_slows_every_step_by_its_threads_power) {
    REQUIRE_SHARED(MODEL);
    planned p;
    three_short_requests(&p);
    model_env *v = &p.v;
    tps_err e = {{0}};
    cr_assert_eq(plan_cost_at_steal(&v->cost, 0.2, "the roofline", &e), 0, "%s", e.msg);
    cr_expect_float_eq(v->cost.scale, 1.25, 1e-12, "one thread, none stolen before: 1 / 0.8");
    cr_expect(strstr(v->cost.source, "20.0% stolen"), "%s", v->cost.source);
    expect_replan_scaled(&p, 1.25, 1.25);

    step_calib c;
    small_calib(&c, v->m);
    c.fit[0].prime = (step_prime){.n = 64, .t1_ns = 1e6, .tn_ns = 8e6};
    plan_cost pc;
    cr_assert_eq(plan_cost_calibrated(&pc, &c, "cal", v->m, GGML_TYPE_F16, &e), 0, "%s", e.msg);
    cr_expect_eq(plan_cost_at_steal(&pc, 0.2, "cal", &e), TPS_EINVAL, "no steal of its own");
    cr_expect(strstr(e.msg, "--steal") && strstr(e.msg, "cal"), "%s", e.msg);
    c.has_steal = true;
    c.steal = 0.05;
    cr_assert_eq(plan_cost_calibrated(&pc, &c, "cal", v->m, GGML_TYPE_F16, &e), 0, "%s", e.msg);
    step_shape one = {1, 1, 1, 1, 1};
    const double before = plan_cost_fwd_ns(&pc, &one), post = plan_cost_post_ns(&pc, &one);
    cr_assert_eq(plan_cost_at_steal(&pc, 0.2, "cal", &e), 0, "%s", e.msg);
    const double want = (0.95 / 0.8) * (0.95 / 0.8);
    cr_expect_float_eq(plan_cost_fwd_ns(&pc, &one), want * before, 1e-6 * before);
    cr_expect_float_eq(plan_cost_post_ns(&pc, &one), want * post, 1e-6 * post);
    cr_expect_float_eq(pc.fit.prime.t1_ns, want * 1e6, 1e-3, "the warm-up at that steal too");
    cr_assert_eq(plan_cost_calibrated(&pc, &c, "cal", v->m, GGML_TYPE_F16, &e), 0, "%s", e.msg);
    cr_expect_eq(plan_cost_at_steal(&pc, 1.0, "cal", &e), TPS_EINVAL);
    cr_expect_eq(plan_cost_at_steal(&pc, -0.1, "cal", &e), TPS_EINVAL);
    plan_env_close(v);
}

Test(plan, an_open_loop_sends_the_seed_s_schedule) {
    REQUIRE_SHARED(MODEL);
    planned p;
    open_plan(&p.v, &p.s, "16", "4", 0, 0);
    p.s.cfg.rate = 40;
    p.s.cfg.duration_s = 2;
    p.s.cfg.seed = 7;
    plan_it(&p);
    /* the schedule bench's sender follows: gaps from the seeded generator */
    tps_rng r;
    tps_rng_seed(&r, 7);
    uint64_t t = 0, n = 0;
    while (t < 2000000000ull) {
        cr_assert_lt(n, p.out.n);
        cr_expect_eq(p.out.recs[n].tl.t_sched - p.out.t_start_ns, t, "arrival %llu",
                     (unsigned long long)n);
        n++;
        t += load_next_gap_ns(LOAD_ARRIVAL_POISSON, 40, 1, &r);
    }
    cr_expect_eq(p.out.n, n, "sent %zu, the schedule has %llu in 2 s", p.out.n,
                 (unsigned long long)n);
    planned_free(&p);
}

Test(plan, conversations_hit_the_prefix_cache_from_their_second_turn) {
    REQUIRE_SHARED(MODEL);
    planned p;
    open_plan(&p.v, &p.s, "40", "20", 2, 0);
    p.s.wo.turns = 3;
    p.s.conversations = 2;
    plan_it(&p);
    cr_assert_eq(p.out.n, 6);
    for (size_t i = 0; i < p.out.n; i++) {
        const bench_record *r = &p.out.recs[i];
        cr_expect_eq(r->err, BENCH_OK);
        if (r->turn == 1)
            cr_expect_eq(r->cached_tokens, 0);
        else /* at least the first turn's prompt: its 41 tokens fill 2 blocks (the reply's
              * text, tokenized again with what follows, may part from the tokens
              * generated, as it does in the server) */
            cr_expect_geq(r->cached_tokens, 32, "turn %u of conversation %u: %llu cached", r->turn,
                          r->conversation, (unsigned long long)r->cached_tokens);
    }
    planned_free(&p);
}

Test(plan, refuses_what_the_engine_would_and_repeats_itself) {
    REQUIRE_SHARED(MODEL);
    model_env v;
    bench_spec s;
    open_plan(&v, &s, "uniform:100:600", "8", 3, 6); /* the context is 512 */
    workload wl, wl2;
    bench_run_out a, b;
    plan_once(&a, &v, &s, &wl);
    plan_once(&b, &v, &s, &wl2);
    size_t refused = 0;
    for (size_t i = 0; i < a.n; i++) {
        refused += a.recs[i].err == BENCH_ERR_HTTP_4XX;
        cr_expect(a.recs[i].err == BENCH_OK || a.recs[i].usage_prompt == 0);
        cr_expect_eq(a.recs[i].tl.t_end, b.recs[i].tl.t_end, "the same seed, the same plan");
    }
    cr_expect_gt(refused, 0, "prompts past the context are refused (400)");
    bench_run_free(&a);
    bench_run_free(&b);
    workload_free(&wl);
    workload_free(&wl2);
    plan_env_close(&v);
}

/* ---- the step fit ------------------------------------------------------------- */

Test(plan, the_step_fit_recovers_a_known_cost_model) {
    /* a machine whose body is flat to 8 rows then linear, plus a logits
     * row and attention costs: every shape the fit is asked about */
    step_fit f;
    step_fit_init(&f);
#define TRUE_FWD(r, l, a, k) (2e6 + ((r) > 8 ? ((r)-8) * 1e5 : 0) + (l)*3e4 + (a)*20 + (k)*50)
    for (int r = 1; r <= 256; r *= 2)
        for (int l = 0; l <= 1; l++)
            for (int c = 0; c < 3; c++) {
                double a = r * (64.0 + 500 * c), k = 64.0 + 500 * c + r;
                step_shape s = {r, l ? r : 1, a, k, 1};
                step_fit_add(&f, &s, TRUE_FWD(r, s.logit_rows, a, k), 1e5 + 2e4 * s.logit_rows);
            }
    tps_err e = {{0}};
    cr_assert_eq(step_fit_solve(&f, &e), 0, "%s", e.msg);
    for (int r = 1; r <= 200; r += 7) {
        step_shape s = {r, r, r * 300.0, 300.0 + r, r};
        double want = TRUE_FWD(r, r, s.attended, s.kv_read), got = step_fit_fwd_ns(&f, &s);
        cr_expect(fabs(got - want) / want < 0.03, "rows %d: fit %.0f, true %.0f", r, got, want);
        double wp = 1e5 + 2e4 * r, gp = step_fit_post_ns(&f, &s);
        cr_expect(fabs(gp - wp) / wp < 0.03, "after, rows %d: fit %.0f, true %.0f", r, gp, wp);
    }
#undef TRUE_FWD
}

Test(plan, a_calibration_file_round_trips_and_names_what_is_wrong) {
    REQUIRE_SHARED(MODEL);
    model_env v;
    plan_env_open(&v);
    step_calib c;
    small_calib(&c, v.m);
    snprintf(c.machine.cpu, sizeof c.machine.cpu, "Test CPU 9000");
    tps_err e = {{0}};
    double took[32], fit[32];
    for (int i = 0; i < 32; i++)
        fit[i] = 1e6, took[i] = 1e6 + i * 12345.5;
    cr_assert_eq(step_noise_fit(&c.fit[0].noise, took, fit, 32, &e), 0, "%s", e.msg);
    cr_assert_eq(step_noise_fit(&c.fit[0].noise_one, fit, took, 32, &e), 0, "%s", e.msg);
    double ones[32];
    for (int i = 0; i < 32; i++)
        ones[i] = 1, took[i] = 5e5 + i * 1e5; /* turnarounds, ns */
    cr_assert_eq(step_noise_fit(&c.turnaround, took, ones, 32, &e), 0, "%s", e.msg);
    c.fit[0].prime = (step_prime){.n = 64, .t1_ns = 3.5e6, .tn_ns = 2.25e7};
    c.has_steal = true;
    c.steal = 0.125;
    char path[] = "/tmp/tps-test-calib-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    cr_assert_eq(step_calib_write(&c, path, &e), 0, "%s", e.msg);
    step_calib back;
    cr_assert_eq(step_calib_read(&back, path, &e), 0, "%s", e.msg);
    cr_expect_str_eq(back.machine.cpu, "Test CPU 9000");
    step_shape s = {5, 5, 500, 500, 1};
    cr_expect_float_eq(step_fit_fwd_ns(&back.fit[0], &s), step_fit_fwd_ns(&c.fit[0], &s), 1);
    cr_expect_eq(back.fit[0].noise.n, 32, "the served steps' spread comes back");
    for (int k = 0; k < STEP_NOISE_Q; k++)
        cr_expect_float_eq(back.fit[0].noise.q[k], c.fit[0].noise.q[k], 1e-4);
    cr_expect_eq(back.fit[0].noise_one.n, 32, "the one-row steps' spread comes back");
    for (int k = 0; k < STEP_NOISE_Q; k++)
        cr_expect_float_eq(back.fit[0].noise_one.q[k], c.fit[0].noise_one.q[k], 1e-4);
    cr_expect_eq(back.turnaround.n, 32, "the turnarounds come back");
    for (int k = 0; k < STEP_NOISE_Q; k++)
        cr_expect_float_eq(back.turnaround.q[k], c.turnaround.q[k], 1.0);
    cr_expect(back.fit[0].prime.n == 64 && back.fit[0].prime.t1_ns == 3.5e6 &&
                  back.fit[0].prime.tn_ns == 2.25e7,
              "the engine's warm-up comes back: n %u, %.0f, %.0f ns", back.fit[0].prime.n,
              back.fit[0].prime.t1_ns, back.fit[0].prime.tn_ns);
    cr_expect(back.has_steal && back.steal == 0.125, "the steal it was taken under comes back");
    const char stolen[] = "tps-calibration 2\nsteal 1.5\n";
    cr_expect_eq(step_calib_parse(&back, stolen, sizeof stolen - 1, "stolen", &e), TPS_EINVAL,
                 "a share over 1 is refused");
    const char bad[] =
        "tps-calibration 2\nkv f16 steps 9 max_rows 64 err_p50 0\nprime n 0 t1 1 tn 1\n";
    cr_expect_eq(step_calib_parse(&back, bad, sizeof bad - 1, "bad", &e), TPS_EINVAL,
                 "a warm-up of 0 rows is refused");
    cr_expect(strstr(e.msg, "bad:3"), "%s", e.msg);
    cr_assert_eq(step_calib_read(&back, path, &e), 0, "%s", e.msg);
    plan_cost pc;
    cr_expect_eq(plan_cost_calibrated(&pc, &back, path, v.m, GGML_TYPE_F16, &e), 0, "%s", e.msg);
    cr_expect(pc.has_steal && pc.steal == 0.125 && strstr(pc.source, "12.5% stolen"), "%s",
              pc.source);
    back.model.dim++;
    cr_expect_eq(plan_cost_calibrated(&pc, &back, path, v.m, GGML_TYPE_F16, &e), TPS_EINVAL);
    cr_expect(strstr(e.msg, "another model") && strstr(e.msg, "shape"), "%s", e.msg);
    FILE *f = fopen(path, "w");
    fputs("tps-calibration 99\n", f);
    fclose(f);
    cr_expect_eq(step_calib_read(&back, path, &e), TPS_EINVAL);
    cr_expect(strstr(e.msg, "version 99"), "%s", e.msg);
    unlink(path);
    plan_env_close(&v);
}

/* ---- against a real tps serve --------------------------------------------------- */

typedef struct real_run {
    bench_run_out out;
    workload wl;
    bench_config cfg;
    char trace[64], calib[64];
    plan_replay rp; /* the trace, read back */
} real_run;

/* Serves stories260K with the engine options given, runs spec s against it
 * (the records in r->out), stops it: its trace and calibration written,
 * the trace read into r->rp. */
static void serve_and_bench(real_run *r, model_env *v, bench_spec *s, uint32_t max_seqs,
                            uint32_t max_batch) {
    snprintf(r->trace, sizeof r->trace, "/tmp/tps-test-plan-%d.trace", (int)getpid());
    snprintf(r->calib, sizeof r->calib, "/tmp/tps-test-plan-%d.calib", (int)getpid());
    server_config c;
    server_fixture f;
    fixture_defaults(&c, &f);
    c.engine.max_seqs = max_seqs;
    c.engine.max_batch_tokens = max_batch;
    c.engine.trace_path = r->trace;
    c.calibration_out = r->calib;
    fixture_start(&f, &c, true);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", f.port);
    s->cfg.base_url = url;
    tps_err e = {{0}};
    cr_assert_eq(bench_spec_prepare(&r->wl, &r->cfg, s, NULL, "test", &e), 0, "%s", e.msg);
    test_bench_run(&r->out, &r->cfg, &r->wl);
    fixture_finish(&f);
    s->cfg.base_url = "plan:";
    v->srv.ep.max_seqs = max_seqs;
    v->srv.ep.max_batch_tokens = max_batch;
    v->srv.ep.n_threads = 1;
    cr_assert_eq(plan_replay_read(&r->rp, r->trace, &e), 0, "%s", e.msg);
}

static void real_run_free(real_run *r) {
    plan_replay_free(&r->rp);
    bench_run_free(&r->out);
    workload_free(&r->wl);
    unlink(r->trace);
    unlink(r->calib);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Each request's (prompt, generated, cached) tokens, packed and sorted:
 * the sets must be equal whichever request is which. */
static void token_counts(uint64_t *v, const bench_run_out *o) {
    for (size_t i = 0; i < o->n; i++) {
        const bench_record *r = &o->recs[i];
        cr_assert_eq(r->err, BENCH_OK, "request %zu failed: %s", i, r->err_msg ? r->err_msg : "");
        v[i] = (r->usage_prompt << 40) | (r->usage_completion << 20) | r->cached_tokens;
    }
    qsort(v, o->n, sizeof *v, cmp_u64);
}

/* The q-quantile of the server's TTFT (or TPOT) over the records. */
static double server_ms(const bench_run_out *o, bool tpot, double q) {
    double v[256];
    size_t n = 0;
    for (size_t i = 0; i < o->n && n < 256; i++) {
        const bench_timings *t = &o->recs[i].timings;
        v[n++] = tpot ? t->decode_ms / (double)(t->completion_tokens - 1) : t->ttft_ms;
    }
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double x = v[j];
            v[j] = v[j - 1];
            v[j - 1] = x;
        }
    return v[(size_t)(q * (double)(n - 1) + 0.5)];
}

typedef struct step_log {
    plan_step *v;
    size_t n, cap;
} step_log;

static void log_step(void *arg, const plan_step *st) {
    step_log *l = arg;
    if (l->n < l->cap) l->v[l->n++] = *st;
}

Test(plan, replaying_a_real_run_makes_the_engine_s_decisions_step_for_step, .timeout = 120) {
    REQUIRE_SHARED(MODEL);
    model_env v;
    bench_spec s;
    open_plan(&v, &s, "48", "12", 6, 24); /* 6: more than --max-seqs: requests queue */
    s.cfg.seed = 36;
    s.wo.prefix_len = 64; /* a shared prefix: the prefix cache serves it */
    real_run r;
    serve_and_bench(&r, &v, &s, 4, 64); /* prompts of ~113 tokens: chunked */
    tps_err e = {{0}};
    cr_assert_eq(r.rp.n_arrivals, 24);
    step_log sl = {.cap = r.rp.n_steps + 16};
    sl.v = calloc(sl.cap, sizeof *sl.v);
    v.srv.replay = &r.rp;
    v.srv.on_step = log_step;
    v.srv.on_step_arg = &sl;
    bench_run_out sim;
    cr_assert_eq(plan_run(&sim, &r.cfg, &r.wl, &v.srv, &e), 0, "%s", e.msg);
    cr_assert_eq(sl.n, r.rp.n_steps, "simulated %zu steps, the engine ran %zu", sl.n, r.rp.n_steps);
    uint64_t cached = 0, cut = 0;
    for (size_t i = 0; i < sl.n; i++) {
        const plan_replay_step *a = &r.rp.steps[i];
        const plan_step *b = &sl.v[i];
        cr_expect(a->prefill_rows == b->prefill_rows && a->decode_rows == b->decode_rows &&
                      a->cached_rows == b->cached_rows && a->taken == b->taken,
                  "step %zu: the engine ran %u prompt + %u decode rows (%u cached, %u taken), "
                  "the plan %u + %u (%u, %u)",
                  i, a->prefill_rows, a->decode_rows, a->cached_rows, a->taken, b->prefill_rows,
                  b->decode_rows, b->cached_rows, b->taken);
        cached += a->cached_rows;
        cut += a->decode_rows && a->prefill_rows && a->prefill_rows + a->decode_rows < 64;
    }
    cr_expect_gt(cached, 0, "the workload hit the prefix cache");
    uint64_t want[24], got[24];
    cr_assert_eq(sim.n, r.out.n);
    token_counts(want, &r.out);
    token_counts(got, &sim);
    for (size_t i = 0; i < 24; i++)
        cr_expect_eq(got[i], want[i], "request token counts (prompt, generated, cached) differ");
    /* the engine's own times: the same steps at the same times */
    for (int t = 0; t < 2; t++) {
        double a50 = server_ms(&r.out, t, 0.5), b50 = server_ms(&sim, t, 0.5);
        double a99 = server_ms(&r.out, t, 0.99), b99 = server_ms(&sim, t, 0.99);
        cr_expect(fabs(b50 - a50) <= 0.10 * a50 + 0.01, "%s p50: real %.3f ms, plan %.3f",
                  t ? "TPOT" : "TTFT", a50, b50);
        cr_expect(fabs(b99 - a99) <= 0.20 * a99 + 0.01, "%s p99: real %.3f ms, plan %.3f",
                  t ? "TPOT" : "TTFT", a99, b99);
    }
    (void)cut;
    free(sl.v);
    bench_run_free(&sim);
    real_run_free(&r);
    plan_env_close(&v);
}

Test(plan, one_stream_at_a_time_the_prediction_takes_the_real_step_count, .timeout = 120) {
    REQUIRE_SHARED(MODEL);
    model_env v;
    bench_spec s;
    open_plan(&v, &s, "uniform:20:90", "uniform:4:16", 1, 6);
    s.wo.prefix_len = 40;
    real_run r;
    serve_and_bench(&r, &v, &s, 4, 32);
    tps_err e = {{0}};
    step_calib cal;
    cr_assert_eq(step_calib_read(&cal, r.calib, &e), 0, "%s", e.msg);
    cr_expect_eq(cal.fit[0].noise.n + cal.fit[0].noise_one.n, r.rp.n_steps,
                 "the serve's steps' spread about its fit, all %zu", r.rp.n_steps);
    const step_prime *pr = &cal.fit[0].prime;
    cr_expect(r.rp.prime_tn_ns > 0 && pr->n == r.rp.prime_n &&
                  fabs(pr->t1_ns - r.rp.prime_t1_ns) <= 1 &&
                  fabs(pr->tn_ns - r.rp.prime_tn_ns) <= 1,
              "the file's warm-up is the trace's: %u rows %.0f / %.0f ns, one %.0f / %.0f ns",
              pr->n, pr->tn_ns, r.rp.prime_tn_ns, pr->t1_ns, r.rp.prime_t1_ns);
    cr_assert_eq(plan_cost_calibrated(&v.cost, &cal, r.calib, v.m, GGML_TYPE_F16, &e), 0, "%s",
                 e.msg);
    bench_run_out sim;
    cr_assert_eq(plan_run(&sim, &r.cfg, &r.wl, &v.srv, &e), 0, "%s", e.msg);
    cr_expect_eq(v.srv.stats.steps, r.rp.n_steps, "predicted %llu steps, the engine ran %zu",
                 (unsigned long long)v.srv.stats.steps, r.rp.n_steps);
    cr_assert_eq(sim.n, r.out.n);
    for (size_t i = 0; i < sim.n; i++) { /* one at a time: request i is request i */
        cr_expect_eq(sim.recs[i].usage_prompt, r.out.recs[i].usage_prompt);
        cr_expect_eq(sim.recs[i].usage_completion, r.out.recs[i].usage_completion);
        cr_expect_eq(sim.recs[i].cached_tokens, r.out.recs[i].cached_tokens);
    }
    bench_run_free(&sim);
    real_run_free(&r);
    plan_env_close(&v);
}
