/* Synthetic Llama models for benchmarks: a GGUF of a real model's shape with
 * seeded random weights. Compute cost per token equals a trained model of
 * that shape, which is what a throughput benchmark measures; the text it
 * generates is noise. The file uses llama.cpp's standard keys and tensor
 * names so llama.cpp loads it too (the honest side-by-side of issue 8). */
#ifndef TPS_MODEL_MAKE_H
#define TPS_MODEL_MAKE_H

#include <stdint.h>

#include "base/error.h"

typedef struct model_preset {
    const char *name;
    const char *like; /* which real model has this shape */
    uint32_t dim, n_layers, n_heads, n_kv_heads, ffn_dim, n_vocab, ctx_len;
    float rope_base;
} model_preset;

/* What a mixture-of-experts preset adds to its model_presets row (kept
 * apart so the row keeps its layout). */
typedef struct model_moe_shape {
    const char *preset;     /* the model_presets name it completes */
    const char *arch;       /* the --arch of the real model */
    uint32_t head_dim;      /* 0: the architecture's head_dim_mult * dim / n_heads */
    uint32_t n_expert;      /* experts a layer */
    uint32_t n_expert_used; /* experts a token uses */
    uint32_t expert_ffn;    /* each expert's FFN width */
} model_moe_shape;

/* What a hybrid (Qwen3.5) file adds to its preset's row: the linear
 * layers' shape, the full-attention heads' size, the M-RoPE sections and
 * the MTP blocks. */
typedef struct model_hybrid_shape {
    const char *preset;   /* the model_presets name it completes */
    uint32_t head_dim;    /* the full-attention heads' size (RoPE on a quarter of it) */
    uint32_t k_heads;     /* linear layers' query/key heads */
    uint32_t v_heads;     /* value heads: one S x S state each */
    uint32_t state;       /* S */
    uint32_t interval;    /* full attention every interval-th layer */
    uint32_t sections[4]; /* rope.dimension_sections */
    uint32_t nextn;       /* MTP blocks after the stack */
} model_hybrid_shape;

/* The preset's hybrid shape, or NULL when it has none (--arch qwen35
 * needs one). */
const model_hybrid_shape *model_preset_hybrid(const model_preset *p);

/* The preset's expert shape, or NULL for a dense preset. */
const model_moe_shape *model_preset_moe(const model_preset *p);

/* NULL when unknown. model_presets lists all, terminated by a NULL name. */
const model_preset *model_preset_find(const char *name);
extern const model_preset model_presets[];

/* 1 when p is the preset `name` or its thin variant (`name`-thin: the
 * same layers, heads and routing at the width and vocabulary its
 * model_presets row gives, with experts as wide as its FFN): an
 * architecture's shape table has one row for both. */
int model_preset_is(const model_preset *p, const char *name);
/* 1 when p is a thin variant. */
int model_preset_thin(const model_preset *p);

/* opts.type for one of llama.cpp's file types (its LLAMA_FTYPE number:
 * model/quant_mix.h): each matrix gets the type llama-quantize would give
 * it, e.g. Q4_K_M's Q4_K with Q6_K for output.weight and for attn_v /
 * ffn_down in the first and last eighth of the layers and every third
 * layer between, and the fallback types for rows not whole blocks. */
#define MODEL_MAKE_FTYPE(n) (0x10000u + (uint32_t)(n))
#define MODEL_MAKE_Q4_K_M   MODEL_MAKE_FTYPE(15)

/* What an architecture adds to the Llama layout in a made file. */
typedef struct model_arch_spec {
    const char *name;       /* --arch name */
    const char *gguf_arch;  /* general.architecture written */
    int qkv_bias;           /* attn_q/k/v.bias (qwen2) */
    int qk_norm;            /* attn_q_norm / attn_k_norm (qwen3) */
    int llama3_rope;        /* rope_freqs.weight with Llama 3.1's scaling, base 500000 */
    int tied;               /* no output.weight: the head reads token_embd */
    uint32_t head_dim_mult; /* head size = mult * dim / n_heads (attention.key_length) */
    const char *about;      /* for --help */
    int gemma;              /* post-attention / post-FFN norms; sliding window of 8 positions
                               (512 beyond the tiny preset) on the layers pattern swa_period
                               makes local, soft-capping (gemma2), RoPE bases 1e6 global with
                               linear scaling 8 and 1e4 local (gemma3) */
    uint32_t swa_period;    /* attention.sliding_window_pattern written */
    /* mixture of experts: experts a layer and a token uses with a dense
     * preset (tiny, mini...), each expert the preset's FFN width; 0: dense */
    uint32_t n_expert, n_expert_used;
    int oai; /* gpt-oss: sinks, biases, sliding window on alternate layers, YaRN, MXFP4 experts */
    int hybrid; /* Qwen3.5: gated DeltaNet linear layers beside gated full attention, MTP blocks
                   (model_hybrid_shape) */
    int shexp;  /* a shared expert (as wide as one expert) beside the routed ones, with its
                   sigmoid gate (Qwen3.5 MoE) */
    int glm;    /* GLM-4.5: Q/K/V biases, RoPE on half of each head, a dense first layer,
                   sigmoid routing with a selection bias (exp_probs_b), weights normalised and
                   scaled by 2.5, one ungated shared expert, one MTP block */
    int gemma4; /* Gemma 4: sliding and global layers of their own head shapes, shared KV
                   layers, per-layer inputs (model_make_gemma4.c) */
    int mla;    /* DeepSeek-V2/V3: multi-head latent attention, YaRN, a dense first layer, then
                   experts routed as the preset's row says plus ungated shared experts
                   (model_make_mla.c) */
} model_arch_spec;

/* NULL when unknown. model_arch_specs lists all, terminated by a NULL name. */
const model_arch_spec *model_arch_find(const char *name);
extern const model_arch_spec model_arch_specs[];

typedef struct model_make_opts {
    const model_preset *preset;
    const model_arch_spec *arch; /* NULL: plain llama */
    uint32_t type;               /* a ggml type every matrix takes (kernel_type_supported; its
                                    blocks must fit dim and ffn_dim), or MODEL_MAKE_FTYPE(n) */
    const char *vocab_path;      /* GGUF whose tokenizer is copied; NULL: byte-level vocab */
    const char *chat_template;   /* tokenizer.chat_template to write (replacing the vocab's);
                                    NULL: the vocab GGUF's, or none */
    uint64_t seed;
    const char *out_path;
    int progress; /* 1: progress lines on stderr */
} model_make_opts;

/* Parameters the preset has (all tensors), for messages; a mixture of
 * experts' active ones (those one token uses) into *active if not NULL. */
uint64_t model_preset_params(const model_preset *p);
uint64_t model_preset_params_active(const model_preset *p, uint64_t *active);

int model_make(const model_make_opts *o, tps_err *err);

#endif
