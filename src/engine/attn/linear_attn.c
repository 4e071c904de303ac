/* Gated DeltaNet's recurrence (linear_attn.h). Passes over the runs: the
 * states of sequences that start here zeroed; the conv a (run, chunk of
 * channels) at a time (each channel's rows in order: each input is in the
 * next rows' windows), so one long prompt's conv is shared among the
 * threads; then the delta rule a (run, value head) at a time, the head's
 * S x S state hot in cache for the whole run. Per row and head, as ggml's gated_delta_net:
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

#include "engine/attn/linear_attn.h"
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

/* x (n,) /= max(|x|, eps), as ggml_l2_norm (the sum in double). */
static void l2_normalise(float *x, size_t n, float eps) {
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    kernel_scale(x, 1.0f / fmaxf(sqrtf((float)sum), eps), n);
}

/* Channels a conv task takes: enough tasks to share a long prompt's conv
 * among the threads, few enough that each reads whole cache lines. */
#define CONV_CHUNK 256

/* Row m of the run's conv inputs (m < 0: row taps - 1 + m of the state,
 * which holds the last taps - 1 inputs oldest first, a row of channels
 * each). */
static inline const float *conv_row_in(const float *qkv, const float *state, uint32_t ch,
                                       uint32_t keep, size_t r0, long m) {
    return m >= 0 ? qkv + (r0 + (size_t)m) * ch : state + (size_t)(keep + m) * ch;
}

/* Channels [c0, c1) of one run, row by row: each channel's taps oldest
 * input first (ggml_ssm_conv's order), then silu; afterwards the state
 * holds the run's last taps - 1 inputs, and a checkpointed row's conv part
 * the taps - 1 inputs up to it. Rows of the chunk's channels are
 * contiguous, so the loops run over channels in vectors. */
static void conv_channels(const lin_job *j, size_t r0, size_t r1, uint32_t c0, uint32_t c1,
                          float *state) {
    const llama_config *c = j->c;
    const uint32_t ch = llama_config_conv_channels(c), taps = c->ssm_conv, keep = taps - 1;
    const uint32_t n_c = c1 - c0;
    const lin_rows *r = j->r;
    const long n = (long)(r1 - r0);
    float wt[16][CONV_CHUNK], sum[CONV_CHUNK], one[CONV_CHUNK]; /* taps <= 16 (llama_config) */
    for (uint32_t t = 0; t < taps; t++)
        for (uint32_t k = 0; k < n_c; k++)
            wt[t][k] = j->L->ssm_conv1d[(size_t)(c0 + k) * taps + t];
    for (uint32_t k = 0; k < n_c; k++)
        one[k] = 1.0f;
    for (long i = 0; i < n; i++) {
        memset(sum, 0, n_c * sizeof *sum);
        for (uint32_t t = 0; t < taps; t++) {
            const float *x = conv_row_in(r->qkv, state, ch, keep, r0, i - (long)keep + t) + c0;
            for (uint32_t k = 0; k < n_c; k++)
                sum[k] += x[k] * wt[t][k];
        }
        kernel_swiglu(r->conv + (r0 + (size_t)i) * ch + c0, sum, one, n_c); /* silu */
        const uint32_t ck = j->rows->ckpt[r0 + (size_t)i];
        if (ck != KV_CKPT_NONE && j->kv->ckpts)
            for (uint32_t t = 0; t < keep; t++)
                memcpy(kv_ckpt_state(j->kv, ck, j->layer) + (size_t)t * ch + c0,
                       conv_row_in(r->qkv, state, ch, keep, r0, i + 1 - (long)keep + t) + c0,
                       n_c * sizeof(float));
    }
    float last[16][CONV_CHUNK];
    for (uint32_t t = 0; t < keep; t++)
        memcpy(last[t], conv_row_in(r->qkv, state, ch, keep, r0, n - (long)keep + t) + c0,
               n_c * sizeof(float));
    for (uint32_t t = 0; t < keep; t++)
        memcpy(state + (size_t)t * ch + c0, last[t], n_c * sizeof(float));
}

