/* Binds Llama-family tensors by their GGUF names (llama.cpp's naming) and checks
 * every shape and type before the forward pass may trust them. Computes
 * nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/huge_map.h"
#include "kernels/matmul.h" /* kernel_repack */
#include "kernels/quant.h"
#include "model/llama_weights.h"

static int check_type_and_set(llama_mat *m, const gguf_tensor *t, const char *name, uint32_t rows,
                              uint32_t cols, tps_err *err);

/* used[i]: tensor i of the file was bound (so none is left silently unread) */
static int bind_mat(llama_mat *m, const gguf_file *f, uint8_t *used, const char *arch,
                    const char *name, uint32_t rows, uint32_t cols, tps_err *err) {
    const gguf_tensor *t = gguf_find_tensor(f, name);
    if (t) used[t - f->tensors] = 1;
    if (!t) return llama_err_missing_tensor(err, arch, f, name);
    if (t->n_dims != 2 || t->ne[0] != cols || t->ne[1] != rows)
        return tps_fail(err, TPS_EINVAL,
                        "model: %s: tensor '%s' (info at byte offset %zu) has shape (%llu, %llu); "
                        "the config says (%u, %u)",
                        arch, name, t->info_offset, (unsigned long long)t->ne[0],
                        (unsigned long long)t->ne[1], cols, rows);
    return check_type_and_set(m, t, name, rows, cols, err);
}

static int check_type_and_set(llama_mat *m, const gguf_tensor *t, const char *name, uint32_t rows,
                              uint32_t cols, tps_err *err) {
    if (!kernel_type_supported(t->type) || !kernel_row_bytes(t->type, cols))
        return tps_fail(err, TPS_EUNSUP,
                        "model: unsupported tensor type %s in tensor '%s' (supported: %s, in rows "
                        "of whole blocks)",
                        ggml_type_get(t->type) ? ggml_type_get(t->type)->name : "?", name,
                        kernel_supported_names());
    *m = (llama_mat){.data = t->data, .type = t->type, .rows = rows, .cols = cols};
    return 0;
}

/* A 3-D expert tensor: n matrices of (rows, cols), ne = {cols, rows, n}. */
static int bind_experts(llama_mat *m, const gguf_file *f, uint8_t *used, const char *arch,
                        const char *name, uint32_t rows, uint32_t cols, uint32_t n, tps_err *err) {
    const gguf_tensor *t = gguf_find_tensor(f, name);
    if (t) used[t - f->tensors] = 1;
    if (!t) return llama_err_missing_tensor(err, arch, f, name);
    if (t->n_dims != 3 || t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != n)
        return tps_fail(err, TPS_EINVAL,
                        "model: %s: tensor '%s' (info at byte offset %zu) has shape (%llu, %llu, "
                        "%llu); the config says (%u, %u, %u)",
                        arch, name, t->info_offset, (unsigned long long)t->ne[0],
                        (unsigned long long)t->ne[1],
                        (unsigned long long)(t->n_dims > 2 ? t->ne[2] : 1), cols, rows, n);
    int rc = check_type_and_set(m, t, name, rows, cols, err);
    m->n_experts = n;
    return rc;
}

/* Rows [row0, row0 + n) of m: a matrix of its own (fused tensors). */
static llama_mat mat_rows(const llama_mat *m, uint32_t row0, uint32_t n) {
    llama_mat r = *m;
    r.data = (const uint8_t *)m->data + (size_t)row0 * kernel_row_bytes(m->type, m->cols);
    r.rows = n;
    return r;
}

/* Vectors (norms, biases, RoPE factors): borrowed when F32, else converted
 * into *owned_next. Optional ones (optional = 1) leave *out NULL when absent. */
static int bind_vec(const float **out, const gguf_file *f, uint8_t *used, const char *arch,
                    const char *name, uint32_t dim, uint32_t n_rows, int optional,
                    float **owned_next, tps_err *err) {
    const gguf_tensor *t = gguf_find_tensor(f, name);
    if (t) used[t - f->tensors] = 1;
    *out = NULL;
    if (!t && optional) return 0;
    if (!t) return llama_err_missing_tensor(err, arch, f, name);
    if (t->n_elements != (uint64_t)dim * n_rows || t->ne[0] != dim)
        return tps_fail(err, TPS_EINVAL,
                        "model: %s: tensor '%s' (info at byte offset %zu) has %llu elements; "
                        "expected %u x %u",
                        arch, name, t->info_offset, (unsigned long long)t->n_elements, dim, n_rows);
    if (t->type == GGML_TYPE_F32) {
        *out = t->data;
        return 0;
    }
    const size_t n = (size_t)dim * n_rows;
    if (dequantize_row(*owned_next, t->data, t->type, n) != 0)
        return tps_fail(err, TPS_EUNSUP, "model: %s: unsupported tensor type %s in tensor '%s'",
                        arch, ggml_type_get(t->type) ? ggml_type_get(t->type)->name : "?", name);
    *out = *owned_next;
    *owned_next += n;
    return 0;
}

