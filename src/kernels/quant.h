/* Quantized block formats (ggml's exact byte layouts), fp16/bf16 <-> fp32
 * conversion, the reference quantizers and a dequantizer per weight type.
 *
 * This is the reference tier for formats: readable and exact, not fast. It
 * does no matrix maths (matmul.h) and no threading. Type ids are ggml's
 * numbering (model/gguf.h); only the enum is used from there, nothing links. */
#ifndef TPS_KERNELS_QUANT_H
#define TPS_KERNELS_QUANT_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/error.h"
#include "base/ggml_type.h" /* type ids (GGML_TYPE_*) and block sizes */

#define QK8_0        32
#define QK4_0        32
#define QK_K         256
#define K_SCALE_SIZE 12

/* 32 weights: value[j] = qs[j] * d. */
typedef struct block_q8_0 {
    uint16_t d; /* fp16 scale */
    int8_t qs[QK8_0];
} block_q8_0;
static_assert(sizeof(block_q8_0) == 34, "block_q8_0 must be 34 bytes (ggml layout)");

/* 32 weights: value[j] = ((qs[j] & 15) - 8) * d, value[j+16] = ((qs[j] >> 4) - 8) * d. */
typedef struct block_q4_0 {
    uint16_t d; /* fp16 scale */
    uint8_t qs[QK4_0 / 2];
} block_q4_0;
static_assert(sizeof(block_q4_0) == 18, "block_q4_0 must be 18 bytes (ggml layout)");

/* 256 weights in 8 sub-blocks of 32, each with a 6-bit scale and a 6-bit min:
 * value = d * sc * q - dmin * m, q in 0..15. */
typedef struct block_q4_K {
    uint16_t d;                   /* fp16 super-block scale for the scales */
    uint16_t dmin;                /* fp16 super-block scale for the mins */
    uint8_t scales[K_SCALE_SIZE]; /* 8 scales + 8 mins, 6 bits each, packed */
    uint8_t qs[QK_K / 2];         /* 4-bit quants */
} block_q4_K;
static_assert(sizeof(block_q4_K) == 144, "block_q4_K must be 144 bytes (ggml layout)");

/* 256 weights in 16 sub-blocks of 16 with int8 scales: value = d * sc * (q - 32), q 6 bits. */
typedef struct block_q6_K {
    uint8_t ql[QK_K / 2];     /* low 4 bits */
    uint8_t qh[QK_K / 4];     /* high 2 bits */
    int8_t scales[QK_K / 16]; /* 8-bit sub-block scales */
    uint16_t d;               /* fp16 super-block scale */
} block_q6_K;
static_assert(sizeof(block_q6_K) == 210, "block_q6_K must be 210 bytes (ggml layout)");

/* 32 weights in OCP's MXFP4 (gpt-oss experts): value[j] = kvalues_mxfp4[qs[j] & 15] * d,
 * value[j+16] = kvalues_mxfp4[qs[j] >> 4] * d, with d = 2^(e - 128) (ggml's
 * E8M0 "half" scale: the table holds doubled E2M1 values). */
#define QK_MXFP4 32
typedef struct block_mxfp4 {
    uint8_t e; /* E8M0 exponent */
    uint8_t qs[QK_MXFP4 / 2];
} block_mxfp4;
static_assert(sizeof(block_mxfp4) == 17, "block_mxfp4 must be 17 bytes (ggml layout)");

/* The doubled E2M1 values of the 16 codes (ggml's kvalues_mxfp4). */
extern const int8_t kernel_kvalues_mxfp4[16];

/* 2^(e - 128) as ggml_e8m0_to_fp32_half computes it (subnormal for e < 2). */
static inline float kernel_e8m0_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Activations for the K-quant dots (never a weight type here): 256 values,
 * value[j] = qs[j] * d, bsums[k] = the sum of qs[16k .. 16k+15]. */
typedef struct block_q8_K {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];
} block_q8_K;
static_assert(sizeof(block_q8_K) == 292, "block_q8_K must be 292 bytes (ggml layout)");

/* ---- scalar conversions (exact, round to nearest even) ------------------ */

static inline uint32_t kernel_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float kernel_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* IEEE half -> float, exact for every input (subnormals, inf, NaN kept). */
float fp16_to_fp32(uint16_t h);
/* float -> IEEE half, round to nearest even; overflow -> inf; NaN -> quiet NaN
 * with the sign kept (0x7e00 | sign), as ggml's scalar path does. */
uint16_t fp32_to_fp16(float f);

/* bfloat16 is the top half of a float. */
static inline float bf16_to_fp32(uint16_t h) {
    return kernel_bits_f32((uint32_t)h << 16);
}

