/* tps bench's client against a local fake server (test_bench_fake.h): a good
 * stream, 1,000 concurrent streams, open-loop lateness, and every fault —
 * slow first byte, stall, malformed JSON, HTTP 500, connection reset, no
 * [DONE], an error event, the server going away mid-run — each counted as
 * an error of its kind, with no hang: the run ends on time. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "bench/client/bench.h"
#include "bench/result/result.h"
#include "base/clock.h"
#include "support/bench_workload.h"
#include "support/serve_proc.h"
#include "test_bench_fake.h"

typedef struct run_case {
    fake_server srv;
    workload wl;
    bench_config cfg;
    bench_run_out out;
    double seconds;
} run_case;

static void run(run_case *rc) {
    cr_assert_eq(fake_start(&rc->srv), 0, "cannot start the fake server");
    rc->cfg.base_url = rc->srv.url;
    if (!rc->cfg.concurrency) rc->cfg.concurrency = 2;
    if (!rc->cfg.timeout_s) rc->cfg.timeout_s = 10;
    if (!rc->cfg.idle_timeout_s) rc->cfg.idle_timeout_s = 5;
    if (!rc->cfg.connect_timeout_s) rc->cfg.connect_timeout_s = 2;
    if (!rc->cfg.requests && !rc->cfg.duration_s) rc->cfg.requests = 4;
    test_workload(&rc->wl, (uint32_t)rc->srv.tokens, 16);
    uint64_t t0 = tps_now_ns();
    test_bench_run(&rc->out, &rc->cfg, &rc->wl);
    rc->seconds = tps_ns_to_s(tps_now_ns() - t0);
    fake_stop(&rc->srv);
}

static void done(run_case *rc) {
    bench_run_free(&rc->out);
    workload_free(&rc->wl);
}

static size_t count_kind(const bench_run_out *o, bench_errkind k) {
    size_t n = 0;
    for (size_t i = 0; i < o->n; i++)
        n += o->recs[i].err == k;
    return n;
}

Test(bench_client, good_stream_counts_usage_tokens_and_itls_sum_to_e2e_minus_ttft) {
    run_case rc = {.srv = {.mode = FAKE_OK, .tokens = 12, .gap_ms = 2}};
    rc.cfg.requests = 10;
    rc.cfg.concurrency = 3;
    run(&rc);
    cr_assert_eq(rc.out.n, 10);
    cr_expect_eq(count_kind(&rc.out, BENCH_OK), 10);
    for (size_t i = 0; i < rc.out.n; i++) {
        const bench_record *r = &rc.out.recs[i];
        const timeline *t = &r->tl;
        cr_expect_eq(t->output_tokens, 12);
        cr_expect_eq(t->source, TL_COUNT_USAGE);
        cr_expect_eq(r->stream_tokens, 12, "each event carried one token");
        cr_expect_eq(t->prompt_tokens, 7, "prompt tokens from usage");
        cr_expect(r->has_timings && r->timings.queue_ms == 1.5);
        uint64_t ttft = timeline_ttft(t, TL_FROM_SCHEDULED),
                 e2e = timeline_e2e(t, TL_FROM_SCHEDULED);
        cr_expect(ttft <= e2e);
        uint64_t gaps[64], sum = 0;
        size_t n = timeline_itls(t, gaps, 64);
        cr_expect_eq(n, 11);
        for (size_t k = 0; k < n; k++)
            sum += gaps[k];
        cr_expect_eq(sum, timeline_last_token_ns(t) - timeline_first_token_ns(t));
        /* the last token arrives before usage and [DONE]: E2E - TTFT covers the gaps */
        cr_expect(sum <= e2e - ttft);
        cr_expect(e2e - ttft - sum < 50 * TPS_NS_PER_MS, "tail after the last token is short");
        cr_expect_eq(t->t_sched, t->t_sent, "closed loop: scheduled == sent");
    }
    done(&rc);
}

Test(bench_client, multi_token_events_count_ids_and_zero_gaps) {
    run_case rc = {
        .srv = {.mode = FAKE_OK, .tokens = 10, .per_event = 3, .gap_ms = 1, .no_usage = true}};
    rc.cfg.requests = 2;
    run(&rc);
    for (size_t i = 0; i < rc.out.n; i++) {
        const timeline *t = &rc.out.recs[i].tl;
        cr_expect_eq(rc.out.recs[i].err, BENCH_OK);
        cr_expect_eq(t->output_tokens, 10);
        cr_expect_eq(t->source, TL_COUNT_STREAM_IDS);
        cr_expect_eq(t->n_events, 4);
        cr_expect_eq(t->multi_token_events, 3, "3+3+3+1");
    }
    done(&rc);
}

/* llama.cpp's server: a token whose bytes are not yet UTF-8 comes as an
 * event with empty text. With usage equal to the events, each is a token
 * at its own arrival; without usage they prove nothing and are skipped. */
