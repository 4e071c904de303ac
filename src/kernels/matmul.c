/* kernel_matmul: checks, scratch, tier dispatch and threading.
 *
 * Two pool jobs per call (kernels/pool.h): the threads first quantize the
 * activation rows (to Q8_0 for Q8_0/Q4_0 weights, to Q8_K for Q4_K/Q6_K),
 * then claim chunks of output columns (weight rows) and compute them for
 * all activation rows, in tiles of TILE_O weight rows so a tile stays in
 * cache while a block of activation rows (act_block_rows) streams past it. A thread that is not
 * running (preempted, asleep) is never waited for. Which thread computes an element never
 * changes how it is reduced (the tiers guarantee a fixed order per element),
 * so the result does not depend on the thread count or the batch size.
 * The dot products themselves live in dot_scalar.c and dot_avx2.c (K-quants:
 * dot_kquant_scalar.c and dot_kquant_avx2.c). */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/free_all.h"
#include "kernels/kernel_impl.h"
#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"
#include "kernels/pool.h"
#include "kernels/pool_rows.h"
#include "kernels/r8_tile_zmm.h"

/* weight rows per cache tile: r8_tile_zmm.h's widest tile takes 6 groups */
#if R8_ZMM
#define TILE_O 48
#else
#define TILE_O 16
#endif
#define MAX_TASKS   256 /* pool tasks per call */
#define SCRATCH_ALN 64

int kernel_tier_available(kernel_tier tier) {
    switch (tier) {
    case KERNEL_TIER_BEST:
    case KERNEL_TIER_SCALAR:
    case KERNEL_TIER_REF:
        return 1;
    case KERNEL_TIER_AVX2:
        return KERNEL_HAVE_AVX2;
    case KERNEL_TIER_NEON:
        return kernel_neon_table() != NULL;
    }
    return 0;
}

const char *kernel_tier_name(kernel_tier tier) {
    switch (tier) {
    case KERNEL_TIER_BEST:
        if (kernel_neon_table()) return kernel_neon_name();
        return KERNEL_HAVE_AVX2 ? "avx2" : "scalar";
    case KERNEL_TIER_NEON:
        return kernel_neon_name();
    case KERNEL_TIER_SCALAR:
        return "scalar";
    case KERNEL_TIER_AVX2:
        return "avx2";
    case KERNEL_TIER_REF:
        return "ref";
    }
    return "?";
}

void quantize_row_q8_0(block_q8_0 *restrict y, const float *restrict x, size_t n) {
#if KERNEL_HAVE_AVX2
    quantize_row_q8_0_avx2(y, x, n, NULL);
#else
    /* the activation quantizer's bits, as the AVX2 one (not ggml's _ref,
     * whose ties round away from zero: KV rows differed between builds) */
    quantize_row_q8_0_act_ref(y, x, n, NULL);
#endif
}

static int resolve_threads(int n) {
    return n > 0 ? n : omp_get_max_threads();
}

/* Rounds up to SCRATCH_ALN and allocates aligned; NULL on failure. */
static void *alloc_aligned(size_t bytes) {
    bytes = (bytes + SCRATCH_ALN - 1) / SCRATCH_ALN * SCRATCH_ALN;
    return aligned_alloc(SCRATCH_ALN, bytes ? bytes : SCRATCH_ALN);
}

static int grow(void **buf, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    void *p = alloc_aligned(need);
    if (!p) return TPS_ENOMEM;
    free(*buf);
    *buf = p;
    *cap = need;
    return 0;
}

int kernel_ctx_reserve(kernel_ctx *ctx, size_t n_rows_x, size_t n_in) {
    /* room for either activation type: Q8_0 with side data, or Q8_K */
    const size_t act_q8_0 = kernel_act_row_bytes(n_in / QK8_0 + 1);
    const size_t act_q8_K = kernel_act_k_row_bytes(n_in / QK_K + 1);
    const size_t act_need = n_rows_x * (act_q8_0 > act_q8_K ? act_q8_0 : act_q8_K);
    const size_t tmp_need =
        (size_t)resolve_threads(ctx->n_threads) * KERNEL_TMP_ROWS * n_in * sizeof(float);
    if (grow((void **)&ctx->act, &ctx->act_cap, act_need)) return TPS_ENOMEM;
    if (grow((void **)&ctx->tmp, &ctx->tmp_cap, tmp_need)) return TPS_ENOMEM;
    return 0;
}

