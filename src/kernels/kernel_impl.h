/* Internal to src/kernels: the per-tier dispatch tables matmul.c picks from,
 * and the AVX2 entry points of ops. Not for other modules (use matmul.h,
 * ops.h, quant.h). */
#ifndef TPS_KERNELS_IMPL_H
#define TPS_KERNELS_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/compiler.h" /* ALWAYS_INLINE */
#include "kernels/quant.h"

/* Rows of x in one micro-tile group share each weight load: a kernel may
 * tile however it likes as long as every output element is reduced in the
 * same order as its one-row path (batch invariance). */

/* Fills out[r * ld_out + o] for r in [0, n_rows_x), o in [o0, o1):
 *   out (n_rows_x, ld_out) <- act (n_rows_x, n_in) @ W[o0:o1]^T
 * W: rows of w_row_bytes bytes (row o starts at W + o * w_row_bytes).
 * act: rows of act_row_bytes bytes, in the type the table entry names
 * (Q8_0 blocks, Q8_K blocks or F32). tmp: KERNEL_TMP_ROWS * n_in floats of
 * thread-private scratch (used by the Q8_0/Q4_0 tiles to pack 8 weight
 * rows: 9 * n_in bytes). act rows of Q8_0 type are laid out as
 * kernel_act_row_bytes below says, of Q8_K type as kernel_act_k_row_bytes. */
#define KERNEL_ROWS_DECL(name)                                                                     \
    void name(float *restrict out, size_t ld_out, const uint8_t *restrict W, size_t w_row_bytes,   \
              size_t o0, size_t o1, const uint8_t *restrict act, size_t act_row_bytes,             \
              size_t n_rows_x, size_t n_in, float *restrict tmp)
typedef KERNEL_ROWS_DECL((*kernel_rows_fn));

/* A packed K-quant rows kernel over superblocks [kb0, kb1) of K only (a K
 * panel): out's elements continue the sums of the panels before (which
 * must have run, in order, on the same rows: the first starts them), so
 * once the last has run they hold the rows kernel's bits. Lets the matmul
 * give long K (a down projection's 8192 or 14336) activation blocks of as
 * many rows as short K gets. */
#define KERNEL_ROWS_PANEL_DECL(name)                                                               \
    void name(float *restrict out, size_t ld_out, const uint8_t *restrict W, size_t w_row_bytes,   \
              size_t o0, size_t o1, const uint8_t *restrict act, size_t act_row_bytes,             \
              size_t n_rows_x, size_t n_in, float *restrict tmp, size_t kb0, size_t kb1)
typedef KERNEL_ROWS_PANEL_DECL((*kernel_rows_panel_fn));

#define KERNEL_TMP_ROWS 5 /* also room for 2 packed Q8_0 groups: 17 * n_in bytes */

/* ---- activations and 8-row interleaved weight groups --------------------
 *
 * Every Q8_0 / Q4_0 product, in every tier and tile shape, computes per
 * output element ggml's scalar formula in block order:
 *   sumf = fmaf((float)isum_b, d_w_b * d_x_b, sumf),  b = 0 .. nb-1
 * with isum_b the exact int32 sum of the block's 32 products. Any lane
 * layout gives the same isum_b, so the float sequence and its bits depend
 * only on n_in: batch size, tiles, threads and repacking cannot change them.
 *
 * A quantized activation row (act_row_bytes = kernel_act_row_bytes(nb)):
 * nb block_q8_0, then at kernel_act_side_off(nb) nb kernel_act_side. */
typedef struct kernel_act_side {
    float d;        /* the block's scale as float */
    int32_t neg128; /* -128 * sum of its 32 int8 values */
    int32_t neg8;   /* -8 * that sum */
    float s;        /* Q8_1's sum term for Q4_1 / Q5_1: quantize_row_q8_0_act_ref's s */
} kernel_act_side;

static inline size_t kernel_act_side_off(size_t nb) {
    return (nb * sizeof(block_q8_0) + 15) / 16 * 16;
}

static inline size_t kernel_act_row_bytes(size_t nb) {
    return (kernel_act_side_off(nb) + nb * sizeof(kernel_act_side) + 63) / 64 * 64;
}

/* Quantizes x (n,) to Q8_0 blocks plus their side data (act.c), as
 * quantize_row_q8_0_act_ref does: the same bits on either tier. */
void kernel_quantize_act(uint8_t *restrict row, const float *restrict x, size_t n, int use_avx2);

