/* Unit tests for src/metrics: per-request TTFT/ITL/TPOT/E2E; windows, TPS,
 * series and goodput on hand-built timelines whose answers are worked out in
 * the comments. Times are written in milliseconds and converted to ns with
 * MS(). The histogram is tests/test_hist.c; the machine's limits cache and
 * its load, tests/test_machine_load.c. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "metrics/hist.h"
#include "metrics/timeline.h"
#include "metrics/window.h"
#include "support/hist_make.h"

#define MS(x) ((uint64_t)(x)*TPS_NS_PER_MS)

/* ---- helpers ------------------------------------------------------------- */

/* A timeline from (arrival ms, tokens) pairs, finished ok at end_ms. */
typedef struct ev_ms {
    uint64_t t, k;
} ev_ms;

static void build(timeline *t, uint64_t sched_ms, uint64_t sent_ms, uint64_t prompt,
                  const ev_ms *ev, size_t n, uint64_t end_ms) {
    tps_err e = {{0}};
    cr_assert_eq(timeline_init(t, 2, &e), TPS_OK); /* small: forces growth */
    timeline_start(t, MS(sched_ms), MS(sent_ms));
    timeline_set_prompt_tokens(t, prompt);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(timeline_add(t, MS(ev[i].t), (uint32_t)ev[i].k, &e), TPS_OK, "%s", e.msg);
    if (end_ms != TL_NONE) timeline_finish(t, MS(end_ms), true);
}

/* ---- per-request metrics ---------------------------------------------------- */

/* Request B of the window tests: sent at 50, tokens 150 (1), 250 (2), 350 (1),
 * last byte 400, all ms. */
static const ev_ms B_EV[] = {{150, 1}, {250, 2}, {350, 1}};

Test(timeline, ttft_e2e_tpot_of_a_streamed_request) {
    timeline t;
    build(&t, 50, 50, 20, B_EV, 3, 400);
    cr_assert_eq(t.output_tokens, 4);
    cr_assert_eq(timeline_ttft(&t, TL_FROM_SENT), MS(100)); /* 150 - 50 */
    cr_assert_eq(timeline_e2e(&t, TL_FROM_SENT), MS(350));  /* 400 - 50 */
    /* TPOT = (350 - 100) / (4 - 1) = 83.333... ms -> 83333333 ns */
    cr_assert_eq(timeline_tpot(&t), 83333333);
    timeline_free(&t);
}

Test(timeline, scheduled_start_exposes_client_queueing) {
    /* Scheduled at 0 but the client was backed up and sent at 200; first
     * token at 250, last byte 300. */
    static const ev_ms ev[] = {{250, 1}, {300, 1}};
    timeline t;
    build(&t, 0, 200, 5, ev, 2, 300);
    cr_assert_eq(timeline_ttft(&t, TL_FROM_SCHEDULED), MS(250));
    cr_assert_eq(timeline_ttft(&t, TL_FROM_SENT), MS(50));
    cr_assert_eq(timeline_e2e(&t, TL_FROM_SCHEDULED), MS(300));
    cr_assert_eq(timeline_e2e(&t, TL_FROM_SENT), MS(100));
    cr_assert_eq(timeline_tpot(&t), MS(50)); /* start cancels: (300-250)/1 */
    timeline_free(&t);
}

Test(timeline, multi_token_event_gives_one_gap_and_zero_gaps) {
    /* Tokens: 1 @150, 2 @250, 1 @350 -> gaps 100, 0, 100. */
    timeline t;
    build(&t, 50, 50, 20, B_EV, 3, 400);
    uint64_t g[8];
    cr_assert_eq(timeline_itls(&t, g, 8), 3);
    cr_assert_eq(g[0], MS(100));
    cr_assert_eq(g[1], 0);
    cr_assert_eq(g[2], MS(100));
    cr_assert_eq(t.multi_token_events, 1);
    timeline_free(&t);
}

