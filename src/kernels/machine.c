#include "kernels/machine.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "base/clock.h"
#include "metrics/cpu_load.h"

typedef struct read_job {
    const double *b;
    size_t n, per;
    double sums[64];
} read_job;

static void read_task(void *arg, size_t t, int thread) {
    (void)thread;
    read_job *j = arg;
    size_t i0 = t * j->per, i1 = i0 + j->per > j->n ? j->n : i0 + j->per;
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = i0; i + 4 <= i1; i += 4) { /* four chains: the loads bound it */
        s0 += j->b[i];
        s1 += j->b[i + 1];
        s2 += j->b[i + 2];
        s3 += j->b[i + 3];
    }
    j->sums[t % 64] += s0 + s1 + s2 + s3;
}

/* Whole cache lines are what the memory moves; the compiler vectorises
 * the four chains (-O2 -march) so the adds are never the bound. Best of
 * reps passes over b (n doubles). */
static double measure_read(tps_pool *p, int nth, const double *b, size_t n, int reps) {
    read_job j = {.b = b, .n = n, .per = (n + (size_t)nth * 8 - 1) / ((size_t)nth * 8)};
    double best = 0;
    for (int r = 0; r < reps; r++) {
        uint64_t t0 = tps_now_ns();
        tps_pool_run(p, (size_t)nth * 8, read_task, &j);
        double gbs = (double)n * sizeof(double) / (double)(tps_now_ns() - t0);
        if (gbs > best) best = gbs;
    }
    return best;
}

#define RATE_ITERS 4000000L

typedef struct rate_job {
    double sink[64];
} rate_job;

/* 12 independent chains of int8 products with the widest instruction the
 * matmul tiles of this build use: 512-bit VNNI dpbusd (r8_tile_zmm.h's
 * multi-row tiles), 256-bit VNNI, else maddubs + madd. On CPUs with
 * full-width 512-bit units the zmm form is twice the ymm one. */
#if defined(__AVX512F__) && defined(__AVX512VNNI__) && defined(__AVX512VL__) &&                    \
    defined(__AVX512BW__)
#define INT8_BITS 512
#elif defined(__AVX2__)
#define INT8_BITS 256
#else
#define INT8_BITS 32
#endif
static void int8_task(void *arg, size_t t, int thread) {
    (void)thread;
    rate_job *j = arg;
#if INT8_BITS == 512
    __m512i acc[12];
    for (int k = 0; k < 12; k++)
        acc[k] = _mm512_set1_epi32(k);
    const __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-2);
    for (long i = 0; i < RATE_ITERS; i++)
#pragma GCC unroll 12
        for (int k = 0; k < 12; k++)
            acc[k] = _mm512_dpbusd_epi32(acc[k], u, s);
    for (int k = 1; k < 12; k++)
        acc[0] = _mm512_add_epi32(acc[0], acc[k]);
    j->sink[t % 64] += _mm_cvtsi128_si32(_mm512_castsi512_si128(acc[0]));
#elif INT8_BITS == 256
    __m256i acc[12];
    for (int k = 0; k < 12; k++)
        acc[k] = _mm256_set1_epi32(k);
    const __m256i u = _mm256_set1_epi8(3), s = _mm256_set1_epi8(-2);
#if !(defined(__AVX512VNNI__) && defined(__AVX512VL__)) && !defined(__AVXVNNI__)
    const __m256i ones = _mm256_set1_epi16(1);
#endif
    for (long i = 0; i < RATE_ITERS; i++)
#pragma GCC unroll 12
        for (int k = 0; k < 12; k++) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
            acc[k] = _mm256_dpbusd_epi32(acc[k], u, s);
#elif defined(__AVXVNNI__)
            acc[k] = _mm256_dpbusd_avx_epi32(acc[k], u, s);
#else
            acc[k] = _mm256_add_epi32(acc[k], _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), ones));
#endif
        }
    for (int k = 1; k < 12; k++)
        acc[0] = _mm256_add_epi32(acc[0], acc[k]);
    j->sink[t % 64] += _mm256_extract_epi32(acc[0], 0);
#else
    int32_t acc[12] = {0};
    for (long i = 0; i < RATE_ITERS; i++)
        for (int k = 0; k < 12; k++)
            acc[k] += 3 * -2 * (int32_t)(i & 3);
    j->sink[t % 64] += acc[0] + acc[11];
