/* Writes a synthetic Llama GGUF: preset shapes, seeded uniform weights with
 * GPT-2-style scale (std 0.02; output projections scaled by 1/sqrt(2L)), unit
 * norms, quantized with the reference quantizers (ggml's, so the bytes are
 * llama-quantize's) in one type or one of llama.cpp's per-tensor mixes
 * (model/quant_mix.h). Every row's values come
 * from a generator seeded by (seed, tensor, row), so a file is identical for
 * the same seed whatever the thread count. Nothing here runs the model. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/rng.h"
#include "kernels/quant.h"
#include "model/gguf.h"
#include "model/model_make.h"
#include "model/model_make_internal.h"
#include "model/quant_mix.h"

const model_arch_spec model_arch_specs[] = {
    {.name = "llama",
     .gguf_arch = "llama",
     .head_dim_mult = 1,
     .about = "Llama 2 layout (untied output.weight)"},
    {.name = "llama3",
     .gguf_arch = "llama",
     .llama3_rope = 1,
     .tied = 1,
     .head_dim_mult = 1,
     .about =
         "llama with Llama 3.1 RoPE scaling (rope_freqs.weight, base 500000) and tied embeddings"},
    {.name = "qwen2",
     .gguf_arch = "qwen2",
     .qkv_bias = 1,
     .head_dim_mult = 1,
     .about = "Q/K/V biases, NeoX RoPE"},
    {.name = "qwen3",
     .gguf_arch = "qwen3",
     .qk_norm = 1,
     .tied = 1,
     .head_dim_mult = 2,
     .about = "per-head Q/K RMSNorm, NeoX RoPE, head size 2 * dim / heads, tied embeddings"},
    {.name = "gemma2",
     .gguf_arch = "gemma2",
     .tied = 1,
     .head_dim_mult = 1,
     .gemma = 1,
     .swa_period = 2,
     .about = "GeGLU, post-norms, sliding window (8 for tiny, else 512) on alternate layers, "
              "attention soft-cap 1 and final soft-cap 2 (small, so they act), tied"},
    {.name = "gemma3",
     .gguf_arch = "gemma3",
     .qk_norm = 1,
     .tied = 1,
     .head_dim_mult = 2,
     .gemma = 1,
     .swa_period = 3,
     .about = "gemma2 without soft-caps, with Q/K norm; the window on 2 of 3 layers, RoPE base 1e4 "
              "local and 1e6 x linear 1/8 global"},
    {.name = "phi3",
     .gguf_arch = "phi3",
     .head_dim_mult = 1,
     .about = "fused attn_qkv and gate|up tensors, NeoX RoPE, LongRoPE factors (original context "
              "256, attn_factor 1.2)"},
    {.name = "mistral3",
     .gguf_arch = "mistral3",
     .head_dim_mult = 2,
     .about = "Llama layout, head size 2 * dim / heads"},
    {.name = "mixtral",
     .gguf_arch = "llama",
     .head_dim_mult = 1,
     .n_expert = 8,
     .n_expert_used = 2,
     .about = "llama with a mixture of experts (Mixtral layout, ffn_*_exps): 8 experts, 2 a token "
              "with a dense preset"},
    {.name = "qwen3moe",
     .gguf_arch = "qwen3moe",
     .qk_norm = 1,
     .head_dim_mult = 2,
     .n_expert = 16,
     .n_expert_used = 4,
     .about = "qwen3's attention (untied) with 16 experts, 4 a token with a dense preset"},
    {.name = "gpt-oss",
     .gguf_arch = "gpt-oss",
     .qkv_bias = 1,
     .head_dim_mult = 2,
     .swa_period = 2,
     .n_expert = 8,
     .n_expert_used = 4,
     .oai = 1,
     .about =
         "attention sinks, biases, window (8 for tiny, else 128) on alternate layers, YaRN (x32 of "
         "4096); MXFP4 experts whatever --type, with biases: 8, 4 a token with a dense preset"},
    {.name = "qwen35",
     .gguf_arch = "qwen35",
     .qk_norm = 1,
     .tied = 1,
     .head_dim_mult = 1,
     .hybrid = 1,
     .about = "Qwen3.5: gated DeltaNet linear layers (conv, delta-rule state) beside full "
              "attention with an output gate, Q/K norm and M-RoPE on a quarter of each head; one "
              "MTP block; presets tiny, 0.8B, 0.8B-thin, 9B"},
    {.name = "qwen35moe",
     .gguf_arch = "qwen35moe",
     .qk_norm = 1,
     .head_dim_mult = 1,
     .n_expert = 16,
     .n_expert_used = 4,
     .hybrid = 1,
     .shexp = 1,
     .about = "qwen35's stack with experts on every layer (16, 4 a token with a dense preset) and "
              "a shared expert with a sigmoid gate; untied; presets tiny, 0.8B-thin, 35B-A3B"},
    {.name = "glm4moe",
     .gguf_arch = "glm4moe",
     .qkv_bias = 1,
     .head_dim_mult = 2,
     .n_expert = 16,
     .n_expert_used = 4,
     .glm = 1,
     .about =
         "GLM-4.5: Q/K/V biases, RoPE on half of each head, layer 0 dense, then experts (16, 4 a "
         "token with a dense preset): sigmoid router with a selection bias, weights renormalised "
         "and scaled by 2.5, one shared expert; one MTP block; untied; presets tiny, 106B-A12B"},
    {.name = "deepseek2",
     .gguf_arch = "deepseek2",
     .head_dim_mult = 1,
     .n_expert = 16,
     .n_expert_used = 4,
     .mla = 1,
     .about =
         "DeepSeek-V2/V3: multi-head latent attention (the cache holds a latent row a position), "
         "YaRN with DeepSeek's mscale, layer 0 dense, then experts plus 2 ungated shared experts; "
         "tiny routes as V3 (sigmoid, selection bias, 4 groups of 4, 2 chosen, 4 of 16 a token), "
         "16B-A2.4B is V2-Lite's shape (softmax, 6 of 64), 16B-A2.4B-thin its layers at width 256 "
         "(FFN and experts of 128); untied (model_make_mla.c)"},
    {.name = "gemma4",
     .gguf_arch = "gemma4",
     .tied = 1,
     .head_dim_mult = 1,
     .gemma4 = 1,
     .about = "Gemma 4: sliding (window 8 for tiny) and global layers with their own head sizes, "
              "KV heads and RoPE (partial on global layers), V = K on global layers, the last "
              "layers reading earlier K/V, per-layer inputs, final soft-cap 2 for tiny; tied; "
              "presets tiny, E4B, E4B-thin, 31B, and with experts beside the dense FFN (a scaled "
              "softmax "
              "router, fused gate|up, a scale per expert) 26B-A4B and tiny-moe "
              "(model_make_gemma4.c)"},
    {0},
};

const model_arch_spec *model_arch_find(const char *name) {
    for (const model_arch_spec *a = model_arch_specs; a->name; a++)
        if (!strcasecmp(a->name, name)) return a;
    return NULL;
}

uint64_t model_preset_params_active(const model_preset *p, uint64_t *active) {
    const model_moe_shape *moe = model_preset_moe(p);
    const uint64_t hd = moe && moe->head_dim ? moe->head_dim : p->dim / p->n_heads;
    const uint64_t q = (uint64_t)p->n_heads * hd, kv = (uint64_t)p->n_kv_heads * hd;
    const uint64_t attn = 2ull * p->dim * q + 2ull * p->dim * kv + 2ull * p->dim;
    const uint64_t expert = 3ull * p->dim * (moe ? moe->expert_ffn : p->ffn_dim);
    const uint64_t fixed = 2ull * p->n_vocab * p->dim + p->dim;
    const uint64_t router = moe ? (uint64_t)p->dim * moe->n_expert : 0;
    if (active)
        *active = fixed + p->n_layers * (attn + router + expert * (moe ? moe->n_expert_used : 1));
    return fixed + p->n_layers * (attn + router + expert * (moe ? moe->n_expert : 1));
}

uint64_t model_preset_params(const model_preset *p) {
    return model_preset_params_active(p, NULL);
}

static int fill_tensor(void *ctx, void *dst, size_t nbytes, tps_err *err) {
    const tensor_gen *g = ctx;
    const size_t n_rows = (size_t)g->rows * (g->n_mats ? g->n_mats : 1);
    size_t row_bytes = nbytes / n_rows;
    int failed = 0;
#pragma omp parallel
    {
        float *row = malloc(sizeof(float) * g->cols);
        if (!row) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (long r = 0; r < (long)n_rows; r++) {
            if (!row) continue;
            uint64_t st = g->seed ^ ((uint64_t)r * 0xd1b54a32d192ed03ull);
            for (uint32_t c = 0; c < g->cols; c++) {
                if (g->values) {
                    row[c] = g->values[c];
                } else if (g->scale == 0.0f) {
                    row[c] = 1.0f;
                } else {
                    double u = tps_unit_from_bits(tps_splitmix64(&st));
                    row[c] = (float)((2.0 * u - 1.0) * g->scale) + g->offset;
                }
            }
            uint8_t *out = (uint8_t *)dst + (size_t)r * row_bytes;
            (void)quantize_row_any(g->type, out, row, g->cols); /* types checked up front */
        }
        free(row);
    }
    if (failed) return tps_fail(err, TPS_ENOMEM, "model make: out of memory");
    return 0;
}

