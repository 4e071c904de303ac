/* Llama-family forward pass over a batch of token rows from any number of
 * sequences, each with its own paged KV block table. One pass for every
 * architecture of model/llama_arch.h: the steps one of them adds (Q/K/V
 * biases, per-head Q/K norm, NeoX-order RoPE, RoPE frequency factors and
 * scaling, Gemma's scaled embeddings, GeGLU, post-norms, sliding windows and
 * soft-capping) are switched on at load by the model's config, tensors and
 * arch entry, never a copy of the pass.
 *
 * Per layer: RMSNorm -> Q/K/V projections for all rows at once [-> + biases]
 * [-> per-head Q/K RMSNorm] -> RoPE ->
 * K/V written into the cache -> attention per (row, head) over that row's
 * own sequence -> output projection + residual -> RMSNorm -> SwiGLU FFN for
 * all rows at once + residual. Matrix products go through kernels/matmul
 * (batch-invariant by contract); everything else here is per row. */
#include <math.h>
#if defined(__F16C__) && defined(__AVX__)
#include <immintrin.h>
#endif
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/free_all.h"
#include "engine/attn/attention.h"
#include "engine/forward/final_logits.h"
#include "engine/forward/forward.h"
#include "engine/attn/linear_attn.h"
#include "engine/attn/mla.h"
#include "engine/forward/kmat.h"
#include "engine/forward/moe.h"
#include "engine/forward/ple.h"
#include "kernels/pool_rows.h"
#include "kernels/ops.h"
#include "kernels/quant.h"

struct fwd_state {
    size_t max_rows;
    uint32_t max_ctx;
    int n_threads;
    kernel_ctx *kc;
    /* activations, each (max_rows, width) */
    float *x;             /* residual stream (dim) */
    float *xb;            /* normed input (dim) */
    float *q;             /* (q_dim) */
    float *k;             /* (kv_dim) */
    float *v;             /* (kv_dim) */
    float *att;           /* attention output (q_dim) */
    float *proj;          /* projection output (dim) */
    float *hb;            /* FFN gate (ffn_dim) */
    float *hb2;           /* FFN up (ffn_dim) */
    float *logits;        /* (max_rows, n_vocab) */
    float *rope;          /* (n_threads, rope_dim) cos/sin pairs for one row, per thread */
    uint32_t rope_stride; /* the widest layer's rope_dim: each thread's part of rope */
    float *ones;          /* (widest head,) all 1: Gemma 4's V norm has no weight */
    ple_state *ple;       /* Gemma 4's per-layer inputs (llama_config.n_embd_pl), else NULL */
    float *gelu;          /* (65536) GELU by F16 input (kernel_gelu_table), Gemma only; else NULL */
    const float *rope_factors; /* (rope_dim/2) frequency divisors or NULL: rope_freqs, else
                                  LongRoPE's short or long set for max_ctx */
    /* RoPE in the model's pair order (chosen at create from the arch) */
    void (*rope_apply)(float *x, const float *cs, uint32_t n_heads, uint32_t head_dim,
                       uint32_t rope_dim);
    /* per-thread attention scratch: attn_rows_scratch(group, head_dim, max_ctx) */
    float *scores;
    size_t scores_stride;
    float *buf; /* one allocation for all of the above */
    /* attention row runs of one step: run i is rows [run_first[i], run_first[i + 1]),
     * consecutive positions of one sequence, at most ATTN_ROWS (max_rows + 1 entries) */
    uint32_t *run_first;
    moe_state *moe;      /* the experts' scratch (a mixture of experts), else NULL */
    fwd_step_stats last; /* what the last llama_forward read */
    /* a hybrid stack (llama_arch.hybrid), else NULL: the gated attention's
     * Q projection (per head Q then gate) and gates, the linear layers' rows,
     * and the step's sequence runs for them */
    float *qfull, *gate;
    lin_rows lin;
    uint32_t *lin_first, *row_seq, *row_pos, *row_ckpt;
    float *hybrid_buf;
    lin_runs runs;
    /* latent attention (llama_config.kv_lora_rank), else NULL: Q as projected (n_heads *
     * mla_k a row), Q's bottleneck (q_lora_rank), the heads' values (n_heads * mla_v) */
    mla_state *mla;
    float *mla_q, *mla_qa, *mla_o;
};

static void rope_apply_norm(float *x, const float *cs, uint32_t n_heads, uint32_t head_dim,
                            uint32_t rope_dim);
static void rope_apply_neox(float *x, const float *cs, uint32_t n_heads, uint32_t head_dim,
                            uint32_t rope_dim);

/* Layer l's attention shape: head size, KV heads, RoPE width, Q and K/V
 * widths (Gemma 4's sliding layers have their own; every other
 * architecture's layers share the config's). */
typedef struct layer_shape {
    uint32_t hd, n_kv, rope_dim, group;
    size_t q_dim, kv_dim;
} layer_shape;

static layer_shape shape_of(const llama_config *c, uint32_t l) {
    layer_shape ls = {.hd = llama_config_head_dim(c, l),
                      .n_kv = llama_config_kv_heads(c, l),
                      .rope_dim = llama_config_rope_dim(c, l)};
    ls.group = c->n_heads / ls.n_kv;
    ls.q_dim = (size_t)c->n_heads * ls.hd;
    ls.kv_dim = (size_t)ls.n_kv * ls.hd;
    return ls;
}

/* The widest of every layer's shape (each field alone), and the most
 * attention scratch a layer needs. */
static layer_shape widest_shape(const llama_config *c, uint32_t max_ctx, size_t *scores) {
    layer_shape w = shape_of(c, 0);
    *scores = 0;
    for (uint32_t l = 0; l < c->n_layers; l++) {
        const layer_shape ls = shape_of(c, l);
        const size_t sc = attn_rows_scratch(ls.group, ls.hd, max_ctx);
        if (sc > *scores) *scores = sc;
        if (ls.hd > w.hd) w.hd = ls.hd;
        if (ls.n_kv > w.n_kv) w.n_kv = ls.n_kv;
        if (ls.rope_dim > w.rope_dim) w.rope_dim = ls.rope_dim;
        if (ls.q_dim > w.q_dim) w.q_dim = ls.q_dim;
        if (ls.kv_dim > w.kv_dim) w.kv_dim = ls.kv_dim;
    }
    return w;
}

/* A hybrid stack's scratch: the gated attention's Q and gates, the linear
 * layers' rows, the runs. */