/* Task t: run t / chunks, channels chunk t % chunks. */
static void conv_task(void *arg, size_t t, int thread) {
    (void)thread;
    const lin_job *j = arg;
    const uint32_t ch = llama_config_conv_channels(j->c);
    const size_t chunks = (ch + CONV_CHUNK - 1) / CONV_CHUNK, run = t / chunks;
    const size_t r0 = j->runs->first[run], r1 = j->runs->first[run + 1];
    const uint32_t c0 = (uint32_t)(t % chunks) * CONV_CHUNK;
    const uint32_t c1 = c0 + CONV_CHUNK < ch ? c0 + CONV_CHUNK : ch;
    conv_channels(j, r0, r1, c0, c1, kv_state(j->kv, j->seqs[j->rows->seq[r0]], j->layer));
}

/* A sequence starting at position 0 starts from no state. */
static void reset_task(void *arg, size_t t, int thread) {
    (void)thread;
    const lin_job *j = arg;
    const size_t r0 = j->runs->first[t];
    if (j->rows->pos[r0] != 0) return;
    float *state = kv_state(j->kv, j->seqs[j->rows->seq[r0]], j->layer);
    memset(state, 0, llama_config_state_floats(j->c) * sizeof *state);
}

/* Row `row`'s per-head inputs of value head h: q and k (key head h %
 * key heads) L2-normalised into q, k; beta's sigmoid; the decay. */
static void head_inputs(const lin_job *j, size_t row, uint32_t h, float *q, float *k, float *beta,
                        float *decay) {
    const llama_config *c = j->c;
    const uint32_t ch = llama_config_conv_channels(c), hv = c->ssm_v_heads, S = c->ssm_state;
    const uint32_t kh = h % c->ssm_k_heads;
    const float *conv = j->r->conv + row * ch;
    memcpy(q, conv + (size_t)kh * S, S * sizeof *q);
    memcpy(k, conv + (size_t)(c->ssm_k_heads + kh) * S, S * sizeof *k);
    l2_normalise(q, S, c->rms_eps);
    l2_normalise(k, S, c->rms_eps);
    *beta = 1.0f / (1.0f + expf(-j->r->beta[row * hv + h]));
    const float x = j->r->alpha[row * hv + h] + j->L->ssm_dt[h];
    const float softplus = x > 20.0f ? x : logf(1.0f + expf(x));
    *decay = expf(softplus * j->L->ssm_a[h]);
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
    float q[1024], k[1024]; /* S <= 1024 (llama_config) */
    for (size_t row = r0; row < r1; row++) {
        const float *v = r->conv + row * ch + (size_t)2 * hk * S + (size_t)h * S;
        float beta, decay;
        head_inputs(j, row, h, q, k, &beta, &decay);
        float *o = r->out + row * inner + (size_t)h * S;
        kernel_delta_rule(M, q, k, v, decay, beta, scale, o, S);
        kernel_rmsnorm(o, o, j->L->ssm_norm, S, c->rms_eps);
        kernel_swiglu(o, r->z + row * inner + (size_t)h * S, o, S); /* o * silu(z) */
        if (j->rows->ckpt[row] != KV_CKPT_NONE && j->kv->ckpts)     /* the head's matrix */
            memcpy(kv_ckpt_state(j->kv, j->rows->ckpt[row], j->layer) + conv_state +
                       (size_t)h * S * S,
                   M, (size_t)S * S * sizeof *M);
    }
}

void linear_attn_step(tps_pool *pool, const llama_config *c, const llama_layer *L, kv_cache *kv,
                      const kv_seq *const *seqs, const lin_rows_of *rows, uint32_t l,
                      const lin_runs *runs, const lin_rows *r) {
    lin_job j = {
        .c = c, .L = L, .kv = kv, .seqs = seqs, .rows = rows, .layer = l, .runs = runs, .r = r};
    const size_t chunks = (llama_config_conv_channels(c) + CONV_CHUNK - 1) / CONV_CHUNK;
    tps_pool_run_any(pool, runs->n, reset_task, &j);
    tps_pool_run_any(pool, runs->n * chunks, conv_task, &j);
    tps_pool_run_any(pool, runs->n * c->ssm_v_heads, head_task, &j);
}
