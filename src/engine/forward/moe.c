/* The mixture-of-experts layer (moe.h), as llama.cpp's build_moe_ffn
 * computes it for qwen3moe, llama (Mixtral) and gpt-oss:
 *   logits = router(x) [+ bias]
 *   softmax gating:        p = softmax(logits), the k largest p, their p
 *   softmax-weight gating: the k largest logits, softmax over those k
 *   [renormalised: w /= max(sum w, 2^-14)]
 *   out = sum_j w_j * (down_e(act(gate_e(x) [+ b], up_e(x) [+ b])) [+ b])
 * with act SwiGLU, or gpt-oss's clamped one: g = min(g, 7), u = clamp(u,
 * -7, 7), g / (1 + exp(-1.702 g)) * (u + 1); sigmoid gating (GLM-4.5):
 * p = sigmoid(logits), the k largest of p + exp_probs_b (within the best
 * expert groups where the model has groups), their p; then [* scale]; a
 * shared expert adds out += down_s(SwiGLU(gate_s(x), up_s(x))) [*
 * sigmoid(g_s . x), Qwen3.5's gate].
 * Gemma 4 (moe_ffn_gemma4): the router reads rms_norm(x) / sqrt(dim) *
 * gate_inp_s, the experts read RMSNorm(x, pre_ffw_norm_2), act is GeGLU (the
 * F16 GELU table), each expert's output is times its down_exps_s before its
 * weight, and the sum, RMS-normed by post_ffw_norm_2, is added to out.
 * The sum runs over the k
 * experts in the router's order, one rounded product and add at a time, as
 * ggml adds its expert views. Per-row and per-slot work goes to the
 * kernels' pool when a step has many rows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/forward/kmat.h"
#include "engine/forward/moe.h"
#include "kernels/pool_rows.h"
#include "kernels/ops.h"

#define OAI_ALPHA 1.702f
#define OAI_LIMIT 7.0f
#define ON_POOL   16 /* rows (or slots) from which the pool shares per-row work */

struct moe_state {
    size_t max_rows;
    uint32_t E, k, eff, dim;
    float *logits;         /* (max_rows, E) */
    float *wts;            /* (max_rows, k) the rows' expert weights */
    float *hg;             /* (slots, eff) gate, then the activation */
    float *hu;             /* (slots, eff) up */
    float *down;           /* (slots, dim) */
    uint32_t *sel;         /* (max_rows, k) the rows' experts, ranked */
    uint32_t *slot_of;     /* (max_rows, k) the slot of each (row, j) */
    uint32_t *x_row;       /* (slots,) the row of each slot */
    uint32_t *slot_expert; /* (slots,) the expert of each slot */
    uint32_t *g_expert;    /* (E,) the expert of each group */
    uint32_t *g_first;     /* (E + 1,) the first slot of each group */
    uint32_t *next;        /* (E,) per expert: its next free slot while grouping */
    /* Gemma 4 (c->dense_with_experts), else NULL: the experts' input, the
     * router's, the experts' sum, each (max_rows, dim); (dim,) ones */
    float *g4_in, *g4_rin, *g4_out, *ones;
    /* the shared expert (c->shexp_ffn > 0), else NULL */
    uint32_t shf;  /* its FFN width */
    float *sh_g;   /* (max_rows, shf) gate, then the activation */
    float *sh_u;   /* (max_rows, shf) up */
    float *sh_out; /* (max_rows, dim) */
    void *buf;
};

size_t moe_max_slots(const llama_config *c, size_t max_rows) {
    return max_rows * c->n_expert_used;
}

