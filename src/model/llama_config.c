/* Reads and cross-checks the hyperparameters of a GGUF file of one of the
 * architectures in llama_arch, under its own key prefix ("qwen2.block_count"). It checks
 * that shapes are consistent with each other; whether the tensors match them
 * is llama_weights' job. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "model/llama_config.h"

static int get_u32(const gguf_file *f, const char *arch, const char *suffix, uint32_t *out,
                   const uint32_t *dflt, tps_err *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    uint64_t v;
    int rc = gguf_get_u64(f, key, &v);
    if (rc == TPS_ENOENT && dflt) {
        *out = *dflt;
        return 0;
    }
    if (rc == TPS_ENOENT)
        return tps_fail(err, TPS_EINVAL, "model: metadata key '%s' is missing", key);
    if (rc || v > UINT32_MAX)
        return tps_fail(err, TPS_EINVAL,
                        "model: metadata key '%s' is not a count that fits 32 bits", key);
    *out = (uint32_t)v;
    return 0;
}

static const gguf_kv *gguf_find_key_of(const gguf_file *f, const char *arch, const char *suffix) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return gguf_find(f, key);
}

static int get_f32(const gguf_file *f, const char *arch, const char *suffix, float *out, float dflt,
                   tps_err *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    double v;
    int rc = gguf_get_f64(f, key, &v);
    if (rc == TPS_ENOENT) {
        *out = dflt;
        return 0;
    }
    if (rc) return tps_fail(err, TPS_EINVAL, "model: metadata key '%s' is not a float", key);
    *out = (float)v;
    return 0;
}

int llama_err_missing_tensor(tps_err *err, const char *arch, const gguf_file *f, const char *name) {
    return tps_fail(err, TPS_EINVAL,
                    "model: %s: tensor '%s' is missing (the tensor table at byte offset %zu "
                    "lists %llu tensors)",
                    arch, name, f->tensor_info_offset, (unsigned long long)f->n_tensors);
}

/* general.architecture, copied into cfg->arch and looked up in llama_arch. */
static int read_arch(llama_config *cfg, const gguf_file *f, tps_err *err) {
    gguf_str arch;
    if (gguf_get_str(f, "general.architecture", &arch))
        return tps_fail(err, TPS_EINVAL, "model: general.architecture is missing");
    if (arch.len >= sizeof cfg->arch) arch.len = sizeof cfg->arch - 1;
    memcpy(cfg->arch, arch.ptr, arch.len);
    cfg->arch[arch.len] = 0;
    cfg->arch_info = llama_arch_find(cfg->arch);
    if (!cfg->arch_info)
        return tps_fail(err, TPS_EUNSUP,
                        "model: architecture '%s' (general.architecture, byte offset %zu) is not "
                        "supported; tps runs %s",
                        cfg->arch, gguf_find(f, "general.architecture")->offset,
                        llama_arch_names());
    return 0;
}

/* Width, depth, head counts and context length. */
static int read_sizes(llama_config *cfg, const gguf_file *f, tps_err *err) {
    const char *a = cfg->arch;
    int rc;
    if ((rc = get_u32(f, a, "embedding_length", &cfg->dim, NULL, err))) return rc;
    if ((rc = get_u32(f, a, "block_count", &cfg->n_layers, NULL, err))) return rc;
    const gguf_kv *ff = gguf_find_key_of(f, a, "feed_forward_length");
    if (ff && ff->val.type == GGUF_TYPE_ARRAY && cfg->arch_info->gemma4 && ff->val.arr.n &&
        (ff->val.arr.type == GGUF_TYPE_INT32 || ff->val.arr.type == GGUF_TYPE_UINT32)) {
        memcpy(&cfg->ffn_dim, ff->val.arr.data, 4); /* per layer: read_gemma4 reads the list */
    } else if ((rc = get_u32(f, a, "feed_forward_length", &cfg->ffn_dim, NULL, err))) {
        return rc;
    }
    if ((rc = get_u32(f, a, "attention.head_count", &cfg->n_heads, NULL, err))) return rc;
    const gguf_kv *kvh = gguf_find_key_of(f, a, "attention.head_count_kv");
    if (kvh && kvh->val.type == GGUF_TYPE_ARRAY && cfg->arch_info->gemma4) {
        cfg->n_kv_heads = cfg->n_heads; /* per layer: read_gemma4 reads the list */
    } else if ((rc = get_u32(f, a, "attention.head_count_kv", &cfg->n_kv_heads, &cfg->n_heads,
                             err))) {
        return rc;
    }
    uint32_t ctx_default = 2048;
    return get_u32(f, a, "context_length", &cfg->ctx_len, &ctx_default, err);
}

/* YaRN as llama.cpp sets it up for these architectures (llama_context's
 * constructor): ext_factor 1 and yarn_attn_factor = get_mscale(factor) /
 * (1 + 0.1 ln factor) x rope.scaling.attn_factor, in the same float
 * operations. */
static float yarn_mscale(float factor, float mscale) {
    return factor <= 1.0f ? 1.0f : 0.1f * mscale * logf(factor) + 1.0f;
}

