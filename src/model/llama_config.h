/* Hyperparameters of a Llama-family model (model/llama_arch.h lists the
 * architectures) read once from GGUF metadata (the `Config` of STYLE.md's
 * Config/Weights/State split). Reads keys only; tensors are bound in
 * llama_weights. */
#ifndef TPS_LLAMA_CONFIG_H
#define TPS_LLAMA_CONFIG_H

#include <stdint.h>
#include <string.h> /* memcpy: unaligned ids */

#include "model/gguf.h"
#include "model/llama_arch.h"

/* Layers a per-layer list (sliding_window_pattern as an array) may describe. */
#define LLAMA_MAX_LIST_LAYERS 256

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
    uint32_t shexp_ffn;     /* the shared expert's FFN width: expert_shared_feed_forward_length
                               (llama_arch.shexp, gated), or expert_shared_count x expert_ffn
                               (llama_arch.moe_file_rules, ungated); 0: no shared expert */
    llama_gating gating;    /* the router's rule: the architecture's, or the file's
                               expert_gating_func (moe_file_rules) */
    int norm_w;             /* 1: the k weights divided by their sum (expert_weights_norm) */
    float w_scale;          /* expert_weights_scale: the k weights times it unless 0 or 1 */
    uint32_t n_groups;      /* expert_group_count: experts in n_groups groups, only the
                               n_groups_used best (by their top two) chosen from; 0/1: none */
    uint32_t n_groups_used; /* expert_group_used_count */
    uint32_t n_dense_lead;  /* leading_dense_block_count: layers before it have a dense FFN */
    int dense_with_experts; /* 1: a MoE layer runs its dense FFN (ffn_dim) beside the experts
                               and adds the two, each with its own norms (Gemma 4 26B-A4B) */
    /* multi-head latent attention (llama_arch.mla, DeepSeek-V2/V3): a position's K and V
     * come from one latent row of kv_lora_rank, which the cache stores with the rotated
     * key part beside it: head_dim (attention.key_length) = kv_lora_rank + rope_dim and
     * n_kv_heads = 1, the latent a single head that every query head attends to */
    uint32_t q_lora_rank;  /* attention.q_lora_rank: Q through attn_q_a, its RMSNorm and
                              attn_q_b; 0: one attn_q (DeepSeek-V2-Lite) */
    uint32_t kv_lora_rank; /* attention.kv_lora_rank; 0: not MLA */
    uint32_t mla_k;        /* attention.key_length_mla: a head's Q/K decompressed (the part
                              without RoPE, then rope_dim) */
    uint32_t mla_v;        /* attention.value_length_mla: a head's V decompressed */
    float yarn_log_mul;    /* rope.scaling.yarn_log_multiplier / 0.1 (DeepSeek's mscale_all_dim:
                              the attention scale's YaRN factor); 0: none */
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
    /* Gemma 4 (llama_arch.gemma4): the sliding layers by a list, their own head shape, KV
     * shared by the last layers, per-layer input embeddings. For every other architecture
     * the *_swa sizes equal the global ones and swa_list is 0. */
    uint32_t head_dim_swa;   /* attention.key_length_swa: a sliding layer's head size */
    uint32_t n_kv_heads_swa; /* a sliding layer's KV heads (head_count_kv as a per-layer array) */
    uint32_t rope_dim_swa;   /* rope.dimension_count_swa */
    int swa_list;            /* 1: swa_bits says which layers slide (sliding_window_pattern
                                as an array of bools) */
    uint64_t swa_bits[LLAMA_MAX_LIST_LAYERS / 64];
    uint32_t n_kv_shared;    /* attention.shared_kv_layers: the last ones store no K/V */
    uint32_t n_embd_pl;      /* embedding_length_per_layer_input: per-layer input width; 0: none */
    uint32_t ffn_dim_shared; /* the shared-KV layers' FFN width where feed_forward_length is a
                                list (E2B's double-wide MLP); 0: ffn_dim */
    /* tokenizer.ggml.suppress_tokens (Gemma 4's converter writes generation_config.json's
     * suppress_tokens): ids whose logits are -inf after the final soft-cap, so they are
     * never sampled. Each one checked < n_vocab at load, fewer than n_vocab of them. */
    const uint8_t *suppress; /* n_suppress little-endian 32-bit ids, borrowed from the file's
                                metadata (unaligned: read with memcpy); NULL when absent */
    uint32_t n_suppress;
} llama_config;

/* Experts a router may choose from, and experts a token may use, at most. */
#define LLAMA_MAX_EXPERTS      512
#define LLAMA_MAX_EXPERTS_USED 32

/* Layer l's dense FFN width (Gemma 4's shared-KV layers may be wider). */
static inline uint32_t llama_config_ffn_dim(const llama_config *c, uint32_t l) {
    return c->ffn_dim_shared && l + c->n_kv_shared >= c->n_layers ? c->ffn_dim_shared : c->ffn_dim;
}