typedef struct progress_state {
    const char *path;
    int last_tenth; /* last tenth of the total reported */
} progress_state;

/* One line per tenth of the file, so a log stays readable. */
static void progress(void *ctx, uint64_t done, uint64_t total) {
    progress_state *ps = ctx;
    int tenth = total ? (int)(done * 10 / total) : 10;
    if (tenth == ps->last_tenth) return;
    ps->last_tenth = tenth;
    fprintf(stderr, "model make: %s: %.0f / %.0f MiB written\n", ps->path, (double)done / 1048576.0,
            (double)total / 1048576.0);
}

/* A character-level SentencePiece vocabulary: <unk> <s> </s>, the 256 byte
 * tokens, "▁" (space) and the printable ASCII characters, then unused
 * padding to the preset's size. English text encodes at one token per
 * character, anything else through byte fallback, and llama.cpp accepts it
 * as a "llama" tokenizer. */
static int add_byte_vocab(gguf_writer *w, uint32_t n_vocab, tps_err *err) {
    if (n_vocab < 354)
        return tps_fail(err, TPS_EINVAL, "model make: vocabulary of %u is too small", n_vocab);
    char **toks = calloc(n_vocab, sizeof *toks);
    size_t *lens = calloc(n_vocab, sizeof *lens);
    float *scores = calloc(n_vocab, sizeof *scores);
    int32_t *types = calloc(n_vocab, sizeof *types);
    char *text = malloc((size_t)n_vocab * 24);
    int rc = TPS_ENOMEM;
    if (!toks || !lens || !scores || !types || !text) goto done;
    for (uint32_t i = 0; i < n_vocab; i++) {
        char *t = text + (size_t)i * 24;
        if (i == 0)
            strcpy(t, "<unk>"), types[i] = 2;
        else if (i == 1)
            strcpy(t, "<s>"), types[i] = 3;
        else if (i == 2)
            strcpy(t, "</s>"), types[i] = 3;
        else if (i < 259)
            snprintf(t, 24, "<0x%02X>", i - 3), types[i] = 6;
        else if (i == 259)
            strcpy(t, "\xe2\x96\x81"), types[i] = 1;
        else if (i < 260 + 94)
            t[0] = (char)(0x21 + i - 260), t[1] = 0, types[i] = 1;
        else
            snprintf(t, 24, "<unused%u>", i - 354), types[i] = 5;
        toks[i] = t;
        lens[i] = strlen(t);
        scores[i] = 0.0f;
    }
    rc = gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    rc = rc ? rc
            : gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", (const char *const *)toks, lens,
                                        n_vocab);
    rc = rc ? rc
            : gguf_writer_set_array(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, n_vocab);
    rc =
        rc ? rc
           : gguf_writer_set_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, n_vocab);
    rc = rc ? rc : gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    rc = rc ? rc : gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    rc = rc ? rc : gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    rc = rc ? rc : gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true);
    rc = rc ? rc : gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", false);
    if (rc) rc = tps_fail(err, rc, "model make: cannot build the vocabulary");
