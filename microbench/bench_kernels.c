/* Kernel speed: achieved GB/s (weight bytes read / time) and GFLOP/s of
 * kernel_matmul for model-like shapes, types and batch sizes, with 1 and 2
 * threads; median (and min, for shared machines) of several reps, next to
 * this machine's measured single-thread read bandwidth. Numbers, not pass/fail; correctness is
 * tests/test_kernels.c.
 *
 * Every quantized type also runs repacked into 8-row groups ("q8_0r",
 * "q4_Kr", "iq4_xsr", ...), as the engine loads them (the newer types only
 * that way). Weights come from random floats through each type's quantizer
 * (speed does not depend on the values).
 *
 * Prefill chunks run up to 512 activation rows: their quantized rows no
 * longer fit in L2 beside the weights, so 128 and 512 rows show what cache
 * blocking buys (8 and 32 rows stay in cache either way).
 *
 * usage: bench_kernels [max_threads (default 2)] [scalar|avx2|best (default: best)]
 *                      [types, comma-separated names as printed (default: all)]
 *                      [rows, comma-separated (default: 1,8,32,128,512)]
 *                      [shapes, n_in x n_out, comma-separated (default: 768x768,2048x5632)]
 * A model's down projection is its up projection turned round (5632x2048 at
 * 1B, 14336x4096 at 8B): a long n_in leaves fewer activation rows per cache
 * block. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void fill(float *x, size_t n, uint32_t seed) {
    uint32_t s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(s >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
    }
}

/* W (n_out, n_in) in type from random floats; caller frees. */
static void *make_weights(uint32_t type, size_t n_out, size_t n_in) {
    const size_t rb = kernel_row_bytes(type, n_in);
    uint8_t *w = malloc(rb * n_out);
    float *f = malloc(n_in * sizeof *f);
    if (!w || !f) {
        free(w);
        free(f);
        return NULL;
    }
    for (size_t o = 0; o < n_out; o++) {
        fill(f, n_in, (uint32_t)o);
        uint8_t *row = w + o * rb;
        if (quantize_row_any(type, row, f, n_in)) memset(row, 0, rb);
    }
    free(f);
    return w;
}

/* Single-thread read bandwidth over a buffer well beyond the caches. */
static double read_bandwidth_gbs(void) {
    const size_t n = (size_t)64 << 20; /* floats: 256 MiB */
    float *buf = malloc(n * sizeof *buf);
    if (!buf) return 0;
    for (size_t i = 0; i < n; i++)
        buf[i] = (float)(i & 7);
    double best = 1e30;
    volatile float sink = 0;
    static const float ones[4096] = {0}; /* values do not matter, only the read */
    for (int rep = 0; rep < 3; rep++) {
        const double t0 = now_s();
        float s = 0.0f;
        /* dot against 16 KiB that stays in L1 keeps it a pure read of buf */
        for (size_t i = 0; i + 4096 <= n; i += 4096)
            s += kernel_dot_f32(buf + i, ones, 4096);
        const double t = now_s() - t0;
        sink += s;
        if (t < best) best = t;
    }
    (void)sink;
    free(buf);
    return (double)(n * sizeof(float)) / best / 1e9;
}

/* ggml's name ("q4_K"), with "r" after a packed type's ("q4_Kr"). */
static const char *type_name(uint32_t type, char *buf, size_t len) {
    const int packed = type >= KERNEL_TYPE_PACKED;
    const ggml_type_info *ti = ggml_type_get(packed ? type - KERNEL_TYPE_PACKED : type);
    snprintf(buf, len, "%s%s", ti ? ti->name : "?", packed ? "r" : "");
    /* ggml writes the K-quants with a capital K */
    for (char *c = buf; *c; c++)
        if (c > buf && c[-1] == '_' && *c == 'k') *c = 'K';
    return buf;
}

/* True when name is one of the comma-separated list (NULL: all). */
static int type_wanted(const char *list, const char *name) {
    if (!list) return 1;
    const size_t len = strlen(name);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        const size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == len && strncmp(p, name, n) == 0) return 1;
        if (!end) break;
        p = end + 1;
    }
    return 0;
}

typedef struct shape {
    char name[24];
    size_t n_in, n_out;
} shape;

/* "AxB,CxD,..." into shapes (at most 8); returns how many, 0 if malformed:
 * each side 256..65536, n_in a multiple of 256 (every type's block). */
static size_t parse_shapes(const char *arg, shape *shapes) {
    size_t n = 0;
    for (const char *p = arg; *p && n < 8;) {
        char *end;
        const unsigned long a = strtoul(p, &end, 10);
        if (end == p || *end != 'x') return 0;
        const char *q = end + 1;
        const unsigned long b = strtoul(q, &end, 10);
        if (end == q || (*end && *end != ',')) return 0;
        if (a < 256 || a > 65536 || a % 256 || b < 1 || b > 65536) return 0;
        shapes[n] = (shape){"", a, b};
        snprintf(shapes[n].name, sizeof shapes[n].name, "%lux%lu", a, b);
        n++;
        p = *end ? end + 1 : end;
    }
    return n;
}

