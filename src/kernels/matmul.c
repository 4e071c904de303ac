/* kernel_matmul: checks, scratch, tier dispatch and OpenMP threading.
 *
 * One parallel region per call: threads first quantize the activation rows
 * they own (Q8_0/Q4_0 weights), meet at a barrier, then each computes a
 * contiguous range of output columns (weight rows) for all activation rows,
 * in tiles of TILE_O weight rows so a tile stays in cache while every
 * activation row streams past it. Which thread computes an element never
 * changes how it is reduced (the tiers guarantee a fixed order per element),
 * so the result does not depend on the thread count or the batch size.
 * The dot products themselves live in dot_scalar.c and dot_avx2.c. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel_impl.h"
#include "kernels/matmul.h"

#define TILE_O      16 /* weight rows per cache tile */
#define SCRATCH_ALN 64

struct kernel_ctx {
    int n_threads;
    kernel_tier tier;
    uint8_t *act; /* quantized activation rows */
    size_t act_cap;
    float *tmp; /* per-thread KERNEL_TMP_ROWS * n_in floats */
    size_t tmp_cap;
};

int kernel_tier_available(kernel_tier tier) {
    switch (tier) {
    case KERNEL_TIER_BEST:
    case KERNEL_TIER_SCALAR:
    case KERNEL_TIER_REF:
        return 1;
    case KERNEL_TIER_AVX2:
        return KERNEL_HAVE_AVX2;
    }
    return 0;
}

