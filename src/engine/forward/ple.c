/* Gemma 4's per-layer input embeddings (ple.h), in ggml's order of
 * operations: each scale a float multiply, each norm an RMSNorm over
 * n_embd_pl (or dim) then the weight. */
#include <math.h>
#include <stdlib.h>

#include "engine/forward/ple.h"
#include "kernels/ops.h"

struct ple_state {
    float *inp;  /* (max_rows, n_layers * n_embd_pl): each row's inputs, layer-major */
    float *gate; /* (max_rows, n_embd_pl) */
    float *out;  /* (max_rows, dim) */
    float *row;  /* (n_layers * n_embd_pl,): one token's embedding row */
};

int ple_state_create(ple_state **out, const llama_config *c, size_t max_rows, tps_err *err) {
    *out = NULL;
    ple_state *p = calloc(1, sizeof *p);
    const size_t n = (size_t)c->n_layers * c->n_embd_pl;
    if (p) p->inp = malloc(sizeof(float) * (max_rows * (n + c->n_embd_pl + c->dim) + n));
    if (!p || !p->inp) {
        free(p);
        return tps_fail(err, TPS_ENOMEM, "forward: out of memory for the per-layer inputs");
    }
    p->gate = p->inp + max_rows * n;
    p->out = p->gate + max_rows * c->n_embd_pl;
    p->row = p->out + max_rows * c->dim;
    *out = p;
    return 0;
}

void ple_state_free(ple_state *p) {
    if (!p) return;
    free(p->inp);
    free(p);
}

static int mm(float *out, const llama_mat *w, const float *x, size_t n, kernel_ctx *kc,
              tps_err *err) {
    int rc = kernel_matmul(out, w->data, w->type, x, n, w->cols, w->rows, kc);
    if (rc)
        return tps_fail(err, rc, "forward: per-layer input matmul failed (type %u, %u x %u)",
                        w->type, w->rows, w->cols);
    return 0;
}

int ple_inputs(ple_state *p, kernel_ctx *kc, const llama_model *m, const fwd_batch *b,
               const float *x0, tps_err *err) {
    const llama_config *c = &m->cfg;
    const size_t pl = c->n_embd_pl, n = (size_t)c->n_layers * pl, rows = b->n_rows;
    const float proj_scale = 1.0f / sqrtf((float)c->dim), emb_scale = sqrtf((float)pl);
    const float in_scale = 1.0f / sqrtf(2.0f);
    int rc = mm(p->inp, &m->w.ple_model_proj, x0, rows, kc, err);
    if (rc) return rc;
    for (size_t r = 0; r < rows; r++) {
        float *in = p->inp + r * n, *e = p->row;
        kernel_scale(in, proj_scale, n);
        for (uint32_t l = 0; l < c->n_layers; l++)
            kernel_rmsnorm(in + l * pl, in + l * pl, m->w.ple_proj_norm, pl, c->rms_eps);
        rc = kernel_get_row(e, m->w.ple_embd.data, m->w.ple_embd.type, (size_t)b->rows[r].token, n);
        if (rc) return tps_fail(err, rc, "forward: cannot read the per-layer input embedding");
        kernel_scale(e, emb_scale, n);
        kernel_add(in, in, e, n);
        kernel_scale(in, in_scale, n);
    }
    return 0;
}

int ple_layer(ple_state *p, kernel_ctx *kc, const llama_model *m, uint32_t l, float *x, size_t n,
              const float *gelu, tps_err *err) {
    const llama_config *c = &m->cfg;
    const llama_layer *L = &m->w.layers[l];
    const size_t pl = c->n_embd_pl, dim = c->dim, stride = (size_t)c->n_layers * pl;
    int rc = mm(p->gate, &L->ple_gate, x, n, kc, err);
    if (rc) return rc;
    for (size_t r = 0; r < n; r++) /* gelu(gate) * inp[l], as GeGLU computes it */
        kernel_geglu(p->gate + r * pl, p->gate + r * pl, p->inp + r * stride + l * pl, pl, gelu);
    if ((rc = mm(p->out, &L->ple_proj, p->gate, n, kc, err))) return rc;
    for (size_t r = 0; r < n; r++) {
        kernel_rmsnorm(p->out + r * dim, p->out + r * dim, L->ple_post_norm, dim, c->rms_eps);
        kernel_add(x + r * dim, x + r * dim, p->out + r * dim, dim);
    }
    return 0;
}
