/* Q4_1, Q5_0, Q5_1 and IQ4_NL in 8-row interleaved groups (packed_q32.h
 * has the layouts): the packer, and the scalar tier of the packed groups,
 * which reads each row's quants back out of the interleaved layout and
 * computes packed_q32.h's formula as dot_q32_scalar.c does for plain rows.
 * Not here: vector tiles (dot_q32_avx2.c), dispatch (matmul.c). */
#include <math.h>
#include <string.h>

#include "kernels/packed_q32.h"
#include "kernels/scalar_rows.h"

/* Bytes of one packed group block of the type. */
static size_t group_bytes(uint32_t type) {
    return 8 * ggml_type_get(type)->type_size;
}

/* Row i's fields of a plain block of the type at src (NULL: a zero row). */
typedef struct q32_fields {
    uint16_t d, m;
    uint32_t qh; /* regrouped (q32_qh_regroup) */
    const uint8_t *qs;
} q32_fields;

static q32_fields plain_fields(const uint8_t *src, uint32_t type) {
    static const uint8_t zero_qs[QK4_0 / 2] = {0};
    q32_fields f = {0, 0, 0, zero_qs};
    if (!src) return f;
    switch (type) {
    case GGML_TYPE_Q4_1:
        f.d = ((const block_q4_1 *)src)->d, f.m = ((const block_q4_1 *)src)->m;
        f.qs = ((const block_q4_1 *)src)->qs;
        break;
    case GGML_TYPE_Q5_0:
        f.d = ((const block_q5_0 *)src)->d;
        f.qh = q32_qh_regroup(((const block_q5_0 *)src)->qh);
        f.qs = ((const block_q5_0 *)src)->qs;
        break;
    case GGML_TYPE_Q5_1:
        f.d = ((const block_q5_1 *)src)->d, f.m = ((const block_q5_1 *)src)->m;
        f.qh = q32_qh_regroup(((const block_q5_1 *)src)->qh);
        f.qs = ((const block_q5_1 *)src)->qs;
        break;
    default: /* IQ4_NL */
        f.d = ((const block_iq4_nl *)src)->d;
        f.qs = ((const block_iq4_nl *)src)->qs;
        break;
    }
    return f;
}

/* Where the fields sit in a packed group block of the type (qh: 0 = none). */
typedef struct q32_offsets {
    size_t m, qh, qs;
} q32_offsets;

static q32_offsets packed_offsets(uint32_t type) {
    switch (type) {
    case GGML_TYPE_Q4_1:
        return (q32_offsets){16, 0, 32};
    case GGML_TYPE_Q5_0:
        return (q32_offsets){0, 16, 48};
    case GGML_TYPE_Q5_1:
        return (q32_offsets){16, 32, 64};
    default:
        return (q32_offsets){0, 0, 16};
    }
}

void kernel_pack_group_q32(uint8_t *restrict dst, const uint8_t *restrict W, size_t w_row_bytes,
                           size_t m, size_t nb, uint32_t type) {
    const size_t in_bytes = ggml_type_get(type)->type_size, gb = group_bytes(type);
    const q32_offsets off = packed_offsets(type);
    for (size_t b = 0; b < nb; b++) {
        uint8_t *g = dst + b * gb;
        for (size_t i = 0; i < 8; i++) {
            const q32_fields f =
                plain_fields(i < m ? W + i * w_row_bytes + b * in_bytes : NULL, type);
            memcpy(g + 2 * i, &f.d, 2);
            if (off.m) memcpy(g + off.m + 2 * i, &f.m, 2);
            if (off.qh) memcpy(g + off.qh + 4 * i, &f.qh, 4);
            for (size_t c = 0; c < 4; c++)
                memcpy(g + off.qs + c * 32 + i * 4, f.qs + 4 * c, 4);
        }
    }
}

/* ---- scalar tier of the packed groups ------------------------------------ */

/* Row `lane` of a packed group block: its 32 quants as the formula takes
 * them (Q4_1, Q5_1: 0..31; Q5_0: q - 16; IQ4_NL: the grid value), d and m. */
static void unpack_lane(const uint8_t *restrict g, size_t lane, uint32_t type, int q[32], float *d,
                        float *m) {
    const q32_offsets off = packed_offsets(type);
    uint16_t h;
    memcpy(&h, g + 2 * lane, 2);
    *d = fp16_to_fp32(h);
    *m = 0.0f;
    if (off.m) {
        memcpy(&h, g + off.m + 2 * lane, 2);
        *m = fp16_to_fp32(h);
    }
    uint32_t qh = 0;
    if (off.qh) memcpy(&qh, g + off.qh + 4 * lane, 4);
    for (int c = 0; c < 4; c++)
        for (int e = 0; e < 4; e++) {
            const uint8_t byte = g[off.qs + c * 32 + lane * 4 + e];
            int lo = byte & 15, hi = byte >> 4;
            lo |= (int)(qh >> (8 * e + c) & 1) << 4;
            hi |= (int)(qh >> (8 * e + 4 + c) & 1) << 4;
            if (type == GGML_TYPE_Q5_0) lo -= 16, hi -= 16;
            if (type == GGML_TYPE_IQ4_NL) lo = kvalues_iq4nl[lo], hi = kvalues_iq4nl[hi];
            q[4 * c + e] = lo;
            q[16 + 4 * c + e] = hi;
        }
}

/* Row `lane` of a group of the type . the activation row (Q8_0 blocks, then
 * their side data). */
static float dot_packed(const uint8_t *restrict G, size_t lane, const uint8_t *restrict row,
                        size_t n_in, uint32_t type) {
    const size_t gb = group_bytes(type), nb = n_in / QK8_0;
    const block_q8_0 *x = (const block_q8_0 *)row;
    const kernel_act_side *side = (const kernel_act_side *)(row + kernel_act_side_off(nb));
    const int has_min = type == GGML_TYPE_Q4_1 || type == GGML_TYPE_Q5_1;
    float sumf = 0.0f;
    for (size_t b = 0; b < nb; b++) {
        int q[32];
        float d, m;
        unpack_lane(G + b * gb, lane, type, q, &d, &m);
        int32_t isum = 0;
        for (int j = 0; j < QK8_0; j++)
            isum += q[j] * x[b].qs[j];
        sumf = fmaf((float)isum, d * fp16_to_fp32(x[b].d), sumf);
        if (has_min) sumf = fmaf(m, side[b].s, sumf);
    }
    return sumf;
}

SCALAR_ROWS_FN(kernel_rows_q4_1_r8_scalar, 1, GGML_TYPE_Q4_1, dot_packed(w, lane, a, n_in, t))
SCALAR_ROWS_FN(kernel_rows_q5_0_r8_scalar, 1, GGML_TYPE_Q5_0, dot_packed(w, lane, a, n_in, t))
SCALAR_ROWS_FN(kernel_rows_q5_1_r8_scalar, 1, GGML_TYPE_Q5_1, dot_packed(w, lane, a, n_in, t))
SCALAR_ROWS_FN(kernel_rows_iq4_nl_r8_scalar, 1, GGML_TYPE_IQ4_NL, dot_packed(w, lane, a, n_in, t))