done:
    free(toks);
    free(lens);
    free(scores);
    free(types);
    free(text);
    return rc;
}

/* Copies every tokenizer.* key of another GGUF; returns its vocabulary size. */
static int copy_vocab(gguf_writer *w, const char *path, uint32_t *n_vocab, tps_err *err) {
    gguf_file *f;
    int rc = gguf_open(&f, path, err);
    if (rc) return rc;
    gguf_value toks;
    if (gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks) != 0 ||
        toks.arr.n == 0 || toks.arr.n > 1u << 22) {
        gguf_close(f);
        return tps_fail(err, TPS_EINVAL, "model make: '%s' has no tokenizer.ggml.tokens", path);
    }
    *n_vocab = (uint32_t)toks.arr.n;
    for (uint64_t i = 0; i < f->n_kv && !rc; i++)
        if (f->kv[i].key.len > 10 && !memcmp(f->kv[i].key.ptr, "tokenizer.", 10))
            rc = gguf_writer_copy_kv(w, &f->kv[i]);
    gguf_close(f);
    if (rc) return tps_fail(err, rc, "model make: cannot copy the tokenizer of '%s'", path);
    return 0;
}

/* Llama 3.1's RoPE frequency divisors (factor 8, low/high frequency factors
 * 1 and 4, original context 8192), as llama.cpp's convert_hf_to_gguf.py
 * computes rope_freqs.weight. */
