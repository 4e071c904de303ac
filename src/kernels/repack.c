/* Interleaved 8-row weight groups (kernel_impl.h has the layouts: Q8_0,
 * Q4_0, Q4_K, Q6_K): the packers, the scalar tier of the packed types, and the
 * public repack call.
 *
 * Why repack at all: the AVX2 tier computes 8 weight rows per dpbusd when
 * the rows arrive interleaved. Packing on the fly (what the plain types do,
 * per 8-row tile into thread scratch) costs a copy per call; a matrix packed
 * once at load skips it. Not here: threading (matmul.c), vector tiles
 * (dot_avx2.c, which calls the packer here), activation rows (act.c). */
#include <math.h>
#include <string.h>

#include "kernels/kernel_impl.h"
#include "kernels/matmul.h"
#include "kernels/packed_kq.h"
#include "kernels/packed_q32.h"
#include "kernels/scalar_rows.h"

void kernel_pack_group(uint8_t *restrict dst, const uint8_t *restrict W, size_t w_row_bytes,
                       size_t m, size_t nb, int is_q4) {
    /* both plain blocks are d then qs; both groups d[8] then qs */
    const size_t in = is_q4 ? sizeof(block_q4_0) : sizeof(block_q8_0), n_c = is_q4 ? 4 : 8;
    const uint8_t bias = is_q4 ? 0 : KERNEL_Q8_R8_BIAS;
    const uint8_t zero = is_q4 ? 0x88 : KERNEL_Q8_R8_BIAS; /* the quants of a zero weight */
    for (size_t b = 0; b < nb; b++) {
        uint8_t *g = dst + b * 8 * in;
        for (size_t i = 0; i < 8; i++) {
            const uint8_t *src = i < m ? W + i * w_row_bytes + b * in : NULL;
            if (src)
                memcpy(g + 2 * i, src, 2);
            else
                memset(g + 2 * i, 0, 2);
            for (size_t c = 0; c < n_c; c++)
                for (size_t e = 0; e < 4; e++)
                    g[16 + c * 32 + i * 4 + e] = src ? (uint8_t)(src[2 + 4 * c + e] ^ bias) : zero;
        }
    }
}

/* Where Q4_K's fields and Q6_K's scale fields go (packed_kq.h's tables). */
static const kq_field q4_K_fields[] = {
    KQ_F(block_q4_K, block_q4_Kx8, d, 0), KQ_F(block_q4_K, block_q4_Kx8, dmin, 0),
    KQ_F(block_q4_K, block_q4_Kx8, scales, 3), KQ_F(block_q4_K, block_q4_Kx8, qs, 32)};
static const kq_field q6_K_scale_fields[] = {KQ_F(block_q6_K, block_q6_Kx8, d, 0),
                                             KQ_F(block_q6_K, block_q6_Kx8, scales, 4)};

void kernel_pack_group_q4_K(uint8_t *restrict dst, const uint8_t *restrict W, size_t w_row_bytes,
                            size_t nb) {
    kq_pack(dst, W, w_row_bytes, nb, sizeof(block_q4_K), KQ_TABLE(q4_K_fields));
}

/* The q6 (0..63) of element n of a plain Q6_K block (dot_kquant_scalar.c
 * has the layout). */
static unsigned q6_plain(const block_q6_K *restrict b, size_t n) {
    const size_t h = n / 128, c = n % 128 / 32, l = n % 32;
    const unsigned lo = (b->ql[64 * h + l + 32 * (c & 1)] >> (4 * (c >> 1))) & 15;
    const unsigned hi = (b->qh[32 * h + l] >> (2 * c)) & 3;
    return lo | hi << 4;
}

void kernel_pack_group_q6_K(uint8_t *restrict dst, const uint8_t *restrict W, size_t w_row_bytes,
                            size_t nb) {
    for (size_t b = 0; b < nb; b++) {
        block_q6_Kx8 *g = (block_q6_Kx8 *)dst + b;
        for (size_t i = 0; i < 8; i++) {
            const block_q6_K *src = (const block_q6_K *)(W + i * w_row_bytes) + b;
            kq_move((uint8_t *)g, (const uint8_t *)src, i, KQ_TABLE(q6_K_scale_fields), 1);
            for (size_t h = 0; h < 2; h++)
                for (size_t c = 0; c < 8; c++)
                    for (size_t e = 0; e < 4; e++) {
                        unsigned q[4];
                        for (size_t t = 0; t < 4; t++)
                            q[t] = q6_plain(src, 128 * h + 32 * t + 4 * c + e);
                        const size_t at = 4 * i + e;
                        for (size_t t = 0; t < 3; t++)
                            g->q[(24 * h + 8 * t + c) * 32 + at] =
                                (uint8_t)(q[t] | (q[3] >> (2 * t) & 3) << 6);
                    }
        }
    }
}