int kernel_ctx_create(kernel_ctx **out, int n_threads, size_t max_rows_x, size_t max_n_in,
                      tps_err *err) {
    *out = NULL;
    if (n_threads < 0)
        return tps_fail(err, TPS_EINVAL, "kernel threads must be >= 0 (0 = default), got %d",
                        n_threads);
    kernel_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return tps_fail(err, TPS_ENOMEM, "out of memory for the kernel context");
    ctx->n_threads = n_threads;
    ctx->tier = KERNEL_TIER_BEST;
    const int nth = resolve_threads(n_threads);
    if (nth > 1 && tps_pool_create(&ctx->pool, nth, err)) {
        kernel_ctx_free(ctx);
        return TPS_ENOMEM;
    }
    if (kernel_ctx_reserve(ctx, max_rows_x, max_n_in)) {
        kernel_ctx_free(ctx);
        return tps_fail(err, TPS_ENOMEM,
                        "out of memory for kernel scratch (%zu rows of %zu inputs)", max_rows_x,
                        max_n_in);
    }
    /* faulted in here rather than by the first call's quantization (none
     * yet when sized 0: memset of NULL is undefined even for 0 bytes) */
    if (ctx->act) memset(ctx->act, 0, ctx->act_cap);
    if (ctx->tmp) memset(ctx->tmp, 0, ctx->tmp_cap);
    *out = ctx;
    return 0;
}

void kernel_ctx_free(kernel_ctx *ctx) {
    if (!ctx) return;
    tps_pool_free(ctx->pool);
    TPS_FREE_ALL(ctx->tmp, ctx->act, ctx->gather, ctx->jobs, ctx);
}

int kernel_ctx_threads(const kernel_ctx *ctx) {
    return resolve_threads(ctx->n_threads);
}

void kernel_ctx_set_threads(kernel_ctx *ctx, int n_threads) {
    ctx->n_threads = n_threads < 0 ? 1 : n_threads;
}

int kernel_ctx_set_tier(kernel_ctx *ctx, kernel_tier tier) {
    if (!kernel_tier_available(tier)) return TPS_EUNSUP;
    ctx->tier = tier;
    return 0;
}

kernel_tier kernel_ctx_tier(const kernel_ctx *ctx) {
    return ctx->tier;
}

tps_pool *kernel_ctx_pool(kernel_ctx *ctx) {
    const int nth = resolve_threads(ctx->n_threads);
    if (nth <= 1) return NULL;
    if (ctx->pool && tps_pool_threads(ctx->pool) == nth) return ctx->pool;
    /* the thread count changed (kernel_ctx_set_threads): a pool of the new size */
    tps_pool_free(ctx->pool);
    ctx->pool = NULL;
    tps_err err = {0};
    if (tps_pool_create(&ctx->pool, nth, &err)) return NULL; /* run on the caller alone */
    return ctx->pool;
}

/* ---- the call -------------------------------------------------------- */

static int is_packed(uint32_t wtype) {
    return wtype >= KERNEL_TYPE_PACKED && wtype < KERNEL_TYPE_R8(GGML_TYPE_COUNT_MAX) &&
           kernel_packed_type(wtype - KERNEL_TYPE_PACKED) == wtype;
}

/* The entry of type t: the tier's, or where it has none the next one down
 * (the ARM tables fill in only the types they have kernels for: i8mm, then
 * dotprod, then scalar). */
static const kernel_type_impl *entry(const kernel_type_impl *table, uint32_t t) {
#if KERNEL_HAVE_NEON
    if (table == kernel_impl_neon_i8mm && !table[t].rows) table = kernel_impl_neon_dotprod;
#endif
    return table[t].rows ? &table[t] : &kernel_impl_scalar[t];
}

