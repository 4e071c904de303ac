/* Attention over the paged KV cache for one row and one GQA head group.
 *
 * Two passes per group, block by block over the sequence's block table:
 *   1. scores: for each KV block, for each query head of the group,
 *      s[p] = (q . K_p) * scale (the block's K rows stay in L1 while every
 *      head of the group reads them); then softmax per head;
 *   2. values: for each KV block, for each head, out += s[p] * V_p with the
 *      output chunk held in registers across the block's positions.
 * F16 K/V are widened with F16C inside the loops, Q8_0 K/V dequantized
 * (d * q) the same way; attn_group_rows widens
 * each 16-position chunk once into scratch for a run of rows (prefill) and
 * reads it in tiles of two rows (or heads) that share each load, the next
 * chunk prefetched meanwhile. The AVX2 path and the
 * portable path each fix one reduction order per element; the reference at
 * the bottom is plain and slow, for tests. Not here: threading, RoPE. */
#include "engine/attn/attention.h"

#include <math.h>
#include <string.h>

#include "kernels/ops.h"
#include "kernels/quant.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define ATTN_AVX2 1
#include <immintrin.h>
#else
#define ATTN_AVX2 0
#endif

#include "base/compiler.h" /* ALWAYS_INLINE, KEEP_IN_REGISTER */

/* First K (or V) row of kv head kvh in block table entry blk at layer;
 * consecutive positions of the block are head_dim elements apart. */
ALWAYS_INLINE const uint8_t *head_rows(const uint8_t *base, const kv_cache *kv, const kv_seq *seq,
                                       uint32_t layer, uint32_t blk, uint32_t kvh) {
    return base + kv_head_block_off(kv, seq, layer, blk, kvh);
}

/* KV element kinds: what a row of head_dim elements holds. */
enum { KV_F32 = 0, KV_F16 = 1, KV_Q8 = 2 };

ALWAYS_INLINE int kv_kind(const kv_cache *kv) {
    return kv->kv_type == GGML_TYPE_F16 ? KV_F16 : kv->kv_type == GGML_TYPE_Q8_0 ? KV_Q8 : KV_F32;
}

/* Element d of a row: F32, F16, or Q8_0 (d_block * q, as dequantize_row_q8_0). */
ALWAYS_INLINE float ld1(const uint8_t *row, size_t d, const int kt) {
    if (kt == KV_Q8) {
        const block_q8_0 *b = (const block_q8_0 *)row + d / QK8_0;
        return fp16_to_fp32(b->d) * (float)b->qs[d % QK8_0];
    }
    return kt == KV_F16 ? fp16_to_fp32(((const uint16_t *)row)[d]) : ((const float *)row)[d];
}

/* Bytes to prefetch while a run is computed, a part at a time (NULL: none):
 * the next block's run, asked for in one burst before a block, stalled
 * the decode of a long context on the loads it queued (a third of the
 * attention's time at depth 8k in the prefetch loop). */
typedef struct pf_span {
    const uint8_t *p;
    size_t bytes;
} pf_span;

/* Asks for the K (or V) run of the next block while this one is computed:
 * a block's run for one head is a few KiB, too short for the hardware
 * prefetcher to ramp up on before it ends. */
ALWAYS_INLINE void prefetch_run(const uint8_t *p, size_t bytes) {
#if ATTN_AVX2
    for (size_t o = 0; o < bytes; o += 64)
        _mm_prefetch((const char *)p + o, _MM_HINT_T0);
#else
    (void)p;
    (void)bytes;
#endif
}

/* Part k of n (in 64-byte lines) of the span. */
ALWAYS_INLINE pf_span pf_part(pf_span pf, size_t k, size_t n) {
    if (!pf.p) return pf;
    const size_t lines = (pf.bytes + 63) / 64, a = lines * k / n, e = lines * (k + 1) / n;
    return (pf_span){pf.p + 64 * a, 64 * (e - a)};
}

ALWAYS_INLINE void prefetch_part(pf_span pf, size_t k, size_t n) {
    const pf_span part = pf_part(pf, k, n);
    if (part.p) prefetch_run(part.p, part.bytes);
}

#if ATTN_AVX2

/* Elements d .. d + 7 (d a multiple of 8, so inside one Q8_0 block), each
 * the same float ld1 gives. */