/* Multiply-adds of one row through layer l's FFN: the dense FFN, or the
 * router, the k experts a token uses and the shared expert with its gate
 * (and the dense FFN beside them, Gemma 4). */
static inline double llama_config_ffn_macs(const llama_config *c, uint32_t l) {
    const double dense = 3.0 * c->dim * llama_config_ffn_dim(c, l);
    if (!c->n_expert || l < c->n_dense_lead) return dense;
    return (double)c->dim * (c->n_expert + (c->shexp_ffn ? 1 : 0)) +
           3.0 * c->dim * ((double)c->expert_ffn * c->n_expert_used + c->shexp_ffn) +
           (c->dense_with_experts ? dense : 0.0);
}

/* 1 when layer l's FFN is a mixture of experts. */
static inline int llama_config_is_moe(const llama_config *c, uint32_t l) {
    return c->n_expert && l >= c->n_dense_lead;
}

/* Elements of the row one position stores per attention layer: K and V of
 * every KV head, or MLA's latent row once (it is both). */
static inline uint64_t llama_config_kv_row(const llama_config *c) {
    const uint64_t k = (uint64_t)c->n_kv_heads * c->head_dim;
    return c->kv_lora_rank ? k : 2 * k;
}

/* 1 when layer l uses the sliding window (llama.cpp's set_swa_pattern, or
 * the file's list). */
static inline int llama_config_is_swa(const llama_config *c, uint32_t l) {
    if (c->swa_list) return c->n_swa && (c->swa_bits[l / 64] >> (l % 64) & 1);
    return c->n_swa && (c->swa_period == 0 || l % c->swa_period < c->swa_period - 1);
}

/* Layer l's head size, KV heads and RoPE width (a sliding layer's own in
 * Gemma 4; the same for every layer elsewhere, and where a config built by
 * hand leaves the *_swa sizes 0). */
static inline uint32_t llama_config_head_dim(const llama_config *c, uint32_t l) {
    return c->head_dim_swa && llama_config_is_swa(c, l) ? c->head_dim_swa : c->head_dim;
}
static inline uint32_t llama_config_kv_heads(const llama_config *c, uint32_t l) {
    return c->n_kv_heads_swa && llama_config_is_swa(c, l) ? c->n_kv_heads_swa : c->n_kv_heads;
}
static inline uint32_t llama_config_rope_dim(const llama_config *c, uint32_t l) {
    return c->rope_dim_swa && llama_config_is_swa(c, l) ? c->rope_dim_swa : c->rope_dim;
}

/* The layer whose K/V layer l attends to: itself, or for one of Gemma 4's
 * last n_kv_shared layers the last layer of its kind (sliding or global)
 * before them, as llama.cpp's layer_reuse_cb has it. */
static inline uint32_t llama_config_kv_source(const llama_config *c, uint32_t l) {
    const uint32_t first = c->n_layers - c->n_kv_shared;
    return l < first ? l : first - (llama_config_is_swa(c, l) ? 2 : 1);
}

/* 1 when layer l is a linear-attention (recurrent) layer: no K/V, a
 * fixed-size state per sequence instead. */
static inline int llama_config_is_recurrent(const llama_config *c, uint32_t l) {
    return c->arch_info && c->arch_info->hybrid && (l + 1) % c->full_attn_interval != 0;
}

/* 1 when layer l stores K/V of its own: not recurrent, not one of Gemma
 * 4's shared layers. */
static inline int llama_config_stores_kv(const llama_config *c, uint32_t l) {
    return !llama_config_is_recurrent(c, l) && llama_config_kv_source(c, l) == l;
}

/* Elements one position stores in the cache over every layer (K and V of
 * each layer that stores them, with its own head shape; MLA's latent once):
 * times the cache type's bytes, the KV bytes a token adds. */
static inline uint64_t llama_config_kv_elems(const llama_config *c) {
    uint64_t n = 0;
    for (uint32_t l = 0; l < c->n_layers; l++)
        if (llama_config_stores_kv(c, l))
            n += (uint64_t)llama_config_kv_heads(c, l) * llama_config_head_dim(c, l) *
                 (c->kv_lora_rank ? 1 : 2);
    return n;
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

/* Suppressed token i (i < c->n_suppress), a valid row of the logits. */
static inline uint32_t llama_config_suppressed(const llama_config *c, uint32_t i) {
    uint32_t id;
    memcpy(&id, c->suppress + 4 * (size_t)i, 4);
    return id;
}

/* Fills cfg from f (borrowing from it: cfg is valid while f is open).
 * Errors name the missing or inconsistent key. */
int llama_config_read(llama_config *cfg, const gguf_file *f, tps_err *err);

/* Fails with "model: ARCH: tensor 'NAME' is missing (the tensor table at
 * byte offset N lists M tensors)"; returns TPS_EINVAL. */
int llama_err_missing_tensor(tps_err *err, const char *arch, const gguf_file *f, const char *name);

#endif
