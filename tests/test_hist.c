/* Unit tests for src/metrics' histogram: its relative error bound over
 * sweeps of values, exact small values and extremes, underflow and overflow
 * counted, merge, export and import, iteration, and bad configs. The
 * per-request metrics and windows built on it are tests/test_metrics.c. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/hist.h"
#include "support/hist_make.h"

/* ---- helpers ------------------------------------------------------------- */

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