/* float -> bfloat16, round to nearest even; NaN stays NaN (quiet bit set), as ggml. */
static inline uint16_t fp32_to_bf16(float f) {
    uint32_t u = kernel_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 64);
    return (uint16_t)((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

void fp16_to_fp32_row(float *restrict y, const uint16_t *restrict x, size_t n);
void fp32_to_fp16_row(uint16_t *restrict y, const float *restrict x, size_t n);
void bf16_to_fp32_row(float *restrict y, const uint16_t *restrict x, size_t n);
void fp32_to_bf16_row(uint16_t *restrict y, const float *restrict x, size_t n);

/* ---- type facts ------------------------------------------------------- */

/* True for the weight types every kernel here handles: F32, F16, BF16, Q8_0,
 * Q4_0, Q4_K, Q6_K, MXFP4. */
bool kernel_type_supported(uint32_t type);
/* Elements per block (1 for float types); 0 if unsupported. */
size_t kernel_type_block_elems(uint32_t type);
/* Bytes of one row of n elements; 0 if unsupported or n is not a whole
 * number of blocks. */
size_t kernel_row_bytes(uint32_t type, size_t n);

/* ---- reference quantizers (exactly ggml's *_ref) ------------------------ */

/* x (n,) -> y (n/32 blocks); n % 32 == 0. d = amax/127, q = roundf(x/d). */
void quantize_row_q8_0_ref(block_q8_0 *restrict y, const float *restrict x, size_t n);
/* x (n,) -> y (n/32 blocks); n % 32 == 0. max is the signed value of largest
 * magnitude, d = max/-8, q = MIN(15, (int8_t)(x/d + 8.5f)). */
void quantize_row_q4_0_ref(block_q4_0 *restrict y, const float *restrict x, size_t n);

/* x (n,) -> y (n/256 blocks); n % 256 == 0. Q8_0's rule over 256 values
 * with d kept as float: d = amax/127, q = roundf(x/d) (so |q| <= 127), and
 * bsums. tps's own activation quantizer, not ggml's quantize_row_q8_K. */
void quantize_row_q8_K_ref(block_q8_K *restrict y, const float *restrict x, size_t n);

/* ---- K-quant weight quantizers (tps's own, not ggml's) ----------------- */

/* x (n,) -> y (n/256 blocks); n % 256 == 0. Valid blocks any reader
 * decodes; simpler than ggml's weighted search, so a little less accurate.
 * Q4_K: per sub-block of 32 the range [min(0, min x), max x] with the best
 * of a few step sizes (least squares), 6-bit scales and mins relative to
 * the superblock's fp16 d and dmin; every element is then within half a
 * step of its sub-block plus the scale rounding (tests/test_kernels.c). */
void quantize_row_q4_K(block_q4_K *restrict y, const float *restrict x, size_t n);
/* Q6_K: per sub-block of 16 the signed value of largest magnitude maps to
 * -32 (as Q4_0 does to -8), int8 scales relative to the fp16 d. */
void quantize_row_q6_K(block_q6_K *restrict y, const float *restrict x, size_t n);

/* x (n,) -> y (n/32 blocks); n % 32 == 0: ggml's quantize_row_mxfp4_ref
 * (e from floor(log2(amax)) - 2, each value to the nearest code, the first
 * on ties), bit for bit. */
void quantize_row_mxfp4_ref(block_mxfp4 *restrict y, const float *restrict x, size_t n);

/* x (n,) -> one row of a weight type we write (F32, F16, BF16, Q8_0, Q4_0
 * and MXFP4 with the reference quantizers, Q4_K, Q6_K): dst holds
 * kernel_row_bytes(type, n). 0, or TPS_EUNSUP for another type. */
int quantize_row_any(uint32_t type, void *restrict dst, const float *restrict x, size_t n);

/* ---- dequantizers (reference) ------------------------------------------ */

void dequantize_row_f16(float *restrict y, const uint16_t *restrict x, size_t n);
void dequantize_row_bf16(float *restrict y, const uint16_t *restrict x, size_t n);
void dequantize_row_q8_0(float *restrict y, const block_q8_0 *restrict x, size_t n);
void dequantize_row_q4_0(float *restrict y, const block_q4_0 *restrict x, size_t n);
void dequantize_row_q4_K(float *restrict y, const block_q4_K *restrict x, size_t n);
void dequantize_row_q6_K(float *restrict y, const block_q6_K *restrict x, size_t n);
void dequantize_row_q8_K(float *restrict y, const block_q8_K *restrict x, size_t n);
void dequantize_row_mxfp4(float *restrict y, const block_mxfp4 *restrict x, size_t n);

/* x (n elements of type) -> y (n,) floats, any supported type (F32 copies).
 * Returns 0, or TPS_EUNSUP / TPS_EINVAL (n not whole blocks). */
int dequantize_row(float *restrict y, const void *restrict x, uint32_t type, size_t n);

#endif