static void llama3_rope_factors(float *out, uint32_t rope_dim, float base) {
    const double factor = 8, lo = 1, hi = 4, old_ctx = 8192;
    for (uint32_t i = 0; i < rope_dim / 2; i++) {
        const double freq = 1.0 / pow(base, (double)(2 * i) / rope_dim);
        const double wavelen = 2 * M_PI / freq;
        if (wavelen < old_ctx / hi)
            out[i] = 1.0f;
        else if (wavelen > old_ctx / lo)
            out[i] = (float)factor;
        else {
            const double smooth = (old_ctx / wavelen - lo) / (hi - lo);
            out[i] = (float)(1.0 / ((1 - smooth) / factor + smooth));
        }
    }
}

/* The file type a mix option names (NULL for a pure type). */
static const quant_ftype *mix_of(uint32_t type) {
    return type >= MODEL_MAKE_FTYPE(0) ? quant_ftype_by_number(type - MODEL_MAKE_FTYPE(0)) : NULL;
}

/* general.file_type (llama.cpp's LLAMA_FTYPE_*): the mix's, or for a pure
 * type the file type whose base it is ("mostly Q4_K" is Q4_K_S's 14). */
static uint32_t file_type_of(uint32_t type) {
    const quant_ftype *ft = mix_of(type);
    if (ft) return ft->ftype;
    static const uint32_t pure[][2] = {
        {GGML_TYPE_Q4_K, 14}, {GGML_TYPE_Q3_K, 11}, {GGML_TYPE_Q5_K, 16}, {GGML_TYPE_Q2_K, 10}};
    for (size_t i = 0; i < sizeof pure / sizeof pure[0]; i++)
        if (pure[i][0] == type) return pure[i][1];
    for (const quant_ftype *f = quant_ftypes; f->name; f++)
        if (f->base == type) return f->ftype;
    return 0;
}

static const char *type_name(uint32_t type) {
    const quant_ftype *ft = mix_of(type);
    return ft ? ft->name : ggml_type_get(type)->name;
}

/* A pure type must fit every matrix (llama-quantize --pure has no
 * fallback); a mix fits any shape, falling back for rows that are not
 * whole blocks as llama-quantize does. */
