/* Kernels of the mixture-of-experts models: MXFP4 (gpt-oss's expert type)
 * dequantized and quantized bit for bit as ggml does (tests/data/mxfp4,
 * made by ggml itself), its products on every tier against the reference
 * and bit-identical packed or plain, alone or in a batch; and the grouped
 * product over expert tensors: every slot equals kernel_matmul of its row
 * alone against its expert, on every weight type, tier and thread count,
 * and an expert no slot chose is never read. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "support/kernel_check.h"

#define LEN(a) (sizeof(a) / sizeof(a)[0])

static void *read_data(const char *name, size_t want) {
    char p[512];
    snprintf(p, sizeof p, "%s/tests/data/mxfp4/%s", TPS_SOURCE_DIR, name);
    FILE *f = fopen(p, "rb");
    cr_assert_not_null(f, "%s", p);
    void *buf = malloc(want);
    cr_assert_eq(fread(buf, 1, want, f), want, "%s is short", p);
    fclose(f);
    return buf;
}

Test(moe_kernels, mxfp4_dequantizes_every_exponent_and_code_as_ggml) {
    enum { N = 512 };
    const block_mxfp4 *blocks = read_data("blocks.bin", N * sizeof(block_mxfp4));
    const float *want = read_data("dequant.f32", N * 32 * sizeof(float));
    float *got = malloc(N * 32 * sizeof *got);
    cr_assert_eq(dequantize_row(got, blocks, GGML_TYPE_MXFP4, N * 32), 0);
    for (size_t i = 0; i < N * 32; i++)
        cr_assert_eq(memcmp(&got[i], &want[i], sizeof(float)), 0,
                     "element %zu (block %zu, e %u): got %a, ggml %a", i, i / 32, blocks[i / 32].e,
                     got[i], want[i]);
    free(got);
    free((void *)want);
    free((void *)blocks);
}

Test(moe_kernels, mxfp4_quantizes_as_ggml_reference) {
    enum { N = 256 };
    const float *x = read_data("quant_in.f32", N * 32 * sizeof(float));
    const uint8_t *want = read_data("quant_out.bin", N * sizeof(block_mxfp4));
    block_mxfp4 got[N];
    cr_assert_eq(quantize_row_any(GGML_TYPE_MXFP4, got, x, N * 32), 0);
    for (size_t b = 0; b < N; b++)
        cr_assert_eq(memcmp(&got[b], want + b * sizeof(block_mxfp4), sizeof(block_mxfp4)), 0,
                     "block %zu differs from ggml's", b);
    free((void *)want);
    free((void *)x);
}

/* MXFP4 products against the double reference at awkward sizes, and the
 * packed copy's bits equal to the plain scalar tier on every tier and
 * thread count, each row alone equal to its row in the batch. */
