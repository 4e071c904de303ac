/* tokenizer.ggml.suppress_tokens (Gemma 4's converter copies it from
 * generation_config.json): the ids a file lists are never sampled and never
 * offered as logprobs alternatives, as llama.cpp's gemma4.cpp sets their
 * logits to -inf right after the final soft-cap; every other logit stays as
 * it was. `tps model info` counts them. A list naming an id outside the
 * vocabulary, of the wrong type or as long as the vocabulary is a load
 * error that says what is wrong, never a write outside the logits. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/sample/logprobs.h"
#include "model/model_make.h"
#include "support/engine_env.h"
#include "support/model_run.h"
#include "support/test_support.h"

#define KEY   "tokenizer.ggml.suppress_tokens"
#define SEED  7
#define N_GEN 12
#define TOP   LOGPROBS_MAX_TOP
/* the suppressed run's first logprobs against the plain run's renormalised
 * ones: the same float logits through a different log-sum-exp */
#define TOL_RENORM_LOGPROB 1e-4

/* A tiny Gemma 4 file (seeded random F32 weights, vocabulary of 512) at
 * path, a "...XXXXXX" template it fills in. */
static void make_gemma4(char *path) {
    test_model_make_arch(path, "tiny", "gemma4", GGML_TYPE_F32, SEED);
}

/* src with KEY set to n elements of elem_type (n == 0: a u32 scalar, data
 * its value), written to dst (a template filled in). */
static void copy_with_key(const char *src, char *dst, uint32_t elem_type, const void *data,
                          uint64_t n) {
    tps_err err = {0};
    gguf_file *f;
    cr_assert_eq(gguf_open(&f, src, &err), 0, "%s", err.msg);
    gguf_writer *w = test_gguf_copy(f, NULL);
    if (n)
        cr_assert_eq(gguf_writer_set_array(w, KEY, elem_type, data, n), 0);
    else
        cr_assert_eq(gguf_writer_set_u32(w, KEY, *(const uint32_t *)data), 0);
    close(mkstemp(dst));
    cr_assert_eq(gguf_writer_write_file(w, dst, &err), 0, "%s", err.msg);
    gguf_writer_free(w);
    gguf_close(f);
}

/* What a greedy request with logprobs and TOP alternatives produced. */
typedef struct run_out {
    int32_t tok[N_GEN];
    float lp[N_GEN];
    uint32_t n_top[N_GEN];
    int32_t top_id[N_GEN][TOP];
    float top_lp[N_GEN][TOP];
} run_out;

static void greedy_with_logprobs(const char *path, run_out *r) {
    static const int32_t prompt[] = {1, 40, 77, 300, 12, 9};
    env v;
    env_open(&v, path);
    engine *e = env_engine(&v, 1, 64, 0, GGML_TYPE_F32, true);
    engine_request rq = env_greedy_request(prompt, sizeof prompt / sizeof *prompt, N_GEN, NULL);
    rq.logprobs = true;
    rq.top_logprobs = TOP;
    env_submit(e, &rq);
    engine_event ev[16];
    size_t g = 0;
    for (bool done = false; !done;) {
        engine_wait(e, 100);
        const size_t n = engine_poll(e, ev, 16);
        for (size_t i = 0; i < n; i++) {
            if (ev[i].kind == ENGINE_EV_DONE) {
                done = true;
                continue;
            }
            cr_assert_lt(g, N_GEN);
            r->tok[g] = ev[i].token;
            r->lp[g] = ev[i].logprob;
            r->n_top[g] = ev[i].n_top;
            memcpy(r->top_id[g], ev[i].top_id, sizeof r->top_id[g]);
            memcpy(r->top_lp[g], ev[i].top_logprob, sizeof r->top_lp[g]);
            g++;
        }
    }
    cr_assert_eq(g, N_GEN);
    engine_destroy(e);
    env_close(&v);
}