int main(int argc, char **argv) {
    const int max_threads = argc > 1 ? atoi(argv[1]) : 2;
    kernel_tier tier = KERNEL_TIER_BEST;
    if (argc > 2)
        tier = strcmp(argv[2], "scalar") == 0 ? KERNEL_TIER_SCALAR
               : strcmp(argv[2], "avx2") == 0 ? KERNEL_TIER_AVX2
                                              : KERNEL_TIER_BEST;
    if (!kernel_tier_available(tier)) {
        fprintf(stderr, "bench_kernels: tier %s is not in this build\n", kernel_tier_name(tier));
        return 1;
    }
    shape shapes[8] = {{"768x768", 768, 768}, {"2048x5632", 2048, 5632}};
    size_t n_shapes = 2;
    if (argc > 5 && !(n_shapes = parse_shapes(argv[5], shapes))) {
        fprintf(stderr,
                "bench_kernels: shapes are n_in x n_out, comma-separated, n_in a multiple of 256 "
                "(256..65536): %s\n",
                argv[5]);
        return 1;
    }
    const char *only = argc > 3 ? argv[3] : NULL;
    const uint32_t types[] = {GGML_TYPE_F16,
                              GGML_TYPE_Q8_0,
                              GGML_TYPE_Q4_0,
                              KERNEL_TYPE_Q8_0_R8,
                              KERNEL_TYPE_Q4_0_R8,
                              GGML_TYPE_Q4_K,
                              KERNEL_TYPE_Q4_K_R8,
                              GGML_TYPE_Q6_K,
                              KERNEL_TYPE_Q6_K_R8,
                              KERNEL_TYPE_R8(GGML_TYPE_Q4_1),
                              KERNEL_TYPE_R8(GGML_TYPE_Q5_0),
                              KERNEL_TYPE_R8(GGML_TYPE_Q5_1),
                              KERNEL_TYPE_R8(GGML_TYPE_IQ4_NL),
                              KERNEL_TYPE_R8(GGML_TYPE_Q2_K),
                              KERNEL_TYPE_R8(GGML_TYPE_Q3_K),
                              KERNEL_TYPE_R8(GGML_TYPE_Q5_K),
                              KERNEL_TYPE_R8(GGML_TYPE_IQ4_XS)};
    size_t rows[16] = {1, 8, 32, 128, 512}, n_rows = 5, max_rows = 512;
    if (argc > 4) {
        n_rows = 0;
        max_rows = 1;
        for (char *p = argv[4]; *p && n_rows < 16;) {
            char *end;
            const unsigned long v = strtoul(p, &end, 10);
            if (end == p || v == 0 || v > 4096 || (*end && *end != ',')) {
                fprintf(stderr, "bench_kernels: rows must be 1..4096, comma-separated: %s\n",
                        argv[4]);
                return 1;
            }
            rows[n_rows++] = v;
            if (v > max_rows) max_rows = v;
            p = *end ? end + 1 : end;
        }
    }

    printf("tier: %s   single-thread read bandwidth: %.1f GB/s\n", kernel_tier_name(tier),
           read_bandwidth_gbs());
    printf("%-10s %-7s %5s %3s %10s %10s %9s %9s %9s\n", "shape", "type", "rows", "thr",
           "median_us", "min_us", "GB/s", "GFLOP/s", "GF/s@min");

    for (size_t s = 0; s < n_shapes; s++) {
        const size_t n_in = shapes[s].n_in, n_out = shapes[s].n_out;
        float *x = malloc(max_rows * n_in * sizeof *x);
        float *out = malloc(max_rows * n_out * sizeof *out);
        if (!x || !out) return 1;
        fill(x, max_rows * n_in, 7);
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            char tn[24];
            if (!type_wanted(only, type_name(types[t], tn, sizeof tn))) continue;
            const uint32_t plain =
                types[t] >= KERNEL_TYPE_PACKED ? types[t] - KERNEL_TYPE_PACKED : types[t];
            void *w = make_weights(plain, n_out, n_in);
            if (!w) return 1;
            const double bytes = (double)kernel_row_bytes(plain, n_in) * (double)n_out;
            if (plain != types[t]) { /* repack in place through a copy */
                void *wp = malloc((size_t)bytes);
                if (!wp || kernel_repack(wp, w, plain, n_out, n_in)) return 1;
                free(w);
                w = wp;
            }
            for (int thr = 1; thr <= max_threads; thr++) {
                kernel_ctx *ctx = NULL;
                tps_err err;
                if (kernel_ctx_create(&ctx, thr, max_rows, n_in, &err)) {
                    fprintf(stderr, "%s\n", err.msg);
                    return 1;
                }
                kernel_ctx_set_tier(ctx, tier);
                for (size_t r = 0; r < n_rows; r++) {
                    const size_t nr = rows[r];
                    /* warm up, then enough reps for ~0.15 s, at least 5 */
                    double t0 = now_s();
                    kernel_matmul(out, w, types[t], x, nr, n_in, n_out, ctx);
                    const double once = now_s() - t0;
                    int reps = (int)(0.15 / (once > 1e-6 ? once : 1e-6));
                    reps = reps < 5 ? 5 : reps > 200 ? 200 : reps;
                    double times[200] = {0};
                    for (int i = 0; i < reps; i++) {
                        t0 = now_s();
                        kernel_matmul(out, w, types[t], x, nr, n_in, n_out, ctx);
                        times[i] = now_s() - t0;
                    }
                    qsort(times, (size_t)reps, sizeof times[0], cmp_double);
                    const double med = times[reps / 2];
                    const double flops = 2.0 * (double)nr * (double)n_in * (double)n_out;
                    printf("%-10s %-7s %5zu %3d %10.1f %10.1f %9.2f %9.2f %9.2f\n", shapes[s].name,
                           tn, nr, thr, med * 1e6, times[0] * 1e6, bytes / med / 1e9,
                           flops / med / 1e9, flops / times[0] / 1e9);
                    fflush(stdout);
                }
                kernel_ctx_free(ctx);
            }
            free(w);
        }
        free(out);
        free(x);
    }
    return 0;
}