static int check_type(const model_make_opts *o, tps_err *err) {
    const model_preset *p = o->preset;
    const uint32_t t = o->type;
    if (mix_of(t)) return 0;
    if (t >= GGML_TYPE_COUNT_MAX || !kernel_type_supported(t))
        return tps_fail(err, TPS_EINVAL,
                        "model make: type must be one of llama.cpp's file types (q8_0, q4_k_m, "
                        "q5_k_m, iq4_xs, ... : `tps model make --help`) or a type tps writes: %s",
                        kernel_supported_names());
    const size_t bs = ggml_type_get(t)->block_size;
    const model_moe_shape *moe = model_preset_moe(p);
    const uint32_t ffn = moe ? moe->expert_ffn : p->ffn_dim;
    if (p->dim % bs || ffn % bs)
        return tps_fail(err, TPS_EINVAL,
                        "model make: every matrix in %s needs dim and the FFN width multiples of "
                        "%zu, preset %s has %u and %u; use a file type (a mix falls back for "
                        "such rows as llama-quantize does)",
                        type_name(t), bs, p->name, p->dim, ffn);
    return 0;
}

static void plan_shape(make_plan *pl, const model_make_opts *o) {
    const model_preset *p = o->preset;
    const model_arch_spec *as = o->arch ? o->arch : &model_arch_specs[0];
    pl->o = o;
    pl->p = p;
    pl->as = as;
    pl->type = o->type;
    const model_moe_shape *moe = model_preset_moe(p);
    pl->hd = moe && moe->head_dim ? moe->head_dim : as->head_dim_mult * (p->dim / p->n_heads);
    pl->q_dim = p->n_heads * pl->hd;
    pl->kv = p->n_kv_heads * pl->hd;
    pl->gemma3 = as->gemma && as->qk_norm;
    pl->phi3 = !strcmp(as->gguf_arch, "phi3");
    pl->rope_base = as->llama3_rope ? 500000.0f : pl->gemma3 ? 1000000.0f : p->rope_base;
    pl->std_embd = 0.02f;
    /* Tied heads score each token by its own embedding, so with GPT-2 scale
     * layers a random model only repeats its last input; layers 4x stronger
     * make the continuation depend on the whole context. */
    pl->std = as->tied ? 4 * pl->std_embd : pl->std_embd;
    pl->proj = pl->std / sqrtf(2.0f * (float)p->n_layers);
    pl->mix = (quant_mix_model){p->n_layers, p->n_heads, p->n_kv_heads, as->tied};
}

/* The general.* keys and the architecture's hyperparameters, in the order
 * llama.cpp's converter writes them. Returns the writer's error code. */
