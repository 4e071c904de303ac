/* Unit tests for src/metrics: histogram error bound, merge and export;
 * per-request TTFT/ITL/TPOT/E2E; windows, TPS, series and goodput on
 * hand-built timelines whose answers are worked out in the comments.
 * Times are written in milliseconds and converted to ns with MS(). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "kernels/machine.h"
#include "metrics/cpu_load.h"
#include "metrics/hist.h"
#include "metrics/timeline.h"
#include "metrics/window.h"

#define MS(x) ((uint64_t)(x)*TPS_NS_PER_MS)

/* ---- helpers ------------------------------------------------------------- */

static hist *make_hist(uint64_t lowest, uint64_t highest, int digits) {
    hist *h = NULL;
    tps_err e = {{0}};
    hist_config c = {.lowest = lowest, .highest = highest, .sig_digits = digits};
    cr_assert_eq(hist_create(&h, &c, &e), TPS_OK, "%s", e.msg);
    return h;
}

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

/* Deterministic values spread over many decades. */
static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 11;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted v for p = pm / 1000 percent, in integers. */
static uint64_t exact_percentile(const uint64_t *v, size_t n, uint64_t pm) {
    uint64_t rank = (pm * n + 99999) / 100000;
    if (rank < 1) rank = 1;
    return v[rank - 1];
}

/* ---- histogram ------------------------------------------------------------ */

Test(hist, percentile_relative_error_is_bounded_over_a_sweep) {
    /* 20,000 values log-uniform over 1 .. 2^40, for each precision. Every
     * reported percentile is within true/(2M) of the exact nearest-rank one. */
    enum { N = 20000 };
    uint64_t *v = malloc(N * sizeof *v);
    static const uint64_t pms[] = {0,     1000,  10000, 25000, 50000, 75000,
                                   90000, 95000, 99000, 99900, 99990, 100000};
    for (int digits = 1; digits <= 3; digits++) {
        hist *h = make_hist(0, 1ull << 41, digits);
        uint64_t s = 42 + (uint64_t)digits;
        for (size_t i = 0; i < N; i++) {
            unsigned mag = (unsigned)(lcg(&s) % 40); /* v in [2^mag, 2^(mag+1)) */
            v[i] = (1ull << mag) | (lcg(&s) & ((1ull << mag) - 1));
            hist_record(h, v[i]);
        }
        qsort(v, N, sizeof *v, cmp_u64);
        double bound = hist_error_bound(h);
        cr_assert_float_eq(bound,
                           digits == 1   ? 1.0 / 32
                           : digits == 2 ? 1.0 / 256
                                         : 1.0 / 2048,
                           1e-15);
        for (size_t i = 0; i < sizeof pms / sizeof pms[0]; i++) {
            uint64_t want = exact_percentile(v, N, pms[i]);
            uint64_t got = hist_percentile(h, (double)pms[i] / 1000.0);
            double err = got > want ? (double)(got - want) : (double)(want - got);
            cr_assert(err <= bound * (double)want, "digits %d p%.3f: got %llu want %llu", digits,
                      pms[i] / 1000.0, (unsigned long long)got, (unsigned long long)want);
        }
        cr_assert_eq(hist_percentile(h, 0), v[0]);
        cr_assert_eq(hist_percentile(h, 100), v[N - 1]);
        hist_free(h);
    }
    free(v);
}