/* What binding the tensors of one file needs at every step. */
typedef struct binder {
    const gguf_file *f;
    uint8_t *used; /* used[i]: tensor i of the file was bound */
    const char *arch;
    float *owned_next; /* where the next converted vector goes */
    char name[96];     /* the name of a layer's tensor, built by blk() */
    tps_err *err;
} binder;

/* "blk.<l>.<suffix>", in b->name (valid until the next call). */
static const char *blk(binder *b, uint32_t l, const char *suffix) {
    snprintf(b->name, sizeof b->name, "blk.%u.%s", l, suffix);
    return b->name;
}

static int mat(binder *b, llama_mat *dst, const char *name, uint32_t rows, uint32_t cols) {
    return bind_mat(dst, b->f, b->used, b->arch, name, rows, cols, b->err);
}

static int vec(binder *b, const float **dst, const char *name, uint32_t n, int optional) {
    return bind_vec(dst, b->f, b->used, b->arch, name, n, 1, optional, &b->owned_next, b->err);
}

/* (n_rows, n) per-expert vectors (expert biases), row e for expert e. */
static int vec2(binder *b, const float **dst, const char *name, uint32_t n, uint32_t n_rows) {
    return bind_vec(dst, b->f, b->used, b->arch, name, n, n_rows, 0, &b->owned_next, b->err);
}

static int experts(binder *b, llama_mat *dst, const char *name, uint32_t rows, uint32_t cols,
                   uint32_t n) {
    return bind_experts(dst, b->f, b->used, b->arch, name, rows, cols, n, b->err);
}

/* Embedding, output norm, RoPE factors and the output matrix (or the
 * embedding again when tied). */
static int bind_globals(binder *b, llama_weights *w, const llama_config *cfg) {
    int rc;
    if ((rc = mat(b, &w->token_embd, "token_embd.weight", cfg->n_vocab, cfg->dim))) return rc;
    if ((rc = vec(b, &w->out_norm, "output_norm.weight", cfg->dim, 0))) return rc;
    if ((rc = vec(b, &w->rope_freqs, "rope_freqs.weight", cfg->rope_dim / 2, 1))) return rc;
    if ((rc = vec(b, &w->rope_long, "rope_factors_long.weight", cfg->rope_dim / 2, 1))) return rc;
    if ((rc = vec(b, &w->rope_short, "rope_factors_short.weight", cfg->rope_dim / 2, 1))) return rc;
    if (gguf_find_tensor(b->f, "output.weight"))
        return mat(b, &w->output, "output.weight", cfg->n_vocab, cfg->dim);
    w->output = w->token_embd;
    w->tied = 1;
    return 0;
}

/* Q, K and V of layer l, fused (phi3) or separate, and their optional
 * biases. A hybrid stack's Q carries each head's output gate after it. */
static int bind_qkv(binder *b, llama_layer *L, const llama_config *cfg, uint32_t l) {
    uint32_t q_dim = cfg->n_heads * cfg->head_dim, kv_dim = cfg->n_kv_heads * cfg->head_dim;
    const uint32_t q_rows = cfg->arch_info->hybrid ? 2 * q_dim : q_dim;
    int rc;
    if (gguf_find_tensor(b->f, blk(b, l, "attn_qkv.weight"))) { /* Q, K, V rows in that order */
        llama_mat qkv;
        if ((rc = mat(b, &qkv, b->name, q_dim + 2 * kv_dim, cfg->dim))) return rc;
        L->wq = mat_rows(&qkv, 0, q_dim);
        L->wk = mat_rows(&qkv, q_dim, kv_dim);
        L->wv = mat_rows(&qkv, q_dim + kv_dim, kv_dim);
        if (gguf_find_tensor(b->f, blk(b, l, "attn_qkv.bias")))
            return tps_fail(b->err, TPS_EUNSUP, "model: %s: tensor '%s' is not supported", b->arch,
                            b->name);
    } else {
        if ((rc = mat(b, &L->wq, blk(b, l, "attn_q.weight"), q_rows, cfg->dim))) return rc;
        if ((rc = mat(b, &L->wk, blk(b, l, "attn_k.weight"), kv_dim, cfg->dim))) return rc;
        if ((rc = mat(b, &L->wv, blk(b, l, "attn_v.weight"), kv_dim, cfg->dim))) return rc;
    }
    const char *const bias_names[3] = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};
    const float **biases[3] = {&L->bq, &L->bk, &L->bv};
    for (int k = 0; k < 3; k++)
        if ((rc = vec(b, biases[k], blk(b, l, bias_names[k]), k == 0 ? q_dim : kv_dim, 1)))
            return rc;
    return 0;
}

