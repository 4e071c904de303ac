/* 512-bit tiles of the Q8_0 / Q4_0 8-row group kernels, for CPUs with
 * AVX-512 VNNI (included by dot_avx2.c and, for R8_ZMM, matmul.c). On a
 * CPU that executes 512-bit instructions at full width (this project's
 * Zen 5 machine) one zmm vpdpbusd does twice a ymm one's work.
 *
 * Several activation rows (prefill, batched decode): two groups share a
 * zmm, lanes 0-7 group 2p's rows and lanes 8-15 group 2p+1's, against the
 * same broadcast activation word. One row (decode) takes the ymm tile:
 * 1-row zmm tiles (two chunks of one group per vpdpbusd against pair
 * vectors of the row) read weights streamed from memory 1.3-1.6x slower
 * than it on this Zen 5 machine (engine tg128 at 110M and 1B, Q4_0, Q8_0,
 * Q4_K_M, Q5_K_M, Q4_1; 2026-12-02), though faster on weights in cache.
 *
 * Each lane takes the same integers (the exact block sum isum_b, the
 * -128 / -8 offset as its start value) and the same float sequence
 *   acc = fma(float(isum_b), d_w * d_x, acc)
 * block by block as r8_tile and the reference, so output bits do not
 * depend on which tile computed an element. */
#ifndef TPS_KERNELS_R8_TILE_ZMM_H
#define TPS_KERNELS_R8_TILE_ZMM_H

#if defined(__AVX512F__) && defined(__AVX512VNNI__) && defined(__AVX512VL__) &&                    \
    defined(__AVX512BW__)
#define R8_ZMM 1

#include <immintrin.h>
#include <string.h>

#include "base/compiler.h" /* ALWAYS_INLINE */
#include "kernels/kernel_impl.h"
#include "kernels/x8_tile.h" /* x8_act_q8_0 */

/* Groups g and g + 1 (gs bytes apart), the 32 bytes at offset off of
 * block b: group g in the low half. */
ALWAYS_INLINE __m512i z_pair(const uint8_t *restrict g0, size_t gs, size_t off) {
    const __m256i lo = _mm256_loadu_si256((const __m256i *)(g0 + off));
    const __m256i hi = _mm256_loadu_si256((const __m256i *)(g0 + gs + off));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

ALWAYS_INLINE __m512i z_bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm512_set1_epi32(v);
}

/* fp16 vectors of 8 lanes at offset off of groups g, g + 1 -> 16 floats. */
ALWAYS_INLINE __m512 z_half_pair(const uint8_t *restrict g0, size_t gs, size_t off) {
    const __m128i lo = _mm_loadu_si128((const __m128i *)(g0 + off));
    const __m128i hi = _mm_loadu_si128((const __m128i *)(g0 + gs + off));
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
}

/* Block b of pairs p < MP (pair p: groups 2p, 2p + 1 from G, gs bytes
 * apart; GB bytes a block) in wb[p], each group's block 8 ahead fetched. */
ALWAYS_INLINE void z_pair_blocks(const uint8_t *wb[3], const uint8_t *restrict G, size_t gs,
                                 size_t b, size_t GB, const int MP) {
#pragma GCC unroll 3
    for (int p = 0; p < MP; p++) {
        wb[p] = G + (size_t)(2 * p) * gs + b * GB;
        _mm_prefetch((const char *)(wb[p] + 8 * GB), _MM_HINT_T0);
        _mm_prefetch((const char *)(wb[p] + gs + 8 * GB), _MM_HINT_T0);
    }
}

/* Stores 16 lanes (two groups) of one activation row; n_valid counts the
 * valid columns from the first group's first row. */
ALWAYS_INLINE void z_store(float *restrict o, __m512 v, size_t n_valid) {
    if (n_valid >= 16) {
        _mm512_storeu_ps(o, v);
    } else if (n_valid > 0) {
        float t[16];
        _mm512_storeu_ps(t, v);
        memcpy(o, t, (n_valid < 16 ? n_valid : 16) * sizeof(float));
    }
}

/* Stores a zmm tile: pair p's 16 columns at column 16 p of activation row
 * j, the first n_valid columns only (a constant 16 * MP: plain stores). */