Test(hist, every_value_of_a_dense_sweep_reads_back_within_the_bound) {
    /* One value at a time, 0 .. 10^6 and then powers-of-two neighbours up to
     * 2^62, recorded between 0 and a huge value so it is the median (rank 2
     * of 3): p50 reads back the midpoint of its bucket. */
    hist *small = make_hist(0, 1ull << 21, 2);
    hist *h = make_hist(0, HIST_MAX_VALUE, 2);
    double bound = hist_error_bound(h);
    for (uint64_t x = 0; x < 1000000; x += 37) {
        hist_reset(small);
        hist_record(small, x);
        hist_record(small, 0);
        hist_record(small, HIST_MAX_VALUE); /* overflow there: still rank 3 */
        uint64_t got = hist_percentile(small, 50);
        double err = got > x ? (double)(got - x) : (double)(x - got);
        cr_assert(err <= bound * (double)x, "x %llu got %llu", (unsigned long long)x,
                  (unsigned long long)got);
    }
    for (uint64_t x = 1000; x < (1ull << 62); x += x / 3) {
        hist_reset(h);
        hist_record(h, x);
        hist_record(h, 0);
        hist_record(h, HIST_MAX_VALUE); /* x is the middle value: rank 2 of 3 */
        uint64_t got = hist_percentile(h, 50);
        double err = got > x ? (double)(got - x) : (double)(x - got);
        cr_assert(err <= bound * (double)x, "x %llu got %llu", (unsigned long long)x,
                  (unsigned long long)got);
    }
    hist_free(small);
    for (int k = 1; k < 62; k++) {
        uint64_t xs[3] = {(1ull << k) - 1, 1ull << k, (1ull << k) + 1};
        for (int j = 0; j < 3; j++) {
            hist_reset(h);
            hist_record(h, 0);
            hist_record(h, xs[j]);
            hist_record(h, HIST_MAX_VALUE);
            uint64_t got = hist_percentile(h, 50);
            double err = got > xs[j] ? (double)(got - xs[j]) : (double)(xs[j] - got);
            cr_assert(err <= bound * (double)xs[j]);
        }
    }
    hist_free(h);
}

Test(hist, values_below_sub_bucket_count_are_exact) {
    /* M = 128 at 2 digits: 0..127 each have their own bucket. */
    hist *h = make_hist(0, 1000000, 2);
    for (uint64_t x = 0; x < 128; x++)
        hist_record(h, x);
    /* rank ceil(0.5 * 128) = 64 -> value 63 */
    cr_assert_eq(hist_percentile(h, 50), 63);
    cr_assert_eq(hist_percentile(h, 25), 31);
    cr_assert_eq(hist_nonempty(h), 128);
    hist_free(h);
}

Test(hist, mean_min_max_are_exact) {
    hist *h = make_hist(0, 1ull << 40, 1);
    /* 1000 + 1001 + 123456789 = 123458790; / 3 = 41152930 */
    hist_record(h, 1000);
    hist_record(h, 1001);
    hist_record(h, 123456789);
    cr_assert_eq(hist_count(h), 3);
    cr_assert_eq(hist_min(h), 1000);
    cr_assert_eq(hist_max(h), 123456789);
    cr_assert_eq(hist_sum(h), 123458790);
    cr_assert_float_eq(hist_mean(h), 41152930.0, 1e-6);
    hist_free(h);
}

Test(hist, underflow_and_overflow_are_counted_not_dropped) {
    hist *h = make_hist(1000, 1000000, 2);
    hist_record(h, 5);            /* underflow */
    hist_record_n(h, 999, 2);     /* underflow x2 */
    hist_record(h, 5000);         /* in range */
    hist_record(h, 2000000);      /* overflow */
    hist_record_n(h, 1000001, 3); /* overflow x3 */
    cr_assert_eq(hist_count(h), 8);
    cr_assert_eq(hist_underflow(h), 3);
    cr_assert_eq(hist_overflow(h), 4);
    cr_assert_eq(hist_nonempty(h), 1);
    cr_assert_eq(hist_min(h), 5);
    cr_assert_eq(hist_max(h), 2000000);
    /* sum = 5 + 1998 + 5000 + 2000000 + 3000003 = 5007006 */
    cr_assert_eq(hist_sum(h), 5007006);
    /* ranks: 1..3 underflow, 4 in range, 5..8 overflow */
    cr_assert_eq(hist_percentile(h, 30), 5); /* rank 3: underflow -> min */
    /* rank 4: 5000 lies in [4992, 5023] (width 2^(12-7) = 32): midpoint 5007,
     * within 5000/256 */
    cr_assert_eq(hist_percentile(h, 50), 5007);
    cr_assert_eq(hist_percentile(h, 70), 2000000); /* rank 6: overflow -> max */
    hist_free(h);
}

