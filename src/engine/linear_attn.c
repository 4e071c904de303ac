/* Gated DeltaNet's recurrence (linear_attn.h). Two passes over the runs:
 * the conv and the per-row activations a run at a time (its rows in
 * order: each conv input is the one before's window), then the delta rule
 * a (run, value head) at a time, the head's S x S state hot in cache for
 * the whole run. Per row and head, as ggml's gated_delta_net:
 *
 *     M *= exp(g)                          (M[j][i] = S[i][j]: row j is value j)
 *     d[j] = (v[j] - M[j] . k) * beta
 *     M[j] += d[j] * k
 *     o[j] = (M[j] . q) / sqrt(S)
 *
 * with q, k the L2-normalised conv outputs of key head h % key heads,
 * g = softplus(alpha + dt) * a, beta = sigmoid(beta), then
 * out = rmsnorm(o) * ssm_norm * silu(z). */
#include <math.h>
#include <string.h>

#include "engine/linear_attn.h"
#include "kernels/ops.h"

size_t linear_attn_plan(uint32_t *first, const uint32_t *seq, const uint32_t *pos, size_t n_rows) {
    size_t n = 0;
    for (size_t r = 0; r < n_rows; r++) {
        if (r > 0 && seq[r] == seq[r - 1] && pos[r] == pos[r - 1] + 1) continue;
        for (size_t i = 0; i < n; i++) /* a sequence seen before: its rows are split */
            if (seq[first[i]] == seq[r]) return 0;
        first[n++] = (uint32_t)r;
    }
    first[n] = (uint32_t)n_rows;
    return n;
}

typedef struct lin_job {
    const llama_config *c;
    const llama_layer *L;
    kv_cache *kv;
    const kv_seq *const *seqs;
    const lin_rows_of *rows;
    uint32_t layer;
    const lin_runs *runs;
    const lin_rows *r;
} lin_job;

static float silu(float x) {
    return x / (1.0f + expf(-x));
}

/* x (n,) /= max(|x|, eps), as ggml_l2_norm (the sum in double). */
static void l2_normalise(float *x, size_t n, float eps) {
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    kernel_scale(x, 1.0f / fmaxf(sqrtf((float)sum), eps), n);
}

/* Row t's conv: its input after the state's taps - 1 older ones, each
 * channel's taps oldest first (ggml_ssm_conv's order), then silu; the
 * state shifts by one input. state: (channels, taps - 1). */
static void conv_row(float *out, float *state, const float *x, const float *w, uint32_t ch,
                     uint32_t taps) {
    const uint32_t keep = taps - 1;
    for (uint32_t c = 0; c < ch; c++) {
        float *s = state + (size_t)c * keep;
        const float *wc = w + (size_t)c * taps;
        float sum = 0.0f;
        for (uint32_t j = 0; j < keep; j++)
            sum += s[j] * wc[j];
        sum += x[c] * wc[keep];
        out[c] = silu(sum);
        memmove(s, s + 1, (keep - 1) * sizeof *s);
        s[keep - 1] = x[c];
    }
}

/* A run's conv and per-row activations, rows in order. */
static void conv_task(void *arg, size_t t, int thread) {
    (void)thread;
    const lin_job *j = arg;
    const llama_config *c = j->c;
    const uint32_t ch = llama_config_conv_channels(c), hv = c->ssm_v_heads, S = c->ssm_state;
    const uint32_t hk = c->ssm_k_heads;
    const size_t r0 = j->runs->first[t], r1 = j->runs->first[t + 1];
    const kv_seq *seq = j->seqs[j->rows->seq[r0]];
    float *state = kv_state(j->kv, seq, j->layer);
    if (j->rows->pos[r0] == 0) /* a sequence starts from no state */
        memset(state, 0, llama_config_state_floats(c) * sizeof *state);
    const lin_rows *r = j->r;
    for (size_t row = r0; row < r1; row++) {
        float *conv = r->conv + row * ch;
        conv_row(conv, state, r->qkv + row * ch, j->L->ssm_conv1d, ch, c->ssm_conv);
        if (j->rows->ckpt[row] != KV_CKPT_NONE && j->kv->ckpts) /* the conv's part */
            memcpy(kv_ckpt_state(j->kv, j->rows->ckpt[row], j->layer), state,
                   (size_t)(c->ssm_conv - 1) * ch * sizeof *state);
        for (uint32_t h = 0; h < 2 * hk; h++) /* Q's heads then K's */
            l2_normalise(conv + (size_t)h * S, S, c->rms_eps);
        float *beta = r->beta + row * hv, *alpha = r->alpha + row * hv;
        for (uint32_t h = 0; h < hv; h++) {
            beta[h] = 1.0f / (1.0f + expf(-beta[h]));
            const float x = alpha[h] + j->L->ssm_dt[h];
            const float softplus = x > 20.0f ? x : logf(1.0f + expf(x));
            alpha[h] = expf(softplus * j->L->ssm_a[h]);
        }
    }
}