static void set_yarn(llama_config *cfg) {
    const float factor = 1.0f / cfg->rope_scale;
    float attn = yarn_mscale(factor, 1.0f);
    /* DeepSeek: get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim), llama.cpp
     * taking mscale = mscale_all_dim: exactly 1 (the attention scale carries it instead) */
    if (cfg->yarn_log_mul != 0.0f) attn = 1.0f;
    attn *= 1.0f / (1.0f + 0.1f * logf(factor));
    cfg->rope_attn_factor *= attn;
    cfg->rope_ext_factor = 1.0f;
}

/* ggml_rope_yarn_corr_dims with beta_fast 32, beta_slow 1 over rope_dim,
 * the original context and the base (needs rope_dim). */
static void set_yarn_dims(llama_config *cfg) {
    const float beta[2] = {32.0f, 1.0f};
    for (int i = 0; i < 2; i++) {
        const float d = (float)cfg->rope_dim *
                        logf((float)cfg->rope_orig_ctx / (beta[i] * 2 * (float)M_PI)) /
                        (2 * logf(cfg->rope_base));
        cfg->rope_yarn_corr[i] =
            i == 0 ? fmaxf(0.0f, floorf(d)) : fminf((float)cfg->rope_dim - 1, ceilf(d));
    }
}

/* RoPE base and scaling (linear, YaRN, or LongRoPE for phi3) and the norm epsilon. */
static int read_rope_and_norm(llama_config *cfg, const gguf_file *f, tps_err *err) {
    const char *a = cfg->arch;
    int rc;
    if ((rc = get_f32(f, a, "rope.freq_base", &cfg->rope_base, 10000.0f, err))) return rc;
    if ((rc = get_f32(f, a, "attention.layer_norm_rms_epsilon", &cfg->rms_eps, 1e-5f, err)))
        return rc;
    float factor;
    if ((rc = get_f32(f, a, "rope.scaling.factor", &factor, 0.0f, err))) return rc;
    cfg->rope_scale = factor == 0.0f ? 1.0f : 1.0f / factor;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    gguf_str st;
    const int yarn = gguf_get_str(f, key, &st) == 0 && gguf_str_eq(st, "yarn") &&
                     cfg->arch_info->id != LLAMA_ARCH_MISTRAL3;
    if (gguf_get_str(f, key, &st) == 0 && !yarn && !gguf_str_eq(st, "linear") &&
        !gguf_str_eq(st, "none") &&
        !(gguf_str_eq(st, "longrope") && cfg->arch_info->id == LLAMA_ARCH_PHI3))
        return tps_fail(err, TPS_EUNSUP,
                        "model: %s: rope.scaling.type '%.*s' is not supported (tps does linear, "
                        "YaRN but for mistral3, and LongRoPE for phi3)",
                        a, (int)(st.len > 32 ? 32 : st.len), st.ptr);
    if ((rc = get_u32(f, a, "rope.scaling.original_context_length", &cfg->rope_orig_ctx,
                      &cfg->ctx_len, err)))
        return rc;
    if ((rc = get_f32(f, a, "rope.scaling.attn_factor", &cfg->rope_attn_factor, 1.0f, err)))
        return rc;
    if (cfg->arch_info->mla) { /* the converter wrote 0.1 x mscale_all_dim: llama.cpp undoes it */
        if ((rc = get_f32(f, a, "rope.scaling.yarn_log_multiplier", &cfg->yarn_log_mul, 0.0f, err)))
            return rc;
        cfg->yarn_log_mul /= 0.1f;
    }
    if (yarn) set_yarn(cfg);
    return 0;
}

/* Architecture-specific attention: sliding-window layers and their RoPE,
 * logit soft-capping; rejects attention temperature scaling. */
static int read_attention_variant(llama_config *cfg, const gguf_file *f, tps_err *err) {
    const char *a = cfg->arch;
    int rc;
    float temp_scale;
    if ((rc = get_f32(f, a, "attention.temperature_scale", &temp_scale, 0.0f, err))) return rc;
    if (temp_scale != 0.0f)
        return tps_fail(err, TPS_EUNSUP,
                        "model: %s: attention.temperature_scale (Llama 4 style attention "
                        "temperature) is not supported",
                        a);
    const llama_arch *ai = cfg->arch_info;
    if ((rc = get_u32(f, a, "attention.sliding_window", &cfg->n_swa, &ai->swa_window, err)))
        return rc;
    const gguf_kv *pat = gguf_find_key_of(f, a, "attention.sliding_window_pattern");
    if (pat && pat->val.type == GGUF_TYPE_ARRAY && ai->gemma4) {
        cfg->swa_period = ai->swa_period; /* per layer: read_gemma4 reads the list */
    } else if ((rc = get_u32(f, a, "attention.sliding_window_pattern", &cfg->swa_period,
                             &ai->swa_period, err))) {
        return rc;
    }
    if (!ai->swa_period) cfg->n_swa = 0; /* the architecture has no local layers */
    if ((rc = get_f32(f, a, "rope.freq_base_swa", &cfg->rope_base_swa,
                      ai->rope_swa_base_10k ? 10000.0f : cfg->rope_base, err)))
        return rc;
    cfg->rope_scale_swa = ai->rope_swa_base_10k ? 1.0f : cfg->rope_scale;
    /* read where llama.cpp reads them: attention capping by Gemma 2 only,
     * final capping by both Gemmas */
    if (ai->attn_softcap > 0 &&
        (rc = get_f32(f, a, "attn_logit_softcapping", &cfg->attn_softcap, ai->attn_softcap, err)))
        return rc;
    if (ai->gemma && (rc = get_f32(f, a, "final_logit_softcapping", &cfg->final_softcap,
                                   ai->final_softcap, err)))
        return rc;
    if (cfg->attn_softcap < 0 || cfg->final_softcap < 0 || !(cfg->rope_scale > 0))
        return tps_fail(err, TPS_EINVAL,
                        "model: %s: soft-capping and rope.scaling.factor must be positive", a);
    return 0;
}