/* The plain file's two likeliest first tokens suppressed: the greedy run
 * never emits either, no position offers them as alternatives, and the
 * first token is the plain run's third choice with its probability
 * renormalised over the rest (the other logits untouched). */
Test(suppress_tokens, listed_tokens_are_never_sampled_nor_offered_as_logprobs, .timeout = 120) {
    char plain[] = "/tmp/tps-suppress-plain-XXXXXX", sup[] = "/tmp/tps-suppress-XXXXXX";
    make_gemma4(plain);
    run_out *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    cr_assert(a && b);
    greedy_with_logprobs(plain, a);
    cr_assert_eq(a->n_top[0], TOP);
    const int32_t ids[2] = {a->top_id[0][0], a->top_id[0][1]};
    cr_assert_eq(a->tok[0], ids[0], "greedy draws the likeliest");
    copy_with_key(plain, sup, GGUF_TYPE_INT32, ids, 2);
    greedy_with_logprobs(sup, b);
    for (size_t g = 0; g < N_GEN; g++) {
        cr_expect(b->tok[g] != ids[0] && b->tok[g] != ids[1], "position %zu emitted %d", g,
                  b->tok[g]);
        cr_expect_eq(b->n_top[g], TOP, "position %zu: %u alternatives", g, b->n_top[g]);
        for (uint32_t k = 0; k < b->n_top[g]; k++)
            cr_expect(b->top_id[g][k] != ids[0] && b->top_id[g][k] != ids[1],
                      "position %zu offers suppressed id %d (logprob %g)", g, b->top_id[g][k],
                      b->top_lp[g][k]);
    }
    cr_expect_eq(b->tok[0], a->top_id[0][2]);
    /* log p'(x) = log p(x) - log(1 - p(T) - p(U)) */
    const double kept = 1.0 - exp(a->top_lp[0][0]) - exp(a->top_lp[0][1]);
    for (uint32_t k = 0; k + 2 < TOP; k++) {
        cr_expect_eq(b->top_id[0][k], a->top_id[0][k + 2], "rank %u", k);
        cr_expect(fabs(b->top_lp[0][k] - (a->top_lp[0][k + 2] - log(kept))) < TOL_RENORM_LOGPROB,
                  "rank %u: %g, renormalised %g", k, b->top_lp[0][k],
                  a->top_lp[0][k + 2] - log(kept));
    }
    free(a);
    free(b);
    unlink(sup);
    unlink(plain);
}

/* tps model info says how many the file suppresses and which. */
Test(suppress_tokens, model_info_counts_the_suppressed_tokens) {
    char plain[] = "/tmp/tps-suppress-plain-XXXXXX", sup[] = "/tmp/tps-suppress-XXXXXX";
    make_gemma4(plain);
    const int32_t ids[3] = {511, 7, 300};
    copy_with_key(plain, sup, GGUF_TYPE_INT32, ids, 3);
    char args[512], *out;
    snprintf(args, sizeof args, "model info %s", sup);
    cr_assert_eq(run_tps(args, false, &out), 0, "%s", out);
    cr_expect(strstr(out, "suppressed tokens      3 (ids 511 7 300)") != NULL, "%s", out);
    free(out);
    snprintf(args, sizeof args, "model info --json %s", sup);
    cr_assert_eq(run_tps(args, false, &out), 0, "%s", out);
    json_error_t jerr;
    json_t *o = json_loads(out, 0, &jerr);
    cr_assert_not_null(o, "%s", out);
    cr_expect_eq(json_integer_value(json_object_get(o, "suppressed_tokens")), 3);
    cr_expect_eq(json_integer_value(json_array_get(json_object_get(o, "suppressed_token_ids"), 2)),
                 300);
    json_decref(o);
    free(out);
    snprintf(args, sizeof args, "model info %s", plain);
    cr_assert_eq(run_tps(args, false, &out), 0, "%s", out);
    cr_expect(strstr(out, "suppressed tokens") == NULL, "a file without the key: %s", out);
    free(out);
    unlink(sup);
    unlink(plain);
}