/* 0, TPS_EUNSUP (type or tier cannot run it) or TPS_EINVAL (n_in not whole blocks). */
static int pick(kernel_pick *p, const kernel_ctx *ctx, uint32_t wtype, size_t n_in) {
    const kernel_type_impl *table = kernel_impl_scalar;
    p->use_avx2 = 0;
    p->rows_panel = NULL;
#if KERNEL_HAVE_AVX2
    if (ctx->tier != KERNEL_TIER_SCALAR) {
        table = kernel_impl_avx2;
        p->use_avx2 = 1;
    }
#endif
    if (ctx->tier == KERNEL_TIER_BEST || ctx->tier == KERNEL_TIER_NEON) {
        const kernel_type_impl *neon = kernel_neon_table();
        if (neon) table = neon;
    }
    if (is_packed(wtype)) {
        if (ctx->tier == KERNEL_TIER_REF) return TPS_EUNSUP;
        const uint32_t plain = wtype - KERNEL_TYPE_PACKED;
        const kernel_type_impl *e = entry(table, plain);
        if (!e->rows_r8) return TPS_EUNSUP;
        p->rows = e->rows_r8;
#if KERNEL_HAVE_AVX2
        if (table == kernel_impl_avx2) p->rows_panel = kernel_rows_panel_avx2(plain);
#endif
        p->act_type = e->act_type;
        p->w_row_bytes = kernel_row_bytes(plain, n_in);
        return p->w_row_bytes ? 0 : TPS_EINVAL;
    }
    if (!kernel_type_supported(wtype) || !entry(table, wtype)->rows) return TPS_EUNSUP;
    p->rows = entry(table, wtype)->rows;
    p->act_type = entry(table, wtype)->act_type;
    p->w_row_bytes = kernel_row_bytes(wtype, n_in);
    return p->w_row_bytes ? 0 : TPS_EINVAL;
}

/* Quantizes activation row r of the job into its act buffer. */
static void quantize_row_x(const matmul_job *job, size_t r) {
    uint8_t *row = (uint8_t *)job->act + r * job->act_row_bytes;
    if (job->act_type == GGML_TYPE_Q8_K)
        kernel_quantize_act_k(row, job->x + r * job->n_in, job->n_in, job->use_avx2);
    else
        kernel_quantize_act(row, job->x + r * job->n_in, job->n_in, job->use_avx2);
}

/* Activation rows per cache block: a block's quantized rows (at most
 * ACT_BLOCK_BYTES, a quarter of a 1 MB L2) stay in L2 while the weight
 * tiles of a task stream past them, instead of every tile re-reading all
 * rows (a 512-row prefill chunk of K = 2048 is 1.6 MB of Q8_0 rows) from
 * L3. K = 768 gives 212 rows, K = 2048 80: batched decode (<= 64 rows) is
 * one block. A multiple of 4 so only the last block has a short tile. At
 * least ACT_BLOCK_MIN_ROWS: the K-quant kernels unpack a weight pair once
 * for 16 rows or more (kquant_x8_zmm.h), and 8B's down projection (K =
 * 14336, 17 KB a Q8_K row) got blocks of 12, so never did; with 32 (553
 * KB) bench_kernels 14336x4096 at 512 rows, 2 threads, ran Q6_K 1.2x and
 * Q4_K ~1.02x faster than with 12 (4 A B rounds, 2026-12-06, Zen 5).
 * Q8_K rows (the K-quants) take blocks of ACT_BLOCK_BYTES_K: their
 * kernels unpack each weight pair once per block, so a longer block
 * unpacks less. 512 KB against 256 KB, in process A B pairs of the rows
 * kernels (529 rows, 2 threads, 2026-12-06, Zen 5, weights prefetched as
 * zk_prefetch_next says): Q4_K 2048x8192 1.04x, 2048x2048 1.02x,
 * 5632x2048 1.06x; Q6_K 2048x2048 1.02x. The Q8_0 / Q4_0 tiles, which
 * unpack nothing, keep 256 KB (512 KB or one block: within 2%), and so
 * do builds without the 512-bit tiles (their K-quant kernels unpack
 * nothing either; not measured). */
#define ACT_BLOCK_BYTES (256u << 10)
#if R8_ZMM
#define ACT_BLOCK_BYTES_K (512u << 10)
#else
#define ACT_BLOCK_BYTES_K ACT_BLOCK_BYTES
#endif
#define ACT_BLOCK_MIN_ROWS 32

static size_t act_block_rows(const matmul_job *job) {
    const size_t bytes = job->act_type == GGML_TYPE_Q8_K ? ACT_BLOCK_BYTES_K : ACT_BLOCK_BYTES;
    const size_t rows = bytes / job->act_row_bytes / 4 * 4;
    return rows < ACT_BLOCK_MIN_ROWS ? ACT_BLOCK_MIN_ROWS : rows;
}

