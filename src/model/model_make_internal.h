/* Internal to model_make*.c: the plan of a synthetic file (one generator
 * per tensor) that model_make.c builds and model_make_moe.c adds the
 * mixture-of-experts and gpt-oss tensors and keys to. Not for other files
 * (use model_make.h). */
#ifndef TPS_MODEL_MAKE_INTERNAL_H
#define TPS_MODEL_MAKE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "model/gguf.h"
#include "model/model_make.h"
#include "model/quant_mix.h"

/* One tensor's values: n_mats matrices (rows, cols), seeded by (seed, name). */
typedef struct tensor_gen {
    char name[64];
    uint64_t seed;
    uint32_t type;
    uint32_t rows, cols; /* cols = ne[0]; rows of each matrix */
    uint32_t n_mats;     /* 0: a vector or matrix; n: a 3-D tensor (ne2 = n) */
    float scale;         /* uniform in [-scale, scale]; 0 means all ones (norms) */
    float offset;        /* added to every value */
    const float *values; /* (cols,) fixed values instead, or NULL */
} tensor_gen;

/* What the synthetic file will hold, derived once from the options. */
typedef struct make_plan {
    const model_make_opts *o;
    const model_preset *p;
    const model_arch_spec *as;
    uint32_t type;          /* o->type: a GGML type or MODEL_MAKE_FTYPE(n) */
    quant_mix_model mix;    /* what llama.cpp's type rules read */
    uint32_t n_vocab;       /* the preset's, or the copied vocabulary's */
    uint32_t hd, q_dim, kv; /* head size, Q width, K/V width */
    int gemma3, phi3;
    float rope_base;
    float std_embd, std, proj;      /* weight scales: embedding, layers, output projections */
    uint32_t n_expert, n_used, eff; /* experts, experts a token uses, an expert's FFN (0: dense) */
    const model_hybrid_shape *hy;   /* the hybrid shape (Qwen3.5), else NULL */
    uint32_t nextn;                 /* MTP blocks after the stack */
    uint32_t dense_lead;            /* leading layers with a dense FFN before the experts */
    const struct make_mla_shape *mla;   /* the latent attention shape (DeepSeek), else NULL */
    const struct make_gemma4_shape *g4; /* Gemma 4's shape, else NULL */
    tensor_gen *gens; /* (MAKE_GENS_FIXED + MAKE_GENS_PER_LAYER * (n_layers + MTP blocks),) */
    size_t n_gens;    /* filled so far */
} make_plan;

#define MAKE_GENS_FIXED     6
#define MAKE_GENS_PER_LAYER 26

/* Type of matrix name ("output.weight", "attn_v.weight", "ffn_down_exps.weight"...;
 * rows of cols) of layer l: the plan's type, or under a file type the one
 * llama-quantize gives it (model/quant_mix.h). */
uint32_t make_matrix_type(const make_plan *pl, const char *name, uint32_t l, uint32_t cols);
/* Appends the generator of one tensor: uniform with the given std (0: all
 * ones). The caller may set offset, values or n_mats. */
tensor_gen *make_add_gen(make_plan *pl, const char *name, uint32_t type, uint32_t rows,
                         uint32_t cols, float std);
/* make_add_gen for "blk.<l>.<suffix>". */
tensor_gen *make_add_layer_gen(make_plan *pl, uint32_t l, const char *suffix, uint32_t type,
                               uint32_t rows, uint32_t cols, float std);

/* model_make_moe.c: the experts' shape from the preset and the
 * architecture (plan->n_expert...); 0 or TPS_EINVAL with a message. */
int make_plan_experts(make_plan *pl, tps_err *err);
/* The expert_* keys, and gpt-oss's window and YaRN keys. */
int make_moe_metadata(gguf_writer *w, const make_plan *pl);
/* Layer l's FFN of a mixture of experts: its norm, router, experts (and
 * their biases for gpt-oss). */
void make_plan_moe_ffn(make_plan *pl, uint32_t l);
/* gpt-oss's attention sinks and output bias of layer l. */
void make_plan_oai_attention(make_plan *pl, uint32_t l);

/* GLM-4.5's extra MoE keys (shared count, dense lead, gating, norm and scale). */
int make_glm_metadata(gguf_writer *w, const make_plan *pl);

/* model_make_hybrid.c: the hybrid shape of the preset (pl->hy, pl->hd);
 * 0 or TPS_EINVAL with a message. */
int make_plan_hybrid(make_plan *pl, tps_err *err);
/* The ssm.*, full_attention_interval, rope.dimension_sections and
 * nextn_predict_layers keys. */
int make_hybrid_metadata(gguf_writer *w, const make_plan *pl);
/* 1 when layer l of the plan is a linear (recurrent) layer. */
int make_layer_is_linear(const make_plan *pl, uint32_t l);
/* Layer l's linear-attention tensors. */
void make_plan_linear_attention(make_plan *pl, uint32_t l);
/* The MTP blocks' extra tensors (their attention and FFN are planned by
 * the caller like any full-attention layer's). */
void make_plan_mtp_extras(make_plan *pl, uint32_t l);

/* model_make_mla.c: the latent attention and routing shape of the preset
 * (pl->mla, pl->hd: the latent row, and the experts); 0 or TPS_EINVAL with
 * a message. */
int make_plan_mla(make_plan *pl, tps_err *err);
/* The attention.*_lora_rank, *_mla, expert routing and YaRN keys (and the
 * head sizes and one KV head, replacing the Llama layout's). */
int make_mla_metadata(gguf_writer *w, const make_plan *pl);
/* Layer l's latent attention tensors, and its FFN: dense before the
 * leading dense count, else the experts and shared experts. */
void make_plan_mla_layer(make_plan *pl, uint32_t l);

/* model_make_gemma4.c: Gemma 4's shape of the preset (pl->g4, pl->hd: the
 * global layers' head); 0 or TPS_EINVAL with a message. */
#define LLAMA_GEMMA4_MAX_LAYERS 256
int make_plan_gemma4(make_plan *pl, tps_err *err);
/* The per-layer lists, head sizes, RoPE, sharing, per-layer input and
 * soft-cap keys (replacing the Llama layout's). */
int make_gemma4_metadata(gguf_writer *w, const make_plan *pl);
/* rope_freqs (values in rope_factors) and the per-layer input embeddings. */
void make_plan_gemma4_globals(make_plan *pl, float *rope_factors);
/* Layer l's tensors. */
void make_plan_gemma4_layer(make_plan *pl, uint32_t l);

#endif