ALWAYS_INLINE __m256 ld8(const uint8_t *row, size_t d, const int kt) {
    if (kt == KV_Q8) {
        const block_q8_0 *b = (const block_q8_0 *)row + d / QK8_0;
        const __m128i q = _mm_loadl_epi64((const __m128i *)(b->qs + d % QK8_0));
        const __m256 qf = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
        return _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(b->d)), qf);
    }
    if (kt == KV_F16)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + d)));
    return _mm256_loadu_ps((const float *)row + d);
}

#if defined(__AVX512F__)
/* Elements d .. d + 15 (d a multiple of 16, so inside one Q8_0 block), each
 * the same float ld1 gives. */
ALWAYS_INLINE __m512 ld16(const uint8_t *row, size_t d, const int kt) {
    if (kt == KV_Q8) {
        const block_q8_0 *b = (const block_q8_0 *)row + d / QK8_0;
        const __m128i q = _mm_loadu_si128((const __m128i *)(b->qs + d % QK8_0));
        const __m512 qf = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q));
        return _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(b->d)), qf);
    }
    if (kt == KV_F16)
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + d)));
    return _mm512_loadu_ps((const float *)row + d);
}
#endif

/* Lane j of the result = sum of the 8 lanes of a[j], folded as
 * ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)). */
ALWAYS_INLINE __m256 fold8(const __m256 a[8]) {
    const __m256 h0123 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    const __m256 h4567 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(h0123, h4567, 0x20),
                         _mm256_permute2f128_ps(h0123, h4567, 0x31));
}

/* The loaded vector in a register at this point. In the tiles below GCC
 * folded the load into every FMA that used it, so each K (or V) vector was
 * read once per row of the tile: 8-10 loads per 8 FMAs, and the tiles ran
 * at about one FMA per cycle. */
ALWAYS_INLINE __m256 reg_ps(__m256 v) {
    KEEP_IN_REGISTER(v);
    return v;
}

/* s[j] = (q . K_j) * scale for j in [0, n), K_j at K + j * row_bytes.
 * Per position: one 8-lane FMA chain over the head_dim / 8 chunks, fold8,
 * then the head_dim % 8 tail with scalar FMA in order. Positions go eight
 * at a time; a short last group leaves the missing lanes zero, which does
 * not touch the lanes that exist. */
ALWAYS_INLINE void scores_run(float *restrict s, const float *restrict q, const uint8_t *K,
                              size_t row_bytes, size_t n, uint32_t hd, float scale, const int kt,
                              pf_span pf) {
    const size_t hd8 = hd / 8 * 8;
    for (size_t j0 = 0; j0 < n; j0 += 8) {
        const uint8_t *Kj = K + j0 * row_bytes;
        prefetch_part(pf, j0 / 8, (n + 7) / 8);
        __m256 acc[8];
        for (int i = 0; i < 8; i++)
            acc[i] = _mm256_setzero_ps();
        if (n - j0 >= 8) {
            for (size_t d = 0; d < hd8; d += 8) {
                const __m256 qv = _mm256_loadu_ps(q + d);
#pragma GCC unroll 8
                for (int i = 0; i < 8; i++)
                    acc[i] = _mm256_fmadd_ps(qv, ld8(Kj + (size_t)i * row_bytes, d, kt), acc[i]);
            }
        } else {
            for (size_t i = 0; i < n - j0; i++)
                for (size_t d = 0; d < hd8; d += 8)
                    acc[i] = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), ld8(Kj + i * row_bytes, d, kt),
                                             acc[i]);
        }
        if (hd8 == hd && n - j0 >= 8) { /* no tail: the same multiply, lane by lane */
            _mm256_storeu_ps(s + j0, _mm256_mul_ps(fold8(acc), _mm256_set1_ps(scale)));
            continue;
        }
        float sum[8];
        _mm256_storeu_ps(sum, fold8(acc));
        const size_t m = n - j0 < 8 ? n - j0 : 8;
        for (size_t i = 0; i < m; i++) {
            float v = sum[i];
            for (size_t d = hd8; d < hd; d++)
                v = fmaf(q[d], ld1(Kj + i * row_bytes, d, kt), v);
            s[j0 + i] = v * scale;
        }
    }
}

#if defined(__AVX512F__)
/* o[d0 .. d0 + 16 C) += sum_j s[j] * V_j over those elements, in zmm: each
 * element's one FMA per position in order, so the bits are the ymm
 * sweep's. Its part pf of the next run is asked for 8 positions at a time
 * (a sweep's part in one burst at its start stalled it). At depth 8k, one
 * thread (bench_attention, 5 alternating runs, medians, 2026-12-05):
 * Qwen3.5's attention layers 0.87 -> 0.67 ms, DeepSeek-V2-Lite's latent
 * 3.10 -> 2.32 ms. Tried beside it and not kept: two keys a zmm in the
 * scores pass, and two query heads a pass sharing each load (no faster
 * on those shapes, slower on Qwen3-0.6B's, which reads its K/V at memory
 * speed). */