/* 8 weight rows i = 0..7 of one 32-element block, interleaved so that a
 * 32-byte load holds 4 consecutive elements of each row in int32 lane i:
 * one dpbusd then serves 8 weight rows with no horizontal sum.
 * Q8_0: qs[c*32 + i*4 + e] = w_i[4c + e] ^ KERNEL_Q8_R8_BIAS: with VNNI
 * unsigned w + 128, the u8 operand of dpbusd; without, w itself (the
 * maddubs stand-in takes |w| and sign(x, w), and an xor per weight vector
 * cost 5-8% of the AVX2 tier's Q8_0 tile).
 * Q4_0: qs[c*32 + i*4 + e] = the Q4_0 byte qs_i[4c + e], c < 4: its low
 * nibble is element 4c + e, its high nibble element 16 + 4c + e.
 * A packed matrix is groups of 8 rows, each nb group blocks in block order;
 * it takes exactly the bytes of the plain one (8 * 34 and 8 * 18). */
/* Whether this build has a 256-bit int8 dot instruction (AVX-512 VNNI with
 * VL, or AVX-VNNI; vnni.h picks which). Every file of a build sees the same
 * -march, so the packer, the scalar tier and the vector tiles agree on the
 * layout that follows from it. */
#if (defined(__AVX512VNNI__) && defined(__AVX512VL__)) || defined(__AVXVNNI__)
#define KERNEL_VNNI 1
#else
#define KERNEL_VNNI 0
#endif
#define KERNEL_Q8_R8_BIAS (KERNEL_VNNI ? 0x80 : 0x00)

typedef struct block_q8_0x8 {
    uint16_t d[8];
    uint8_t qs[8 * QK8_0];
} block_q8_0x8;
_Static_assert(sizeof(block_q8_0x8) == 8 * sizeof(block_q8_0), "block_q8_0x8 size");

typedef struct block_q4_0x8 {
    uint16_t d[8];
    uint8_t qs[8 * QK4_0 / 2];
} block_q4_0x8;
_Static_assert(sizeof(block_q4_0x8) == 8 * sizeof(block_q4_0), "block_q4_0x8 size");

/* Decode reads each group of packed weights once, as one stream, so the
 * 1-row tiles ask for every line of the block PREFETCH_AHEAD_BYTES ahead.
 * Q8_0 / Q4_0 had asked for one line of the block 8 blocks ahead (Q4_0:
 * 1.2 KB ahead, 2 of every 3 lines left to the hardware prefetcher), Q6_K
 * for none. 110M tg128, 4 alternating rounds, medians: AVX2 tier Q4_0
 * 450 -> 522 t/s, Q8_0 310 -> 323, Q4_K_M (its Q6_K) 494 -> 533; native
 * Q4_0 605 -> 657, Q8_0 410 -> 412, Q4_K_M 526 -> 556. 8 KB was no better,
 * 2 KB worse. */
#define PREFETCH_AHEAD_BYTES 4096
ALWAYS_INLINE void prefetch_block_ahead(const uint8_t *wb, size_t GB) {
    const char *p = (const char *)wb + PREFETCH_AHEAD_BYTES / GB * GB;
    for (size_t l = 0; l < GB; l += 64)
        __builtin_prefetch(p + l, 0, 3);
}

/* Packs rows [0, m) (m <= 8) of W (row stride w_row_bytes, nb blocks) into
 * one group of nb packed blocks at dst; rows m..7 are zero weights with
 * scale 0. is_q4 picks Q4_0 (else Q8_0). */
void kernel_pack_group(uint8_t *restrict dst, const uint8_t *restrict W, size_t w_row_bytes,
                       size_t m, size_t nb, int is_q4);

/* The scalar tier of the Q8_0 / Q4_0 groups (repack.c). */
KERNEL_ROWS_DECL(kernel_rows_q8_0_r8_scalar);
KERNEL_ROWS_DECL(kernel_rows_q4_0_r8_scalar);