/* K panels (rows_panel) for long K: where a block of whole rows would hold
 * fewer than K_PANEL_BELOW rows (K above ~6000: a down projection), the
 * K-quant kernels unpack each weight pair once per 48 (K = 8192) or 32 (K
 * = 14336) rows. In panels of K_PANEL_SB superblocks a block holds
 * K_PANEL_BYTES of them, 192 rows at any K. In process A B pairs, 529 rows,
 * 2 threads, tasks and tiles as here (scripts/kernel-ab.sh, 2026-12-07,
 * Zen 5): 8192x2048 Q4_K 1.03-1.06x, Q6_K 1.05-1.08x; 14336x4096 Q4_K
 * 1.14x, Q6_K 1.18x; panels of 8 or 16, or 512 KB, no better. Not below:
 * 5632x2048 (68-row blocks) neutral, 2048x8192 (192) 0.93x, as a tile's
 * sums then leave L1 between panels. */
#define K_PANEL_SB    4
#define K_PANEL_BYTES (256u << 10)
#define K_PANEL_BELOW 64

/* Activation rows per block of a K panel. */
static size_t panel_block_rows(void) {
    const size_t sb_bytes = sizeof(block_q8_K) + sizeof(kernel_act_k_side);
    return K_PANEL_BYTES / (K_PANEL_SB * sb_bytes) / 4 * 4;
}

/* compute_range with K split in panels: each block of panel_block_rows
 * activation rows runs panel by panel, in order, each panel against the
 * range's tiles (its quantized rows of that panel stay in L2 meanwhile). */
static void compute_range_panels(const matmul_job *job, size_t o_begin, size_t o_end, float *tmp) {
    const size_t nb = job->n_in / QK_K, rb = panel_block_rows();
    for (size_t r = 0; r < job->n_rows_x; r += rb) {
        const size_t nr = job->n_rows_x - r < rb ? job->n_rows_x - r : rb;
        for (size_t kb0 = 0; kb0 < nb; kb0 += K_PANEL_SB) {
            const size_t kb1 = nb - kb0 < K_PANEL_SB ? nb : kb0 + K_PANEL_SB;
            for (size_t o = o_begin; o < o_end; o += TILE_O) {
                const size_t o1 = o + TILE_O < o_end ? o + TILE_O : o_end;
                job->rows_panel(job->out + r * job->n_out, job->n_out, job->W, job->w_row_bytes, o,
                                o1, job->act + r * job->act_row_bytes, job->act_row_bytes, nr,
                                job->n_in, tmp, kb0, kb1);
            }
        }
    }
}

/* Output rows [o_begin, o_end) of one job: blocks of activation rows
 * (act_block_rows), each against the range in tiles of TILE_O weight rows.
 * With at most 4 activation rows no weight is reused from cache, so the
 * whole range goes to the kernel in one call, its groups streamed in
 * order. Packed types only: the plain ones pack
 * per tile into scratch sized for TILE_O rows, so they are not blocked
 * (that would pack each tile once per block). How rows are blocked never
 * changes an element's bits (kernel_impl.h). */
static void compute_range(const matmul_job *job, size_t o_begin, size_t o_end, int t) {
    float *tmp = job->tmp + (size_t)t * KERNEL_TMP_ROWS * job->n_in;
    const size_t tile = job->n_rows_x <= 4 && job->packed ? o_end - o_begin : TILE_O;
    const size_t rb = job->quant_x && job->packed ? act_block_rows(job) : job->n_rows_x;
    if (job->rows_panel && rb < K_PANEL_BELOW && rb < job->n_rows_x) {
        compute_range_panels(job, o_begin, o_end, tmp);
        return;
    }
    for (size_t r = 0; r < job->n_rows_x; r += rb) {
        const size_t nr = job->n_rows_x - r < rb ? job->n_rows_x - r : rb;
        for (size_t o = o_begin; o < o_end; o += tile) {
            const size_t o1 = o + tile < o_end ? o + tile : o_end;
            job->rows(job->out + r * job->n_out, job->n_out, job->W, job->w_row_bytes, o, o1,
                      job->act + r * job->act_row_bytes, job->act_row_bytes, nr, job->n_in, tmp);
        }
    }
}

