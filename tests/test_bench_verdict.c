/* The verdict on a run (src/bench/result/verdict.h): synthetic results built from
 * hand-made request records, one per check, that should trip it and that
 * should not; and --warmup keeping its requests out of the distributions.
 * The limits come from verdict.h so the tests and the docs name one set. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <string.h>

#include "bench/result/result.h"
#include "bench/result/verdict.h"
#include "base/clock.h"
#include "support/bench_workload.h"

#define MS(x) ((uint64_t)(x)*TPS_NS_PER_MS)

typedef struct shape {
    size_t n;            /* requests, one after another (closed loop, concurrency 1) */
    uint32_t per_event;  /* tokens per SSE event */
    uint32_t events;     /* events per request */
    int usage_extra;     /* usage.completion_tokens - streamed tokens */
    tl_count_source src; /* how output was counted */
    uint64_t first_ttft; /* ms: the first request's TTFT (a cold start) */
} shape;

/* Request i is sent when i-1 ends; TTFT 10 ms (first: first_ttft), events
 * 5 ms apart, last byte 1 ms after the last event. */
static bench_record *build(const shape *s) {
    bench_record *r = calloc(s->n, sizeof *r);
    tps_err e = {{0}};
    uint64_t t = 1000;
    for (size_t i = 0; i < s->n; i++) {
        cr_assert_eq(timeline_init(&r[i].tl, s->events, &e), 0);
        timeline_start(&r[i].tl, MS(t), MS(t));
        uint64_t at = t + (i == 0 && s->first_ttft ? s->first_ttft : 10);
        for (uint32_t k = 0; k < s->events; k++, at += 5)
            cr_assert_eq(timeline_add(&r[i].tl, MS(at), s->per_event, &e), 0, "%s", e.msg);
        timeline_finish(&r[i].tl, MS(at - 5 + 1), true);
        timeline_set_prompt_tokens(&r[i].tl, 8);
        timeline_set_count_source(&r[i].tl, s->src);
        r[i].err = BENCH_OK;
        r[i].stream_tokens = r[i].tl.output_tokens;
        r[i].has_usage = s->src == TL_COUNT_USAGE;
        r[i].usage_completion = r[i].tl.output_tokens + (uint64_t)s->usage_extra;
        t = at - 5 + 1;
    }
    return r;
}

static void drop(bench_record *r, size_t n) {
    for (size_t i = 0; i < n; i++)
        bench_record_free(&r[i]);
    free(r);
}

static const shape CLEAN = {.n = 150, .per_event = 1, .events = 8, .src = TL_COUNT_USAGE};

/* A result of shape s, the client's CPU and run-queue wait as shares of
 * the run; config says the prompts were sized by input_source. */
static void judged(verdict *v, bench_result *res, const shape *s, double cpu, double runq,
                   const char *input_source, const result_opts *extra) {
    bench_record *r = build(s);
    result_opts o = extra ? *extra : (result_opts){.target_concurrency = 1};
    o.origin_ns = MS(1000);
    json_t *cfg = json_pack("{s:s, s:f}", "input_source", input_source, "rate", 0.0);
    o.config = cfg;
    test_result_build(res, r, s->n, &o);
    res->client_cpu_s = cpu * res->run.tps.seconds;
    res->has_runq = runq >= 0;
    res->client_runq_s = runq >= 0 ? runq * res->run.tps.seconds : 0;
    /* a quiet machine: 1% stolen, a server beside the client */
    if (!extra) res->host = (cpu_contention){.known = true, .steal = 0.01, .others = 0.6};
    verdict_judge(v, res);
    json_decref(cfg);
    drop(r, s->n);
}

static void expect_only(const verdict *v, int tripped_id) {
    for (int i = 0; i < VERDICT_COUNT; i++)
        cr_expect_eq(v->check[i].tripped, i == tripped_id, "check %s: tripped %d (%s)",
                     v->check[i].name, v->check[i].tripped, v->check[i].evidence);
    cr_expect_eq(v->tripped, tripped_id < 0 ? 0 : 1);
}

/* A result of shape s (client CPU and run-queue wait as in judged; prompts
 * sized by a tokenizer) trips check id alone, its evidence saying `says`. */
static void expect_trips(const shape *s, double cpu, double runq, int id, const char *says) {
    verdict v;
    bench_result res;
    judged(&v, &res, s, cpu, runq, "tokenizer", NULL);
    expect_only(&v, id);
    cr_expect(strstr(v.check[id].evidence, says) != NULL, "%s", v.check[id].evidence);
    result_free(&res);
}

