/* Weights of a Llama-family model: borrowed pointers into the mmapped GGUF (the `Weights` of
 * STYLE.md), bound by tensor name and checked against the config's shapes
 * and the kernels' supported types. Norm vectors that are not F32 in the
 * file are the one exception: converted once into owned float arrays. */
#ifndef TPS_LLAMA_WEIGHTS_H
#define TPS_LLAMA_WEIGHTS_H

#include <stdint.h>

#include "model/gguf.h"
#include "model/llama_config.h"

/* A matrix W (rows, cols) row-major in type `type`: a linear layer computes
 * x (cols,) -> W x (rows,). */
typedef struct llama_mat {
    const void *data; /* borrowed from the file, in `type` */
    uint32_t type;
    uint32_t rows, cols;
    /* NULL, or the same matrix repacked into 8-row groups (kernels/matmul.h,
     * type kernel_packed_type(type)) inside llama_weights.packed: what the
     * forward pass multiplies by when present. Same bits either way. */
    const void *packed;
    /* 0: one matrix. n: a 3-D expert tensor (ne2 = n) of n matrices of
     * (rows, cols), expert e's at data (or packed) + e * rows * row bytes */
    uint32_t n_experts;
} llama_mat;

typedef struct llama_layer {
    const float *attn_norm; /* (dim,) */
    llama_mat wq;           /* (n_heads*head_dim, dim) */
    llama_mat wk;           /* (n_kv_heads*head_dim, dim) */
    llama_mat wv;           /* (n_kv_heads*head_dim, dim) */
    const float *bq;        /* (n_heads*head_dim,) or NULL: Q bias (qwen2; optional elsewhere) */
    const float *bk;        /* (n_kv_heads*head_dim,) or NULL */
    const float *bv;        /* (n_kv_heads*head_dim,) or NULL */
    const float *q_norm;    /* (head_dim,) per-head RMSNorm weight (qwen3), else NULL */
    const float *k_norm;    /* (head_dim,) or NULL */
    llama_mat wo;           /* (dim, n_heads*head_dim) */
    const float *attn_post_norm; /* (dim,) RMSNorm of the attention output (Gemma), else NULL */
    const float *ffn_post_norm;  /* (dim,) RMSNorm of the FFN output (Gemma), else NULL */
    const float *ffn_norm;       /* (dim,) */
    llama_mat w_gate;            /* (ffn_dim, dim) */
    llama_mat w_up;              /* (ffn_dim, dim) */
    llama_mat w_down;            /* (dim, ffn_dim) */
    /* mixture of experts (cfg->n_expert > 0), in place of w_gate/up/down */
    llama_mat gate_inp;           /* (n_expert, dim): router logits */
    const float *gate_inp_b;      /* (n_expert,) or NULL (gpt-oss) */
    const float *exp_probs_b;     /* (n_expert,) or NULL: added to the probabilities to choose
                                     the experts only (GLM-4.5, DeepSeek-V3) */
    llama_mat gate_exps, up_exps; /* n_expert x (expert_ffn, dim) */
    llama_mat down_exps;          /* n_expert x (dim, expert_ffn) */
    const float *gate_exps_b;     /* (n_expert, expert_ffn) or NULL (gpt-oss) */
    const float *up_exps_b;       /* (n_expert, expert_ffn) or NULL */
    const float *down_exps_b;     /* (n_expert, dim) or NULL */
    uint64_t expert_bytes;        /* one expert's gate + up + down bytes */
    /* Gemma 4's experts (llama_config.dense_with_experts), beside w_gate/up/down */
    llama_mat gate_up_exps;       /* n_expert x (2 * expert_ffn, dim): an expert's gate rows, then
                                     its up rows (the converter's fused form); unbound where the
                                     file has ffn_gate_exps and ffn_up_exps */
    const float *gate_inp_s;      /* (dim,) the router input's scale (ffn_gate_inp.scale) */
    const float *down_exps_s;     /* (n_expert,) or NULL: each expert's output scale */
    const float *ffn_post_norm_1; /* (dim,) the dense FFN's output norm */
    const float *ffn_pre_norm_2;  /* (dim,) the experts' input norm */
    const float *ffn_post_norm_2; /* (dim,) the experts' output norm */
    /* the shared expert every row runs (cfg->shexp_ffn > 0, Qwen3.5 MoE) */
    llama_mat gate_shexp, up_shexp; /* (shexp_ffn, dim) */
    llama_mat down_shexp;           /* (dim, shexp_ffn) */
    const float *gate_inp_shexp;    /* (dim,): its weight is sigmoid(gate_inp_shexp . x); NULL:
                                       weight 1 (GLM-4.5, DeepSeek) */
    const float *bo;                /* (dim,) attn_output.bias or NULL (gpt-oss) */
    const float *sinks;             /* (n_heads,) attention sink logits or NULL (gpt-oss) */
    /* multi-head latent attention (llama_config.kv_lora_rank > 0: DeepSeek), in place of
     * wq/wk/wv; wo is (dim, n_heads * mla_v) */
    llama_mat wq_a;         /* (q_lora_rank, dim): Q's bottleneck; unbound when q_lora_rank
                               is 0 and wq (n_heads * mla_k, dim) is Q */
    const float *q_a_norm;  /* (q_lora_rank,) */
    llama_mat wq_b;         /* (n_heads * mla_k, q_lora_rank): per head the part without
                               RoPE, then rope_dim */
    llama_mat wkv_a;        /* (kv_lora_rank + rope_dim, dim): the latent, then the key's
                               RoPE part (one for all heads) */
    const float *kv_a_norm; /* (kv_lora_rank,) */
    llama_mat wk_b;         /* n_heads x (kv_lora_rank, mla_k - rope_dim): takes a head's Q
                               without RoPE into the latent (the absorbed K) */
    llama_mat wv_b;         /* n_heads x (mla_v, kv_lora_rank): a head's V out of its
                               attention over the latent */
    /* a linear-attention layer of a hybrid stack (llama_config_is_recurrent;
     * Qwen3.5's gated DeltaNet). Its full-attention layers' wq has 2 x
     * n_heads * head_dim rows instead: per head its Q, then its output gate. */
    llama_mat ssm_qkv;       /* (conv channels, dim): Q, K, V before the conv (attn_qkv) */
    llama_mat ssm_gate;      /* (value heads * S, dim): z, the output norm's gate (attn_gate) */
    llama_mat ssm_beta;      /* (value heads, dim): the write strength, before its sigmoid */
    llama_mat ssm_alpha;     /* (value heads, dim): the decay's input */
    llama_mat ssm_out;       /* (dim, value heads * S) */
    const float *ssm_conv1d; /* (conv channels, conv taps): taps oldest input first */
    const float *ssm_dt;     /* (value heads,): added to alpha before the softplus */
    const float *ssm_a;      /* (value heads,): -exp(A_log), the decay rate */
    const float *ssm_norm;   /* (S,): the per-head RMSNorm before the gate */
    /* Gemma 4 (llama_arch.gemma4): wq/wk/wv/wo and the Q/K norms have the layer's own head
     * size (llama_config_head_dim); wv may be unbound (V is then K's projection); a layer
     * that reads another's K/V (llama_config_kv_source) has no wk, wv, k_norm */
    const float *out_scale;     /* (1,) layer_output_scale: the layer's output times it, or NULL */
    llama_mat ple_gate;         /* (n_embd_pl, dim) inp_gate: the per-layer input's gate */
    llama_mat ple_proj;         /* (dim, n_embd_pl) proj */
    const float *ple_post_norm; /* (dim,) post_norm */
} llama_layer;

