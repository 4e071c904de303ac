/* The decoder-only architectures tps runs, as llama.cpp names them in
 * `general.architecture`, and what sets each apart from plain Llama. One
 * forward pass serves them all (engine/forward/forward.c): the entry chosen at load
 * says which of its per-architecture steps apply. Reads no file. */
#ifndef TPS_LLAMA_ARCH_H
#define TPS_LLAMA_ARCH_H

#include <stdint.h>

typedef enum llama_arch_id {
    LLAMA_ARCH_LLAMA = 0, /* Llama 1/2/3.x, SmolLM, TinyLlama, Mistral 7B */
    LLAMA_ARCH_QWEN2,     /* Qwen2, Qwen2.5 */
    LLAMA_ARCH_QWEN3,     /* Qwen3 (dense) */
    LLAMA_ARCH_GEMMA2,    /* Gemma 2 */
    LLAMA_ARCH_GEMMA3,    /* Gemma 3 (text) */
    LLAMA_ARCH_PHI3,      /* Phi-3, Phi-3.5, Phi-4-mini */
    LLAMA_ARCH_MISTRAL3,  /* Mistral Small 3.x, Ministral 3 (text) */
    LLAMA_ARCH_QWEN3MOE,  /* Qwen3-30B-A3B, Qwen3-Coder-30B-A3B, Qwen3-235B-A22B */
    LLAMA_ARCH_GPT_OSS,   /* gpt-oss-20b, gpt-oss-120b */
    LLAMA_ARCH_QWEN35,    /* Qwen3.5 / 3.6 dense (0.8B to 27B): linear attention beside full */
    LLAMA_ARCH_QWEN35MOE, /* Qwen3.5 / 3.6 MoE (35B-A3B to 397B-A17B): the same stack, experts */
    LLAMA_ARCH_GLM4MOE,   /* GLM-4.5, 4.5-Air, 4.6, 4.7 */
    LLAMA_ARCH_DEEPSEEK2, /* DeepSeek-V2, V2-Lite, V2.5, V3, R1, Kimi K2: latent attention */
    LLAMA_ARCH_GEMMA4,    /* Gemma 4 (text): E2B, E4B, 31B, 26B-A4B */
} llama_arch_id;

/* How a mixture-of-experts layer turns router logits into expert weights
 * (llama.cpp's llama_expert_gating_func_type). */
typedef enum llama_gating {
    LLAMA_GATING_SOFTMAX = 0,    /* softmax over all experts, then the top k of it */
    LLAMA_GATING_SOFTMAX_WEIGHT, /* the top k logits, then a softmax over those k */
    LLAMA_GATING_SIGMOID,        /* sigmoid of each logit; the top k of it (plus the file's
                                    selection bias exp_probs_b, which only chooses) */
} llama_gating;

typedef struct llama_arch {
    llama_arch_id id;
    const char *name;      /* general.architecture */
    int rope_neox;         /* 1: RoPE rotates (x[i], x[i + rope_dim/2]) (GPT-NeoX order);
                              0: adjacent pairs (x[2i], x[2i+1]) */
    int qk_norm;           /* 1: per-head RMSNorm of Q and K before RoPE
                              (blk.N.attn_q_norm / attn_k_norm, head_dim each) */
    int q_prescale;        /* 1: Q is scaled by 1/sqrt(head_dim) before attention, which then
                              uses scale 1 (same maths in llama.cpp's rounding order): Gemma, Phi-3 */
    int gemma;             /* 1: Gemma's block: embeddings scaled by sqrt(dim), GeGLU FFN,
                              post-attention and post-FFN RMSNorms (attn_post_norm,
                              ffn_post_norm), Q scaled by 1/sqrt(head_dim) before attention */
    uint32_t swa_period;   /* sliding-window layer pattern when the file has none: layer l
                              is local when l % period < period - 1; 0: no sliding window */
    uint32_t swa_window;   /* attention.sliding_window when absent (0: none unless given) */
    int rope_swa_base_10k; /* 1: local layers' RoPE base defaults to 10000 (Gemma 3);
                              0: to the global base */
    float attn_softcap;    /* attn_logit_softcapping when absent (0: none) */
    float final_softcap;   /* final_logit_softcapping when absent (0: none) */
    int moe;               /* 1: every layer's FFN is a mixture of experts (expert_count
                              required); the llama row runs one when the file has experts */
    llama_gating gating;   /* expert weights from router logits */
    int moe_norm_w;        /* 1: the k expert weights are divided by their sum */
    int oai;               /* gpt-oss's block: attention sinks, attn_output and expert
                              biases, post_attention_norm before the FFN, clamped SwiGLU */
    int hybrid;            /* 1: Qwen3.5's stack: gated DeltaNet linear-attention layers (a
                              fixed-size recurrent state per sequence, no K/V) and every
                              full_attention_interval-th layer full attention whose Q
                              projection carries an output gate (sigmoid) per head; the
                              pre-FFN norm is post_attention_norm */
    int moe_file_rules;    /* 1: the file says the routing (expert_gating_func,
                              expert_weights_norm, expert_weights_scale), its shared experts
                              (expert_shared_count, ungated) and its leading dense layers
                              (leading_dense_block_count); a layer's router may carry a
                              selection bias (exp_probs_b): GLM-4.5, DeepSeek */
    int qk_norm_opt;       /* 1: per-head Q/K RMSNorm where the file has it (GLM-4.5 355B) */
    int shexp;             /* 1: a MoE layer adds a shared expert (ffn_{gate,up,down}_shexp, a
                              SwiGLU FFN of expert_shared_feed_forward_length) scaled by
                              sigmoid(ffn_gate_inp_shexp . x) per row (Qwen3.5 MoE) */
    int mla;               /* 1: multi-head latent attention (DeepSeek-V2/V3, llama.cpp's MLA
                              form): K and V are decompressed per head from one latent row
                              a position (attention.kv_lora_rank, normed, with a rotated key
                              part beside it), which is all the cache stores; Q optionally
                              through a low-rank bottleneck (attention.q_lora_rank) */
    int gemma4;            /* 1: Gemma 4's block on top of Gemma's: the sliding layers listed
                              per layer (sliding_window_pattern as an array) with their own
                              head size, KV heads and RoPE width (*_swa keys), V RMS-normed
                              without a weight (V = K where attn_v is absent), attention
                              scale 1, the last shared_kv_layers layers storing no K/V (each
                              reads the last earlier layer of its kind), rope_freqs on the
                              global layers only, a per-layer output scale, per-layer input
                              embeddings (embedding_length_per_layer_input); experts where
                              the file has them (expert_count), run beside the dense FFN
                              (llama_config.dense_with_experts) */
    const char *specifics; /* one line for `tps model info` */
} llama_arch;

/* NULL when tps does not run `name`. */
const llama_arch *llama_arch_find(const char *name);
/* "llama, qwen2, qwen3": for messages. */
const char *llama_arch_names(void);

#endif
