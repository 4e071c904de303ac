/* Internal to src/kernels: what matmul.c shares with matmul_grouped.c (the
 * grouped products over expert tensors): the context's fields, the pick of
 * a rows kernel per weight type and tier, and one matrix's job over a range
 * of its output rows. Not for other modules (use matmul.h). */
#ifndef TPS_KERNELS_MATMUL_INTERNAL_H
#define TPS_KERNELS_MATMUL_INTERNAL_H

#include "kernels/kernel_impl.h"
#include "kernels/matmul.h"

struct kernel_ctx {
    int n_threads;
    kernel_tier tier;
    uint8_t *act; /* quantized activation rows */
    size_t act_cap;
    float *tmp; /* per-thread KERNEL_TMP_ROWS * n_in floats */
    size_t tmp_cap;
    tps_pool *pool; /* resolve_threads(n_threads) threads; NULL when 1 */
    float *gather;  /* float activation rows in slot order (grouped calls, float weights) */
    size_t gather_cap;
    void *jobs; /* a grouped call's matmul_job array */
    size_t jobs_cap;
};

/* What runs one weight type on the context's tier. */
typedef struct kernel_pick {
    kernel_rows_fn rows;
    kernel_rows_panel_fn rows_panel; /* rows in K panels (packed K-quants), or NULL */
    uint32_t act_type;               /* GGML_TYPE_Q8_0, GGML_TYPE_Q8_K or GGML_TYPE_F32 */
    size_t w_row_bytes;              /* bytes of one plain row of n_in */
    int use_avx2;
} kernel_pick;

/* One weight matrix against n_rows_x activation rows (act: quantized rows,
 * or x itself for float weights). */
typedef struct matmul_job {
    float *out;
    const uint8_t *W;
    size_t w_row_bytes;
    const float *x;
    const uint8_t *act;
    size_t act_row_bytes;
    size_t n_rows_x, n_in, n_out;
    int quant_x;
    uint32_t act_type; /* GGML_TYPE_Q8_0 or _Q8_K when quant_x */
    int use_avx2;
    int packed; /* W in 8-row groups (KERNEL_TYPE_*_R8) */
    kernel_rows_fn rows;
    kernel_rows_panel_fn rows_panel; /* NULL: no K panels */
    float *tmp;                      /* n_threads blocks of KERNEL_TMP_ROWS * n_in */
} matmul_job;

/* 0, TPS_EUNSUP (type or tier cannot run it) or TPS_EINVAL (n_in not whole blocks). */
int kernel_pick_rows(kernel_pick *p, const kernel_ctx *ctx, uint32_t wtype, size_t n_in);
/* A job whose act points at the context's quantized rows (quantized types)
 * or at x (float types); the caller may move act, out, W and n_rows_x. */
void kernel_job_init(matmul_job *job, const kernel_pick *p, uint32_t wtype, float *out,
                     const void *W, const float *x, size_t n_rows_x, size_t n_in, size_t n_out,
                     const kernel_ctx *ctx);
/* Output rows [o_begin, o_end) of the job on the calling thread (thread: its
 * index into the per-thread scratch). */
void kernel_job_range(const matmul_job *job, size_t o_begin, size_t o_end, int thread);
/* 1 for a KERNEL_TYPE_*_R8 type. */
int kernel_wtype_packed(uint32_t wtype);

#endif
