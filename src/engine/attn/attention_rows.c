/* Attention for a run of rows of one sequence (prefill): rows at
 * consecutive positions share each K/V chunk, widened from F16 (or
 * Q8_0) to float once into scratch: K 16 positions at a time (AVX-512:
 * transposed, a lane a key), V 64 at a time; the rows and the heads of
 * the GQA group read it in tiles that share each load, the next chunk
 * prefetched meanwhile. Every score and output element keeps the FMA
 * chain, fold and order of one row's pass (attention_run.h), so each
 * row's output is bit-identical to attn_group's. Not here: the one-row
 * pass (attention.c), threading, RoPE. */
#include "engine/attn/attention_run.h"
#include "kernels/zmm_bcast.h" /* zmm_bcast_ps: the scores columns tile */

#if ATTN_AVX2
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
#if defined(__AVX512F__)
#define ATTN_VR 4 /* vectors per values tile: 16 zmm chains at head size 64 */
#else
#define ATTN_VR 2 /* vectors per values tile (32 output floats each) */
#endif

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

/* o_r[d0 .. d0 + L * C) += sum_j s_r[j] * W_j for j in [a, e), in order, for
 * R vectors sharing each W load (kept in a register: see reg_ps); L the
 * lanes of T, V its intrinsics' prefix. Written once for both widths: in
 * 16-float zmm chunks each output element keeps its one FMA per position
 * in order, so the bits are the 8-float form's, at half the instructions
 * (a 512-token prefill of 1B spent 12% of its time in the values pass at
 * 2k tokens, 2026-12-05). */
#define UNROLL4 _Pragma("GCC unroll 4")
#define DEFINE_VALUES_TILE(name, T, V, L)                                                          \
    ALWAYS_INLINE void name(float *const o[], const float *const s[], const float *W, size_t a,    \
                            size_t e, uint32_t hd, size_t d0, const int R, const int C) {          \
        T acc[ATTN_VR][4];                                                                         \
        UNROLL4 for (int r = 0; r < R; r++) {                                                      \
            UNROLL4 for (int c = 0; c < C; c++) acc[r][c] = V##_loadu_ps(o[r] + d0 + L * c);       \
        }                                                                                          \
        for (size_t j = a; j < e; j++) {                                                           \
            const float *Wj = W + j * hd + d0;                                                     \
            T sv[ATTN_VR];                                                                         \
            UNROLL4 for (int r = 0; r < R; r++) sv[r] = V##_set1_ps(s[r][j]);                      \
            UNROLL4 for (int c = 0; c < C; c++) {                                                  \
                T v = V##_loadu_ps(Wj + L * c);                                                    \
                KEEP_IN_REGISTER(v);                                                               \
                UNROLL4 for (int r = 0; r < R; r++) acc[r][c] = V##_fmadd_ps(sv[r], v, acc[r][c]); \
            }                                                                                      \
        }                                                                                          \
        UNROLL4 for (int r = 0; r < R; r++) {                                                      \
            UNROLL4 for (int c = 0; c < C; c++) V##_storeu_ps(o[r] + d0 + L * c, acc[r][c]);       \
        }                                                                                          \
    }

DEFINE_VALUES_TILE(values_tile, __m256, _mm256, 8)
#if defined(__AVX512F__)
DEFINE_VALUES_TILE(values_tile_z, __m512, _mm512, 16)
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
/* The tile of vectors i, i + 1, ... of v[0 .. n), at most max_r of them
 * (how many, returned): their scores rows and queries, and the union
 * [*a, *e) of their ranges. */
ALWAYS_INLINE int tile_vecs(const attn_vec *v, size_t n, size_t i, const int max_r, float *s[],
                            const float *q[], uint32_t *a, uint32_t *e) {
    const int R = n - i < (size_t)max_r ? (int)(n - i) : max_r;
    *a = v[i].a, *e = v[i].e;
    for (int r = 0; r < R; r++) {
        s[r] = v[i + r].s;
        q[r] = v[i + r].q;
        *a = v[i + r].a < *a ? v[i + r].a : *a;
        *e = v[i + r].e > *e ? v[i + r].e : *e;
    }
    return R;
}

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