#endif
}
#define INT8_PER_ITER (12.0 * (INT8_BITS == 32 ? 1 : INT8_BITS / 8))

/* 12 independent chains of fp32 FMAs with the widest vector this build's
 * attention uses: 512 bits with AVX-512F, 256 with AVX2 + FMA. Measured in
 * ymm alone, an AVX-512 machine's peak read half of what its attention's
 * zmm FMAs can do. Counted as 2 flops an FMA. */
#if defined(__AVX512F__)
#define FP32_LANES 16
typedef __m512 fp32_vec;
#define FP32_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define FP32_SET1         _mm512_set1_ps
#define FP32_ADD          _mm512_add_ps
#define FP32_FIRST(v)     _mm512_cvtss_f32(v)
#elif defined(__AVX2__) && defined(__FMA__)
#define FP32_LANES        8
typedef __m256 fp32_vec;
#define FP32_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define FP32_SET1         _mm256_set1_ps
#define FP32_ADD          _mm256_add_ps
#define FP32_FIRST(v)     _mm256_cvtss_f32(v)
#else
#define FP32_LANES        1
typedef float fp32_vec;
#define FP32_FMA(a, b, c) ((a) * (b) + (c))
#define FP32_SET1(x)      (x)
#define FP32_ADD(a, b)    ((a) + (b))
#define FP32_FIRST(v)     (v)
#endif
static void fp32_task(void *arg, size_t t, int thread) {
    (void)thread;
    rate_job *j = arg;
    fp32_vec acc[12];
    for (int k = 0; k < 12; k++)
        acc[k] = FP32_SET1((float)k);
    const fp32_vec m = FP32_SET1(0.999999f), a = FP32_SET1(1e-7f);
    for (long i = 0; i < RATE_ITERS; i++)
#pragma GCC unroll 12
        for (int k = 0; k < 12; k++)
            acc[k] = FP32_FMA(acc[k], m, a);
    for (int k = 1; k < 12; k++)
        acc[0] = FP32_ADD(acc[0], acc[k]);
    j->sink[t % 64] += FP32_FIRST(acc[0]);
}
#define FP32_PER_ITER (12.0 * FP32_LANES * 2)

/* Operations per second of fn on every thread at once, one pass. */
static double measure_rate(tps_pool *p, int nth, tps_pool_fn fn, double per_iter) {
    rate_job j = {{0}};
    uint64_t t0 = tps_now_ns();
    tps_pool_run(p, (size_t)nth, fn, &j);
    return (double)RATE_ITERS * per_iter * nth / (double)(tps_now_ns() - t0);
}

/* Rounds of the whole measurement: a shared machine only ever slows one
 * down, so each figure is the best of every round, busy or not (a busy
 * round that ran faster is still something this machine did). Whether any
 * round was quiet (metrics/cpu_load.h) says only whether the figures are
 * marked busy: the check can miss contention (a build's memory traffic),
 * and the best of the rounds never depends on catching it. */
#define MACHINE_ROUNDS 3

typedef struct round_figures {
    double read_gbs, int8_gops, fp32_gflops;
} round_figures;

static void keep_best(round_figures *best, const round_figures *r) {
    if (r->read_gbs > best->read_gbs) best->read_gbs = r->read_gbs;
    if (r->int8_gops > best->int8_gops) best->int8_gops = r->int8_gops;
    if (r->fp32_gflops > best->fp32_gflops) best->fp32_gflops = r->fp32_gflops;
}

/* One round with the CPU counters read around it: whether others ran
 * meanwhile (into why when they did). */
static bool measure_round(round_figures *f, tps_pool *p, int nth, const double *b, size_t n,
                          char *why, size_t cap) {
    cpu_contention c = {0};
    c.runnable = cpu_runnable_others(); /* before: the pool is idle */
    cpu_sample s0, s1;
    cpu_sample_take(&s0);
    f->read_gbs = measure_read(p, nth, b, n, 2);
    f->int8_gops = measure_rate(p, nth, int8_task, INT8_PER_ITER);
    f->fp32_gflops = measure_rate(p, nth, fp32_task, FP32_PER_ITER);
    cpu_sample_take(&s1);
    const cpu_contention d = cpu_contention_between(&s0, &s1);
    c.known = d.known, c.others = d.others, c.steal = d.steal;
    return cpu_contention_busy(&c, why, cap);
}