static void assert_same_hist(const hist *a, const hist *b) {
    hist_summary sa, sb;
    hist_summarize(a, &sa);
    hist_summarize(b, &sb);
    cr_assert_eq(sa.count, sb.count);
    cr_assert_eq(sa.underflow, sb.underflow);
    cr_assert_eq(sa.overflow, sb.overflow);
    cr_assert_eq(sa.min, sb.min);
    cr_assert_eq(sa.max, sb.max);
    cr_assert_eq(sa.sum, sb.sum);
    size_t n = hist_nonempty(a);
    cr_assert_eq(n, hist_nonempty(b));
    uint32_t *ia = malloc(n * sizeof *ia), *ib = malloc(n * sizeof *ib);
    uint64_t *ca = malloc(n * sizeof *ca), *cb = malloc(n * sizeof *cb);
    cr_assert_eq(hist_export(a, ia, ca, n), n);
    cr_assert_eq(hist_export(b, ib, cb, n), n);
    cr_assert_eq(memcmp(ia, ib, n * sizeof *ia), 0);
    cr_assert_eq(memcmp(ca, cb, n * sizeof *ca), 0);
    for (double p = 0; p <= 100; p += 0.5)
        cr_assert_eq(hist_percentile(a, p), hist_percentile(b, p));
    free(ia);
    free(ib);
    free(ca);
    free(cb);
}

Test(hist, record_n_equals_n_records) {
    hist *a = make_hist(0, 1ull << 30, 2), *b = make_hist(0, 1ull << 30, 2);
    hist_record_n(a, 777777, 5);
    for (int i = 0; i < 5; i++)
        hist_record(b, 777777);
    assert_same_hist(a, b);
    hist_free(a);
    hist_free(b);
}

Test(hist, merge_equals_recording_everything_into_one) {
    hist *all = make_hist(10, 1ull << 36, 3);
    hist *part[3] = {make_hist(10, 1ull << 36, 3), make_hist(10, 1ull << 36, 3),
                     make_hist(10, 1ull << 36, 3)};
    uint64_t s = 7;
    for (int i = 0; i < 30000; i++) {
        uint64_t x = lcg(&s) >> (lcg(&s) % 50); /* includes under- and overflow */
        hist_record(all, x);
        hist_record(part[i % 3], x);
    }
    tps_err e = {{0}};
    hist *merged = make_hist(10, 1ull << 36, 3);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(hist_merge(merged, part[i], &e), TPS_OK);
    cr_assert_gt(hist_underflow(all), 0);
    cr_assert_gt(hist_overflow(all), 0);
    assert_same_hist(all, merged);
    for (int i = 0; i < 3; i++)
        hist_free(part[i]);
    hist_free(merged);
    hist_free(all);
}

Test(hist, merge_refuses_different_configs) {
    hist *a = make_hist(0, 1000000, 2), *b = make_hist(0, 1000000, 3);
    hist_record(b, 5);
    tps_err e = {{0}};
    cr_assert_eq(hist_merge(a, b, &e), TPS_EINVAL);
    cr_assert_neq(strstr(e.msg, "different configs"), NULL);
    cr_assert_eq(hist_count(a), 0);
    hist_free(a);
    hist_free(b);
}