ALWAYS_INLINE void values_sweep_z(float *restrict o, const float *restrict s, const uint8_t *V,
                                  size_t row_bytes, size_t n, size_t d0, const int kt, const int C,
                                  pf_span pf) {
    __m512 acc[8];
#pragma GCC unroll 8
    for (int c = 0; c < C; c++)
        acc[c] = _mm512_loadu_ps(o + d0 + 16 * c);
    for (size_t j = 0; j < n; j++) {
        if (j % 8 == 0) prefetch_part(pf, j / 8, (n + 7) / 8);
        const __m512 sv = _mm512_set1_ps(s[j]);
        const uint8_t *Vj = V + j * row_bytes;
#pragma GCC unroll 8
        for (int c = 0; c < C; c++)
            acc[c] = _mm512_fmadd_ps(sv, ld16(Vj, d0 + 16 * (size_t)c, kt), acc[c]);
    }
#pragma GCC unroll 8
    for (int c = 0; c < C; c++)
        _mm512_storeu_ps(o + d0 + 16 * c, acc[c]);
}
#endif

/* o (hd,) += sum_j s[j] * V_j, j in [0, n) in order, one FMA per element
 * and position; up to 64 output floats stay in registers per sweep. */
ALWAYS_INLINE void values_run(float *restrict o, const float *restrict s, const uint8_t *V,
                              size_t row_bytes, size_t n, uint32_t hd, const int kt, pf_span pf) {
    const size_t hd8 = hd / 8 * 8;
    size_t d0 = 0;
#if defined(__AVX512F__)
    const size_t sweeps = hd8 / 128 + hd8 % 128 / 64;
    if (sweeps == 0) prefetch_part(pf, 0, 1);
    for (; d0 + 128 <= hd8; d0 += 128)
        values_sweep_z(o, s, V, row_bytes, n, d0, kt, 8, pf_part(pf, d0 / 128, sweeps));
    if (d0 + 64 <= hd8) {
        values_sweep_z(o, s, V, row_bytes, n, d0, kt, 4, pf_part(pf, sweeps - 1, sweeps));
        d0 += 64;
    }
#else
    const size_t sweeps = hd8 / 64;
    if (sweeps == 0) prefetch_part(pf, 0, 1);
#endif
    for (; d0 + 64 <= hd8; d0 += 64) {
        prefetch_part(pf, d0 / 64, sweeps);
        __m256 acc[8];
#pragma GCC unroll 8
        for (int v = 0; v < 8; v++)
            acc[v] = _mm256_loadu_ps(o + d0 + 8 * v);
        for (size_t j = 0; j < n; j++) {
            const __m256 sv = _mm256_set1_ps(s[j]);
            const uint8_t *Vj = V + j * row_bytes;
#pragma GCC unroll 8
            for (int v = 0; v < 8; v++)
                acc[v] = _mm256_fmadd_ps(sv, ld8(Vj, d0 + 8 * (size_t)v, kt), acc[v]);
        }
#pragma GCC unroll 8
        for (int v = 0; v < 8; v++)
            _mm256_storeu_ps(o + d0 + 8 * v, acc[v]);
    }
    for (; d0 < hd8; d0 += 8) {
        __m256 acc = _mm256_loadu_ps(o + d0);
        for (size_t j = 0; j < n; j++)
            acc = _mm256_fmadd_ps(_mm256_set1_ps(s[j]), ld8(V + j * row_bytes, d0, kt), acc);
        _mm256_storeu_ps(o + d0, acc);
    }
    for (size_t d = hd8; d < hd; d++) {
        float acc = o[d];
        for (size_t j = 0; j < n; j++)
            acc = fmaf(s[j], ld1(V + j * row_bytes, d, kt), acc);
        o[d] = acc;
    }
}