static void job_init(matmul_job *job, const kernel_pick *p, uint32_t wtype, float *out,
                     const void *W, const float *x, size_t n_rows_x, size_t n_in, size_t n_out,
                     const kernel_ctx *ctx) {
    const int quant_x = p->act_type != GGML_TYPE_F32;
    size_t act_row_bytes = n_in * sizeof(float);
    if (p->act_type == GGML_TYPE_Q8_K)
        act_row_bytes = kernel_act_k_row_bytes(n_in / QK_K);
    else if (quant_x)
        act_row_bytes = kernel_act_row_bytes(n_in / QK8_0);
    *job = (matmul_job){
        .out = out,
        .W = W,
        .w_row_bytes = p->w_row_bytes,
        .x = x,
        .act = quant_x ? ctx->act : (const uint8_t *)x,
        .act_row_bytes = act_row_bytes,
        .n_rows_x = n_rows_x,
        .n_in = n_in,
        .n_out = n_out,
        .quant_x = quant_x,
        .act_type = p->act_type,
        .use_avx2 = p->use_avx2,
        .packed = is_packed(wtype),
        .rows = p->rows,
        .rows_panel = p->rows_panel,
        .tmp = ctx->tmp,
    };
}

/* One call's work for the pool: the activation rows to quantize, then
 * chunks of `chunk` rows of the jobs' concatenated outputs (each job
 * padded to whole 8-row groups). */
typedef struct mm_run {
    const matmul_job *jobs;
    size_t n_jobs, total;
    size_t n_tasks;
    size_t q_per_task;             /* activation rows a quantize task takes */
    uint32_t first[MAX_TASKS + 1]; /* task t covers outputs [first[t], first[t + 1]) */
} mm_run;

/* Guided split: each task takes 1 / (2 * nth) of what is left, in whole
 * 8-row groups and at least TILE_O rows. Long first runs of weights for the
 * prefetchers, short last ones so no thread idles long at the end, and
 * enough tasks that a thread which starts late (or stalls) is covered by
 * the others. */
static void split_guided(mm_run *run, size_t nth) {
    size_t o = 0, t = 0;
    while (o < run->total && t < MAX_TASKS) {
        run->first[t++] = (uint32_t)o;
        size_t left = run->total - o, take = (left + 2 * nth - 1) / (2 * nth);
        take = (take + 7) / 8 * 8;
        if (take < TILE_O) take = TILE_O;
        if (t == MAX_TASKS || take > left) take = left;
        o += take;
    }
    run->first[t] = (uint32_t)run->total;
    run->n_tasks = t;
}

/* A run of q_per_task activation rows (pool_rows.h: 4 runs a thread, as
 * the forward pass's row ops share their rows), not one task a row. With
 * a task a row the quantizer took 174-182 samples of a 529-token 1B
 * Q4_K_M prefill, with runs 122-129 (perf, A B A B, 2026-12-07, Zen 5, 2
 * threads): a claim per 2048 floats, and rows read wherever the other core
 * had written them. Which thread quantizes a row never changes its bits. */
static void quantize_task(void *arg, size_t task, int thread) {
    (void)thread;
    const mm_run *run = arg;
    const size_t end = pool_rows_end(task, run->q_per_task, run->jobs[0].n_rows_x);
    for (size_t r = task * run->q_per_task; r < end; r++)
        quantize_row_x(&run->jobs[0], r);
}

static void compute_task(void *arg, size_t task, int thread) {
    const mm_run *run = arg;
    const size_t g0 = run->first[task], g1 = run->first[task + 1];
    size_t base = 0;
    for (size_t i = 0; i < run->n_jobs && base < g1; i++) {
        const size_t padded = (run->jobs[i].n_out + 7) / 8 * 8;
        const size_t lo = g0 > base ? g0 - base : 0;
        size_t hi = g1 - base < padded ? g1 - base : padded;
        if (hi > run->jobs[i].n_out) hi = run->jobs[i].n_out;
        if (lo < hi) compute_range(&run->jobs[i], lo, hi, thread);
        base += padded;
    }
}

/* Quantizes the shared activations (if the jobs need it), then computes
 * every job; rows are claimed by whichever thread is free. */