Test(hist, export_then_import_rebuilds_it_exactly) {
    hist *h = make_hist(100, 1ull << 40, 2);
    uint64_t s = 99;
    for (int i = 0; i < 5000; i++)
        hist_record(h, lcg(&s) >> (lcg(&s) % 55));
    hist_summary sum;
    hist_summarize(h, &sum);
    size_t n = hist_nonempty(h);
    uint32_t *idx = malloc(n * sizeof *idx);
    uint64_t *cnt = malloc(n * sizeof *cnt);
    cr_assert_eq(hist_export(h, idx, cnt, n), n);
    hist *back = NULL;
    tps_err e = {{0}};
    cr_assert_eq(hist_import(&back, &sum, idx, cnt, n, &e), TPS_OK, "%s", e.msg);
    assert_same_hist(h, back);
    hist_free(back);

    /* Corruptions are refused with a message. */
    hist_summary bad = sum;
    bad.version = 99;
    cr_assert_eq(hist_import(&back, &bad, idx, cnt, n, &e), TPS_EUNSUP);
    bad = sum;
    bad.count++;
    cr_assert_eq(hist_import(&back, &bad, idx, cnt, n, &e), TPS_EINVAL);
    bad = sum;
    bad.min = bad.max + 1;
    cr_assert_eq(hist_import(&back, &bad, idx, cnt, n, &e), TPS_EINVAL);
    if (n >= 2) {
        uint32_t t = idx[0];
        idx[0] = idx[1];
        cr_assert_eq(hist_import(&back, &sum, idx, cnt, n, &e), TPS_EINVAL);
        idx[0] = t;
    }
    idx[n - 1] = 1u << 30;
    cr_assert_eq(hist_import(&back, &sum, idx, cnt, n, &e), TPS_ERANGE);
    cr_assert_null(back);
    free(idx);
    free(cnt);
    hist_free(h);
}

Test(hist, iteration_walks_nonempty_buckets_in_order) {
    hist *h = make_hist(0, 1ull << 40, 2);
    hist_record(h, 3);
    hist_record_n(h, 1000000, 4);
    hist_record(h, 50);
    hist_iter it;
    hist_bucket b;
    hist_iter_init(&it, h);
    cr_assert(hist_iter_next(&it, &b));
    cr_assert(b.lo == 3 && b.hi == 3 && b.count == 1);
    cr_assert(hist_iter_next(&it, &b));
    cr_assert(b.lo == 50 && b.hi == 50 && b.count == 1);
    cr_assert(hist_iter_next(&it, &b));
    /* 10^6 in [2^19, 2^20): width 2^(19-7) = 4096 */
    cr_assert(b.lo <= 1000000 && 1000000 <= b.hi && b.hi - b.lo == 4095 && b.count == 4);
    cr_assert_not(hist_iter_next(&it, &b));
    hist_free(h);
}

Test(hist, create_rejects_bad_configs) {
    hist *h = NULL;
    tps_err e = {{0}};
    hist_config c = {.lowest = 10, .highest = 5, .sig_digits = 2};
    cr_assert_eq(hist_create(&h, &c, &e), TPS_EINVAL);
    c = (hist_config){.lowest = 0, .highest = 5, .sig_digits = 5};
    cr_assert_eq(hist_create(&h, &c, &e), TPS_EINVAL);
    c = (hist_config){.lowest = 0, .highest = UINT64_MAX, .sig_digits = 2};
    cr_assert_eq(hist_create(&h, &c, &e), TPS_EINVAL);
    cr_assert_null(h);
    c = HIST_CONFIG_LATENCY_NS;
    cr_assert_eq(hist_create(&h, &c, &e), TPS_OK);
    hist_free(h);
}

