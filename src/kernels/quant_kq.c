/* Reference tier of the 256-element superblock formats: the quantizers of
 * Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS, and the dequantizers of Q2_K,
 * Q3_K, Q5_K and IQ4_XS (Q4_K's and Q6_K's are in quant.c).
 *
 * Each quantizer computes what llama-quantize writes for the type without
 * an importance matrix: ggml's quantize_row_*_ref searches (least squares
 * scale and min per sub-block, then 6-bit or 4-bit scales of those), and
 * for IQ4_XS quantize_iq4_xs's 7-step search, in ggml's float operations
 * and order, so a file tps makes holds llama.cpp's bytes. The dequantizers
 * are ggml's dequantize_row_* the same way (tests/test_quant_ref.c checks
 * both against blocks llama.cpp made). Readable, not fast. */
#include <math.h>
#include <string.h>

#include "kernels/kernel_impl.h" /* kernel_q4_K_scales */
#include "kernels/quant.h"
#include "kernels/quant_search.h"

/* ---- the searches ------------------------------------------------------- */

/* Step and min (value = step * L + min, min <= 0, L in 0..nmax) of a group
 * of n with weights w: the plain range first, then nstep + 1 other grids
 * (rmin + rdelta * is extra levels over the range), each refitted by
 * weighted least squares and kept when its weighted error (absolute with
 * use_mad, else squared) is lower. *neg_min gets -min. */
static float fit_step_min(int n, int nmax, const float *restrict x, const float *restrict w,
                          uint8_t *restrict L, float *neg_min, float rmin, float rdelta, int nstep,
                          int use_mad) {
    float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *neg_min = -min;
        return 0.0f;
    }
    float iscale = nmax / (max - min), scale = 1 / iscale, best_error = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)quant_clamp(quant_nearest_int(iscale * (x[i] - min)), 0, nmax);
        const float diff = scale * L[i] + min - x[i];
        best_error += w[i] * (use_mad ? fabsf(diff) : diff * diff);
    }
    uint8_t Laux[32];
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            const int l = quant_clamp(quant_nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (!(D > 0)) continue; /* as ggml's `if (D > 0)`, NaN too */
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
        float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float cur_error = 0;
        for (int i = 0; i < n; i++) {
            const float diff = this_scale * Laux[i] + this_min - x[i];
            cur_error += w[i] * (use_mad ? fabsf(diff) : diff * diff);
        }
        if (cur_error < best_error) {
            memcpy(L, Laux, (size_t)n);
            best_error = cur_error;
            scale = this_scale;
            min = this_min;
        }
    }
    *neg_min = -min;
    return scale;
}

/* The weighted fit of the grid iscale to a group of n (levels l =
 * nearest(iscale * x) in -nmax..nmax-1, weights x^2): sum w x l into
 * *sumlx and sum w l^2 into *suml2, in ggml's order; with L, the levels
 * + off. */
ALWAYS_INLINE void grid_sums(int n, int nmax, const float *restrict x, float iscale,
                             int8_t *restrict L, int off, float *sumlx, float *suml2) {
    float slx = 0, sl2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = quant_clamp(quant_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        if (L) L[i] = (int8_t)(l + off);
        const float w = x[i] * x[i];
        slx += w * x[i] * l;
        sl2 += w * l * l;
    }
    *sumlx = slx;
    *suml2 = sl2;
}

/* Symmetric scale of a group of 16 with levels -nmax..nmax-1 (L stores
 * level + nmax), weights x^2: the largest magnitude's grid, then 18 nearby
 * grids, the best weighted least squares fit kept (ggml's make_qx_quants,
 * rmse_type 1). All zero: L = 0, scale 0. */
