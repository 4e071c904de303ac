/* Matrix multiply against weight matrices in any supported type, threaded
 * with OpenMP over output rows, batch invariant.
 *
 *   out (n_rows_x, n_out) = x (n_rows_x, n_in) @ W^T,  W (n_out, n_in) row-major
 *
 * Q8_0 / Q4_0 weights: each row of x is first quantized to Q8_0 (once per
 * call), and each dot product is ggml's integer one: sum over blocks of
 * d_w * d_x * (sum of int8 products), so results track llama.cpp.
 * Q4_K / Q6_K weights: x is quantized to Q8_K (256 int8 and a float scale
 * per block, once per call), and each dot is integer per superblock, then
 * float (kernel_impl.h has the formula).
 * F32 / F16 / BF16 weights: x stays float, dot in float.
 *
 * Batch invariance: every output element is reduced in one fixed order that
 * depends only on n_in and the weight type, never on n_rows_x, on how rows
 * are tiled, or on the thread count. A token row's result is bit-identical
 * alone or inside a batch of 64 (tests/test_kernels.c checks this).
 *
 * Not here: element-wise helpers (ops.h), block formats (quant.h), attention. */
#ifndef TPS_KERNELS_MATMUL_H
#define TPS_KERNELS_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/pool.h"
#include "kernels/quant.h" /* block_q8_0 */
#include "base/error.h"

/* Which implementation tier runs the dot products. BEST is AVX2 when this
 * build has it (-march=native on an AVX2 machine), NEON on an aarch64 CPU
 * with dotprod (chosen at run time; with i8mm its multi-row tiles use
 * smmla), else SCALAR. REF is the readable reference (dequantize, dot in
 * double): for tests only, slow. */
typedef enum kernel_tier {
    KERNEL_TIER_BEST, /* first, so that a zeroed field asks for the best */
    KERNEL_TIER_SCALAR,
    KERNEL_TIER_AVX2,
    KERNEL_TIER_REF,
    KERNEL_TIER_NEON,
} kernel_tier;

/* True when this build can run the tier (BEST, SCALAR and REF always can). */
int kernel_tier_available(kernel_tier tier);
const char *kernel_tier_name(kernel_tier tier);

/* Threading setting plus scratch (quantized activations, dequantized weight
 * rows), allocated once and grown only when a call needs more. One owner;
 * not for concurrent calls from several threads. */
typedef struct kernel_ctx kernel_ctx;
typedef kernel_ctx kernel_scratch; /* same object, older name */

/* n_threads >= 1 (0 means all OpenMP's default threads). max_rows_x and
 * max_n_in size the scratch up front so the hot path never allocates (0 is
 * fine: the first call allocates). On error *out is NULL. */
int kernel_ctx_create(kernel_ctx **out, int n_threads, size_t max_rows_x, size_t max_n_in,
                      tps_err *err);
void kernel_ctx_free(kernel_ctx *ctx);
int kernel_ctx_threads(const kernel_ctx *ctx);
void kernel_ctx_set_threads(kernel_ctx *ctx, int n_threads);
/* Returns TPS_EUNSUP if the tier is not in this build (the tier is unchanged). */
int kernel_ctx_set_tier(kernel_ctx *ctx, kernel_tier tier);
kernel_tier kernel_ctx_tier(const kernel_ctx *ctx);

/* The context's thread pool (kernels/pool.h), for other per-step work that
 * should share its threads (attention); NULL when it runs one thread.
 * Thread ids it passes are below kernel_ctx_threads(). */
tps_pool *kernel_ctx_pool(kernel_ctx *ctx);
/* Grows scratch to hold n_rows_x rows of n_in; 0 or TPS_ENOMEM. */
int kernel_ctx_reserve(kernel_ctx *ctx, size_t n_rows_x, size_t n_in);

/* out (n_rows_x, n_out) = x (n_rows_x, n_in) @ W^T, W (n_out, n_in) of wtype.
 * out must not overlap x or W. Returns 0; TPS_EUNSUP for a weight type not
 * handled; TPS_EINVAL when n_in is not a whole number of the type's blocks;
 * TPS_ENOMEM if scratch could not grow (nothing written then). */
int kernel_matmul(float *restrict out, const void *restrict W, uint32_t wtype,
                  const float *restrict x, size_t n_rows_x, size_t n_in, size_t n_out,
                  kernel_ctx *ctx);

/* One weight matrix of a kernel_matmul_multi call: out (n_rows_x, n_out) =
 * x @ W^T, W (n_out, n_in) of wtype. */
typedef struct kernel_mat {
    float *out;
    const void *W;
    uint32_t wtype;
    size_t n_out;
} kernel_mat;

/* kernel_matmul for each of n_mats matrices that read the same x (Q, K, V;
 * FFN gate and up): x is quantized once and one parallel region splits the
 * concatenated output rows, so each element is bit-identical to what
 * kernel_matmul gives. Returns as kernel_matmul (the first failure). */
int kernel_matmul_multi(const kernel_mat *mats, size_t n_mats, const float *restrict x,
                        size_t n_rows_x, size_t n_in, kernel_ctx *ctx);

