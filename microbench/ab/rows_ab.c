/* In-process A B of the K-quant rows kernels (scripts/kernel-ab.sh builds
 * it). On a shared host whose speed drifts by 10-20% within minutes,
 * two binaries run one after the other cannot resolve a 3% change; here
 * variant A and variant B of dot_kquant_x8_avx2.c (the same file built
 * twice, with different flags or sources, its kernels renamed A_ and B_)
 * run alternately, call by call, on the same weights and activations, so
 * both see the same host. Prints each variant's best rate, the ratios of
 * the best and of the mean times, and whether the outputs are the same
 * bits.
 *
 *   rows_ab N_IN N_OUT ROWS TYPE REPS BLOCK_A BLOCK_B [THREADS [PANEL_B]]
 *
 * TYPE q4_K, q5_K or q6_K (weights repacked in 8-row groups, activations
 * quantized once to Q8_K); BLOCK_A / BLOCK_B: activation rows per block
 * for each variant (matmul.c's act_block_rows); THREADS (default 1) take
 * the weight rows in tasks and tiles of 48, as the matmul's pool does;
 * PANEL_B (default 0: none) runs B's blocks in K panels of that many
 * superblocks, as matmul.c's compute_range_panels (B's
 * kernel_rows_panel_avx2). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "kernels/kernel_impl.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

#define AB_KERNELS(X)                                                                              \
    X(kernel_rows_q4_K_r8_avx2) X(kernel_rows_q6_K_r8_avx2) X(kernel_rows_q5_K_r8_avx2)
#define AB_DECL(n)                                                                                 \
    KERNEL_ROWS_DECL(A_##n);                                                                       \
    KERNEL_ROWS_DECL(B_##n);
AB_KERNELS(AB_DECL)
kernel_rows_panel_fn B_kernel_rows_panel_avx2(uint32_t plain);

enum { AB_TILE_O = 48 };

static void fill(float *x, size_t n, uint32_t seed) {
    uint32_t s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(s >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
    }
}

typedef struct ab_case {
    size_t n_in, n_out, rows, block[2];
    int threads;
    size_t panel;             /* B's K panel in superblocks, 0 none */
    kernel_rows_panel_fn pfn; /* B's panel kernel when panel */
    size_t w_row_bytes, act_row_bytes;
    const uint8_t *W, *act;
    float *tmp;
} ab_case;

/* Output rows [o0, o1) of one task, as matmul.c's compute_range (and, with
 * a panel, compute_range_panels) runs them: blocks of activation rows,
 * each against the range's tiles, K panel by K panel if panel. */
static void run_range(const ab_case *c, kernel_rows_fn rows, size_t block, size_t panel, size_t o0,
                      size_t o1, float *out, float *tmp) {
    const size_t nb = c->n_in / QK_K, step = panel ? panel : nb;
    for (size_t r = 0; r < c->rows; r += block) {
        const size_t n = c->rows - r < block ? c->rows - r : block;
        for (size_t kb0 = 0; kb0 < nb; kb0 += step) {
            const size_t kb1 = nb - kb0 < step ? nb : kb0 + step;
            for (size_t o = o0; o < o1; o += AB_TILE_O) {
                const size_t e = o + AB_TILE_O < o1 ? o + AB_TILE_O : o1;
                if (panel)
                    c->pfn(out + r * c->n_out, c->n_out, c->W, c->w_row_bytes, o, e,
                           c->act + r * c->act_row_bytes, c->act_row_bytes, n, c->n_in, tmp, kb0,
                           kb1);
                else
                    rows(out + r * c->n_out, c->n_out, c->W, c->w_row_bytes, o, e,
                         c->act + r * c->act_row_bytes, c->act_row_bytes, n, c->n_in, tmp);
            }
        }
    }
}

/* One call: the outputs split as matmul.c's split_guided splits them (each
 * task 1 / (2 * threads) of what is left, whole 8-row groups, at least a
 * tile), the tasks taken in order by whichever thread is free. */
static void run_once(const ab_case *c, kernel_rows_fn rows, size_t block, size_t panel,
                     float *out) {
    size_t first[257], n_tasks = 0;
    for (size_t o = 0; o < c->n_out && n_tasks < 256;) {
        first[n_tasks++] = o;
        const size_t left = c->n_out - o;
        size_t take = (left + 2 * (size_t)c->threads - 1) / (2 * (size_t)c->threads);
        take = (take + 7) / 8 * 8;
        take = take < AB_TILE_O ? AB_TILE_O : take;
        o += take < left && n_tasks < 256 ? take : left;
    }
    first[n_tasks] = c->n_out;
#pragma omp parallel for num_threads(c->threads) schedule(dynamic, 1)
    for (size_t t = 0; t < n_tasks; t++)
        run_range(c, rows, block, panel, first[t], first[t + 1], out,
                  c->tmp + (size_t)omp_get_thread_num() * KERNEL_TMP_ROWS * c->n_in);
}

