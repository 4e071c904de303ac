/* Attention's per-row kernels, shared by one row's pass (attention.c) and
 * runs of rows (attention_rows.c): the KV element loads (F32, F16, Q8_0),
 * the prefetch of the next run, one query vector's scores over a run of
 * K rows and its outputs over a run of V rows, each element with the one
 * reduction order its tier fixes, and the softmax with the layer's
 * changes (window, soft-cap, sinks). Private to engine/attn. */
#ifndef TPS_ENGINE_ATTN_ATTENTION_RUN_H
#define TPS_ENGINE_ATTN_ATTENTION_RUN_H

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "engine/attn/attention.h"
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

/* First position a row attending to n_pos positions reads. */
ALWAYS_INLINE uint32_t window_lo(uint32_t n_pos, attn_mods m) {
    return m.window && n_pos > m.window ? n_pos - m.window : 0;
}

/* Soft-capping of n scores, the way ggml does it: scale by 1/cap, tanh, scale by cap. */
static inline void softcap_run(float *s, size_t n, float cap) {
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

#endif