Test(timeline, inserted_tokens_merge_in_arrival_order) {
    /* B (1 @150, 2 @250, 1 @350; sent 50, end 400) plus one-token events at
     * 100, 250 and 380: gaps 50, 50, 100, 0, 0, 100, 30 */
    timeline t;
    build(&t, 50, 50, 1, B_EV, 3, 400);
    const uint64_t at[] = {MS(100), MS(250), MS(380)};
    tps_err e;
    cr_assert_eq(timeline_insert_tokens(&t, at, 3, &e), 0, "%s", e.msg);
    cr_assert_eq(t.output_tokens, 7);
    cr_assert_eq(t.n_events, 6);
    uint64_t g[8];
    cr_assert_eq(timeline_itls(&t, g, 8), 6);
    const uint64_t want[] = {MS(50), MS(100), 0, 0, MS(100), MS(30)};
    for (int i = 0; i < 6; i++)
        cr_expect_eq(g[i], want[i], "gap %d", i);
    cr_assert_eq(timeline_ttft(&t, TL_FROM_SENT), MS(50));
    const uint64_t late[] = {MS(500)}, early[] = {MS(10)};
    cr_expect_eq(timeline_insert_tokens(&t, late, 1, &e), TPS_EINVAL, "after the last byte");
    cr_expect_eq(timeline_insert_tokens(&t, early, 1, &e), TPS_EINVAL, "before the send");
    cr_expect_eq(t.output_tokens, 7, "a refused insert changes nothing");
    timeline_free(&t);
}

Test(timeline, first_event_with_three_tokens_gives_two_zero_gaps) {
    static const ev_ms ev[] = {{10, 3}, {30, 1}};
    timeline t;
    build(&t, 0, 0, 1, ev, 2, 30);
    uint64_t g[8];
    cr_assert_eq(timeline_itls(&t, g, 8), 3); /* 4 tokens -> 3 gaps */
    cr_assert_eq(g[0], 0);
    cr_assert_eq(g[1], 0);
    cr_assert_eq(g[2], MS(20));
    timeline_free(&t);
}

Test(timeline, itls_sum_to_e2e_minus_ttft_when_last_byte_is_last_token) {
    static const ev_ms ev[] = {{7, 2}, {19, 1}, {20, 5}, {33, 1}, {61, 3}};
    timeline t;
    build(&t, 0, 2, 9, ev, 5, 61);
    uint64_t g[32];
    size_t n = timeline_itls(&t, g, 32);
    cr_assert_eq(n, t.output_tokens - 1); /* 12 tokens -> 11 gaps */
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += g[i];
    cr_assert_eq(sum, timeline_e2e(&t, TL_FROM_SENT) - timeline_ttft(&t, TL_FROM_SENT));
    cr_assert_eq(sum, MS(54)); /* 61 - 7 */
    cr_assert_eq(t.multi_token_events, 3);
    timeline_free(&t);
}

Test(timeline, tpot_is_undefined_for_one_token_requests) {
    static const ev_ms ev[] = {{40, 1}};
    timeline t;
    build(&t, 0, 0, 3, ev, 1, 45);
    cr_assert_eq(timeline_tpot(&t), TL_NONE);
    cr_assert_eq(timeline_itls(&t, NULL, 0), 0);
    cr_assert_eq(timeline_ttft(&t, TL_FROM_SENT), MS(40));
    /* Recorded: TTFT and E2E, no TPOT, no ITL. */
    hist *ttft = make_hist(0, MS(1000), 2), *tpot = make_hist(0, MS(1000), 2),
         *itl = make_hist(0, MS(1000), 2), *e2e = make_hist(0, MS(1000), 2);
    timeline_hists hs = {.ttft = ttft, .tpot = tpot, .itl = itl, .e2e = e2e};
    cr_assert(timeline_record(&t, &hs));
    cr_assert_eq(hist_count(ttft), 1);
    cr_assert_eq(hist_count(e2e), 1);
    cr_assert_eq(hist_count(tpot), 0);
    cr_assert_eq(hist_count(itl), 0);
    hist_free(ttft);
    hist_free(tpot);
    hist_free(itl);
    hist_free(e2e);
    timeline_free(&t);
}

Test(timeline, record_puts_zero_gaps_in_the_itl_histogram) {
    timeline t;
    build(&t, 50, 50, 20, B_EV, 3, 400);
    hist *itl = make_hist(0, MS(1000), 2);
    timeline_hists hs = {.itl = itl};
    cr_assert(timeline_record(&t, &hs));
    cr_assert_eq(hist_count(itl), 3);
    cr_assert_eq(hist_min(itl), 0);
    cr_assert_eq(hist_max(itl), MS(100));
    cr_assert_eq(hist_sum(itl), MS(200));
    hist_free(itl);
    timeline_free(&t);
}

