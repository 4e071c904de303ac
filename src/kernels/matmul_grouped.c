/* kernel_matmul_grouped: a mixture-of-experts layer's products, each
 * touched expert run once over the slots routed to it (matmul.h has the
 * contract). The same rows kernels as kernel_matmul, per type and tier, so
 * a slot's result is bit-identical to a kernel_matmul of its row alone.
 *
 * Two pool jobs per call (kernels/pool.h): the threads quantize each slot's
 * activation row, then claim tasks over the concatenated output rows of
 * every (group, matrix) pair. A task's size is set by cost, not by rows: a
 * group of many slots does more work per weight row than a group of one,
 * so tasks are cut where each holds about its share of
 *   sum over its rows of (ROW_READ + slots of the row's group)
 * (weight rows read, plus the row-by-slot dots), guided (long tasks first,
 * short ones at the end) so a late or descheduled thread is covered by the
 * others with no barrier between experts. Not here: routing (the forward
 * pass), the rows kernels (the tiers). */
#include <stdlib.h>
#include <string.h>

#include "kernels/matmul_internal.h"
#include "kernels/pool.h"

#define G_MAX_TASKS 256
#define ROW_READ    4 /* a weight row read, in slot-dot units */
#define MIN_ROWS    16

/* What one call's pool jobs read. */
typedef struct grouped_run {
    const float *x;
    size_t n_in;
    const uint32_t *x_row;
    const matmul_job *q; /* the quantizing template (act type, rows) */
    matmul_job *jobs;    /* (n_jobs,) group-major: group g's matrices side by side */
    size_t n_jobs, n_tasks;
    uint32_t task_job[G_MAX_TASKS + 1], task_row[G_MAX_TASKS + 1];
} grouped_run;

/* Quantizes slot s's activation row into the act buffer. */
static void quantize_slot(void *arg, size_t s, int thread) {
    (void)thread;
    const grouped_run *r = arg;
    const matmul_job *q = r->q;
    const size_t row = r->x_row ? r->x_row[s] : s;
    uint8_t *dst = (uint8_t *)q->act + s * q->act_row_bytes;
    if (q->act_type == GGML_TYPE_Q8_K)
        kernel_quantize_act_k(dst, r->x + row * r->n_in, r->n_in, q->use_avx2);
    else
        kernel_quantize_act(dst, r->x + row * r->n_in, r->n_in, q->use_avx2);
}

static size_t rows8(const matmul_job *j) {
    return (j->n_out + 7) / 8 * 8;
}

static double row_cost(const matmul_job *j) {
    return (double)(ROW_READ + j->n_rows_x);
}

/* Cuts the jobs' rows into guided tasks: each takes 1 / (2 * nth) of the
 * cost left, at least MIN_ROWS rows of the job it starts in, in whole
 * 8-row groups; boundaries (job, row) in task_job / task_row. */
static void split_cost(grouped_run *r, size_t nth) {
    double left = 0;
    for (size_t i = 0; i < r->n_jobs; i++)
        left += row_cost(&r->jobs[i]) * (double)rows8(&r->jobs[i]);
    size_t t = 0, j = 0, row = 0;
    while (j < r->n_jobs && t < G_MAX_TASKS) {
        r->task_job[t] = (uint32_t)j, r->task_row[t] = (uint32_t)row;
        t++;
        double take = left / (double)(2 * nth);
        const double floor = row_cost(&r->jobs[j]) * MIN_ROWS;
        if (take < floor) take = floor;
        if (t == G_MAX_TASKS) take = left + 1;
        while (j < r->n_jobs && take > 0) {
            const double c = row_cost(&r->jobs[j]);
            const size_t avail = rows8(&r->jobs[j]) - row;
            size_t n = (size_t)(take / c + 7) / 8 * 8;
            if (n == 0) n = 8;
            if (n >= avail) {
                take -= c * (double)avail, left -= c * (double)avail;
                j++, row = 0;
            } else {
                take = 0, left -= c * (double)n;
                row += n;
            }
        }
    }
    r->task_job[t] = (uint32_t)r->n_jobs, r->task_row[t] = 0;
    r->n_tasks = t;
}

static void compute_task(void *arg, size_t t, int thread) {
    const grouped_run *r = arg;
    const size_t j1 = r->task_job[t + 1], row1 = r->task_row[t + 1];
    size_t j = r->task_job[t], row = r->task_row[t];
    for (; j < j1; j++, row = 0) {
        const matmul_job *job = &r->jobs[j];
        if (row < job->n_out) kernel_job_range(job, row, job->n_out, thread);
    }
    if (j < r->n_jobs && row < row1) {
        const matmul_job *job = &r->jobs[j];
        kernel_job_range(job, row, row1 < job->n_out ? row1 : job->n_out, thread);
    }
}

/* Grows a context buffer (aligned, never shrinks): 0 or TPS_ENOMEM. */
static int grow_buf(void **buf, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    void *p = aligned_alloc(64, (need + 63) / 64 * 64);
    if (!p) return TPS_ENOMEM;
    free(*buf);
    *buf = p;
    *cap = need;
    return 0;
}