/* ---- K-quants: Q4_K / Q6_K weights x Q8_K activations --------------------
 *
 * Each activation row is quantized once per call to n_in/256 block_q8_K
 * (quant.h: d_x = amax/127 as float, q8 = roundf(x/d_x) in [-127, 127],
 * bsums per 16), act_row_bytes = kernel_act_k_row_bytes(nb). Every product,
 * in every tier and tile shape, computes per output element, in superblock
 * order b = 0 .. nb-1 (q8 and d_x of activation block b):
 *
 * Q4_K, sub-blocks j = 0..7 of 32 with 6-bit scale sc_j and min m_j:
 *   isum_b = sum_j sc_j * (sum_{l<32} q4_{32j+l} * q8_{32j+l})
 *   imin_b = sum_j m_j  * (sum_{l<32} q8_{32j+l})
 *   sumf   = fmaf((float)isum_b,  d_w * d_x, sumf)
 *   sumf   = fmaf((float)imin_b, -dmin_w * d_x, sumf)
 * Q6_K, sub-blocks k = 0..15 of 16 with int8 scale sc_k, q6 in 0..63:
 *   isum_b = sum_k sc_k * (sum_{l<16} (q6_{16k+l} - 32) * q8_{16k+l})
 *   sumf   = fmaf((float)isum_b, d_w * d_x, sumf)
 *
 * The integer sums are exact in int32 whatever order a tier adds them in:
 * |isum| <= 8*63*32*15*127 < 2^25 and |imin| <= 8*63*32*127 < 2^21 (Q4_K);
 * |isum| <= 16*128*16*32*127 < 2^28 (Q6_K; the AVX2 tier's unsigned q6 form
 * before taking off 32 * sum_k sc_k * bsum_k stays below 2^29). (float) of
 * an int32 rounds to nearest even in every tier, and d_w * d_x is one float
 * product, so the float sequence, and its bits, depend only on n_in. */
/* A Q8_K activation row: nb block_q8_K, then at kernel_act_k_side_off(nb) nb
 * kernel_act_k_side: each block's bsums summed and paired as the K-quant
 * tiles' mins and Q6_K offsets take them (vpmaddwd against the weights'
 * int16 pairs), once per row instead of once per weight tile. Each word
 * holds two int16, the first in its low half. */
typedef struct kernel_act_k_side {
    int32_t q4[4]; /* (s0, s2), (s1, s3), (s4, s6), (s5, s7); s_j = sum of q8 32j .. 32j + 31 */
    int32_t q6[8]; /* (b0, b2), (b1, b3), (b4, b6), (b5, b7), (b8, b10), ...: bsums per 16 */
} kernel_act_k_side;

static inline size_t kernel_act_k_side_off(size_t nb) {
    return (nb * sizeof(block_q8_K) + 15) / 16 * 16;
}

static inline size_t kernel_act_k_row_bytes(size_t nb) {
    return (kernel_act_k_side_off(nb) + nb * sizeof(kernel_act_k_side) + 63) / 64 * 64;
}

/* Quantizes x (n,), n % 256 == 0, to Q8_K blocks and their kernel_act_k_side
 * (same bits either way; act.c). */
void kernel_quantize_act_k(uint8_t *restrict row, const float *restrict x, size_t n, int use_avx2);

/* The 6-bit scales and mins of a block_q4_K, from its 12 packed bytes
 * (sub-block j < 4: sc = q[j] & 63, m = q[j+4] & 63; j >= 4: low 4 bits
 * from q[j+4], top 2 from q[j-4] (sc) or q[j] (m)), four at a time in
 * little-endian 32-bit words (GGUF files are little-endian). */
static inline void kernel_q4_K_scales(const uint8_t *restrict q, uint8_t sc[8], uint8_t m[8]) {
    uint32_t u[3];
    memcpy(u, q, sizeof u);
    const uint32_t lo6 = 0x3f3f3f3fu, lo4 = 0x0f0f0f0fu, top2 = 0x03030303u;
    const uint32_t s[4] = {u[0] & lo6, (u[2] & lo4) | (((u[0] >> 6) & top2) << 4), u[1] & lo6,
                           ((u[2] >> 4) & lo4) | (((u[1] >> 6) & top2) << 4)};
    memcpy(sc, s, 8);
    memcpy(m, s + 2, 8);
}

/* 8 Q4_K rows i = 0..7 of one superblock, interleaved as block_q4_0x8 is:
 * a 32-byte load of qs holds 4 consecutive quant bytes of each row in
 * int32 lane i, so one dpbusd serves 8 rows (8 sub-block sums at once).
 *   qs[(8k + c)*32 + i*4 + e] = row i's qs[32k + 4c + e]   k < 4, c < 8, e < 4
 * (low nibble: element 64k + 4c + e, of sub-block 2k; high: +32, of 2k+1).
 *   scales[32w + 4i + t] = row i's scales[4w + t]            w < 3, t < 4
 * so the 32-bit words w of the 8 rows' packed 6-bit scales load as one
 * vector each and kernel_q4_K_scales' word arithmetic runs lane by lane.
 * Exactly the bytes of 8 block_q4_K: repacked weights replace the plain. */