Test(timeline, failed_and_pending_requests_are_not_recorded) {
    static const ev_ms ev[] = {{40, 1}, {50, 1}};
    timeline t;
    build(&t, 0, 0, 3, ev, 2, TL_NONE);
    hist *e2e = make_hist(0, MS(1000), 2);
    timeline_hists hs = {.e2e = e2e};
    cr_assert_eq(timeline_e2e(&t, TL_FROM_SENT), TL_NONE);
    cr_assert_eq(timeline_tpot(&t), TL_NONE);
    cr_assert_not(timeline_record(&t, &hs));
    timeline_finish(&t, MS(60), false);
    cr_assert_not(timeline_record(&t, &hs));
    cr_assert_eq(hist_count(e2e), 0);
    hist_free(e2e);
    timeline_free(&t);
}

Test(timeline, out_of_order_event_is_refused) {
    timeline t;
    tps_err e = {{0}};
    timeline_init(&t, 0, &e);
    timeline_start(&t, MS(10), MS(10));
    cr_assert_eq(timeline_add(&t, MS(5), 1, &e), TPS_EINVAL);
    cr_assert_eq(timeline_add(&t, MS(20), 1, &e), TPS_OK);
    cr_assert_eq(timeline_add(&t, MS(19), 1, &e), TPS_EINVAL);
    cr_assert_eq(timeline_add(&t, MS(21), 0, &e), TPS_OK); /* empty event: ignored */
    cr_assert_eq(t.n_events, 1);
    timeline_free(&t);
}

Test(timeline, usage_count_corrects_the_streamed_count) {
    /* Streamed 1 @10, 1 @20; usage says 5: the 3 extra go on the last event. */
    static const ev_ms ev[] = {{10, 1}, {20, 1}};
    timeline t;
    tps_err e = {{0}};
    build(&t, 0, 0, 3, ev, 2, 25);
    cr_assert_eq(timeline_set_output_tokens(&t, 5, TL_COUNT_USAGE, &e), TPS_OK);
    cr_assert_eq(t.output_tokens, 5);
    cr_assert_eq(t.events[1].tokens, 4);
    cr_assert_eq(t.multi_token_events, 1);
    /* TPOT = (25 - 10) / 4 = 3.75 ms */
    cr_assert_eq(timeline_tpot(&t), 3750000);
    /* Usage says 1: surplus comes off the end. */
    cr_assert_eq(timeline_set_output_tokens(&t, 1, TL_COUNT_USAGE, &e), TPS_OK);
    cr_assert_eq(t.n_events, 1);
    cr_assert_eq(timeline_tpot(&t), TL_NONE);
    timeline_free(&t);
}

Test(timeline, non_streamed_response_has_ttft_equal_to_e2e) {
    timeline t;
    tps_err e = {{0}};
    build(&t, 0, 0, 3, NULL, 0, TL_NONE);
    cr_assert_eq(timeline_set_output_tokens(&t, 8, TL_COUNT_USAGE, &e), TPS_EINVAL);
    timeline_finish(&t, MS(90), true);
    cr_assert_eq(timeline_set_output_tokens(&t, 8, TL_COUNT_USAGE, &e), TPS_OK);
    cr_assert_eq(timeline_ttft(&t, TL_FROM_SENT), MS(90));
    cr_assert_eq(timeline_e2e(&t, TL_FROM_SENT), MS(90));
    cr_assert_eq(timeline_tpot(&t), 0);
    timeline_free(&t);
}

/* ---- windows ---------------------------------------------------------------- */

/* Requests' timelines for the window tests, the first n of t built, and
 * pointers to them (what window_* read). */
typedef struct reqs {
    timeline t[4];
    const timeline *p[4];
    int n;
} reqs;

/* Points x->p at x->t's first n timelines (built). */
static void reqs_point(reqs *x, int n) {
    x->n = n;
    for (int i = 0; i < n; i++)
        x->p[i] = &x->t[i];
}

static void reqs_free(reqs *x) {
    for (int i = 0; i < x->n; i++)
        timeline_free(&x->t[i]);
}

/* Three requests (ms):
 *   A: sent 0,   prompt 10, tokens 1 @100, 1 @200, 1 @300; last byte 300
 *   B: sent 50,  prompt 20, tokens 1 @150, 2 @250, 1 @350; last byte 400
 *   C: sent 100, prompt 30, tokens 1 @300, 1 @500;         last byte 500
 * Output tokens 3 + 4 + 2 = 9. Input counts at first token: A@100, B@150,
 * C@300. */
