/* Whether this AVX2 build has an int8 dot instruction (AVX-512 VNNI with
 * VL, or AVX-VNNI), and that instruction: int32 lane += 4 adjacent
 * u8 x s8 products. The tiers that include this write their own stand-in
 * for KERNEL_VNNI 0, each exact over the range its data can take. */
#ifndef TPS_KERNELS_VNNI_H
#define TPS_KERNELS_VNNI_H

#include <immintrin.h>

#include "base/compiler.h"       /* ALWAYS_INLINE, KEEP_IN_REGISTER */
#include "kernels/kernel_impl.h" /* KERNEL_VNNI */

/* Holds v in a register at this point of an accumulation chain. Integer
 * adds reassociate, and GCC turned the tiles' unrolled chains of
 * "acc += madd(maddubs)" (the stand-ins without VNNI) into trees: every
 * product of a block live at once, spilled to the stack and summed at the
 * end, as AVX2 has only 16 ymm registers. */
ALWAYS_INLINE __m256i chain_pin(__m256i v) {
    KEEP_IN_REGISTER(v);
    return v;
}

#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
ALWAYS_INLINE __m256i kernel_dpbusd_vnni(__m256i acc, __m256i u, __m256i s) {
    return _mm256_dpbusd_epi32(acc, u, s);
}
#elif KERNEL_VNNI
ALWAYS_INLINE __m256i kernel_dpbusd_vnni(__m256i acc, __m256i u, __m256i s) {
    return _mm256_dpbusd_avx_epi32(acc, u, s);
}
#endif

#endif
