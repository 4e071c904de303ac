/* Multi-head latent attention's per-head products (mla.h), as llama.cpp's
 * deepseek2 graph computes them: ggml_mul_mat of attn_k_b (n_heads
 * matrices of (kv_lora_rank, nope)) with each head's Q without RoPE, and of
 * attn_v_b (n_heads matrices of (mla_v, kv_lora_rank)) with each head's
 * attention output over the latent. A product's slots are (head, row)
 * pairs in head order, so each head's matrix is one group of the grouped
 * kernel: the inputs are gathered into contiguous rows first, and the
 * results scattered back to the row-major layout the pass uses. */
#include <stdlib.h>
#include <string.h>

#include "base/free_all.h"
#include "engine/attn/mla.h"

struct mla_state {
    size_t max_rows;
    uint32_t H;
    float *in;          /* (max_rows * H, max(nope, kv_lora_rank)) gathered inputs */
    float *prod;        /* (max_rows * H, max(kv_lora_rank, mla_v)) products, slot order */
    uint32_t *g_expert; /* (H,) head h's group runs matrix h */
    uint32_t *g_first;  /* (H + 1,) group h is slots [h n, (h + 1) n) */
};

static size_t max2(size_t a, size_t b) {
    return a > b ? a : b;
}

int mla_state_create(mla_state **out, kernel_ctx *kc, const llama_config *c, size_t max_rows,
                     tps_err *err) {
    *out = NULL;
    const size_t H = c->n_heads, nope = c->mla_k - c->rope_dim, kvr = c->kv_lora_rank;
    const size_t slots = max_rows * H;
    mla_state *m = calloc(1, sizeof *m);
    if (!m) return tps_fail(err, TPS_ENOMEM, "mla: out of memory");
    m->max_rows = max_rows, m->H = (uint32_t)H;
    m->in = malloc(sizeof(float) * slots * max2(nope, kvr));
    m->prod = malloc(sizeof(float) * slots * max2(kvr, c->mla_v));
    m->g_expert = malloc(sizeof(uint32_t) * (2 * H + 1));
    if (!m->in || !m->prod || !m->g_expert || kernel_ctx_reserve(kc, slots, max2(nope, kvr))) {
        mla_state_free(m);
        return tps_fail(err, TPS_ENOMEM, "mla: cannot allocate the per-head scratch (%zu slots)",
                        slots);
    }
    m->g_first = m->g_expert + H;
    for (uint32_t h = 0; h < H; h++)
        m->g_expert[h] = h;
    *out = m;
    return 0;
}

void mla_state_free(mla_state *m) {
    if (!m) return;
    TPS_FREE_ALL(m->in, m->prod, m->g_expert, m);
}

/* The per-head tensor as the grouped kernel takes it: its repacked copy if any. */
static kernel_experts heads_of(float *out, const llama_mat *w) {
    const size_t bytes = (size_t)w->rows * kernel_row_bytes(w->type, w->cols);
    if (w->packed)
        return (kernel_experts){out, w->packed, kernel_packed_type(w->type), w->rows, bytes};
    return (kernel_experts){out, w->data, w->type, w->rows, bytes};
}

/* m->prod (slot h n + r) <- w[h] @ m->in (slot h n + r), n_in inputs a slot,
 * gathered first from src: row r's head h starts at src + (r H + h) stride. */
static int per_head(mla_state *m, kernel_ctx *kc, const llama_mat *w, const float *src,
                    size_t stride, size_t n, size_t n_in, tps_err *err) {
    const size_t H = m->H;
    for (size_t h = 0; h < H; h++)
        for (size_t r = 0; r < n; r++)
            memcpy(m->in + (h * n + r) * n_in, src + (r * H + h) * stride, n_in * sizeof(float));
    for (uint32_t h = 0; h <= m->H; h++)
        m->g_first[h] = (uint32_t)(h * n);
    const kernel_groups g = {m->H, m->g_expert, m->g_first, NULL};
    const kernel_experts e = heads_of(m->prod, w);
    const int rc = kernel_matmul_grouped(&e, 1, m->in, n_in, &g, kc);
    if (rc)
        return tps_fail(err, rc,
                        "forward: latent attention's per-head product failed (type %u, "
                        "%u x %u)",
                        w->type, w->rows, w->cols);
    return 0;
}

int mla_absorb_q(mla_state *m, kernel_ctx *kc, const llama_config *c, const llama_layer *L,
                 const float *q_full, size_t n, float *q, tps_err *err) {
    const size_t H = m->H, qk = c->mla_k, rope = c->rope_dim, nope = qk - rope;
    const size_t kvr = c->kv_lora_rank, hd = c->head_dim;
    const int rc = per_head(m, kc, &L->wk_b, q_full, qk, n, nope, err);
    if (rc) return rc;
    for (size_t r = 0; r < n; r++)
        for (size_t h = 0; h < H; h++) {
            float *dst = q + (r * H + h) * hd;
            memcpy(dst, m->prod + (h * n + r) * kvr, kvr * sizeof(float));
            memcpy(dst + kvr, q_full + (r * H + h) * qk + nope, rope * sizeof(float));
        }
    return 0;
}

int mla_values(mla_state *m, kernel_ctx *kc, const llama_config *c, const llama_layer *L,
               const float *att, size_t n, float *out, tps_err *err) {
    const size_t H = m->H, kvr = c->kv_lora_rank, hd = c->head_dim, v = c->mla_v;
    const int rc = per_head(m, kc, &L->wv_b, att, hd, n, kvr, err);
    if (rc) return rc;
    for (size_t r = 0; r < n; r++)
        for (size_t h = 0; h < H; h++)
            memcpy(out + (r * H + h) * v, m->prod + (h * n + r) * v, v * sizeof(float));
    return 0;
}