static int hybrid_alloc(fwd_state *s, const llama_config *c, size_t max_rows, tps_err *err) {
    const size_t q_dim = (size_t)c->n_heads * c->head_dim;
    const size_t ch = llama_config_conv_channels(c), inner = (size_t)c->ssm_v_heads * c->ssm_state;
    const size_t per_row = 3 * q_dim + 2 * ch + 2 * inner + 2 * (size_t)c->ssm_v_heads;
    s->hybrid_buf = malloc(sizeof(float) * per_row * max_rows);
    s->lin_first = malloc(sizeof(uint32_t) * (max_rows + 1));
    s->row_seq = malloc(sizeof(uint32_t) * max_rows);
    s->row_pos = malloc(sizeof(uint32_t) * max_rows);
    s->row_ckpt = malloc(sizeof(uint32_t) * max_rows);
    if (!s->hybrid_buf || !s->lin_first || !s->row_seq || !s->row_pos || !s->row_ckpt)
        return tps_fail(err, TPS_ENOMEM, "forward: out of memory for the linear layers' scratch");
    float *p = s->hybrid_buf;
    s->qfull = p, p += 2 * q_dim * max_rows;
    s->gate = p, p += q_dim * max_rows;
    s->lin.qkv = p, p += ch * max_rows;
    s->lin.conv = p, p += ch * max_rows;
    s->lin.z = p, p += inner * max_rows;
    s->lin.out = p, p += inner * max_rows;
    s->lin.beta = p, p += (size_t)c->ssm_v_heads * max_rows;
    s->lin.alpha = p;
    return 0;
}

/* Latent attention's scratch: Q as projected, its bottleneck, the heads'
 * values (one allocation), and the per-head products' own. */
static int mla_alloc(fwd_state *s, const llama_config *c, size_t max_rows, tps_err *err) {
    const size_t per_row = (size_t)c->n_heads * (c->mla_k + c->mla_v) + (size_t)c->q_lora_rank;
    s->mla_q = malloc(sizeof(float) * per_row * max_rows);
    if (!s->mla_q) return tps_fail(err, TPS_ENOMEM, "forward: out of memory for latent attention");
    s->mla_qa = s->mla_q + (size_t)c->n_heads * c->mla_k * max_rows;
    s->mla_o = s->mla_qa + (size_t)c->q_lora_rank * max_rows;
    return mla_state_create(&s->mla, s->kc, c, max_rows, err);
}

/* The widest dense FFN: 0 when every layer's FFN is experts alone. */
static size_t dense_ffn_width(const llama_config *c) {
    if (c->n_expert && !c->n_dense_lead && !c->dense_with_experts) return 0;
    return c->ffn_dim_shared > c->ffn_dim ? c->ffn_dim_shared : c->ffn_dim;
}

/* The kernels' context (sized for the widest matmul input) and the
 * scratch of the experts and of a hybrid stack's layers, where the model
 * has them. */
static int create_kernels_and_extras(fwd_state *s, const llama_config *c, size_t max_rows,
                                     int n_threads, tps_err *err) {
    size_t scores;
    const size_t q_dim = widest_shape(c, 1, &scores).q_dim;
    const size_t ffn = dense_ffn_width(c);
    size_t max_in = ffn > c->dim ? ffn : c->dim;
    if (q_dim > max_in) max_in = q_dim;
    if (c->expert_ffn > max_in) max_in = c->expert_ffn;
    if (c->shexp_ffn > max_in) max_in = c->shexp_ffn;
    if (c->arch_info->hybrid && (size_t)c->ssm_v_heads * c->ssm_state > max_in)
        max_in = (size_t)c->ssm_v_heads * c->ssm_state; /* ssm_out's input */
    /* a mixture of experts quantizes one activation row per (row, expert) slot */
    const size_t kc_rows = c->n_expert ? moe_max_slots(c, max_rows) : max_rows;
    int rc = kernel_ctx_create(&s->kc, n_threads, kc_rows, max_in, err);
    if (!rc && c->n_expert) rc = moe_state_create(&s->moe, c, max_rows, err);
    if (!rc && c->arch_info->hybrid) rc = hybrid_alloc(s, c, max_rows, err);
    if (!rc && c->kv_lora_rank) rc = mla_alloc(s, c, max_rows, err);
    if (!rc && c->n_embd_pl) rc = ple_state_create(&s->ple, c, max_rows, err);
    return rc;
}

