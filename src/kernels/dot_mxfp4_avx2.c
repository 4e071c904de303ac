/* AVX2 tier of the MXFP4 dot products (gpt-oss's expert weights) against
 * Q8_0 activations, on 8-row groups (block_mxfp4x8, kernel_impl.h): the
 * packed rows kernel, and the plain one, which packs each tile's groups
 * into thread scratch first, so both give the same bits. Compiled only
 * when the build targets AVX2; else empty (mxfp4.c has the scalar tier).
 *
 * Per block a group's 8 rows are 4 vectors of nibble pairs; each nibble is
 * looked up (pshufb) in the codes' values biased by +12 (0..24, unsigned),
 * so one dpbusd (or its maddubs stand-in) serves 8 rows, and the bias comes
 * off exactly as the start value -12 * sum(x8) of the block (from the Q8_0
 * activation's side data: 3/2 of its -8 * sum). Lane i then holds row i's
 * exact isum_b and the float step is mxfp4.c's, so every tile shape and
 * tier gives the scalar tier's bits. Not here: threading (matmul.c). */
#include "kernels/kernel_impl.h"

#if KERNEL_HAVE_AVX2

#include <immintrin.h>
#include <string.h>

#include "base/compiler.h" /* ALWAYS_INLINE */
#include "kernels/vnni.h"
#include "kernels/x8_tile.h"

/* the 16 codes' values + 12, in both 128-bit lanes for pshufb */
#define MX_BIAS 12
ALWAYS_INLINE __m256i mx_lut(void) {
    return _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0, 12, 13, 14,
                            15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
}

/* The 8 rows' scales 2^(e - 128), kernel_e8m0_half lane by lane. */
ALWAYS_INLINE __m256 mx_scales(const uint8_t *e8) {
    int64_t v;
    memcpy(&v, e8, sizeof v);
    const __m256i e = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(v));
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, one), 23);
    const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    const __m256i is_normal = _mm256_cmpgt_epi32(e, one);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(sub, normal, is_normal));
}

#if KERNEL_VNNI
/* isum += the chunk's low and high nibbles' products */
ALWAYS_INLINE __m256i mx_chunk(__m256i is, __m256i lo, __m256i xl, __m256i hi, __m256i xh) {
    return kernel_dpbusd_vnni(kernel_dpbusd_vnni(is, lo, xl), hi, xh);
}
#else
/* maddubs pairs of a biased value (0..24) and an int8 are at most
 * 2 * 24 * 127 = 6096 in magnitude: two chunks' four sum exactly in int16
 * (<= 24384), then one madd widens them. The same integers as dpbusd. */
ALWAYS_INLINE __m256i mx_pairs16(__m256i lo, __m256i xl, __m256i hi, __m256i xh) {
    return _mm256_add_epi16(_mm256_maddubs_epi16(lo, xl), _mm256_maddubs_epi16(hi, xh));
}
#endif

/* MX (1..4) activation rows against one group G over nb blocks; stores the
 * first n_valid of its 8 output columns in each row. */
ALWAYS_INLINE void mx_tile(float *restrict out, size_t ld_out, const uint8_t *restrict G,
                           const uint8_t *restrict act, size_t act_row_bytes, size_t nb,
                           size_t n_valid, const int MX) {
    const size_t soff = kernel_act_side_off(nb);
    const __m256i lut = mx_lut(), m0f = _mm256_set1_epi8(0x0f);
    __m256 acc[4] = {{0}};
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *wb = G + b * sizeof(block_mxfp4x8);
        if (MX == 1) prefetch_block_ahead(wb, sizeof(block_mxfp4x8));
        __m256i lo[4], hi[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(wb + 8 + 32 * c));
            lo[c] = _mm256_shuffle_epi8(lut, _mm256_and_si256(v, m0f));
            hi[c] = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v, 4), m0f));
        }
        const __m256 dw = mx_scales(wb);