/* Cross-checks the sizes and reads the head size and RoPE width, which
 * default to values derived from them. */
static int read_head_dims(llama_config *cfg, const gguf_file *f, tps_err *err) {
    const char *a = cfg->arch;
    int rc;
    if (cfg->dim == 0 || cfg->n_layers == 0 || cfg->n_heads == 0 || cfg->n_kv_heads == 0 ||
        cfg->ffn_dim == 0 || cfg->ctx_len == 0)
        return tps_fail(err, TPS_EINVAL, "model: a dimension in the metadata is zero");
    if (cfg->dim % cfg->n_heads != 0 && !gguf_find_key_of(f, a, "attention.key_length"))
        return tps_fail(err, TPS_EINVAL,
                        "model: embedding_length %u is not a multiple of head_count %u", cfg->dim,
                        cfg->n_heads);
    if (cfg->n_heads % cfg->n_kv_heads != 0)
        return tps_fail(err, TPS_EINVAL,
                        "model: head_count %u is not a multiple of head_count_kv %u", cfg->n_heads,
                        cfg->n_kv_heads);
    uint32_t hd_default = cfg->dim / cfg->n_heads, v_len;
    if ((rc = get_u32(f, a, "attention.key_length", &cfg->head_dim, &hd_default, err))) return rc;
    if ((rc = get_u32(f, a, "attention.value_length", &v_len, &cfg->head_dim, err))) return rc;
    if (cfg->head_dim == 0 || cfg->head_dim > 4096 ||
        (v_len != cfg->head_dim && !cfg->arch_info->mla)) /* MLA: read_mla checks */
        return tps_fail(err, TPS_EUNSUP,
                        "model: %s: attention.key_length %u and value_length %u must be equal "
                        "and in 1..4096",
                        a, cfg->head_dim, v_len);
    if ((uint64_t)cfg->n_heads * cfg->head_dim > (1u << 20))
        return tps_fail(err, TPS_EINVAL, "model: %s: %u heads of %u is too wide", a, cfg->n_heads,
                        cfg->head_dim);
    if ((rc = get_u32(f, a, "rope.dimension_count", &cfg->rope_dim, &cfg->head_dim, err)))
        return rc;
    if (cfg->rope_dim > cfg->head_dim || cfg->rope_dim % 2)
        return tps_fail(err, TPS_EINVAL, "model: rope.dimension_count %u does not fit head size %u",
                        cfg->rope_dim, cfg->head_dim);
    if (cfg->head_dim % 2)
        return tps_fail(err, TPS_EINVAL, "model: head size %u is odd; RoPE needs pairs",
                        cfg->head_dim);
    return 0;
}

/* Element i of a per-layer array of 32-bit integers or bools (the caller
 * checked its type and length). */
static uint32_t arr_u32(const gguf_value *v, uint64_t i) {
    if (v->arr.type == GGUF_TYPE_BOOL) return ((const uint8_t *)v->arr.data)[i] != 0;
    uint32_t x;
    memcpy(&x, (const uint8_t *)v->arr.data + 4 * i, 4);
    return x;
}

/* A per-layer list key of Gemma 4 (bools or 32-bit counts, one a layer),
 * or NULL when the key is absent or a single value. */
static int layer_list(const gguf_file *f, const char *arch, const char *suffix, uint32_t n_layers,
                      const gguf_value **out, tps_err *err) {
    const gguf_kv *kv = gguf_find_key_of(f, arch, suffix);
    *out = NULL;
    if (!kv || kv->val.type != GGUF_TYPE_ARRAY) return 0;
    const uint32_t t = kv->val.arr.type;
    if (kv->val.arr.n != n_layers ||
        (t != GGUF_TYPE_BOOL && t != GGUF_TYPE_INT32 && t != GGUF_TYPE_UINT32))
        return tps_fail(err, TPS_EINVAL,
                        "model: %s.%s (byte offset %zu) is not a list of %u bools or counts, one "
                        "a layer",
                        arch, suffix, kv->offset, n_layers);
    *out = &kv->val;
    return 0;
}