#if defined(__AVX512F__)
/* Scores in columns, for head sizes of whole 16-float parts: the K chunk
 * widened transposed, WT (hd, 16), so that a zmm holds one dimension of
 * its 16 positions and a lane is a key. Lane k of acc[r][c] is key k's FMA
 * chain over dimensions c, c + 8, c + 16, ... in order: the chain lane c of
 * scores_run's accumulator holds, so adding the eight in fold8's tree,
 * lane by lane, gives the same bits without one shuffle, and the query's
 * dimensions are broadcasts. The row tiles spent more of their time on
 * fold8's hadds and the two-key inserts than on FMAs at head size 64. */
#define ATTN_COLS(hd) ((hd) % 16 == 0)
#define ATTN_CR       4 /* vectors per columns tile */

/* r[0..16) (16 rows of 16 floats) transposed in place. */
ALWAYS_INLINE void transpose16(__m512 r[16]) {
    __m512 t[16];
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
        t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
    }
    /* r[4k + j]: element j, 4 + j, 8 + j, 12 + j (128-bit lanes) of rows 4k .. 4k + 3 */
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        const __m512d a = _mm512_castps_pd(t[4 * k]), b = _mm512_castps_pd(t[4 * k + 1]);
        const __m512d c = _mm512_castps_pd(t[4 * k + 2]), d = _mm512_castps_pd(t[4 * k + 3]);
        r[4 * k] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        r[4 * k + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        r[4 * k + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        r[4 * k + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        const __m512 lo1 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x44);
        const __m512 lo2 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x44);
        const __m512 hi1 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xEE);
        const __m512 hi2 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xEE);
        t[j] = _mm512_shuffle_f32x4(lo1, lo2, 0x88);
        t[4 + j] = _mm512_shuffle_f32x4(lo1, lo2, 0xDD);
        t[8 + j] = _mm512_shuffle_f32x4(hi1, hi2, 0x88);
        t[12 + j] = _mm512_shuffle_f32x4(hi1, hi2, 0xDD);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++)
        r[i] = t[i];
}

/* dst (hd, 16) floats <- n (<= 16) K rows (row_bytes apart) of kind kt,
 * transposed; the columns of missing rows are zero. */
static void widen_cols(float *restrict dst, const uint8_t *src, size_t row_bytes, uint32_t n,
                       uint32_t hd, const int kt) {
    for (uint32_t d0 = 0; d0 < hd; d0 += 16) {
        __m512 r[16];
        for (uint32_t j = 0; j < 16; j++)
            r[j] = j < n ? ld16(src + (size_t)j * row_bytes, d0, kt) : _mm512_setzero_ps();
        transpose16(r);
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++)
            _mm512_storeu_ps(dst + (size_t)(d0 + i) * 16, r[i]);
    }
}

/* s_r[k] for the R vectors r and the chunk's keys k in mask m, as
 * scores_run computes each (head sizes without an 8-float tail). The tile
 * is bound by its loads (a key dimension and R broadcast operands per R
 * FMAs): the last R / 2 vectors take their dimensions 16 a load and
 * broadcast them by two shuffles, which issue beside the FMAs (2026-12-06,
 * Zen 5, 4 vectors over 1024 keys in L2: 79% -> 88% of the FMA peak; one
 * vector shuffled 83%, three 84%, four 73%). */
