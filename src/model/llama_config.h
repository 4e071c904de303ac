/* Hyperparameters of a Llama-family model (model/llama_arch.h lists the
 * architectures) read once from GGUF metadata (the `Config` of STYLE.md's
 * Config/Weights/State split). Reads keys only; tensors are bound in
 * llama_weights. */
#ifndef TPS_LLAMA_CONFIG_H
#define TPS_LLAMA_CONFIG_H

#include <stdint.h>

#include "model/gguf.h"
#include "model/llama_arch.h"

typedef struct llama_config {
    char arch[32];               /* general.architecture, e.g. "llama" */
    const llama_arch *arch_info; /* what the architecture computes beyond Llama */
    uint32_t n_vocab;            /* tokens in the vocabulary (= rows of token_embd) */
    uint32_t dim;                /* embedding_length */
    uint32_t n_layers;           /* block_count */
    uint32_t n_heads;            /* attention.head_count */
    uint32_t n_kv_heads;         /* attention.head_count_kv (GQA); = n_heads when absent */
    uint32_t head_dim;           /* attention.key_length; dim / n_heads when absent */
    uint32_t ffn_dim;            /* feed_forward_length */
    uint32_t ctx_len;            /* context_length the model was trained with */
    uint32_t rope_dim;           /* rope.dimension_count; = head_dim when absent */
    float rope_base;             /* rope.freq_base; 10000 when absent */
    float rms_eps;               /* attention.layer_norm_rms_epsilon; 1e-5 when absent */
    float rope_scale;            /* 1 / rope.scaling.factor (linear scaling); 1 when absent */
    /* sliding-window attention (Gemma): local layers read the last n_swa positions */
    uint32_t n_swa;         /* attention.sliding_window; 0: every layer is global */
    uint32_t swa_period;    /* attention.sliding_window_pattern: see llama_config_is_swa */
    float rope_base_swa;    /* rope.freq_base_swa: the local layers' RoPE base */
    float rope_scale_swa;   /* the local layers' linear RoPE scale */
    uint32_t rope_orig_ctx; /* rope.scaling.original_context_length; ctx_len when absent */
    float rope_attn_factor; /* rope.scaling.attn_factor: cos/sin multiplier (LongRoPE); 1 */
    float attn_softcap;     /* attn_logit_softcapping; 0: none */
    float final_softcap;    /* final_logit_softcapping; 0: none */
} llama_config;

/* 1 when layer l uses the sliding window (llama.cpp's set_swa_pattern). */
static inline int llama_config_is_swa(const llama_config *c, uint32_t l) {
    return c->n_swa && (c->swa_period == 0 || l % c->swa_period < c->swa_period - 1);
}

/* Fills cfg from f. Errors name the missing or inconsistent key. */
int llama_config_read(llama_config *cfg, const gguf_file *f, tps_err *err);

/* Fails with "model: ARCH: tensor 'NAME' is missing (the tensor table at
 * byte offset N lists M tensors)"; returns TPS_EINVAL. */
int llama_err_missing_tensor(tps_err *err, const char *arch, const gguf_file *f, const char *name);

#endif