static int set_metadata(gguf_writer *w, const make_plan *pl) {
    const model_preset *p = pl->p;
    const model_arch_spec *as = pl->as;
    char name[96];
    snprintf(name, sizeof name, "tps synthetic %s (%s shape), seed %llu", p->name, p->like,
             (unsigned long long)pl->o->seed);
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, as->gguf_arch), key)
    int rc = gguf_writer_set_str(w, "general.architecture", as->gguf_arch);
    rc = rc ? rc : gguf_writer_set_str(w, "general.name", name);
    rc = rc ? rc : gguf_writer_set_u32(w, "general.file_type", file_type_of(pl->type));
    rc = rc ? rc : gguf_writer_set_u32(w, "general.quantization_version", 2);
    rc = rc ? rc : gguf_writer_set_u32(w, "general.alignment", 32);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("vocab_size"), pl->n_vocab);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("context_length"), p->ctx_len);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("embedding_length"), p->dim);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("block_count"), p->n_layers + pl->nextn);
    /* llama's experts (Mixtral) are feed_forward_length wide */
    rc = rc ? rc
            : gguf_writer_set_u32(w, KEY("feed_forward_length"),
                                  pl->n_expert && !strcmp(as->gguf_arch, "llama") ? pl->eff
                                                                                  : p->ffn_dim);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("attention.head_count"), p->n_heads);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("attention.head_count_kv"), p->n_kv_heads);
    if (as->head_dim_mult != 1 || pl->hy) {
        rc = rc ? rc : gguf_writer_set_u32(w, KEY("attention.key_length"), pl->hd);
        rc = rc ? rc : gguf_writer_set_u32(w, KEY("attention.value_length"), pl->hd);
    }
    /* Qwen3.5 turns a quarter of each head (partial_rotary_factor 0.25), GLM-4.5 half */
    const uint32_t rope_dim = pl->hy ? pl->hd / 4 : as->glm ? pl->hd / 2 : pl->hd;
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("rope.dimension_count"), rope_dim);
    rc = rc ? rc : gguf_writer_set_f32(w, KEY("rope.freq_base"), pl->rope_base);
    rc = rc ? rc : gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-5f);
    if (as->gemma) {
        /* tiny: a window short enough for the tests to cross; else Gemma 3 1B's 512 */
        rc = rc ? rc
                : gguf_writer_set_u32(w, KEY("attention.sliding_window"),
                                      p->ctx_len <= 512 ? 8 : 512);
        rc = rc ? rc
                : gguf_writer_set_u32(w, KEY("attention.sliding_window_pattern"), as->swa_period);
    }
    if (as->gemma && !pl->gemma3) {
        rc = rc ? rc : gguf_writer_set_f32(w, KEY("attn_logit_softcapping"), 1.0f);
        rc = rc ? rc : gguf_writer_set_f32(w, KEY("final_logit_softcapping"), 2.0f);
    }
    if (pl->phi3) {
        rc = rc ? rc : gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), 256);
        rc = rc ? rc : gguf_writer_set_f32(w, KEY("rope.scaling.attn_factor"), 1.2f);
    }
    if (pl->gemma3) {
        rc = rc ? rc : gguf_writer_set_f32(w, KEY("rope.freq_base_swa"), 10000.0f);
        rc = rc ? rc : gguf_writer_set_str(w, KEY("rope.scaling.type"), "linear");
        rc = rc ? rc : gguf_writer_set_f32(w, KEY("rope.scaling.factor"), 8.0f);
    }
#undef KEY
    rc = rc ? rc : make_hybrid_metadata(w, pl);
    rc = rc ? rc : make_glm_metadata(w, pl);
    rc = rc ? rc : make_moe_metadata(w, pl);
    rc = rc ? rc : make_gemma4_metadata(w, pl); /* replaces the Llama layout's keys */
    return rc ? rc : make_mla_metadata(w, pl);  /* last: it replaces the Llama layout's keys */
}

/* Embedding, output norm and matrix, RoPE factors (llama3's computed into
 * rope_factors, (hd/2,)). */
static void plan_global_tensors(make_plan *pl, float *rope_factors) {
    const model_preset *p = pl->p;
    const uint32_t hd = pl->hd;
    make_add_gen(pl, "token_embd.weight", make_matrix_type(pl, "token_embd.weight", 0, p->dim),
                 pl->n_vocab, p->dim, pl->std_embd);
    make_add_gen(pl, "output_norm.weight", GGML_TYPE_F32, 1, p->dim, 0.0f);
    if (!pl->as->tied)
        make_add_gen(pl, "output.weight", make_matrix_type(pl, "output.weight", 0, p->dim),
                     pl->n_vocab, p->dim, pl->std_embd);
    if (pl->as->llama3_rope) {
        llama3_rope_factors(rope_factors, hd, pl->rope_base);
        make_add_gen(pl, "rope_freqs.weight", GGML_TYPE_F32, 1, hd / 2, 0.0f)->values =
            rope_factors;
    }
    if (pl->phi3) { /* LongRoPE-like factors in [1, 3]: long ones used past the original context */
        make_add_gen(pl, "rope_factors_long.weight", GGML_TYPE_F32, 1, hd / 2, 1.0f)->offset = 2.0f;
        make_add_gen(pl, "rope_factors_short.weight", GGML_TYPE_F32, 1, hd / 2, 0.05f)->offset =
            1.0f;
    }
}