/* Tiles of several query vectors that read the same widened chunk (prefill:
 * consecutive rows, and the heads of a GQA group): each K (or V) chunk
 * is loaded once into a register (reg_ps) and serves two vectors' FMAs, and the
 * fold, scale and store of scores go a tile of keys at a time. Each score
 * and output element keeps the FMA chain, fold tree and tail of
 * scores_run / values_run, in the same order. With AVX-512VL the compiler
 * has 32 ymm registers: a scores tile holds 2 x 8 accumulators there,
 * 2 x 4 with plain AVX2's 16 (measured on the prefill of a 512-token
 * prompt, 3- and 4-vector tiles were no faster on the AVX-512 machine,
 * nor 3-vector ones on the AVX2 build). */
#define ATTN_SR 2 /* vectors per scores tile */
#if defined(__AVX512VL__)
#define ATTN_SK 8 /* keys per scores tile (4 or 8) */
#else
#define ATTN_SK 4
#endif
#define ATTN_VR 2 /* vectors per values tile (32 output floats each) */

/* The 4 lanes of the result = the sums of a[0..3], each folded as fold8
 * folds it: ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)). */
ALWAYS_INLINE __m128 fold4(const __m256 a[4]) {
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

#if defined(__AVX512F__)
/* scores_tile's 8-key FMA chains, two keys a zmm (lanes 0-7 key 2p, 8-15
 * key 2p + 1) against q in both halves: each lane's FMA chain is the ymm
 * one, split back into ymm acc[r][k] for the fold (half the FMAs of the
 * 8-key ymm tile). */
ALWAYS_INLINE void scores_chains_zmm(__m256 acc[][8], const float *const q[], const float *Wj,
                                     size_t hd8, uint32_t hd, const int R) {
    __m512 az[ATTN_SR][4];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++)
            az[r][p] = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (size_t d = 0; d < hd8; d += 8) {
        __m512 qv[ATTN_SR];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
            qv[r] = _mm512_broadcast_f32x8(_mm256_loadu_ps(q[r] + d));
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++) {
            __m512 kv = _mm512_insertf32x8(
                _mm512_castps256_ps512(_mm256_loadu_ps(Wj + (size_t)(2 * p) * hd + d)),
                _mm256_loadu_ps(Wj + (size_t)(2 * p + 1) * hd + d), 1);
            KEEP_IN_REGISTER(kv);
#pragma GCC unroll 8
            for (int r = 0; r < R; r++)
                az[r][p] = _mm512_fmadd_ps(qv[r], kv, az[r][p]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++) {
            acc[r][2 * p] = _mm512_castps512_ps256(az[r][p]);
            acc[r][2 * p + 1] = _mm512_extractf32x8_ps(az[r][p], 1);
        }
}
#endif

/* scores_tile's FMA chains in ymm: one a key over hd's 8-float chunks. */
ALWAYS_INLINE void scores_chains_ymm(__m256 acc[][8], const float *const q[], const float *Wj,
                                     size_t hd8, uint32_t hd, const int R, const int KN) {
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int k = 0; k < KN; k++)
            acc[r][k] = _mm256_setzero_ps();
#pragma GCC unroll 16
    for (size_t d = 0; d < hd8; d += 8) {
        __m256 qv[ATTN_SR];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
            qv[r] = _mm256_loadu_ps(q[r] + d);
#pragma GCC unroll 8
        for (int k = 0; k < KN; k++) {
            const __m256 kv = reg_ps(_mm256_loadu_ps(Wj + (size_t)k * hd + d));
#pragma GCC unroll 8
            for (int r = 0; r < R; r++)
                acc[r][k] = _mm256_fmadd_ps(qv[r], kv, acc[r][k]);
        }
    }
}

/* s_r[j] for the R vectors r and the KN (4 or 8) keys j0 .. j0 + KN - 1 of
 * W (f32 rows hd apart), as scores_run computes each: one FMA chain per
 * key over hd's 8-float chunks, the fold8 tree, hd's tail in order, then
 * the scale (lane by lane when there is no tail: the same multiply). */
ALWAYS_INLINE void scores_tile(float *const s[], const float *const q[], const float *W, size_t j0,
                               uint32_t hd, float scale, const int R, const int KN) {
    const size_t hd8 = hd / 8 * 8;
    const float *Wj = W + j0 * hd;
    __m256 acc[ATTN_SR][8];
#if defined(__AVX512F__)
    if (KN == 8)
        scores_chains_zmm(acc, q, Wj, hd8, hd, R);
    else
#endif
        scores_chains_ymm(acc, q, Wj, hd8, hd, R, KN);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        if (hd8 == hd && KN == 8) {
            _mm256_storeu_ps(s[r] + j0, _mm256_mul_ps(fold8(acc[r]), _mm256_set1_ps(scale)));
            continue;
        }
        if (hd8 == hd) {
            _mm_storeu_ps(s[r] + j0, _mm_mul_ps(fold4(acc[r]), _mm_set1_ps(scale)));
            continue;
        }
        float sum[8];
        if (KN == 8)
            _mm256_storeu_ps(sum, fold8(acc[r]));
        else
            _mm_storeu_ps(sum, fold4(acc[r]));
        for (int k = 0; k < KN; k++) {
            float v = sum[k];
            for (size_t d = hd8; d < hd; d++)
                v = fmaf(q[r][d], Wj[(size_t)k * hd + d], v);
            s[r][j0 + k] = v * scale;
        }
    }
}