/* ---- scalar tier of the packed types ------------------------------------ */

/* Row `lane` of a Q8_0 (is_q4 0) or Q4_0 (1) group . Q8_0 activations a:
 * kernel_impl.h's formula. */
static float dot_packed(const uint8_t *restrict G, size_t lane, const block_q8_0 *restrict x,
                        size_t nb, int is_q4) {
    float sumf = 0.0f;
    for (size_t b = 0; b < nb; b++) {
        int32_t sumi = 0;
        uint16_t d;
        if (is_q4) {
            const block_q4_0x8 *g = (const block_q4_0x8 *)G + b;
            d = g->d[lane];
            for (size_t c = 0; c < 4; c++)
                for (size_t e = 0; e < 4; e++) {
                    const uint8_t q = g->qs[c * 32 + lane * 4 + e];
                    sumi += ((q & 0x0f) - 8) * x[b].qs[4 * c + e];
                    sumi += ((q >> 4) - 8) * x[b].qs[16 + 4 * c + e];
                }
        } else {
            const block_q8_0x8 *g = (const block_q8_0x8 *)G + b;
            d = g->d[lane];
            for (size_t c = 0; c < 8; c++)
                for (size_t e = 0; e < 4; e++)
                    sumi += (int8_t)(uint8_t)(g->qs[c * 32 + lane * 4 + e] ^ KERNEL_Q8_R8_BIAS) *
                            x[b].qs[4 * c + e];
        }
        sumf = fmaf((float)sumi, fp16_to_fp32(d) * fp16_to_fp32(x[b].d), sumf);
    }
    return sumf;
}

SCALAR_ROWS_FN(kernel_rows_q8_0_r8_scalar, 1, 0,
               dot_packed(w, lane, (const block_q8_0 *)a, n_in / QK8_0, 0))
SCALAR_ROWS_FN(kernel_rows_q4_0_r8_scalar, 1, 1,
               dot_packed(w, lane, (const block_q8_0 *)a, n_in / QK8_0, 1))

/* Row `lane` of a Q4_K group (block_q4_Kx8) . Q8_K activations a:
 * kernel_impl.h's Q4_K formula, as dot_kquant_scalar.c writes it for a
 * plain row. */
static float dot_q4_K_packed(const block_q4_Kx8 *restrict g, size_t lane,
                             const block_q8_K *restrict x, size_t nb) {
    float sumf = 0.0f;
    for (size_t b = 0; b < nb; b++) {
        uint8_t packed[K_SCALE_SIZE], sc[8], m[8];
        for (size_t w = 0; w < 3; w++)
            memcpy(packed + 4 * w, g[b].scales + 32 * w + 4 * lane, 4);
        kernel_q4_K_scales(packed, sc, m);
        int32_t isum = 0, imin = 0;
        for (int j = 0; j < 8; j++) {
            const int k = j / 2, shift = 4 * (j % 2);
            const int8_t *xq = x[b].qs + 32 * j;
            int32_t s = 0;
            for (int l = 0; l < 32; l++) {
                const uint8_t q = g[b].qs[(8 * k + l / 4) * 32 + 4 * lane + l % 4];
                s += ((q >> shift) & 15) * xq[l];
            }
            isum += sc[j] * s;
            imin += m[j] * (x[b].bsums[2 * j] + x[b].bsums[2 * j + 1]);
        }
        const float dx = x[b].d;
        sumf = fmaf((float)isum, fp16_to_fp32(g[b].d[lane]) * dx, sumf);
        sumf = fmaf((float)imin, -fp16_to_fp32(g[b].dmin[lane]) * dx, sumf);
    }
    return sumf;
}

/* Row `lane` of a Q6_K group (block_q6_Kx8) . Q8_K activations a:
 * kernel_impl.h's Q6_K formula, sub-block by sub-block as
 * dot_kquant_scalar.c adds them. */