/* The reference tier: each group's rows gathered and multiplied alone. */
static int grouped_ref(const kernel_experts *mats, size_t n_mats, const float *x, size_t n_in,
                       const kernel_groups *g) {
    int rc = 0;
    for (size_t k = 0; k < g->n_groups && !rc; k++) {
        const size_t s0 = g->first[k], n = g->first[k + 1] - s0;
        float *xg = malloc((n * n_in + 1) * sizeof *xg);
        if (!xg) return TPS_ENOMEM;
        for (size_t i = 0; i < n; i++)
            memcpy(xg + i * n_in, x + (g->x_row ? g->x_row[s0 + i] : s0 + i) * n_in,
                   n_in * sizeof *xg);
        for (size_t m = 0; m < n_mats && !rc; m++) {
            if (!kernel_type_supported(mats[m].wtype)) rc = TPS_EUNSUP;
            if (!rc)
                rc = kernel_matmul_ref(mats[m].out + s0 * mats[m].n_out, NULL,
                                       (const uint8_t *)mats[m].W +
                                           g->expert[k] * mats[m].expert_bytes,
                                       mats[m].wtype, xg, n, n_in, mats[m].n_out);
        }
        free(xg);
    }
    return rc;
}

/* The activation rows in slot order: quantized into ctx->act, or (float
 * weights) gathered into ctx->gather unless x is already in slot order. */
static int prepare_acts(grouped_run *r, const matmul_job *q, size_t n_slots, kernel_ctx *ctx,
                        const float **act_x) {
    tps_pool *pool = kernel_ctx_pool(ctx);
    *act_x = r->x;
    if (q->quant_x) { /* fewer slots than 4: not worth waking the workers */
        tps_pool_run_any(n_slots >= 4 ? pool : NULL, n_slots, quantize_slot, r);
        return 0;
    }
    if (!r->x_row) return 0;
    if (grow_buf((void **)&ctx->gather, &ctx->gather_cap, n_slots * r->n_in * sizeof(float)))
        return TPS_ENOMEM;
    for (size_t s = 0; s < n_slots; s++)
        memcpy(ctx->gather + s * r->n_in, r->x + (size_t)r->x_row[s] * r->n_in,
               r->n_in * sizeof(float));
    *act_x = ctx->gather;
    return 0;
}

/* Jobs of (group, matrix), group-major, each pointed at its expert, its
 * slots' activation rows and its outputs. */
static void build_jobs(grouped_run *r, const kernel_experts *mats, const kernel_pick *picks,
                       size_t n_mats, const float *act_x, const kernel_groups *g,
                       const kernel_ctx *ctx) {
    size_t n = 0;
    for (size_t k = 0; k < g->n_groups; k++) {
        const size_t s0 = g->first[k], ns = g->first[k + 1] - s0;
        if (ns == 0) continue;
        for (size_t m = 0; m < n_mats; m++) {
            matmul_job *j = &r->jobs[n++];
            kernel_job_init(j, &picks[m], mats[m].wtype, mats[m].out + s0 * mats[m].n_out,
                            (const uint8_t *)mats[m].W + g->expert[k] * mats[m].expert_bytes, act_x,
                            ns, r->n_in, mats[m].n_out, ctx);
            j->act += s0 * j->act_row_bytes;
        }
    }
    r->n_jobs = n;
}

int kernel_matmul_grouped(const kernel_experts *mats, size_t n_mats, const float *restrict x,
                          size_t n_in, const kernel_groups *g, kernel_ctx *ctx) {
    enum { MAX_MATS = 4 };
    const size_t n_slots = g->n_groups ? g->first[g->n_groups] : 0;
    if (n_mats == 0 || n_slots == 0 || n_in == 0) return 0;
    if (n_mats > MAX_MATS) return TPS_EINVAL;
    if (ctx->tier == KERNEL_TIER_REF) return grouped_ref(mats, n_mats, x, n_in, g);
    kernel_pick picks[MAX_MATS];
    for (size_t m = 0; m < n_mats; m++) {
        int rc = kernel_pick_rows(&picks[m], ctx, mats[m].wtype, n_in);
        if (rc) return rc;
        if (picks[m].act_type != picks[0].act_type ||
            (kernel_wtype_packed(mats[m].wtype) && mats[m].n_out % 8))
            return TPS_EINVAL;
    }
    if (kernel_ctx_reserve(ctx, n_slots, n_in)) return TPS_ENOMEM;
    const size_t n_jobs = g->n_groups * n_mats;
    if (grow_buf(&ctx->jobs, &ctx->jobs_cap, n_jobs * sizeof(matmul_job))) return TPS_ENOMEM;
    grouped_run r = {.x = x, .n_in = n_in, .x_row = g->x_row, .jobs = ctx->jobs};
    matmul_job q;
    kernel_job_init(&q, &picks[0], mats[0].wtype, mats[0].out, mats[0].W, x, n_slots, n_in,
                    mats[0].n_out, ctx);
    r.q = &q;
    const float *act_x;
    if (prepare_acts(&r, &q, n_slots, ctx, &act_x)) return TPS_ENOMEM;
    build_jobs(&r, mats, picks, n_mats, act_x, g, ctx);
    tps_pool *pool = kernel_ctx_pool(ctx);
    split_cost(&r, (size_t)tps_pool_threads(pool));
    tps_pool_run_any(pool, r.n_tasks, compute_task, &r);
    return 0;
}