/* Gate, up and down of layer l; phi3's ffn_up holds gate rows then up rows
 * (ggml_swiglu of the fused product). */
static int bind_ffn(binder *b, llama_layer *L, const llama_config *cfg, uint32_t l) {
    const uint32_t ff = llama_config_ffn_dim(cfg, l);
    int rc;
    if (cfg->arch_info->id == LLAMA_ARCH_PHI3) {
        llama_mat gu;
        if ((rc = mat(b, &gu, blk(b, l, "ffn_up.weight"), 2 * ff, cfg->dim))) return rc;
        L->w_gate = mat_rows(&gu, 0, ff);
        L->w_up = mat_rows(&gu, ff, ff);
    } else {
        if ((rc = mat(b, &L->w_gate, blk(b, l, "ffn_gate.weight"), ff, cfg->dim))) return rc;
        if ((rc = mat(b, &L->w_up, blk(b, l, "ffn_up.weight"), ff, cfg->dim))) return rc;
    }
    return mat(b, &L->w_down, blk(b, l, "ffn_down.weight"), cfg->dim, ff);
}

/* The shared expert of layer l and its gate where it has one (llama.cpp's
 * *_shexp). */
static int bind_shared_expert(binder *b, llama_layer *L, const llama_config *cfg, uint32_t l) {
    const uint32_t ff = cfg->shexp_ffn, dim = cfg->dim;
    int rc;
    if (cfg->arch_info->shexp &&
        (rc = vec(b, &L->gate_inp_shexp, blk(b, l, "ffn_gate_inp_shexp.weight"), dim, 0)))
        return rc;
    if ((rc = mat(b, &L->gate_shexp, blk(b, l, "ffn_gate_shexp.weight"), ff, dim)) ||
        (rc = mat(b, &L->up_shexp, blk(b, l, "ffn_up_shexp.weight"), ff, dim)))
        return rc;
    return mat(b, &L->down_shexp, blk(b, l, "ffn_down_shexp.weight"), dim, ff);
}

/* The router and the experts of layer l (their biases for gpt-oss), and
 * the shared expert where the architecture has one. */
static int bind_moe(binder *b, llama_layer *L, const llama_config *cfg, uint32_t l) {
    const uint32_t E = cfg->n_expert, ff = cfg->expert_ffn, dim = cfg->dim;
    int rc;
    if ((rc = mat(b, &L->gate_inp, blk(b, l, "ffn_gate_inp.weight"), E, dim))) return rc;
    if (cfg->arch_info->moe_file_rules &&
        (rc = vec(b, &L->exp_probs_b, blk(b, l, "exp_probs_b.bias"), E, 1)))
        return rc;
    if ((rc = experts(b, &L->gate_exps, blk(b, l, "ffn_gate_exps.weight"), ff, dim, E))) return rc;
    if ((rc = experts(b, &L->up_exps, blk(b, l, "ffn_up_exps.weight"), ff, dim, E))) return rc;
    if ((rc = experts(b, &L->down_exps, blk(b, l, "ffn_down_exps.weight"), dim, ff, E))) return rc;
    if (cfg->arch_info->oai) {
        if ((rc = vec(b, &L->gate_inp_b, blk(b, l, "ffn_gate_inp.bias"), E, 0))) return rc;
        if ((rc = vec2(b, &L->gate_exps_b, blk(b, l, "ffn_gate_exps.bias"), ff, E))) return rc;
        if ((rc = vec2(b, &L->up_exps_b, blk(b, l, "ffn_up_exps.bias"), ff, E))) return rc;
        if ((rc = vec2(b, &L->down_exps_b, blk(b, l, "ffn_down_exps.bias"), dim, E))) return rc;
    }
    const llama_mat *ms[3] = {&L->gate_exps, &L->up_exps, &L->down_exps};
    for (int k = 0; k < 3; k++)
        L->expert_bytes += (uint64_t)ms[k]->rows * kernel_row_bytes(ms[k]->type, ms[k]->cols);
    return cfg->shexp_ffn ? bind_shared_expert(b, L, cfg, l) : 0;
}

/* gpt-oss: attention sinks and the output projection's bias. */
static int bind_oai_attention(binder *b, llama_layer *L, const llama_config *cfg, uint32_t l) {
    int rc;
    if ((rc = vec(b, &L->sinks, blk(b, l, "attn_sinks.weight"), cfg->n_heads, 0))) return rc;
    return vec(b, &L->bo, blk(b, l, "attn_output.bias"), cfg->dim, 0);
}

