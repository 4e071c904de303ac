/* AVX2 + FMA + F16C tier of the K-quant weights repacked into 8-row groups
 * (block_q4_Kx8, block_q6_Kx8: kernel_impl.h) against Q8_K activations.
 * Compiled only when the build targets such a CPU; the scalar tier of the
 * packed types is in repack.c.
 *
 * Lane i of every int32 vector is weight row i of the group, as in the
 * Q4_0 groups of dot_avx2.c: a 32-byte load of quants serves 8 rows, and
 * the per-row scales and fp16 factors are vectors of 8 lanes too, so the
 * integer sums and the float steps of kernel_impl.h run for 8 rows at once
 * with no horizontal sum; lane by lane they are the scalar tier's, so the
 * bits match it whatever the tile shape. A tile is MG groups x MX (1..4)
 * activation rows. Not here: the plain K-quant rows (dot_kquant_avx2.c),
 * threading (matmul.c). */
#include "kernels/kernel_impl.h"
#include "kernels/packed_kq.h" /* Q5_K groups */

#if KERNEL_HAVE_AVX2

#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "base/compiler.h" /* ALWAYS_INLINE */
#include "kernels/vnni.h"
#include "kernels/x8_tile.h"

/* ---- Q4_K in 8-row groups ------------------------------------------------ */

/* Sum of a sub-block's products per lane, in k8_dot's running form. VNNI:
 * dpbusd into int32, scaled by mullo. Without: maddubs pairs added in int16
 * (at most 8 vectors per sum: |sum| <= 8 * 2 * 15 * 127 = 30480, exact),
 * then one madd with the scale in both int16 halves of the lane. Both give
 * the exact integers sc_j * sum q4 * q8. */
#define K8_VNNI KERNEL_VNNI
#if K8_VNNI
#define k8_dot kernel_dpbusd_vnni
#else
ALWAYS_INLINE __m256i k8_dot(__m256i acc, __m256i u, __m256i s) {
    return chain_pin(_mm256_add_epi16(acc, _mm256_maddubs_epi16(u, s)));
}
#endif

ALWAYS_INLINE __m256i k8_add(__m256i a, __m256i b) {
    return K8_VNNI ? _mm256_add_epi32(a, b) : _mm256_add_epi16(a, b);
}

/* acc (k8_dot form) times sc (lane i: row i's 6-bit scale as int32), int32. */
ALWAYS_INLINE __m256i k8_scale(__m256i acc, __m256i sc) {
#if K8_VNNI
    return _mm256_mullo_epi32(acc, sc);
#else
    return _mm256_madd_epi16(acc, _mm256_or_si256(sc, _mm256_slli_epi32(sc, 16)));
#endif
}

/* kernel_q4_K_scales lane by lane: s[0] = sc 0..3, s[1] = sc 4..7,
 * s[2] = m 0..3, s[3] = m 4..7, one byte each, of row i in lane i. */
ALWAYS_INLINE void k8_scales(const block_q4_Kx8 *restrict g, __m256i s[4]) {
    const __m256i u0 = _mm256_loadu_si256((const __m256i *)g->scales);
    const __m256i u1 = _mm256_loadu_si256((const __m256i *)(g->scales + 32));
    const __m256i u2 = _mm256_loadu_si256((const __m256i *)(g->scales + 64));
    const __m256i lo6 = _mm256_set1_epi8(0x3f), lo4 = _mm256_set1_epi8(0x0f);
    const __m256i top2 = _mm256_set1_epi8(0x03);
    s[0] = _mm256_and_si256(u0, lo6);
    s[1] = _mm256_or_si256(_mm256_and_si256(u2, lo4),
                           _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u0, 6), top2), 4));
    s[2] = _mm256_and_si256(u1, lo6);
    s[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), lo4),
                           _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u1, 6), top2), 4));
}

/* Byte t of each lane of v as int32. */
ALWAYS_INLINE __m256i k8_byte(__m256i v, const int t) {
    return _mm256_and_si256(_mm256_srli_epi32(v, 8 * t), _mm256_set1_epi32(0xff));
}