ALWAYS_INLINE void scores_cols_tile(float *const s[], const float *const q[], const float *WT,
                                    uint32_t hd, float scale, __mmask16 m, const int R) {
    /* two sweeps of four chains: fold8's tree is ((l0 + l1) + (l2 + l3)) +
     * ((l4 + l5) + (l6 + l7)), so each sweep's sum is one of its halves */
    __m512 half[ATTN_CR][2];
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        __m512 acc[ATTN_CR][4];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++)
                acc[r][c] = _mm512_setzero_ps();
        for (size_t d0 = 0; d0 < hd; d0 += 16) {
            __m512 qv[ATTN_CR]; /* the shuffled vectors' 16 dimensions from d0 */
#pragma GCC unroll 4
            for (int r = R - R / 2; r < R; r++)
                qv[r] = _mm512_loadu_ps(q[r] + d0);
#pragma GCC unroll 2
            for (int u = 0; u < 2; u++) {
                const size_t d = d0 + 8 * (size_t)u + 4 * (size_t)h;
#pragma GCC unroll 4
                for (int c = 0; c < 4; c++) {
                    __m512 w = _mm512_loadu_ps(WT + (d + (size_t)c) * 16);
                    KEEP_IN_REGISTER(w);
#pragma GCC unroll 4
                    for (int r = 0; r < R; r++) {
                        __m512 b;
                        if (r >= R - R / 2) /* q[r][d + c]: element 4 (2u + h) + c */
                            b = zmm_bcast_ps(qv[r], 4 * (2 * u + h) + c);
                        else
                            b = _mm512_set1_ps(q[r][d + (size_t)c]);
                        acc[r][c] = _mm512_fmadd_ps(b, w, acc[r][c]);
                    }
                }
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            half[r][h] = _mm512_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]),
                                       _mm512_add_ps(acc[r][2], acc[r][3]));
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        const __m512 v = _mm512_add_ps(half[r][0], half[r][1]);
        _mm512_mask_storeu_ps(s[r], m, _mm512_mul_ps(v, _mm512_set1_ps(scale)));
    }
}

/* The scores of n vectors over the transposed chunk WT; a tile stores the
 * union of its vectors' ranges, as scores_chunk's tiles do. */
static void scores_chunk_cols(const attn_vec *v, size_t n, const float *WT, uint32_t hd,
                              float scale) {
    for (size_t i = 0; i < n; i += ATTN_CR) {
        float *s[ATTN_CR];
        const float *q[ATTN_CR];
        uint32_t a, e;
        const int R = tile_vecs(v, n, i, ATTN_CR, s, q, &a, &e);
        const __mmask16 m = (__mmask16)(((1u << e) - 1) & ~((1u << a) - 1));
#define TILE(RR)                                                                                   \
    (hd == 64    ? scores_cols_tile(s, q, WT, 64, scale, m, RR)                                    \
     : hd == 128 ? scores_cols_tile(s, q, WT, 128, scale, m, RR)                                   \
                 : scores_cols_tile(s, q, WT, hd, scale, m, RR))
        switch (R) {
        case 1:
            TILE(1);
            break;
        case 2:
            TILE(2);
            break;
        case 3:
            TILE(3);
            break;
        default:
            TILE(ATTN_CR);
        }
#undef TILE
    }
}
#else
#define ATTN_COLS(hd) 0
#endif

/* The scores of n vectors over chunk W (f32 rows hd apart). A tile scores
 * the union of its vectors' ranges: the extra slots lie inside each
 * vector's scores row (positions below n_last) and are never read, as the
 * softmax and the values pass see only [lo, n_pos). */