Test(verdict, a_clean_run_is_trusted_and_says_why) {
    verdict v;
    bench_result res;
    judged(&v, &res, &CLEAN, 0.10, 0.001, "tokenizer", NULL);
    expect_only(&v, -1);
    for (int i = 0; i < VERDICT_COUNT; i++)
        cr_expect(v.check[i].known, "%s", v.check[i].name);
    cr_expect(strstr(v.check[VERDICT_REQUESTS].evidence, "150 completed") != NULL, "%s",
              v.check[VERDICT_REQUESTS].evidence);
    /* the JSON form carries it too, and a result read back judges the same */
    json_t *j = result_to_json(&res);
    json_t *vj = json_object_get(j, "verdict");
    cr_expect(json_is_true(json_object_get(vj, "trusted")));
    cr_expect_eq(json_array_size(json_object_get(vj, "tripped")), 0);
    cr_expect(json_is_true(
        json_object_get(json_object_get(json_object_get(vj, "checks"), "client"), "ok")));
    bench_result back;
    tps_err e = {{0}};
    cr_assert_eq(result_from_json(&back, j, &e), 0, "%s", e.msg);
    verdict v2;
    verdict_judge(&v2, &back);
    for (int i = 0; i < VERDICT_COUNT; i++) {
        cr_expect_eq(v2.check[i].known, v.check[i].known, "%s", v.check[i].name);
        cr_expect_eq(v2.check[i].tripped, v.check[i].tripped, "%s", v.check[i].name);
        cr_expect_str_eq(v2.check[i].evidence, v.check[i].evidence);
    }
    result_free(&back);
    json_decref(j);
    result_free(&res);
}

/* The hypervisor's steal trips steal alone; unmeasured (a plan's result, an
 * older file) is unknown, not a pass; the JSON keeps it; merged runs weigh
 * their machines' shares by their run windows. */
Test(verdict, steal_trips_steal_and_unmeasured_is_unknown) {
    verdict v;
    bench_result res;
    judged(&v, &res, &CLEAN, 0.10, 0.001, "tokenizer", NULL);
    res.host = (cpu_contention){.known = true, .steal = 0.20, .others = 0.55};
    verdict_judge(&v, &res);
    expect_only(&v, VERDICT_STEAL);
    cr_expect(strstr(v.check[VERDICT_STEAL].evidence, "stole 20.0%") != NULL, "%s",
              v.check[VERDICT_STEAL].evidence);
    json_t *j = result_to_json(&res);
    json_t *h = json_object_get(j, "host");
    cr_expect_float_eq(json_number_value(json_object_get(h, "steal")), 0.20, 1e-9);
    cr_expect_float_eq(json_number_value(json_object_get(h, "others_cpu")), 0.55, 1e-9);
    bench_result back;
    tps_err e = {{0}};
    cr_assert_eq(result_from_json(&back, j, &e), 0, "%s", e.msg);
    cr_expect(back.host.known);
    cr_expect_float_eq(back.host.steal, 0.20, 1e-9);
    bench_result other;
    cr_assert_eq(result_from_json(&other, j, &e), 0, "%s", e.msg);
    other.host.steal = 0.0; /* the same run length: the merge is the plain mean */
    cr_assert_eq(result_merge(&back, &other, &e), 0, "%s", e.msg);
    cr_expect_float_eq(back.host.steal, 0.10, 1e-9);
    result_free(&other);
    result_free(&back);
    json_decref(j);

    res.host.known = false;
    result_free(&res);

    /* the run's readings give each bin of the time series its steal: two
     * readings around the whole run, 10% stolen between them */
    const cpu_tick ticks[] = {{MS(0), 0, 0}, {MS(100000), 20000, 2000}};
    result_opts o = {.target_concurrency = 1, .host_ticks = ticks, .n_host_ticks = 2};
    judged(&v, &res, &CLEAN, 0.10, 0.001, "tokenizer", &o);
    cr_assert_not_null(res.series_steal);
    cr_assert_gt(res.nbins, 1);
    for (size_t k = 0; k < res.nbins; k++)
        cr_expect_float_eq(res.series_steal[k], 0.10, 1e-9, "bin %zu", k);
    res.series_steal[1] = -1; /* a bin the readings did not cover */
    j = result_to_json(&res);
    json_t *st = json_object_get(json_object_get(j, "series"), "steal");
    cr_expect_eq(json_array_size(st), res.nbins);
    cr_expect(json_is_null(json_array_get(st, 1)));
    cr_assert_eq(result_from_json(&back, j, &e), 0, "%s", e.msg);
    cr_assert_not_null(back.series_steal);
    cr_expect_float_eq(back.series_steal[0], 0.10, 1e-9);
    cr_expect_eq(back.series_steal[1], -1);
    result_free(&back);
    json_decref(j);
    verdict_judge(&v, &res);
    cr_expect_not(v.check[VERDICT_STEAL].known);
    cr_expect_not(v.check[VERDICT_STEAL].tripped);
    j = result_to_json(&res);
    cr_expect(json_is_null(json_object_get(j, "host")));
    cr_assert_eq(result_from_json(&back, j, &e), 0, "%s", e.msg);
    cr_expect_not(back.host.known);
    result_free(&back);
    json_decref(j);
    result_free(&res);
}

Test(verdict, a_cpu_bound_client_trips_client) {
    expect_trips(&CLEAN, VERDICT_CPU_BUSY + 0.05, 0.0, VERDICT_CLIENT, "CPU-bound");
}