/* One chunk of a tile: the quant vectors q[g] of groups g < MG against
 * activation row j's word at x[j][b].qs + off (j < MX), into the running
 * sums acc[g][j][slot] (k8_dot's form). */
ALWAYS_INLINE void k8_chunk(__m256i (*acc)[4][2], const __m256i *q, const block_q8_K *const *x,
                            size_t b, int off, int slot, const int MG, const int MX) {
#pragma GCC unroll 4
    for (int j = 0; j < MX; j++) {
        const __m256i xb = x8_bcast4(x[j][b].qs + off);
#pragma GCC unroll 4
        for (int g = 0; g < MG; g++)
            acc[g][j][slot] = k8_dot(acc[g][j][slot], q[g], xb);
    }
}

/* Q5_K's groups (packed_kq.h) share block_q4_Kx8's d, dmin and scales,
 * then hold the regrouped fifth bits before the same qs: one tile runs
 * both, is_q5 ORing each nibble's fifth bit in. */
ALWAYS_INLINE size_t k8_gb(const int is_q5) {
    return is_q5 ? sizeof(block_q5_Kx8) : sizeof(block_q4_Kx8);
}
ALWAYS_INLINE size_t k8_qs_off(const int is_q5) {
    return is_q5 ? offsetof(block_q5_Kx8, qs) : offsetof(block_q4_Kx8, qs);
}

/* The quants of qs vector 8k + c (low nibbles h = 0, high h = 1), with
 * Q5_K's fifth bits from its qh vector c. */
ALWAYS_INLINE __m256i k8_quants(const uint8_t *restrict gb, const int is_q5, const int k,
                                const int h, const int c) {
    const __m256i v =
        _mm256_loadu_si256((const __m256i *)(gb + k8_qs_off(is_q5) + (size_t)(8 * k + c) * 32));
    const __m256i q = _mm256_and_si256(h ? _mm256_srli_epi16(v, 4) : v, _mm256_set1_epi8(0x0f));
    if (!is_q5) return q;
    const __m256i qh =
        _mm256_loadu_si256((const __m256i *)(gb + offsetof(block_q5_Kx8, qh) + (size_t)c * 32));
    const __m256i hb = h ? _mm256_srli_epi32(qh, k) : _mm256_slli_epi32(qh, 4 - k);
    return _mm256_or_si256(q, _mm256_and_si256(hb, _mm256_set1_epi8(0x10)));
}

/* MG groups (gs bytes apart) x MX activation rows over nb superblocks;
 * writes 8 * MG columns of MX rows. Per superblock and lane: isum_b and
 * imin_b exactly, then the two FMAs of kernel_impl.h in that order. One
 * activation row splits each sub-block sum over two accumulators (c even
 * / odd: a shorter dependency chain; integer, so the same sum). Q5_K
 * without VNNI always splits, and scales the halves apart: a maddubs pair
 * of 5-bit quants reaches 2 * 31 * 127 = 7874, so only 4 share an int16. */
