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

/* 32 weights: value[j] = (qs[j] & 15) * d + m, value[j+16] = (qs[j] >> 4) * d + m. */
typedef struct block_q4_1 {
    uint16_t d; /* fp16 scale */
    uint16_t m; /* fp16 min (the value of q = 0) */
    uint8_t qs[QK4_0 / 2];
} block_q4_1;
static_assert(sizeof(block_q4_1) == 20, "block_q4_1 must be 20 bytes (ggml layout)");

/* 32 weights of 5 bits: q = (qs[j] & 15) | bit j of qh << 4 for element j,
 * (qs[j] >> 4) | bit j+16 of qh << 4 for element j+16; value = (q - 16) * d. */
typedef struct block_q5_0 {
    uint16_t d;
    uint8_t qh[4]; /* the fifth bits, little-endian uint32 */
    uint8_t qs[QK4_0 / 2];
} block_q5_0;
static_assert(sizeof(block_q5_0) == 22, "block_q5_0 must be 22 bytes (ggml layout)");

/* Q5_0's bits with a min: value = q * d + m, q in 0..31. */
typedef struct block_q5_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[QK4_0 / 2];
} block_q5_1;
static_assert(sizeof(block_q5_1) == 24, "block_q5_1 must be 24 bytes (ggml layout)");

/* 32 weights on a non-linear grid: value[j] = d * kvalues_iq4nl[qs[j] & 15],
 * value[j+16] = d * kvalues_iq4nl[qs[j] >> 4]. */
typedef struct block_iq4_nl {
    uint16_t d;
    uint8_t qs[QK4_0 / 2];
} block_iq4_nl;
static_assert(sizeof(block_iq4_nl) == 18, "block_iq4_nl must be 18 bytes (ggml layout)");

/* The 16 values IQ4_NL and IQ4_XS index (ggml's kvalues_iq4nl). */
extern const int8_t kvalues_iq4nl[16];

/* 256 weights in 16 sub-blocks of 16 with 4-bit scale and min (scales[k]
 * low / high nibble): value = d * sc * q - dmin * m, q 2 bits. Element
 * 128h + 32s + l (l < 32) is bits 2s..2s+1 of qs[32h + l]; sub-block
 * (128h + 32s + l) / 16. */
typedef struct block_q2_K {
    uint8_t scales[QK_K / 16];
    uint8_t qs[QK_K / 4];
    uint16_t d;
    uint16_t dmin;
} block_q2_K;
static_assert(sizeof(block_q2_K) == 84, "block_q2_K must be 84 bytes (ggml layout)");

/* 256 weights in 16 sub-blocks of 16 with 6-bit signed scales (sc - 32):
 * value = d * (sc - 32) * (q - 4 * !hbit), q the 2 low bits laid out as
 * Q2_K's, hbit bit (element / 32) of hmask[element % 32]. */
typedef struct block_q3_K {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[12]; /* 16 6-bit scales, packed */
    uint16_t d;
} block_q3_K;
static_assert(sizeof(block_q3_K) == 110, "block_q3_K must be 110 bytes (ggml layout)");

/* Q4_K with a fifth bit: element 64k + l (l < 32) takes the low nibble of
 * qs[32k + l] and bit 2k of qh[l], element 64k + 32 + l the high nibble
 * and bit 2k + 1; scales and mins as Q4_K's. */
typedef struct block_q5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} block_q5_K;
static_assert(sizeof(block_q5_K) == 176, "block_q5_K must be 176 bytes (ggml layout)");

/* IQ4_NL's grid over 256 weights in 8 sub-blocks of 32 with 6-bit scales
 * (low 4 bits in scales_l nibbles, high 2 in scales_h): value =
 * d * (ls - 32) * kvalues_iq4nl[q], the nibbles of each sub-block laid out
 * as an IQ4_NL block's. */
typedef struct block_iq4_xs {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[QK_K / 64];
    uint8_t qs[QK_K / 2];
} block_iq4_xs;
static_assert(sizeof(block_iq4_xs) == 136, "block_iq4_xs must be 136 bytes (ggml layout)");

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

/* True for the weight types the kernels run (every tier, matmul and
 * embedding lookup): F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL,
 * Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, MXFP4. */
bool kernel_type_supported(uint32_t type);
/* Elements per block (1 for float types); 0 if unsupported. */
size_t kernel_type_block_elems(uint32_t type);
/* Bytes of one row of n elements; 0 if unsupported or n is not a whole
 * number of blocks. */
size_t kernel_row_bytes(uint32_t type, size_t n);
/* The supported types' names, comma-separated ("f32, f16, ..."), for
 * messages that refuse another type. */
const char *kernel_supported_names(void);

/* ---- reference quantizers --------------------------------------------------
 *
 * Each writes what llama.cpp's llama-quantize writes for the type when it
 * has no importance matrix: ggml's quantize_row_*_ref (IQ4_NL, IQ4_XS: the
 * scale search quantize_iq4_nl / quantize_iq4_xs run), in ggml's float
 * operations and order, so the blocks are equal bit for bit (tests check
 * them against blocks llama.cpp made). x (n,) -> y (n / block blocks). */

/* d = amax/127, q = roundf(x/d). */
void quantize_row_q8_0_ref(block_q8_0 *restrict y, const float *restrict x, size_t n);
/* max is the signed value of largest magnitude, d = max/-8,
 * q = MIN(15, (int8_t)(x/d + 8.5f)). */
