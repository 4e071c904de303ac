/* The ggml tensor element types as the GGUF format numbers them, with each
 * type's block size and bytes per block: facts about the file format that
 * the reader (model/), the kernels and the tools all need, kept once.
 * Not here: computing with a type (kernels/quant.h), tensor shapes
 * (model/gguf.h). */
#ifndef TPS_BASE_GGML_TYPE_H
#define TPS_BASE_GGML_TYPE_H

#include <stddef.h>
#include <stdint.h>

/* Tensor element types, numbered as ggml numbers them (the file format):
 * every id llama.cpp's ggml.h defines, so a file of a type tps cannot run
 * is refused by the type's name. Ids ggml removed (4, 5, 31-33, 36-38)
 * stay unknown. */
typedef enum ggml_type {
    GGML_TYPE_F32 = 0,
    GGML_TYPE_F16 = 1,
    GGML_TYPE_Q4_0 = 2,
    GGML_TYPE_Q4_1 = 3,
    GGML_TYPE_Q5_0 = 6,
    GGML_TYPE_Q5_1 = 7,
    GGML_TYPE_Q8_0 = 8,
    GGML_TYPE_Q8_1 = 9,
    GGML_TYPE_Q2_K = 10,
    GGML_TYPE_Q3_K = 11,
    GGML_TYPE_Q4_K = 12,
    GGML_TYPE_Q5_K = 13,
    GGML_TYPE_Q6_K = 14,
    GGML_TYPE_Q8_K = 15,
    GGML_TYPE_IQ2_XXS = 16,
    GGML_TYPE_IQ2_XS = 17,
    GGML_TYPE_IQ3_XXS = 18,
    GGML_TYPE_IQ1_S = 19,
    GGML_TYPE_IQ4_NL = 20,
    GGML_TYPE_IQ3_S = 21,
    GGML_TYPE_IQ2_S = 22,
    GGML_TYPE_IQ4_XS = 23,
    GGML_TYPE_I8 = 24,
    GGML_TYPE_I16 = 25,
    GGML_TYPE_I32 = 26,
    GGML_TYPE_I64 = 27,
    GGML_TYPE_F64 = 28,
    GGML_TYPE_IQ1_M = 29,
    GGML_TYPE_BF16 = 30,
    GGML_TYPE_TQ1_0 = 34,
    GGML_TYPE_TQ2_0 = 35,
    GGML_TYPE_MXFP4 = 39, /* OCP microscaling FP4 (gpt-oss experts) */
    GGML_TYPE_NVFP4 = 40,
    GGML_TYPE_Q1_0 = 41,
    GGML_TYPE_COUNT_MAX = 64
} ggml_type;

typedef struct ggml_type_info {
    const char *name;  /* "q8_0" */
    size_t block_size; /* elements per block */
    size_t type_size;  /* bytes per block */
} ggml_type_info;

/* NULL when the id is not a type this build knows. */
const ggml_type_info *ggml_type_get(uint32_t type);
/* Type by its name ("q8_0", "f16"; case-insensitive); -1 if unknown. */
int ggml_type_from_name(const char *name);

#endif