ALWAYS_INLINE void q4_K_x8_tile(float *restrict out, size_t ld_out, const uint8_t *restrict G,
                                size_t gs, const uint8_t *restrict act, size_t act_row_bytes,
                                size_t nb, const int MG, const int MX, const int is_q5) {
    const int NS = MX == 1 || (is_q5 && !K8_VNNI) ? 2 : 1;
    const size_t GB = k8_gb(is_q5);
    const block_q8_K *x[4];
    const kernel_act_k_side *sd[4];
    x8_act_q8_K_side(x, sd, act, act_row_bytes, kernel_act_k_side_off(nb), MX);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 acc[4][4] = {{{0}}};
    for (size_t b = 0; b < nb; b++) {
        const block_q4_Kx8 *gp[4]; /* d, dmin, scales: the same in block_q5_Kx8 */
        __m256i sm[4][4], is[4][4] = {{{0}}};
#pragma GCC unroll 4
        for (int g = 0; g < MG; g++) {
            gp[g] = (const block_q4_Kx8 *)(G + (size_t)g * gs + b * GB);
            k8_scales(gp[g], sm[g]);
        }
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++)
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                __m256i s[4][4][2];
#pragma GCC unroll 4
                for (int g = 0; g < MG; g++)
#pragma GCC unroll 4
                    for (int j = 0; j < MX; j++)
                        s[g][j][0] = s[g][j][1] = _mm256_setzero_si256();
#pragma GCC unroll 8
                for (int c = 0; c < 8; c++) {
                    __m256i q[4];
#pragma GCC unroll 4
                    for (int g = 0; g < MG; g++) {
                        if (h == 0)
                            _mm_prefetch((const char *)gp[g] + 2 * GB + GB / 32 * (8 * k + c),
                                         _MM_HINT_T0);
                        q[g] = k8_quants((const uint8_t *)gp[g], is_q5, k, h, c);
                    }
                    k8_chunk(s, q, x, b, 64 * k + 32 * h + 4 * c, c % NS, MG, MX);
                }
#pragma GCC unroll 4
                for (int g = 0; g < MG; g++) {
                    const __m256i sc = k8_byte(sm[g][k / 2], 2 * (k % 2) + h);
#pragma GCC unroll 4
                    for (int j = 0; j < MX; j++) {
                        if (is_q5 && !K8_VNNI) {
                            const __m256i t = _mm256_add_epi32(k8_scale(s[g][j][0], sc),
                                                               k8_scale(s[g][j][1], sc));
                            is[g][j] = chain_pin(_mm256_add_epi32(is[g][j], t));
                            continue;
                        }
                        const __m256i t = NS == 2 ? k8_add(s[g][j][0], s[g][j][1]) : s[g][j][0];
                        is[g][j] = chain_pin(_mm256_add_epi32(is[g][j], k8_scale(t, sc)));
                    }
                }
            }
        __m256i bp[4][4]; /* the side's (s0, s2), (s1, s3), (s4, s6), (s5, s7) in every lane */
#pragma GCC unroll 4
        for (int j = 0; j < MX; j++)
#pragma GCC unroll 4
            for (int w = 0; w < 4; w++)
                bp[j][w] = _mm256_set1_epi32(sd[j][b].q4[w]);
        const __m256i even = _mm256_set1_epi32(0x00ff00ff);
#pragma GCC unroll 4
        for (int g = 0; g < MG; g++) {
            /* mins as int16 pairs: (m0, m2), (m1, m3), (m4, m6), (m5, m7) */
            const __m256i mp[4] = {_mm256_and_si256(sm[g][2], even),
                                   _mm256_and_si256(_mm256_srli_epi32(sm[g][2], 8), even),
                                   _mm256_and_si256(sm[g][3], even),
                                   _mm256_and_si256(_mm256_srli_epi32(sm[g][3], 8), even)};
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)gp[g]->d));
            const __m256 dm =
                _mm256_xor_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)gp[g]->dmin)), sign);
#pragma GCC unroll 4
            for (int j = 0; j < MX; j++) {
                const __m256i im =
                    _mm256_add_epi32(_mm256_add_epi32(_mm256_madd_epi16(mp[0], bp[j][0]),
                                                      _mm256_madd_epi16(mp[1], bp[j][1])),
                                     _mm256_add_epi32(_mm256_madd_epi16(mp[2], bp[j][2]),
                                                      _mm256_madd_epi16(mp[3], bp[j][3])));
                const __m256 dx = _mm256_set1_ps(x[j][b].d);
                acc[g][j] =
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[g][j]), _mm256_mul_ps(dw, dx), acc[g][j]);
                acc[g][j] =
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(im), _mm256_mul_ps(dm, dx), acc[g][j]);
            }
        }
    }
    x8_store(out, ld_out, acc, (size_t)8 * MG, MG, MX);
}