int moe_state_create(moe_state **out, const llama_config *c, size_t max_rows, tps_err *err) {
    *out = NULL;
    moe_state *m = calloc(1, sizeof *m);
    if (!m) return tps_fail(err, TPS_ENOMEM, "moe: out of memory");
    m->max_rows = max_rows, m->E = c->n_expert, m->k = c->n_expert_used;
    m->eff = c->expert_ffn, m->dim = c->dim, m->shf = c->shexp_ffn;
    const size_t slots = moe_max_slots(c, max_rows);
    const size_t shared = m->shf ? max_rows * (2 * (size_t)m->shf + m->dim) : 0;
    const size_t g4 = c->dense_with_experts ? (3 * max_rows + 1) * (size_t)m->dim : 0;
    const size_t floats =
        max_rows * (m->E + m->k) + slots * (2 * (size_t)m->eff + m->dim) + shared + g4;
    const size_t u32s = 2 * max_rows * m->k + 2 * slots + 3 * (size_t)m->E + 1;
    m->buf = malloc(floats * sizeof(float) + u32s * sizeof(uint32_t));
    if (!m->buf) {
        free(m);
        return tps_fail(err, TPS_ENOMEM, "moe: cannot allocate %zu MiB of expert scratch",
                        (floats * sizeof(float)) >> 20);
    }
    float *f = m->buf;
    m->logits = f, f += max_rows * m->E;
    m->wts = f, f += max_rows * m->k;
    m->hg = f, f += slots * m->eff;
    m->hu = f, f += slots * m->eff;
    m->down = f, f += slots * m->dim;
    if (m->shf) {
        m->sh_g = f, f += max_rows * m->shf;
        m->sh_u = f, f += max_rows * m->shf;
        m->sh_out = f, f += max_rows * m->dim;
    }
    if (g4) {
        m->g4_in = f, f += max_rows * m->dim;
        m->g4_rin = f, f += max_rows * m->dim;
        m->g4_out = f, f += max_rows * m->dim;
        m->ones = f, f += m->dim;
        for (uint32_t i = 0; i < m->dim; i++)
            m->ones[i] = 1.0f;
    }
    uint32_t *u = (uint32_t *)f;
    m->sel = u, u += max_rows * m->k;
    m->slot_of = u, u += max_rows * m->k;
    m->x_row = u, u += slots;
    m->slot_expert = u, u += slots;
    m->g_expert = u, u += m->E;
    m->g_first = u, u += m->E + 1;
    m->next = u;
    *out = m;
    return 0;
}

void moe_state_free(moe_state *m) {
    if (!m) return;
    free(m->buf);
    free(m);
}

/* ---- per-row and per-slot work, on the pool when there is enough -------- */

typedef struct moe_job {
    moe_state *m;
    const llama_config *c;
    const llama_layer *L;
    const float *x; /* (n, dim) the layer's input */
    float *out;
    const float *gelu; /* the F16 GELU table: GeGLU experts (Gemma 4); NULL: SwiGLU */
    float *x_out;      /* Gemma 4: (n, dim) the rows the experts' normed sum is added to */
    void (*fn)(const struct moe_job *j, size_t i);
    size_t n, per_task;
} moe_job;

static void moe_task(void *arg, size_t t, int thread) {
    (void)thread;
    const moe_job *j = arg;
    const size_t end = pool_rows_end(t, j->per_task, j->n);
    for (size_t i = t * j->per_task; i < end; i++)
        j->fn(j, i);
}

static void each(moe_job *j, kernel_ctx *kc) {
    tps_pool *pool = kernel_ctx_pool(kc); /* first: j->n is then read once, after the call */
    pool_rows_run(pool, j->n, &j->per_task, ON_POOL, moe_task, j);
}

/* ---- routing ---------------------------------------------------------------- */

/* sel (k,) <- the indices of the k largest of x (n,), largest first; on a
 * tie the lower index first. */
static void top_k(uint32_t *sel, const float *x, uint32_t n, uint32_t k) {
    for (uint32_t j = 0; j < k; j++) {
        uint32_t best = UINT32_MAX;
        for (uint32_t i = 0; i < n; i++) {
            int taken = 0;
            for (uint32_t q = 0; q < j && !taken; q++)
                taken = sel[q] == i;
            if (!taken && (best == UINT32_MAX || x[i] > x[best])) best = i;
        }
        sel[j] = best;
    }
}

/* sel_p (E,) with every expert outside the n_groups_used best groups set
 * to -inf; a group's score is the sum of its two largest (ggml's argsort
 * top 2, get_rows, sum_rows, argsort top n_groups_used). */
static void mask_groups(float *sel_p, const llama_config *c) {
    const uint32_t G = c->n_groups, per = c->n_expert / G;
    float score[LLAMA_MAX_EXPERTS];
    uint32_t two[2], best[LLAMA_MAX_EXPERTS];
    for (uint32_t g = 0; g < G; g++) {
        top_k(two, sel_p + g * per, per, 2);
        score[g] = sel_p[g * per + two[0]] + sel_p[g * per + two[1]];
    }
    top_k(best, score, G, c->n_groups_used);
    for (uint32_t g = 0; g < G; g++) {
        int kept = 0;
        for (uint32_t q = 0; q < c->n_groups_used && !kept; q++)
            kept = best[q] == g;
        if (!kept)
            for (uint32_t e = 0; e < per; e++)
                sel_p[g * per + e] = -INFINITY;
    }
}