/* Gemma 4's per-layer lists: which layers slide, and the KV heads of
 * each kind (all sliding layers alike, all global ones alike). */
static int read_gemma4_lists(llama_config *cfg, const gguf_file *f, tps_err *err) {
    const char *a = cfg->arch;
    const uint32_t L = cfg->n_layers;
    const gguf_value *pat, *kvh;
    int rc;
    if ((rc = layer_list(f, a, "attention.sliding_window_pattern", L, &pat, err)) ||
        (rc = layer_list(f, a, "attention.head_count_kv", L, &kvh, err)))
        return rc;
    if (pat && L > LLAMA_MAX_LIST_LAYERS)
        return tps_fail(err, TPS_EUNSUP, "model: %s: %u layers in a per-layer list (at most %d)", a,
                        L, LLAMA_MAX_LIST_LAYERS);
    cfg->swa_list = pat != NULL;
    for (uint32_t l = 0; pat && l < L; l++)
        if (arr_u32(pat, l)) cfg->swa_bits[l / 64] |= 1ull << (l % 64);
    uint32_t seen[2] = {0, 0}; /* KV heads of global (0) and sliding (1) layers */
    for (uint32_t l = 0; kvh && l < L; l++) {
        const uint32_t v = arr_u32(kvh, l), swa = llama_config_is_swa(cfg, l);
        if (v == 0 || cfg->n_heads % v || (seen[swa] && seen[swa] != v))
            return tps_fail(err, TPS_EUNSUP,
                            "model: %s: head_count_kv[%u] = %u: tps needs every %s layer's KV "
                            "heads alike, dividing head_count %u",
                            a, l, v, swa ? "sliding" : "global", cfg->n_heads);
        seen[swa] = v;
    }
    if (kvh) {
        cfg->n_kv_heads = seen[0] ? seen[0] : seen[1];
        cfg->n_kv_heads_swa = seen[1] ? seen[1] : seen[0];
    }
    return 0;
}

/* Gemma 4's FFN widths as a list (the converter's use_double_wide_mlp):
 * one width before the shared-KV layers, one (wider) from them on. */
static int read_gemma4_ffn(llama_config *cfg, const gguf_file *f, tps_err *err) {
    const gguf_value *ff;
    int rc = layer_list(f, cfg->arch, "feed_forward_length", cfg->n_layers, &ff, err);
    if (rc || !ff || ff->arr.type == GGUF_TYPE_BOOL) return rc;
    const uint32_t first = cfg->n_layers - cfg->n_kv_shared, wide = arr_u32(ff, cfg->n_layers - 1);
    for (uint32_t l = 0; l < cfg->n_layers; l++)
        if (arr_u32(ff, l) != (l < first ? cfg->ffn_dim : wide) || wide == 0)
            return tps_fail(err, TPS_EUNSUP,
                            "model: %s: feed_forward_length[%u] = %u: tps reads one width before "
                            "the shared KV layers and one from them on",
                            cfg->arch, l, arr_u32(ff, l));
    cfg->ffn_dim_shared = wide != cfg->ffn_dim ? wide : 0;
    return 0;
}

/* Gemma 4 (llama.cpp's gemma4.cpp load_arch_hparams): the sliding layers'
 * head size and RoPE width, the shared KV layers, the per-layer input
 * width. */
static int read_gemma4(llama_config *cfg, const gguf_file *f, tps_err *err) {
    const char *a = cfg->arch;
    const uint32_t zero = 0;
    uint32_t v_swa = 0;
    int rc;
    if ((rc = read_gemma4_lists(cfg, f, err)) ||
        (rc = get_u32(f, a, "attention.key_length_swa", &cfg->head_dim_swa, NULL, err)) ||
        (rc = get_u32(f, a, "attention.value_length_swa", &v_swa, NULL, err)) ||
        (rc = get_u32(f, a, "rope.dimension_count_swa", &cfg->rope_dim_swa, &cfg->head_dim_swa,
                      err)) ||
        (rc = get_u32(f, a, "attention.shared_kv_layers", &cfg->n_kv_shared, &zero, err)) ||
        (rc = get_u32(f, a, "embedding_length_per_layer_input", &cfg->n_embd_pl, NULL, err)))
        return rc;
    if (!cfg->n_swa)
        return tps_fail(err, TPS_EINVAL, "model: %s: attention.sliding_window is missing or 0", a);
    if (cfg->head_dim_swa == 0 || cfg->head_dim_swa > 4096 || cfg->head_dim_swa % 2 ||
        v_swa != cfg->head_dim_swa || cfg->rope_dim_swa > cfg->head_dim_swa ||
        cfg->rope_dim_swa % 2 || cfg->n_embd_pl > 65536 ||
        (cfg->n_kv_shared && cfg->n_kv_shared + 2 > cfg->n_layers))
        return tps_fail(err, TPS_EINVAL,
                        "model: %s: sliding layers' key_length_swa %u, value_length_swa %u, "
                        "rope.dimension_count_swa %u, shared_kv_layers %u of %u or "
                        "embedding_length_per_layer_input %u out of range (equal even head "
                        "sizes, RoPE within the head, 2 layers before the shared ones)",
                        a, cfg->head_dim_swa, v_swa, cfg->rope_dim_swa, cfg->n_kv_shared,
                        cfg->n_layers, cfg->n_embd_pl);
    if ((rc = read_gemma4_ffn(cfg, f, err))) return rc;
    const uint32_t first = cfg->n_layers - cfg->n_kv_shared;
    for (uint32_t l = first; cfg->n_kv_shared && l < cfg->n_layers; l++)
        if (llama_config_is_swa(cfg, llama_config_kv_source(cfg, l)) != llama_config_is_swa(cfg, l))
            return tps_fail(err, TPS_EINVAL,
                            "model: %s: shared KV layer %u reads layer %u, which is not of its "
                            "kind (the two layers before the shared ones must be sliding, then "
                            "global)",
                            a, l, llama_config_kv_source(cfg, l));
    return 0;
}