Test(verdict, a_descheduled_client_trips_client_and_unknown_wait_is_not_a_pass) {
    expect_trips(&CLEAN, 0.10, VERDICT_RUNQ_SHARE * 2, VERDICT_CLIENT, "descheduled");
    verdict v;
    bench_result res;
    judged(&v, &res, &CLEAN, 0.10, VERDICT_RUNQ_SHARE / 4, "tokenizer", NULL);
    expect_only(&v, -1);
    result_free(&res);
    judged(&v, &res, &CLEAN, 0.10, -1, "tokenizer", NULL); /* no schedstat */
    cr_expect(!v.check[VERDICT_CLIENT].known);
    cr_expect(strstr(v.check[VERDICT_CLIENT].evidence, "unknown") != NULL);
    result_free(&res);
}

Test(verdict, several_tokens_per_event_trips_batching) {
    shape s = CLEAN;
    s.per_event = 4, s.events = 2;
    expect_trips(&s, 0.1, 0.0, VERDICT_BATCHING, "4.00 tokens per event");
}

Test(verdict, approximate_counts_trip_approximate) {
    shape s = CLEAN;
    s.src = TL_COUNT_STREAM_IDS; /* exact, but no usage: usage is unknown, not failed */
    verdict v;
    bench_result res;
    judged(&v, &res, &s, 0.1, 0.0, "tokenizer", NULL);
    expect_only(&v, -1);
    cr_expect(!v.check[VERDICT_USAGE].known);
    result_free(&res);
    s.src = TL_COUNT_EVENTS;
    judged(&v, &res, &s, 0.1, 0.0, "tokenizer", NULL);
    expect_only(&v, VERDICT_APPROXIMATE);
    result_free(&res);
    judged(&v, &res, &CLEAN, 0.1, 0.0, "approximate (words)", NULL); /* prompt sizes */
    expect_only(&v, VERDICT_APPROXIMATE);
    result_free(&res);
}

Test(verdict, usage_that_differs_from_the_stream_trips_usage) {
    shape s = CLEAN;
    s.usage_extra = 2;
    expect_trips(&s, 0.1, 0.0, VERDICT_USAGE, "150 of 150 requests (+300 tokens)");
}

Test(verdict, too_few_requests_for_p99_trips_requests) {
    shape s = CLEAN;
    s.n = 40;
    /* 39 in the steady window (the last completion ends it): p99 is the largest value */
    expect_trips(&s, 0.1, 0.0, VERDICT_REQUESTS, "p99 is value #1 from the top");
}

Test(verdict, a_run_that_never_reached_its_load_trips_steady) {
    verdict v;
    bench_result res;
    result_opts o = {.target_concurrency = 4}; /* one at a time never makes 4 */
    judged(&v, &res, &CLEAN, 0.1, 0.0, "tokenizer", &o);
    cr_expect(v.check[VERDICT_STEADY].tripped, "%s", v.check[VERDICT_STEADY].evidence);
    cr_expect(strstr(v.check[VERDICT_STEADY].evidence, "no steady window") != NULL);
    /* and then the request count is judged over the whole run */
    cr_expect(strstr(v.check[VERDICT_REQUESTS].evidence, "no steady window") != NULL);
    result_free(&res);
}

Test(warmup, its_requests_are_in_no_distribution) {
    shape s = CLEAN;
    s.n = 6, s.first_ttft = 500; /* a cold first request */
    bench_record *r = build(&s);
    bench_result all, trimmed;
    result_opts o = {.origin_ns = MS(1000), .target_concurrency = 1};
    test_result_build(&all, r, s.n, &o);
    cr_expect_eq(hist_count(all.h[RH_TTFT]), 6);
    cr_expect_eq(hist_max(all.h[RH_TTFT]), MS(500));
    cr_expect_eq(all.warmup_excluded, 0);
    o.warmup_reqs = 1; /* warm-up ends with the first request's last byte */
    test_result_build(&trimmed, r, s.n, &o);
    cr_expect_eq(trimmed.warmup_excluded, 1);
    cr_expect_eq(hist_count(trimmed.h[RH_TTFT]), 5, "the second was sent as the first ended");
    cr_expect_eq(hist_max(trimmed.h[RH_TTFT]), MS(10));
    cr_expect_eq(hist_count(trimmed.h[RH_E2E]), 5);
    cr_expect_eq(hist_count(trimmed.h[RH_SEND_LAG]), 5);
    cr_expect_eq(trimmed.completed, 6, "counts keep every request");
    cr_expect_eq(trimmed.output_tokens, all.output_tokens);
    result_free(&trimmed);
    o.warmup_reqs = 0, o.warmup_s = 0.55; /* by time: the first (sent at 0 s) and the
                                             second (sent at 0.536 s) */
    test_result_build(&trimmed, r, s.n, &o);
    cr_expect_eq(trimmed.warmup_excluded, 2);
    cr_expect_eq(hist_count(trimmed.h[RH_TTFT]), 4);
    json_t *j = result_to_json(&trimmed);
    cr_expect_eq(
        json_integer_value(json_object_get(json_object_get(j, "requests"), "warmup_excluded")), 2);
    json_decref(j);
    result_free(&trimmed);
    result_free(&all);
    drop(r, s.n);
}