/* A linear-attention layer's tensors (llama.cpp's qwen35.cpp names). */
static int bind_linear_attention(binder *b, llama_layer *L, const llama_config *cfg, uint32_t l) {
    const uint32_t dim = cfg->dim, hv = cfg->ssm_v_heads, inner = hv * cfg->ssm_state;
    const uint32_t ch = llama_config_conv_channels(cfg);
    int rc;
    if ((rc = mat(b, &L->ssm_qkv, blk(b, l, "attn_qkv.weight"), ch, dim)) ||
        (rc = mat(b, &L->ssm_gate, blk(b, l, "attn_gate.weight"), inner, dim)) ||
        (rc = vec2(b, &L->ssm_conv1d, blk(b, l, "ssm_conv1d.weight"), cfg->ssm_conv, ch)) ||
        (rc = vec(b, &L->ssm_dt, blk(b, l, "ssm_dt.bias"), hv, 0)) ||
        (rc = vec(b, &L->ssm_a, blk(b, l, "ssm_a"), hv, 0)) ||
        (rc = mat(b, &L->ssm_beta, blk(b, l, "ssm_beta.weight"), hv, dim)) ||
        (rc = mat(b, &L->ssm_alpha, blk(b, l, "ssm_alpha.weight"), hv, dim)) ||
        (rc = vec(b, &L->ssm_norm, blk(b, l, "ssm_norm.weight"), cfg->ssm_state, 0)))
        return rc;
    return mat(b, &L->ssm_out, blk(b, l, "ssm_out.weight"), dim, inner);
}

/* Multi-head latent attention's tensors of layer l (llama.cpp's
 * deepseek2: attn_k_b and attn_v_b as n_heads matrices each, bound like
 * expert tensors) and the output projection. */
static int bind_mla(binder *b, llama_layer *L, const llama_config *cfg, uint32_t l) {
    const uint32_t H = cfg->n_heads, dim = cfg->dim, kvr = cfg->kv_lora_rank;
    const uint32_t q_rows = H * cfg->mla_k, nope = cfg->mla_k - cfg->rope_dim;
    int rc;
    if (cfg->q_lora_rank) {
        const uint32_t qr = cfg->q_lora_rank;
        if ((rc = mat(b, &L->wq_a, blk(b, l, "attn_q_a.weight"), qr, dim)) ||
            (rc = vec(b, &L->q_a_norm, blk(b, l, "attn_q_a_norm.weight"), qr, 0)) ||
            (rc = mat(b, &L->wq_b, blk(b, l, "attn_q_b.weight"), q_rows, qr)))
            return rc;
    } else if ((rc = mat(b, &L->wq, blk(b, l, "attn_q.weight"), q_rows, dim))) {
        return rc;
    }
    if ((rc = mat(b, &L->wkv_a, blk(b, l, "attn_kv_a_mqa.weight"), kvr + cfg->rope_dim, dim)) ||
        (rc = vec(b, &L->kv_a_norm, blk(b, l, "attn_kv_a_norm.weight"), kvr, 0)) ||
        (rc = experts(b, &L->wk_b, blk(b, l, "attn_k_b.weight"), kvr, nope, H)) ||
        (rc = experts(b, &L->wv_b, blk(b, l, "attn_v_b.weight"), cfg->mla_v, kvr, H)))
        return rc;
    return mat(b, &L->wo, blk(b, l, "attn_output.weight"), dim, H * cfg->mla_v);
}

/* The MTP blocks after the stack (blk.n_layers ...): their tensors are
 * marked read and their bytes counted; nothing runs them yet. */
static uint64_t bind_mtp(binder *b, const llama_config *cfg) {
    uint64_t bytes = 0;
    const gguf_file *f = b->f;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        const uint32_t layer = llama_tensor_block(t->name.ptr, t->name.len);
        if (layer == UINT32_MAX || layer < cfg->n_layers ||
            layer >= (uint64_t)cfg->n_layers + cfg->n_nextn)
            continue;
        b->used[i] = 1;
        bytes += t->nbytes;
    }
    return bytes;
}

/* m bound when the file has the tensor, else left unbound. */
static int opt_mat(binder *b, llama_mat *m, const char *name, uint32_t rows, uint32_t cols) {
    return gguf_find_tensor(b->f, name) ? mat(b, m, name, rows, cols) : 0;
}

/* Gemma 4's attention of layer l (llama.cpp's gemma4.cpp): the layer's own
 * head size and KV heads; V optional; a layer reading another's K/V may
 * still carry K/V tensors, marked read and never run. */