/* ---- Q6_K in 8-row groups ------------------------------------------------
 *
 * The q6 stay unsigned (0..63) in the dots and 32 * sum_k sc_k * bsum_k
 * comes off each lane's int32 sum per superblock, as in the plain Q6_K
 * tile (every sum below 2^29: kernel_impl.h). Without VNNI a maddubs pair
 * is at most 2 * 63 * 127 = 16002, so two of them (32004) are added in
 * int16 before a madd by the scale widens the sum to int32: a sub-block of
 * 16 elements (4 bytes per lane, 4 loads) is two such sums per lane. */

/* Byte selector of q6_scale: byte t of dword d into bytes 1 and 3. */
#define Q6_SEL(d, t) (0x00800080 + (4 * (d) + (t)) * 0x01000100)

/* Sub-block 4w + t's scale from scales vector w (byte t of each lane,
 * signed): int32 for mullo (VNNI), or in both int16 halves for madd. */
ALWAYS_INLINE __m256i q6_scale(__m256i sw, const int t) {
#if K8_VNNI
    return _mm256_srai_epi32(_mm256_slli_epi32(sw, 24 - 8 * t), 24);
#else
    const __m256i sel = _mm256_setr_epi32(Q6_SEL(0, t), Q6_SEL(1, t), Q6_SEL(2, t), Q6_SEL(3, t),
                                          Q6_SEL(0, t), Q6_SEL(1, t), Q6_SEL(2, t), Q6_SEL(3, t));
    return _mm256_srai_epi16(_mm256_shuffle_epi8(sw, sel), 8);
#endif
}

/* The q6 of elements 128h + 32t + 4c + e (e < 4) of the 8 rows, 4 bytes
 * per lane (kernel_impl.h's layout: t < 3 is one AND; t = 3 gathers the
 * top 2 bits of the three vectors, 16-bit shifts being clean once masked). */
ALWAYS_INLINE __m256i q6_quants(const block_q6_Kx8 *restrict g, const int h, const int t,
                                const int c) {
    const __m256i lo6 = _mm256_set1_epi8(0x3f), top2 = _mm256_set1_epi8((char)0xc0);
    const __m256i *v0 = (const __m256i *)(g->q + (24 * h + c) * 32);
    const __m256i *v1 = (const __m256i *)(g->q + (24 * h + 8 + c) * 32);
    const __m256i *v2 = (const __m256i *)(g->q + (24 * h + 16 + c) * 32);
    if (t < 3) return _mm256_and_si256(_mm256_loadu_si256(t == 0 ? v0 : t == 1 ? v1 : v2), lo6);
    const __m256i a = _mm256_srli_epi16(_mm256_and_si256(_mm256_loadu_si256(v0), top2), 6);
    const __m256i b = _mm256_srli_epi16(_mm256_and_si256(_mm256_loadu_si256(v1), top2), 4);
    const __m256i d = _mm256_srli_epi16(_mm256_and_si256(_mm256_loadu_si256(v2), top2), 2);
    return _mm256_or_si256(_mm256_or_si256(a, b), d);
}

/* Lane i: sum_k sc_k * bsum_k of row i's scales against the activation
 * block's bsums (int16 pairs madd'ed: |sum| <= 16 * 128 * 16 * 127, exact). */
ALWAYS_INLINE __m256i q6_bsum_dot(const block_q6_Kx8 *restrict g, const int32_t bp[8]) {
    __m256i off = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int w = 0; w < 4; w++) {
        const __m256i sw = _mm256_loadu_si256((const __m256i *)(g->scales + 32 * w));
        /* (sc_4w, sc_4w+2) and (sc_4w+1, sc_4w+3) as int16 pairs */
        const __m256i pe = _mm256_srai_epi16(_mm256_slli_epi16(sw, 8), 8);
        const __m256i po = _mm256_srai_epi16(sw, 8);
        off = _mm256_add_epi32(off, _mm256_madd_epi16(pe, _mm256_set1_epi32(bp[2 * w])));
        off = _mm256_add_epi32(off, _mm256_madd_epi16(po, _mm256_set1_epi32(bp[2 * w + 1])));
    }
    return off;
}