Test(moe_kernels, mxfp4_matmul_matches_reference_and_packed_equals_plain) {
    const size_t n_ins[] = {32, 96, 288, 2880};
    const size_t n_outs[] = {8, 24, 40};
    const size_t n_rows[] = {1, 2, 3, 4, 5, 9};
    kernel_ctx *scalar = kc_new_ctx(1, KERNEL_TIER_SCALAR);
    for (size_t a = 0; a < LEN(n_ins); a++)
        for (size_t b = 0; b < LEN(n_outs); b++)
            for (size_t c = 0; c < LEN(n_rows); c++) {
                const size_t n_in = n_ins[a], n_out = n_outs[b], nr = n_rows[c];
                void *w = kc_make_weights(GGML_TYPE_MXFP4, n_out, n_in, n_in + n_out);
                void *wp = malloc(kernel_row_bytes(GGML_TYPE_MXFP4, n_in) * n_out);
                cr_assert_eq(kernel_repack(wp, w, GGML_TYPE_MXFP4, n_out, n_in), 0);
                float *x = malloc(nr * n_in * sizeof *x), *want = malloc(nr * n_out * 4),
                      *got = malloc(nr * n_out * 4), *ref = malloc(nr * n_out * 4);
                double *scale = malloc(nr * n_out * sizeof *scale);
                kc_fill(x, nr * n_in, nr + n_in);
                cr_assert_eq(kernel_matmul(want, w, GGML_TYPE_MXFP4, x, nr, n_in, n_out, scalar),
                             0);
                cr_assert_eq(kernel_matmul_ref(ref, scale, w, GGML_TYPE_MXFP4, x, nr, n_in, n_out),
                             0);
                for (size_t i = 0; i < nr * n_out; i++)
                    cr_assert(fabs((double)want[i] - ref[i]) <= 1e-5 * scale[i] + 1e-6,
                              "n_in %zu elem %zu: %g vs %g", n_in, i, want[i], ref[i]);
                for (int threads = 1; threads <= 2; threads++)
                    for (int tier = 0; tier < 2; tier++) {
                        kernel_ctx *ctx =
                            kc_new_ctx(threads, tier ? KERNEL_TIER_SCALAR : KERNEL_TIER_BEST);
                        for (int packed = 0; packed <= 1; packed++) {
                            cr_assert_eq(
                                kernel_matmul(got, packed ? wp : w,
                                              packed ? KERNEL_TYPE_MXFP4_R8 : GGML_TYPE_MXFP4, x,
                                              nr, n_in, n_out, ctx),
                                0);
                            cr_assert_eq(memcmp(got, want, nr * n_out * 4), 0,
                                         "tier %d threads %d packed %d n_in %zu n_out %zu rows "
                                         "%zu: differs from the plain scalar tier",
                                         tier, threads, packed, n_in, n_out, nr);
                            cr_assert_eq(
                                kernel_matmul(got, packed ? wp : w,
                                              packed ? KERNEL_TYPE_MXFP4_R8 : GGML_TYPE_MXFP4,
                                              x + (nr - 1) * n_in, 1, n_in, n_out, ctx),
                                0);
                            cr_assert_eq(memcmp(got, want + (nr - 1) * n_out, n_out * 4), 0);
                        }
                        kernel_ctx_free(ctx);
                    }
                free(scale);
                free(ref);
                free(got);
                free(want);
                free(x);
                free(wp);
                free(w);
            }
    kernel_ctx_free(scalar);
}

/* Largest codes with the largest activations: the int16 sums of the AVX2
 * stand-in stay exact. */
Test(moe_kernels, mxfp4_extreme_codes_do_not_overflow) {
    const size_t n_in = 256, n_out = 8;
    const size_t rb = kernel_row_bytes(GGML_TYPE_MXFP4, n_in);
    uint8_t *w = malloc(rb * n_out);
    for (size_t o = 0; o < n_out; o++)
        for (size_t b = 0; b < n_in / 32; b++) {
            block_mxfp4 *blk = (block_mxfp4 *)(w + o * rb) + b;
            blk->e = 120;
            memset(blk->qs, o % 2 ? 0x77 : 0xff, sizeof blk->qs); /* +12 or -12 everywhere */
        }
    float x[256], got[8], ref[8];
    for (size_t i = 0; i < n_in; i++)
        x[i] = i % 3 ? 1.0f : -1.0f;
    for (int sign = 0; sign < 2; sign++) {
        for (size_t i = 0; i < n_in; i++)
            x[i] = sign ? -1.0f : 1.0f;
        cr_assert_eq(kernel_matmul_ref(ref, NULL, w, GGML_TYPE_MXFP4, x, 1, n_in, n_out), 0);
        const kernel_tier tiers[] = {KERNEL_TIER_BEST, KERNEL_TIER_SCALAR};
        for (size_t t = 0; t < LEN(tiers); t++) {
            kernel_ctx *ctx = kc_new_ctx(1, tiers[t]);
            cr_assert_eq(kernel_matmul(got, w, GGML_TYPE_MXFP4, x, 1, n_in, n_out, ctx), 0);
            for (size_t o = 0; o < n_out; o++)
                cr_assert_float_eq(got[o], ref[o], 1e-6f * fabsf(ref[o]), "%zu: %g vs %g", o,
                                   got[o], ref[o]);
            kernel_ctx_free(ctx);
        }
    }
    free(w);
}

/* ---- grouped products -------------------------------------------------- */

typedef struct routed {
    size_t n_rows, k, n_expert, n_slots, n_groups;
    uint32_t expert[64], first[65], x_row[256];
} routed;

/* Each of n_rows rows picks k distinct experts of n_expert (seeded), never
 * expert `unused`; slots grouped by expert, rows increasing in a group. */