/* The attention tensors of layer l, in the file's order. */
static void plan_attention_tensors(make_plan *pl, uint32_t l) {
    const model_preset *p = pl->p;
    const model_arch_spec *as = pl->as;
    const uint32_t q_dim = pl->q_dim, kv = pl->kv, hd = pl->hd;
    const float std = pl->std;
    make_add_layer_gen(pl, l, "attn_norm.weight", GGML_TYPE_F32, 1, p->dim, 0.0f);
    if (pl->phi3) {
        make_add_layer_gen(pl, l, "attn_qkv.weight",
                           make_matrix_type(pl, "attn_qkv.weight", l, p->dim), q_dim + 2 * kv,
                           p->dim, std);
    } else {
        /* a hybrid stack's Q carries each head's output gate after it */
        make_add_layer_gen(pl, l, "attn_q.weight", make_matrix_type(pl, "attn_q.weight", l, p->dim),
                           pl->hy ? 2 * q_dim : q_dim, p->dim, std);
        make_add_layer_gen(pl, l, "attn_k.weight", make_matrix_type(pl, "attn_k.weight", l, p->dim),
                           kv, p->dim, std);
        make_add_layer_gen(pl, l, "attn_v.weight", make_matrix_type(pl, "attn_v.weight", l, p->dim),
                           kv, p->dim, std);
    }
    if (as->qkv_bias) {
        /* larger than the weights so a missed bias shows in the logits */
        make_add_layer_gen(pl, l, "attn_q.bias", GGML_TYPE_F32, 1, q_dim, 0.1f);
        make_add_layer_gen(pl, l, "attn_k.bias", GGML_TYPE_F32, 1, kv, 0.1f);
        make_add_layer_gen(pl, l, "attn_v.bias", GGML_TYPE_F32, 1, kv, 0.1f);
    }
    if (as->qk_norm) { /* 1 +- 0.35: not all ones, so a missed norm weight shows */
        make_add_layer_gen(pl, l, "attn_q_norm.weight", GGML_TYPE_F32, 1, hd, 0.2f)->offset = 1.0f;
        make_add_layer_gen(pl, l, "attn_k_norm.weight", GGML_TYPE_F32, 1, hd, 0.2f)->offset = 1.0f;
    }
    make_add_layer_gen(pl, l, "attn_output.weight",
                       make_matrix_type(pl, "attn_output.weight", l, q_dim), p->dim, q_dim,
                       pl->proj);
    if (as->oai) make_plan_oai_attention(pl, l);
}

/* The feed-forward tensors of layer l (and Gemma's post-norms), in the
 * file's order. */
static void plan_ffn_tensors(make_plan *pl, uint32_t l) {
    if (pl->n_expert && l >= pl->dense_lead) {
        make_plan_moe_ffn(pl, l);
        return;
    }
    const model_preset *p = pl->p;
    const uint32_t ffn = p->ffn_dim;
    const float std = pl->std;
    /* Qwen3.5 and GLM-4.5 name their FFN's pre-norm post_attention_norm */
    make_add_layer_gen(pl, l,
                       pl->hy || pl->as->glm ? "post_attention_norm.weight" : "ffn_norm.weight",
                       GGML_TYPE_F32, 1, p->dim, 0.0f);
    if (pl->as->gemma) {
        make_add_layer_gen(pl, l, "post_attention_norm.weight", GGML_TYPE_F32, 1, p->dim, 0.2f)
            ->offset = 1.0f;
        make_add_layer_gen(pl, l, "post_ffw_norm.weight", GGML_TYPE_F32, 1, p->dim, 0.2f)->offset =
            1.0f;
    }
    if (pl->phi3) {
        make_add_layer_gen(pl, l, "ffn_up.weight", make_matrix_type(pl, "ffn_up.weight", l, p->dim),
                           2 * ffn, p->dim, std);
    } else {
        make_add_layer_gen(pl, l, "ffn_gate.weight",
                           make_matrix_type(pl, "ffn_gate.weight", l, p->dim), ffn, p->dim, std);
        make_add_layer_gen(pl, l, "ffn_up.weight", make_matrix_type(pl, "ffn_up.weight", l, p->dim),
                           ffn, p->dim, std);
    }
    make_add_layer_gen(pl, l, "ffn_down.weight", make_matrix_type(pl, "ffn_down.weight", l, ffn),
                       p->dim, ffn, pl->proj);
}