/* Row i's experts and their weights from its router logits: the gating's
 * probabilities, the k best of them (plus the selection bias, within the
 * best groups), their unbiased probabilities as weights, normalised and
 * scaled as the model says. */
static void route_row(const moe_job *j, size_t i) {
    const moe_state *m = j->m;
    const llama_config *c = j->c;
    float *lg = m->logits + i * m->E, *w = m->wts + i * m->k;
    uint32_t *sel = m->sel + i * m->k;
    if (j->L->gate_inp_b) kernel_add(lg, lg, j->L->gate_inp_b, m->E);
    if (c->gating == LLAMA_GATING_SOFTMAX) kernel_softmax(lg, m->E);
    if (c->gating == LLAMA_GATING_SIGMOID)
        for (uint32_t e = 0; e < m->E; e++)
            lg[e] = 1.0f / (1.0f + expf(-lg[e]));
    const float *chooser = lg;
    float biased[LLAMA_MAX_EXPERTS];
    if (j->L->exp_probs_b || c->n_groups > 1) {
        for (uint32_t e = 0; e < m->E; e++)
            biased[e] = j->L->exp_probs_b ? lg[e] + j->L->exp_probs_b[e] : lg[e];
        if (c->n_groups > 1) mask_groups(biased, c);
        chooser = biased;
    }
    top_k(sel, chooser, m->E, m->k);
    for (uint32_t q = 0; q < m->k; q++)
        w[q] = lg[sel[q]];
    if (c->gating == LLAMA_GATING_SOFTMAX_WEIGHT) kernel_softmax(w, m->k);
    if (c->norm_w) { /* ggml: a sum in double, clamped to F16's smallest normal */
        double sum = 0;
        for (uint32_t q = 0; q < m->k; q++)
            sum += w[q];
        const float s = fmaxf((float)sum, 6.103515625e-5f);
        for (uint32_t q = 0; q < m->k; q++)
            w[q] = w[q] / s;
    }
    if (c->w_scale != 0.0f && c->w_scale != 1.0f)
        for (uint32_t q = 0; q < m->k; q++)
            w[q] *= c->w_scale;
}

/* Slots grouped by expert (experts in increasing order, a group's rows in
 * increasing order); returns the number of groups. */
static size_t group_slots(moe_state *m, size_t n) {
    memset(m->next, 0, m->E * sizeof *m->next);
    for (size_t i = 0; i < n * m->k; i++)
        m->next[m->sel[i]]++;
    size_t n_groups = 0;
    uint32_t off = 0;
    for (uint32_t e = 0; e < m->E; e++) {
        if (!m->next[e]) continue;
        const uint32_t count = m->next[e];
        m->g_expert[n_groups] = e;
        m->g_first[n_groups++] = off;
        m->next[e] = off;
        off += count;
    }
    m->g_first[n_groups] = off;
    for (size_t i = 0; i < n; i++)
        for (uint32_t q = 0; q < m->k; q++) {
            const uint32_t e = m->sel[i * m->k + q], s = m->next[e]++;
            m->x_row[s] = (uint32_t)i;
            m->slot_expert[s] = e;
            m->slot_of[i * m->k + q] = s;
        }
    return n_groups;
}

/* ---- the experts' activation and the weighted sum -------------------------- */

/* Slot s's activation: biases (gpt-oss), then SwiGLU or its clamped form. */
static void act_slot(const moe_job *j, size_t s) {
    const moe_state *m = j->m;
    const llama_layer *L = j->L;
    const size_t eff = m->eff, e = m->slot_expert[s];
    float *g = m->hg + s * eff, *u = m->hu + s * eff;
    if (L->gate_exps_b) kernel_add(g, g, L->gate_exps_b + e * eff, eff);
    if (L->up_exps_b) kernel_add(u, u, L->up_exps_b + e * eff, eff);
    if (j->gelu) {
        kernel_geglu(g, g, u, eff, j->gelu);
        return;
    }
    if (!j->c->arch_info->oai) {
        kernel_swiglu(g, g, u, eff);
        return;
    }
    for (size_t i = 0; i < eff; i++) {
        const float x = fminf(g[i], OAI_LIMIT);
        const float y = fminf(fmaxf(u[i], -OAI_LIMIT), OAI_LIMIT);
        g[i] = x / (1.0f + expf(OAI_ALPHA * (-x))) * (y + 1.0f);
    }
}

/* Row i's output: its k experts' outputs (+ their down biases, times
 * their scales) times their weights, added in the router's order. */