static void run_jobs(kernel_ctx *ctx, const matmul_job *jobs, size_t n_jobs) {
    mm_run run = {.jobs = jobs, .n_jobs = n_jobs};
    for (size_t i = 0; i < n_jobs; i++)
        run.total += (jobs[i].n_out + 7) / 8 * 8;
    const size_t n_rows = jobs[0].n_rows_x;
    tps_pool *pool = kernel_ctx_pool(ctx);
    split_guided(&run, (size_t)tps_pool_threads(pool));
    if (jobs[0].quant_x) /* fewer rows than 4: not worth waking the workers */
        pool_rows_run(pool, n_rows, &run.q_per_task, 4, quantize_task, &run);
    tps_pool_run_any(pool, run.n_tasks, compute_task, &run);
}

int kernel_matmul(float *restrict out, const void *restrict W, uint32_t wtype,
                  const float *restrict x, size_t n_rows_x, size_t n_in, size_t n_out,
                  kernel_ctx *ctx) {
    if (n_in == 0 && (kernel_type_supported(wtype) || is_packed(wtype))) {
        memset(out, 0, n_rows_x * n_out * sizeof(float));
        return 0;
    }
    if (is_packed(wtype) && n_out % 8) return TPS_EINVAL;
    if (ctx->tier == KERNEL_TIER_REF && !is_packed(wtype)) {
        if (!kernel_type_supported(wtype)) return TPS_EUNSUP;
        if (!kernel_row_bytes(wtype, n_in)) return TPS_EINVAL;
        if (n_rows_x == 0 || n_out == 0) return 0;
        return kernel_matmul_ref(out, NULL, W, wtype, x, n_rows_x, n_in, n_out);
    }
    kernel_pick p;
    int rc = pick(&p, ctx, wtype, n_in);
    if (rc) return rc;
    if (n_rows_x == 0 || n_out == 0) return 0;
    if (kernel_ctx_reserve(ctx, n_rows_x, n_in)) return TPS_ENOMEM;
    matmul_job job;
    job_init(&job, &p, wtype, out, W, x, n_rows_x, n_in, n_out, ctx);
    run_jobs(ctx, &job, 1);
    return 0;
}

/* ---- several matrices over the same activations ------------------------ */

int kernel_matmul_multi(const kernel_mat *mats, size_t n_mats, const float *restrict x,
                        size_t n_rows_x, size_t n_in, kernel_ctx *ctx) {
    enum { MAX_MATS = 8 };
    if (n_mats == 0 || n_rows_x == 0) return 0;
    kernel_pick picks[MAX_MATS];
    /* the shared path needs one activation type and a fast tier; else one call each */
    int shared = ctx->tier != KERNEL_TIER_REF && n_mats <= MAX_MATS && n_in > 0;
    for (size_t i = 0; i < n_mats && shared; i++) {
        shared = pick(&picks[i], ctx, mats[i].wtype, n_in) == 0 &&
                 picks[i].act_type == picks[0].act_type &&
                 (!is_packed(mats[i].wtype) || mats[i].n_out % 8 == 0);
    }
    if (!shared) {
        for (size_t i = 0; i < n_mats; i++) {
            int rc = kernel_matmul(mats[i].out, mats[i].W, mats[i].wtype, x, n_rows_x, n_in,
                                   mats[i].n_out, ctx);
            if (rc) return rc;
        }
        return 0;
    }
    if (kernel_ctx_reserve(ctx, n_rows_x, n_in)) return TPS_ENOMEM;
    matmul_job jobs[MAX_MATS];
    for (size_t i = 0; i < n_mats; i++)
        job_init(&jobs[i], &picks[i], mats[i].wtype, mats[i].out, mats[i].W, x, n_rows_x, n_in,
                 mats[i].n_out, ctx);
    run_jobs(ctx, jobs, n_mats);
    return 0;
}

/* ---- for matmul_grouped.c (matmul_internal.h) ---------------------------- */

int kernel_pick_rows(kernel_pick *p, const kernel_ctx *ctx, uint32_t wtype, size_t n_in) {
    return pick(p, ctx, wtype, n_in);
}

void kernel_job_init(matmul_job *job, const kernel_pick *p, uint32_t wtype, float *out,
                     const void *W, const float *x, size_t n_rows_x, size_t n_in, size_t n_out,
                     const kernel_ctx *ctx) {
    job_init(job, p, wtype, out, W, x, n_rows_x, n_in, n_out, ctx);
}

void kernel_job_range(const matmul_job *job, size_t o_begin, size_t o_end, int thread) {
    compute_range(job, o_begin, o_end, thread);
}

int kernel_wtype_packed(uint32_t wtype) {
    return is_packed(wtype);
}
