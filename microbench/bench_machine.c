/* This machine's physical limits, the yardstick every other benchmark is
 * read against: memory bandwidth (STREAM triad a = b + s * c, and a
 * read-only sum, which is what a weight stream is) over arrays far larger
 * than the last-level cache, with 1 and N threads; and peak FP32 FMA and
 * int8 dot (maddubs or VNNI) rates per thread count; the read-only stream
 * and the rates are measured by the code behind `tps machine`
 * (kernels/machine.c: best of the rounds nobody else ran in, and said when
 * the machine was busy), the triad here. Numbers, not pass/fail.
 *
 * usage: bench_machine [threads (default 2)] [MiB per array (default 512)]
 * Prints one `machine:` line per figure; scripts/bench.sh reads
 * `machine: read_gbs` to turn tokens/s into a fraction of the limit. */
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

/* The read-only stream and the peak rates as `tps machine` measures them
 * (kernels/machine.c, on the kernels' pool): one code for both figures. */
static int measure(machine_limits *m, int nth, size_t mib) {
    tps_err err;
    int rc = machine_measure(m, nth, mib, &err);
    if (rc)
        fprintf(stderr, "bench_machine: %s\n", err.msg);
    else if (m->busy)
        printf("machine: threads %d measured while busy (%s)\n", nth, m->busy_why);
    return rc;
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
    printf("machine: arrays of %zu MiB (3 for the triad), best of 5; read and rates as tps "
           "machine measures them\n",
           mib);
    double read_best = 0, triad_best = 0;
    int rc = 0;
    for (int t = 1; t <= max_threads && !rc; t *= 2) {
        machine_limits m;
        const double tr = triad_gbs(a, b, c, n, t, 5);
        if ((rc = measure(&m, t, mib))) break;
        printf("machine: threads %d  triad %.1f GB/s  read %.1f GB/s  fp32 fma %.1f GFLOP/s  int8 "
               "%.1f G mul-add/s\n",
               t, tr, m.read_gbs, m.fp32_gflops, m.int8_gops);
        if (t == max_threads || t * 2 > max_threads) {
            read_best = m.read_gbs;
            triad_best = tr;
        }
    }
    printf("machine: triad_gbs %.2f\nmachine: read_gbs %.2f\n", triad_best, read_best);
    /* a 128 MiB stream: the size of a small model's weights, which a large
     * last-level cache may partly hold (so "memory" bandwidth for it differs) */
    machine_limits small;
    if (!rc && !(rc = measure(&small, max_threads, mib < 128 ? mib : 128)))
        printf("machine: read_128mib_gbs %.2f\n", small.read_gbs);
    free(a);
    free(b);
    free(c);
    return rc ? 1 : 0;
}
