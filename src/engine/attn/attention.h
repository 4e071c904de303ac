/* Attention of one token row over its own sequence's paged KV cache, for
 * the group of query heads that share one KV head (GQA): each KV block is
 * read once per group, K/V stay F16 (or F32) in the cache and are widened
 * in registers, never through a per-position conversion call.
 *
 * Batch invariance: every score and output element is reduced in an order
 * that depends only on head_dim and the position index, never on how many
 * rows or sequences share the step, nor on which thread runs the group.
 * Not here: RoPE, the KV write, threading (the forward pass owns those). */
#ifndef TPS_ATTENTION_H
#define TPS_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "engine/kv/kv_cache.h"

/* What some architectures change in attention (zero: nothing). window: the
 * row attending to n_pos positions reads only the last `window` of them,
 * [n_pos - window, n_pos) (sliding-window layers of Gemma 2/3; llama.cpp's
 * LLAMA_SWA_TYPE_STANDARD). softcap: each score s becomes
 * tanh(s / softcap) * softcap before the softmax (Gemma 2). */
typedef struct attn_mods {
    uint32_t window;
    float softcap;
    /* NULL, or the layer's sink logit per query head (gpt-oss): each head's
     * softmax also counts exp(sink), which has no value row (ggml's
     * soft_max with sinks); indexed by query head kvh * group + g */
    const float *sinks;
    /* 0, or the elements of each V row that are values: the outputs past it
     * may hold anything (latent attention, whose latent row is K and V at
     * once, its RoPE part no value); a single row's pass then reads and
     * sums only these */
    uint32_t v_dim;
} attn_mods;

/* out (group, head_dim) = softmax(q_g . K[0:n_pos]^T * scale) @ V[0:n_pos]
 * for g in [0, group): the query heads kvh*group .. kvh*group+group-1, whose
 * vectors lie contiguous in q (group, head_dim) and whose outputs go to out
 * (group, head_dim). K/V: kv head kvh of `layer` of seq's blocks, positions
 * [0, n_pos), n_pos >= 1. scores: group * n_pos floats of caller scratch. */
void attn_group(float *restrict out, const float *restrict q, const kv_cache *kv, const kv_seq *seq,
                uint32_t layer, uint32_t kvh, uint32_t group, uint32_t head_dim, uint32_t n_pos,
                float scale, attn_mods mods, float *restrict scores);

/* attn_group for the kv heads [h0, h1) of one row, read block by block
 * across the heads (a block holds a layer's heads side by side): q and out
 * hold (h1 - h0) * group vectors of head_dim, head h0's group first;
 * scores: (h1 - h0) * group * n_pos floats. Each head's output is
 * attn_group's, bit for bit. */
void attn_heads(float *restrict out, const float *restrict q, const kv_cache *kv, const kv_seq *seq,
                uint32_t layer, uint32_t h0, uint32_t h1, uint32_t group, uint32_t head_dim,
                uint32_t n_pos, float scale, attn_mods mods, float *restrict scores);

/* Rows at consecutive positions of one sequence share each K/V chunk: the
 * chunk is widened from F16 to float once into scratch and every row reads
 * it, with the same FMA sequence per element as attn_group, so each row's
 * output is bit-identical to attn_group's. */
/* Each run widens every chunk it attends to, so a prompt's chunk of n rows
 * widens its K/V prefix about n / (2 * ATTN_ROWS) times over. The
 * 512-token prefill's attention, 12 layers on 2 threads (a scratch bench
 * of this call): 32 rows 61.5 ms, 64 rows 52 ms, 128 rows 59 ms on the
 * AVX2 tier; native 61.7 / 53.6 / 57.3 ms. The scores scratch grows with
 * it: ATTN_ROWS * group floats per context position and thread. */
#define ATTN_ROWS  64 /* rows per attn_group_rows call at most */
#define ATTN_CHUNK 16 /* K positions widened at a time */
#define ATTN_VSPAN 64 /* V positions widened at a time */

/* Floats of scratch attn_group_rows needs for up to ATTN_ROWS rows whose
 * last attends to at most max_pos positions. */
static inline size_t attn_rows_scratch(uint32_t group, uint32_t head_dim, uint32_t max_pos) {
    return ((size_t)ATTN_ROWS * group * max_pos + 15) / 16 * 16 + (size_t)ATTN_VSPAN * head_dim;
}

/* attn_group for n_rows (1..ATTN_ROWS) rows: row i attends to n_pos0 + i
 * positions; its q and out (group, head_dim) start ld floats after row
 * i - 1's. scratch: attn_rows_scratch(group, head_dim, n_pos0 + n_rows - 1)
 * floats. */
void attn_group_rows(float *restrict out, const float *restrict q, size_t ld, const kv_cache *kv,
                     const kv_seq *seq, uint32_t layer, uint32_t kvh, uint32_t group,
                     uint32_t head_dim, uint32_t n_pos0, uint32_t n_rows, float scale,
                     attn_mods mods, float *restrict scratch);

/* The same maths written plainly (per position, per element, in double
 * where it can be): the reference attn_group is tested against. */
void attn_group_ref(float *restrict out, const float *restrict q, const kv_cache *kv,
                    const kv_seq *seq, uint32_t layer, uint32_t kvh, uint32_t group,
                    uint32_t head_dim, uint32_t n_pos, float scale, attn_mods mods);

#endif