/* o_r[d0 .. d0 + 8 * C) += sum_j s_r[j] * W_j for j in [a, e), in order, for
 * R vectors sharing each W load. */
ALWAYS_INLINE void values_tile(float *const o[], const float *const s[], const float *W, size_t a,
                               size_t e, uint32_t hd, size_t d0, const int R, const int C) {
    __m256 acc[ATTN_VR][4];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < C; c++)
            acc[r][c] = _mm256_loadu_ps(o[r] + d0 + 8 * c);
    for (size_t j = a; j < e; j++) {
        const float *Wj = W + j * hd + d0;
        __m256 sv[ATTN_VR];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            sv[r] = _mm256_set1_ps(s[r][j]);
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            const __m256 v = reg_ps(_mm256_loadu_ps(Wj + 8 * c));
#pragma GCC unroll 4
            for (int r = 0; r < R; r++)
                acc[r][c] = _mm256_fmadd_ps(sv[r], v, acc[r][c]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < C; c++)
            _mm256_storeu_ps(o[r] + d0 + 8 * c, acc[r][c]);
}

#if defined(__AVX512F__)
/* values_tile in 16-float zmm chunks (C of them): each output element keeps
 * its one FMA per position in order, so the bits are values_tile's, at
 * half the instructions (a 512-token prefill of 1B spent 12% of its time
 * in the values pass at 2k tokens, 2026-12-05). */
ALWAYS_INLINE void values_tile_z(float *const o[], const float *const s[], const float *W, size_t a,
                                 size_t e, uint32_t hd, size_t d0, const int R, const int C) {
    __m512 acc[ATTN_VR][4];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < C; c++)
            acc[r][c] = _mm512_loadu_ps(o[r] + d0 + 16 * c);
    for (size_t j = a; j < e; j++) {
        const float *Wj = W + j * hd + d0;
        __m512 sv[ATTN_VR];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            sv[r] = _mm512_set1_ps(s[r][j]);
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            __m512 v = _mm512_loadu_ps(Wj + 16 * c);
            KEEP_IN_REGISTER(v);
#pragma GCC unroll 4
            for (int r = 0; r < R; r++)
                acc[r][c] = _mm512_fmadd_ps(sv[r], v, acc[r][c]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < C; c++)
            _mm512_storeu_ps(o[r] + d0 + 16 * c, acc[r][c]);
}
#endif

/* values_tile over all of hd's 8-float chunks, then hd's tail per vector. */
ALWAYS_INLINE void values_tile_hd(float *const o[], const float *const s[], const float *W,
                                  size_t a, size_t e, uint32_t hd, const int R) {
    const size_t hd8 = hd / 8 * 8;
    size_t d0 = 0;
#if defined(__AVX512F__)
#pragma GCC unroll 4
    for (; d0 + 64 <= hd8; d0 += 64)
        values_tile_z(o, s, W, a, e, hd, d0, R, 4);
#endif
#pragma GCC unroll 4
    for (; d0 + 32 <= hd8; d0 += 32)
        values_tile(o, s, W, a, e, hd, d0, R, 4);
    for (; d0 < hd8; d0 += 8)
        values_tile(o, s, W, a, e, hd, d0, R, 1);
    for (size_t d = hd8; d < hd; d++)
        for (int r = 0; r < R; r++) {
            float acc = o[r][d];
            for (size_t j = a; j < e; j++)
                acc = fmaf(s[r][j], W[j * hd + d], acc);
            o[r][d] = acc;
        }
}

#else /* portable */

/* Per position: 8 partial sums over the head_dim / 8 chunks, folded as the
 * AVX2 path does, then the tail in order. */