Test(hist, empty_histogram_reads_zero) {
    hist *h = make_hist(0, 1000, 2);
    cr_assert_eq(hist_percentile(h, 99), 0);
    cr_assert_eq(hist_min(h), 0);
    cr_assert_eq(hist_max(h), 0);
    cr_assert_float_eq(hist_mean(h), 0.0, 0);
    hist_free(h);
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

/* Three requests (ms):
 *   A: sent 0,   prompt 10, tokens 1 @100, 1 @200, 1 @300; last byte 300
 *   B: sent 50,  prompt 20, tokens 1 @150, 2 @250, 1 @350; last byte 400
 *   C: sent 100, prompt 30, tokens 1 @300, 1 @500;         last byte 500
 * Output tokens 3 + 4 + 2 = 9. Input counts at first token: A@100, B@150,
 * C@300. */
typedef struct abc {
    timeline t[3];
    const timeline *p[3];
} abc;

static void build_abc(abc *x) {
    static const ev_ms a[] = {{100, 1}, {200, 1}, {300, 1}};
    static const ev_ms c[] = {{300, 1}, {500, 1}};
    build(&x->t[0], 0, 0, 10, a, 3, 300);
    build(&x->t[1], 50, 50, 20, B_EV, 3, 400);
    build(&x->t[2], 100, 100, 30, c, 2, 500);
    for (int i = 0; i < 3; i++)
        x->p[i] = &x->t[i];
}

static void free_abc(abc *x) {
    for (int i = 0; i < 3; i++)
        timeline_free(&x->t[i]);
}

Test(window, run_window_tps_of_three_requests) {
    abc x;
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
    free_abc(&x);
}

Test(window, window_is_open_at_t0_and_closed_at_t1) {
    abc x;
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
    free_abc(&x);
}

Test(window, bins_partition_the_window_and_peak_is_the_busiest_bin) {
    abc x;
    build_abc(&x);
    window w = {0, MS(500)};
    tps_err e = {{0}};
    /* 100 ms bins: (0,100] A@100 = 1; (100,200] A@200 B@150 = 2;
     * (200,300] A@300 B 2@250 C@300 = 4; (300,400] B@350 = 1;
     * (400,500] C@500 = 1. Sum 9 = run window. Peak: bin 2, 4 / 0.1 s = 40. */
    size_t nb = window_nbins(w, MS(100));
    cr_assert_eq(nb, 5);
    uint64_t out[5], in[5];
    cr_assert_eq(window_series(out, in, nb, w, MS(100), x.p, 3, &e), TPS_OK);
    uint64_t want[5] = {1, 2, 4, 1, 1}, want_in[5] = {10, 20, 30, 0, 0};
    for (int k = 0; k < 5; k++) {
        cr_assert_eq(out[k], want[k], "bin %d", k);
        cr_assert_eq(in[k], want_in[k], "bin %d", k);
    }
    size_t peak;
    cr_assert_float_eq(window_peak(out, nb, w, MS(100), &peak), 40.0, 1e-9);
    cr_assert_eq(peak, 2);
    cr_assert_eq(window_series(out, NULL, 4, w, MS(100), x.p, 3, &e), TPS_EINVAL);
    free_abc(&x);
}

Test(window, short_last_bin_is_kept_but_not_a_peak) {
    abc x;
    build_abc(&x);
    window w = {0, MS(500)};
    tps_err e = {{0}};
    /* 200 ms bins: (0,200] = 3; (200,400] = 5; (400,500] = 1 (short).
     * Peak: full bins only -> bin 1, 5 / 0.2 s = 25 tok/s. */
    uint64_t out[3];
    cr_assert_eq(window_nbins(w, MS(200)), 3);
    cr_assert_eq(window_series(out, NULL, 3, w, MS(200), x.p, 3, &e), TPS_OK);
    cr_assert(out[0] == 3 && out[1] == 5 && out[2] == 1);
    size_t peak;
    cr_assert_float_eq(window_peak(out, 3, w, MS(200), &peak), 25.0, 1e-9);
    cr_assert_eq(peak, 1);
    free_abc(&x);
}

/* Closed loop at concurrency 2 (ms):
 *   R1 sent 0,   last byte 100     in flight: 1 @0, 2 @10 (target reached)
 *   R2 sent 10,  last byte 150     @100 R1 ends then R3 sends: stays 2
 *   R3 sent 100, last byte 250     @150 R2 ends then R4 sends (last send)
 *   R4 sent 150, last byte 300     first end after 150: R3 @250
 * Each carries one token 5 ms before its last byte. */
typedef struct closed4 {
    timeline t[4];
    const timeline *p[4];
} closed4;

static void build_closed4(closed4 *x) {
    static const uint64_t sent[4] = {0, 10, 100, 150}, end[4] = {100, 150, 250, 300};
    for (int i = 0; i < 4; i++) {
        ev_ms ev = {end[i] - 5, 1};
        build(&x->t[i], sent[i], sent[i], 1, &ev, 1, end[i]);
        x->p[i] = &x->t[i];
    }
}

static void free_closed4(closed4 *x) {
    for (int i = 0; i < 4; i++)
        timeline_free(&x->t[i]);
}

Test(window, steady_runs_from_target_concurrency_to_first_drain_completion) {
    closed4 x;
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
    free_closed4(&x);
}

Test(window, steady_open_loop_starts_at_first_completion) {
    closed4 x;
    build_closed4(&x);
    window w;
    tps_err e = {{0}};
    steady_opts o = {0};
    cr_assert_eq(window_steady(&w, &o, x.p, 4, &e), TPS_OK, "%s", e.msg);
    cr_assert_eq(w.t0, MS(100));
    cr_assert_eq(w.t1, MS(250));
    free_closed4(&x);
}

Test(window, steady_fails_when_target_never_reached) {
    closed4 x;
    build_closed4(&x);
    window w;
    tps_err e = {{0}};
    steady_opts o = {.target_concurrency = 3};
    cr_assert_eq(window_steady(&w, &o, x.p, 4, &e), TPS_ERANGE);
    cr_assert_neq(strstr(e.msg, "peak 2"), NULL, "%s", e.msg);
    free_closed4(&x);
}

Test(window, steady_trimmed_by_warmup_and_cooldown) {
    closed4 x;
    build_closed4(&x);
    window w;
    tps_err e = {{0}};
    /* run (0, 300]; warmup 50, cooldown 100 -> (50, 200] */
    steady_opts o = {.warmup_ns = MS(50), .cooldown_ns = MS(100), .target_concurrency = 2};
    cr_assert_eq(window_steady(&w, &o, x.p, 4, &e), TPS_OK);
    cr_assert_eq(w.t0, MS(50));
    cr_assert_eq(w.t1, MS(200));
    o.cooldown_ns = MS(250);
    cr_assert_eq(window_steady(&w, &o, x.p, 4, &e), TPS_ERANGE);
    free_closed4(&x);
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
    abc x;
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
    free_abc(&x);
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

/* ---- the machine-limits cache --------------------------------------------- */

Test(machine_cache, round_trips_and_keeps_one_measurement_per_vector_width) {
    char dir[] = "/tmp/tps-machine-cache-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    cr_assert_eq(setenv("XDG_CACHE_HOME", dir, 1), 0);
    tps_err err = {{0}};
    machine_limits m = {.threads = 3, .read_gbs = 40.5, .int8_gops = 600, .fp32_gflops = 200};
    machine_cpu_name(m.cpu, sizeof m.cpu);
    m.int8_bits = 512;
    cr_assert_eq(machine_cache_save(&m, &err), 0, "%s", err.msg);
    machine_limits got;
    cr_assert_eq(machine_cache_load(&got, 3, 512, &err), 0, "%s", err.msg);
    cr_assert_eq(got.int8_bits, 512);
    cr_assert_float_eq(got.int8_gops, 600, 1e-9);
    /* an AVX2 build on the same machine measures with 256-bit vectors: its
     * peak is another figure, kept beside the other, not over it */
    cr_assert_eq(machine_cache_load(&got, 3, 256, &err), TPS_ENOENT);
    m.int8_bits = 256;
    m.int8_gops = 230;
    cr_assert_eq(machine_cache_save(&m, &err), 0, "%s", err.msg);
    cr_assert_eq(machine_cache_load(&got, 3, 256, &err), 0, "%s", err.msg);
    cr_assert_float_eq(got.int8_gops, 230, 1e-9);
    cr_assert_eq(machine_cache_load(&got, 3, 512, &err), 0, "%s", err.msg);
    cr_assert_float_eq(got.int8_gops, 600, 1e-9);
    cr_assert(!got.busy);
    /* a busy measurement kept on purpose (tps machine --cache-busy) reads back busy */
    m.busy = true;
    snprintf(m.busy_why, sizeof m.busy_why, "other processes used 50%% of the CPUs");
    cr_assert_eq(machine_cache_save(&m, &err), 0, "%s", err.msg);
    cr_assert_eq(machine_cache_load(&got, 3, 256, &err), 0, "%s", err.msg);
    cr_assert(got.busy);
    cr_assert_str_eq(got.busy_why, m.busy_why);
    m.busy = false;
    /* this build's own width is what machine_limits_get keys its cache by */
    machine_limits mine;
    cr_assert_eq(machine_measure(&mine, 1, 8, &err), 0, "%s", err.msg);
    cr_assert_eq(mine.int8_bits, machine_int8_bits());
    /* a file whose width is not its name's, or from before the width was
     * recorded, does not load */
    char path[4200];
    cr_assert_eq(machine_cache_path(path, sizeof path, 3, 512, &err), 0);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f,
            "cpu %s\nthreads 3\nread_gbs 40\nint8_gops 300\nint8_bits 256\nfp32_gflops 200\n"
            "measured_s 1\n",
            m.cpu);
    fclose(f);
    cr_assert_eq(machine_cache_load(&got, 3, 512, &err), TPS_EINVAL);
    f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f, "cpu %s\nthreads 3\nread_gbs 40\nint8_gops 300\nfp32_gflops 200\nmeasured_s 1\n",
            m.cpu);
    fclose(f);
    cr_assert_neq(machine_cache_load(&got, 3, 512, &err), 0);
    unlink(path);
    cr_assert_eq(machine_cache_path(path, sizeof path, 3, 256, &err), 0);
    unlink(path);
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/tps", dir);
    rmdir(sub);
    rmdir(dir);
}