Test(bench_client, empty_text_events_are_tokens_when_usage_equals_the_events) {
    run_case rc = {.srv = {.mode = FAKE_OK, .tokens = 12, .gap_ms = 2, .held_every = 3}};
    rc.cfg.requests = 3;
    run(&rc);
    for (size_t i = 0; i < rc.out.n; i++) {
        const bench_record *r = &rc.out.recs[i];
        const timeline *t = &r->tl;
        cr_expect_eq(r->err, BENCH_OK);
        cr_expect_eq(t->output_tokens, 12);
        cr_expect_eq(t->source, TL_COUNT_USAGE);
        cr_expect_eq(t->n_events, 12, "one event per token, the empty ones included");
        cr_expect_eq(t->multi_token_events, 0);
        cr_expect_eq(r->held_tokens, 8);
        cr_expect_eq(r->stream_tokens, 12, "no usage mismatch");
        for (size_t k = 1; k < t->n_events; k++)
            cr_expect(t->events[k].t_ns >= t->events[k - 1].t_ns, "arrival order");
    }
    done(&rc);

    run_case nu = {
        .srv = {.mode = FAKE_OK, .tokens = 12, .gap_ms = 1, .held_every = 3, .no_usage = true}};
    nu.cfg.requests = 2;
    run(&nu);
    for (size_t i = 0; i < nu.out.n; i++) {
        cr_expect_eq(nu.out.recs[i].held_tokens, 0, "no usage: empty events are not tokens");
        cr_expect_eq(nu.out.recs[i].tl.n_events, 4);
    }
    done(&nu);
}

Test(bench_client, slow_first_byte_is_no_response_and_ends_on_time) {
    run_case rc = {.srv = {.mode = FAKE_SLOW_FIRST, .delay_ms = 5000}};
    rc.cfg.idle_timeout_s = 0.3;
    rc.cfg.requests = 2;
    run(&rc);
    cr_expect_eq(count_kind(&rc.out, BENCH_ERR_NO_RESPONSE), 2);
    cr_expect(rc.seconds < 2.0, "took %.2f s", rc.seconds);
    done(&rc);
}

Test(bench_client, stall_mid_stream_is_a_stall) {
    run_case rc = {.srv = {.mode = FAKE_STALL, .tokens = 10}};
    rc.cfg.idle_timeout_s = 0.3;
    run(&rc);
    cr_expect_eq(count_kind(&rc.out, BENCH_ERR_STALL), rc.out.n);
    cr_expect_eq(rc.out.recs[0].tl.output_tokens, 2, "tokens before the stall still count");
    cr_expect(rc.seconds < 3.0, "took %.2f s", rc.seconds);
    done(&rc);
}

/* A run against a fake server in mode: every record of kind, the first
 * one's message containing says (NULL: not checked) and its HTTP status
 * http_status (0: not checked). */
static void expect_fault(fake_mode mode, bench_errkind kind, const char *says, int http_status) {
    run_case rc = {.srv = {.mode = mode}};
    run(&rc);
    cr_expect_eq(count_kind(&rc.out, kind), rc.out.n, "%s", rc.out.recs[0].err_msg);
    if (http_status) cr_expect_eq(rc.out.recs[0].http_status, http_status);
    if (says) cr_expect(strstr(rc.out.recs[0].err_msg, says) != NULL, "%s", rc.out.recs[0].err_msg);
    done(&rc);
}

Test(bench_client, malformed_json_is_malformed) {
    expect_fault(FAKE_MALFORMED, BENCH_ERR_MALFORMED, "malformed JSON", 0);
}

Test(bench_client, http_500_is_http_5xx_with_the_message) {
    expect_fault(FAKE_HTTP500, BENCH_ERR_HTTP_5XX, "the fake server is broken", 500);
}

Test(bench_client, connection_reset_is_reset) {
    expect_fault(FAKE_RESET, BENCH_ERR_RESET, NULL, 0);
}

Test(bench_client, clean_end_without_done_is_truncated) {
    expect_fault(FAKE_NO_DONE, BENCH_ERR_TRUNCATED, NULL, 0);
}

Test(bench_client, error_event_is_stream_error) {
    expect_fault(FAKE_ERROR_EVENT, BENCH_ERR_STREAM_ERROR, "out of KV blocks", 0);
}

Test(bench_client, nothing_listening_is_connect) {
    workload wl;
    test_workload(&wl, 4, 4);
    char url[64]; /* a port we bound and closed: nothing listens there */
    snprintf(url, sizeof url, "http://127.0.0.1:%d", test_free_port());
    bench_config cfg = test_bench_config(url, 2, 3);
    bench_run_out out;
    test_bench_run(&out, &cfg, &wl);
    cr_expect_eq(count_kind(&out, BENCH_ERR_CONNECT), 3);
    bench_run_free(&out);
    workload_free(&wl);
}

