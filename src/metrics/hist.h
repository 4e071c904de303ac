/* Log-linear histogram with bounded relative error, mergeable exactly across
 * threads and processes (HdrHistogram's idea, written small).
 *
 * Values are unsigned 64-bit integers in any unit (tps records nanoseconds).
 * With M = 2^m sub-buckets per power of two (M = the smallest power of two
 * >= 10^sig_digits):
 *   - values below M each have their own bucket (exact);
 *   - a value v >= M with floor(log2 v) = k lies in a bucket of width
 *     2^(k-m) that starts at or above M * 2^(k-m), so the bucket is at most
 *     1/M of any value in it.
 * hist_percentile reports the midpoint of the bucket it lands in (narrowed to
 * the recorded min/max), so its relative error is at most 1/(2M):
 *   sig_digits 1: 1/32 (3.1%)   2: 1/256 (0.39%)   3: 1/2048 (0.049%)
 *   4: 1/32768 (0.0031%).
 * Bucket indices depend only on sig_digits (never on lowest/highest), so the
 * exported index/count pairs mean the same thing in every process.
 *
 * Values outside [lowest, highest] are counted as underflow/overflow, never
 * dropped: count, min, max and mean cover every recorded value exactly;
 * percentiles rank every value but only those landing inside the range carry
 * the error bound (see hist_percentile).
 *
 * Recording never allocates, locks or calls the OS. A hist is not thread-safe:
 * keep one per thread and hist_merge them afterwards. */
#ifndef TPS_METRICS_HIST_H
#define TPS_METRICS_HIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define HIST_FORMAT_VERSION 1u /* version of the exported (summary, pairs) form */
#define HIST_MAX_SIG_DIGITS 4
#define HIST_MAX_VALUE      INT64_MAX /* highest may not exceed this (fits a JSON integer) */

typedef struct hist_config {
    uint64_t lowest;  /* smallest value tracked in buckets; smaller ones are underflow */
    uint64_t highest; /* largest value tracked in buckets; larger ones are overflow */
    int sig_digits;   /* 1..4: relative error <= 1/(2M), M = 2^ceil(log2(10^sig_digits)) */
} hist_config;

/* Latencies in nanoseconds: 0 (zero ITL gaps of multi-token events) up to one
 * hour, 0.39% error; about 4,560 buckets (36 KiB). */
#define HIST_CONFIG_LATENCY_NS                                                                     \
    ((hist_config){.lowest = 0, .highest = 3600ull * 1000000000ull, .sig_digits = 2})

typedef struct hist hist;

/* Everything but the buckets: with the non-empty (index, count) pairs it
 * rebuilds a hist exactly (hist_import). min and max are 0 when count is 0. */
typedef struct hist_summary {
    uint32_t version; /* HIST_FORMAT_VERSION */
    hist_config config;
    uint64_t count;     /* every recorded value, in range or not */
    uint64_t underflow; /* values < lowest */
    uint64_t overflow;  /* values > highest */
    uint64_t min, max;  /* exact, over every recorded value */
    uint64_t sum;       /* exact; saturates at UINT64_MAX (584 years of nanoseconds) */
} hist_summary;

/* One non-empty bucket: the values [lo, hi] (narrowed to [lowest, highest])
 * and how many were recorded there. */
typedef struct hist_bucket {
    uint32_t index; /* absolute bucket index (depends only on sig_digits) */
    uint64_t lo, hi;
    uint64_t count;
} hist_bucket;

typedef struct hist_iter {
    const hist *h; /* borrowed */
    size_t next;   /* private */
} hist_iter;

/* ---- create / free ---------------------------------------------------- */

/* Checks cfg (lowest <= highest <= HIST_MAX_VALUE, sig_digits 1..4) and
 * allocates one block for the struct and its buckets. */
int hist_create(hist **out, const hist_config *cfg, tps_err *e);
void hist_free(hist *h); /* NULL is fine */

/* ---- recording (hot path: no allocation) ------------------------------ */

void hist_record(hist *h, uint64_t value);
/* Same as calling hist_record count times. */
void hist_record_n(hist *h, uint64_t value, uint64_t count);
/* Forget every value; the config stays. */
void hist_reset(hist *h);

/* dst += src, exactly. TPS_EINVAL (dst unchanged) when the configs differ. */
int hist_merge(hist *dst, const hist *src, tps_err *e);

/* ---- reading ----------------------------------------------------------- */

hist_config hist_get_config(const hist *h);
uint64_t hist_count(const hist *h);
uint64_t hist_underflow(const hist *h);
uint64_t hist_overflow(const hist *h);
uint64_t hist_min(const hist *h); /* 0 when empty */
uint64_t hist_max(const hist *h); /* 0 when empty */
uint64_t hist_sum(const hist *h);
double hist_mean(const hist *h); /* sum / count; 0 when empty */

/* Value at percentile p in [0, 100] (clamped), by nearest rank: the r-th
 * smallest recorded value, r = ceil(p/100 * count) clamped to [1, count].
 *   r = 1 gives min and r = count gives max, exactly;
 *   otherwise, if the r-th value was in range, the midpoint of its bucket
 *   narrowed to [min, max]: |reported - true| <= true / (2M);
 *   if it was an underflowed value: min (a lower bound);
 *   if it was an overflowed value: max (an upper bound).
 * 0 when empty. */
uint64_t hist_percentile(const hist *h, double p);

/* The guaranteed relative error of hist_percentile for in-range values:
 * 1/(2M). */
double hist_error_bound(const hist *h);

/* ---- iteration and export ------------------------------------------------ */

/* Walks the non-empty buckets in increasing value order:
 *   hist_iter it; hist_bucket b;
 *   hist_iter_init(&it, h);
 *   while (hist_iter_next(&it, &b)) ...
 * The hist must not change during the walk. */
void hist_iter_init(hist_iter *it, const hist *h);
bool hist_iter_next(hist_iter *it, hist_bucket *out);

void hist_summarize(const hist *h, hist_summary *out);
/* Number of non-empty buckets: the length of the exported pair arrays. */
size_t hist_nonempty(const hist *h);
/* Writes the first min(cap, hist_nonempty(h)) non-empty buckets as
 * (index[i], count[i]) pairs in increasing index order; returns
 * hist_nonempty(h). Together with hist_summarize this is the compact form the
 * bench stores in its result JSON. */
size_t hist_export(const hist *h, uint32_t *index, uint64_t *count, size_t cap);
/* Rebuilds a hist from hist_summarize + hist_export output (possibly from
 * another process). Checks the version, the config, that indices are strictly
 * increasing and inside the config's range, that counts are non-zero and add
 * up (with underflow and overflow) to s->count, and that min/max agree with
 * the buckets. On error nothing is allocated. */
int hist_import(hist **out, const hist_summary *s, const uint32_t *index, const uint64_t *count,
                size_t n, tps_err *e);

#endif
