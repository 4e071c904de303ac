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
    if (!kernel_type_supported(t->type))
        return tps_fail(err, TPS_EUNSUP,
                        "model: unsupported tensor type %s in tensor '%s' (supported: f32, f16, "
                        "bf16, q8_0, q4_0, q4_k, q6_k)",
                        ggml_type_get(t->type)->name, name);
    *m = (llama_mat){.data = t->data, .type = t->type, .rows = rows, .cols = cols};
    return 0;
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
                    const char *name, uint32_t dim, int optional, float **owned_next,
                    tps_err *err) {
    const gguf_tensor *t = gguf_find_tensor(f, name);
    if (t) used[t - f->tensors] = 1;
    *out = NULL;
    if (!t && optional) return 0;
    if (!t) return llama_err_missing_tensor(err, arch, f, name);
    if (t->n_elements != dim || t->ne[0] != dim)
        return tps_fail(err, TPS_EINVAL,
                        "model: %s: tensor '%s' (info at byte offset %zu) has %llu elements; "
                        "expected %u",
                        arch, name, t->info_offset, (unsigned long long)t->n_elements, dim);
    if (t->type == GGML_TYPE_F32) {
        *out = t->data;
        return 0;
    }
    if (dequantize_row(*owned_next, t->data, t->type, dim) != 0)
        return tps_fail(err, TPS_EUNSUP, "model: %s: unsupported tensor type %s in tensor '%s'",
                        arch, ggml_type_get(t->type)->name, name);
    *out = *owned_next;
    *owned_next += dim;
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
    return bind_vec(dst, b->f, b->used, b->arch, name, n, optional, &b->owned_next, b->err);
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

/* Q, K and V of layer l, fused (phi3) or separate, and their optional biases. */
static int bind_qkv(binder *b, llama_layer *L, const llama_config *cfg, uint32_t l) {
    uint32_t q_dim = cfg->n_heads * cfg->head_dim, kv_dim = cfg->n_kv_heads * cfg->head_dim;
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
        if ((rc = mat(b, &L->wq, blk(b, l, "attn_q.weight"), q_dim, cfg->dim))) return rc;
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
    int rc;
    if (cfg->arch_info->id == LLAMA_ARCH_PHI3) {
        llama_mat gu;
        if ((rc = mat(b, &gu, blk(b, l, "ffn_up.weight"), 2 * cfg->ffn_dim, cfg->dim))) return rc;
        L->w_gate = mat_rows(&gu, 0, cfg->ffn_dim);
        L->w_up = mat_rows(&gu, cfg->ffn_dim, cfg->ffn_dim);
    } else {
        if ((rc = mat(b, &L->w_gate, blk(b, l, "ffn_gate.weight"), cfg->ffn_dim, cfg->dim)))
            return rc;
        if ((rc = mat(b, &L->w_up, blk(b, l, "ffn_up.weight"), cfg->ffn_dim, cfg->dim))) return rc;
    }
    return mat(b, &L->w_down, blk(b, l, "ffn_down.weight"), cfg->dim, cfg->ffn_dim);
}

static int bind_layer(binder *b, llama_layer *L, const llama_config *cfg, uint32_t l) {
    uint32_t q_dim = cfg->n_heads * cfg->head_dim;
    int rc;
    if ((rc = vec(b, &L->attn_norm, blk(b, l, "attn_norm.weight"), cfg->dim, 0))) return rc;
    if ((rc = vec(b, &L->ffn_norm, blk(b, l, "ffn_norm.weight"), cfg->dim, 0))) return rc;
    if ((rc = bind_qkv(b, L, cfg, l))) return rc;
    if (cfg->arch_info->qk_norm) {
        if ((rc = vec(b, &L->q_norm, blk(b, l, "attn_q_norm.weight"), cfg->head_dim, 0))) return rc;
        if ((rc = vec(b, &L->k_norm, blk(b, l, "attn_k_norm.weight"), cfg->head_dim, 0))) return rc;
    }
    if (cfg->arch_info->gemma) {
        if ((rc = vec(b, &L->attn_post_norm, blk(b, l, "post_attention_norm.weight"), cfg->dim, 0)))
            return rc;
        if ((rc = vec(b, &L->ffn_post_norm, blk(b, l, "post_ffw_norm.weight"), cfg->dim, 0)))
            return rc;
    }
    if ((rc = mat(b, &L->wo, blk(b, l, "attn_output.weight"), cfg->dim, q_dim))) return rc;
    return bind_ffn(b, L, cfg, l);
}

/* Bytes of the layer's matrices, all read once per token. */
static uint64_t layer_bytes(const llama_layer *L) {
    const llama_mat *ms[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
    uint64_t bytes = 0;
    for (size_t k = 0; k < sizeof ms / sizeof ms[0]; k++)
        bytes += (uint64_t)ms[k]->rows * kernel_row_bytes(ms[k]->type, ms[k]->cols);
    return bytes;
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
    uint64_t bytes = kernel_row_bytes(w->token_embd.type, cfg->dim);
    for (uint32_t l = 0; l < cfg->n_layers; l++) {
        if ((rc = bind_layer(b, &w->layers[l], cfg, l))) return rc;
        bytes += layer_bytes(&w->layers[l]);
    }
    bytes += (uint64_t)cfg->n_vocab * kernel_row_bytes(w->output.type, cfg->dim);
    w->bytes_per_token = bytes;
    return check_all_used(b);
}

int llama_weights_bind(llama_weights *w, const llama_config *cfg, const gguf_file *f,
                       tps_err *err) {
    memset(w, 0, sizeof *w);
    uint32_t q_dim = cfg->n_heads * cfg->head_dim, kv_dim = cfg->n_kv_heads * cfg->head_dim;
    w->layers = calloc(cfg->n_layers, sizeof *w->layers);
    /* room for every vector converted: norms, biases, Q/K norms, RoPE factors */
    const size_t per_layer = 4 * (size_t)cfg->dim + q_dim + 2 * (size_t)kv_dim + 2 * cfg->head_dim;
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

static size_t all_mats(llama_weights *w, const llama_config *cfg, llama_mat **ms, size_t cap) {
    size_t n = 0;
    for (uint32_t l = 0; l < cfg->n_layers; l++) {
        llama_layer *L = &w->layers[l];
        llama_mat *lm[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t k = 0; k < sizeof lm / sizeof lm[0] && n < cap; k++)
            ms[n++] = lm[k];
    }
    if (n < cap) ms[n++] = &w->output;
    return n;
}

static int repackable(const llama_mat *m) {
    return kernel_packed_type(m->type) && m->rows % 8 == 0 && kernel_row_bytes(m->type, m->cols);
}

int llama_weights_repack(llama_weights *w, const llama_config *cfg, tps_err *err) {
    const size_t cap = (size_t)cfg->n_layers * 7 + 1;
    llama_mat **ms = malloc(cap * sizeof *ms);
    if (!ms) return tps_fail(err, TPS_ENOMEM, "model: out of memory for repacking");
    const size_t n = all_mats(w, cfg, ms, cap);
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        if (repackable(ms[i]))
            total +=
                ((size_t)ms[i]->rows * kernel_row_bytes(ms[i]->type, ms[i]->cols) + 63) / 64 * 64;
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
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        llama_mat *m = ms[i];
        if (!repackable(m)) continue;
        const size_t bytes = (size_t)m->rows * kernel_row_bytes(m->type, m->cols);
        /* cannot fail: type, rows and cols were checked by repackable() */
        (void)kernel_repack(buf + off, m->data, m->type, m->rows, m->cols);
        m->packed = buf + off;
        off += (bytes + 63) / 64 * 64;
    }
    huge_unmap(w->packed, w->packed_bytes);
    w->packed = buf;
    w->packed_bytes = total;
    free(ms);
    return 0;
}

size_t llama_weights_release_file_pages(llama_weights *w, const llama_config *cfg,
                                        const gguf_file *f) {
    const size_t cap = (size_t)cfg->n_layers * 7 + 1;
    llama_mat **ms = malloc(cap * sizeof *ms);
    if (!ms) return 0; /* the pages stay: memory, not correctness */
    const size_t n = all_mats(w, cfg, ms, cap);
    for (size_t i = 0; i < n; i++) {
        const llama_mat *m = ms[i];
        /* a tied output shares token_embd's rows, which lookups still read */
        if (!m->packed || m->data == w->token_embd.data) continue;
        w->released_bytes +=
            gguf_release_pages(f, m->data, (size_t)m->rows * kernel_row_bytes(m->type, m->cols));
    }
    free(ms);
    return w->released_bytes;
}

void llama_weights_free(llama_weights *w) {
    free(w->layers);
    free(w->owned);
    huge_unmap(w->packed, w->packed_bytes);
    w->layers = NULL;
    w->owned = NULL;
    w->packed = NULL;
}
