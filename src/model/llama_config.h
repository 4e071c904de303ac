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
    /* YaRN (rope.scaling.type yarn): ggml's rope_yarn with ext_factor 1 and
     * beta_fast 32, beta_slow 1, as llama.cpp runs the architectures here;
     * rope_attn_factor then holds llama.cpp's yarn_attn_factor */
    float rope_ext_factor;   /* 1 with YaRN, else 0 */
    float rope_yarn_corr[2]; /* ggml_rope_yarn_corr_dims: the ramp's first and last dims */
    /* mixture of experts (llama_arch.moe, or a llama file with experts) */
    uint32_t n_expert;      /* expert_count; 0: every FFN is dense */
    uint32_t n_expert_used; /* expert_used_count: experts per token (k) */
    uint32_t expert_ffn;    /* expert_feed_forward_length: each expert's FFN width */
    /* hybrid stacks (llama_arch.hybrid, Qwen3.5): the gated DeltaNet layers */
    uint32_t ssm_conv;           /* ssm.conv_kernel: taps of the causal depthwise conv */
    uint32_t ssm_state;          /* ssm.state_size: a head's key and value size S */
    uint32_t ssm_k_heads;        /* ssm.group_count: query/key heads */
    uint32_t ssm_v_heads;        /* ssm.time_step_rank: value heads, one S x S state each; a
                                    multiple of ssm_k_heads (value head h reads key head
                                    h % ssm_k_heads, as ggml broadcasts) */
    uint32_t full_attn_interval; /* full_attention_interval: layer l is full attention when
                                    (l + 1) % it == 0, the others linear */
    uint32_t n_nextn;            /* nextn_predict_layers: MTP blocks after the stack (not in
                                    n_layers): loaded and counted, not run */
    uint32_t rope_sections[4];   /* rope.dimension_sections (Qwen3.5's interleaved M-RoPE):
                                    for text every pair rotates by the position but those
                                    past the t/h/w sections; all 0: plain RoPE */
} llama_config;

/* Experts a router may choose from, and experts a token may use, at most. */
#define LLAMA_MAX_EXPERTS      512
#define LLAMA_MAX_EXPERTS_USED 32

/* Multiply-adds of one row through a layer's FFN: the dense FFN, or the
 * router and the k experts a token uses. */
static inline double llama_config_ffn_macs(const llama_config *c) {
    if (!c->n_expert) return 3.0 * c->dim * c->ffn_dim;
    return (double)c->dim * c->n_expert + 3.0 * c->dim * c->expert_ffn * c->n_expert_used;
}

/* 1 when layer l uses the sliding window (llama.cpp's set_swa_pattern). */
static inline int llama_config_is_swa(const llama_config *c, uint32_t l) {
    return c->n_swa && (c->swa_period == 0 || l % c->swa_period < c->swa_period - 1);
}

/* 1 when layer l is a linear-attention (recurrent) layer: no K/V, a
 * fixed-size state per sequence instead. */
static inline int llama_config_is_recurrent(const llama_config *c, uint32_t l) {
    return c->arch_info && c->arch_info->hybrid && (l + 1) % c->full_attn_interval != 0;
}

/* Channels of a linear layer's causal conv: Q, K (key heads x S each) and V
 * (value heads x S). */
static inline uint32_t llama_config_conv_channels(const llama_config *c) {
    return (2 * c->ssm_k_heads + c->ssm_v_heads) * c->ssm_state;
}

/* Floats of one linear layer's state for one sequence: the conv's last
 * ssm_conv - 1 inputs, then the value heads' S x S matrices. */
static inline uint64_t llama_config_state_floats(const llama_config *c) {
    return (uint64_t)(c->ssm_conv - 1) * llama_config_conv_channels(c) +
           (uint64_t)c->ssm_v_heads * c->ssm_state * c->ssm_state;
}

/* The block a tensor name "blk.N.*" belongs to, N; UINT32_MAX for any other
 * name (names are not NUL-terminated: len bounds the read). */
static inline uint32_t llama_tensor_block(const char *name, uint64_t len) {
    if (len < 5 || name[0] != 'b' || name[1] != 'l' || name[2] != 'k' || name[3] != '.')
        return UINT32_MAX;
    uint64_t n = 0, k = 4;
    for (; k < len && k < 12 && name[k] >= '0' && name[k] <= '9'; k++)
        n = n * 10 + (uint64_t)(name[k] - '0');
    return k == 4 ? UINT32_MAX : (uint32_t)n;
}

/* Fills cfg from f. Errors name the missing or inconsistent key. */
int llama_config_read(llama_config *cfg, const gguf_file *f, tps_err *err);

/* Fails with "model: ARCH: tensor 'NAME' is missing (the tensor table at
 * byte offset N lists M tensors)"; returns TPS_EINVAL. */
int llama_err_missing_tensor(tps_err *err, const char *arch, const gguf_file *f, const char *name);

#endif
