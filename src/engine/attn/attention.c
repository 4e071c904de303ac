/* Attention over the paged KV cache for one row and one GQA head group.
 *
 * Two passes per group, block by block over the sequence's block table:
 *   1. scores: for each KV block, for each query head of the group,
 *      s[p] = (q . K_p) * scale (the block's K rows stay in L1 while every
 *      head of the group reads them); then softmax per head;
 *   2. values: for each KV block, for each head, out += s[p] * V_p with the
 *      output chunk held in registers across the block's positions.
 * F16 K/V are widened with F16C inside the loops, Q8_0 K/V dequantized
 * (d * q) the same way (attention_run.h). The reference at the bottom is
 * plain and slow, for tests. Not here: runs of rows (attention_rows.c),
 * threading, RoPE. */
#include "engine/attn/attention_run.h"

/* Query head g's part of the next run to prefetch (of a group's): each
 * head's pass over a block asks for 1 / group of it. */
ALWAYS_INLINE pf_span share(const uint8_t *next, size_t run, uint32_t g, uint32_t group) {
    if (!next) return (pf_span){0};
    const size_t a = run * g / group, e = run * (g + 1) / group;
    return (pf_span){next + a, e - a};
}

/* Blocks before the window's first (lo) are skipped; in the first block read,
 * positions before lo are. Without a window lo is 0 and this is the plain
 * pass.
 *
 * KV heads [h0, h1) go blocks outer, heads inner: a block holds a layer's
 * heads next to each other, so the heads' runs of one block are one
 * contiguous span, and while head h of block b is computed its run of
 * block b + 1 (or, after the last block, its first V run) is prefetched.
 * Head by head, each 2 KiB run (16 positions of 64 F16) was its own DRAM
 * round trip, and the prefetches 2 runs ahead covered 4 KiB: the attention
 * of 32 decode rows (context 192, 110M shape, F16) read 28 GB/s with
 * heads one per task and 31-36 GB/s together (a bench of this function
 * alone; 2 blocks ahead was slower, 3 slower still). One head alone keeps
 * the 2 runs ahead. Per head the sequence of every score and output
 * element is the one-head pass's, so the bits do not depend on h1 - h0. */
ALWAYS_INLINE void heads_impl(float *restrict out, const float *restrict q, const kv_cache *kv,
                              const kv_seq *seq, uint32_t layer, uint32_t h0, uint32_t h1,
                              uint32_t group, uint32_t hd, uint32_t n_pos, float scale,
                              attn_mods mods, float *restrict scores, const int kt) {
    const uint32_t B = kv->block_tokens, n_h = h1 - h0;
    const size_t row_bytes = kv_layer_head_bytes(kv, layer), run = (size_t)B * row_bytes;
    const uint32_t n_blk = (n_pos + B - 1) / B, lo = window_lo(n_pos, mods), b_lo = lo / B;
    const uint32_t ahead = n_h > 1 ? 1 : 2;
    /* run i of the pass order (K blocks b_lo.., then V blocks b_lo..) of head h, or NULL */
#define NEXT_RUN(i, h)                                                                             \
    ((i) < n_blk                ? head_rows(kv->k, kv, seq, layer, (i), (h))                       \
     : (i)-n_blk + b_lo < n_blk ? head_rows(kv->v, kv, seq, layer, (i)-n_blk + b_lo, (h))          \
                                : NULL)
    for (uint32_t i = 0; i < ahead; i++)
        for (uint32_t h = h0; h < h1; h++) {
            const uint8_t *r = NEXT_RUN(b_lo + i, h);
            if (r) prefetch_run(r, run);
        }
    for (uint32_t b = b_lo; b < n_blk; b++) {
        const uint32_t p0 = b * B > lo ? b * B : lo, pe = (b + 1) * B < n_pos ? (b + 1) * B : n_pos;
        for (uint32_t h = h0; h < h1; h++) {
            const uint8_t *K =
                head_rows(kv->k, kv, seq, layer, b, h) + (size_t)(p0 - b * B) * row_bytes;
            const uint8_t *next = NEXT_RUN(b + ahead, h);
            for (uint32_t g = 0; g < group; g++) {
                const size_t v = (size_t)(h - h0) * group + g;
                scores_run(scores + v * n_pos + p0, q + v * hd, K, row_bytes, pe - p0, hd, scale,
                           kt, share(next, run, g, group));
            }
        }
    }
    for (size_t v = 0; v < (size_t)n_h * group; v++) {
        if (mods.softcap > 0) softcap_run(scores + v * n_pos + lo, n_pos - lo, mods.softcap);
        softmax_head(scores + v * n_pos + lo, n_pos - lo, mods, (size_t)h0 * group + v);
    }
    memset(out, 0, sizeof(float) * hd * group * n_h);
    for (uint32_t b = b_lo; b < n_blk; b++) {
        const uint32_t p0 = b * B > lo ? b * B : lo, pe = (b + 1) * B < n_pos ? (b + 1) * B : n_pos;
        for (uint32_t h = h0; h < h1; h++) {
            const uint8_t *V =
                head_rows(kv->v, kv, seq, layer, b, h) + (size_t)(p0 - b * B) * row_bytes;
            const uint8_t *next = NEXT_RUN(n_blk + b - b_lo + ahead, h);
            for (uint32_t g = 0; g < group; g++) {
                const size_t v = (size_t)(h - h0) * group + g;
                values_run(out + v * hd, scores + v * n_pos + p0, V, row_bytes, pe - p0,
                           mods.v_dim ? mods.v_dim : hd, kt, share(next, run, g, group));
            }
        }
    }
#undef NEXT_RUN
}