const char *kernel_tier_name(kernel_tier tier) {
    switch (tier) {
    case KERNEL_TIER_BEST:
        return KERNEL_HAVE_AVX2 ? "avx2" : "scalar";
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
    quantize_row_q8_0_avx2(y, x, n);
#else
    quantize_row_q8_0_ref(y, x, n);
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
    const size_t act_need = n_rows_x * (n_in / QK8_0 + 1) * sizeof(block_q8_0);
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
    if (kernel_ctx_reserve(ctx, max_rows_x, max_n_in)) {
        kernel_ctx_free(ctx);
        return tps_fail(err, TPS_ENOMEM,
                        "out of memory for kernel scratch (%zu rows of %zu inputs)", max_rows_x,
                        max_n_in);
    }
    *out = ctx;
    return 0;
}

void kernel_ctx_free(kernel_ctx *ctx) {
    if (!ctx) return;
    free(ctx->tmp);
    free(ctx->act);
    free(ctx);
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

/* ---- the call -------------------------------------------------------- */

typedef struct matmul_job {
    float *out;
    const uint8_t *W;
    size_t w_row_bytes;
    const float *x;
    const uint8_t *act;
    size_t act_row_bytes;
    size_t n_rows_x, n_in, n_out;
    int quant_x;
    int use_avx2;
    kernel_rows_fn rows;
    float *tmp; /* n_threads blocks of KERNEL_TMP_ROWS * n_in */
} matmul_job;

static void quantize_part(const matmul_job *job, int t, int nth) {
    for (size_t r = (size_t)t; r < job->n_rows_x; r += (size_t)nth) {
        block_q8_0 *y = (block_q8_0 *)(job->act + r * job->act_row_bytes);
        const float *xr = job->x + r * job->n_in;
#if KERNEL_HAVE_AVX2
        if (job->use_avx2) {
            quantize_row_q8_0_avx2(y, xr, job->n_in);
            continue;
        }
#endif
        quantize_row_q8_0_ref(y, xr, job->n_in);
    }
}

/* Output rows [o_begin, o_end) of one job, in cache tiles of TILE_O. */
static void compute_range(const matmul_job *job, size_t o_begin, size_t o_end, int t) {
    float *tmp = job->tmp + (size_t)t * KERNEL_TMP_ROWS * job->n_in;
    for (size_t o = o_begin; o < o_end; o += TILE_O) {
        const size_t o1 = o + TILE_O < o_end ? o + TILE_O : o_end;
        job->rows(job->out, job->n_out, job->W, job->w_row_bytes, o, o1, job->act,
                  job->act_row_bytes, job->n_rows_x, job->n_in, tmp);
    }
}

static void compute_part(const matmul_job *job, int t, int nth) {
    /* contiguous ranges, multiples of 4 so the 4-wide tiles stay whole */
    size_t per = (job->n_out + (size_t)nth - 1) / (size_t)nth;
    per = (per + 3) / 4 * 4;
    const size_t o_begin = (size_t)t * per;
    const size_t o_end = o_begin + per < job->n_out ? o_begin + per : job->n_out;
    compute_range(job, o_begin, o_end, t);
}

int kernel_matmul(float *restrict out, const void *restrict W, uint32_t wtype,
                  const float *restrict x, size_t n_rows_x, size_t n_in, size_t n_out,
                  kernel_ctx *ctx) {
    if (!kernel_type_supported(wtype)) return TPS_EUNSUP;
    const size_t w_row_bytes = kernel_row_bytes(wtype, n_in);
    if (w_row_bytes == 0) return n_in == 0 ? (memset(out, 0, n_rows_x * n_out * 4), 0) : TPS_EINVAL;
    if (n_rows_x == 0 || n_out == 0) return 0;
    if (ctx->tier == KERNEL_TIER_REF)
        return kernel_matmul_ref(out, NULL, W, wtype, x, n_rows_x, n_in, n_out);

    const kernel_type_impl *table = kernel_impl_scalar;
    int use_avx2 = 0;
#if KERNEL_HAVE_AVX2
    if (ctx->tier != KERNEL_TIER_SCALAR) {
        table = kernel_impl_avx2;
        use_avx2 = 1;
    }
#endif
    const kernel_type_impl *impl = &table[wtype];
    if (!impl->rows) return TPS_EUNSUP;
    if (kernel_ctx_reserve(ctx, n_rows_x, n_in)) return TPS_ENOMEM;

    matmul_job job = {
        .out = out,
        .W = W,
        .w_row_bytes = w_row_bytes,
        .x = x,
        .n_rows_x = n_rows_x,
        .n_in = n_in,
        .n_out = n_out,
        .quant_x = impl->act_type == GGML_TYPE_Q8_0,
        .use_avx2 = use_avx2,
        .rows = impl->rows,
        .tmp = ctx->tmp,
    };
    if (job.quant_x) {
        job.act = ctx->act;
        job.act_row_bytes = n_in / QK8_0 * sizeof(block_q8_0);
    } else {
        job.act = (const uint8_t *)x;
        job.act_row_bytes = n_in * sizeof(float);
    }

    int nth = resolve_threads(ctx->n_threads);
    /* no point waking threads for less than one 4-row tile each */
    const size_t max_useful = (n_out + 3) / 4;
    if ((size_t)nth > max_useful) nth = (int)max_useful;
    if (nth <= 1) {
        if (job.quant_x) quantize_part(&job, 0, 1);
        compute_part(&job, 0, 1);
        return 0;
    }
#pragma omp parallel num_threads(nth)
    {
        const int t = omp_get_thread_num();
        const int got = omp_get_num_threads();
        if (job.quant_x) {
            quantize_part(&job, t, got);
#pragma omp barrier
        }
        compute_part(&job, t, got);
    }
    return 0;
}

/* ---- several matrices over the same activations ------------------------ */

int kernel_matmul_multi(const kernel_mat *mats, size_t n_mats, const float *restrict x,
                        size_t n_rows_x, size_t n_in, kernel_ctx *ctx) {
    enum { MAX_MATS = 8 };
    if (n_mats == 0 || n_rows_x == 0) return 0;
    const kernel_type_impl *table = kernel_impl_scalar;
    int use_avx2 = 0;
#if KERNEL_HAVE_AVX2
    if (ctx->tier != KERNEL_TIER_SCALAR) {
        table = kernel_impl_avx2;
        use_avx2 = 1;
    }
#endif
    /* the shared path needs one activation type and a fast tier; else one call each */
    int shared = ctx->tier != KERNEL_TIER_REF && n_mats <= MAX_MATS;
    for (size_t i = 0; i < n_mats && shared; i++) {
        const uint32_t t = mats[i].wtype;
        shared = kernel_type_supported(t) && table[t].rows && kernel_row_bytes(t, n_in) &&
                 table[t].act_type == table[mats[0].wtype].act_type;
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
    size_t total = 0;
    const int quant_x = table[mats[0].wtype].act_type == GGML_TYPE_Q8_0;
    for (size_t i = 0; i < n_mats; i++) {
        const kernel_type_impl *impl = &table[mats[i].wtype];
        jobs[i] = (matmul_job){
            .out = mats[i].out,
            .W = mats[i].W,
            .w_row_bytes = kernel_row_bytes(mats[i].wtype, n_in),
            .x = x,
            .act = quant_x ? ctx->act : (const uint8_t *)x,
            .act_row_bytes = quant_x ? n_in / QK8_0 * sizeof(block_q8_0) : n_in * sizeof(float),
            .n_rows_x = n_rows_x,
            .n_in = n_in,
            .n_out = mats[i].n_out,
            .quant_x = quant_x,
            .use_avx2 = use_avx2,
            .rows = impl->rows,
            .tmp = ctx->tmp,
        };
        total += mats[i].n_out;
    }
    int nth = resolve_threads(ctx->n_threads);
    if ((size_t)nth > (total + 3) / 4) nth = (int)((total + 3) / 4);
#pragma omp parallel num_threads(nth) if (nth > 1)
    {
        const int t = omp_get_thread_num(), got = omp_get_num_threads();
        if (quant_x) {
            quantize_part(&jobs[0], t, got);
#pragma omp barrier
        }
        /* thread t owns [t * per, (t + 1) * per) of the concatenated outputs */
        size_t per = (total + (size_t)got - 1) / (size_t)got;
        per = (per + 3) / 4 * 4;
        const size_t g0 = (size_t)t * per, g1 = g0 + per < total ? g0 + per : total;
        size_t base = 0;
        for (size_t i = 0; i < n_mats; i++) {
            const size_t lo = g0 > base ? g0 - base : 0;
            const size_t hi = g1 - base < jobs[i].n_out ? g1 - base : jobs[i].n_out;
            if (g1 > base && lo < hi) compute_range(&jobs[i], lo, hi, t);
            base += jobs[i].n_out;
            if (base >= g1) break;
        }
    }
    return 0;
}