static void build_abc(reqs *x) {
    static const ev_ms a[] = {{100, 1}, {200, 1}, {300, 1}};
    static const ev_ms c[] = {{300, 1}, {500, 1}};
    build(&x->t[0], 0, 0, 10, a, 3, 300);
    build(&x->t[1], 50, 50, 20, B_EV, 3, 400);
    build(&x->t[2], 100, 100, 30, c, 2, 500);
    reqs_point(x, 3);
}

Test(window, run_window_tps_of_three_requests) {
    reqs x;
    build_abc(&x);
    window w;
    tps_err e = {{0}};
    cr_assert_eq(window_run(&w, x.p, 3, &e), TPS_OK);
    cr_assert_eq(w.t0, 0);
    cr_assert_eq(w.t1, MS(500));
    window_tps m;
    window_measure(&m, w, x.p, 3);
    /* (0, 500]: 9 output tokens / 0.5 s = 18 tok/s; input 60 / 0.5 = 120;
     * total 69 / 0.5 = 138; 3 completed / 0.5 = 6 req/s. */
    cr_assert_eq(m.output_tokens, 9);
    cr_assert_eq(m.input_tokens, 60);
    cr_assert_eq(m.completed, 3);
    cr_assert_float_eq(m.seconds, 0.5, 1e-12);
    cr_assert_float_eq(m.output_tps, 18.0, 1e-9);
    cr_assert_float_eq(m.input_tps, 120.0, 1e-9);
    cr_assert_float_eq(m.total_tps, 138.0, 1e-9);
    cr_assert_float_eq(m.request_rate, 6.0, 1e-9);
    reqs_free(&x);
}

Test(window, window_is_open_at_t0_and_closed_at_t1) {
    reqs x;
    build_abc(&x);
    window_tps m;
    /* (100, 300]: A@200, A@300 (A@100 is out: open at t0) = 2; B@150, 2@250
     * = 3; C@300 (closed at t1) = 1 -> 6 tokens / 0.2 s = 30 tok/s. Input:
     * B@150 (20) + C@300 (30) = 50 -> 250/s; A's input at 100 is out. Last
     * bytes in (100, 300]: A@300 -> 1 completed. */
    window_measure(&m, (window){MS(100), MS(300)}, x.p, 3);
    cr_assert_eq(m.output_tokens, 6);
    cr_assert_float_eq(m.output_tps, 30.0, 1e-9);
    cr_assert_eq(m.input_tokens, 50);
    cr_assert_float_eq(m.input_tps, 250.0, 1e-9);
    cr_assert_eq(m.completed, 1);
    reqs_free(&x);
}

/* Bins build_abc's requests over their run, (0, 500 ms], in bins of
 * bin_ms, and checks: nb bins (at most 8), the output tokens of each bin
 * (want) and its input tokens (want_in, unless NULL), and the peak of
 * peak_tps tok/s in bin peak_bin. */
static void expect_abc_series(uint64_t bin_ms, size_t nb, const uint64_t *want,
                              const uint64_t *want_in, double peak_tps, size_t peak_bin) {
    reqs x;
    build_abc(&x);
    window w = {0, MS(500)};
    tps_err e = {{0}};
    uint64_t out[8], in[8];
    cr_assert_eq(window_nbins(w, MS(bin_ms)), nb);
    cr_assert(nb <= 8);
    cr_assert_eq(window_series(out, want_in ? in : NULL, nb, w, MS(bin_ms), x.p, 3, &e), TPS_OK);
    for (size_t k = 0; k < nb; k++) {
        cr_assert_eq(out[k], want[k], "bin %zu", k);
        if (want_in) cr_assert_eq(in[k], want_in[k], "bin %zu", k);
    }
    size_t peak;
    cr_assert_float_eq(window_peak(out, nb, w, MS(bin_ms), &peak), peak_tps, 1e-9);
    cr_assert_eq(peak, peak_bin);
    reqs_free(&x);
}

Test(window, bins_partition_the_window_and_peak_is_the_busiest_bin) {
    /* 100 ms bins: (0,100] A@100 = 1; (100,200] A@200 B@150 = 2;
     * (200,300] A@300 B 2@250 C@300 = 4; (300,400] B@350 = 1;
     * (400,500] C@500 = 1. Sum 9 = run window. Peak: bin 2, 4 / 0.1 s = 40. */
    const uint64_t want[5] = {1, 2, 4, 1, 1}, want_in[5] = {10, 20, 30, 0, 0};
    expect_abc_series(100, 5, want, want_in, 40.0, 2);
    /* room for fewer bins than the window holds is refused */
    reqs x;
    build_abc(&x);
    uint64_t out[5];
    tps_err e = {{0}};
    cr_assert_eq(window_series(out, NULL, 4, (window){0, MS(500)}, MS(100), x.p, 3, &e),
                 TPS_EINVAL);
    reqs_free(&x);
}