/* The vocabulary size, from the shape of the token embedding. */
static int read_vocab_size(llama_config *cfg, const gguf_file *f, tps_err *err) {
    const char *a = cfg->arch;
    const gguf_tensor *emb = gguf_find_tensor(f, "token_embd.weight");
    if (!emb) return llama_err_missing_tensor(err, a, f, "token_embd.weight");
    if (emb->n_dims != 2 || emb->ne[0] != cfg->dim || emb->ne[1] > UINT32_MAX)
        return tps_fail(err, TPS_EINVAL,
                        "model: %s: tensor 'token_embd.weight' (info at byte offset %zu) is not of "
                        "shape (%u, vocab)",
                        a, emb->info_offset, cfg->dim);
    cfg->n_vocab = (uint32_t)emb->ne[1];
    return 0;
}

/* GLM-4.5's and DeepSeek's routing as the file says it (llama.cpp's
 * expert_gating_func: 1 softmax, 2 sigmoid, 3 softmax of the top k; absent:
 * the architecture's), the weights' norm and scale, the shared experts
 * (expert_shared_count of expert_ffn each, run as one FFN) and the leading
 * dense layers. */
static int read_moe_file_rules(llama_config *cfg, const gguf_file *f, tps_err *err) {
    const char *a = cfg->arch;
    const uint32_t zero = 0;
    uint32_t fn = 0, shared = 0;
    char key[128];
    int rc;
    if ((rc = get_u32(f, a, "expert_gating_func", &fn, &zero, err)) ||
        (rc = get_u32(f, a, "expert_shared_count", &shared, NULL, err)) ||
        (rc = get_u32(f, a, "leading_dense_block_count", &cfg->n_dense_lead, &zero, err)) ||
        (rc = get_f32(f, a, "expert_weights_scale", &cfg->w_scale, 0.0f, err)))
        return rc;
    static const llama_gating by_fn[4] = {0, LLAMA_GATING_SOFTMAX, LLAMA_GATING_SIGMOID,
                                          LLAMA_GATING_SOFTMAX_WEIGHT};
    if (fn > 3)
        return tps_fail(err, TPS_EINVAL, "model: %s.expert_gating_func is %u (1..3)", a, fn);
    if (fn) cfg->gating = by_fn[fn];
    bool norm = false;
    snprintf(key, sizeof key, "%s.expert_weights_norm", a);
    rc = gguf_get_bool(f, key, &norm);
    if (rc && rc != TPS_ENOENT) return tps_fail(err, TPS_EINVAL, "model: %s is not a bool", key);
    cfg->norm_w = norm;
    if (shared > 64 || cfg->n_dense_lead > cfg->n_layers)
        return tps_fail(err, TPS_EINVAL,
                        "model: %s: expert_shared_count %u (at most 64) or "
                        "leading_dense_block_count %u (of %u blocks) out of range",
                        a, shared, cfg->n_dense_lead, cfg->n_layers);
    cfg->shexp_ffn = shared * cfg->expert_ffn;
    if (gguf_find_key_of(f, a, "rope.dimension_sections"))
        return tps_fail(err, TPS_EUNSUP,
                        "model: %s: rope.dimension_sections (M-RoPE, a vision model's text "
                        "stack) is not supported for %s",
                        a, a);
    return 0;
}

/* Experts in groups (llama.cpp reads it for every architecture): only the
 * best n_groups_used groups are chosen from. */
static int read_expert_groups(llama_config *cfg, const gguf_file *f, tps_err *err) {
    const char *a = cfg->arch;
    const uint32_t zero = 0;
    int rc;
    if ((rc = get_u32(f, a, "expert_group_count", &cfg->n_groups, &zero, err)) ||
        (rc = get_u32(f, a, "expert_group_used_count", &cfg->n_groups_used, &zero, err)))
        return rc;
    if (cfg->n_groups <= 1) return 0;
    const uint32_t per = cfg->n_expert / cfg->n_groups;
    if (cfg->n_expert % cfg->n_groups || per < 2 || cfg->n_groups_used == 0 ||
        cfg->n_groups_used > cfg->n_groups ||
        (uint64_t)cfg->n_groups_used * per < cfg->n_expert_used)
        return tps_fail(err, TPS_EINVAL,
                        "model: %s: expert_group_count %u and expert_group_used_count %u do not "
                        "fit %u experts, %u a token",
                        a, cfg->n_groups, cfg->n_groups_used, cfg->n_expert, cfg->n_expert_used);
    return 0;
}