static void sum_row(const moe_job *j, size_t i) {
    const moe_state *m = j->m;
    const size_t dim = m->dim;
    float *o = j->out + i * dim;
    for (uint32_t q = 0; q < m->k; q++) {
        const uint32_t s = m->slot_of[i * m->k + q], e = m->slot_expert[s];
        const float w = m->wts[i * m->k + q], *d = m->down + (size_t)s * dim;
        const float *b = j->L->down_exps_b ? j->L->down_exps_b + (size_t)e * dim : NULL;
        const float se = j->L->down_exps_s ? j->L->down_exps_s[e] : 1.0f; /* x * 1 is x */
        for (size_t c = 0; c < dim; c++) {
            const float v = (b ? d[c] + b[c] : d[c]) * se * w;
            o[c] = q ? o[c] + v : v;
        }
    }
}

/* The expert tensor as the kernels take it: its repacked copy if any. */
static kernel_experts kexperts(float *out, const llama_mat *w) {
    const size_t bytes = (size_t)w->rows * kernel_row_bytes(w->type, w->cols);
    if (w->packed)
        return (kernel_experts){out, w->packed, kernel_packed_type(w->type), w->rows, bytes};
    return (kernel_experts){out, w->data, w->type, w->rows, bytes};
}

/* Rows [row0, row0 + n_out) of each expert of w (Gemma 4's fused gate|up,
 * whose halves are whole 8-row groups when repacked). */
static kernel_experts kexperts_part(float *out, const llama_mat *w, uint32_t row0, uint32_t n_out) {
    kernel_experts k = kexperts(out, w);
    k.W = (const uint8_t *)k.W + (size_t)row0 * kernel_row_bytes(w->type, w->cols);
    k.n_out = n_out;
    return k;
}

static int fail(tps_err *err, int rc, const char *what, const llama_mat *w) {
    return tps_fail(err, rc, "forward: %s failed (type %u, %u x %u)", what, w->type, w->rows,
                    w->cols);
}

/* ---- the shared expert ------------------------------------------------------ */

static void shared_act_row(const moe_job *j, size_t i) {
    const moe_state *m = j->m;
    float *g = m->sh_g + i * m->shf;
    kernel_swiglu(g, g, m->sh_u + i * m->shf, m->shf);
}

/* Row i's output += the shared expert's, times sigmoid(its gate . x)
 * where it has a gate, as ggml multiplies and then adds. */
static void shared_add_row(const moe_job *j, size_t i) {
    const moe_state *m = j->m;
    const size_t dim = m->dim;
    const float *sh = m->sh_out + i * dim;
    float *o = j->out + i * dim;
    if (!j->L->gate_inp_shexp) { /* GLM-4.5, DeepSeek: added as it is */
        for (size_t c = 0; c < dim; c++)
            o[c] += sh[c];
        return;
    }
    const float z = kernel_dot_f32(j->L->gate_inp_shexp, j->x + i * dim, dim);
    const float w = 1.0f / (1.0f + expf(-z));
    for (size_t c = 0; c < dim; c++)
        o[c] += sh[c] * w;
}

/* out (n, dim) += the shared expert of xb (n, dim), gated per row. */
static int shared_expert(moe_job *j, kernel_ctx *kc, const float *xb, size_t n, tps_err *err) {
    moe_state *m = j->m;
    const llama_layer *L = j->L;
    const kernel_mat gate_up[2] = {kmat(m->sh_g, &L->gate_shexp), kmat(m->sh_u, &L->up_shexp)};
    int rc = kernel_matmul_multi(gate_up, 2, xb, n, m->dim, kc);
    if (rc) return fail(err, rc, "the shared expert's gate and up", &L->gate_shexp);
    j->fn = shared_act_row, j->n = n;
    each(j, kc);
    const kernel_mat down = kmat(m->sh_out, &L->down_shexp);
    if ((rc = kernel_matmul(m->sh_out, down.W, down.wtype, m->sh_g, n, m->shf, m->dim, kc)))
        return fail(err, rc, "the shared expert's down", &L->down_shexp);
    j->fn = shared_add_row, j->n = n;
    each(j, kc);
    return 0;
}

/* The router's logits of rin (n, dim), and each row's experts and weights. */
static int route(moe_job *j, kernel_ctx *kc, const float *rin, size_t n, tps_err *err) {
    const llama_mat *r = &j->L->gate_inp;
    int rc = kernel_matmul(j->m->logits, r->data, r->type, rin, n, r->cols, r->rows, kc);
    if (rc) return fail(err, rc, "the router", r);
    j->fn = route_row, j->n = n;
    each(j, kc);
    return 0;
}