int fwd_state_create(fwd_state **out, const llama_model *m, size_t max_rows, uint32_t max_ctx,
                     int n_threads, tps_err *err) {
    *out = NULL;
    const llama_config *c = &m->cfg;
    if (max_rows == 0) return tps_fail(err, TPS_EINVAL, "forward: max_rows must be >= 1");
    if (n_threads <= 0) n_threads = omp_get_max_threads();
    fwd_state *s = calloc(1, sizeof *s);
    if (!s) return tps_fail(err, TPS_ENOMEM, "forward: out of memory");
    s->max_rows = max_rows;
    s->max_ctx = max_ctx;
    s->n_threads = n_threads;
    const layer_shape wide = widest_shape(c, max_ctx, &s->scores_stride);
    const size_t q_dim = wide.q_dim, kv_dim = wide.kv_dim;
    s->rope_stride = wide.rope_dim;
    /* the experts have their own scratch; dense layers and FFNs need this one */
    const size_t ffn = dense_ffn_width(c);
    size_t per_row = 3 * (size_t)c->dim + 2 * q_dim + 2 * kv_dim + 2 * ffn + c->n_vocab;
    size_t total = per_row * max_rows + (size_t)wide.rope_dim * n_threads +
                   s->scores_stride * (size_t)n_threads + wide.hd;
    s->buf = aligned_alloc(64, (total * sizeof(float) + 63) / 64 * 64);
    s->run_first = malloc((max_rows + 1) * sizeof *s->run_first);
    if (!s->buf || !s->run_first) {
        free(s->run_first);
        free(s->buf);
        free(s);
        return tps_fail(err, TPS_ENOMEM, "forward: cannot allocate %zu MiB of step scratch",
                        total * sizeof(float) >> 20);
    }
    float *p = s->buf;
#define TAKE(field, n)                                                                             \
    s->field = p;                                                                                  \
    p += (n)
    TAKE(x, max_rows * c->dim);
    TAKE(xb, max_rows * c->dim);
    TAKE(proj, max_rows * c->dim);
    TAKE(q, max_rows * q_dim);
    TAKE(att, max_rows * q_dim);
    TAKE(k, max_rows * kv_dim);
    TAKE(v, max_rows * kv_dim);
    TAKE(hb, max_rows * ffn);
    TAKE(hb2, max_rows * ffn);
    TAKE(logits, max_rows * c->n_vocab);
    TAKE(rope, (size_t)wide.rope_dim * n_threads);
    TAKE(scores, s->scores_stride * (size_t)n_threads);
    TAKE(ones, wide.hd);
#undef TAKE
    /* Fault the rows' scratch in now, not on a step's critical path: a
     * 512-row prefill spent 4% of its time in page faults inside the
     * matmul tiles writing it (perf). The first step of max_rows rows would
     * touch all of it anyway. The logits are left alone: only the rows that
     * sample touch theirs (n_vocab floats each). */
    memset(s->x, 0, (size_t)(s->logits - s->x) * sizeof(float));
    memset(s->rope, 0, (size_t)(p - s->rope) * sizeof(float));
    for (uint32_t i = 0; i < wide.hd; i++)
        s->ones[i] = 1.0f;
    s->rope_apply = c->arch_info->rope_neox ? rope_apply_neox : rope_apply_norm;
    /* LongRoPE: llama.cpp picks the long factors when the context exceeds the
     * original one; ours is max_ctx */
    s->rope_factors = m->w.rope_freqs              ? m->w.rope_freqs
                      : max_ctx > c->rope_orig_ctx ? m->w.rope_long
                                                   : m->w.rope_short;
    if (c->arch_info->gemma) {
        s->gelu = malloc(65536 * sizeof *s->gelu);
        if (!s->gelu) {
            fwd_state_free(s);
            return tps_fail(err, TPS_ENOMEM, "forward: out of memory for the GELU table");
        }
        kernel_gelu_table(s->gelu);
    }
    int rc = create_kernels_and_extras(s, c, max_rows, n_threads, err);
    if (rc) {
        fwd_state_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void fwd_state_free(fwd_state *s) {
    if (!s) return;
    moe_state_free(s->moe);
    mla_state_free(s->mla);
    ple_state_free(s->ple);
    kernel_ctx_free(s->kc);
    TPS_FREE_ALL(s->mla_q, s->hybrid_buf, s->lin_first, s->row_seq, s->row_pos, s->row_ckpt,
                 s->gelu, s->run_first, s->buf, s);
}

kernel_ctx *fwd_state_kernels(fwd_state *s) {
    return s->kc;
}

fwd_step_stats fwd_state_last_step(const fwd_state *s) {
    return s->last;
}

/* Interleaved M-RoPE (Qwen3.5) with text positions (ggml_mrope_cache_init
 * with is_imrope, the t, h and w ids all the position, the 4th 0): pair p
 * of sector p % (sum of sections) turns by the position when its sector is
 * in the interleaved t, h or w range, else by 0. */
static int rope_pair_turns(const uint32_t sec[4], uint32_t p) {
    const uint32_t sector = p % (sec[0] + sec[1] + sec[2] + sec[3]);
    return (sector % 3 == 1 && sector < 3 * sec[1]) || (sector % 3 == 2 && sector < 3 * sec[2]) ||
           (sector % 3 == 0 && sector < 3 * sec[0]);
}

/* RoPE angles: pair i rotates by freq_scale * pos * base^(-2i/rope_dim) /
 * factors[i] (factors: Llama 3.1's rope_freqs, NULL for none; freq_scale:
 * 1 / linear rope.scaling.factor); cos and sin are multiplied by mscale
 * (rope.scaling.attn_factor, 1 unless LongRoPE); the angle is stepped by
 * repeated multiplication in float, as ggml does, so rounding tracks
 * llama.cpp. */
static void rope_table(float *cs, uint32_t pos, uint32_t rope_dim, float base, float freq_scale,
                       const float *factors, float mscale, const llama_config *c) {
    float theta_scale = powf(base, -2.0f / (float)rope_dim);
    float theta = (float)pos;
    if (c->rope_ext_factor != 0) { /* YaRN: ggml's rope_yarn, its float steps in order */
        mscale *= 1.0f + 0.1f * logf(1.0f / freq_scale);
        const float lo = c->rope_yarn_corr[0], hi = c->rope_yarn_corr[1];
        for (uint32_t i = 0; i < rope_dim; i += 2) {
            const float extrap = factors ? theta / factors[i / 2] : theta;
            const float interp = freq_scale * extrap;
            const float y = ((float)(i / 2) - lo) / fmaxf(0.001f, hi - lo);
            const float mix = (1 - fminf(1, fmaxf(0, y))) * c->rope_ext_factor;
            const float t = interp * (1 - mix) + extrap * mix;
            cs[i] = cosf(t) * mscale;
            cs[i + 1] = sinf(t) * mscale;
            theta *= theta_scale;
        }
        return;
    }
    for (uint32_t i = 0; i < rope_dim; i += 2) {
        float t = freq_scale * (factors ? theta / factors[i / 2] : theta);
        if (c->rope_sections[0] + c->rope_sections[1] + c->rope_sections[2] + c->rope_sections[3] &&
            !rope_pair_turns(c->rope_sections, i / 2))
            t = 0; /* ggml's 4th position id, 0 for text */
        cs[i] = cosf(t) * mscale;
        cs[i + 1] = sinf(t) * mscale;
        theta *= theta_scale;
    }
}

/* GGUF llama order: pair i is (x[2i], x[2i+1]). */
static void rope_apply_norm(float *x, const float *cs, uint32_t n_heads, uint32_t head_dim,
                            uint32_t rope_dim) {
    for (uint32_t h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * head_dim;
        for (uint32_t i = 0; i < rope_dim; i += 2) {
            float x0 = v[i], x1 = v[i + 1];
            v[i] = x0 * cs[i] - x1 * cs[i + 1];
            v[i + 1] = x0 * cs[i + 1] + x1 * cs[i];
        }
    }
}

/* GPT-NeoX order (qwen2, qwen3): pair i is (x[i], x[i + rope_dim/2]). */
static void rope_apply_neox(float *x, const float *cs, uint32_t n_heads, uint32_t head_dim,
                            uint32_t rope_dim) {
    const uint32_t half = rope_dim / 2;
    for (uint32_t h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * head_dim;
        for (uint32_t i = 0; i < half; i++) {
            const float c = cs[2 * i], sn = cs[2 * i + 1];
            float x0 = v[i], x1 = v[i + half];
            v[i] = x0 * c - x1 * sn;
            v[i + half] = x0 * sn + x1 * c;
        }
    }
}

/* The per-row steps between the Q/K/V projections and RoPE that some
 * architectures add: biases (when the file has them), then per-head RMSNorm
 * of Q and K (qwen3). Each is per row, so batch invariance holds. */
static void qkv_post(float *q, float *k, float *v, const llama_layer *L, const llama_config *c,
                     const layer_shape *ls, const float *ones) {
    const size_t hd = ls->hd;
    if (L->bq) kernel_add(q, q, L->bq, ls->q_dim);
    if (L->q_norm)
        for (uint32_t h = 0; h < c->n_heads; h++)
            kernel_rmsnorm(q + h * hd, q + h * hd, L->q_norm, hd, c->rms_eps);
    if (!k) return; /* a layer reading another's K/V (Gemma 4) */
    if (L->bk) kernel_add(k, k, L->bk, ls->kv_dim);
    if (L->bv) kernel_add(v, v, L->bv, ls->kv_dim);
    if (L->k_norm)
        for (uint32_t h = 0; h < ls->n_kv; h++)
            kernel_rmsnorm(k + h * hd, k + h * hd, L->k_norm, hd, c->rms_eps);
    if (c->arch_info->gemma4) /* V RMS-normed without a weight (ggml_rms_norm) */
        for (uint32_t h = 0; h < ls->n_kv; h++)
            kernel_rmsnorm(v + h * hd, v + h * hd, ones, hd, c->rms_eps);
}

/* Attention of one step and layer, for the pool: task t is (row run
 * n_runs - 1 - t / n_chunks, kv heads chunk t % n_chunks), heads_per_task
 * heads a chunk. Last runs first: a prompt's later runs attend to more
 * positions, and the pool's threads claim tasks in order, so the largest
 * go first and the short ones fill in at the end (in a 512-token prefill
 * the last run's tasks are 30x the first's). */
typedef struct attn_job {
    fwd_state *s;
    const llama_config *cfg;
    const fwd_batch *b;
    const kv_cache *kv;
    uint32_t layer;
    float scale;
    attn_mods mods;
    uint32_t heads_per_task;
    uint32_t q_per_task; /* query heads of a group a task: the group, or part of the one KV
                            head's (latent attention), so its queries spread over threads */
    size_t n_runs;
    layer_shape ls; /* the attended layer's shape (a shared layer's is its source's) */
} attn_job;

static size_t attn_chunks(const attn_job *j) {
    return (j->ls.n_kv + j->heads_per_task - 1) / j->heads_per_task;
}

/* Tasks a run takes: its chunks of KV heads, each split in query parts. */
static size_t attn_run_tasks(const attn_job *j) {
    return attn_chunks(j) * ((j->ls.group + j->q_per_task - 1) / j->q_per_task);
}

static void attn_task(void *arg, size_t t, int thread) {
    const attn_job *j = arg;
    fwd_state *s = j->s;
    const size_t q_dim = j->ls.q_dim;
    const uint32_t hd = j->ls.hd, n_kv = j->ls.n_kv;
    const size_t per_run = attn_run_tasks(j), n_chunks = attn_chunks(j);
    const size_t run = j->n_runs - 1 - t / per_run, n_q = per_run / n_chunks;
    const uint32_t h0 = (uint32_t)(t % per_run / n_q) * j->heads_per_task;
    const uint32_t h1 = h0 + j->heads_per_task < n_kv ? h0 + j->heads_per_task : n_kv;
    /* a query part (n_q > 1: one KV head a task) is a group of its own: each
     * query head's scores and outputs are computed alone, so the bits do not
     * depend on the split */
    const uint32_t g0 = (uint32_t)(t % n_q) * j->q_per_task, full = j->ls.group;
    const uint32_t group = n_q == 1 ? full : g0 + j->q_per_task < full ? j->q_per_task : full - g0;
    const size_t r = s->run_first[run];
    const uint32_t n_rows = s->run_first[run + 1] - s->run_first[run];
    const fwd_row *row = &j->b->rows[r];
    float *scratch = s->scores + s->scores_stride * (size_t)thread;
    const size_t off = r * q_dim + ((size_t)h0 * full + g0) * hd;
    if (n_rows == 1) {
        attn_heads(s->att + off, s->q + off, j->kv, j->b->seqs[row->seq], j->layer, h0, h1, group,
                   hd, row->pos + 1, j->scale, j->mods, scratch);
        return;
    }
    for (uint32_t h = h0; h < h1; h++) {
        const size_t o = off + (size_t)(h - h0) * group * hd;
        attn_group_rows(s->att + o, s->q + o, q_dim, j->kv, j->b->seqs[row->seq], j->layer, h,
                        group, hd, row->pos + 1, n_rows, j->scale, j->mods, scratch);
    }
}

/* KV heads per attention task. A step of single-row runs (decode) reads
 * each task's heads a block at a time across them (attn_heads), split so
 * that the step still has 2 tasks a thread: one sequence alone gets a
 * quarter of its heads a task on 2 threads, and 4 or more sequences all of
 * theirs. One sequence at context 1560 (110M shape, F16, 2 threads; a bench
 * of the layer loop, caches flushed): heads one a task 2.06-2.24 ms, three
 * 1.78-1.81 ms, six 1.67-1.92 ms, all twelve on one thread 3.7 ms. A
 * prompt's runs go one head a task. At most ATTN_ROWS heads: the scratch
 * holds ATTN_ROWS * group * max_ctx scores per thread. */
static uint32_t attn_heads_per_task(uint32_t n_kv, size_t n_runs, size_t n_rows, int n_threads) {
    if (n_runs == 0 || n_runs != n_rows) return 1;
    const uint32_t most = n_kv < ATTN_ROWS ? n_kv : ATTN_ROWS;
    const size_t split = (2 * (size_t)n_threads + n_runs - 1) / n_runs; /* tasks per row */
    const uint32_t per = (uint32_t)((n_kv + split - 1) / split);
    return per < most ? per : most;
}

/* Query heads of a group per attention task: the whole group, but where
 * the model has one KV head (latent attention) and the step too few runs
 * for 2 tasks a thread, a share of its query heads, so one sequence's
 * decode spreads over the threads. */
static uint32_t attn_q_per_task(const layer_shape *ls, size_t n_runs, int n_threads,
                                attn_mods mods) {
    const uint32_t group = ls->group;
    if (ls->n_kv != 1 || mods.sinks || n_runs == 0) return group;
    size_t split = (2 * (size_t)n_threads + n_runs - 1) / n_runs;
    if (split > group) split = group;
    return (uint32_t)((group + split - 1) / split);
}

/* K/V row into the cache. F16: F16C's round-to-nearest-even, the same
 * halves as fp32_to_fp16 for every finite value, eight at a time. Q8_0:
 * the activation quantizer (bit-identical to quantize_row_q8_0_ref). */
static void store_row(void *dst, const float *src, size_t n, uint32_t kv_type) {
    if (kv_type == GGML_TYPE_Q8_0) {
        quantize_row_q8_0(dst, src, n);
        return;
    }
    if (kv_type != GGML_TYPE_F16) {
        memcpy(dst, src, n * sizeof(float));
        return;
    }
    uint16_t *h = dst;
    size_t i = 0;
#if defined(__F16C__) && defined(__AVX__)
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(h + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
#endif
    fp32_to_fp16_row(h + i, src + i, n - i);
}

static int mm(fwd_state *s, float *out, const llama_mat *w, const float *x, size_t n_rows,
              tps_err *err) {
    const kernel_mat k = kmat(out, w);
    int rc = kernel_matmul(out, k.W, k.wtype, x, n_rows, w->cols, w->rows, s->kc);
    if (rc)
        return tps_fail(err, rc, "forward: matmul failed (type %u, %u x %u)", w->type, w->rows,
                        w->cols);
    return 0;
}

/* Matrices that read the same input (Q/K/V; gate/up): one quantization,
 * one parallel region. Each must take n_in inputs (checked at load). */
static int mm_multi(const kernel_mat *mats, size_t n_mats, fwd_state *s, const float *x,
                    size_t n_rows, size_t n_in, tps_err *err) {
    int rc = kernel_matmul_multi(mats, n_mats, x, n_rows, n_in, s->kc);
    if (rc)
        return tps_fail(err, rc, "forward: matmul failed (type %u, %zu inputs)", mats[0].wtype,
                        n_in);
    return 0;
}

/* Checks every row (token in the vocabulary, a KV slot for its position)
 * and writes its token's embedding into x. */
static int embed_rows(fwd_state *s, const llama_model *m, const kv_cache *kv, const fwd_batch *b,
                      tps_err *err) {
    const llama_config *c = &m->cfg;
    const size_t n = b->n_rows, dim = c->dim;
    for (size_t r = 0; r < n; r++) {
        const fwd_row *row = &b->rows[r];
        if (row->token < 0 || (uint32_t)row->token >= c->n_vocab)
            return tps_fail(err, TPS_EINVAL, "forward: token id %d outside the vocabulary (%u)",
                            row->token, c->n_vocab);
        const kv_seq *seq = b->seqs[row->seq];
        if (row->pos >= s->max_ctx || row->pos >= (uint64_t)seq->n_blocks * kv->block_tokens)
            return tps_fail(err, TPS_EINVAL,
                            "forward: position %u has no KV slot (sequence holds %u blocks)",
                            row->pos, seq->n_blocks);
        int rc = kernel_get_row(s->x + r * dim, m->w.token_embd.data, m->w.token_embd.type,
                                (size_t)row->token, dim);
        if (rc) return tps_fail(err, rc, "forward: cannot read the token embedding");
        if (c->arch_info->gemma) kernel_scale(s->x + r * dim, sqrtf((float)dim), dim);
    }
    return 0;
}

/* Attention runs: consecutive positions of one sequence share K/V
 * widening. Fills run_first (n_runs + 1 entries); returns n_runs. */
static size_t plan_runs(fwd_state *s, const fwd_batch *b) {
    const size_t n = b->n_rows;
    size_t n_runs = 0;
    for (size_t r = 0; r < n; r++) {
        const fwd_row *row = &b->rows[r];
        if (r == 0 || row->seq != row[-1].seq || row->pos != row[-1].pos + 1 ||
            r - s->run_first[n_runs - 1] == ATTN_ROWS)
            s->run_first[n_runs++] = (uint32_t)r;
    }
    s->run_first[n_runs] = (uint32_t)n;
    return n_runs;
}

/* Q's scale, and the scale attention applies: Gemma and Phi-3 scale Q
 * before attention (Gemma's 27B models by 1/sqrt(dim/heads), as llama.cpp
 * does) and attend with scale 1. */
typedef struct q_scales {
    float q, attn;
} q_scales;

static q_scales scales_of(const llama_config *c) {
    if (c->kv_lora_rank) { /* DeepSeek: llama.cpp's kq_scale, YaRN's mscale squared, its float
                              steps in order */
        const float fs = c->rope_scale;
        const float org = c->rope_attn_factor * (1.0f + 0.1f * logf(1.0f / fs));
        const float ms = org * (1.0f + 0.1f * c->yarn_log_mul * logf(1.0f / fs));
        const float kq = 1.0f * ms * ms / sqrtf((float)c->mla_k);
        return (q_scales){.q = kq, .attn = kq};
    }
    if (c->arch_info->gemma4) return (q_scales){.q = 1.0f, .attn = 1.0f}; /* scaling 1 */
    const int big_gemma = (c->arch_info->id == LLAMA_ARCH_GEMMA2 && c->n_layers == 46) ||
                          (c->arch_info->id == LLAMA_ARCH_GEMMA3 && c->n_layers == 62);
    const float q = 1.0f / sqrtf(big_gemma ? (float)(c->dim / c->n_heads) : (float)c->head_dim);
    return (q_scales){.q = q, .attn = c->arch_info->q_prescale ? 1.0f : q};
}

/* A layer's work on each row alone (norms, Q/K/V's biases, norms, RoPE
 * and store, the FFN's activation, the residual adds): the pool's threads
 * take runs of rows when there are many. Each row's values are computed as on one thread, so the
 * split does not move bits. Done by the caller alone they were about 2.5% of a 512-token prefill on
 * 2 threads (AVX2 tier), the other thread idle. */
typedef struct rows_job {
    fwd_state *s;
    const llama_config *c;
    const llama_layer *L;
    void (*row)(const struct rows_job *j, size_t r, int thread);
    size_t n, per_task;
    /* Q/K/V rows (qkv_row) only */
    const fwd_batch *b;
    kv_cache *kv;
    uint32_t layer;
    float rope_base, rope_scale, q_scale;
    layer_shape ls;
    const float *rope_factors; /* the layer's (Gemma 4's sliding layers have none) */
    int own_kv;                /* 0: the layer reads another's K/V: Q alone */
    int v_is_k;                /* 1: no attn_v: V is K's projection (Gemma 4) */
} rows_job;

#define ROWS_ON_POOL 16 /* rows from which the pool shares the work */

static void rows_task(void *arg, size_t t, int thread) {
    const rows_job *j = arg;
    const size_t end = pool_rows_end(t, j->per_task, j->n);
    for (size_t r = t * j->per_task; r < end; r++)
        j->row(j, r, thread);
}

/* Runs j's row function on rows [0, j->n). */
static void run_rows(rows_job *j) {
    tps_pool *pool = kernel_ctx_pool(j->s->kc); /* first: j->n is then read once, after the call */
    pool_rows_run(pool, j->n, &j->per_task, ROWS_ON_POOL, rows_task, j);
}

static void each_row(fwd_state *s, const llama_config *c, const llama_layer *L, size_t n,
                     void (*row)(const rows_job *j, size_t r, int thread)) {
    rows_job j = {.s = s, .c = c, .L = L, .row = row, .n = n};
    run_rows(&j);
}

static void attn_norm_row(const rows_job *j, size_t r, int thread) {
    (void)thread;
    const size_t dim = j->c->dim;
    kernel_rmsnorm(j->s->xb + r * dim, j->s->x + r * dim, j->L->attn_norm, dim, j->c->rms_eps);
}

static void ffn_norm_row(const rows_job *j, size_t r, int thread) {
    (void)thread;
    const size_t dim = j->c->dim;
    kernel_rmsnorm(j->s->xb + r * dim, j->s->x + r * dim, j->L->ffn_norm, dim, j->c->rms_eps);
}

/* x += post_norm(proj [+ bias]), the bias and post-norm where the
 * architecture has them. */
static void residual_row(const rows_job *j, size_t r, const float *bias, const float *post_norm) {
    const size_t dim = j->c->dim;
    float *p = j->s->proj + r * dim;
    if (bias) kernel_add(p, p, bias, dim);
    if (post_norm) kernel_rmsnorm(p, p, post_norm, dim, j->c->rms_eps);
    kernel_add(j->s->x + r * dim, j->s->x + r * dim, p, dim);
}

static void attn_residual_row(const rows_job *j, size_t r, int thread) {
    (void)thread;
    residual_row(j, r, j->L->bo, j->L->attn_post_norm);
}

static void ffn_residual_row(const rows_job *j, size_t r, int thread) {
    (void)thread;
    residual_row(j, r, NULL, j->L->ffn_post_norm);
}

static void ffn_act_row(const rows_job *j, size_t r, int thread) {
    (void)thread;
    const size_t ff = j->L->w_gate.rows; /* the layer's width (Gemma 4's may differ) */
    float *g = j->s->hb + r * ff, *u = j->s->hb2 + r * ff;
    if (j->c->arch_info->gemma)
        kernel_geglu(g, g, u, ff, j->s->gelu);
    else
        kernel_swiglu(g, g, u, ff);
}

/* A hybrid stack's Q projection holds per head its Q then its output gate:
 * row r's into q and gate. */
static void split_q_gate(fwd_state *s, const llama_config *c, size_t r) {
    const size_t hd = c->head_dim, q_dim = (size_t)c->n_heads * hd;
    const float *qf = s->qfull + r * 2 * q_dim;
    for (uint32_t h = 0; h < c->n_heads; h++) {
        memcpy(s->q + r * q_dim + h * hd, qf + 2 * h * hd, hd * sizeof(float));
        memcpy(s->gate + r * q_dim + h * hd, qf + (2 * h + 1) * hd, hd * sizeof(float));
    }
}

/* Row r's attention output times the sigmoid of its gate (hybrid stacks). */
static void attn_gate_row(const rows_job *j, size_t r, int thread) {
    (void)thread;
    const size_t q_dim = (size_t)j->c->n_heads * j->c->head_dim;
    float *a = j->s->att + r * q_dim;
    const float *g = j->s->gate + r * q_dim;
    for (size_t i = 0; i < q_dim; i++)
        a[i] *= 1.0f / (1.0f + expf(-g[i]));
}

/* Row r's Q, K and V after the projections (biases, norms), rotated, and
 * its K and V into the cache; the RoPE table is the thread's own. */
static void qkv_row(const rows_job *j, size_t r, int thread) {
    fwd_state *s = j->s;
    const llama_config *c = j->c;
    const layer_shape *ls = &j->ls;
    const size_t q_dim = ls->q_dim, kv_dim = ls->kv_dim, hd = ls->hd;
    const fwd_row *row = &j->b->rows[r];
    float *cs = s->rope + (size_t)thread * s->rope_stride, *q = s->q + r * q_dim;
    float *k = j->own_kv ? s->k + r * kv_dim : NULL, *v = j->own_kv ? s->v + r * kv_dim : NULL;
    if (s->qfull) split_q_gate(s, c, r);
    if (j->v_is_k) memcpy(v, k, kv_dim * sizeof(float)); /* before K's norm and RoPE */
    qkv_post(q, k, v, j->L, c, ls, s->ones);
    rope_table(cs, row->pos, ls->rope_dim, j->rope_base, j->rope_scale, j->rope_factors,
               c->rope_attn_factor, c);
    s->rope_apply(q, cs, c->n_heads, ls->hd, ls->rope_dim);
    if (c->arch_info->q_prescale) kernel_scale(q, j->q_scale, q_dim);
    if (!k) return;
    s->rope_apply(k, cs, ls->n_kv, ls->hd, ls->rope_dim);
    const kv_seq *seq = j->b->seqs[row->seq];
    for (uint32_t h = 0; h < ls->n_kv; h++) {
        store_row(kv_k_head(j->kv, seq, j->layer, row->pos, h), k + h * hd, hd, j->kv->kv_type);
        store_row(kv_v_head(j->kv, seq, j->layer, row->pos, h), v + h * hd, hd, j->kv->kv_type);
    }
}

/* s->att <- attention of every row's Q (s->q) over its own blocks of layer
 * l: tasks of (run, kv heads), so the group's query heads and the run's
 * rows share each K/V block read. */
static void run_attention(fwd_state *s, const llama_config *c, const fwd_batch *b,
                          const kv_cache *kv, uint32_t l, size_t n_runs, float scale,
                          attn_mods mods) {
    tps_pool *pool = kernel_ctx_pool(s->kc);
    attn_job aj = {.s = s,
                   .cfg = c,
                   .b = b,
                   .kv = kv,
                   .layer = l,
                   .scale = scale,
                   .mods = mods,
                   .ls = shape_of(c, l)};
    const int nth = tps_pool_threads(pool);
    aj.heads_per_task = attn_heads_per_task(aj.ls.n_kv, n_runs, b->n_rows, nth);
    aj.n_runs = n_runs;
    aj.q_per_task = attn_q_per_task(&aj.ls, n_runs, nth, mods);
    tps_pool_run_any(pool, n_runs * attn_run_tasks(&aj), attn_task, &aj);
}

/* x += attention(norm(x)) for layer l: Q, K, V, RoPE, the rows' K and V
 * into the cache, attention over each row's own blocks, the output
 * projection. */
static int attention_layer(fwd_state *s, const llama_model *m, kv_cache *kv, const fwd_batch *b,
                           uint32_t l, size_t n_runs, q_scales qs, tps_err *err) {
    const llama_config *c = &m->cfg;
    const llama_layer *L = &m->w.layers[l];
    const size_t n = b->n_rows;
    const int swa = llama_config_is_swa(c, l), own = llama_config_stores_kv(c, l);
    int rc;
    each_row(s, c, L, n, attn_norm_row);
    /* Q, K, V; Q and K alone when V is K's projection; Q alone for a layer
     * reading another's K/V (Gemma 4) */
    const kernel_mat qkv[3] = {kmat(s->qfull ? s->qfull : s->q, &L->wq), kmat(s->k, &L->wk),
                               kmat(s->v, &L->wv)};
    if ((rc = mm_multi(qkv, !own ? 1 : L->wv.data ? 3 : 2, s, s->xb, n, c->dim, err))) return rc;
    rows_job post = {.s = s,
                     .c = c,
                     .L = L,
                     .row = qkv_row,
                     .n = n,
                     .b = b,
                     .kv = kv,
                     .layer = l,
                     .rope_base = swa ? c->rope_base_swa : c->rope_base,
                     .rope_scale = swa ? c->rope_scale_swa : c->rope_scale,
                     .q_scale = qs.q,
                     .ls = shape_of(c, l),
                     .rope_factors = c->arch_info->gemma4 && swa ? NULL : s->rope_factors,
                     .own_kv = own,
                     .v_is_k = own && !L->wv.data};
    run_rows(&post);
    const attn_mods mods = {
        .window = swa ? c->n_swa : 0, .softcap = c->attn_softcap, .sinks = L->sinks};
    run_attention(s, c, b, kv, llama_config_kv_source(c, l), n_runs, qs.attn, mods);
    if (s->qfull) each_row(s, c, L, n, attn_gate_row);
    if ((rc = mm(s, s->proj, &L->wo, s->att, n, err))) return rc;
    each_row(s, c, L, n, attn_residual_row);
    return 0;
}

/* Row r's Q bottleneck RMS-normed (latent attention with q_lora_rank). */
static void q_a_norm_row(const rows_job *j, size_t r, int thread) {
    (void)thread;
    const size_t qr = j->c->q_lora_rank;
    float *qa = j->s->mla_qa + r * qr;
    kernel_rmsnorm(qa, qa, j->L->q_a_norm, qr, j->c->rms_eps);
}

/* Row r's latent attention inputs after the projections: its heads' RoPE
 * parts of Q and the key's RoPE part rotated, the latent RMS-normed, the
 * latent row (latent, then the key's RoPE part) into the cache. */
static void mla_row(const rows_job *j, size_t r, int thread) {
    fwd_state *s = j->s;
    const llama_config *c = j->c;
    const size_t hd = c->head_dim, kvr = c->kv_lora_rank, qk = c->mla_k;
    const fwd_row *row = &j->b->rows[r];
    float *cs = s->rope + (size_t)thread * s->rope_stride, *lat = s->k + r * hd;
    rope_table(cs, row->pos, c->rope_dim, c->rope_base, c->rope_scale, s->rope_factors,
               c->rope_attn_factor, c);
    s->rope_apply(s->mla_q + r * c->n_heads * qk + (qk - c->rope_dim), cs, c->n_heads, qk,
                  c->rope_dim);
    s->rope_apply(lat + kvr, cs, 1, hd, c->rope_dim);
    kernel_rmsnorm(lat, lat, j->L->kv_a_norm, kvr, c->rms_eps);
    store_row(kv_k_head(j->kv, j->b->seqs[row->seq], j->layer, row->pos, 0), lat, hd,
              j->kv->kv_type);
}

/* x += latent attention(norm(x)) for layer l (DeepSeek's MLA, mla.h): Q
 * (through its bottleneck where the model has one) and the latent row
 * projected, RoPE, the latent into the cache, Q absorbed per head, attention
 * of every head over the latent (one KV head), each head's values out of
 * it, the output projection. */
static int mla_layer(fwd_state *s, const llama_model *m, kv_cache *kv, const fwd_batch *b,
                     uint32_t l, size_t n_runs, q_scales qs, tps_err *err) {
    const llama_config *c = &m->cfg;
    const llama_layer *L = &m->w.layers[l];
    const size_t n = b->n_rows;
    int rc;
    each_row(s, c, L, n, attn_norm_row);
    const kernel_mat in[2] = {L->wq_a.data ? kmat(s->mla_qa, &L->wq_a) : kmat(s->mla_q, &L->wq),
                              kmat(s->k, &L->wkv_a)};
    if ((rc = mm_multi(in, 2, s, s->xb, n, c->dim, err))) return rc;
    if (L->wq_a.data) {
        each_row(s, c, L, n, q_a_norm_row);
        if ((rc = mm(s, s->mla_q, &L->wq_b, s->mla_qa, n, err))) return rc;
    }
    rows_job post = {.s = s, .c = c, .L = L, .row = mla_row, .n = n, .b = b, .kv = kv, .layer = l};
    run_rows(&post);
    if ((rc = mla_absorb_q(s->mla, s->kc, c, L, s->mla_q, n, s->q, err))) return rc;
    run_attention(s, c, b, kv, l, n_runs, qs.attn, (attn_mods){.v_dim = c->kv_lora_rank});
    if ((rc = mla_values(s->mla, s->kc, c, L, s->att, n, s->mla_o, err))) return rc;
    if ((rc = mm(s, s->proj, &L->wo, s->mla_o, n, err))) return rc;
    each_row(s, c, L, n, attn_residual_row);
    return 0;
}

/* x += linear_attention(norm(x)) for layer l of a hybrid stack: Q/K/V,
 * gate, beta and alpha projected together, the recurrence
 * (linear_attn.c), the output projection. */
static int linear_layer(fwd_state *s, const llama_model *m, kv_cache *kv, const fwd_batch *b,
                        uint32_t l, tps_err *err) {
    const llama_config *c = &m->cfg;
    const llama_layer *L = &m->w.layers[l];
    const size_t n = b->n_rows;
    int rc;
    each_row(s, c, L, n, attn_norm_row);
    const kernel_mat in[4] = {kmat(s->lin.qkv, &L->ssm_qkv), kmat(s->lin.z, &L->ssm_gate),
                              kmat(s->lin.beta, &L->ssm_beta), kmat(s->lin.alpha, &L->ssm_alpha)};
    if ((rc = mm_multi(in, 4, s, s->xb, n, c->dim, err))) return rc;
    const lin_rows_of rows = {.seq = s->row_seq, .pos = s->row_pos, .ckpt = s->row_ckpt};
    linear_attn_step(kernel_ctx_pool(s->kc), c, L, kv, b->seqs, &rows, l, &s->runs, &s->lin);
    if ((rc = mm(s, s->proj, &L->ssm_out, s->lin.out, n, err))) return rc;
    each_row(s, c, L, n, attn_residual_row);
    return 0;
}

/* A hybrid stack's sequence runs for its linear layers: each sequence's
 * rows consecutive, each sequence holding a state slot; and the rows that
 * end a checkpointed block, with the checkpoint their state goes to. */
static int plan_linear_runs(fwd_state *s, kv_cache *kv, const fwd_batch *b, tps_err *err) {
    for (size_t r = 0; r < b->n_rows; r++) {
        const kv_seq *seq = b->seqs[b->rows[r].seq];
        s->row_seq[r] = b->rows[r].seq;
        s->row_pos[r] = b->rows[r].pos;
        if (!seq->state || !kv->n_recurrent)
            return tps_fail(err, TPS_EINVAL,
                            "forward: row %zu's sequence holds no recurrent state slot", r);
        s->row_ckpt[r] = kv_ckpt_attach(kv, seq, b->rows[r].pos + 1);
    }
    s->runs = (lin_runs){.first = s->lin_first,
                         .n = linear_attn_plan(s->lin_first, s->row_seq, s->row_pos, b->n_rows)};
    if (!s->runs.n)
        return tps_fail(err, TPS_EINVAL,
                        "forward: a hybrid model needs each sequence's rows of a step together, "
                        "in position order");
    return 0;
}

static void post_norm_1_row(const rows_job *j, size_t r, int thread) {
    (void)thread;
    float *p = j->s->proj + r * j->c->dim;
    kernel_rmsnorm(p, p, j->L->ffn_post_norm_1, j->c->dim, j->c->rms_eps);
}

/* Gemma 4's MoE layer: x += post_norm(post_norm_1(the dense FFN) + the
 * experts' half (moe_ffn_gemma4)), proj holding the dense FFN's output. */
static int gemma4_moe_tail(fwd_state *s, const llama_config *c, const llama_layer *L, size_t n,
                           tps_err *err) {
    each_row(s, c, L, n, post_norm_1_row);
    moe_tally t = {0};
    int rc = moe_ffn_gemma4(s->moe, s->kc, c, L, s->x, n, s->gelu, s->proj, &t, err);
    if (rc) return rc;
    s->last.experts += t.experts;
    s->last.weight_bytes += t.bytes;
    each_row(s, c, L, n, ffn_residual_row);
    return 0;
}

/* x += down(act(gate(norm(x))) * up(norm(x))) for one layer, or its
 * mixture of experts (moe.c), or both (Gemma 4). */
static int ffn_layer(fwd_state *s, const llama_config *c, const llama_layer *L, size_t n,
                     tps_err *err) {
    int rc;
    each_row(s, c, L, n, ffn_norm_row);
    if (L->gate_inp.data && !c->dense_with_experts) {
        moe_tally t = {0};
        if ((rc = moe_ffn(s->moe, s->kc, c, L, s->xb, n, s->proj, &t, err))) return rc;
        s->last.experts += t.experts;
        s->last.weight_bytes += t.bytes;
        each_row(s, c, L, n, ffn_residual_row);
        return 0;
    }
    const kernel_mat gate_up[2] = {kmat(s->hb, &L->w_gate), kmat(s->hb2, &L->w_up)};
    if ((rc = mm_multi(gate_up, 2, s, s->xb, n, c->dim, err))) return rc;
    each_row(s, c, L, n, ffn_act_row);
    if ((rc = mm(s, s->proj, &L->w_down, s->hb, n, err))) return rc;
    if (L->gate_inp.data) return gemma4_moe_tail(s, c, L, n, err);
    each_row(s, c, L, n, ffn_residual_row);
    return 0;
}

static void out_scale_row(const rows_job *j, size_t r, int thread) {
    (void)thread;
    kernel_scale(j->s->x + r * j->c->dim, j->L->out_scale[0], j->c->dim);
}

/* What Gemma 4 adds after layer l's FFN: the per-layer input's term
 * (ple.h), then the layer's output times its scale (layer_output_scale). */
static int gemma4_layer_tail(fwd_state *s, const llama_model *m, uint32_t l, size_t n,
                             tps_err *err) {
    const llama_layer *L = &m->w.layers[l];
    int rc;
    if (s->ple && (rc = ple_layer(s->ple, s->kc, m, l, s->x, n, s->gelu, err))) return rc;
    if (L->out_scale) each_row(s, &m->cfg, L, n, out_scale_row);
    return 0;
}

/* LM head only on rows that sample: gather them, norm, project. */
static int lm_head(fwd_state *s, const llama_model *m, const fwd_batch *b, size_t *n_logits,
                   tps_err *err) {
    const llama_config *c = &m->cfg;
    const size_t dim = c->dim;
    size_t nl = 0;
    int rc;
    for (size_t r = 0; r < b->n_rows; r++)
        if (b->rows[r].want_logits) {
            kernel_rmsnorm(s->xb + nl * dim, s->x + r * dim, m->w.out_norm, dim, c->rms_eps);
            nl++;
        }
    if (nl && (rc = mm(s, s->logits, &m->w.output, s->xb, nl, err))) return rc;
    final_logits_apply(c, s->logits, nl); /* soft-cap, suppressed tokens */
    *n_logits = nl;
    return 0;
}

int llama_forward(fwd_state *s, const llama_model *m, kv_cache *kv, const fwd_batch *b,
                  const float **logits, size_t *n_logits, tps_err *err) {
    const llama_config *c = &m->cfg;
    size_t n = b->n_rows;
    if (n == 0 || n > s->max_rows)
        return tps_fail(err, TPS_EINVAL, "forward: batch of %zu rows (1..%zu allowed)", n,
                        s->max_rows);
    size_t kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    if (kv->kv_dim != kv_dim || kv->head_dim != c->head_dim)
        return tps_fail(err, TPS_EINVAL,
                        "forward: KV cache holds heads of %u x %u, the model %u x %u",
                        kv->n_kv_heads, kv->head_dim, c->n_kv_heads, c->head_dim);
    for (uint32_t l = 0; l < c->n_layers; l++) /* Gemma 4's sliding layers' own heads */
        if (llama_config_stores_kv(c, l) &&
            (kv_layer_head_dim(kv, l) != llama_config_head_dim(c, l) ||
             (kv->layer_local[l] ? kv->l_n_kv_heads : kv->n_kv_heads) !=
                 llama_config_kv_heads(c, l)))
            return tps_fail(err, TPS_EINVAL,
                            "forward: KV cache's layer %u holds heads of %u, the model's %u x %u",
                            l, kv_layer_head_dim(kv, l), llama_config_kv_heads(c, l),
                            llama_config_head_dim(c, l));
    if (c->kv_lora_rank && !kv->k_only)
        return tps_fail(err, TPS_EINVAL,
                        "forward: latent attention reads its values out of the latent: the KV "
                        "cache must hold K alone (kv_cache_params.k_only)");
    int rc;
    s->last = (fwd_step_stats){.weight_bytes = m->w.bytes_dense};
    if ((rc = embed_rows(s, m, kv, b, err))) return rc;
    if (s->ple && (rc = ple_inputs(s->ple, s->kc, m, b, s->x, err))) return rc;
    const size_t n_runs = plan_runs(s, b);
    const q_scales qs = scales_of(c);
    if (s->qfull && (rc = plan_linear_runs(s, kv, b, err))) return rc;
    for (uint32_t l = 0; l < c->n_layers; l++) {
        rc = llama_config_is_recurrent(c, l) ? linear_layer(s, m, kv, b, l, err)
             : c->kv_lora_rank               ? mla_layer(s, m, kv, b, l, n_runs, qs, err)
                                             : attention_layer(s, m, kv, b, l, n_runs, qs, err);
        if (rc) return rc;
        if ((rc = ffn_layer(s, c, &m->w.layers[l], n, err))) return rc;
        if (c->arch_info->gemma4 && (rc = gemma4_layer_tail(s, m, l, n, err))) return rc;
    }
    if ((rc = lm_head(s, m, b, n_logits, err))) return rc;
    *logits = s->logits;
    return 0;
}