/* MG groups (gs bytes apart) x MX activation rows over nb superblocks;
 * writes 8 * MG columns of MX rows. Per superblock and lane: isum_b
 * exactly, then kernel_impl.h's one FMA. With VNNI, one activation row
 * splits each sub-block sum over two accumulators (a shorter dependency
 * chain; integer, so the same sum); without, each int16 sum of two maddubs
 * is widened by the scale as soon as it is complete. */
ALWAYS_INLINE void q6_K_x8_tile(float *restrict out, size_t ld_out, const uint8_t *restrict G,
                                size_t gs, const uint8_t *restrict act, size_t act_row_bytes,
                                size_t nb, const int MG, const int MX) {
    const int NS = K8_VNNI && MX == 1 ? 2 : 1;
    const block_q8_K *x[4];
    const kernel_act_k_side *sd[4];
    x8_act_q8_K_side(x, sd, act, act_row_bytes, kernel_act_k_side_off(nb), MX);
    __m256 acc[4][4] = {{{0}}};
    for (size_t b = 0; b < nb; b++) {
        const block_q6_Kx8 *gp[4];
        __m256i is[4][4] = {{{0}}};
#pragma GCC unroll 4
        for (int g = 0; g < MG; g++) {
            gp[g] = (const block_q6_Kx8 *)(G + (size_t)g * gs) + b;
            if (MX == 1) prefetch_block_ahead((const uint8_t *)gp[g], sizeof(block_q6_Kx8));
        }
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++)
#pragma GCC unroll 4
            for (int t = 0; t < 4; t++)
#pragma GCC unroll 2
                for (int s = 0; s < 2; s++) {
                    /* sub-block 8h + 2t + s: byte 2(t%2) + s of scales vector 2h + t/2 */
                    __m256i sc[4], a[4][4][2];
#pragma GCC unroll 4
                    for (int g = 0; g < MG; g++) {
                        sc[g] =
                            q6_scale(_mm256_loadu_si256(
                                         (const __m256i *)(gp[g]->scales + 32 * (2 * h + t / 2))),
                                     2 * (t % 2) + s);
#pragma GCC unroll 4
                        for (int j = 0; j < MX; j++)
                            a[g][j][0] = a[g][j][1] = _mm256_setzero_si256();
                    }
#pragma GCC unroll 4
                    for (int c = 0; c < 4; c++) {
                        const int cc = 4 * s + c;
                        __m256i q[4];
#pragma GCC unroll 4
                        for (int g = 0; g < MG; g++)
                            q[g] = q6_quants(gp[g], h, t, cc);
                        k8_chunk(a, q, x, b, 128 * h + 32 * t + 4 * cc, c % NS, MG, MX);
                        if (!K8_VNNI && c % 2 == 1) {
#pragma GCC unroll 4
                            for (int g = 0; g < MG; g++)
#pragma GCC unroll 4
                                for (int j = 0; j < MX; j++) {
                                    is[g][j] = chain_pin(_mm256_add_epi32(
                                        is[g][j], _mm256_madd_epi16(a[g][j][0], sc[g])));
                                    a[g][j][0] = _mm256_setzero_si256();
                                }
                        }
                    }
                    if (K8_VNNI) {
#pragma GCC unroll 4
                        for (int g = 0; g < MG; g++)
#pragma GCC unroll 4
                            for (int j = 0; j < MX; j++) {
                                const __m256i u =
                                    NS == 2 ? _mm256_add_epi32(a[g][j][0], a[g][j][1]) : a[g][j][0];
                                is[g][j] = _mm256_add_epi32(is[g][j], _mm256_mullo_epi32(u, sc[g]));
                            }
                    }
                }
#pragma GCC unroll 4
        for (int g = 0; g < MG; g++) {
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)gp[g]->d));
#pragma GCC unroll 4
            for (int j = 0; j < MX; j++) {
                const __m256i off = q6_bsum_dot(gp[g], sd[j][b].q6);
                const __m256i isum = _mm256_sub_epi32(is[g][j], _mm256_slli_epi32(off, 5));
                const __m256 dx = _mm256_set1_ps(x[j][b].d);
                acc[g][j] =
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, dx), acc[g][j]);
            }
        }
    }
    x8_store(out, ld_out, acc, (size_t)8 * MG, MG, MX);
}