typedef struct block_q4_Kx8 {
    uint16_t d[8];
    uint16_t dmin[8];
    uint8_t scales[8 * K_SCALE_SIZE];
    uint8_t qs[8 * QK_K / 2];
} block_q4_Kx8;
_Static_assert(sizeof(block_q4_Kx8) == 8 * sizeof(block_q4_K), "block_q4_Kx8 size");

/* Packs 8 rows of W (row stride w_row_bytes, nb superblocks) into one
 * group of nb block_q4_Kx8 at dst. */
void kernel_pack_group_q4_K(uint8_t *restrict dst, const uint8_t *restrict W, size_t w_row_bytes,
                            size_t nb);

/* 8 Q6_K rows i = 0..7 of one superblock, interleaved the same way (int32
 * lane i of a 32-byte load holds 4 consecutive elements of row i), with
 * each row's 6-bit quants regrouped so that three of four vectors unpack
 * with one AND. With Q_t the q6 (0..63) of element 128h + 32t + 4c + e of
 * row i (h < 2, t < 4, c < 8, e < 4; sub-block 8h + 2t + c/4), byte 4i + e
 * of 32-byte vector q[24h + 8t + c] (t < 3) is Q_t | (Q_3 >> 2t & 3) << 6,
 * so a superblock's tile reads its quants in address order, and
 * scales[32w + 4i + t] = row i's scales[4w + t] (w < 4, t < 4): sub-block
 * 4w + t's scale is byte t of each lane of scales vector w.
 * The same 6 bits per element: exactly the bytes of 8 block_q6_K, and the
 * repacked weights replace the plain. */
typedef struct block_q6_Kx8 {
    uint16_t d[8];
    int8_t scales[8 * QK_K / 16];
    uint8_t q[8 * QK_K * 3 / 4];
} block_q6_Kx8;
_Static_assert(sizeof(block_q6_Kx8) == 8 * sizeof(block_q6_K), "block_q6_Kx8 size");

/* Packs 8 Q6_K rows of W into one group of nb block_q6_Kx8 at dst. */
void kernel_pack_group_q6_K(uint8_t *restrict dst, const uint8_t *restrict W, size_t w_row_bytes,
                            size_t nb);

/* The K-quant rows kernels (kernel_rows_fn; act in Q8_K; tmp unused), and
 * the scalar tier of their groups (repack.c). */
KERNEL_ROWS_DECL(kernel_rows_q4_K_r8_scalar);
KERNEL_ROWS_DECL(kernel_rows_q6_K_r8_scalar);
KERNEL_ROWS_DECL(kernel_rows_q4_K_scalar);
KERNEL_ROWS_DECL(kernel_rows_q6_K_scalar);

/* ---- MXFP4: 8 rows of one 32-element block, interleaved as block_q4_0x8
 * (qs[c*32 + i*4 + e] = row i's qs[4c + e], c < 4) with the rows' E8M0
 * exponents first: exactly the bytes of 8 block_mxfp4 (mxfp4.c). */
typedef struct block_mxfp4x8 {
    uint8_t e[8];
    uint8_t qs[8 * QK_MXFP4 / 2];
} block_mxfp4x8;
_Static_assert(sizeof(block_mxfp4x8) == 8 * sizeof(block_mxfp4), "block_mxfp4x8 size");

/* Packs rows [0, m) (m <= 8) of W into one group of nb blocks; rows m..7
 * are zero weights. */
void kernel_pack_group_mxfp4(uint8_t *restrict dst, const uint8_t *restrict W, size_t w_row_bytes,
                             size_t m, size_t nb);
/* The MXFP4 rows kernels (kernel_rows_fn; act in Q8_0 with side data). */
KERNEL_ROWS_DECL(kernel_rows_mxfp4_scalar);
KERNEL_ROWS_DECL(kernel_rows_mxfp4_r8_scalar);

/* One weight type on one tier: a row of the tier's table. */
typedef struct kernel_type_impl {
    uint32_t act_type; /* GGML_TYPE_Q8_0, _Q8_K or _F32; 0 with rows NULL = unsupported */
    kernel_rows_fn rows;
    /* the same on the type's 8-row groups (kernel_repack): W the packed
     * matrix, w_row_bytes the plain row size, o0 and o1 multiples of 8;
     * NULL when the type has no packed form (kernel_packed_type) */
    kernel_rows_fn rows_r8;
} kernel_type_impl;