/* ---- a busy machine ---------------------------------------------------------- */

Test(cpu_load, others_are_the_busy_time_this_process_did_not_use) {
    const char *stat0 = "cpu  100 0 50 800 10 0 0 40 0 0\ncpu0 50 0 25 400 5 0 0 20 0 0\n"
                        "intr 1\nprocs_running 3\nprocs_blocked 0\n";
    const char *stat1 = "cpu  400 0 150 1000 10 0 0 40 0 0\ncpu0 200 0 75 500 5 0 0 20 0 0\n"
                        "procs_running 1\n";
    /* pid (comm with ) and spaces) state ppid ... utime stime at fields 14, 15 */
    const char *self0 = "42 (a b) c) R 1 1 1 0 -1 0 0 0 0 0 100 20 0 0 20 0 1";
    const char *self1 = "42 (a b) c) R 1 1 1 0 -1 0 0 0 0 0 200 120 0 0 20 0 1";
    cpu_sample a, b;
    cr_assert(cpu_sample_parse(&a, stat0, self0));
    cr_assert(cpu_sample_parse(&b, stat1, self1));
    cr_expect_eq(a.total, 1000);
    cr_expect_eq(a.busy, 150);
    cr_expect_eq(a.steal, 40);
    cr_expect_eq(a.own, 120);
    cr_expect_eq(a.running, 3);
    /* 600 ticks passed; 400 were busy, 200 of them this process's */
    cpu_contention c = cpu_contention_between(&a, &b);
    cr_assert(c.known);
    cr_expect_float_eq(c.others, 200.0 / 600.0, 1e-12);
    cr_expect_float_eq(c.steal, 0, 1e-12);
    char why[160];
    cr_expect(cpu_contention_busy(&c, why, sizeof why));
    cr_expect(strstr(why, "other processes used 33% of the CPUs") != NULL, "%s", why);
    c.others = 0.02;
    cr_expect(!cpu_contention_busy(&c, why, sizeof why), "%s", why);
    c.runnable = 2;
    cr_expect(cpu_contention_busy(&c, why, sizeof why));
    cr_expect(strstr(why, "2 threads of other processes waiting to run") != NULL, "%s", why);
    cr_expect(!cpu_sample_parse(&a, "intr 1\n", self0), "no cpu line");
    cr_expect(!cpu_sample_parse(&a, stat0, "42 (x"), "no utime");
}