ALWAYS_INLINE void scores_run(float *restrict s, const float *restrict q, const uint8_t *K,
                              size_t row_bytes, size_t n, uint32_t hd, float scale, const int kt,
                              pf_span pf) {
    (void)pf;
    const size_t hd8 = hd / 8 * 8;
    for (size_t j = 0; j < n; j++) {
        const uint8_t *Kj = K + j * row_bytes;
        float l[8] = {0};
        for (size_t d = 0; d < hd8; d += 8)
            for (int i = 0; i < 8; i++)
                l[i] = fmaf(q[d + i], ld1(Kj, d + i, kt), l[i]);
        float v = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
        for (size_t d = hd8; d < hd; d++)
            v = fmaf(q[d], ld1(Kj, d, kt), v);
        s[j] = v * scale;
    }
}

ALWAYS_INLINE void values_run(float *restrict o, const float *restrict s, const uint8_t *V,
                              size_t row_bytes, size_t n, uint32_t hd, const int kt, pf_span pf) {
    (void)pf;
    for (size_t j = 0; j < n; j++)
        for (size_t d = 0; d < hd; d++)
            o[d] = fmaf(s[j], ld1(V + j * row_bytes, d, kt), o[d]);
}

#endif

/* One query vector's share of a widened chunk (prefill: a row's head): its
 * q (scores pass) or output (values pass), its scores at the chunk's first
 * position, and the chunk positions [a, e) it attends to. */
typedef struct attn_vec {
    const float *q;
    float *o;
    float *s;
    uint32_t a, e;
} attn_vec;

/* Vectors gathered per chunk before they are tiled: a multiple of every
 * tile size. */
#define ATTN_VBUF 48

#if ATTN_AVX2
/* scores_tile with R and KN constant, and head sizes 64 and 128 too, so
 * that the compiler unrolls the dot loop. */
ALWAYS_INLINE void scores_tiles(float *const s[], const float *const q[], const float *W, size_t j0,
                                uint32_t hd, float scale, int R, const int KN) {
#define TILE(RR)                                                                                   \
    (hd == 64    ? scores_tile(s, q, W, j0, 64, scale, RR, KN)                                     \
     : hd == 128 ? scores_tile(s, q, W, j0, 128, scale, RR, KN)                                    \
                 : scores_tile(s, q, W, j0, hd, scale, RR, KN))
    switch (R) {
    case 1:
        TILE(1);
        break;
    default:
        TILE(ATTN_SR);
    }
#undef TILE
}
#endif

/* The scores of n vectors over chunk W (f32 rows hd apart). A tile scores
 * the union of its vectors' ranges: the extra slots lie inside each
 * vector's scores row (positions below n_last) and are never read, as the
 * softmax and the values pass see only [lo, n_pos). */
static void scores_chunk(const attn_vec *v, size_t n, const float *W, uint32_t hd, float scale) {
    const size_t fl_bytes = (size_t)hd * 4;
#if ATTN_AVX2
    for (size_t i = 0; i < n; i += ATTN_SR) {
        const int R = n - i < ATTN_SR ? (int)(n - i) : ATTN_SR;
        float *s[ATTN_SR];
        const float *q[ATTN_SR];
        uint32_t a = v[i].a, e = v[i].e;
        for (int r = 0; r < R; r++) {
            s[r] = v[i + r].s;
            q[r] = v[i + r].q;
            a = v[i + r].a < a ? v[i + r].a : a;
            e = v[i + r].e > e ? v[i + r].e : e;
        }
        size_t j = a;
        for (; j + ATTN_SK <= e; j += ATTN_SK)
            scores_tiles(s, q, W, j, hd, scale, R, ATTN_SK);
        if (ATTN_SK == 8 && j + 4 <= e) {
            scores_tiles(s, q, W, j, hd, scale, R, 4);
            j += 4;
        }
        if (j < e)
            for (int r = 0; r < R; r++)
                scores_run(s[r] + j, q[r], (const uint8_t *)(W + j * hd), fl_bytes, e - j, hd,
                           scale, KV_F32, (pf_span){0});
    }
#else
    for (size_t i = 0; i < n; i++)
        scores_run(v[i].s + v[i].a, v[i].q, (const uint8_t *)(W + (size_t)v[i].a * hd), fl_bytes,
                   v[i].e - v[i].a, hd, scale, KV_F32, (pf_span){0});
#endif
}