#pragma GCC unroll 4
        for (int j = 0; j < MX; j++) {
            const uint8_t *a = act + (size_t)j * act_row_bytes;
            const int8_t *xq = ((const block_q8_0 *)a + b)->qs;
            const kernel_act_side *sd = (const kernel_act_side *)(a + soff) + b;
            __m256i is = _mm256_set1_epi32(sd->neg8 + sd->neg8 / 2); /* -12 * sum */
#if KERNEL_VNNI
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++)
                is = mx_chunk(is, lo[c], x8_bcast4(xq + 4 * c), hi[c], x8_bcast4(xq + 16 + 4 * c));
#else
            const __m256i one16 = _mm256_set1_epi16(1);
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const int c0 = 2 * h, c1 = 2 * h + 1;
                const __m256i s16 = _mm256_add_epi16(
                    mx_pairs16(lo[c0], x8_bcast4(xq + 4 * c0), hi[c0], x8_bcast4(xq + 16 + 4 * c0)),
                    mx_pairs16(lo[c1], x8_bcast4(xq + 4 * c1), hi[c1],
                               x8_bcast4(xq + 16 + 4 * c1)));
                is = _mm256_add_epi32(is, _mm256_madd_epi16(s16, one16));
            }
#endif
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is),
                                     _mm256_mul_ps(dw, _mm256_set1_ps(sd->d)), acc[j]);
        }
    }
    x8_store(out, ld_out, &acc, n_valid, 1, MX);
}

/* All activation rows against n_groups groups gs bytes apart from G. */
static void mx_rows(float *restrict out, size_t ld_out, const uint8_t *restrict G, size_t gs,
                    size_t n_groups, size_t n_valid, const uint8_t *restrict act,
                    size_t act_row_bytes, size_t n_rows_x, size_t nb) {
#define MX_TILE(g, K)                                                                              \
    mx_tile(o_r + (g)*8, ld_out, G + (g)*gs, a, act_row_bytes, nb, n_valid - (g)*8, MX)
#define MX_PASS() X8_GROUP_STEPS(MX_TILE, 1)
    X8_ROW_PASSES(MX_PASS);
#undef MX_PASS
#undef MX_TILE
}

void kernel_rows_mxfp4_r8_avx2(float *restrict out, size_t ld_out, const uint8_t *restrict W,
                               size_t w_row_bytes, size_t o0, size_t o1,
                               const uint8_t *restrict act, size_t act_row_bytes, size_t n_rows_x,
                               size_t n_in, float *restrict tmp) {
    (void)tmp;
    mx_rows(out + o0, ld_out, W + o0 * w_row_bytes, 8 * w_row_bytes, (o1 - o0 + 7) / 8, o1 - o0,
            act, act_row_bytes, n_rows_x, n_in / QK_MXFP4);
}

/* kernel_pack_group_mxfp4 as an x8_pack_fn. */
static void pack_mxfp4_group(uint8_t *restrict dst, const uint8_t *restrict W, size_t w_row_bytes,
                             size_t m, size_t nb, uint32_t type) {
    (void)type;
    kernel_pack_group_mxfp4(dst, W, w_row_bytes, m, nb);
}

void kernel_rows_mxfp4_avx2(float *restrict out, size_t ld_out, const uint8_t *restrict W,
                            size_t w_row_bytes, size_t o0, size_t o1, const uint8_t *restrict act,
                            size_t act_row_bytes, size_t n_rows_x, size_t n_in,
                            float *restrict tmp) {
    const size_t nb = n_in / QK_MXFP4;
    uint8_t *pk = (uint8_t *)tmp; /* 2 groups: 8.5 * n_in of its 20 * n_in bytes */
    for (size_t o = o0; o < o1; o += 16) {
        const size_t m = x8_pack_tile(pk, W + o * w_row_bytes, w_row_bytes, o1 - o, nb,
                                      pack_mxfp4_group, GGML_TYPE_MXFP4);
        mx_rows(out + o, ld_out, pk, 8 * w_row_bytes, (m + 7) / 8, m, act, act_row_bytes, n_rows_x,
                nb);
    }
}

#endif