Test(roofline_flag, a_share_above_the_limit_or_of_a_busy_limit_says_why) {
    machine_limits quiet = {.read_gbs = 10}, busy = {.read_gbs = 10, .busy = true};
    cr_expect_null(roofline_flag(0.8, &quiet, true));
    cr_expect_null(roofline_flag(1.0, &quiet, true), "100%% is at the limit, not above it");
    cr_expect(strstr(roofline_flag(1.3, &quiet, true), "caches") != NULL);
    cr_expect(strstr(roofline_flag(1.3, &quiet, false), "no computation can be") != NULL);
    cr_expect(strstr(roofline_flag(0.5, &busy, true), "busy") != NULL);
}

/* Spins for at most seconds (a bounded busy loop in a child process). */
static pid_t spin_child(double seconds) {
    pid_t pid = fork();
    if (pid == 0) {
        const uint64_t end = tps_now_ns() + (uint64_t)(seconds * 1e9);
        volatile uint64_t x = 0;
        while (tps_now_ns() < end)
            for (int k = 0; k < 100000; k++)
                x += (uint64_t)k;
        (void)x;
        _exit(0);
    }
    return pid;
}

/* Under a busy loop on every core, the limits measured are the contention's:
 * flagged busy, with why, and not cached, so the next caller measures again. */