typedef struct llama_weights {
    llama_mat token_embd;    /* (n_vocab, dim): row t is token t's embedding */
    const float *out_norm;   /* (dim,) */
    llama_mat output;        /* (n_vocab, dim); = token_embd when tied */
    int tied;                /* 1 when output.weight is absent */
    const float *rope_freqs; /* (rope_dim/2,) or NULL: divisors of the RoPE frequencies
                                (Llama 3.1 scaling, rope_freqs.weight) */
    const float *rope_long;  /* (rope_dim/2,) or NULL: LongRoPE factors beyond the original
                                context (phi3, rope_factors_long.weight) */
    const float *rope_short; /* (rope_dim/2,) or NULL: within it (rope_factors_short.weight) */
    /* Gemma 4's per-layer input embeddings (llama_config.n_embd_pl > 0), else unbound */
    llama_mat ple_embd;       /* (n_vocab, n_layers * n_embd_pl): token t's inputs, layer-major */
    llama_mat ple_model_proj; /* (n_layers * n_embd_pl, dim): the same from the scaled embedding */
    const float *ple_proj_norm; /* (n_embd_pl,) */
    llama_layer *layers;        /* n_layers */
    float *owned;               /* converted norm vectors, one allocation */
    void *packed;               /* repacked matrices, one allocation; NULL when not repacked */
    size_t packed_bytes;        /* its size */
    size_t released_bytes;    /* file pages of repacked matrices given back (gguf_release_pages) */
    uint64_t bytes_per_token; /* weight bytes one decode step of one row reads (every dense
                                 matrix, k experts a layer, one embd row) */
    uint64_t bytes_dense;     /* of those, all but the experts' */
    uint64_t bytes_total;     /* every matrix's bytes, all experts included */
    uint64_t params_total;    /* elements of every tensor */
    uint64_t params_active;   /* elements one token uses (k experts a layer, one embd row) */
    uint64_t mtp_bytes;       /* the MTP blocks' tensors (llama_config.n_nextn): loaded and
                                 counted in bytes_total, never run (no drafting yet) */
} llama_weights;

int llama_weights_bind(llama_weights *w, const llama_config *cfg, const gguf_file *f, tps_err *err);
/* Copies every Q8_0 / Q4_0 / Q4_K / Q6_K / MXFP4 matrix with a multiple of 8 rows
 * (layers, experts and the output head; not the embedding, read by row, nor
 * the router) into one owned buffer of
 * 8-row interleaved groups and points each llama_mat.packed at its copy.
 * An explicit opt-in against STYLE's "borrow the mmap": it would double the
 * weights' footprint but for llama_weights_repack_file, and pays
 * back in matmul speed (docs/performance.md). 0 or TPS_ENOMEM (then
 * nothing is repacked and the model still works). */
int llama_weights_repack(llama_weights *w, const llama_config *cfg, tps_err *err);
/* llama_weights_repack streaming the file: each matrix's file pages are
 * given back (gguf_release_pages, counted in released_bytes) as soon as its
 * copy is made, so the load holds about the file's size resident at its
 * peak, not the file plus its copies. */
int llama_weights_repack_file(llama_weights *w, const llama_config *cfg, const gguf_file *f,
                              tps_err *err);
void llama_weights_free(llama_weights *w);

#endif