static void route(routed *r, size_t n_rows, size_t k, size_t n_expert, uint32_t unused,
                  uint64_t seed) {
    uint32_t pick[64][8];
    uint64_t s = seed + 11;
    for (size_t i = 0; i < n_rows; i++)
        for (size_t j = 0; j < k; j++) {
            uint32_t e;
            int dup;
            do {
                e = (uint32_t)(kc_rng_next(&s) % n_expert);
                dup = e == unused;
                for (size_t q = 0; q < j; q++)
                    dup |= pick[i][q] == e;
            } while (dup);
            pick[i][j] = e;
        }
    *r = (routed){.n_rows = n_rows, .k = k, .n_expert = n_expert};
    for (uint32_t e = 0; e < n_expert; e++) {
        size_t before = r->n_slots;
        for (size_t i = 0; i < n_rows; i++)
            for (size_t j = 0; j < k; j++)
                if (pick[i][j] == e) r->x_row[r->n_slots++] = (uint32_t)i;
        if (r->n_slots > before) {
            r->expert[r->n_groups] = e;
            r->first[r->n_groups++] = (uint32_t)before;
        }
    }
    r->first[r->n_groups] = (uint32_t)r->n_slots;
}

/* A buffer of n_expert matrices of eb bytes whose last expert lies on
 * pages no one may read (a read faults): that expert is never routed to,
 * so a kernel that read an untouched expert would crash. The first
 * n_expert - 1 matrices are copied from src. */
typedef struct guarded {
    uint8_t *map, *w;
    size_t map_bytes;
} guarded;

static void guard(guarded *g, const uint8_t *src, size_t eb, size_t n_expert) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t used = eb * (n_expert - 1), lead = (used + page - 1) / page * page;
    const size_t tail = (eb + page - 1) / page * page;
    g->map_bytes = lead + tail;
    g->map = mmap(NULL, g->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(g->map, MAP_FAILED);
    cr_assert_eq(mprotect(g->map + lead, tail, PROT_NONE), 0);
    g->w = g->map + lead - used;
    memcpy(g->w, src, used);
}

static void unguard(guarded *g) {
    munmap(g->map, g->map_bytes);
}

/* For one weight type: two expert tensors (n_out_a and 16 rows) over 8
 * experts, plain and repacked, on every tier and 1-3 threads: every slot's
 * output is the bits of kernel_matmul of its row alone against its expert,
 * and the last expert, which no row chose, lies on unreadable pages. */