void quantize_row_q4_0_ref(block_q4_0 *restrict y, const float *restrict x, size_t n);
/* d = (max - min)/15 (Q5_1: /31), m = min, q = (x - min)/d + 0.5 truncated. */
void quantize_row_q4_1_ref(block_q4_1 *restrict y, const float *restrict x, size_t n);
void quantize_row_q5_1_ref(block_q5_1 *restrict y, const float *restrict x, size_t n);
/* Q4_0's rule with 32 levels: d = max/-16. */
void quantize_row_q5_0_ref(block_q5_0 *restrict y, const float *restrict x, size_t n);
/* The weighted least squares scale of the grid's nearest levels, searched
 * over 15 first guesses. */
void quantize_row_iq4_nl(block_iq4_nl *restrict y, const float *restrict x, size_t n);
/* n % 256 == 0. Per sub-block a searched step and min (Q2_K, Q4_K, Q5_K)
 * or symmetric scale (Q3_K, Q6_K, IQ4_XS), then the sub-block scales
 * quantized against the superblock's fp16 ones. */
void quantize_row_q2_K(block_q2_K *restrict y, const float *restrict x, size_t n);
void quantize_row_q3_K(block_q3_K *restrict y, const float *restrict x, size_t n);
void quantize_row_q4_K(block_q4_K *restrict y, const float *restrict x, size_t n);
void quantize_row_q5_K(block_q5_K *restrict y, const float *restrict x, size_t n);
void quantize_row_q6_K(block_q6_K *restrict y, const float *restrict x, size_t n);
void quantize_row_iq4_xs(block_iq4_xs *restrict y, const float *restrict x, size_t n);

/* x (n,) -> y (n/32 blocks); n % 32 == 0: ggml's quantize_row_mxfp4_ref
 * (e from floor(log2(amax)) - 2, each value to the nearest code, the first
 * on ties), bit for bit. */
void quantize_row_mxfp4_ref(block_mxfp4 *restrict y, const float *restrict x, size_t n);

/* ---- activation quantizers (what llama.cpp's CPU backend runs on x86) --
 *
 * The matmuls quantize activation rows as ggml-cpu does, so products track
 * llama.cpp's to float rounding. */

/* x (n,) -> y (n/256 blocks); n % 256 == 0. ggml's quantize_row_q8_K_ref:
 * max the first value of largest magnitude, iscale = -127/max,
 * q = MIN(127, round-half-even(iscale x)), d = 1/iscale (float, negative
 * when max is positive), bsums per 16; an all-zero block has d = 0. */
void quantize_row_q8_K_ref(block_q8_K *restrict y, const float *restrict x, size_t n);
/* x (n,) -> y (n/32 blocks); n % 32 == 0. ggml-cpu's x86 quantize_row_q8_0
 * (not ggml's _ref): d = amax/127 stored fp16, q = round-half-even(x *
 * 127/amax). s (may be NULL) gets quantize_row_q8_1's per-block sum term,
 * the float of fp16(d * sum of q) (d before its fp16 rounding). */
void quantize_row_q8_0_act_ref(block_q8_0 *restrict y, const float *restrict x, size_t n,
                               float *restrict s);

/* x (n,) -> one row of a weight type tps writes (every supported type;
 * F32, F16, BF16 converted): dst holds kernel_row_bytes(type, n). 0, or
 * TPS_EUNSUP for another type. */
int quantize_row_any(uint32_t type, void *restrict dst, const float *restrict x, size_t n);

/* ---- dequantizers (reference: ggml's dequantize_row_*, bit for bit) ------ */

void dequantize_row_f16(float *restrict y, const uint16_t *restrict x, size_t n);
void dequantize_row_bf16(float *restrict y, const uint16_t *restrict x, size_t n);
void dequantize_row_q8_0(float *restrict y, const block_q8_0 *restrict x, size_t n);
void dequantize_row_q4_0(float *restrict y, const block_q4_0 *restrict x, size_t n);
void dequantize_row_q4_1(float *restrict y, const block_q4_1 *restrict x, size_t n);
void dequantize_row_q5_0(float *restrict y, const block_q5_0 *restrict x, size_t n);
void dequantize_row_q5_1(float *restrict y, const block_q5_1 *restrict x, size_t n);
void dequantize_row_iq4_nl(float *restrict y, const block_iq4_nl *restrict x, size_t n);
void dequantize_row_q2_K(float *restrict y, const block_q2_K *restrict x, size_t n);
void dequantize_row_q3_K(float *restrict y, const block_q3_K *restrict x, size_t n);
void dequantize_row_q4_K(float *restrict y, const block_q4_K *restrict x, size_t n);
void dequantize_row_q5_K(float *restrict y, const block_q5_K *restrict x, size_t n);
void dequantize_row_q6_K(float *restrict y, const block_q6_K *restrict x, size_t n);
void dequantize_row_iq4_xs(float *restrict y, const block_iq4_xs *restrict x, size_t n);
void dequantize_row_q8_K(float *restrict y, const block_q8_K *restrict x, size_t n);
void dequantize_row_mxfp4(float *restrict y, const block_mxfp4 *restrict x, size_t n);

/* x (n elements of type) -> y (n,) floats, any supported type (F32 copies).
 * Returns 0, or TPS_EUNSUP / TPS_EINVAL (n not whole blocks). */
int dequantize_row(float *restrict y, const void *restrict x, uint32_t type, size_t n);

#endif