static int bind_gemma4_attention(binder *b, llama_layer *L, const llama_config *cfg, uint32_t l) {
    const uint32_t hd = llama_config_head_dim(cfg, l), dim = cfg->dim;
    const uint32_t q_dim = cfg->n_heads * hd, kv_dim = llama_config_kv_heads(cfg, l) * hd;
    const int own = llama_config_stores_kv(cfg, l);
    llama_mat unused;
    const float *unused_v;
    int rc;
    if ((rc = mat(b, &L->wq, blk(b, l, "attn_q.weight"), q_dim, dim)) ||
        (rc = vec(b, &L->q_norm, blk(b, l, "attn_q_norm.weight"), hd, 0)))
        return rc;
    if (own && ((rc = mat(b, &L->wk, blk(b, l, "attn_k.weight"), kv_dim, dim)) ||
                (rc = opt_mat(b, &L->wv, blk(b, l, "attn_v.weight"), kv_dim, dim)) ||
                (rc = vec(b, &L->k_norm, blk(b, l, "attn_k_norm.weight"), hd, 0))))
        return rc;
    if (!own && ((rc = opt_mat(b, &unused, blk(b, l, "attn_k.weight"), kv_dim, dim)) ||
                 (rc = opt_mat(b, &unused, blk(b, l, "attn_v.weight"), kv_dim, dim)) ||
                 (rc = vec(b, &unused_v, blk(b, l, "attn_k_norm.weight"), hd, 1))))
        return rc;
    if ((rc = mat(b, &L->wo, blk(b, l, "attn_output.weight"), dim, q_dim)) ||
        (rc = vec(b, &L->attn_post_norm, blk(b, l, "post_attention_norm.weight"), dim, 0)) ||
        (rc = vec(b, &L->ffn_post_norm, blk(b, l, "post_ffw_norm.weight"), dim, 0)) ||
        (rc = vec(b, &L->out_scale, blk(b, l, "layer_output_scale.weight"), 1, 1)))
        return rc;
    if (!cfg->n_embd_pl) return 0;
    if ((rc = mat(b, &L->ple_gate, blk(b, l, "inp_gate.weight"), cfg->n_embd_pl, dim)) ||
        (rc = mat(b, &L->ple_proj, blk(b, l, "proj.weight"), dim, cfg->n_embd_pl)))
        return rc;
    return vec(b, &L->ple_post_norm, blk(b, l, "post_norm.weight"), dim, 0);
}

/* Gemma 4's per-layer input embeddings (the E2B/E4B files). */
static int bind_gemma4_globals(binder *b, llama_weights *w, const llama_config *cfg) {
    if (!cfg->n_embd_pl) return 0;
    const uint32_t n = cfg->n_layers * cfg->n_embd_pl;
    int rc;
    if ((rc = mat(b, &w->ple_embd, "per_layer_token_embd.weight", cfg->n_vocab, n)) ||
        (rc = mat(b, &w->ple_model_proj, "per_layer_model_proj.weight", n, cfg->dim)))
        return rc;
    return vec(b, &w->ple_proj_norm, "per_layer_proj_norm.weight", cfg->n_embd_pl, 0);
}

/* Gemma 4's experts of layer l (llama.cpp's gemma4.cpp): the router and
 * its input scale, the norms of the two halves, the experts' gate and up
 * fused (as the converter writes them) or apart, each expert's output
 * scale where the file has it. */
static int bind_gemma4_moe(binder *b, llama_layer *L, const llama_config *cfg, uint32_t l) {
    const uint32_t E = cfg->n_expert, ff = cfg->expert_ffn, dim = cfg->dim;
    int rc;
    if ((rc = mat(b, &L->gate_inp, blk(b, l, "ffn_gate_inp.weight"), E, dim)) ||
        (rc = vec(b, &L->gate_inp_s, blk(b, l, "ffn_gate_inp.scale"), dim, 0)) ||
        (rc = vec(b, &L->ffn_pre_norm_2, blk(b, l, "pre_ffw_norm_2.weight"), dim, 0)) ||
        (rc = vec(b, &L->ffn_post_norm_1, blk(b, l, "post_ffw_norm_1.weight"), dim, 0)) ||
        (rc = vec(b, &L->ffn_post_norm_2, blk(b, l, "post_ffw_norm_2.weight"), dim, 0)))
        return rc;
    if (gguf_find_tensor(b->f, blk(b, l, "ffn_gate_up_exps.weight")))
        rc = experts(b, &L->gate_up_exps, b->name, 2 * ff, dim, E);
    else if (!(rc = experts(b, &L->gate_exps, blk(b, l, "ffn_gate_exps.weight"), ff, dim, E)))
        rc = experts(b, &L->up_exps, blk(b, l, "ffn_up_exps.weight"), ff, dim, E);
    if (rc || (rc = experts(b, &L->down_exps, blk(b, l, "ffn_down_exps.weight"), dim, ff, E)) ||
        (rc = vec(b, &L->down_exps_s, blk(b, l, "ffn_down_exps.scale"), E, 1)))
        return rc;
    const llama_mat *ms[4] = {&L->gate_up_exps, &L->gate_exps, &L->up_exps, &L->down_exps};
    for (int k = 0; k < 4; k++)
        if (ms[k]->data)
            L->expert_bytes += (uint64_t)ms[k]->rows * kernel_row_bytes(ms[k]->type, ms[k]->cols);
    return 0;
}

