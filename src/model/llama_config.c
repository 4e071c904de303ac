/* Reads and cross-checks the hyperparameters of a GGUF file of one of the
 * architectures in llama_arch, under its own key prefix ("qwen2.block_count"). It checks
 * that shapes are consistent with each other; whether the tensors match them
 * is llama_weights' job. */
#include <math.h>
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
    if ((rc = get_u32(f, a, "feed_forward_length", &cfg->ffn_dim, NULL, err))) return rc;
    if ((rc = get_u32(f, a, "attention.head_count", &cfg->n_heads, NULL, err))) return rc;
    if ((rc = get_u32(f, a, "attention.head_count_kv", &cfg->n_kv_heads, &cfg->n_heads, err)))
        return rc;
    uint32_t ctx_default = 2048;
    return get_u32(f, a, "context_length", &cfg->ctx_len, &ctx_default, err);
}

/* YaRN as llama.cpp sets it up for these architectures (llama_context's
 * constructor): ext_factor 1 and yarn_attn_factor = get_mscale(factor) /
 * (1 + 0.1 ln factor) x rope.scaling.attn_factor, in the same float
 * operations. */
static void set_yarn(llama_config *cfg) {
    const float factor = 1.0f / cfg->rope_scale;
    float attn = factor <= 1.0f ? 1.0f : 0.1f * 1.0f * logf(factor) + 1.0f;
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
    if ((rc = get_u32(f, a, "attention.sliding_window_pattern", &cfg->swa_period, &ai->swa_period,
                      err)))
        return rc;
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
    if (cfg->head_dim == 0 || cfg->head_dim > 4096 || v_len != cfg->head_dim)
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

/* Expert counts and each expert's FFN width, where the architecture has
 * experts (qwen3moe, gpt-oss) or the file gives them (llama: Mixtral). */
static int read_experts(llama_config *cfg, const gguf_file *f, tps_err *err) {
    const char *a = cfg->arch;
    const uint32_t zero = 0;
    int rc;
    if ((rc = get_u32(f, a, "expert_count", &cfg->n_expert, cfg->arch_info->moe ? NULL : &zero,
                      err)))
        return rc;
    if (!cfg->n_expert) return 0;
    if (cfg->arch_info->id != LLAMA_ARCH_LLAMA && !cfg->arch_info->moe)
        return tps_fail(err, TPS_EUNSUP,
                        "model: %s: expert_count %u: tps runs experts for llama, qwen3moe and "
                        "gpt-oss only",
                        a, cfg->n_expert);
    if ((rc = get_u32(f, a, "expert_used_count", &cfg->n_expert_used, NULL, err))) return rc;
    if (cfg->n_expert > LLAMA_MAX_EXPERTS || cfg->n_expert_used == 0 ||
        cfg->n_expert_used > cfg->n_expert || cfg->n_expert_used > LLAMA_MAX_EXPERTS_USED)
        return tps_fail(err, TPS_EINVAL,
                        "model: %s: expert_count %u and expert_used_count %u: need 1 <= used <= "
                        "count, count <= %d, used <= %d",
                        a, cfg->n_expert, cfg->n_expert_used, LLAMA_MAX_EXPERTS,
                        LLAMA_MAX_EXPERTS_USED);
    /* llama.cpp: llama's experts are feed_forward_length wide; qwen3moe's
     * default to feed_forward_length / used; gpt-oss must say */
    const uint32_t dflt = cfg->arch_info->id == LLAMA_ARCH_QWEN3MOE
                              ? cfg->ffn_dim / cfg->n_expert_used
                              : cfg->ffn_dim;
    if (cfg->arch_info->id == LLAMA_ARCH_LLAMA) {
        cfg->expert_ffn = cfg->ffn_dim;
        return 0;
    }
    if ((rc = get_u32(f, a, "expert_feed_forward_length", &cfg->expert_ffn,
                      cfg->arch_info->oai ? NULL : &dflt, err)))
        return rc;
    if (cfg->expert_ffn == 0)
        return tps_fail(err, TPS_EINVAL, "model: %s: expert_feed_forward_length is 0", a);
    return 0;
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

int llama_config_read(llama_config *cfg, const gguf_file *f, tps_err *err) {
    memset(cfg, 0, sizeof *cfg);
    int rc;
    if ((rc = read_arch(cfg, f, err))) return rc;
    if ((rc = read_sizes(cfg, f, err))) return rc;
    if ((rc = read_rope_and_norm(cfg, f, err))) return rc;
    if ((rc = read_attention_variant(cfg, f, err))) return rc;
    if ((rc = read_head_dims(cfg, f, err))) return rc;
    if ((rc = read_experts(cfg, f, err))) return rc;
    if ((rc = read_hybrid(cfg, f, err))) return rc;
    if (cfg->rope_ext_factor != 0) set_yarn_dims(cfg);
    return read_vocab_size(cfg, f, err);
}