ALWAYS_INLINE void z_store_tile(float *restrict out, size_t ld_out, __m512 (*acc)[4],
                                size_t n_valid, const int MP, const int MX) {
#pragma GCC unroll 3
    for (int p = 0; p < MP; p++) {
        const size_t first = (size_t)p * 16;
        if (n_valid <= first) break;
#pragma GCC unroll 4
        for (int j = 0; j < MX; j++)
            z_store(out + (size_t)j * ld_out + first, acc[p][j], n_valid - first);
    }
}

/* 2 * MP groups (MP <= 3) from G (gs bytes apart) x MX activation rows
 * over nb blocks; stores the first n_valid of the 16 * MP output columns.
 * Three pairs beside 4 rows (12 + 12 accumulators of AVX-512's 32
 * registers) beat two: each broadcast activation word serves three
 * vpdpbusd instead of two (bench_kernels q8_0r, 1 thread, 32-128 rows:
 * 516 -> 546-585 GFLOP/s; q4_0r +4%). */
ALWAYS_INLINE void r8_tile_z(float *restrict out, size_t ld_out, const uint8_t *restrict G,
                             size_t gs, const uint8_t *restrict act, size_t act_row_bytes,
                             size_t nb, size_t n_valid, const int is_q4, const int MP,
                             const int MX) {
    const size_t GB = is_q4 ? sizeof(block_q4_0x8) : sizeof(block_q8_0x8);
    const size_t soff = kernel_act_side_off(nb);
    __m512 acc[3][4] = {{{0}}};
    for (size_t b = 0; b < nb; b++) {
        __m512i is[3][4];
        const x8_act8 ab = x8_act_q8_0(act, act_row_bytes, soff, b, MX);
#pragma GCC unroll 4
        for (int j = 0; j < MX; j++) {
            const __m512i init = _mm512_set1_epi32(is_q4 ? ab.sd[j]->neg8 : ab.sd[j]->neg128);
#pragma GCC unroll 3
            for (int p = 0; p < MP; p++)
                is[p][j] = init;
        }
        const uint8_t *wb[3];
        z_pair_blocks(wb, G, gs, b, GB, MP);
        if (is_q4) {
            const __m512i m0f = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                __m512i lo[3], hi[3];
#pragma GCC unroll 3
                for (int p = 0; p < MP; p++) {
                    const __m512i v = z_pair(wb[p], gs, 16 + 32 * (size_t)c);
                    lo[p] = _mm512_and_si512(v, m0f);
                    hi[p] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m0f);
                }
#pragma GCC unroll 4
                for (int j = 0; j < MX; j++) {
                    const __m512i xl = z_bcast4(ab.xq[j] + 4 * c),
                                  xh = z_bcast4(ab.xq[j] + 16 + 4 * c);
#pragma GCC unroll 3
                    for (int p = 0; p < MP; p++)
                        is[p][j] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(is[p][j], lo[p], xl),
                                                       hi[p], xh);
                }
            }
        } else {
#pragma GCC unroll 8
            for (int c = 0; c < 8; c++) {
                __m512i w[3];
#pragma GCC unroll 3
                for (int p = 0; p < MP; p++)
                    w[p] = z_pair(wb[p], gs, 16 + 32 * (size_t)c);
#pragma GCC unroll 4
                for (int j = 0; j < MX; j++) {
                    const __m512i xc = z_bcast4(ab.xq[j] + 4 * c);
#pragma GCC unroll 3
                    for (int p = 0; p < MP; p++)
                        is[p][j] = _mm512_dpbusd_epi32(is[p][j], w[p], xc);
                }
            }
        }
        __m512 dw[3];
#pragma GCC unroll 3
        for (int p = 0; p < MP; p++)
            dw[p] = z_half_pair(wb[p], gs, 0);
#pragma GCC unroll 4
        for (int j = 0; j < MX; j++) {
            const __m512 dx = _mm512_set1_ps(ab.sd[j]->d);
#pragma GCC unroll 3
            for (int p = 0; p < MP; p++)
                acc[p][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[p][j]), _mm512_mul_ps(dw[p], dx),
                                            acc[p][j]);
        }
    }
    z_store_tile(out, ld_out, acc, n_valid, MP, MX);
}

/* Within a rows kernel's pass (x8_tile.h): TILE_Z(g, K) for groups
 * g .. g + K - 1 (K / 2 pairs) while whole steps of K remain; without
 * R8_ZMM, nothing. */
#define X8_PAIR_STEPS(TILE_Z, K) X8_GROUP_STEPS(TILE_Z, K)

#else
#define R8_ZMM                   0
#define X8_PAIR_STEPS(TILE_Z, K) (void)0
#endif

#endif