#include "kernels/kquant_x8_zmm.h"

/* ---- the rows kernels ---------------------------------------------------- */

/* Groups per tile. Q4_K: X8_MG beside several activation rows (2 with
 * AVX-512VL's 32 ymm registers, 1 with 16). One activation row (decode) takes 1 group on
 * both: with 16 registers two Q4_K groups of one row spill (a group holds
 * its superblock's 4 scale vectors; bench_kernels put one group at
 * 1.2-1.45x two there), and with 32 the engine's decode, weights streamed
 * from memory, ran 1.3x faster with one group than with two (110M Q4_K_M
 * tg128, 3 alternating pairs, 2026-12-01). Q6_K: 1 group everywhere: two
 * groups of one row were 3x slower on a 768x32000 output.weight streamed
 * from memory (native, bench_kernels), and no faster in cache. */
#define Q6_MG 1

enum { X8_Q4_K, X8_Q6_K, X8_Q5_K };

/* Weight rows [o0, o1) (whole groups) x every activation row: 4 activation
 * rows per tile while they last, then one tile for the 1..3 left. */
ALWAYS_INLINE void x8_rows(float *restrict out, size_t ld_out, const uint8_t *restrict W,
                           size_t w_row_bytes, size_t o0, size_t o1, const uint8_t *restrict act,
                           size_t act_row_bytes, size_t n_rows_x, size_t n_in, const int kind) {
    const int is_q6 = kind == X8_Q6_K, is_q5 = kind == X8_Q5_K;
    const size_t nb = n_in / QK_K, gs = 8 * w_row_bytes, n_groups = (o1 - o0) / 8;
    const uint8_t *G = W + o0 * w_row_bytes;
    const size_t mg = is_q6 ? Q6_MG : X8_MG;
    const size_t soff = kernel_act_k_side_off(nb);
    (void)soff; /* the zmm tiles' */
    out += o0;
#define X8_TILE(g, MG)                                                                             \
    do {                                                                                           \
        if (is_q6)                                                                                 \
            q6_K_x8_tile(X8_AT(g), (int)(MG), MX);                                                 \
        else                                                                                       \
            q4_K_x8_tile(X8_AT(g), (int)(MG), MX, is_q5);                                          \
    } while (0)
#define X8_TILE_Z(g, K) /* K = 2: one pair */                                                      \
    do {                                                                                           \
        if (is_q6)                                                                                 \
            q6_K_x8_tile_z(X8_AT(g), MX, NULL, 0, soff);                                           \
        else                                                                                       \
            q4_K_x8_tile_z(X8_AT(g), MX, is_q5, NULL, 0, soff);                                    \
    } while (0)
#define X8_PASS() /* one row: one group per tile, see the top of this section */                   \
    if (MX > 1) {                                                                                  \
        X8_PAIR_STEPS(X8_TILE_Z, 2);                                                               \
        X8_GROUP_STEPS(X8_TILE, mg);                                                               \
    }                                                                                              \
    X8_GROUP_STEPS(X8_TILE, 1)
    X8_ROW_PASSES(X8_PASS);
#undef X8_PASS
#undef X8_TILE_Z
#undef X8_TILE
}

#if KQ_ZMM
/* Superblocks a K chunk of x8_rows_unpacked: a pair's chunk unpacked is
 * ZK_KC * 4 KiB. Whole pairs (32 KiB at K = 2048, 88 KiB at 5632) ran
 * 1.2-1.35x slower on two threads (bench_kernels q4_Kr and q6_Kr, 2048 x
 * 5632, 128 and 512 rows, Zen 5, 2026-12-06), though alike on one. */
#define ZK_KC 4