/* The rounds over one buffer of mib MiB into out: every round's best, with
 * out->busy set (and the last busy round's contention named) when no
 * round was quiet. False when the buffer cannot be allocated. */
static bool measure_rounds(machine_limits *out, tps_pool *p, int nth, size_t mib) {
    size_t n = mib * 1024 * 1024 / sizeof(double);
    double *b = malloc(n * sizeof *b);
    if (!b) return false;
    for (size_t i = 0; i < n; i++)
        b[i] = (double)(i & 1023);
    round_figures best = {0};
    int n_quiet = 0;
    for (int r = 0; r < MACHINE_ROUNDS; r++) {
        round_figures f;
        n_quiet += !measure_round(&f, p, nth, b, n, out->busy_why, sizeof out->busy_why);
        keep_best(&best, &f);
    }
    free(b);
    out->busy = n_quiet == 0;
    if (!out->busy) out->busy_why[0] = 0;
    out->read_gbs = best.read_gbs;
    out->int8_gops = best.int8_gops;
    out->fp32_gflops = best.fp32_gflops;
    return true;
}

/* "2026-12-05 10:00 UTC" for wall-clock time t (a label). */
static void utc_label(char *buf, size_t cap, time_t t) {
    struct tm tm;
    if (!gmtime_r(&t, &tm) || !strftime(buf, cap, "%Y-%m-%d %H:%M UTC", &tm))
        snprintf(buf, cap, "%lld s", (long long)t);
}

int machine_measure(machine_limits *out, int n_threads, size_t mib, tps_err *err) {
    memset(out, 0, sizeof *out);
    if (n_threads < 1) n_threads = 1;
    tps_pool *p;
    int rc = tps_pool_create(&p, n_threads, err);
    if (rc) return rc;
    machine_cpu_name(out->cpu, sizeof out->cpu);
    out->threads = n_threads;
    out->int8_bits = INT8_BITS;
    const bool ok = measure_rounds(out, p, n_threads, mib);
    out->measured_s = (uint64_t)time(NULL);
    char when[48];
    utc_label(when, sizeof when, (time_t)out->measured_s);
    snprintf(out->read_from, sizeof out->read_from,
             "tps machine: a %zu MiB read stream, best of %d rounds, at %s", mib, MACHINE_ROUNDS,
             when);
    tps_pool_free(p);
    if (!ok || out->read_gbs <= 0)
        return tps_fail(err, TPS_ENOMEM, "machine: cannot allocate %zu MiB to measure", mib);
    return 0;
}

int machine_int8_bits(void) {
    return INT8_BITS;
}

int machine_limits_get(machine_limits *out, int n_threads, tps_err *err) {
    tps_err ignored = {0};
    if (machine_cache_load(out, n_threads, INT8_BITS, &ignored) == 0) return 0;
    int rc = machine_measure(out, n_threads, 256, err);
    /* a busy measurement serves this process only: the next one measures
     * again; a read-only home still works */
    if (!rc && !out->busy) (void)machine_cache_save(out, &ignored);
    return rc;
}

int machine_limits_saw(machine_limits *m, double read_gbs, double bytes_per_step, size_t llc_bytes,
                       const char *window, tps_err *err) {
    if (m->read_gbs <= 0 || read_gbs <= m->read_gbs ||
        !roofline_dram_sized(bytes_per_step, llc_bytes))
        return 0;
    machine_limits seen = *m;
    char when[48];
    utc_label(when, sizeof when, time(NULL));
    seen.read_gbs = read_gbs;
    snprintf(seen.read_from, sizeof seen.read_from, "%s at %s", window, when);
    machine_limits_keep_best(m, &seen);
    /* into the cache as it is now (another process may have raised it
     * meanwhile); a busy measurement that was never cached stays out */
    machine_limits cached;
    tps_err ignored = {{0}};
    if (machine_cache_load(&cached, m->threads, m->int8_bits, &ignored) == 0) {
        if (!machine_limits_keep_best(&cached, &seen)) return 1;
        return machine_cache_save(&cached, err) ? -1 : 1;
    }
    if (m->busy) return 1;
    return machine_cache_save(m, err) ? -1 : 1;
}