static int add_tensors(gguf_writer *w, const make_plan *pl, tps_err *err) {
    int rc = 0;
    for (size_t i = 0; i < pl->n_gens && !rc; i++) {
        tensor_gen *g = &pl->gens[i];
        uint64_t ne[3] = {g->cols, g->rows, g->n_mats};
        uint32_t nd = g->n_mats ? 3 : g->rows == 1 ? 1 : 2;
        rc = gguf_writer_add_tensor_fill(w, g->name, g->type, nd, ne, fill_tensor, g);
        if (rc)
            rc = tps_fail(err, rc, "model make: tensor %s (%u x %u) does not fit type %s blocks",
                          g->name, g->rows, g->cols, ggml_type_get(g->type)->name);
    }
    return rc;
}

int model_make(const model_make_opts *o, tps_err *err) {
    int rc = check_type(o, err);
    if (rc) return rc;
    const model_preset *p = o->preset;
    make_plan pl = {0};
    plan_shape(&pl, o);
    if ((rc = make_plan_experts(&pl, err)) || (rc = make_plan_hybrid(&pl, err))) return rc;
    pl.nextn = pl.hy ? pl.hy->nextn : pl.as->glm ? 1 : 0;
    pl.dense_lead = pl.as->glm ? 1 : 0;
    if ((rc = make_plan_mla(&pl, err)) || (rc = make_plan_gemma4(&pl, err))) return rc;
    const uint32_t n_blocks = p->n_layers + pl.nextn;
    gguf_writer *w = gguf_writer_create();
    float *rope_factors = malloc(sizeof(float) * p->dim);
    if (!w || !rope_factors) {
        gguf_writer_free(w);
        free(rope_factors);
        return tps_fail(err, TPS_ENOMEM, "model make: out of memory");
    }
    pl.n_vocab = p->n_vocab;
    rc = o->vocab_path ? copy_vocab(w, o->vocab_path, &pl.n_vocab, err)
                       : add_byte_vocab(w, pl.n_vocab, err);
    if (rc) goto done;
    if (o->chat_template &&
        (rc = gguf_writer_set_str(w, "tokenizer.chat_template", o->chat_template))) {
        rc = tps_fail(err, rc, "model make: out of memory");
        goto done;
    }
    if ((rc = set_metadata(w, &pl))) {
        rc = tps_fail(err, rc, "model make: out of memory");
        goto done;
    }
    pl.gens = calloc(MAKE_GENS_FIXED + MAKE_GENS_PER_LAYER * (size_t)n_blocks, sizeof *pl.gens);
    if (!pl.gens) {
        rc = tps_fail(err, TPS_ENOMEM, "model make: out of memory");
        goto done;
    }
    plan_global_tensors(&pl, rope_factors);
    if (pl.g4) make_plan_gemma4_globals(&pl, rope_factors);
    for (uint32_t l = 0; l < n_blocks; l++) { /* the stack, then any MTP blocks */
        if (pl.mla) {
            make_plan_mla_layer(&pl, l);
            continue;
        }
        if (pl.g4) {
            make_plan_gemma4_layer(&pl, l);
            continue;
        }
        if (make_layer_is_linear(&pl, l))
            make_plan_linear_attention(&pl, l);
        else
            plan_attention_tensors(&pl, l);
        plan_ffn_tensors(&pl, l);
        if (l >= p->n_layers) make_plan_mtp_extras(&pl, l);
    }
    if ((rc = add_tensors(w, &pl, err))) goto done;
    progress_state ps = {.path = o->out_path, .last_tenth = 0};
    if (o->progress) gguf_writer_set_progress(w, progress, &ps);
    rc = gguf_writer_write_file(w, o->out_path, err);
done:
    free(pl.gens);
    free(rope_factors);
    gguf_writer_free(w);
    return rc;
}
