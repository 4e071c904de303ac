/* Log-linear histogram (see hist.h for the bucket scheme and error bound).
 * Not here: formatting, JSON, locking — callers keep one hist per thread and
 * merge, and turn the exported arrays into whatever file format they write. */
#include "metrics/hist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct hist {
    hist_config cfg;
    unsigned m;       /* sub-bucket bits: M = 1 << m */
    uint32_t base;    /* absolute index of the bucket holding cfg.lowest */
    size_t nbuckets;  /* buckets from base up to the one holding cfg.highest */
    uint64_t count;   /* every recorded value */
    uint64_t under;   /* values < lowest */
    uint64_t over;    /* values > highest */
    uint64_t min;     /* UINT64_MAX while empty */
    uint64_t max;     /* 0 while empty */
    uint64_t sum;     /* saturating */
    uint64_t *counts; /* (nbuckets,), points just past the struct */
};

/* ---- bucket arithmetic ---------------------------------------------------- */

static unsigned sub_bits_for(int sig_digits) {
    uint64_t want = 1;
    for (int i = 0; i < sig_digits; i++)
        want *= 10;
    unsigned m = 0;
    while ((1ull << m) < want)
        m++;
    return m; /* 1 -> 4, 2 -> 7, 3 -> 10, 4 -> 14 */
}

/* Absolute bucket index of v: v itself below M, then M buckets per power of
 * two, each 2^(k-m) wide for values in [2^k, 2^(k+1)). */
static inline uint32_t bucket_of(unsigned m, uint64_t v) {
    uint64_t M = 1ull << m;
    if (v < M) return (uint32_t)v;
    unsigned k = 63u - (unsigned)__builtin_clzll(v);
    unsigned shift = k - m;
    return (uint32_t)(((uint64_t)(k - m + 1) << m) + ((v >> shift) - M));
}

/* Smallest and largest value of bucket idx (not narrowed to the config). */
static void bucket_bounds(unsigned m, uint32_t idx, uint64_t *lo, uint64_t *hi) {
    uint64_t M = 1ull << m;
    if (idx < M) {
        *lo = *hi = idx;
        return;
    }
    unsigned shift = (idx >> m) - 1;
    uint64_t sub = idx & (M - 1);
    *lo = (M + sub) << shift;
    *hi = *lo + ((1ull << shift) - 1);
}

static int check_config(const hist_config *c, tps_err *e) {
    if (!c) return tps_fail(e, TPS_EINVAL, "histogram config is missing");
    if (c->sig_digits < 1 || c->sig_digits > HIST_MAX_SIG_DIGITS)
        return tps_fail(e, TPS_EINVAL, "histogram significant digits must be 1..%d, not %d",
                        HIST_MAX_SIG_DIGITS, c->sig_digits);
    if (c->highest > (uint64_t)HIST_MAX_VALUE)
        return tps_fail(e, TPS_EINVAL, "histogram highest value %llu is above 2^63-1",
                        (unsigned long long)c->highest);
    if (c->lowest > c->highest)
        return tps_fail(e, TPS_EINVAL, "histogram lowest value %llu is above highest %llu",
                        (unsigned long long)c->lowest, (unsigned long long)c->highest);
    return TPS_OK;
}

static bool same_config(const hist_config *a, const hist_config *b) {
    return a->lowest == b->lowest && a->highest == b->highest && a->sig_digits == b->sig_digits;
}

static void clear_values(hist *h) {
    h->count = h->under = h->over = h->sum = h->max = 0;
    h->min = UINT64_MAX;
    memset(h->counts, 0, h->nbuckets * sizeof h->counts[0]);
}

/* ---- create / free ---------------------------------------------------- */

int hist_create(hist **out, const hist_config *cfg, tps_err *e) {
    *out = NULL;
    int rc = check_config(cfg, e);
    if (rc) return rc;
    unsigned m = sub_bits_for(cfg->sig_digits);
    uint32_t base = bucket_of(m, cfg->lowest);
    size_t nbuckets = (size_t)bucket_of(m, cfg->highest) - base + 1;
    hist *h = malloc(sizeof *h + nbuckets * sizeof(uint64_t));
    if (!h) return tps_fail(e, TPS_ENOMEM, "cannot allocate a histogram of %zu buckets", nbuckets);
    h->cfg = *cfg;
    h->m = m;
    h->base = base;
    h->nbuckets = nbuckets;
    h->counts = (uint64_t *)(h + 1);
    clear_values(h);
    *out = h;
    return TPS_OK;
}