/* One vector's outputs += its weights over chunk positions [a, e). */
ALWAYS_INLINE void values_one(const attn_vec *v, const float *W, uint32_t a, uint32_t e,
                              uint32_t hd) {
    if (a < e)
        values_run(v->o, v->s + a, (const uint8_t *)(W + (size_t)a * hd), (size_t)hd * 4, e - a, hd,
                   KV_F32, (pf_span){0});
}

/* The values pass of n vectors over chunk W. A tile shares the positions
 * all its vectors attend to, [A, E); a vector's positions before A go
 * first and those after E last, alone, so each output element still
 * accumulates its positions in order. */
static void values_chunk(const attn_vec *v, size_t n, const float *W, uint32_t hd) {
#if ATTN_AVX2
    for (size_t i = 0; i < n; i += ATTN_VR) {
        const int R = n - i < ATTN_VR ? (int)(n - i) : ATTN_VR;
        float *o[ATTN_VR];
        const float *s[ATTN_VR];
        uint32_t A = v[i].a, E = v[i].e;
        for (int r = 0; r < R; r++) {
            o[r] = v[i + r].o;
            s[r] = v[i + r].s;
            A = v[i + r].a > A ? v[i + r].a : A;
            E = v[i + r].e < E ? v[i + r].e : E;
        }
        if (A >= E) {
            for (int r = 0; r < R; r++)
                values_one(&v[i + r], W, v[i + r].a, v[i + r].e, hd);
            continue;
        }
        for (int r = 0; r < R; r++)
            values_one(&v[i + r], W, v[i + r].a, A, hd);
#define TILE(RR)                                                                                   \
    (hd == 64    ? values_tile_hd(o, s, W, A, E, 64, RR)                                           \
     : hd == 128 ? values_tile_hd(o, s, W, A, E, 128, RR)                                          \
                 : values_tile_hd(o, s, W, A, E, hd, RR))
        switch (R) {
        case 1:
            TILE(1);
            break;
        default:
            TILE(ATTN_VR);
        }
#undef TILE
        for (int r = 0; r < R; r++)
            values_one(&v[i + r], W, E, v[i + r].e, hd);
    }
#else
    for (size_t i = 0; i < n; i++)
        values_one(&v[i], W, v[i].a, v[i].e, hd);
#endif
}

/* First position a row attending to n_pos positions reads. */
ALWAYS_INLINE uint32_t window_lo(uint32_t n_pos, attn_mods m) {
    return m.window && n_pos > m.window ? n_pos - m.window : 0;
}

/* Soft-capping of n scores, the way ggml does it: scale by 1/cap, tanh, scale by cap. */
static void softcap_run(float *s, size_t n, float cap) {
    const float inv = 1.0f / cap;
    for (size_t i = 0; i < n; i++)
        s[i] = tanhf(s[i] * inv) * cap;
}

/* The softmax of query head `head`'s n scores, with its sink if the
 * layer has sinks. */
ALWAYS_INLINE void softmax_head(float *s, size_t n, attn_mods m, size_t head) {
    if (m.sinks)
        kernel_softmax_sink(s, n, m.sinks[head]);
    else
        kernel_softmax(s, n);
}

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

/* dst (n, hd) floats <- n K or V rows (row_bytes apart) of kind kt. */
static void widen_rows(float *restrict dst, const uint8_t *src, size_t row_bytes, uint32_t n,
                       uint32_t hd, const int kt) {
    for (uint32_t j = 0; j < n; j++) {
        const uint8_t *row = src + (size_t)j * row_bytes;
        float *d = dst + (size_t)j * hd;
        uint32_t i = 0;
#if ATTN_AVX2
        for (; i + 8 <= hd; i += 8)
            _mm256_storeu_ps(d + i, ld8(row, i, kt));
#endif
        for (; i < hd; i++)
            d[i] = ld1(row, i, kt);
    }
}

