/* Llama hyperparameters read once from GGUF metadata (the `Config` of
 * STYLE.md's Config/Weights/State split). Reads keys only; tensors are bound
 * in llama_weights. */
#ifndef TPS_LLAMA_CONFIG_H
#define TPS_LLAMA_CONFIG_H

#include <stdint.h>

#include "model/gguf.h"

typedef struct llama_config {
    char arch[32];       /* general.architecture, e.g. "llama" */
    uint32_t n_vocab;    /* tokens in the vocabulary (= rows of token_embd) */
    uint32_t dim;        /* embedding_length */
    uint32_t n_layers;   /* block_count */
    uint32_t n_heads;    /* attention.head_count */
    uint32_t n_kv_heads; /* attention.head_count_kv (GQA); = n_heads when absent */
    uint32_t head_dim;   /* dim / n_heads */
    uint32_t ffn_dim;    /* feed_forward_length */
    uint32_t ctx_len;    /* context_length the model was trained with */
    uint32_t rope_dim;   /* rope.dimension_count; = head_dim when absent */
    float rope_base;     /* rope.freq_base; 10000 when absent */
    float rms_eps;       /* attention.layer_norm_rms_epsilon; 1e-5 when absent */
} llama_config;

/* Fills cfg from f. Errors name the missing or inconsistent key. */
int llama_config_read(llama_config *cfg, const gguf_file *f, tps_err *err);

#endif