void hist_free(hist *h) {
    free(h);
}

/* ---- recording ---------------------------------------------------------- */

static inline uint64_t sat_add(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

void hist_record_n(hist *h, uint64_t value, uint64_t count) {
    if (count == 0) return;
    if (value < h->cfg.lowest)
        h->under += count;
    else if (value > h->cfg.highest)
        h->over += count;
    else
        h->counts[bucket_of(h->m, value) - h->base] += count;
    h->count += count;
    uint64_t prod;
    h->sum = __builtin_mul_overflow(value, count, &prod) ? UINT64_MAX : sat_add(h->sum, prod);
    if (value < h->min) h->min = value;
    if (value > h->max) h->max = value;
}

void hist_record(hist *h, uint64_t value) {
    hist_record_n(h, value, 1);
}

void hist_reset(hist *h) {
    clear_values(h);
}

int hist_merge(hist *dst, const hist *src, tps_err *e) {
    if (!same_config(&dst->cfg, &src->cfg))
        return tps_fail(e, TPS_EINVAL,
                        "cannot merge histograms with different configs "
                        "(lowest %llu/%llu, highest %llu/%llu, digits %d/%d)",
                        (unsigned long long)dst->cfg.lowest, (unsigned long long)src->cfg.lowest,
                        (unsigned long long)dst->cfg.highest, (unsigned long long)src->cfg.highest,
                        dst->cfg.sig_digits, src->cfg.sig_digits);
    for (size_t i = 0; i < dst->nbuckets; i++)
        dst->counts[i] += src->counts[i];
    dst->count += src->count;
    dst->under += src->under;
    dst->over += src->over;
    dst->sum = sat_add(dst->sum, src->sum);
    if (src->min < dst->min) dst->min = src->min;
    if (src->max > dst->max) dst->max = src->max;
    return TPS_OK;
}

/* ---- reading ------------------------------------------------------------ */

hist_config hist_get_config(const hist *h) {
    return h->cfg;
}
uint64_t hist_count(const hist *h) {
    return h->count;
}
uint64_t hist_underflow(const hist *h) {
    return h->under;
}
uint64_t hist_overflow(const hist *h) {
    return h->over;
}
uint64_t hist_min(const hist *h) {
    return h->count ? h->min : 0;
}
uint64_t hist_max(const hist *h) {
    return h->max;
}
uint64_t hist_sum(const hist *h) {
    return h->sum;
}
double hist_mean(const hist *h) {
    return h->count ? (double)h->sum / (double)h->count : 0.0;
}

double hist_error_bound(const hist *h) {
    return 1.0 / (double)(2ull << h->m);
}

/* Bounds of bucket slot i narrowed to the config's range. */
static void slot_bounds(const hist *h, size_t i, uint64_t *lo, uint64_t *hi) {
    bucket_bounds(h->m, h->base + (uint32_t)i, lo, hi);
    if (*lo < h->cfg.lowest) *lo = h->cfg.lowest;
    if (*hi > h->cfg.highest) *hi = h->cfg.highest;
}

uint64_t hist_percentile(const hist *h, double p) {
    if (h->count == 0) return 0;
    if (!(p > 0.0)) p = 0.0; /* also NaN */
    if (p > 100.0) p = 100.0;
    /* Nearest rank; the tiny relative nudge keeps p = 99.9 of 1000 values
     * at rank 999 even though 99.9/100*1000 is 999.0000000000001 in binary. */
    double r = p / 100.0 * (double)h->count;
    double rc = ceil(r - r * 1e-12);
    uint64_t rank = rc < 1.0 ? 1 : (rc >= (double)h->count ? h->count : (uint64_t)rc);
    if (rank == 1) return h->min;
    if (rank == h->count) return h->max;
    if (rank <= h->under) return h->min;
    uint64_t seen = h->under;
    for (size_t i = 0; i < h->nbuckets; i++) {
        seen += h->counts[i];
        if (seen >= rank) {
            uint64_t lo, hi;
            slot_bounds(h, i, &lo, &hi);
            if (lo < h->min) lo = h->min;
            if (hi > h->max) hi = h->max;
            return lo + (hi - lo) / 2;
        }
    }
    return h->max; /* the rank lies among the overflowed values */
}

/* ---- iteration and export ------------------------------------------------ */

void hist_iter_init(hist_iter *it, const hist *h) {
    it->h = h;
    it->next = 0;
}

bool hist_iter_next(hist_iter *it, hist_bucket *out) {
    const hist *h = it->h;
    while (it->next < h->nbuckets && h->counts[it->next] == 0)
        it->next++;
    if (it->next >= h->nbuckets) return false;
    size_t i = it->next++;
    out->index = h->base + (uint32_t)i;
    out->count = h->counts[i];
    slot_bounds(h, i, &out->lo, &out->hi);
    return true;
}

void hist_summarize(const hist *h, hist_summary *out) {
    out->version = HIST_FORMAT_VERSION;
    out->config = h->cfg;
    out->count = h->count;
    out->underflow = h->under;
    out->overflow = h->over;
    out->min = hist_min(h);
    out->max = hist_max(h);
    out->sum = h->sum;
}

size_t hist_nonempty(const hist *h) {
    size_t n = 0;
    for (size_t i = 0; i < h->nbuckets; i++)
        n += h->counts[i] != 0;
    return n;
}

size_t hist_export(const hist *h, uint32_t *index, uint64_t *count, size_t cap) {
    size_t n = 0;
    for (size_t i = 0; i < h->nbuckets; i++) {
        if (h->counts[i] == 0) continue;
        if (n < cap) {
            index[n] = h->base + (uint32_t)i;
            count[n] = h->counts[i];
        }
        n++;
    }
    return n;
}

/* Which region a value falls in: -1 underflow, 0 in range, 1 overflow. */
static int region_of(const hist_config *c, uint64_t v) {
    return v < c->lowest ? -1 : v > c->highest ? 1 : 0;
}

int hist_import(hist **out, const hist_summary *s, const uint32_t *index, const uint64_t *count,
                size_t n, tps_err *e) {
    *out = NULL;
    if (s->version != HIST_FORMAT_VERSION)
        return tps_fail(e, TPS_EUNSUP, "histogram format version %u; this build reads version %u",
                        s->version, HIST_FORMAT_VERSION);
    int rc = check_config(&s->config, e);
    if (rc) return rc;
    unsigned m = sub_bits_for(s->config.sig_digits);
    uint32_t base = bucket_of(m, s->config.lowest);
    uint32_t top = bucket_of(m, s->config.highest);

    /* Validate everything before allocating. */
    uint64_t total = 0;
    bool bad_sum = __builtin_add_overflow(s->underflow, s->overflow, &total);
    for (size_t i = 0; i < n; i++) {
        if (index[i] < base || index[i] > top)
            return tps_fail(e, TPS_ERANGE, "histogram bucket %u is outside this config's %u..%u",
                            index[i], base, top);
        if (i > 0 && index[i] <= index[i - 1])
            return tps_fail(e, TPS_EINVAL, "histogram bucket indices must increase (%u after %u)",
                            index[i], index[i - 1]);
        if (count[i] == 0)
            return tps_fail(e, TPS_EINVAL, "histogram bucket %u has a zero count", index[i]);
        bad_sum |= __builtin_add_overflow(total, count[i], &total);
    }
    if (bad_sum || total != s->count)
        return tps_fail(e, TPS_EINVAL,
                        "histogram counts do not add up: buckets + underflow + overflow != %llu",
                        (unsigned long long)s->count);
    if (s->count > 0) {
        const hist_config *c = &s->config;
        /* min must sit in the lowest non-empty region, max in the highest. */
        int min_region = s->underflow ? -1 : n ? 0 : 1;
        int max_region = s->overflow ? 1 : n ? 0 : -1;
        bool ok = s->min <= s->max && region_of(c, s->min) == min_region &&
                  region_of(c, s->max) == max_region;
        if (ok && min_region == 0) ok = bucket_of(m, s->min) == index[0];
        if (ok && max_region == 0) ok = bucket_of(m, s->max) == index[n - 1];
        if (!ok)
            return tps_fail(e, TPS_EINVAL,
                            "histogram min %llu / max %llu disagree with its buckets",
                            (unsigned long long)s->min, (unsigned long long)s->max);
    }

    hist *h;
    rc = hist_create(&h, &s->config, e);
    if (rc) return rc;
    for (size_t i = 0; i < n; i++)
        h->counts[index[i] - base] = count[i];
    h->count = s->count;
    h->under = s->underflow;
    h->over = s->overflow;
    h->sum = s->sum;
    if (s->count) {
        h->min = s->min;
        h->max = s->max;
    }
    *out = h;
    return TPS_OK;
}