static float fit_symmetric(int n, int nmax, const float *restrict x, int8_t *restrict L) {
    float max;
    if (quant_absmax(x, (size_t)n, &max) < QUANT_GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = -nmax / max, sumlx, suml2;
    grid_sums(n, nmax, x, iscale, L, nmax, &sumlx, &suml2);
    float scale = suml2 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        grid_sums(n, nmax, x, iscale, NULL, 0, &sumlx, &suml2);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] =
                    (int8_t)(nmax + quant_clamp(quant_nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Q3_K's group fit (ggml's make_q3_quants with rmse): levels -nmax..nmax-1
 * from the largest magnitude, then up to 5 passes moving single levels
 * while the weighted fit improves. L stores level + nmax. */
static float fit_q3(int n, int nmax, const float *restrict x, int8_t *restrict L) {
    float max;
    if (quant_absmax(x, (size_t)n, &max) < QUANT_GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float sumlx, suml2;
    grid_sums(n, nmax, x, -nmax / max, L, 0, &sumlx, &suml2);
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (!(slx > 0)) continue;
            float sl2 = suml2 - w * L[i] * L[i];
            const int new_l = quant_clamp(quant_nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (new_l == L[i]) continue;
            slx += w * x[i] * new_l;
            sl2 += w * new_l * new_l;
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (int8_t)new_l;
                sumlx = slx;
                suml2 = sl2;
                n_changed++;
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; i++)
        L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Packs 2-bit levels L (256) as Q2_K and Q3_K lay them out. */
static void pack_2bit(uint8_t *restrict qs, const uint8_t *restrict L) {
    for (int j = 0; j < QK_K; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] =
                (uint8_t)(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 | L[j + l + 96] << 6);
}

/* ---- Q2_K ----------------------------------------------------------------- */

void quantize_row_q2_K(block_q2_K *restrict y, const float *restrict x, size_t n) {
    assert(n % QK_K == 0);
    const float q4scale = 15.f;
    for (size_t i = 0; i < n / QK_K; i++, x += QK_K) {
        uint8_t L[QK_K];
        float w[16], mins[16], scales[16], max_scale = 0, max_min = 0;
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++)
                w[l] = fabsf(x[16 * j + l]);
            scales[j] =
                fit_step_min(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, 1);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        memset(y[i].scales, 0, sizeof y[i].scales);
        y[i].d = fp32_to_fp16(max_scale > 0 ? max_scale / q4scale : 0.f);
        if (max_scale > 0) {
            const float iscale = q4scale / max_scale;
            for (int j = 0; j < 16; j++)
                y[i].scales[j] = (uint8_t)quant_nearest_int(iscale * scales[j]);
        }
        y[i].dmin = fp32_to_fp16(max_min > 0 ? max_min / q4scale : 0.f);
        if (max_min > 0) {
            const float iscale = q4scale / max_min;
            for (int j = 0; j < 16; j++)
                y[i].scales[j] |= (uint8_t)(quant_nearest_int(iscale * mins[j]) << 4);
        }
        for (int j = 0; j < 16; j++) {
            const float d = fp16_to_fp32(y[i].d) * (y[i].scales[j] & 0xF);
            if (!d) continue;
            const float dm = fp16_to_fp32(y[i].dmin) * (y[i].scales[j] >> 4);
            for (int l = 0; l < 16; l++)
                L[16 * j + l] =
                    (uint8_t)quant_clamp(quant_nearest_int((x[16 * j + l] + dm) / d), 0, 3);
        }
        pack_2bit(y[i].qs, L);
    }
}

void dequantize_row_q2_K(float *restrict y, const block_q2_K *restrict x, size_t n) {
    assert(n % QK_K == 0);
    for (size_t i = 0; i < n / QK_K; i++) {
        const float d = fp16_to_fp32(x[i].d), min = fp16_to_fp32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        int is = 0;
        for (int h = 0; h < QK_K; h += 128, q += 32)
            for (int shift = 0; shift < 8; shift += 2)
                for (int half = 0; half < 2; half++) {
                    const uint8_t sc = x[i].scales[is++];
                    const float dl = d * (sc & 0xF), ml = min * (sc >> 4);
                    for (int l = 0; l < 16; l++)
                        *y++ = dl * (float)((q[l + 16 * half] >> shift) & 3) - ml;
                }
    }
}

/* ---- Q3_K ----------------------------------------------------------------- */

/* Sub-block j's 6-bit scale (0..63) from Q3_K's 12 packed bytes. */
static int q3_K_scale(const uint8_t *restrict s, int j) {
    const int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
    return lo | ((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4;
}

/* Q3_K's scales from the 16 group fits: 6-bit signed steps of the largest. */
static void q3_K_scales(block_q3_K *restrict y, const float *restrict scales) {
    float max_scale;
    quant_absmax(scales, 16, &max_scale);
    memset(y->scales, 0, sizeof y->scales);
    if (!max_scale) {
        y->d = fp32_to_fp16(0.f);
        return;
    }
    const float iscale = -32.f / max_scale;
    for (int j = 0; j < 16; j++) {
        const int l = quant_clamp((int8_t)quant_nearest_int(iscale * scales[j]), -32, 31) + 32;
        if (j < 8)
            y->scales[j] = (uint8_t)(l & 0xF);
        else
            y->scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
        y->scales[j % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
    }
    y->d = fp32_to_fp16(1 / iscale);
}

void quantize_row_q3_K(block_q3_K *restrict y, const float *restrict x, size_t n) {
    assert(n % QK_K == 0);
    for (size_t i = 0; i < n / QK_K; i++, x += QK_K) {
        int8_t L[QK_K];
        float scales[16];
        for (int j = 0; j < 16; j++)
            scales[j] = fit_q3(16, 4, x + 16 * j, L + 16 * j);
        q3_K_scales(&y[i], scales);
        for (int j = 0; j < 16; j++) {
            const float d = fp16_to_fp32(y[i].d) * (q3_K_scale(y[i].scales, j) - 32);
            if (!d) continue;
            for (int l = 0; l < 16; l++)
                L[16 * j + l] =
                    (int8_t)(quant_clamp(quant_nearest_int(x[16 * j + l] / d), -4, 3) + 4);
        }
        memset(y[i].hmask, 0, sizeof y[i].hmask);
        uint8_t low[QK_K];
        for (int j = 0; j < QK_K; j++) {
            if (L[j] > 3) y[i].hmask[j % 32] |= (uint8_t)(1u << (j / 32));
            low[j] = (uint8_t)(L[j] > 3 ? L[j] - 4 : L[j]);
        }
        pack_2bit(y[i].qs, low);
    }
}

void dequantize_row_q3_K(float *restrict y, const block_q3_K *restrict x, size_t n) {
    assert(n % QK_K == 0);
    for (size_t i = 0; i < n / QK_K; i++) {
        const float d_all = fp16_to_fp32(x[i].d);
        const uint8_t *q = x[i].qs, *hm = x[i].hmask;
        int is = 0;
        unsigned m = 1;
        for (int h = 0; h < QK_K; h += 128, q += 32)
            for (int shift = 0; shift < 8; shift += 2, m <<= 1)
                for (int half = 0; half < 2; half++) {
                    const float dl = d_all * (float)(q3_K_scale(x[i].scales, is++) - 32);
                    for (int l = 16 * half; l < 16 * half + 16; l++)
                        *y++ = dl * (float)(((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                }
    }
}

/* ---- Q4_K and Q5_K: 8 sub-blocks of 32 with step and min ------------------ */

/* One Q4_K (nmax 15, qh NULL) or Q5_K (nmax 31) superblock of x: the 8
 * sub-blocks' step / min fits (weights |x| plus their rms), the 6-bit
 * scales and mins packed as both hold them (packed, zeroed here), and the
 * levels for the decoded steps: element 64k + l's low nibble in
 * qs[32k + l], 64k + 32 + l's in its high one, their fifth bits (Q5_K)
 * bits 2k and 2k + 1 of qh[l]. */
ALWAYS_INLINE void k_step_min_block(const float *restrict x, int nmax, float rmin, int nstep,
                                    uint16_t *d_out, uint16_t *dmin_out, uint8_t *restrict packed,
                                    uint8_t *restrict qs, uint8_t *restrict qh) {
    float mins[8], scales[8], w[32], max_scale = 0, max_min = 0;
    uint8_t L[QK_K];
    for (int j = 0; j < 8; j++) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++)
            sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++)
            w[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] =
            fit_step_min(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j], rmin, 0.1f, nstep, 0);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    memset(packed, 0, K_SCALE_SIZE);
    for (int j = 0; j < 8; j++) {
        uint8_t ls = (uint8_t)quant_nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)quant_nearest_int(inv_min * mins[j]);
        ls = ls < 63 ? ls : 63;
        lm = lm < 63 ? lm : 63;
        if (j < 4) {
            packed[j] = ls;
            packed[j + 4] = lm;
        } else {
            packed[j + 4] = (uint8_t)((ls & 0xF) | (lm & 0xF) << 4);
            packed[j - 4] |= (uint8_t)((ls >> 4) << 6);
            packed[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d_out = fp32_to_fp16(max_scale / 63.f);
    *dmin_out = fp32_to_fp16(max_min / 63.f);
    uint8_t sc[8], m[8];
    kernel_q4_K_scales(packed, sc, m);
    for (int j = 0; j < 8; j++) {
        const float d = fp16_to_fp32(*d_out) * sc[j];
        if (!d) continue;
        const float dm = fp16_to_fp32(*dmin_out) * m[j];
        for (int l = 0; l < 32; l++)
            L[32 * j + l] =
                (uint8_t)quant_clamp(quant_nearest_int((x[32 * j + l] + dm) / d), 0, nmax);
    }
    if (qh) memset(qh, 0, QK_K / 8);
    for (int k = 0; k < 4; k++)
        for (int l = 0; l < 32; l++) {
            const int l1 = L[64 * k + l], l2 = L[64 * k + 32 + l];
            qs[32 * k + l] = (uint8_t)((l1 & 15) | (l2 & 15) << 4);
            if (qh) qh[l] |= (uint8_t)((l1 > 15) << (2 * k) | (l2 > 15) << (2 * k + 1));
        }
}

void quantize_row_q4_K(block_q4_K *restrict y, const float *restrict x, size_t n) {
    assert(n % QK_K == 0);
    for (size_t i = 0; i < n / QK_K; i++, x += QK_K)
        k_step_min_block(x, 15, -1.f, 20, &y[i].d, &y[i].dmin, y[i].scales, y[i].qs, NULL);
}

void quantize_row_q5_K(block_q5_K *restrict y, const float *restrict x, size_t n) {
    assert(n % QK_K == 0);
    for (size_t i = 0; i < n / QK_K; i++, x += QK_K)
        k_step_min_block(x, 31, -0.5f, 15, &y[i].d, &y[i].dmin, y[i].scales, y[i].qs, y[i].qh);
}

void dequantize_row_q5_K(float *restrict y, const block_q5_K *restrict x, size_t n) {
    assert(n % QK_K == 0);
    for (size_t i = 0; i < n / QK_K; i++) {
        const float d = fp16_to_fp32(x[i].d), min = fp16_to_fp32(x[i].dmin);
        uint8_t sc[8], m[8];
        kernel_q4_K_scales(x[i].scales, sc, m);
        for (int k = 0; k < 4; k++) {
            const uint8_t *ql = x[i].qs + 32 * k;
            const float d1 = d * sc[2 * k], m1 = min * m[2 * k];
            const float d2 = d * sc[2 * k + 1], m2 = min * m[2 * k + 1];
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (float)((ql[l] & 0xF) + ((x[i].qh[l] >> (2 * k)) & 1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (float)((ql[l] >> 4) + ((x[i].qh[l] >> (2 * k + 1)) & 1 ? 16 : 0)) - m2;
        }
    }
}

/* ---- Q6_K ------------------------------------------------------------------ */

void quantize_row_q6_K(block_q6_K *restrict y, const float *restrict x, size_t n) {
    assert(n % QK_K == 0);
    for (size_t i = 0; i < n / QK_K; i++, x += QK_K) {
        int8_t L[QK_K];
        float scales[16], max_scale = 0, max_abs_scale = 0;
        for (int k = 0; k < 16; k++) {
            scales[k] = fit_symmetric(16, 32, x + 16 * k, L + 16 * k);
            if (fabsf(scales[k]) > max_abs_scale) {
                max_abs_scale = fabsf(scales[k]);
                max_scale = scales[k];
            }
        }
        if (max_abs_scale < QUANT_GROUP_EPS) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = -128.f / max_scale;
        y[i].d = fp32_to_fp16(1 / iscale);
        for (int k = 0; k < 16; k++) {
            const int s = quant_nearest_int(iscale * scales[k]);
            y[i].scales[k] = (int8_t)(s < 127 ? s : 127);
        }
        for (int k = 0; k < 16; k++) {
            const float d = fp16_to_fp32(y[i].d) * y[i].scales[k];
            if (!d) continue;
            for (int l = 0; l < 16; l++)
                L[16 * k + l] =
                    (int8_t)(quant_clamp(quant_nearest_int(x[16 * k + l] / d), -32, 31) + 32);
        }
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l++) {
                const int8_t *q = L + 128 * h + l;
                y[i].ql[64 * h + l] = (uint8_t)((q[0] & 0xF) | (q[64] & 0xF) << 4);
                y[i].ql[64 * h + 32 + l] = (uint8_t)((q[32] & 0xF) | (q[96] & 0xF) << 4);
                y[i].qh[32 * h + l] = (uint8_t)(q[0] >> 4 | (q[32] >> 4) << 2 | (q[64] >> 4) << 4 |
                                                (q[96] >> 4) << 6);
            }
    }
}

/* ---- IQ4_XS ---------------------------------------------------------------- */

void quantize_row_iq4_xs(block_iq4_xs *restrict y, const float *restrict x, size_t n) {
    assert(n % QK_K == 0);
    for (size_t i = 0; i < n / QK_K; i++, x += QK_K) {
        uint8_t L[QK_K];
        float w[32], scales[8], max_scale = 0, amax_scale = 0;
        for (int ib = 0; ib < 8; ib++) {
            const float *xb = x + 32 * ib;
            for (int j = 0; j < 32; j++)
                w[j] = xb[j] * xb[j];
            scales[ib] = iq4_block_scale(xb, w, L + 32 * ib, 32, IQ4_NTRY);
            if (fabsf(scales[ib]) > amax_scale) {
                amax_scale = fabsf(scales[ib]);
                max_scale = scales[ib];
            }
        }
        const float d = -max_scale / 32, id = d ? 1 / d : 0.f;
        y[i].d = fp32_to_fp16(d);
        y[i].scales_h = 0;
        memset(y[i].scales_l, 0, sizeof y[i].scales_l);
        for (int ib = 0; ib < 8; ib++) {
            const int l = quant_clamp(quant_nearest_int(id * scales[ib]), -32, 31);
            const float dl = d * l, idl = dl ? 1 / dl : 0.f;
            for (int j = 0; j < 32; j++)
                L[32 * ib + j] = (uint8_t)iq4_nearest_level(idl * x[32 * ib + j]);
            y[i].scales_l[ib / 2] |= (uint8_t)(((l + 32) & 0xF) << (4 * (ib % 2)));
            y[i].scales_h |= (uint16_t)(((l + 32) >> 4) << (2 * ib));
        }
        for (int ib = 0; ib < 8; ib++)
            for (int j = 0; j < 16; j++)
                y[i].qs[16 * ib + j] = (uint8_t)(L[32 * ib + j] | L[32 * ib + 16 + j] << 4);
    }
}

void dequantize_row_iq4_xs(float *restrict y, const block_iq4_xs *restrict x, size_t n) {
    assert(n % QK_K == 0);
    for (size_t i = 0; i < n / QK_K; i++) {
        const float d = fp16_to_fp32(x[i].d);
        for (int ib = 0; ib < 8; ib++, y += 32) {
            const int ls = ((x[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) |
                           ((x[i].scales_h >> (2 * ib)) & 3) << 4;
            const float dl = d * (float)(ls - 32);
            const uint8_t *qs = x[i].qs + 16 * ib;
            for (int j = 0; j < 16; j++) {
                y[j] = dl * (float)kvalues_iq4nl[qs[j] & 0xF];
                y[j + 16] = dl * (float)kvalues_iq4nl[qs[j] >> 4];
            }
        }
    }
}