/* j->out (n, dim) = the routed experts of xin (n, dim), weighted. */
static int run_experts(moe_job *j, kernel_ctx *kc, const float *xin, size_t n, moe_tally *tally,
                       tps_err *err) {
    moe_state *m = j->m;
    const llama_layer *L = j->L;
    const size_t n_groups = group_slots(m, n);
    tally->experts += n_groups;
    tally->bytes += n_groups * L->expert_bytes;
    const kernel_groups g = {n_groups, m->g_expert, m->g_first, m->x_row};
    const int fused = L->gate_up_exps.data != NULL;
    const kernel_experts gate_up[2] = {
        fused ? kexperts_part(m->hg, &L->gate_up_exps, 0, m->eff) : kexperts(m->hg, &L->gate_exps),
        fused ? kexperts_part(m->hu, &L->gate_up_exps, m->eff, m->eff)
              : kexperts(m->hu, &L->up_exps)};
    int rc = kernel_matmul_grouped(gate_up, 2, xin, m->dim, &g, kc);
    if (rc)
        return fail(err, rc, "the experts' gate and up", fused ? &L->gate_up_exps : &L->gate_exps);
    j->fn = act_slot, j->n = n * m->k;
    each(j, kc);
    const kernel_groups gd = {n_groups, m->g_expert, m->g_first, NULL};
    const kernel_experts down = kexperts(m->down, &L->down_exps);
    if ((rc = kernel_matmul_grouped(&down, 1, m->hg, m->eff, &gd, kc)))
        return fail(err, rc, "the experts' down", &L->down_exps);
    j->fn = sum_row, j->n = n;
    each(j, kc);
    return 0;
}

int moe_ffn(moe_state *m, kernel_ctx *kc, const llama_config *c, const llama_layer *L,
            const float *xb, size_t n, float *out, moe_tally *tally, tps_err *err) {
    moe_job j = {.m = m, .c = c, .L = L, .x = xb, .out = out};
    int rc = route(&j, kc, xb, n, err);
    if (!rc) rc = run_experts(&j, kc, xb, n, tally, err);
    return rc ? rc : m->shf ? shared_expert(&j, kc, xb, n, err) : 0;
}

/* ---- Gemma 4 ---------------------------------------------------------------- */

/* Row i's two inputs, as ggml computes them: the experts' RMSNorm(x,
 * pre_ffw_norm_2); the router's rms_norm(x) (no weight), scaled by
 * 1/sqrt(dim), times gate_inp_s. */
static void gemma4_in_row(const moe_job *j, size_t i) {
    const moe_state *m = j->m;
    const size_t dim = m->dim;
    const float eps = j->c->rms_eps, inv = 1.0f / sqrtf((float)dim), *sc = j->L->gate_inp_s;
    kernel_rmsnorm(m->g4_in + i * dim, j->x + i * dim, j->L->ffn_pre_norm_2, dim, eps);
    float *r = m->g4_rin + i * dim;
    kernel_rmsnorm(r, j->x + i * dim, m->ones, dim, eps);
    for (size_t c = 0; c < dim; c++)
        r[c] = r[c] * inv * sc[c];
}

/* out row i += RMSNorm(the experts' sum, post_ffw_norm_2). */
static void gemma4_out_row(const moe_job *j, size_t i) {
    const moe_state *m = j->m;
    const size_t dim = m->dim;
    float *e = m->g4_out + i * dim, *o = j->x_out + i * dim;
    kernel_rmsnorm(e, e, j->L->ffn_post_norm_2, dim, j->c->rms_eps);
    kernel_add(o, o, e, dim);
}

int moe_ffn_gemma4(moe_state *m, kernel_ctx *kc, const llama_config *c, const llama_layer *L,
                   const float *x, size_t n, const float *gelu, float *out, moe_tally *tally,
                   tps_err *err) {
    moe_job j = {.m = m, .c = c, .L = L, .x = x, .out = m->g4_out, .x_out = out, .gelu = gelu};
    j.fn = gemma4_in_row, j.n = n;
    each(&j, kc);
    int rc = route(&j, kc, m->g4_rin, n, err);
    if (!rc) rc = run_experts(&j, kc, m->g4_in, n, tally, err);
    if (rc) return rc;
    j.fn = gemma4_out_row, j.n = n;
    each(&j, kc);
    return 0;
}