static int pick(const char *type, uint32_t *plain, kernel_rows_fn fn[2]) {
    if (!strcmp(type, "q4_K")) {
        *plain = GGML_TYPE_Q4_K;
        fn[0] = A_kernel_rows_q4_K_r8_avx2, fn[1] = B_kernel_rows_q4_K_r8_avx2;
    } else if (!strcmp(type, "q6_K")) {
        *plain = GGML_TYPE_Q6_K;
        fn[0] = A_kernel_rows_q6_K_r8_avx2, fn[1] = B_kernel_rows_q6_K_r8_avx2;
    } else if (!strcmp(type, "q5_K")) {
        *plain = GGML_TYPE_Q5_K;
        fn[0] = A_kernel_rows_q5_K_r8_avx2, fn[1] = B_kernel_rows_q5_K_r8_avx2;
    } else
        return -1;
    return 0;
}

/* Weights (repacked) and activations (Q8_K rows) of the case; 0 or -1. */
static int prepare(ab_case *c, uint32_t plain) {
    const size_t rb = kernel_row_bytes(plain, c->n_in);
    uint8_t *w = malloc(rb * c->n_out), *wp = malloc(rb * c->n_out);
    float *x = malloc(c->rows * c->n_in * sizeof *x);
    c->act_row_bytes = kernel_act_k_row_bytes(c->n_in / QK_K);
    uint8_t *act = malloc(c->rows * c->act_row_bytes);
    c->tmp = malloc((size_t)c->threads * KERNEL_TMP_ROWS * c->n_in * sizeof(float));
    int rc = !w || !wp || !x || !act || !c->tmp ? -1 : 0;
    for (size_t o = 0; rc == 0 && o < c->n_out; o++) {
        fill(x, c->n_in, (uint32_t)o);
        rc = quantize_row_any(plain, w + o * rb, x, c->n_in) ? -1 : 0;
    }
    if (rc == 0) rc = kernel_repack(wp, w, plain, c->n_out, c->n_in) ? -1 : 0;
    if (rc == 0) fill(x, c->rows * c->n_in, 7);
    for (size_t r = 0; rc == 0 && r < c->rows; r++)
        kernel_quantize_act_k(act + r * c->act_row_bytes, x + r * c->n_in, c->n_in, 1);
    free(w);
    free(x);
    c->w_row_bytes = rb, c->W = wp, c->act = act;
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 8) {
        fprintf(stderr,
                "usage: rows_ab N_IN N_OUT ROWS TYPE REPS BLOCK_A BLOCK_B [THREADS [PANEL_B]]\n");
        return 2;
    }
    ab_case c = {.n_in = strtoul(argv[1], NULL, 10),
                 .n_out = strtoul(argv[2], NULL, 10),
                 .rows = strtoul(argv[3], NULL, 10),
                 .block = {strtoul(argv[6], NULL, 10), strtoul(argv[7], NULL, 10)},
                 .threads = argc > 8 ? atoi(argv[8]) : 1,
                 .panel = argc > 9 ? strtoul(argv[9], NULL, 10) : 0};
    const int reps = atoi(argv[5]);
    uint32_t plain;
    kernel_rows_fn fn[2];
    if (pick(argv[4], &plain, fn) || c.n_in % QK_K || c.n_out % 16 || !c.rows || reps < 1 ||
        !c.block[0] || !c.block[1] || c.threads < 1) {
        fprintf(stderr, "rows_ab: TYPE q4_K|q5_K|q6_K, N_IN a multiple of 256, N_OUT of 16, "
                        "ROWS, REPS, blocks and THREADS positive\n");
        return 2;
    }
    c.pfn = B_kernel_rows_panel_avx2(plain);
    if (c.panel && !c.pfn) {
        fprintf(stderr, "rows_ab: PANEL_B given, but B has no K-panel kernel in this build\n");
        return 2;
    }
    float *out[2] = {malloc(c.rows * c.n_out * sizeof(float)),
                     malloc(c.rows * c.n_out * sizeof(float))};
    if (!out[0] || !out[1] || prepare(&c, plain)) {
        fprintf(stderr, "rows_ab: out of memory or quantization failed\n");
        return 1;
    }
    double best[2] = {1e30, 1e30}, sum[2] = {0, 0};
    for (int i = 0; i < 2 * reps + 2; i++) { /* the first pair warms up */
        const int v = i & 1;
        const uint64_t t0 = tps_now_ns();
        run_once(&c, fn[v], c.block[v], v ? c.panel : 0, out[v]);
        const double t = tps_ns_to_s(tps_now_ns() - t0);
        if (i < 2) continue;
        best[v] = t < best[v] ? t : best[v];
        sum[v] += t;
    }
    const double flop = 2.0 * (double)c.rows * (double)c.n_in * (double)c.n_out;
    printf("%zux%zu %s rows %zu blocks %zu/%zu panel B %zu threads %d: A %.1f B %.1f GFLOP/s at "
           "best, B/A %.3f (means %.3f), bits %s\n",
           c.n_in, c.n_out, argv[4], c.rows, c.block[0], c.block[1], c.panel, c.threads,
           flop / best[0] / 1e9, flop / best[1] / 1e9, best[0] / best[1], sum[0] / sum[1],
           memcmp(out[0], out[1], c.rows * c.n_out * sizeof(float)) ? "DIFFER" : "same");
    return 0;
}
