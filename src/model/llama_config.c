/* Reads and cross-checks the Llama hyperparameters of a GGUF file. It checks
 * that shapes are consistent with each other; whether the tensors match them
 * is llama_weights' job. */
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

int llama_config_read(llama_config *cfg, const gguf_file *f, tps_err *err) {
    memset(cfg, 0, sizeof *cfg);
    gguf_str arch;
    if (gguf_get_str(f, "general.architecture", &arch))
        return tps_fail(err, TPS_EINVAL, "model: general.architecture is missing");
    if (arch.len >= sizeof cfg->arch) arch.len = sizeof cfg->arch - 1;
    memcpy(cfg->arch, arch.ptr, arch.len);
    cfg->arch[arch.len] = 0;
    if (strcmp(cfg->arch, "llama") != 0)
        return tps_fail(err, TPS_EUNSUP,
                        "model: architecture '%s' is not supported (tps runs 'llama')", cfg->arch);
    const char *a = cfg->arch;
    int rc;
    if ((rc = get_u32(f, a, "embedding_length", &cfg->dim, NULL, err))) return rc;
    if ((rc = get_u32(f, a, "block_count", &cfg->n_layers, NULL, err))) return rc;
    if ((rc = get_u32(f, a, "feed_forward_length", &cfg->ffn_dim, NULL, err))) return rc;
    if ((rc = get_u32(f, a, "attention.head_count", &cfg->n_heads, NULL, err))) return rc;
    if ((rc = get_u32(f, a, "attention.head_count_kv", &cfg->n_kv_heads, &cfg->n_heads, err)))
        return rc;
    uint32_t ctx_default = 2048;
    if ((rc = get_u32(f, a, "context_length", &cfg->ctx_len, &ctx_default, err))) return rc;
    if ((rc = get_f32(f, a, "rope.freq_base", &cfg->rope_base, 10000.0f, err))) return rc;
    if ((rc = get_f32(f, a, "attention.layer_norm_rms_epsilon", &cfg->rms_eps, 1e-5f, err)))
        return rc;
    if (cfg->dim == 0 || cfg->n_layers == 0 || cfg->n_heads == 0 || cfg->n_kv_heads == 0 ||
        cfg->ffn_dim == 0 || cfg->ctx_len == 0)
        return tps_fail(err, TPS_EINVAL, "model: a dimension in the metadata is zero");
    if (cfg->dim % cfg->n_heads != 0)
        return tps_fail(err, TPS_EINVAL,
                        "model: embedding_length %u is not a multiple of head_count %u", cfg->dim,
                        cfg->n_heads);
    if (cfg->n_heads % cfg->n_kv_heads != 0)
        return tps_fail(err, TPS_EINVAL,
                        "model: head_count %u is not a multiple of head_count_kv %u", cfg->n_heads,
                        cfg->n_kv_heads);
    cfg->head_dim = cfg->dim / cfg->n_heads;
    if ((rc = get_u32(f, a, "rope.dimension_count", &cfg->rope_dim, &cfg->head_dim, err)))
        return rc;
    if (cfg->rope_dim > cfg->head_dim || cfg->rope_dim % 2)
        return tps_fail(err, TPS_EINVAL, "model: rope.dimension_count %u does not fit head size %u",
                        cfg->rope_dim, cfg->head_dim);
    if (cfg->head_dim % 2)
        return tps_fail(err, TPS_EINVAL, "model: head size %u is odd; RoPE needs pairs",
                        cfg->head_dim);
    const gguf_tensor *emb = gguf_find_tensor(f, "token_embd.weight");
    if (!emb || emb->n_dims != 2 || emb->ne[0] != cfg->dim || emb->ne[1] > UINT32_MAX)
        return tps_fail(err, TPS_EINVAL,
                        "model: tensor token_embd.weight is missing or not of shape (%u, vocab)",
                        cfg->dim);
    cfg->n_vocab = (uint32_t)emb->ne[1];
    return 0;
}