/* The packed bytes the next zk_unpack of x8_rows_unpacked reads (this
 * pair's next K chunk, else the next pair's first), fetched into L1 while
 * the chunk's tiles run: the weights stream from memory once per
 * activation block, and the unpack otherwise waits on each line. In
 * process A B pairs (each rows kernel called as the matmul calls it, 529
 * rows, 2 threads, 2026-12-06, Zen 5): Q4_K 2048x8192 1.01x, 8192x2048
 * 1.04x, 2048x5632 1.01x; Q6_K 2048x2048 1.02x, 8192x2048 1.04x; into L2
 * instead, no steadier. */
ALWAYS_INLINE void zk_prefetch_next(const uint8_t *restrict W, size_t w_row_bytes, size_t o,
                                    size_t o1, size_t b0, size_t kb0, size_t kb1, size_t GB,
                                    size_t gs) {
    size_t on = o, bn = b0 + ZK_KC;
    if (bn >= kb1) {
        on = o + 16, bn = kb0;
        if (on + 16 > o1) return;
    }
    const uint8_t *G = W + on * w_row_bytes + bn * GB;
    const size_t kb = kb1 - bn < ZK_KC ? kb1 - bn : ZK_KC;
    for (size_t q = 0; q < kb * GB; q += 64) {
        _mm_prefetch((const char *)(G + q), _MM_HINT_T0);
        _mm_prefetch((const char *)(G + gs + q), _MM_HINT_T0);
    }
}

/* Beside ZK_UNPACK_ROWS or more activation rows: each pair of groups, a K
 * chunk at a time, unpacked once into tmp (kquant_x8_zmm.h; ZK_KC * 4096
 * bytes), then every activation row against it, 4 at a time, each tile
 * continuing its sums from the chunk before; a last odd group takes
 * x8_rows. Only superblocks [kb0, kb1) of the n_in / QK_K: a K panel
 * (kernel_rows_panel_fn), whose sums continue those of the panels before
 * as a chunk's do, so the bits are x8_rows' once every panel has run, in
 * order. */
ALWAYS_INLINE void x8_rows_unpacked(float *restrict out, size_t ld_out, const uint8_t *restrict W,
                                    size_t w_row_bytes, size_t o0, size_t o1,
                                    const uint8_t *restrict act, size_t act_row_bytes,
                                    size_t n_rows_x, size_t n_in, uint8_t *restrict U, size_t kb0,
                                    size_t kb1, const int kind) {
    const int is_q6 = kind == X8_Q6_K, is_q5 = kind == X8_Q5_K;
    const size_t nb = n_in / QK_K, gs = 8 * w_row_bytes;
    const size_t GB = is_q6 ? sizeof(block_q6_Kx8) : k8_gb(is_q5);
    size_t o = o0;
    for (; o + 16 <= o1; o += 16)
        for (size_t b0 = kb0; b0 < kb1; b0 += ZK_KC) {
            const size_t kb = kb1 - b0 < ZK_KC ? kb1 - b0 : ZK_KC;
            const uint8_t *G = W + o * w_row_bytes + b0 * GB;
            const uint8_t *act_k = act + b0 * sizeof(block_q8_K);
            /* from block b0 to its side: the whole row's offset, moved b0 sides on */
            const size_t soff = kernel_act_k_side_off(nb) + b0 * sizeof(kernel_act_k_side) -
                                b0 * sizeof(block_q8_K);
            zk_unpack(U, G, gs, GB, kb, is_q5, is_q6);
            zk_prefetch_next(W, w_row_bytes, o, o1, b0, kb0, kb1, GB, gs);
#define X8_TILE_U()                                                                                \
    do {                                                                                           \
        const uint8_t *a_k = act_k + (a - act);                                                    \
        if (is_q6)                                                                                 \
            q6_K_x8_tile_z(o_r + o, ld_out, G, gs, a_k, act_row_bytes, kb, MX, U, b0 > 0, soff);   \
        else                                                                                       \
            q4_K_x8_tile_z(o_r + o, ld_out, G, gs, a_k, act_row_bytes, kb, MX, is_q5, U, b0 > 0,   \
                           soff);                                                                  \
    } while (0)
            X8_ROW_PASSES(X8_TILE_U);
#undef X8_TILE_U
        }
    if (o < o1 && kb1 == nb)
        x8_rows(out, ld_out, W, w_row_bytes, o, o1, act, act_row_bytes, n_rows_x, n_in, kind);
}

