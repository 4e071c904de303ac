/* Element i (0..15) of a zmm in every lane, by two shuffles: lane i / 4
 * across the vector, then element i % 4 within each 128-bit lane. Where a
 * tile is bound by its loads, these issue beside its vpdpbusd and FMAs
 * while a {1to16} broadcast operand costs a load (kquant_x8_zmm.h,
 * attention_rows.c). The shuffles' immediates must be constant
 * expressions (clang checks them before inlining), so every i is a case
 * of its own; inlined with a constant i, one case remains. */
#ifndef TPS_KERNELS_ZMM_BCAST_H
#define TPS_KERNELS_ZMM_BCAST_H

#if defined(__AVX512F__)
#include <immintrin.h>

#include "base/compiler.h" /* ALWAYS_INLINE */

ALWAYS_INLINE __m512 zmm_bcast_ps(__m512 v, const int i) {
    __m512 l;
    switch (i / 4) {
    case 0:
        l = _mm512_shuffle_f32x4(v, v, 0x00);
        break;
    case 1:
        l = _mm512_shuffle_f32x4(v, v, 0x55);
        break;
    case 2:
        l = _mm512_shuffle_f32x4(v, v, 0xaa);
        break;
    default:
        l = _mm512_shuffle_f32x4(v, v, 0xff);
    }
    switch (i % 4) {
    case 0:
        return _mm512_shuffle_ps(l, l, 0x00);
    case 1:
        return _mm512_shuffle_ps(l, l, 0x55);
    case 2:
        return _mm512_shuffle_ps(l, l, 0xaa);
    default:
        return _mm512_shuffle_ps(l, l, 0xff);
    }
}

/* zmm_bcast_ps on 32-bit integers (the shuffles move bits, whatever they hold). */
ALWAYS_INLINE __m512i zmm_bcast_epi32(__m512i v, const int i) {
    return _mm512_castps_si512(zmm_bcast_ps(_mm512_castsi512_ps(v), i));
}
#endif

#endif