ALWAYS_INLINE void rows_impl(float *restrict out, const float *restrict q, size_t ld,
                             const kv_cache *kv, const kv_seq *seq, uint32_t layer, uint32_t kvh,
                             uint32_t group, uint32_t hd, uint32_t n_pos0, uint32_t n_rows,
                             float scale, attn_mods mods, float *restrict scratch, const int kt) {
    const uint32_t B = kv->block_tokens, n_last = n_pos0 + n_rows - 1;
    const uint32_t lo0 = window_lo(n_pos0, mods); /* the first row's window starts first */
    const size_t row_bytes = kv_layer_head_bytes(kv, layer),
                 chunk_bytes = (size_t)ATTN_CHUNK * row_bytes;
    float *S = scratch; /* (n_rows, group, n_last) scores */
    float *W = scratch + ((size_t)ATTN_ROWS * group * n_last + 15) / 16 * 16;
    const uint32_t n_blk = (n_last + B - 1) / B;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            for (uint32_t i = 0; i < n_rows; i++) {
                const uint32_t lo = window_lo(n_pos0 + i, mods), n = n_pos0 + i - lo;
                for (uint32_t g = 0; g < group; g++) {
                    float *si = S + ((size_t)i * group + g) * n_last + lo;
                    if (mods.softcap > 0) softcap_run(si, n, mods.softcap);
                    softmax_head(si, n, mods, (size_t)kvh * group + g);
                }
            }
            for (uint32_t i = 0; i < n_rows; i++)
                memset(out + i * ld, 0, sizeof(float) * hd * group);
        }
        const uint8_t *base = pass == 0 ? kv->k : kv->v;
        for (uint32_t b = lo0 / B; b < n_blk; b++) {
            const uint32_t pb = b * B, nb = n_last - pb < B ? n_last - pb : B;
            const uint8_t *KV = head_rows(base, kv, seq, layer, b, kvh);
            for (uint32_t c = 0; c < nb; c += ATTN_CHUNK) {
                const uint32_t p0 = pb + c, nc = nb - c < ATTN_CHUNK ? nb - c : ATTN_CHUNK;
                if (p0 + nc <= lo0) continue;
                widen_rows(W, KV + (size_t)c * row_bytes, row_bytes, nc, hd, kt);
                /* the next chunk's rows arrive while this one's dots run: the
                 * widening stalled on them otherwise */
                if (c + ATTN_CHUNK < nb)
                    prefetch_run(KV + (size_t)(c + ATTN_CHUNK) * row_bytes, chunk_bytes);
                else if (b + 1 < n_blk)
                    prefetch_run(head_rows(base, kv, seq, layer, b + 1, kvh), chunk_bytes);
                else if (pass == 0)
                    prefetch_run(head_rows(kv->v, kv, seq, layer, lo0 / B, kvh) +
                                     (size_t)(lo0 % B / ATTN_CHUNK * ATTN_CHUNK) * row_bytes,
                                 chunk_bytes);
                attn_vec vec[ATTN_VBUF];
                size_t n_vec = 0;
                for (uint32_t i = 0; i < n_rows; i++) {
                    const uint32_t n_pos = n_pos0 + i, lo = window_lo(n_pos, mods);
                    if (p0 >= n_pos || p0 + nc <= lo) continue;
                    /* the row's positions in this chunk: [a, e) */
                    const uint32_t a = p0 > lo ? p0 : lo, e = n_pos < p0 + nc ? n_pos : p0 + nc;
                    for (uint32_t g = 0; g < group; g++) {
                        const size_t off = i * ld + (size_t)g * hd;
                        vec[n_vec++] =
                            (attn_vec){q + off, out + off,
                                       S + ((size_t)i * group + g) * n_last + p0, a - p0, e - p0};
                        if (n_vec == ATTN_VBUF) {
                            if (pass == 0)
                                scores_chunk(vec, n_vec, W, hd, scale);
                            else
                                values_chunk(vec, n_vec, W, hd);
                            n_vec = 0;
                        }
                    }
                }
                if (pass == 0)
                    scores_chunk(vec, n_vec, W, hd, scale);
                else
                    values_chunk(vec, n_vec, W, hd);
            }
        }
    }
}

void attn_group_rows(float *restrict out, const float *restrict q, size_t ld, const kv_cache *kv,
                     const kv_seq *seq, uint32_t layer, uint32_t kvh, uint32_t group,
                     uint32_t head_dim, uint32_t n_pos0, uint32_t n_rows, float scale,
                     attn_mods mods, float *restrict scratch) {
    if (n_rows == 1) { /* nothing to share: widen in registers */
        attn_group(out, q, kv, seq, layer, kvh, group, head_dim, n_pos0, scale, mods, scratch);
        return;
    }
#define ROWS_IMPL(KT)                                                                              \
    rows_impl(out, q, ld, kv, seq, layer, kvh, group, head_dim, n_pos0, n_rows, scale, mods,       \
              scratch, KT)
    switch (kv_kind(kv)) {
    case KV_F16:
        ROWS_IMPL(KV_F16);
        break;
    case KV_Q8:
        ROWS_IMPL(KV_Q8);
        break;
    default:
        ROWS_IMPL(KV_F32);
    }
#undef ROWS_IMPL
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