/* Superblocks [kb0, kb1) of a packed K-quant rows call: unpacked beside
 * ZK_UNPACK_ROWS rows or more; else nothing until the last panel, which
 * runs x8_rows over all of K. */
#define X8_ROWS_PANEL(kind, kb0, kb1)                                                              \
    do {                                                                                           \
        if (n_rows_x >= ZK_UNPACK_ROWS)                                                            \
            x8_rows_unpacked(out, ld_out, W, w_row_bytes, o0, o1, act, act_row_bytes, n_rows_x,    \
                             n_in, (uint8_t *)tmp, kb0, kb1, kind);                                \
        else if ((kb1) == n_in / QK_K)                                                             \
            x8_rows(out, ld_out, W, w_row_bytes, o0, o1, act, act_row_bytes, n_rows_x, n_in,       \
                    kind);                                                                         \
    } while (0)
#define X8_ROWS_K(kind) X8_ROWS_PANEL(kind, 0, n_in / QK_K)
#else
#define X8_ROWS_K(kind)                                                                            \
    do {                                                                                           \
        (void)tmp;                                                                                 \
        x8_rows(out, ld_out, W, w_row_bytes, o0, o1, act, act_row_bytes, n_rows_x, n_in, kind);    \
    } while (0)
#endif

KERNEL_ROWS_DECL(kernel_rows_q4_K_r8_avx2) {
    X8_ROWS_K(X8_Q4_K);
}

KERNEL_ROWS_DECL(kernel_rows_q6_K_r8_avx2) {
    X8_ROWS_K(X8_Q6_K);
}

KERNEL_ROWS_DECL(kernel_rows_q5_K_r8_avx2) {
    X8_ROWS_K(X8_Q5_K);
}

#if KQ_ZMM
static KERNEL_ROWS_PANEL_DECL(rows_q4_K_r8_panel) {
    X8_ROWS_PANEL(X8_Q4_K, kb0, kb1);
}

static KERNEL_ROWS_PANEL_DECL(rows_q6_K_r8_panel) {
    X8_ROWS_PANEL(X8_Q6_K, kb0, kb1);
}

static KERNEL_ROWS_PANEL_DECL(rows_q5_K_r8_panel) {
    X8_ROWS_PANEL(X8_Q5_K, kb0, kb1);
}
#endif

kernel_rows_panel_fn kernel_rows_panel_avx2(uint32_t plain) {
#if KQ_ZMM
    switch (plain) {
    case GGML_TYPE_Q4_K:
        return rows_q4_K_r8_panel;
    case GGML_TYPE_Q6_K:
        return rows_q6_K_r8_panel;
    case GGML_TYPE_Q5_K:
        return rows_q5_K_r8_panel;
    }
#endif
    (void)plain;
    return NULL;
}

/* Plain Q5_K rows: each whole group of 8 packed into scratch, then the
 * packed tiles; the last
 * rows short of a group run on the scalar tier. Same bits either way. */
KERNEL_ROWS_DECL(kernel_rows_q5_K_avx2) {
    uint8_t *pk = (uint8_t *)tmp;
    size_t o = o0;
    for (; o + 8 <= o1; o += 8) {
        kernel_pack_group_q5_K(pk, W + o * w_row_bytes, w_row_bytes, n_in / QK_K);
        x8_rows(out + o, ld_out, pk, w_row_bytes, 0, 8, act, act_row_bytes, n_rows_x, n_in,
                X8_Q5_K);
    }
    if (o < o1)
        kernel_rows_q5_K_scalar(out, ld_out, W, w_row_bytes, o, o1, act, act_row_bytes, n_rows_x,
                                n_in, NULL);
}

#endif