/* Packs 8 rows of W (row stride w_row_bytes, nb blocks) into one group of
 * nb packed blocks at dst (kernel_repack's step). */
typedef void (*kernel_pack8_fn)(uint8_t *restrict dst, const uint8_t *restrict W,
                                size_t w_row_bytes, size_t nb);

/* Indexed by ggml type id, designated initialisers; NULL rows = not handled. */
extern const kernel_type_impl kernel_impl_scalar[GGML_TYPE_COUNT_MAX];
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define KERNEL_HAVE_AVX2 1
extern const kernel_type_impl kernel_impl_avx2[GGML_TYPE_COUNT_MAX];
KERNEL_ROWS_DECL(kernel_rows_q4_K_r8_avx2);
KERNEL_ROWS_DECL(kernel_rows_q6_K_r8_avx2);
/* The K-panel form of plain type plain's packed rows kernel, or NULL where
 * this build has none (only the 512-bit VNNI K-quant tiles, which unpack
 * each weight pair once per activation block, gain from longer blocks). */
kernel_rows_panel_fn kernel_rows_panel_avx2(uint32_t plain);
/* side: each block's kernel_act_side, or NULL for plain Q8_0 rows */
void quantize_row_q8_0_avx2(block_q8_0 *restrict y, const float *restrict x, size_t n,
                            kernel_act_side *restrict side);
void quantize_row_q8_K_avx2(block_q8_K *restrict y, const float *restrict x, size_t n);
KERNEL_ROWS_DECL(kernel_rows_q4_K_avx2);
KERNEL_ROWS_DECL(kernel_rows_q6_K_avx2);
KERNEL_ROWS_DECL(kernel_rows_mxfp4_avx2);
KERNEL_ROWS_DECL(kernel_rows_mxfp4_r8_avx2);

float kernel_dot_f32_avx2(const float *restrict a, const float *restrict b, size_t n);
void kernel_axpy_avx2(float *restrict y, float a, const float *restrict x, size_t n);
void kernel_mul_scale_avx2(float *out, const float *x, const float *restrict w, float s, size_t n);
void kernel_add_avx2(float *out, const float *a, const float *b, size_t n);
void kernel_scale_avx2(float *x, float s, size_t n);
void kernel_softmax_sink_avx2(float *x, size_t n, float sink);
void kernel_swiglu_avx2(float *out, const float *gate, const float *up, size_t n);
void kernel_delta_rule_avx2(float *restrict M, const float *restrict q, const float *restrict k,
                            const float *restrict v, float decay, float beta, float scale,
                            float *restrict o, size_t S);
#else
#define KERNEL_HAVE_AVX2 0
#endif

/* ---- the ARM tier (NEON with dotprod; i8mm's smmla for several rows) ----
 * Built into every aarch64 build; which table runs is decided at run time
 * from the CPU's features (cpu_arm.c), since one aarch64 binary serves
 * Cortex-A72 (no dotprod), Graviton 2 (dotprod) and Graviton 3/4 (i8mm).
 * The dotprod and i8mm files enable those extensions per file (#pragma
 * GCC target), so nothing else in the build may use them. A type a table
 * leaves NULL runs the scalar tier's entry. */
#define KERNEL_ARM_DOTPROD 1u /* sdot, udot: HWCAP_ASIMDDP */
#define KERNEL_ARM_I8MM    2u /* smmla: HWCAP2_I8MM */
/* This CPU's KERNEL_ARM_* bits (getauxval on Linux; 0 off aarch64). */
unsigned kernel_arm_caps(void);
#if defined(__aarch64__) && defined(__ARM_NEON)
#define KERNEL_HAVE_NEON 1
extern const kernel_type_impl kernel_impl_neon_dotprod[GGML_TYPE_COUNT_MAX];
extern const kernel_type_impl kernel_impl_neon_i8mm[GGML_TYPE_COUNT_MAX];
#else
#define KERNEL_HAVE_NEON 0
#endif
/* The ARM table this CPU runs (i8mm, else dotprod), NULL when it has
 * neither (or this is no aarch64 build); its name for kernel_tier_name. */
const kernel_type_impl *kernel_neon_table(void);
const char *kernel_neon_name(void);

#endif