/* One hostile list: the load fails with TPS_EINVAL and a message holding
 * `says`. */
static void expect_refused(const char *plain, uint32_t elem_type, const void *data, uint64_t n,
                           const char *says) {
    char bad[] = "/tmp/tps-suppress-bad-XXXXXX";
    copy_with_key(plain, bad, elem_type, data, n);
    llama_model *m = NULL;
    tps_err err = {0};
    cr_expect_eq(llama_model_load(&m, bad, &err), TPS_EINVAL, "%s", err.msg);
    cr_expect_null(m);
    cr_expect(strstr(err.msg, says) != NULL, "'%s' does not say '%s'", err.msg, says);
    llama_model_free(m);
    unlink(bad);
}

Test(suppress_tokens, ids_outside_the_vocabulary_or_of_the_wrong_type_are_refused) {
    char plain[] = "/tmp/tps-suppress-plain-XXXXXX";
    make_gemma4(plain);
    const int32_t past[2] = {5, 512}, neg[1] = {-1};
    const uint32_t huge[1] = {0xffffffffu}, scalar = 5;
    const float f[1] = {5.0f};
    const int64_t wide[1] = {5};
    expect_refused(plain, GGUF_TYPE_INT32, past, 2, KEY "[1] = 512 (byte offset");
    expect_refused(plain, GGUF_TYPE_INT32, past, 2, "the vocabulary has 512 tokens");
    expect_refused(plain, GGUF_TYPE_INT32, neg, 1, KEY "[0] = -1 ");
    expect_refused(plain, GGUF_TYPE_UINT32, huge, 1, KEY "[0] = 4294967295 ");
    expect_refused(plain, GGUF_TYPE_FLOAT32, f, 1, "is an array of f32, not an array of 32-bit");
    expect_refused(plain, GGUF_TYPE_INT64, wide, 1, "is an array of i64, not an array of 32-bit");
    expect_refused(plain, 0, &scalar, 0, "is a u32, not an array of 32-bit token ids");
    int32_t *all = malloc(512 * sizeof *all);
    cr_assert_not_null(all);
    for (int32_t i = 0; i < 512; i++)
        all[i] = i;
    expect_refused(plain, GGUF_TYPE_INT32, all, 512, "lists 512 ids: a vocabulary of 512");
    free(all);
    /* the same ids as u32, in range, load */
    const uint32_t ok[2] = {5, 511};
    char good[] = "/tmp/tps-suppress-ok-XXXXXX";
    copy_with_key(plain, good, GGUF_TYPE_UINT32, ok, 2);
    llama_model *m = NULL;
    tps_err err = {0};
    cr_assert_eq(llama_model_load(&m, good, &err), 0, "%s", err.msg);
    cr_expect_eq(m->cfg.n_suppress, 2);
    cr_expect_eq(llama_config_suppressed(&m->cfg, 1), 511);
    llama_model_free(m);
    unlink(good);
    unlink(plain);
}

/* A -inf logit has probability 0: never an alternative, even when k asks
 * for more than the finite logits (a small vocabulary, or most of it
 * suppressed). */
Test(suppress_tokens, logprobs_top_skips_impossible_tokens) {
    const float x[6] = {1.0f, -INFINITY, 3.0f, -INFINITY, 2.0f, NAN};
    const double lse = logprobs_lse((const float[5]){1.0f, -INFINITY, 3.0f, -INFINITY, 2.0f}, 5);
    int32_t ids[LOGPROBS_MAX_TOP];
    float lps[LOGPROBS_MAX_TOP];
    cr_assert_eq(logprobs_top(ids, lps, x, 6, 5, lse), 3);
    cr_expect_eq(ids[0], 2);
    cr_expect_eq(ids[1], 4);
    cr_expect_eq(ids[2], 0);
    for (int j = 0; j < 3; j++)
        cr_expect(isfinite(lps[j]));
}