Test(machine_limits, a_measurement_under_a_busy_loop_is_flagged_and_not_cached, .timeout = 120) {
    char dir[] = "/tmp/tps-machine-busy-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    cr_assert_eq(setenv("XDG_CACHE_HOME", dir, 1), 0);
    const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    pid_t kids[64];
    long nk = 0;
    for (; nk < ncpu + 1 && nk < 64; nk++)
        cr_assert_gt(kids[nk] = spin_child(60), 0);
    machine_limits m;
    tps_err err = {{0}};
    int rc = machine_limits_get(&m, 1, &err);
    for (long k = 0; k < nk; k++) {
        kill(kids[k], SIGKILL);
        waitpid(kids[k], NULL, 0);
    }
    cr_assert_eq(rc, 0, "%s", err.msg);
    cr_expect(m.busy, "measured beside %ld busy loops, yet quiet", nk);
    cr_expect(m.busy_why[0] != 0);
    machine_limits got;
    cr_expect_eq(machine_cache_load(&got, 1, machine_int8_bits(), &err), TPS_ENOENT,
                 "a busy measurement was cached");
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/tps", dir);
    rmdir(sub);
    rmdir(dir);
    unsetenv("XDG_CACHE_HOME");
}

/* A run's steal per bin from readings every so often: each counter linear
 * between two readings, so a bin between them takes its share of both. */
Test(cpu_load, steal_over_any_interval_between_readings) {
    const uint64_t S = 1000000000ull;
    /* 200 ticks a second (2 CPUs); none stolen in the first second, half
     * of the second, a quarter of the third */
    const cpu_tick t[] = {
        {1 * S, 1000, 10}, {2 * S, 1200, 10}, {3 * S, 1400, 110}, {4 * S, 1600, 160}};
    cr_expect_float_eq(cpu_ticks_steal(t, 4, 1 * S, 2 * S), 0.0, 1e-12);
    cr_expect_float_eq(cpu_ticks_steal(t, 4, 2 * S, 3 * S), 0.5, 1e-12);
    cr_expect_float_eq(cpu_ticks_steal(t, 4, 1 * S, 4 * S), 150.0 / 600.0, 1e-12);
    /* half a second of none, half of half */
    cr_expect_float_eq(cpu_ticks_steal(t, 4, 1 * S + S / 2, 2 * S + S / 2), 0.25, 1e-12);
    cr_expect_float_eq(cpu_ticks_steal(t, 4, 3 * S + S / 2, 4 * S), 0.25, 1e-12);
    cr_expect_eq(cpu_ticks_steal(t, 4, S / 2, 2 * S), -1, "before the first reading");
    cr_expect_eq(cpu_ticks_steal(t, 4, 3 * S, 5 * S), -1, "after the last");
    cr_expect_eq(cpu_ticks_steal(t, 1, 1 * S, 1 * S), -1, "one reading covers nothing");
    cr_expect_eq(cpu_ticks_steal(t, 4, 2 * S, 2 * S), -1, "no time");
    cr_expect_eq(cpu_ticks_steal(t, 4, 2 * S, 2 * S + S / 4), -1, "50 ticks: too coarse");
}