/* The shared expert's width where the architecture has one gated expert
 * (Qwen3.5 MoE): expert_shared_feed_forward_length, else
 * feed_forward_length as llama.cpp's qwen35moe defaults it. */
static int read_gated_shared_expert(llama_config *cfg, const gguf_file *f, tps_err *err) {
    int rc = get_u32(f, cfg->arch, "expert_shared_feed_forward_length", &cfg->shexp_ffn,
                     &cfg->ffn_dim, err);
    if (rc) return rc;
    if (cfg->shexp_ffn == 0)
        return tps_fail(err, TPS_EINVAL, "model: %s: expert_shared_feed_forward_length is 0",
                        cfg->arch);
    return 0;
}

/* Expert counts and each expert's FFN width, where the architecture has
 * experts (qwen3moe, gpt-oss, qwen35moe, glm4moe) or the file gives them
 * (llama: Mixtral; gemma4: 26B-A4B, softmax routing renormalised as
 * llama.cpp's gemma4.cpp hard-codes it), and how a router's logits become
 * the k weights. */
static int read_experts(llama_config *cfg, const gguf_file *f, tps_err *err) {
    const char *a = cfg->arch;
    const llama_arch *ai = cfg->arch_info;
    const uint32_t zero = 0;
    int rc;
    if ((rc = get_u32(f, a, "expert_count", &cfg->n_expert, ai->moe ? NULL : &zero, err)))
        return rc;
    if (!cfg->n_expert) return 0;
    if (ai->id != LLAMA_ARCH_LLAMA && !ai->moe && !ai->gemma4)
        return tps_fail(err, TPS_EUNSUP,
                        "model: %s: expert_count %u: tps runs experts for llama, gemma4 and the "
                        "mixture of experts architectures only (%s)",
                        a, cfg->n_expert, llama_arch_names());
    if ((rc = get_u32(f, a, "expert_used_count", &cfg->n_expert_used, NULL, err))) return rc;
    if (cfg->n_expert > LLAMA_MAX_EXPERTS || cfg->n_expert_used == 0 ||
        cfg->n_expert_used > cfg->n_expert || cfg->n_expert_used > LLAMA_MAX_EXPERTS_USED)
        return tps_fail(err, TPS_EINVAL,
                        "model: %s: expert_count %u and expert_used_count %u: need 1 <= used <= "
                        "count, count <= %d, used <= %d",
                        a, cfg->n_expert, cfg->n_expert_used, LLAMA_MAX_EXPERTS,
                        LLAMA_MAX_EXPERTS_USED);
    cfg->gating = ai->gating;
    cfg->norm_w = ai->moe_norm_w;
    /* llama.cpp: llama's experts are feed_forward_length wide; gpt-oss and
     * gemma4 must say; the others default to feed_forward_length / used */
    const uint32_t dflt = ai->id == LLAMA_ARCH_GPT_OSS ? 0 : cfg->ffn_dim / cfg->n_expert_used;
    cfg->dense_with_experts = ai->gemma4;
    if (ai->id == LLAMA_ARCH_LLAMA) {
        cfg->expert_ffn = cfg->ffn_dim;
    } else if ((rc = get_u32(f, a, "expert_feed_forward_length", &cfg->expert_ffn,
                             ai->oai || ai->gemma4 ? NULL : &dflt, err))) {
        return rc;
    }
    if (cfg->expert_ffn == 0)
        return tps_fail(err, TPS_EINVAL, "model: %s: expert_feed_forward_length is 0", a);
    if ((rc = read_expert_groups(cfg, f, err))) return rc;
    if (ai->moe_file_rules) return read_moe_file_rules(cfg, f, err);
    return ai->shexp ? read_gated_shared_expert(cfg, f, err) : 0;
}

/* The interleaved M-RoPE sections (Qwen3.5): 4 counts of pairs, or none. */
static int read_rope_sections(llama_config *cfg, const gguf_file *f, tps_err *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", cfg->arch);
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv) return 0;
    if (kv->val.type != GGUF_TYPE_ARRAY || kv->val.arr.n < 3 || kv->val.arr.n > 4 ||
        (kv->val.arr.type != GGUF_TYPE_INT32 && kv->val.arr.type != GGUF_TYPE_UINT32))
        return tps_fail(err, TPS_EINVAL, "model: %s is not an array of 3 or 4 integers", key);
    uint32_t sum = 0;
    for (uint64_t i = 0; i < kv->val.arr.n; i++) {
        int32_t v;
        memcpy(&v, kv->val.arr.data + 4 * i, 4);
        if (v < 0 || v > 4096)
            return tps_fail(err, TPS_EINVAL, "model: %s[%llu] is %d", key, (unsigned long long)i,
                            v);
        cfg->rope_sections[i] = (uint32_t)v;
        sum += (uint32_t)v;
    }
    if (sum == 0) return tps_fail(err, TPS_EINVAL, "model: %s are all 0", key);
    return 0;
}