/* ---- grouped products over expert tensors (mixture of experts) ----------
 *
 * An expert tensor holds n_expert matrices (n_out, n_in) of one type, expert
 * e's at W + e * expert_bytes (plain, or repacked: the same bytes either
 * way). A step's rows are routed and grouped by expert into slots (one per
 * (row, chosen expert) pair): group g is slots [first[g], first[g + 1]),
 * all for expert[g], and slot s reads activation row x_row[s]. Each touched
 * expert's weights are read once for all its slots; an expert no slot
 * chose is never read. Every element is the kernel_matmul of its slot's
 * row alone (the tiers' fixed order per element), so a slot's result does
 * not depend on which other slots share its expert or its step. */
typedef struct kernel_experts {
    float *out;          /* (n_slots, n_out), in slot order */
    const void *W;       /* expert 0's matrix, (n_out, n_in) of wtype */
    uint32_t wtype;      /* a ggml type or a KERNEL_TYPE_*_R8 */
    size_t n_out;        /* rows of each expert's matrix */
    size_t expert_bytes; /* bytes from one expert's matrix to the next */
} kernel_experts;

typedef struct kernel_groups {
    size_t n_groups;
    const uint32_t *expert; /* (n_groups,) the expert of each group */
    const uint32_t *first;  /* (n_groups + 1,) first slot of each group; the last is n_slots */
    const uint32_t *x_row;  /* (n_slots,) the activation row of each slot; NULL: row s */
} kernel_groups;

/* For each of n_mats expert tensors (all taking n_in inputs), out[s] =
 * x[x_row[s]] @ W_expert(s)^T for every slot. The activations are quantized
 * once per slot, and one pool job splits (group, output rows) work weighted
 * by each group's slots, so the threads share experts x rows with no
 * barrier between experts. Returns as kernel_matmul. */
int kernel_matmul_grouped(const kernel_experts *mats, size_t n_mats, const float *restrict x,
                          size_t n_in, const kernel_groups *groups, kernel_ctx *ctx);

/* Same maths through the reference tier, single-threaded, allocating as it
 * likes: dequantize W, (Q8_0/Q4_0: quantize x with quantize_row_q8_0_ref and
 * dequantize it; Q4_K/Q6_K: the same with quantize_row_q8_K_ref), dot in
 * double. If abs_out is not NULL it receives
 * sum_k |w_k * x_k| per element, the scale tests measure errors against. */
int kernel_matmul_ref(float *restrict out, double *restrict abs_out, const void *restrict W,
                      uint32_t wtype, const float *restrict x, size_t n_rows_x, size_t n_in,
                      size_t n_out);

/* ---- weights repacked into 8-row interleaved groups (optional) ----------
 *
 * A matrix of a quantized type (every one but F32, F16, BF16) with
 * n_out % 8 == 0 can be copied once (at model load) into groups of 8
 * interleaved rows; kernel_matmul then takes the copy with wtype
 * KERNEL_TYPE_R8(type) (kernel_packed_type) and the same n_in, n_out. The
 * copy has exactly the size of the original and gives bit-identical results
 * (the plain 32-element types pack 8 rows on the fly into scratch, so
 * repacking at load only skips that copy; plain Q4_K / Q6_K run one weight
 * row at a time, their packed forms 8 rows per dpbusd). */
#define KERNEL_TYPE_PACKED   0x1000u
#define KERNEL_TYPE_R8(t)    (KERNEL_TYPE_PACKED + (uint32_t)(t)) /* ggml type t in 8-row groups */
#define KERNEL_TYPE_Q8_0_R8  KERNEL_TYPE_R8(GGML_TYPE_Q8_0)
#define KERNEL_TYPE_Q4_0_R8  KERNEL_TYPE_R8(GGML_TYPE_Q4_0)
#define KERNEL_TYPE_Q4_K_R8  KERNEL_TYPE_R8(GGML_TYPE_Q4_K)  /* n_in % 256 == 0 */
#define KERNEL_TYPE_Q6_K_R8  KERNEL_TYPE_R8(GGML_TYPE_Q6_K)  /* n_in % 256 == 0 */
#define KERNEL_TYPE_MXFP4_R8 KERNEL_TYPE_R8(GGML_TYPE_MXFP4) /* (kernel_impl.h) */

/* The packed type for wtype, or 0 when wtype has none. */
uint32_t kernel_packed_type(uint32_t wtype);

/* dst (kernel_row_bytes(wtype, n_in) * n_out bytes) <- W (n_out, n_in)
 * repacked. Returns 0; TPS_EUNSUP for a type without a packed form;
 * TPS_EINVAL when n_out % 8 is not 0 or n_in is not whole blocks. */
int kernel_repack(void *restrict dst, const void *restrict W, uint32_t wtype, size_t n_out,
                  size_t n_in);

/* Fast Q8_0 quantizer of activations (AVX2 when built): bit-identical to
 * quantize_row_q8_0_ref. x (n,) -> y (n/32 blocks), n % 32 == 0. */
void quantize_row_q8_0(block_q8_0 *restrict y, const float *restrict x, size_t n);

#endif