static int bind_layer(binder *b, llama_layer *L, const llama_config *cfg, uint32_t l) {
    uint32_t q_dim = cfg->n_heads * cfg->head_dim;
    int rc;
    if ((rc = vec(b, &L->attn_norm, blk(b, l, "attn_norm.weight"), cfg->dim, 0))) return rc;
    /* gpt-oss, Qwen3.5 and GLM-4.5 name their FFN's pre-norm post_attention_norm */
    const int post =
        cfg->arch_info->oai || cfg->arch_info->hybrid || cfg->arch_info->id == LLAMA_ARCH_GLM4MOE;
    if ((rc = vec(b, &L->ffn_norm,
                  blk(b, l, post ? "post_attention_norm.weight" : "ffn_norm.weight"), cfg->dim, 0)))
        return rc;
    if (llama_config_is_recurrent(cfg, l)) {
        if ((rc = bind_linear_attention(b, L, cfg, l))) return rc;
        return llama_config_is_moe(cfg, l) ? bind_moe(b, L, cfg, l) : bind_ffn(b, L, cfg, l);
    }
    if (cfg->kv_lora_rank) {
        if ((rc = bind_mla(b, L, cfg, l))) return rc;
        return llama_config_is_moe(cfg, l) ? bind_moe(b, L, cfg, l) : bind_ffn(b, L, cfg, l);
    }
    if (cfg->arch_info->gemma4) {
        if ((rc = bind_gemma4_attention(b, L, cfg, l)) || (rc = bind_ffn(b, L, cfg, l))) return rc;
        return llama_config_is_moe(cfg, l) ? bind_gemma4_moe(b, L, cfg, l) : 0;
    }
    if (cfg->arch_info->oai && (rc = bind_oai_attention(b, L, cfg, l))) return rc;
    if ((rc = bind_qkv(b, L, cfg, l))) return rc;
    if (cfg->arch_info->qk_norm || cfg->arch_info->qk_norm_opt) {
        const int opt = !cfg->arch_info->qk_norm;
        if ((rc = vec(b, &L->q_norm, blk(b, l, "attn_q_norm.weight"), cfg->head_dim, opt)))
            return rc;
        if ((rc = vec(b, &L->k_norm, blk(b, l, "attn_k_norm.weight"), cfg->head_dim, opt)))
            return rc;
    }
    if (cfg->arch_info->gemma) {
        if ((rc = vec(b, &L->attn_post_norm, blk(b, l, "post_attention_norm.weight"), cfg->dim, 0)))
            return rc;
        if ((rc = vec(b, &L->ffn_post_norm, blk(b, l, "post_ffw_norm.weight"), cfg->dim, 0)))
            return rc;
    }
    if ((rc = mat(b, &L->wo, blk(b, l, "attn_output.weight"), cfg->dim, q_dim))) return rc;
    return llama_config_is_moe(cfg, l) ? bind_moe(b, L, cfg, l) : bind_ffn(b, L, cfg, l);
}

/* Bytes of the layer's matrices a token reads whatever its experts: all
 * of a dense layer's; a MoE layer's attention, router and shared expert. */
static uint64_t layer_bytes(const llama_layer *L) {
    const llama_mat *ms[] = {
        &L->wq,      &L->wk,         &L->wv,       &L->wo,         &L->w_gate,   &L->w_up,
        &L->w_down,  &L->gate_inp,   &L->ssm_qkv,  &L->ssm_gate,   &L->ssm_beta, &L->ssm_alpha,
        &L->ssm_out, &L->gate_shexp, &L->up_shexp, &L->down_shexp, &L->wq_a,     &L->wq_b,
        &L->wkv_a,   &L->wk_b,       &L->wv_b,     &L->ple_gate,   &L->ple_proj};
    uint64_t bytes = 0;
    for (size_t k = 0; k < sizeof ms / sizeof ms[0]; k++)
        if (ms[k]->data) /* MLA's per-head tensors: every head's matrix */
            bytes += (uint64_t)ms[k]->rows * kernel_row_bytes(ms[k]->type, ms[k]->cols) *
                     (ms[k]->n_experts ? ms[k]->n_experts : 1);
    return bytes;
}

/* Elements of every tensor, and of those a token uses: all but the
 * experts it was not routed to (the embeddings counted whole, as model
 * cards count "active" parameters). */