/* The linear-attention layers of a hybrid stack (Qwen3.5), as llama.cpp's
 * qwen35.cpp reads them, and the MTP blocks that follow the stack. */
static int read_hybrid(llama_config *cfg, const gguf_file *f, tps_err *err) {
    const char *a = cfg->arch;
    const uint32_t zero = 0, four = 4;
    uint32_t inner = 0;
    int rc;
    if ((rc = get_u32(f, a, "nextn_predict_layers", &cfg->n_nextn, &zero, err))) return rc;
    if (cfg->n_nextn >= cfg->n_layers)
        return tps_fail(err, TPS_EINVAL, "model: %s: nextn_predict_layers %u of %u blocks", a,
                        cfg->n_nextn, cfg->n_layers);
    cfg->n_layers -= cfg->n_nextn;
    if (!cfg->arch_info->hybrid) return 0;
    if (gguf_find_key_of(f, a, "attention.recurrent_layers"))
        return tps_fail(err, TPS_EUNSUP,
                        "model: %s: attention.recurrent_layers (a per-layer list) is not "
                        "supported; tps reads full_attention_interval",
                        a);
    if ((rc = get_u32(f, a, "ssm.conv_kernel", &cfg->ssm_conv, NULL, err)) ||
        (rc = get_u32(f, a, "ssm.inner_size", &inner, NULL, err)) ||
        (rc = get_u32(f, a, "ssm.state_size", &cfg->ssm_state, NULL, err)) ||
        (rc = get_u32(f, a, "ssm.time_step_rank", &cfg->ssm_v_heads, NULL, err)) ||
        (rc = get_u32(f, a, "ssm.group_count", &cfg->ssm_k_heads, NULL, err)) ||
        (rc = get_u32(f, a, "full_attention_interval", &cfg->full_attn_interval, &four, err)))
        return rc;
    if (cfg->ssm_conv < 2 || cfg->ssm_conv > 16 || cfg->ssm_state == 0 || cfg->ssm_state > 1024 ||
        cfg->ssm_k_heads == 0 || cfg->ssm_v_heads == 0 || cfg->ssm_v_heads > 1024 ||
        cfg->ssm_v_heads % cfg->ssm_k_heads ||
        (uint64_t)cfg->ssm_v_heads * cfg->ssm_state != inner || cfg->full_attn_interval == 0)
        return tps_fail(err, TPS_EINVAL,
                        "model: %s: ssm shape (conv %u, state %u, %u key heads, %u value heads, "
                        "inner %u, full attention every %u) is inconsistent: need conv 2..16, "
                        "value heads a multiple of key heads, inner = value heads x state",
                        a, cfg->ssm_conv, cfg->ssm_state, cfg->ssm_k_heads, cfg->ssm_v_heads, inner,
                        cfg->full_attn_interval);
    return read_rope_sections(cfg, f, err);
}

/* Multi-head latent attention's shape (DeepSeek-V2/V3 as llama.cpp's
 * converter writes it): key_length is the latent plus the RoPE part,
 * value_length the latent, one KV head; the decompressed head sizes. A
 * file of the older form (one attn_kv_b, no *_mla keys) is refused. */
static int read_mla(llama_config *cfg, const gguf_file *f, tps_err *err) {
    const char *a = cfg->arch;
    const uint32_t zero = 0;
    uint32_t v_len = 0;
    int rc;
    if ((rc = get_u32(f, a, "attention.q_lora_rank", &cfg->q_lora_rank, &zero, err)) ||
        (rc = get_u32(f, a, "attention.kv_lora_rank", &cfg->kv_lora_rank, NULL, err)) ||
        (rc = get_u32(f, a, "attention.value_length", &v_len, &zero, err)) ||
        (rc = get_u32(f, a, "attention.key_length_mla", &cfg->mla_k, &zero, err)) ||
        (rc = get_u32(f, a, "attention.value_length_mla", &cfg->mla_v, &zero, err)))
        return rc;
    if (!cfg->mla_k || !cfg->mla_v)
        return tps_fail(err, TPS_EUNSUP,
                        "model: %s: attention.key_length_mla / value_length_mla are missing: a "
                        "file of the older form (one attn_kv_b); convert it again with a "
                        "llama.cpp of 2025 or later",
                        a);
    if (cfg->n_kv_heads != 1 || cfg->kv_lora_rank == 0 || cfg->kv_lora_rank > 4096 ||
        cfg->head_dim != cfg->kv_lora_rank + cfg->rope_dim || v_len != cfg->kv_lora_rank ||
        cfg->mla_k <= cfg->rope_dim || cfg->mla_k > 1024 || cfg->mla_v > 1024 ||
        cfg->q_lora_rank > 16384)
        return tps_fail(err, TPS_EINVAL,
                        "model: %s: latent attention's shape is inconsistent: head_count_kv %u "
                        "(need 1), key_length %u (need kv_lora_rank %u + rope %u), value_length "
                        "%u (need kv_lora_rank), key_length_mla %u (need more than rope, at most "
                        "1024), value_length_mla %u, q_lora_rank %u",
                        a, cfg->n_kv_heads, cfg->head_dim, cfg->kv_lora_rank, cfg->rope_dim, v_len,
                        cfg->mla_k, cfg->mla_v, cfg->q_lora_rank);
    return 0;
}