Test(bench_client, duration_bounds_the_run_when_the_server_never_answers) {
    run_case rc = {.srv = {.mode = FAKE_SLOW_FIRST, .delay_ms = 60000}};
    rc.cfg.duration_s = 0.5;
    rc.cfg.timeout_s = 0.7;
    rc.cfg.idle_timeout_s = 30;
    run(&rc);
    cr_expect(rc.seconds < 2.5, "took %.2f s (duration 0.5 + timeout 0.7)", rc.seconds);
    cr_expect_eq(count_kind(&rc.out, BENCH_ERR_TIMEOUT) + count_kind(&rc.out, BENCH_ERR_CANCELLED),
                 rc.out.n);
    done(&rc);
}

static void *kill_later(void *arg) {
    usleep(600 * 1000);
    fake_stop(arg);
    return NULL;
}

Test(bench_client, server_killed_mid_run_gives_partial_results) {
    run_case rc = {.srv = {.mode = FAKE_OK, .tokens = 20, .gap_ms = 20}};
    cr_assert_eq(fake_start(&rc.srv), 0);
    test_workload(&rc.wl, 20, 8);
    rc.cfg = (bench_config){.base_url = rc.srv.url,
                            .concurrency = 4,
                            .duration_s = 1.5,
                            .timeout_s = 2,
                            .idle_timeout_s = 1,
                            .connect_timeout_s = 1};
    pthread_t killer;
    pthread_create(&killer, NULL, kill_later, &rc.srv);
    uint64_t t0 = tps_now_ns();
    test_bench_run(&rc.out, &rc.cfg, &rc.wl);
    double secs = tps_ns_to_s(tps_now_ns() - t0);
    pthread_join(killer, NULL);
    size_t ok = count_kind(&rc.out, BENCH_OK);
    size_t broken = count_kind(&rc.out, BENCH_ERR_RESET) + count_kind(&rc.out, BENCH_ERR_CONNECT) +
                    count_kind(&rc.out, BENCH_ERR_TRUNCATED);
    cr_expect(ok > 0, "requests before the kill completed");
    cr_expect(broken > 0, "requests after the kill failed as reset/connect");
    cr_expect_eq(ok + broken, rc.out.n, "no other kinds");
    cr_expect(secs < 3.6, "took %.2f s", secs);
    /* the result still builds from the partial run */
    bench_result res;
    result_opts ro = {.origin_ns = rc.out.t_start_ns, .target_concurrency = 4};
    test_result_build(&res, rc.out.recs, rc.out.n, &ro);
    cr_expect_eq(res.completed, ok);
    cr_expect(result_error_rate(&res) > 0);
    result_free(&res);
    done(&rc);
}

Test(bench_client, a_thousand_concurrent_streams_complete, .timeout = 120) {
    run_case rc = {.srv = {.mode = FAKE_OK, .tokens = 4, .gap_ms = 100}};
    rc.cfg.concurrency = 1000;
    rc.cfg.requests = 1000;
    run(&rc);
    cr_expect_eq(count_kind(&rc.out, BENCH_OK), 1000, "%s",
                 rc.out.recs[0].err_msg ? rc.out.recs[0].err_msg : "");
    cr_expect_geq(atomic_load(&rc.srv.max_conns), 900, "streams ran at once: %d",
                  atomic_load(&rc.srv.max_conns));
    uint64_t tokens = 0;
    for (size_t i = 0; i < rc.out.n; i++)
        tokens += rc.out.recs[i].tl.output_tokens;
    cr_expect_eq(tokens, 4000);
    done(&rc);
}

Test(bench_client, open_loop_over_capacity_measures_from_the_schedule) {
    /* 100 req/s, each takes ~100 ms, at most 2 in flight: capacity ~20 req/s, so sends fall
     * behind the schedule; latencies from the schedule include that wait */
    run_case rc = {.srv = {.mode = FAKE_OK, .tokens = 5, .gap_ms = 20}};
    rc.cfg.rate = 100;
    rc.cfg.arrival = LOAD_ARRIVAL_CONSTANT;
    rc.cfg.concurrency = 2;
    rc.cfg.requests = 12;
    run(&rc);
    cr_assert_eq(count_kind(&rc.out, BENCH_OK), 12);
    const timeline *last = &rc.out.recs[11].tl;
    cr_expect_eq(last->t_sched - rc.out.recs[0].tl.t_sched, 110 * TPS_NS_PER_MS,
                 "constant arrivals 10 ms apart");
    cr_expect(last->t_sent - last->t_sched > 200 * TPS_NS_PER_MS, "the last send was late");
    cr_expect(timeline_ttft(last, TL_FROM_SCHEDULED) > timeline_ttft(last, TL_FROM_SENT));
    cr_expect(timeline_e2e(last, TL_FROM_SCHEDULED) > timeline_e2e(last, TL_FROM_SENT));
    done(&rc);
}