static void scores_chunk(const attn_vec *v, size_t n, const float *W, uint32_t hd, float scale) {
    const size_t fl_bytes = (size_t)hd * 4;
#if ATTN_AVX2
    for (size_t i = 0; i < n; i += ATTN_SR) {
        float *s[ATTN_SR];
        const float *q[ATTN_SR];
        uint32_t a, e;
        const int R = tile_vecs(v, n, i, ATTN_SR, s, q, &a, &e);
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
#if ATTN_VR == 4
        case 2:
            TILE(2);
            break;
        case 3:
            TILE(3);
            break;
#endif
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

/* Pass 0 (scores) or 1 (values) of n vectors over the widened chunk W. */
ALWAYS_INLINE void chunk_pass(const attn_vec *v, size_t n, const float *W, uint32_t hd, float scale,
                              int pass, bool cols) {
#if defined(__AVX512F__)
    if (cols) {
        scores_chunk_cols(v, n, W, hd, scale);
        return;
    }
#else
    (void)cols;
#endif
    if (pass == 0)
        scores_chunk(v, n, W, hd, scale);
    else
        values_chunk(v, n, W, hd);
}

/* What both passes of a run of rows share (initialized in this order). */
typedef struct rows_ctx {
    const kv_cache *kv;
    const kv_seq *seq;
    uint32_t layer, kvh, group, hd;
    /* the run's first row attends to n_pos0 positions, its last to n_last;
     * the first row's window starts at lo0 */
    uint32_t n_pos0, n_rows, n_last, lo0;
    const float *q; /* row i's heads at q + i * ld, out likewise */
    float *out;
    size_t ld;
    float scale;
    attn_mods mods;
    float *S, *W; /* scratch: (n_rows, group, n_last) scores; the widened chunk */
} rows_ctx;

/* Gathers the vectors of every row and head that attend to span positions
 * [p0, p0 + np) of W, with their ranges, and runs pass (0 scores, 1
 * values) on them ATTN_VBUF at a time. */
ALWAYS_INLINE void span_pass(const rows_ctx *x, uint32_t p0, uint32_t np, int pass, bool cols) {
    attn_vec vec[ATTN_VBUF];
    size_t n_vec = 0;
    for (uint32_t i = 0; i < x->n_rows; i++) {
        const uint32_t n_pos = x->n_pos0 + i, lo = window_lo(n_pos, x->mods);
        if (p0 >= n_pos || p0 + np <= lo) continue;
        /* the row's positions in this span: [a, e) */
        const uint32_t a = p0 > lo ? p0 : lo, e = n_pos < p0 + np ? n_pos : p0 + np;
        for (uint32_t g = 0; g < x->group; g++) {
            const size_t off = i * x->ld + (size_t)g * x->hd;
            vec[n_vec++] =
                (attn_vec){x->q + off, x->out + off,
                           x->S + ((size_t)i * x->group + g) * x->n_last + p0, a - p0, e - p0};
            if (n_vec == ATTN_VBUF) {
                chunk_pass(vec, n_vec, x->W, x->hd, x->scale, pass, cols);
                n_vec = 0;
            }
        }
    }
    chunk_pass(vec, n_vec, x->W, x->hd, x->scale, pass, cols);
}

/* The scores pass: K a chunk at a time (in columns where the head size
 * allows), the next chunk's rows prefetched while this one's dots run (the
 * widening stalled on them otherwise), the first V rows after the last. */
ALWAYS_INLINE void scores_pass(const rows_ctx *x, const int kt) {
    const kv_cache *kv = x->kv;
    const uint32_t B = kv->block_tokens, n_blk = (x->n_last + B - 1) / B, hd = x->hd;
    const size_t row_bytes = kv_layer_head_bytes(kv, x->layer),
                 chunk_bytes = (size_t)ATTN_CHUNK * row_bytes;
    const bool cols = ATTN_COLS(hd);
    for (uint32_t b = x->lo0 / B; b < n_blk; b++) {
        const uint32_t pb = b * B, nb = x->n_last - pb < B ? x->n_last - pb : B;
        const uint8_t *K = head_rows(kv->k, kv, x->seq, x->layer, b, x->kvh);
        for (uint32_t c = 0; c < nb; c += ATTN_CHUNK) {
            const uint32_t p0 = pb + c, nc = nb - c < ATTN_CHUNK ? nb - c : ATTN_CHUNK;
            if (p0 + nc <= x->lo0) continue;
#if defined(__AVX512F__)
            if (cols)
                widen_cols(x->W, K + (size_t)c * row_bytes, row_bytes, nc, hd, kt);
            else
#endif
                widen_rows(x->W, K + (size_t)c * row_bytes, row_bytes, nc, hd, kt);
            if (c + ATTN_CHUNK < nb)
                prefetch_run(K + (size_t)(c + ATTN_CHUNK) * row_bytes, chunk_bytes);
            else if (b + 1 < n_blk)
                prefetch_run(head_rows(kv->k, kv, x->seq, x->layer, b + 1, x->kvh), chunk_bytes);
            else
                prefetch_run(head_rows(kv->v, kv, x->seq, x->layer, x->lo0 / B, x->kvh) +
                                 (size_t)(x->lo0 % B) * row_bytes,
                             chunk_bytes);
            span_pass(x, p0, nc, 0, cols);
        }
    }
}

/* V positions [p, p + n) widened into dst (rows hd apart), block by block;
 * or, with dst NULL, prefetched. */
ALWAYS_INLINE void v_span(const rows_ctx *x, float *dst, uint32_t p, uint32_t n, const int kt) {
    const kv_cache *kv = x->kv;
    const uint32_t B = kv->block_tokens;
    const size_t row_bytes = kv_layer_head_bytes(kv, x->layer);
    for (uint32_t done = 0; done < n;) {
        const uint32_t b = (p + done) / B, off = (p + done) % B;
        const uint32_t m = B - off < n - done ? B - off : n - done;
        const uint8_t *V =
            head_rows(kv->v, kv, x->seq, x->layer, b, x->kvh) + (size_t)off * row_bytes;
        if (dst)
            widen_rows(dst + (size_t)done * x->hd, V, row_bytes, m, x->hd, kt);
        else
            prefetch_run(V, (size_t)m * row_bytes);
        done += m;
    }
}

/* The values pass: V ATTN_VSPAN positions at a time, so that each output
 * tile is loaded and stored once a span, not once a chunk (at 2k tokens
 * the outputs' loads, missing L1, were the pass's hottest instruction). */
ALWAYS_INLINE void values_pass(const rows_ctx *x, const int kt) {
    for (uint32_t p = x->lo0; p < x->n_last; p += ATTN_VSPAN) {
        const uint32_t n = x->n_last - p < ATTN_VSPAN ? x->n_last - p : ATTN_VSPAN;
        v_span(x, x->W, p, n, kt);
        if (p + n < x->n_last) {
            const uint32_t next = x->n_last - p - n < ATTN_CHUNK ? x->n_last - p - n : ATTN_CHUNK;
            v_span(x, NULL, p + n, next, kt);
        }
        span_pass(x, p, n, 1, false);
    }
}

ALWAYS_INLINE void rows_impl(float *restrict out, const float *restrict q, size_t ld,
                             const kv_cache *kv, const kv_seq *seq, uint32_t layer, uint32_t kvh,
                             uint32_t group, uint32_t hd, uint32_t n_pos0, uint32_t n_rows,
                             float scale, attn_mods mods, float *restrict scratch, const int kt) {
    const uint32_t n_last = n_pos0 + n_rows - 1, lo0 = window_lo(n_pos0, mods);
    float *S = scratch, *W = scratch + ((size_t)ATTN_ROWS * group * n_last + 15) / 16 * 16;
    const rows_ctx x = {kv,  seq, layer, kvh, group, hd,   n_pos0, n_rows, n_last,
                        lo0, q,   out,   ld,  scale, mods, S,      W};
    scores_pass(&x, kt);
    for (uint32_t i = 0; i < n_rows; i++) {
        const uint32_t lo = window_lo(n_pos0 + i, mods), n = n_pos0 + i - lo;
        for (uint32_t g = 0; g < group; g++) {
            float *si = x.S + ((size_t)i * group + g) * n_last + lo;
            if (mods.softcap > 0) softcap_run(si, n, mods.softcap);
            softmax_head(si, n, mods, (size_t)kvh * group + g);
        }
    }
    for (uint32_t i = 0; i < n_rows; i++)
        memset(out + i * ld, 0, sizeof(float) * hd * group);
    values_pass(&x, kt);
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