/* tokenizer.ggml.suppress_tokens, after the vocabulary size it is checked
 * against: the forward pass writes -inf at each id, so an id outside the
 * logits row would be a write outside it. llama.cpp reads the array as
 * int32 ids (what gguf-py writes for Python ints) and masks them in its
 * Gemma 4 graph, the only converter that writes the key; tps masks them
 * whatever the architecture, so a file's list is never silently ignored.
 * A list as long as the vocabulary could leave no token to sample. */
static int read_suppress(llama_config *cfg, const gguf_file *f, tps_err *err) {
    const char *key = "tokenizer.ggml.suppress_tokens";
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv) return 0;
    const gguf_value *v = &kv->val;
    const int is_arr = v->type == GGUF_TYPE_ARRAY;
    if (!is_arr || (v->arr.type != GGUF_TYPE_INT32 && v->arr.type != GGUF_TYPE_UINT32))
        return tps_fail(err, TPS_EINVAL,
                        "model: %s (byte offset %zu) is %s %s, not an array of 32-bit token ids",
                        key, kv->offset, is_arr ? "an array of" : "a",
                        gguf_value_type_name(is_arr ? v->arr.type : v->type));
    if (v->arr.n >= cfg->n_vocab)
        return tps_fail(err, TPS_EINVAL,
                        "model: %s (byte offset %zu) lists %llu ids: a vocabulary of %u tokens "
                        "must keep at least one token possible",
                        key, kv->offset, (unsigned long long)v->arr.n, cfg->n_vocab);
    for (uint64_t i = 0; i < v->arr.n; i++) {
        int32_t id; /* as llama.cpp reads either type */
        memcpy(&id, v->arr.data + 4 * i, 4);
        if (id < 0 || (uint32_t)id >= cfg->n_vocab)
            return tps_fail(err, TPS_EINVAL,
                            "model: %s[%llu] = %lld (byte offset %zu) is not a token id: the "
                            "vocabulary has %u tokens (token_embd.weight's rows)",
                            key, (unsigned long long)i,
                            v->arr.type == GGUF_TYPE_UINT32 ? (long long)(uint32_t)id
                                                            : (long long)id,
                            kv->offset, cfg->n_vocab);
    }
    cfg->suppress = v->arr.n ? v->arr.data : NULL;
    cfg->n_suppress = (uint32_t)v->arr.n;
    return 0;
}

/* llama.cpp's deepseek2 default when a file does not name its gating:
 * softmax (DeepSeek-V2, V2.5), but sigmoid for GLM-4.7-Flash's shape (47
 * or 48 blocks, a vocabulary of 154880). */
static void mla_default_gating(llama_config *cfg, const gguf_file *f) {
    const gguf_tensor *emb = gguf_find_tensor(f, "token_embd.weight");
    if (gguf_find_key_of(f, cfg->arch, "expert_gating_func") || !emb) return;
    if ((cfg->n_layers == 47 || cfg->n_layers == 48) && emb->ne[1] == 154880)
        cfg->gating = LLAMA_GATING_SIGMOID;
}

int llama_config_read(llama_config *cfg, const gguf_file *f, tps_err *err) {
    memset(cfg, 0, sizeof *cfg);
    int rc;
    if ((rc = read_arch(cfg, f, err))) return rc;
    if ((rc = read_sizes(cfg, f, err))) return rc;
    if ((rc = read_rope_and_norm(cfg, f, err))) return rc;
    if ((rc = read_attention_variant(cfg, f, err))) return rc;
    if ((rc = read_head_dims(cfg, f, err))) return rc;
    cfg->head_dim_swa = cfg->head_dim;
    cfg->n_kv_heads_swa = cfg->n_kv_heads;
    cfg->rope_dim_swa = cfg->rope_dim;
    if (cfg->arch_info->gemma4 && (rc = read_gemma4(cfg, f, err))) return rc;
    if (cfg->arch_info->mla && (rc = read_mla(cfg, f, err))) return rc;
    if ((rc = read_experts(cfg, f, err))) return rc;
    if (cfg->arch_info->mla) mla_default_gating(cfg, f);
    if ((rc = read_hybrid(cfg, f, err))) return rc;
    if (cfg->rope_ext_factor != 0) set_yarn_dims(cfg);
    if ((rc = read_vocab_size(cfg, f, err))) return rc;
    return read_suppress(cfg, f, err);
}
