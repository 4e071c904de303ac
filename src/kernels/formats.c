/* The format table: one row per weight type the kernels run, naming its
 * dequantizer and the quantizer `tps model make` writes it with (quant.c,
 * quant_q32.c, quant_kq.c); a type is supported when it has a row. The
 * type facts and the any-type entry points read it. Computes nothing of
 * its own. */
#include <string.h>

#include "base/error.h"
#include "kernels/quant.h"

typedef void (*dequant_fn)(float *restrict y, const void *restrict x, size_t n);
typedef void (*quant_fn)(void *restrict y, const float *restrict x, size_t n);

typedef struct format_row {
    dequant_fn dequantize;
    quant_fn quantize;
} format_row;

static void deq_f32(float *restrict y, const void *restrict x, size_t n) {
    memcpy(y, x, n * sizeof(float));
}

static void quant_f32(void *restrict y, const float *restrict x, size_t n) {
    memcpy(y, x, n * sizeof(float));
}

/* Typed block functions as table entries. */
#define FORMAT_FNS(name, deq, quant, blk_t)                                                        \
    static void deq_##name(float *restrict y, const void *restrict x, size_t n) {                  \
        deq(y, (const blk_t *)x, n);                                                               \
    }                                                                                              \
    static void quant_##name(void *restrict y, const float *restrict x, size_t n) {                \
        quant((blk_t *)y, x, n);                                                                   \
    }

FORMAT_FNS(f16, dequantize_row_f16, fp32_to_fp16_row, uint16_t)
FORMAT_FNS(bf16, dequantize_row_bf16, fp32_to_bf16_row, uint16_t)
FORMAT_FNS(q8_0, dequantize_row_q8_0, quantize_row_q8_0_ref, block_q8_0)
FORMAT_FNS(q4_0, dequantize_row_q4_0, quantize_row_q4_0_ref, block_q4_0)
FORMAT_FNS(q4_1, dequantize_row_q4_1, quantize_row_q4_1_ref, block_q4_1)
FORMAT_FNS(q5_0, dequantize_row_q5_0, quantize_row_q5_0_ref, block_q5_0)
FORMAT_FNS(q5_1, dequantize_row_q5_1, quantize_row_q5_1_ref, block_q5_1)
FORMAT_FNS(iq4_nl, dequantize_row_iq4_nl, quantize_row_iq4_nl, block_iq4_nl)
FORMAT_FNS(q2_K, dequantize_row_q2_K, quantize_row_q2_K, block_q2_K)
FORMAT_FNS(q3_K, dequantize_row_q3_K, quantize_row_q3_K, block_q3_K)
FORMAT_FNS(q4_K, dequantize_row_q4_K, quantize_row_q4_K, block_q4_K)
FORMAT_FNS(q5_K, dequantize_row_q5_K, quantize_row_q5_K, block_q5_K)
FORMAT_FNS(q6_K, dequantize_row_q6_K, quantize_row_q6_K, block_q6_K)
FORMAT_FNS(iq4_xs, dequantize_row_iq4_xs, quantize_row_iq4_xs, block_iq4_xs)
FORMAT_FNS(mxfp4, dequantize_row_mxfp4, quantize_row_mxfp4_ref, block_mxfp4)

#define FORMAT_ROW(name)                                                                           \
    { deq_##name, quant_##name }

static const format_row formats[GGML_TYPE_COUNT_MAX] = {
    [GGML_TYPE_F32] = {deq_f32, quant_f32},  [GGML_TYPE_F16] = FORMAT_ROW(f16),
    [GGML_TYPE_BF16] = FORMAT_ROW(bf16),     [GGML_TYPE_Q8_0] = FORMAT_ROW(q8_0),
    [GGML_TYPE_Q4_0] = FORMAT_ROW(q4_0),     [GGML_TYPE_Q4_1] = FORMAT_ROW(q4_1),
    [GGML_TYPE_Q5_0] = FORMAT_ROW(q5_0),     [GGML_TYPE_Q5_1] = FORMAT_ROW(q5_1),
    [GGML_TYPE_IQ4_NL] = FORMAT_ROW(iq4_nl), [GGML_TYPE_Q2_K] = FORMAT_ROW(q2_K),
    [GGML_TYPE_Q3_K] = FORMAT_ROW(q3_K),     [GGML_TYPE_Q4_K] = FORMAT_ROW(q4_K),
    [GGML_TYPE_Q5_K] = FORMAT_ROW(q5_K),     [GGML_TYPE_Q6_K] = FORMAT_ROW(q6_K),
    [GGML_TYPE_IQ4_XS] = FORMAT_ROW(iq4_xs), [GGML_TYPE_MXFP4] = FORMAT_ROW(mxfp4),
};

static const format_row *format_of(uint32_t type) {
    if (type >= GGML_TYPE_COUNT_MAX || !formats[type].dequantize) return NULL;
    return &formats[type];
}

/* ---- type facts --------------------------------------------------------- */

/* Sizes are the format's (base/ggml_type.h), which the block structs'
 * static_asserts match. */
bool kernel_type_supported(uint32_t type) {
    return format_of(type) != NULL;
}

size_t kernel_type_block_elems(uint32_t type) {
    return kernel_type_supported(type) ? ggml_type_get(type)->block_size : 0;
}

size_t kernel_row_bytes(uint32_t type, size_t n) {
    if (!kernel_type_supported(type)) return 0;
    const ggml_type_info *t = ggml_type_get(type);
    if (n % t->block_size) return 0;
    return n / t->block_size * t->type_size;
}

const char *kernel_supported_names(void) {
    /* the table's order, which is the type ids' */
    return "f32, f16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, "
           "iq4_xs, bf16, mxfp4";
}

int dequantize_row(float *restrict y, const void *restrict x, uint32_t type, size_t n) {
    const format_row *f = format_of(type);
    if (!f) return TPS_EUNSUP;
    if (n % kernel_type_block_elems(type)) return TPS_EINVAL;
    f->dequantize(y, x, n);
    return 0;
}

int quantize_row_any(uint32_t type, void *restrict dst, const float *restrict x, size_t n) {
    const format_row *f = format_of(type);
    if (!f || !f->quantize) return TPS_EUNSUP;
    f->quantize(dst, x, n);
    return 0;
}