static float dot_q6_K_packed(const block_q6_Kx8 *restrict g, size_t lane,
                             const block_q8_K *restrict x, size_t nb) {
    float sumf = 0.0f;
    for (size_t b = 0; b < nb; b++) {
        int32_t isum = 0;
        for (int h = 0; h < 2; h++)
            for (int t = 0; t < 4; t++)
                for (int s = 0; s < 2; s++) {
                    int32_t sum = 0;
                    for (int l = 16 * s; l < 16 * s + 16; l++) {
                        const size_t c = l / 4, at = 4 * lane + l % 4;
                        const unsigned q0 = g[b].q[(24 * h + c) * 32 + at];
                        const unsigned q1 = g[b].q[(24 * h + 8 + c) * 32 + at];
                        const unsigned q2 = g[b].q[(24 * h + 16 + c) * 32 + at];
                        const unsigned q = t == 0   ? q0 & 63
                                           : t == 1 ? q1 & 63
                                           : t == 2 ? q2 & 63
                                                    : q0 >> 6 | (q1 >> 6) << 2 | (q2 >> 6) << 4;
                        sum += ((int)q - 32) * x[b].qs[128 * h + 32 * t + l];
                    }
                    const int sub = 8 * h + 2 * t + s;
                    isum += g[b].scales[32 * (sub / 4) + 4 * lane + sub % 4] * sum;
                }
        sumf = fmaf((float)isum, fp16_to_fp32(g[b].d[lane]) * x[b].d, sumf);
    }
    return sumf;
}

SCALAR_ROWS_FN(kernel_rows_q4_K_r8_scalar, 1, 0,
               dot_q4_K_packed((const block_q4_Kx8 *)w, lane, (const block_q8_K *)a, n_in / QK_K))
SCALAR_ROWS_FN(kernel_rows_q6_K_r8_scalar, 1, 0,
               dot_q6_K_packed((const block_q6_Kx8 *)w, lane, (const block_q8_K *)a, n_in / QK_K))

/* ---- public -------------------------------------------------------------- */

/* kernel_pack8_fn of the types whose packers also take partial groups. */
#define PACK8(name, call)                                                                          \
    static void name(uint8_t *restrict dst, const uint8_t *restrict W, size_t w_row_bytes,         \
                     size_t nb) {                                                                  \
        call;                                                                                      \
    }

PACK8(pack8_q8_0, kernel_pack_group(dst, W, w_row_bytes, 8, nb, 0))
PACK8(pack8_q4_0, kernel_pack_group(dst, W, w_row_bytes, 8, nb, 1))
PACK8(pack8_q4_1, kernel_pack_group_q32(dst, W, w_row_bytes, 8, nb, GGML_TYPE_Q4_1))
PACK8(pack8_q5_0, kernel_pack_group_q32(dst, W, w_row_bytes, 8, nb, GGML_TYPE_Q5_0))
PACK8(pack8_q5_1, kernel_pack_group_q32(dst, W, w_row_bytes, 8, nb, GGML_TYPE_Q5_1))
PACK8(pack8_iq4_nl, kernel_pack_group_q32(dst, W, w_row_bytes, 8, nb, GGML_TYPE_IQ4_NL))
PACK8(pack8_mxfp4, kernel_pack_group_mxfp4(dst, W, w_row_bytes, 8, nb))

/* One row per type with a packed form: how 8 rows become a group. */
static const kernel_pack8_fn packers[GGML_TYPE_COUNT_MAX] = {
    [GGML_TYPE_Q8_0] = pack8_q8_0,
    [GGML_TYPE_Q4_0] = pack8_q4_0,
    [GGML_TYPE_Q4_1] = pack8_q4_1,
    [GGML_TYPE_Q5_0] = pack8_q5_0,
    [GGML_TYPE_Q5_1] = pack8_q5_1,
    [GGML_TYPE_IQ4_NL] = pack8_iq4_nl,
    [GGML_TYPE_Q2_K] = kernel_pack_group_q2_K,
    [GGML_TYPE_Q3_K] = kernel_pack_group_q3_K,
    [GGML_TYPE_Q4_K] = kernel_pack_group_q4_K,
    [GGML_TYPE_Q5_K] = kernel_pack_group_q5_K,
    [GGML_TYPE_Q6_K] = kernel_pack_group_q6_K,
    [GGML_TYPE_IQ4_XS] = kernel_pack_group_iq4_xs,
    [GGML_TYPE_MXFP4] = pack8_mxfp4,
};

uint32_t kernel_packed_type(uint32_t wtype) {
    return wtype < GGML_TYPE_COUNT_MAX && packers[wtype] ? KERNEL_TYPE_R8(wtype) : 0;
}

int kernel_repack(void *restrict dst, const void *restrict W, uint32_t wtype, size_t n_out,
                  size_t n_in) {
    if (!kernel_packed_type(wtype)) return TPS_EUNSUP;
    const size_t row_bytes = kernel_row_bytes(wtype, n_in);
    if (row_bytes == 0 || n_out % 8) return TPS_EINVAL;
    const size_t nb = n_in / ggml_type_get(wtype)->block_size;
    for (size_t o = 0; o < n_out; o += 8)
        packers[wtype]((uint8_t *)dst + o * row_bytes, (const uint8_t *)W + o * row_bytes,
                       row_bytes, nb);
    return 0;
}