Test(window, short_last_bin_is_kept_but_not_a_peak) {
    /* 200 ms bins: (0,200] = 3; (200,400] = 5; (400,500] = 1 (short).
     * Peak: full bins only -> bin 1, 5 / 0.2 s = 25 tok/s. */
    const uint64_t want[3] = {3, 5, 1};
    expect_abc_series(200, 3, want, NULL, 25.0, 1);
}

/* Closed loop at concurrency 2 (ms):
 *   R1 sent 0,   last byte 100     in flight: 1 @0, 2 @10 (target reached)
 *   R2 sent 10,  last byte 150     @100 R1 ends then R3 sends: stays 2
 *   R3 sent 100, last byte 250     @150 R2 ends then R4 sends (last send)
 *   R4 sent 150, last byte 300     first end after 150: R3 @250
 * Each carries one token 5 ms before its last byte. */
static void build_closed4(reqs *x) {
    static const uint64_t sent[4] = {0, 10, 100, 150}, end[4] = {100, 150, 250, 300};
    for (int i = 0; i < 4; i++) {
        ev_ms ev = {end[i] - 5, 1};
        build(&x->t[i], sent[i], sent[i], 1, &ev, 1, end[i]);
    }
    reqs_point(x, 4);
}

Test(window, steady_runs_from_target_concurrency_to_first_drain_completion) {
    reqs x;
    build_closed4(&x);
    window w;
    tps_err e = {{0}};
    steady_opts o = {.target_concurrency = 2};
    cr_assert_eq(window_steady(&w, &o, x.p, 4, &e), TPS_OK, "%s", e.msg);
    cr_assert_eq(w.t0, MS(10));
    cr_assert_eq(w.t1, MS(250));
    /* Tokens in (10, 250]: R1@95, R2@145, R3@245 -> 3 / 0.24 s = 12.5 tok/s */
    window_tps m;
    window_measure(&m, w, x.p, 4);
    cr_assert_eq(m.output_tokens, 3);
    cr_assert_float_eq(m.output_tps, 12.5, 1e-9);
    reqs_free(&x);
}

/* window_steady over build_closed4's requests under o: its return code,
 * the window in *w, a failure's message in *e. */
static int steady_closed4(window *w, const steady_opts *o, tps_err *e) {
    reqs x;
    build_closed4(&x);
    int rc = window_steady(w, o, x.p, 4, e);
    reqs_free(&x);
    return rc;
}

Test(window, steady_open_loop_starts_at_first_completion) {
    window w;
    tps_err e = {{0}};
    steady_opts o = {0};
    cr_assert_eq(steady_closed4(&w, &o, &e), TPS_OK, "%s", e.msg);
    cr_assert_eq(w.t0, MS(100));
    cr_assert_eq(w.t1, MS(250));
}

Test(window, steady_fails_when_target_never_reached) {
    window w;
    tps_err e = {{0}};
    steady_opts o = {.target_concurrency = 3};
    cr_assert_eq(steady_closed4(&w, &o, &e), TPS_ERANGE);
    cr_assert_neq(strstr(e.msg, "peak 2"), NULL, "%s", e.msg);
}

Test(window, steady_trimmed_by_warmup_and_cooldown) {
    window w;
    tps_err e = {{0}};
    /* run (0, 300]; warmup 50, cooldown 100 -> (50, 200] */
    steady_opts o = {.warmup_ns = MS(50), .cooldown_ns = MS(100), .target_concurrency = 2};
    cr_assert_eq(steady_closed4(&w, &o, &e), TPS_OK);
    cr_assert_eq(w.t0, MS(50));
    cr_assert_eq(w.t1, MS(200));
    o.cooldown_ns = MS(250);
    cr_assert_eq(steady_closed4(&w, &o, &e), TPS_ERANGE);
}

Test(window, user_window_is_relative_to_run_start) {
    window run = {MS(1000), MS(5000)}, w;
    tps_err e = {{0}};
    cr_assert_eq(window_user(&w, &run, MS(500), MS(1500), &e), TPS_OK);
    cr_assert(w.t0 == MS(1500) && w.t1 == MS(2500));
    cr_assert_eq(window_user(&w, &run, MS(1500), MS(1500), &e), TPS_EINVAL);
}

