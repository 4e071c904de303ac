/* llama.cpp's file types ("Q4_K_M", "Q5_K_S", "IQ4_XS"...): their names,
 * general.file_type numbers, and the type llama-quantize gives each tensor
 * of a Llama-family model under them without an importance matrix (its
 * llama_tensor_get_type: more bits for output.weight, attn_v, ffn_down and
 * attn_output as the mix says, and the fallback types for rows that are not
 * whole blocks). `tps model make` writes files with these mixes, and
 * `tps model info` names a file's type. Decides types only: quantizing is
 * kernels/quant.h's. Not modelled: Falcon, 70B and mixture-of-experts
 * rules, importance-matrix-only types (IQ1/IQ2/IQ3). */
#ifndef TPS_MODEL_QUANT_MIX_H
#define TPS_MODEL_QUANT_MIX_H

#include <stdint.h>

typedef struct quant_ftype {
    const char *name; /* lower case, as `--type` takes it: "q5_k_m" */
    uint32_t ftype;   /* llama.cpp's LLAMA_FTYPE_MOSTLY_* (general.file_type) */
    uint32_t base;    /* the ggml type of most matrices */
} quant_ftype;

/* NULL when unknown. quant_ftypes lists all, terminated by a NULL name. */
const quant_ftype *quant_ftype_find(const char *name);
const quant_ftype *quant_ftype_by_number(uint32_t ftype);
extern const quant_ftype quant_ftypes[];

/* What the rules read of the model. */
typedef struct quant_mix_model {
    uint32_t n_layers;
    uint32_t n_head, n_head_kv; /* n_gqa = n_head / n_head_kv */
    int tied;                   /* no output.weight: token_embd is quantized as the output */
} quant_mix_model;

/* The type llama-quantize gives tensor `name` (a 2-D weight; cols = its
 * ne[0]; layer its blk index, 0 for global tensors) under file type ft. */
uint32_t quant_mix_type(const quant_ftype *ft, const quant_mix_model *m, const char *name,
                        uint64_t cols, uint32_t layer);

#endif