void attn_heads(float *restrict out, const float *restrict q, const kv_cache *kv, const kv_seq *seq,
                uint32_t layer, uint32_t h0, uint32_t h1, uint32_t group, uint32_t head_dim,
                uint32_t n_pos, float scale, attn_mods mods, float *restrict scores) {
    switch (kv_kind(kv)) {
    case KV_F16:
        heads_impl(out, q, kv, seq, layer, h0, h1, group, head_dim, n_pos, scale, mods, scores,
                   KV_F16);
        break;
    case KV_Q8:
        heads_impl(out, q, kv, seq, layer, h0, h1, group, head_dim, n_pos, scale, mods, scores,
                   KV_Q8);
        break;
    default:
        heads_impl(out, q, kv, seq, layer, h0, h1, group, head_dim, n_pos, scale, mods, scores,
                   KV_F32);
    }
}

void attn_group(float *restrict out, const float *restrict q, const kv_cache *kv, const kv_seq *seq,
                uint32_t layer, uint32_t kvh, uint32_t group, uint32_t head_dim, uint32_t n_pos,
                float scale, attn_mods mods, float *restrict scores) {
    attn_heads(out, q, kv, seq, layer, kvh, kvh + 1, group, head_dim, n_pos, scale, mods, scores);
}

/* ---- reference ---------------------------------------------------------- */

static double ref_at(const kv_cache *kv, const uint8_t *base, const kv_seq *seq, uint32_t layer,
                     uint32_t pos, size_t col) {
    const uint32_t hd = kv_layer_head_dim(kv, layer);
    const uint8_t *row = base + kv_head_off(kv, seq, layer, pos, (uint32_t)(col / hd));
    return ld1(row, col % hd, kv_kind(kv));
}

void attn_group_ref(float *restrict out, const float *restrict q, const kv_cache *kv,
                    const kv_seq *seq, uint32_t layer, uint32_t kvh, uint32_t group,
                    uint32_t head_dim, uint32_t n_pos, float scale, attn_mods mods) {
    const uint32_t lo = mods.window && n_pos > mods.window ? n_pos - mods.window : 0;
    const double cap = mods.softcap;
    for (uint32_t g = 0; g < group; g++) {
        const float *qg = q + (size_t)g * head_dim;
        double max = -INFINITY, sum = 0;
        for (uint32_t p = lo; p < n_pos; p++) {
            double d = 0;
            for (uint32_t i = 0; i < head_dim; i++)
                d += (double)qg[i] * ref_at(kv, kv->k, seq, layer, p, (size_t)kvh * head_dim + i);
            d *= scale;
            if (cap > 0) d = tanh(d / cap) * cap;
            if (d > max) max = d;
        }
        for (uint32_t i = 0; i < head_dim; i++) {
            double acc = 0;
            sum = 0;
            for (uint32_t p = lo; p < n_pos; p++) {
                double d = 0;
                for (uint32_t k = 0; k < head_dim; k++)
                    d += (double)qg[k] *
                         ref_at(kv, kv->k, seq, layer, p, (size_t)kvh * head_dim + k);
                d *= scale;
                if (cap > 0) d = tanh(d / cap) * cap;
                const double w = exp(d - max);
                sum += w;
                acc += w * ref_at(kv, kv->v, seq, layer, p, (size_t)kvh * head_dim + i);
            }
            if (mods.sinks) sum += exp((double)mods.sinks[(size_t)kvh * group + g] - max);
            out[(size_t)g * head_dim + i] = (float)(acc / sum);
        }
    }
}
