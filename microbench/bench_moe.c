/* Speed of a mixture-of-experts layer's products against a dense layer of
 * its active size: for E experts (k a token) of an expert width eff, the
 * grouped gate+up and down over n rows routed at random (kernel_matmul_grouped,
 * each touched expert once), and a dense FFN of width k * eff over the same
 * rows (kernel_matmul_multi + kernel_matmul): the same multiply-adds a row.
 * Prints ms a layer, GB/s of weights read (the touched experts' bytes) and
 * GFLOP/s, medians of several reps. Numbers, not pass/fail; correctness is
 * tests/test_moe_kernels.c.
 *
 * usage: bench_moe [threads (2)] [type: q4_k | q8_0 | mxfp4 (q4_k)] [dim (2048)]
 *                  [eff (768)] [E (128)] [k (8)] [rows, comma-separated (1,4,16,64,512)] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static uint64_t rng(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

/* n_mats repacked matrices (rows, cols) of type: random quants with small
 * scales for the K-quants (speed does not depend on values), else from floats. */
static void *make_packed(uint32_t type, size_t n_mats, size_t rows, size_t cols) {
    const size_t rb = kernel_row_bytes(type, cols), one = rb * rows;
    uint8_t *w = malloc(one * n_mats), *p = malloc(one * n_mats);
    float *f = malloc(cols * sizeof *f);
    uint64_t s = 88172645463325252ull;
    for (size_t r = 0; r < rows * n_mats; r++) {
        for (size_t c = 0; c < cols; c++)
            f[c] = (float)((double)(rng(&s) >> 11) / 9007199254740992.0 - 0.5) * 0.04f;
        quantize_row_any(type, w + r * rb, f, cols);
    }
    for (size_t e = 0; e < n_mats; e++)
        kernel_repack(p + e * one, w + e * one, type, rows, cols);
    free(f);
    free(w);
    return p;
}

typedef struct shape {
    size_t dim, eff, E, k;
    uint32_t type, ptype;
} shape;

/* One layer's products over the rows: the experts' (grouped) or the
 * dense FFN's, as bench arguments. */
typedef struct layer_call {
    const shape *sh;
    kernel_ctx *ctx;
    size_t n;
    const float *x;
    float *hg, *out;
    const kernel_experts *mats, *down;
    const kernel_groups *g, *gd;
    const kernel_mat *dm;
    const void *dd;
} layer_call;

static void run_moe(const layer_call *c) {
    kernel_matmul_grouped(c->mats, 2, c->x, c->sh->dim, c->g, c->ctx);
    kernel_matmul_grouped(c->down, 1, c->hg, c->sh->eff, c->gd, c->ctx);
}

static void run_dense(const layer_call *c) {
    const size_t ff = c->sh->k * c->sh->eff;
    kernel_matmul_multi(c->dm, 2, c->x, c->n, c->sh->dim, c->ctx);
    kernel_matmul(c->out, c->dd, c->sh->ptype, c->hg, c->n, ff, c->sh->dim, c->ctx);
}

/* Median ms of reps (<= 32) calls of fn. */
static double median_ms(void (*fn)(const layer_call *), const layer_call *c, int reps) {
    double t[32] = {0};
    for (int r = 0; r < reps; r++) {
        const uint64_t t0 = tps_now_ns();
        fn(c);
        t[r] = (double)(tps_now_ns() - t0) / 1e6;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_double);
    return t[reps / 2];
}

