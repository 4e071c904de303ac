/* This machine's physical limits, the yardstick every other benchmark is
 * read against: memory bandwidth (STREAM triad a = b + s * c, and a
 * read-only sum, which is what a weight stream is) over arrays far larger
 * than the last-level cache, with 1 and N threads; and peak FP32 FMA and
 * int8 dot (maddubs or VNNI) rates per thread count, measured by the code
 * behind `tps machine` (kernels/machine.c). Best of several reps
 * (a shared machine only ever slows a run down). Numbers, not pass/fail.
 *
 * usage: bench_machine [threads (default 2)] [MiB per array (default 512)]
 * Prints one `machine:` line per figure; scripts/bench.sh reads
 * `machine: read_gbs` to turn tokens/s into a fraction of the limit. */
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/machine.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Best GB/s of reps triads over n doubles, bytes = 3 arrays (2 read, 1 written). */
static double triad_gbs(double *a, const double *b, const double *c, size_t n, int nth, int reps) {
    double best = 0;
    for (int r = 0; r < reps; r++) {
        const double t0 = now_s();
#pragma omp parallel for num_threads(nth) schedule(static)
        for (size_t i = 0; i < n; i++)
            a[i] = b[i] + 3.0 * c[i];
        const double gbs = 3.0 * (double)n * sizeof(double) / (now_s() - t0) / 1e9;
        if (gbs > best) best = gbs;
    }
    return best;
}

/* Best GB/s of a read-only sum over n doubles (the weight-stream pattern):
 * four independent vector accumulators so the loads, not the adds, bound it. */
static double read_gbs(const double *b, size_t n, int nth, int reps, double *sink) {
    double best = 0;
    for (int r = 0; r < reps; r++) {
        double total = 0;
        const double t0 = now_s();
#pragma omp parallel num_threads(nth) reduction(+ : total)
        {
            const int t = omp_get_thread_num(), got = omp_get_num_threads();
            const size_t per = (n / (size_t)got) / 16 * 16;
            const size_t i0 = (size_t)t * per, i1 = t == got - 1 ? n / 16 * 16 : i0 + per;
            __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
            for (size_t i = i0; i < i1; i += 16) {
                s0 = _mm256_add_pd(s0, _mm256_loadu_pd(b + i));
                s1 = _mm256_add_pd(s1, _mm256_loadu_pd(b + i + 4));
                s2 = _mm256_add_pd(s2, _mm256_loadu_pd(b + i + 8));
                s3 = _mm256_add_pd(s3, _mm256_loadu_pd(b + i + 12));
            }
            double out[4];
            _mm256_storeu_pd(out, _mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
            total += out[0] + out[1] + out[2] + out[3];
        }
        const double gbs = (double)n * sizeof(double) / (now_s() - t0) / 1e9;
        *sink += total;
        if (gbs > best) best = gbs;
    }
    return best;
}

int main(int argc, char **argv) {
    const int max_threads = argc > 1 ? atoi(argv[1]) : 2;
    const size_t mib = argc > 2 ? (size_t)atol(argv[2]) : 512;
    const size_t n = mib * 1024 * 1024 / sizeof(double);
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    if (!a || !b || !c) {
        fprintf(stderr, "bench_machine: cannot allocate 3 x %zu MiB\n", mib);
        return 1;
    }
#pragma omp parallel for num_threads(max_threads) schedule(static)
    for (size_t i = 0; i < n; i++) {
        a[i] = 0;
        b[i] = (double)(i & 1023);
        c[i] = 1.0;
    }
    printf("machine: arrays of %zu MiB (3 for the triad), best of 5\n", mib);
    double sink = 0, read_best = 0, triad_best = 0;
    for (int t = 1; t <= max_threads; t *= 2) {
        const double tr = triad_gbs(a, b, c, n, t, 5), rd = read_gbs(b, n, t, 5, &sink);
        printf("machine: threads %d  triad %.1f GB/s  read %.1f GB/s\n", t, tr, rd);
        if (t == max_threads || t * 2 > max_threads) {
            read_best = rd;
            triad_best = tr;
        }
    }
    printf("machine: triad_gbs %.2f\nmachine: read_gbs %.2f\n", triad_best, read_best);
    /* a 128 MiB stream: the size of a small model's weights, which a large
     * last-level cache may partly hold (so "memory" bandwidth for it differs) */
    const size_t n_small = n < 16 * 1024 * 1024 ? n : 16 * 1024 * 1024;
    printf("machine: read_128mib_gbs %.2f\n", read_gbs(b, n_small, max_threads, 9, &sink));
    /* the peak rates as tps machine measures them (kernels/machine.c), per
     * thread count; its small read stream is not printed */
    int rc = 0;
    for (int t = 1; t <= max_threads && !rc; t *= 2) {
        machine_limits m;
        tps_err err;
        if ((rc = machine_measure(&m, t, 16, &err)) != 0) {
            fprintf(stderr, "bench_machine: %s\n", err.msg);
            break;
        }
        printf("machine: threads %d  fp32 fma %.1f GFLOP/s  int8 %.1f G mul-add/s\n", t,
               m.fp32_gflops, m.int8_gops);
    }
    if (sink == 42.0) puts("");
    free(a);
    free(b);
    free(c);
    return rc ? 1 : 0;
}