static void check_grouped(uint32_t type, size_t n_in, size_t n_out_a, size_t n_rows, size_t k) {
    const size_t n_expert = 8, n_out_b = 16;
    const uint32_t unused = (uint32_t)n_expert - 1;
    const size_t rb = kernel_row_bytes(type, n_in);
    const size_t eb_a = rb * n_out_a, eb_b = rb * n_out_b;
    uint8_t *wa = kc_make_weights(type, n_expert * n_out_a, n_in, 77 + n_in);
    uint8_t *wb = kc_make_weights(type, n_expert * n_out_b, n_in, 99 + n_in);
    const int packable = kernel_packed_type(type) != 0;
    uint8_t *pa = malloc(eb_a * n_expert), *pb = malloc(eb_b * n_expert);
    for (size_t e = 0; packable && e < n_expert; e++) {
        cr_assert_eq(kernel_repack(pa + e * eb_a, wa + e * eb_a, type, n_out_a, n_in), 0);
        cr_assert_eq(kernel_repack(pb + e * eb_b, wb + e * eb_b, type, n_out_b, n_in), 0);
    }
    guarded ga, gb, gpa, gpb;
    guard(&ga, wa, eb_a, n_expert), guard(&gb, wb, eb_b, n_expert);
    guard(&gpa, pa, eb_a, n_expert), guard(&gpb, pb, eb_b, n_expert);
    routed r;
    route(&r, n_rows, k, n_expert, unused, n_rows * 7 + k);
    float *x = malloc(n_rows * n_in * sizeof *x);
    kc_fill(x, n_rows * n_in, n_in + n_rows);
    float *oa = malloc(r.n_slots * n_out_a * 4), *ob = malloc(r.n_slots * n_out_b * 4);
    float *want = malloc((n_out_a + n_out_b) * 4);
    const kernel_groups g = {r.n_groups, r.expert, r.first, r.x_row};
    const kernel_tier tiers[] = {KERNEL_TIER_BEST, KERNEL_TIER_SCALAR, KERNEL_TIER_REF};
    for (size_t t = 0; t < LEN(tiers); t++)
        for (int threads = 1; threads <= 3; threads++)
            for (int packed = 0; packed <= packable && !(packed && t == 2); packed++) {
                kernel_ctx *ctx = kc_new_ctx(threads, tiers[t]);
                const uint32_t wt = packed ? kernel_packed_type(type) : type;
                const uint8_t *A = packed ? gpa.w : ga.w, *B = packed ? gpb.w : gb.w;
                const kernel_experts mats[2] = {{oa, A, wt, n_out_a, eb_a},
                                                {ob, B, wt, n_out_b, eb_b}};
                cr_assert_eq(kernel_matmul_grouped(mats, 2, x, n_in, &g, ctx), 0);
                for (size_t gi = 0; gi < r.n_groups; gi++)
                    for (size_t s = r.first[gi]; s < r.first[gi + 1]; s++) {
                        const float *xr = x + r.x_row[s] * n_in;
                        const uint32_t e = r.expert[gi];
                        cr_assert_eq(
                            kernel_matmul(want, A + e * eb_a, wt, xr, 1, n_in, n_out_a, ctx), 0);
                        cr_assert_eq(kernel_matmul(want + n_out_a, B + e * eb_b, wt, xr, 1, n_in,
                                                   n_out_b, ctx),
                                     0);
                        cr_assert_eq(memcmp(oa + s * n_out_a, want, n_out_a * 4), 0,
                                     "type %u tier %s threads %d packed %d rows %zu k %zu: slot "
                                     "%zu (expert %u) differs from its row alone",
                                     type, kernel_tier_name(tiers[t]), threads, packed, n_rows, k,
                                     s, e);
                        cr_assert_eq(memcmp(ob + s * n_out_b, want + n_out_a, n_out_b * 4), 0,
                                     "type %u second matrix, slot %zu", type, s);
                    }
                kernel_ctx_free(ctx);
            }
    unguard(&gpb), unguard(&gpa), unguard(&gb), unguard(&ga);
    free(want);
    free(ob);
    free(oa);
    free(x);
    free(pb);
    free(pa);
    free(wb);
    free(wa);
}

Test(moe_kernels, grouped_slots_equal_their_rows_alone_and_untouched_experts_are_not_read) {
    const uint32_t types32[] = {GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_BF16,
                                GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_MXFP4};
    const size_t rows[] = {1, 2, 5, 17};
    for (size_t t = 0; t < LEN(types32); t++)
        for (size_t r = 0; r < LEN(rows); r++) {
            check_grouped(types32[t], 64, 24, rows[r], 2);
            check_grouped(types32[t], 96, 40, rows[r], 4);
        }
    const uint32_t types_k[] = {GGML_TYPE_Q4_K, GGML_TYPE_Q6_K};
    for (size_t t = 0; t < LEN(types_k); t++)
        for (size_t r = 0; r < LEN(rows); r++)
            check_grouped(types_k[t], 256, 24, rows[r], 3);
}

Test(moe_kernels, grouped_rejects_mixed_activation_types_and_runs_empty) {
    kernel_ctx *ctx = kc_new_ctx(2, KERNEL_TIER_BEST);
    float x[32] = {0}, o1[8], o2[8];
    uint8_t w1[8 * 34] = {0}, w2[8 * 144] = {0};
    const uint32_t expert[1] = {0}, first[2] = {0, 1};
    const kernel_groups g = {1, expert, first, NULL};
    const kernel_experts mixed[2] = {{o1, w1, GGML_TYPE_Q8_0, 8, sizeof w1},
                                     {o2, w2, GGML_TYPE_Q4_K, 8, sizeof w2}};
    cr_expect_neq(kernel_matmul_grouped(mixed, 2, x, 32, &g, ctx), 0);
    const uint32_t none[1] = {0};
    const kernel_groups empty = {0, expert, none, NULL};
    cr_expect_eq(kernel_matmul_grouped(mixed, 1, x, 32, &empty, ctx), 0);
    kernel_ctx_free(ctx);
}
