/* Attention over the paged KV cache (src/engine/attn/attention.c) against the
 * plain double-precision reference, with F16 and F32 KV, GQA groups of 1, 2
 * and 4, head sizes with and without a tail of 8, position counts that end
 * inside a block, on a block edge and one past it; and the same row's
 * output is bit-identical whatever the scratch held before (no state), and
 * whether it runs alone, in a run of rows (attn_group_rows) or beside
 * other heads (attn_heads); also with a sliding window and soft-capping
 * (Gemma). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/attn/attention.h"
#include "engine/kv/kv_cache.h"
#include "kernels/quant.h"

#define TOL_ATTN_REL 1e-5 /* float dots and sums vs double, relative to max |v| */

static float rnd(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*s >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
}

/* A cache of n_kv_heads heads with n_pos random positions in layer 1 (of 2)
 * of seq, whose blocks come after a decoy sequence's so they are not 0, 1,
 * 2 ... */
typedef struct test_kv {
    kv_cache *kv;
    kv_seq decoy, seq;
} test_kv;

static void test_kv_make(test_kv *t, uint32_t kv_type, uint32_t n_kv_heads, uint32_t head_dim,
                         uint32_t n_pos, uint64_t *s) {
    const uint32_t B = 16, layers = 2, kv_dim = n_kv_heads * head_dim;
    kv_cache_params p = {.n_layers = layers,
                         .kv_dim = kv_dim,
                         .head_dim = head_dim,
                         .block_tokens = B,
                         .kv_type = kv_type,
                         .n_blocks = 3 * ((n_pos + B - 1) / B) + 2};
    memset(t, 0, sizeof *t);
    tps_err err = {0};
    cr_assert_eq(kv_cache_create(&t->kv, &p, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_seq_init(&t->decoy, 64), 0);
    cr_assert_eq(kv_seq_init(&t->seq, 64), 0);
    cr_assert_eq(kv_seq_reserve(t->kv, &t->decoy, B + 1), 0);
    cr_assert_eq(kv_seq_reserve(t->kv, &t->seq, n_pos), 0);
    float *row = malloc(sizeof(float) * kv_dim);
    for (uint32_t l = 0; l < layers; l++)
        for (uint32_t pos = 0; pos < n_pos; pos++)
            for (int kvv = 0; kvv < 2; kvv++) {
                for (uint32_t i = 0; i < kv_dim; i++)
                    row[i] = rnd(s) * 2.0f;
                for (uint32_t h = 0; h < n_kv_heads; h++) {
                    void *dst = kvv ? kv_v_head(t->kv, &t->seq, l, pos, h)
                                    : kv_k_head(t->kv, &t->seq, l, pos, h);
                    const float *src = row + (size_t)h * head_dim;
                    if (kv_type == GGML_TYPE_F16)
                        fp32_to_fp16_row(dst, src, head_dim);
                    else if (kv_type == GGML_TYPE_Q8_0)
                        quantize_row_q8_0_ref(dst, src, head_dim);
                    else
                        memcpy(dst, src, sizeof(float) * head_dim);
                }
            }
    free(row);
}

static void test_kv_free(test_kv *t) {
    kv_seq_release(t->kv, &t->seq);
    kv_seq_release(t->kv, &t->decoy);
    kv_seq_destroy(&t->seq);
    kv_seq_destroy(&t->decoy);
    kv_cache_free(t->kv);
}

static void check_mods(uint32_t kv_type, uint32_t n_kv_heads, uint32_t group, uint32_t head_dim,
                       uint32_t n_pos, attn_mods mods) {
    uint64_t s = 1234 + n_pos;
    test_kv t;
    test_kv_make(&t, kv_type, n_kv_heads, head_dim, n_pos, &s);
    const kv_cache *kv = t.kv;
    const kv_seq *seq = &t.seq;
    const size_t qn = (size_t)group * head_dim;
    float *q = malloc(sizeof(float) * qn), *got = malloc(sizeof(float) * qn),
          *again = malloc(sizeof(float) * qn), *want = malloc(sizeof(float) * qn);
    float *scores = malloc(sizeof(float) * group * n_pos);
    for (size_t i = 0; i < qn; i++)
        q[i] = rnd(&s);
    const float scale = 1.0f / sqrtf((float)head_dim);
    for (uint32_t kvh = 0; kvh < n_kv_heads; kvh++) {
        attn_group(got, q, kv, seq, 1, kvh, group, head_dim, n_pos, scale, mods, scores);
        attn_group_ref(want, q, kv, seq, 1, kvh, group, head_dim, n_pos, scale, mods);
        for (size_t i = 0; i < group * n_pos; i++)
            scores[i] = 1e30f; /* garbage in the scratch must not matter */
        attn_group(again, q, kv, seq, 1, kvh, group, head_dim, n_pos, scale, mods, scores);
        cr_assert_eq(memcmp(got, again, sizeof(float) * qn), 0, "not deterministic");
        for (size_t i = 0; i < qn; i++)
            cr_assert(fabsf(got[i] - want[i]) <= TOL_ATTN_REL * 2.0f + 1e-6f,
                      "type %u heads %u group %u hd %u n_pos %u kvh %u elem %zu: got %.9g want "
                      "%.9g",
                      kv_type, n_kv_heads, group, head_dim, n_pos, kvh, i, got[i], want[i]);
    }
    /* several heads in one call (batched decode) and a range that does not
     * start at 0: each head's output equals attn_group's, bit for bit */
    {
        const size_t hn = (size_t)n_kv_heads * qn;
        float *hq = malloc(sizeof(float) * hn), *hout = malloc(sizeof(float) * hn);
        float *hscores = malloc(sizeof(float) * n_kv_heads * group * n_pos);
        for (size_t i = 0; i < hn; i++)
            hq[i] = rnd(&s);
        for (uint32_t h0 = 0; h0 < 2 && h0 < n_kv_heads; h0++) {
            for (size_t i = 0; i < (size_t)n_kv_heads * group * n_pos; i++)
                hscores[i] = 1e30f;
            attn_heads(hout, hq + h0 * qn, kv, seq, 1, h0, n_kv_heads, group, head_dim, n_pos,
                       scale, mods, hscores);
            for (uint32_t kvh = h0; kvh < n_kv_heads; kvh++) {
                attn_group(got, hq + kvh * qn, kv, seq, 1, kvh, group, head_dim, n_pos, scale, mods,
                           scores);
                cr_assert_eq(memcmp(got, hout + (kvh - h0) * qn, sizeof(float) * qn), 0,
                             "type %u group %u hd %u n_pos %u: head %u of heads [%u, %u) differs",
                             kv_type, group, head_dim, n_pos, kvh, h0, n_kv_heads);
            }
        }
        free(hscores);
        free(hout);
        free(hq);
    }
    /* runs of 1..ATTN_ROWS rows ending at n_pos: each row equals attn_group alone */
    const size_t ld = qn + 3;
    float *qs = malloc(sizeof(float) * ld * ATTN_ROWS),
          *outs = malloc(sizeof(float) * ld * ATTN_ROWS);
    float *scratch = malloc(sizeof(float) * attn_rows_scratch(group, head_dim, n_pos));
    for (size_t i = 0; i < ld * ATTN_ROWS; i++)
        qs[i] = rnd(&s);
    for (uint32_t nr = 1; nr <= ATTN_ROWS && nr <= n_pos; nr++)
        for (uint32_t kvh = 0; kvh < n_kv_heads; kvh++) {
            const uint32_t n_pos0 = n_pos - nr + 1;
            attn_group_rows(outs, qs, ld, kv, seq, 1, kvh, group, head_dim, n_pos0, nr, scale, mods,
                            scratch);
            for (uint32_t i = 0; i < nr; i++) {
                attn_group(got, qs + i * ld, kv, seq, 1, kvh, group, head_dim, n_pos0 + i, scale,
                           mods, scores);
                cr_assert_eq(memcmp(got, outs + i * ld, sizeof(float) * qn), 0,
                             "type %u group %u hd %u n_pos %u: row %u of a run of %u differs",
                             kv_type, group, head_dim, n_pos, i, nr);
            }
        }
    free(scratch);
    free(outs);
    free(qs);
    free(q);
    free(got);
    free(again);
    free(want);
    free(scores);
    test_kv_free(&t);
}

static void check(uint32_t kv_type, uint32_t n_kv_heads, uint32_t group, uint32_t head_dim,
                  uint32_t n_pos) {
    check_mods(kv_type, n_kv_heads, group, head_dim, n_pos, (attn_mods){0});
}

/* Gemma's changes: a sliding window that starts inside a block, on a block
 * edge, or covers everything, and soft-capped scores, alone and in runs. */
Test(attention, sliding_window_and_softcap_match_reference) {
    const uint32_t types[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0};
    const uint32_t windows[] = {1, 7, 16, 40};
    const uint32_t n_pos[] = {1, 17, 33, 70};
    for (size_t t = 0; t < 3; t++)
        for (size_t w = 0; w < 4; w++)
            for (size_t n = 0; n < 4; n++) {
                check_mods(types[t], 2, 2, 32, n_pos[n], (attn_mods){.window = windows[w]});
                check_mods(types[t], 2, 2, 32, n_pos[n],
                           (attn_mods){.window = windows[w], .softcap = 0.5f});
            }
    check_mods(GGML_TYPE_F32, 2, 4, 40, 50, (attn_mods){.softcap = 0.3f});
}

Test(attention, matches_reference_for_f16_and_f32_kv_gqa_groups_and_awkward_sizes) {
    const uint32_t types[] = {GGML_TYPE_F16, GGML_TYPE_F32};
    const uint32_t head_dims[] = {8, 13, 64, 72, 128};
    const uint32_t groups[] = {1, 2, 4};
    const uint32_t n_pos[] = {1, 7, 8, 9, 16, 17, 33, 100};
    for (size_t t = 0; t < 2; t++)
        for (size_t h = 0; h < sizeof head_dims / sizeof head_dims[0]; h++)
            for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
                for (size_t n = 0; n < sizeof n_pos / sizeof n_pos[0]; n++)
                    check(types[t], 2, groups[g], head_dims[h], n_pos[n]);
    /* more heads than two, for attn_heads' walk across them (110M: 12 of 64) */
    check(GGML_TYPE_F16, 5, 1, 64, 100);
    check(GGML_TYPE_F16, 3, 2, 64, 33);
    /* the wide heads' values sweeps (128, then 64, then a tail: 204), and
     * Gemma 4's global heads of 512 */
    check(GGML_TYPE_F16, 2, 2, 204, 100);
    check(GGML_TYPE_F32, 2, 4, 204, 33);
    check(GGML_TYPE_F16, 2, 8, 512, 70);
}

/* Q8_0 KV: the reference reads the same dequantized values (d * q), so the
 * tolerance is the float-vs-double one of the other types. */
Test(attention, matches_reference_for_q8_0_kv) {
    const uint32_t head_dims[] = {32, 64, 96, 128, 224, 256};
    const uint32_t groups[] = {1, 4};
    const uint32_t n_pos[] = {1, 8, 17, 100};
    for (size_t h = 0; h < sizeof head_dims / sizeof head_dims[0]; h++)
        for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
            for (size_t n = 0; n < sizeof n_pos / sizeof n_pos[0]; n++)
                check(GGML_TYPE_Q8_0, 2, groups[g], head_dims[h], n_pos[n]);
}

Test(attention, q8_0_kv_refuses_heads_that_are_not_whole_blocks) {
    kv_cache_params p = {.n_layers = 1,
                         .kv_dim = 2 * 72,
                         .head_dim = 72,
                         .block_tokens = 16,
                         .kv_type = GGML_TYPE_Q8_0,
                         .n_blocks = 4};
    kv_cache *kv = NULL;
    tps_err err = {0};
    cr_assert_neq(kv_cache_create(&kv, &p, &err), 0);
    cr_assert_null(kv);
    cr_assert(strstr(err.msg, "multiple of 32") != NULL, "%s", err.msg);
}

/* attn_group_rows tiles several rows (and the heads of a group) over each
 * K/V chunk; every row must still equal attn_group alone, bit for bit:
 * runs of 1..ATTN_ROWS rows starting anywhere in a chunk, groups that leave
 * a partial tile, head sizes with and without an 8-float tail (and the 64
 * and 128 the tiles are specialized for), windows that start inside a
 * chunk at a different place for each row, soft-capping, and scratch that
 * holds NaNs from before. */
static void check_runs(uint32_t kv_type, uint32_t group, uint32_t head_dim, uint32_t n_pos0,
                       attn_mods mods) {
    const uint32_t n_kv_heads = 2, last = n_pos0 + ATTN_ROWS - 1;
    uint64_t s = 99 + n_pos0 * 7 + head_dim;
    test_kv t;
    test_kv_make(&t, kv_type, n_kv_heads, head_dim, last, &s);
    const size_t qn = (size_t)group * head_dim, ld = n_kv_heads * qn + 5;
    float *qs = malloc(sizeof(float) * ld * ATTN_ROWS),
          *outs = malloc(sizeof(float) * ld * ATTN_ROWS);
    float *got = malloc(sizeof(float) * qn), *scores = malloc(sizeof(float) * group * last);
    const size_t n_scratch = attn_rows_scratch(group, head_dim, last);
    float *scratch = malloc(sizeof(float) * n_scratch);
    for (size_t i = 0; i < ld * ATTN_ROWS; i++)
        qs[i] = rnd(&s);
    const float scale = 1.0f / sqrtf((float)head_dim);
    for (uint32_t nr = 1; nr <= ATTN_ROWS; nr++)
        for (uint32_t kvh = 0; kvh < n_kv_heads; kvh++) {
            for (size_t i = 0; i < n_scratch; i++)
                scratch[i] = NAN;
            const size_t off = kvh * qn;
            attn_group_rows(outs + off, qs + off, ld, t.kv, &t.seq, 1, kvh, group, head_dim, n_pos0,
                            nr, scale, mods, scratch);
            for (uint32_t i = 0; i < nr; i++) {
                attn_group(got, qs + off + i * ld, t.kv, &t.seq, 1, kvh, group, head_dim,
                           n_pos0 + i, scale, mods, scores);
                cr_assert_eq(memcmp(got, outs + off + i * ld, sizeof(float) * qn), 0,
                             "type %u group %u hd %u window %u softcap %g: row %u of a run of %u "
                             "from %u differs",
                             kv_type, group, head_dim, mods.window, mods.softcap, i, nr, n_pos0);
            }
        }
    free(scratch);
    free(scores);
    free(got);
    free(outs);
    free(qs);
    test_kv_free(&t);
}

Test(attention, row_runs_equal_single_rows_bit_for_bit) {
    const uint32_t head_dims[] = {13, 40, 64, 128};
    const uint32_t groups[] = {1, 3};
    const uint32_t starts[] = {1, 6, 37};
    const attn_mods mods[] = {{0}, {.window = 5}, {.window = 19, .softcap = 0.7f}};
    for (size_t h = 0; h < sizeof head_dims / sizeof head_dims[0]; h++)
        for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
            for (size_t n = 0; n < sizeof starts / sizeof starts[0]; n++)
                for (size_t m = 0; m < sizeof mods / sizeof mods[0]; m++)
                    check_runs(GGML_TYPE_F16, groups[g], head_dims[h], starts[n], mods[m]);
    check_runs(GGML_TYPE_F32, 2, 72, 11, (attn_mods){0});
    check_runs(GGML_TYPE_Q8_0, 2, 64, 11, (attn_mods){.window = 9});
    /* decode's values sweeps of 128 and 64 floats, then 8-float chunks and a
     * tail (AVX-512: 16-float vectors, the Q8_0 ones at both halves of a block) */
    check_runs(GGML_TYPE_F16, 2, 204, 6, (attn_mods){0});
    check_runs(GGML_TYPE_Q8_0, 2, 224, 6, (attn_mods){0});
}