Test(window, run_window_of_no_requests_is_an_error) {
    window w;
    tps_err e = {{0}};
    cr_assert_eq(window_run(&w, NULL, 0, &e), TPS_EINVAL);
}

/* ---- goodput ------------------------------------------------------------------ */

Test(window, goodput_counts_completed_requests_meeting_every_slo) {
    reqs x;
    build_abc(&x);
    window w = {0, MS(500)};
    window_goodput g;
    /* TTFT: A 100, B 100, C 200. E2E: A 300, B 350, C 400.
     * TPOT: A (300-100)/2 = 100, B (400-150)/3 = 83.3, C (500-300)/1 = 200.
     * SLO ttft <= 120, e2e <= 400: A, B good; C fails TTFT -> 2 / 0.5 s = 4. */
    tl_slo slo = {.ttft_ns = MS(120), .e2e_ns = MS(400)};
    window_goodput_measure(&g, w, &slo, TL_FROM_SCHEDULED, x.p, 3);
    cr_assert_eq(g.completed, 3);
    cr_assert_eq(g.good, 2);
    cr_assert_float_eq(g.goodput, 4.0, 1e-9);
    cr_assert_float_eq(g.good_fraction, 2.0 / 3.0, 1e-12);
    /* Adding tpot <= 90 ms drops A (100 ms): 1 / 0.5 s = 2. */
    slo.tpot_ns = MS(90);
    window_goodput_measure(&g, w, &slo, TL_FROM_SCHEDULED, x.p, 3);
    cr_assert_eq(g.good, 1);
    cr_assert_float_eq(g.goodput, 2.0, 1e-9);
    /* No SLO set: every completed request is good: 3 / 0.5 = 6 = request rate. */
    tl_slo none = {0};
    window_goodput_measure(&g, w, &none, TL_FROM_SCHEDULED, x.p, 3);
    cr_assert_float_eq(g.goodput, 6.0, 1e-9);
    reqs_free(&x);
}

Test(window, goodput_judges_ttft_from_the_scheduled_start) {
    /* Scheduled 0, sent 200, first token 250, last byte 260: TTFT 250 ms
     * from schedule, 50 ms from send. SLO ttft <= 100 ms. */
    static const ev_ms ev[] = {{250, 1}, {260, 1}};
    timeline t;
    build(&t, 0, 200, 1, ev, 2, 260);
    tl_slo slo = {.ttft_ns = MS(100)};
    cr_assert_not(timeline_meets_slo(&t, &slo, TL_FROM_SCHEDULED));
    cr_assert(timeline_meets_slo(&t, &slo, TL_FROM_SENT));
    timeline_free(&t);
}

Test(window, tpot_slo_does_not_apply_to_one_token_requests) {
    static const ev_ms ev[] = {{40, 1}};
    timeline one, zero;
    build(&one, 0, 0, 3, ev, 1, 45);
    build(&zero, 0, 0, 3, NULL, 0, 45);
    tl_slo slo = {.tpot_ns = 1};
    cr_assert(timeline_meets_slo(&one, &slo, TL_FROM_SCHEDULED));
    /* A TTFT limit fails a request that never produced a token. */
    slo = (tl_slo){.ttft_ns = MS(1000)};
    cr_assert(timeline_meets_slo(&one, &slo, TL_FROM_SCHEDULED));
    cr_assert_not(timeline_meets_slo(&zero, &slo, TL_FROM_SCHEDULED));
    timeline_free(&one);
    timeline_free(&zero);
}

Test(window, failed_requests_count_their_tokens_but_not_completion) {
    /* Failed after 2 tokens @10, @20 (last byte 30); prompt 7 counts at 10.
     * Window (0, 100]: 2 output tokens, 7 input, 0 completed, 0 goodput. */
    static const ev_ms ev[] = {{10, 1}, {20, 1}};
    timeline t;
    build(&t, 0, 0, 7, ev, 2, TL_NONE);
    timeline_finish(&t, MS(30), false);
    const timeline *p = &t;
    window_tps m;
    window_measure(&m, (window){0, MS(100)}, &p, 1);
    cr_assert_eq(m.output_tokens, 2);
    cr_assert_eq(m.input_tokens, 7);
    cr_assert_eq(m.completed, 0);
    window_goodput g;
    tl_slo none = {0};
    window_goodput_measure(&g, (window){0, MS(100)}, &none, TL_FROM_SCHEDULED, &p, 1);
    cr_assert_eq(g.good, 0);
    timeline_free(&t);
}