static void count_params(llama_weights *w, const llama_config *c, const gguf_file *f) {
    uint64_t experts = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        w->params_total += t->n_elements;
        const int exps = t->name.len > 10 && memmem(t->name.ptr, t->name.len, "_exps.", 6);
        if (c->n_expert && exps) experts += t->n_elements;
    }
    w->params_active = w->params_total;
    if (c->n_expert) w->params_active -= experts - experts / c->n_expert * c->n_expert_used;
}

/* A tensor tps does not read (an output bias, an FFN bias...) would be
 * computed without: refuse, as llama.cpp does for unused tensors. */
static int check_all_used(const binder *b) {
    const gguf_file *f = b->f;
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (!b->used[i]) {
            const gguf_tensor *t = &f->tensors[i];
            return tps_fail(b->err, TPS_EUNSUP,
                            "model: %s: tensor '%.*s' (info at byte offset %zu) is not used by "
                            "tps's %s; refusing to run the model without it",
                            b->arch, (int)(t->name.len > 96 ? 96 : t->name.len), t->name.ptr,
                            t->info_offset, b->arch);
        }
    return 0;
}

static int bind_all(binder *b, llama_weights *w, const llama_config *cfg) {
    int rc;
    if ((rc = bind_globals(b, w, cfg))) return rc;
    if (cfg->arch_info->gemma4 && (rc = bind_gemma4_globals(b, w, cfg))) return rc;
    uint64_t bytes = kernel_row_bytes(w->token_embd.type, cfg->dim), experts = 0, all = 0;
    if (w->ple_embd.data) /* one row of the per-layer inputs, and their projection */
        bytes += kernel_row_bytes(w->ple_embd.type, w->ple_embd.cols) +
                 (uint64_t)w->ple_model_proj.rows *
                     kernel_row_bytes(w->ple_model_proj.type, w->ple_model_proj.cols);
    for (uint32_t l = 0; l < cfg->n_layers; l++) {
        if ((rc = bind_layer(b, &w->layers[l], cfg, l))) return rc;
        bytes += layer_bytes(&w->layers[l]);
        experts += w->layers[l].expert_bytes;
    }
    bytes += (uint64_t)cfg->n_vocab * kernel_row_bytes(w->output.type, cfg->dim);
    w->mtp_bytes = bind_mtp(b, cfg);
    w->bytes_dense = bytes;
    w->bytes_per_token = bytes + experts * cfg->n_expert_used;
    all = bytes - kernel_row_bytes(w->token_embd.type, cfg->dim) + experts * cfg->n_expert;
    w->bytes_total =
        all + w->mtp_bytes +
        (w->tied ? 0 : (uint64_t)cfg->n_vocab * kernel_row_bytes(w->token_embd.type, cfg->dim));
    if (w->ple_embd.data) /* the whole per-layer table, not the one row a token reads */
        w->bytes_total +=
            (uint64_t)(cfg->n_vocab - 1) * kernel_row_bytes(w->ple_embd.type, w->ple_embd.cols);
    count_params(w, cfg, b->f);
    return check_all_used(b);
}

int llama_weights_bind(llama_weights *w, const llama_config *cfg, const gguf_file *f,
                       tps_err *err) {
    memset(w, 0, sizeof *w);
    uint32_t q_dim = cfg->n_heads * cfg->head_dim, kv_dim = cfg->n_kv_heads * cfg->head_dim;
    w->layers = calloc(cfg->n_layers, sizeof *w->layers);
    /* room for every vector converted: norms, biases, Q/K norms, RoPE
     * factors, sinks, the router's and the experts' biases */
    const size_t per_layer =
        5 * (size_t)cfg->dim + q_dim + 2 * (size_t)kv_dim + 2 * cfg->head_dim + cfg->n_heads +
        cfg->n_expert +
        (cfg->arch_info->oai ? (size_t)cfg->n_expert * (1 + 2 * (size_t)cfg->expert_ffn + cfg->dim)
                             : 0) +
        (cfg->arch_info->hybrid ? (size_t)llama_config_conv_channels(cfg) * cfg->ssm_conv +
                                      3 * (size_t)cfg->ssm_v_heads + cfg->ssm_state
                                : 0) +
        (cfg->arch_info->gemma4 ? 2 * (size_t)cfg->head_dim_swa + cfg->n_embd_pl + cfg->dim + 1
                                : 0) +
        (cfg->dense_with_experts ? 4 * (size_t)cfg->dim + cfg->n_expert : 0);
    w->owned =
        malloc(sizeof(float) * (per_layer * cfg->n_layers + cfg->dim + 3 * (cfg->rope_dim / 2)));
    uint8_t *used = calloc(f->n_tensors ? f->n_tensors : 1, 1);
    if (!w->layers || !w->owned || !used) {
        free(used);
        llama_weights_free(w);
        return tps_fail(err, TPS_ENOMEM, "model: out of memory");
    }
    binder b = {.f = f, .used = used, .arch = cfg->arch, .owned_next = w->owned, .err = err};
    int rc = bind_all(&b, w, cfg);
    free(used);
    if (rc) llama_weights_free(w);
    return rc;
}

