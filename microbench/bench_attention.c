/* Decode attention over a long context, alone: one row's query heads over
 * every KV head of one layer (attn_heads, as a decode step calls it), one
 * thread, in a cache whose blocks hold all of the model's attention layers
 * (so a layer's K/V runs lie a block apart, as in the engine). Prints the
 * median and best time of a call, the K/V bytes it read per second and
 * its mul-adds per second, for the shapes the depth figures use
 * (Qwen3-0.6B's, the full-attention layers of Qwen3.5-0.8B) and
 * DeepSeek-V2-Lite's latent attention, at depths 1k, 4k and 16k.
 * usage: bench_attention [DEPTH [SHAPE_INDEX]]. Not here: the engine
 * around it (bench_engine, tps generate --depth). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/attn/attention.h"
#include "engine/kv/kv_cache.h"
#include "kernels/quant.h"

typedef struct shape {
    const char *name;
    uint32_t n_kv, group, hd, v_dim;
    uint32_t layers; /* attention layers: a block holds all of theirs */
} shape;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* An F16 cache of sh's layers and heads holding n_pos positions of small
 * pseudo-random values for seq in layer 0 (the one read). */
static kv_cache *cache_make(const shape *sh, uint32_t n_pos, kv_seq *seq) {
    const uint32_t B = 16, kv_dim = sh->n_kv * sh->hd;
    kv_cache_params p = {.n_layers = sh->layers,
                         .kv_dim = kv_dim,
                         .head_dim = sh->hd,
                         .block_tokens = B,
                         .kv_type = GGML_TYPE_F16,
                         .k_only = sh->v_dim != 0, /* the latent is K and V */
                         .n_blocks = (n_pos + B - 1) / B + 1};
    kv_cache *kv = NULL;
    tps_err err = {0};
    if (kv_cache_create(&kv, &p, &err) || kv_seq_init(seq, (n_pos + B - 1) / B) ||
        kv_seq_reserve(kv, seq, n_pos)) {
        fprintf(stderr, "bench_attention: cache: %s\n", err.msg);
        exit(1);
    }
    float *row = malloc(sizeof(float) * sh->hd);
    uint64_t s = 1;
    for (uint32_t pos = 0; pos < n_pos; pos++)
        for (uint32_t h = 0; h < sh->n_kv; h++)
            for (int v = 0; v < 2; v++) {
                for (uint32_t i = 0; i < sh->hd; i++) {
                    s = s * 6364136223846793005ull + 1442695040888963407ull;
                    row[i] = (float)((double)(s >> 40) / (double)(1ull << 24)) - 0.5f;
                }
                fp32_to_fp16_row(v ? kv_v_head(kv, seq, 0, pos, h) : kv_k_head(kv, seq, 0, pos, h),
                                 row, sh->hd);
            }
    free(row);
    return kv;
}

static void run(const shape *sh, uint32_t n_pos, int reps) {
    kv_seq seq;
    kv_cache *kv = cache_make(sh, n_pos, &seq);
    const size_t qn = (size_t)sh->n_kv * sh->group * sh->hd;
    float *q = malloc(sizeof(float) * qn), *out = malloc(sizeof(float) * qn);
    float *scratch = malloc(sizeof(float) * attn_rows_scratch(sh->group, sh->hd, n_pos) * sh->n_kv);
    for (size_t i = 0; i < qn; i++)
        q[i] = (float)(i % 7) * 0.01f;
    double *t = malloc(sizeof(double) * (size_t)reps);
    for (int r = 0; r < reps; r++) {
        const double t0 = now_s();
        attn_heads(out, q, kv, &seq, 0, 0, sh->n_kv, sh->group, sh->hd, n_pos, 0.088f,
                   (attn_mods){.v_dim = sh->v_dim}, scratch);
        t[r] = now_s() - t0;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    const double med = t[reps / 2], best = t[0];
    const double bytes = (sh->v_dim ? 1.0 : 2.0) * n_pos * sh->n_kv * sh->hd * 2;
    printf("%-24s depth %6u  median %7.3f ms, best %7.3f ms  %5.1f GB/s of K/V (best %5.1f)  "
           "%5.1f G mul-add/s\n",
           sh->name, n_pos, med * 1e3, best * 1e3, bytes / med * 1e-9, bytes / best * 1e-9,
           2.0 * n_pos * sh->n_kv * sh->group * sh->hd / med * 1e-9);
    free(t);
    free(scratch);
    free(out);
    free(q);
    kv_seq_release(kv, &seq);
    kv_seq_destroy(&seq);
    kv_cache_free(kv);
}

int main(int argc, char **argv) {
    static const shape shapes[] = {{"qwen3-0.6B (8x2, 128)", 8, 2, 128, 0, 24},
                                   {"qwen3.5-0.8B (2x4, 256)", 2, 4, 256, 0, 6},
                                   {"v2-lite MLA (1x16, 576)", 1, 16, 576, 512, 27}};
    uint32_t depths[] = {1024, 4096, 16384};
    if (argc > 1) depths[0] = depths[1] = depths[2] = (uint32_t)atoi(argv[1]);
    const size_t only = argc > 2 ? (size_t)atoi(argv[2]) : SIZE_MAX; /* one shape: its index */
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (size_t d = 0; d < 3 && (only == SIZE_MAX || only == s); d++) {
            if (d && depths[d] == depths[d - 1]) continue;
            run(&shapes[s], depths[d], depths[d] > 8192 ? 41 : 201);
        }
    return 0;
}