/* One (run, value head): the delta rule over the run's rows, then the
 * gated norm of the head's outputs. */
static void head_task(void *arg, size_t t, int thread) {
    (void)thread;
    const lin_job *j = arg;
    const llama_config *c = j->c;
    const uint32_t ch = llama_config_conv_channels(c), hv = c->ssm_v_heads, S = c->ssm_state;
    const uint32_t hk = c->ssm_k_heads, h = (uint32_t)(t % hv);
    const size_t run = t / hv, r0 = j->runs->first[run], r1 = j->runs->first[run + 1];
    const size_t conv_state = (size_t)(c->ssm_conv - 1) * ch;
    float *M =
        kv_state(j->kv, j->seqs[j->rows->seq[r0]], j->layer) + conv_state + (size_t)h * S * S;
    const float scale = 1.0f / sqrtf((float)S);
    const lin_rows *r = j->r;
    const size_t inner = (size_t)hv * S;
    for (size_t row = r0; row < r1; row++) {
        const float *conv = r->conv + row * ch;
        const float *q = conv + (size_t)(h % hk) * S, *k = conv + (size_t)(hk + h % hk) * S;
        const float *v = conv + (size_t)2 * hk * S + (size_t)h * S;
        const float decay = r->alpha[row * hv + h], beta = r->beta[row * hv + h];
        float *o = r->out + row * inner + (size_t)h * S;
        for (uint32_t i = 0; i < S; i++) {
            float *m = M + (size_t)i * S;
            kernel_scale(m, decay, S);
            const float d = (v[i] - kernel_dot_f32(m, k, S)) * beta;
            kernel_axpy(m, d, k, S);
            o[i] = kernel_dot_f32(m, q, S) * scale;
        }
        kernel_rmsnorm(o, o, j->L->ssm_norm, S, c->rms_eps);
        const float *z = r->z + row * inner + (size_t)h * S;
        for (uint32_t i = 0; i < S; i++)
            o[i] *= silu(z[i]);
        if (j->rows->ckpt[row] != KV_CKPT_NONE && j->kv->ckpts) /* the head's matrix */
            memcpy(kv_ckpt_state(j->kv, j->rows->ckpt[row], j->layer) + conv_state +
                       (size_t)h * S * S,
                   M, (size_t)S * S * sizeof *M);
    }
}

static void run_tasks(tps_pool *pool, size_t n, tps_pool_fn fn, lin_job *j) {
    if (pool && n > 1) {
        tps_pool_run(pool, n, fn, j);
        return;
    }
    for (size_t t = 0; t < n; t++)
        fn(j, t, 0);
}

void linear_attn_step(tps_pool *pool, const llama_config *c, const llama_layer *L, kv_cache *kv,
                      const kv_seq *const *seqs, const lin_rows_of *rows, uint32_t l,
                      const lin_runs *runs, const lin_rows *r) {
    lin_job j = {
        .c = c, .L = L, .kv = kv, .seqs = seqs, .rows = rows, .layer = l, .runs = runs, .r = r};
    run_tasks(pool, runs->n, conv_task, &j);
    run_tasks(pool, runs->n * c->ssm_v_heads, head_task, &j);
}