static void run_rows(const shape *sh, kernel_ctx *ctx, size_t n, void *gu, void *dn, void *dg,
                     void *dd) {
    const size_t dim = sh->dim, eff = sh->eff, E = sh->E, k = sh->k, slots = n * k;
    float *x = calloc(n * dim, sizeof *x), *hg = malloc(slots * eff * 4),
          *hu = malloc(slots * eff * 4);
    float *out = malloc(slots * dim * 4);
    for (size_t i = 0; i < n * dim; i++)
        x[i] = (float)(i % 17) * 0.01f - 0.08f;
    uint32_t *x_row = malloc(slots * 4), *first = malloc((E + 1) * 4), *ex = malloc(E * 4);
    uint32_t *cnt = calloc(E, 4), *pick = malloc(slots * 4);
    uint64_t s = 1234 + n;
    for (size_t r = 0; r < n; r++)
        for (size_t j = 0; j < k; j++) {
            uint32_t e;
            int dup;
            do {
                e = (uint32_t)(rng(&s) % E);
                dup = 0;
                for (size_t q = 0; q < j; q++)
                    dup |= pick[r * k + q] == e;
            } while (dup);
            pick[r * k + j] = e;
            cnt[e]++;
        }
    size_t ng = 0, off = 0;
    for (uint32_t e = 0; e < E; e++) {
        if (!cnt[e]) continue;
        ex[ng] = e, first[ng++] = (uint32_t)off;
        for (size_t r = 0; r < n; r++)
            for (size_t j = 0; j < k; j++)
                if (pick[r * k + j] == e) x_row[off++] = (uint32_t)r;
    }
    first[ng] = (uint32_t)off;
    const size_t rb_in = kernel_row_bytes(sh->type, dim), rb_ff = kernel_row_bytes(sh->type, eff);
    const kernel_groups g = {ng, ex, first, x_row}, gd = {ng, ex, first, NULL};
    const kernel_experts mats[2] = {
        {hg, gu, sh->ptype, eff, rb_in * eff},
        {hu, (uint8_t *)gu + E * rb_in * eff, sh->ptype, eff, rb_in * eff}};
    const kernel_experts down = {out, dn, sh->ptype, dim, rb_ff * dim};
    const int reps = n >= 256 ? 3 : 9;
    const kernel_mat dm[2] = {{hg, dg, sh->ptype, k * eff},
                              {hu, (uint8_t *)dg + rb_in * k * eff, sh->ptype, k * eff}};
    const layer_call c = {sh, ctx, n, x, hg, out, mats, &down, &g, &gd, dm, dd};
    run_moe(&c); /* warm */
    const double moe_ms = median_ms(run_moe, &c, reps), dense_ms = median_ms(run_dense, &c, reps);
    const double moe_bytes = (double)ng * 3 * rb_in * eff, dense_bytes = 3.0 * rb_in * k * eff;
    const double flops = 2.0 * 3 * dim * eff * k * n;
    printf("%5zu rows %4zu experts run | moe %8.3f ms %6.1f GB/s %6.1f GFLOP/s | dense(k*eff) "
           "%8.3f ms %6.1f GB/s %6.1f GFLOP/s | moe/dense %.2f\n",
           n, ng, moe_ms, moe_bytes / moe_ms / 1e6, flops / moe_ms / 1e6, dense_ms,
           dense_bytes / dense_ms / 1e6, flops / dense_ms / 1e6, moe_ms / dense_ms);
    free(pick), free(cnt), free(ex), free(first), free(x_row), free(out), free(hu), free(hg);
    free(x);
}

int main(int argc, char **argv) {
    const int threads = argc > 1 ? atoi(argv[1]) : 2;
    const char *tn = argc > 2 ? argv[2] : "q4_k";
    shape sh = {.dim = argc > 3 ? (size_t)atol(argv[3]) : 2048,
                .eff = argc > 4 ? (size_t)atol(argv[4]) : 768,
                .E = argc > 5 ? (size_t)atol(argv[5]) : 128,
                .k = argc > 6 ? (size_t)atol(argv[6]) : 8};
    const char *rows = argc > 7 ? argv[7] : "1,4,16,64,512";
    const int t = ggml_type_from_name(tn);
    if (t < 0 || !kernel_packed_type((uint32_t)t)) {
        fprintf(stderr, "bench_moe: type %s has no packed form\n", tn);
        return 2;
    }
    sh.type = (uint32_t)t, sh.ptype = kernel_packed_type(sh.type);
    void *gu = make_packed(sh.type, 2 * sh.E, sh.eff, sh.dim);
    void *dn = make_packed(sh.type, sh.E, sh.dim, sh.eff);
    void *dg = make_packed(sh.type, 2, sh.k * sh.eff, sh.dim);
    void *dd = make_packed(sh.type, 1, sh.dim, sh.k * sh.eff);
    kernel_ctx *ctx;
    tps_err err;
    if (kernel_ctx_create(&ctx, threads, 512 * sh.k, sh.k * sh.eff, &err)) {
        fprintf(stderr, "bench_moe: %s\n", err.msg);
        return 1;
    }
    printf("bench_moe: %s, dim %zu, %zu experts of %zu, %zu a token, %d threads\n", tn, sh.dim,
           sh.E, sh.eff, sh.k, threads);
    char *list = strdup(rows);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ","))
        run_rows(&sh, ctx, (size_t)atol(tok), gu, dn, dg, dd);
    free(list);
    kernel_ctx_free(ctx);
    free(dd), free(dg), free(dn), free(gu);
    return 0;
}