#define MATS_PER_LAYER 22

static size_t all_mats(llama_weights *w, const llama_config *cfg, llama_mat **ms, size_t cap) {
    size_t n = 0;
    for (uint32_t l = 0; l < cfg->n_layers; l++) {
        llama_layer *L = &w->layers[l];
        llama_mat *lm[MATS_PER_LAYER] = {
            &L->wq,      &L->wk,         &L->wv,       &L->wo,          &L->w_gate,  &L->w_up,
            &L->w_down,  &L->gate_exps,  &L->up_exps,  &L->down_exps,   &L->ssm_qkv, &L->ssm_gate,
            &L->ssm_out, &L->gate_shexp, &L->up_shexp, &L->down_shexp,  &L->wq_a,    &L->wq_b,
            &L->wkv_a,   &L->wk_b,       &L->wv_b,     &L->gate_up_exps};
        for (size_t k = 0; k < MATS_PER_LAYER && n < cap; k++)
            if (lm[k]->data && (lm[k] != &L->gate_up_exps || lm[k]->rows % 16 == 0))
                ms[n++] = lm[k]; /* fused gate|up: each half whole 8-row groups (moe.c splits) */
    }
    if (n < cap) ms[n++] = &w->output;
    return n;
}

static int repackable(const llama_mat *m) {
    return kernel_packed_type(m->type) && m->rows % 8 == 0 && kernel_row_bytes(m->type, m->cols);
}

/* Bytes of the matrix (all its experts). */
static size_t mat_bytes(const llama_mat *m) {
    return (size_t)(m->n_experts ? m->n_experts : 1) * m->rows * kernel_row_bytes(m->type, m->cols);
}

/* The file pages of m, never read again once it is repacked; a tied
 * output shares token_embd's rows, which lookups still read. */
static size_t release_mat(const llama_weights *w, const llama_mat *m, const gguf_file *f) {
    if (!f || !m->packed || m->data == w->token_embd.data) return 0;
    return gguf_release_pages(f, m->data, mat_bytes(m));
}

/* Repacks every repackable matrix, in file order, into buf; with f, gives
 * back each one's file pages as soon as its copy is made. */
static void repack_into(llama_weights *w, llama_mat **ms, size_t n, uint8_t *buf,
                        const gguf_file *f) {
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        llama_mat *m = ms[i];
        if (!repackable(m)) continue;
        const size_t one = (size_t)m->rows * kernel_row_bytes(m->type, m->cols);
        const uint32_t n_mats = m->n_experts ? m->n_experts : 1;
        /* cannot fail: type, rows and cols were checked by repackable() */
        for (uint32_t e = 0; e < n_mats; e++)
            (void)kernel_repack(buf + off + e * one, (const uint8_t *)m->data + e * one, m->type,
                                m->rows, m->cols);
        m->packed = buf + off;
        w->released_bytes += release_mat(w, m, f);
        off += (mat_bytes(m) + 63) / 64 * 64;
    }
}

int llama_weights_repack_file(llama_weights *w, const llama_config *cfg, const gguf_file *f,
                              tps_err *err) {
    const size_t cap = (size_t)cfg->n_layers * MATS_PER_LAYER + 1;
    llama_mat **ms = malloc(cap * sizeof *ms);
    if (!ms) return tps_fail(err, TPS_ENOMEM, "model: out of memory for repacking");
    const size_t n = all_mats(w, cfg, ms, cap);
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        if (repackable(ms[i])) total += (mat_bytes(ms[i]) + 63) / 64 * 64;
    if (total == 0) {
        free(ms);
        return 0;
    }
    uint8_t *buf = huge_map(total); /* streamed every token: huge pages, no TLB miss per 4 KiB */
    if (!buf) {
        free(ms);
        return tps_fail(err, TPS_ENOMEM, "model: cannot allocate %zu MiB for repacked weights",
                        total >> 20);
    }
    repack_into(w, ms, n, buf, f);
    huge_unmap(w->packed, w->packed_bytes);
    w->packed = buf;
    w->packed_bytes = total;
    free(ms);
    return 0;
}

int llama_weights_repack(llama_weights *w, const llama_config *cfg, tps_err *err) {
    return llama_weights_repack_file(w, cfg, NULL, err);
}

void llama_weights_free(llama_weights *w) {
    free(w->layers);
    free(w->owned);
    huge_unmap(w->packed, w->packed_bytes);
    w->layers = NULL;
    w->owned = NULL;
    w->packed = NULL;
}
