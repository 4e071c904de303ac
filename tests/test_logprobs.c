/* logprobs: the log-softmax and top-k of a logits row against a plain
 * double-precision reference (ties to the lower id), and the engine's
 * per-token logprobs on stories260K against llama.cpp's top-5 reference
 * (../shared/reference/stories260K_greedy.json, top5_per_position). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/engine.h"
#include "engine/sample/logprobs.h"
#include "support/engine_env.h"
#include "support/test_support.h"

/* llama.cpp rounds Q/K/V and attention weights through F16 where we keep
 * F32 (tests/test_forward.c measures the same bound on the logits). */
#define TOL_LOGPROB_VS_LLAMA_CPP 0.04

Test(logprobs, lse_and_top_k_match_a_plain_reference_with_ties_to_the_lower_id) {
    enum { N = 1000 };
    float x[N];
    uint32_t r = 12345;
    for (int i = 0; i < N; i++) {
        r = r * 1664525u + 1013904223u;
        x[i] = (float)((r >> 8) % 4000) / 100.0f - 20.0f; /* many exact ties */
    }
    x[7] = -INFINITY;
    x[8] = NAN;
    double m = -INFINITY, sum = 0;
    for (int i = 0; i < N; i++)
        if (i != 8 && x[i] > m) m = x[i];
    for (int i = 0; i < N; i++)
        if (i != 8) sum += exp((double)x[i] - m);
    /* NaN poisons nothing but its own slot: the reference skips it too */
    x[8] = -INFINITY;
    double lse = logprobs_lse(x, N);
    cr_expect(fabs(lse - (m + log(sum))) < 1e-9, "lse %.12f vs %.12f", lse, m + log(sum));
    x[8] = NAN;
    int32_t ids[LOGPROBS_MAX_TOP];
    float lps[LOGPROBS_MAX_TOP];
    size_t k = logprobs_top(ids, lps, x, N, 20, lse);
    cr_assert_eq(k, 20);
    /* brute force: the i-th best is the largest value below the (i-1)-th,
     * the lowest id among equals */
    bool taken[N] = {0};
    for (size_t j = 0; j < k; j++) {
        int best = -1;
        for (int i = 0; i < N; i++)
            if (i != 8 && !taken[i] && (best < 0 || x[i] > x[best])) best = i;
        taken[best] = true;
        cr_expect_eq(ids[j], best, "rank %zu: %d (%g), reference %d (%g)", j, ids[j], x[ids[j]],
                     best, x[best]);
        cr_expect(fabs(lps[j] - (x[best] - lse)) < 1e-6);
    }
    cr_expect_eq(logprobs_top(ids, lps, x, 3, 20, lse), 3, "k above n gives n");
    cr_expect_eq(logprobs_top(ids, lps, x, N, 0, lse), 0);
}

/* Greedy 64 tokens of each reference prompt with logprobs and top 5: the
 * ids equal llama.cpp's, each position's top 5 hold llama.cpp's 5 ids with
 * log-probabilities within the tolerance (an id at the cut may trade places
 * with one within the tolerance of it), and the sampled token's logprob is
 * the first alternative's (greedy). */
Test(logprobs, engine_top5_equal_llama_cpp_reference_on_stories260K, .timeout = 120) {
    REQUIRE_SHARED("models/stories260K.gguf");
    REQUIRE_SHARED("reference/stories260K_greedy.json");
    char *rp = shared_path("reference/stories260K_greedy.json");
    json_error_t je;
    json_t *ref = json_load_file(rp, 0, &je);
    free(rp);
    cr_assert_not_null(ref, "%s", je.text);
    env v;
    env_open_stories(&v);
    engine *e = env_engine(&v, 4, 64, 0, GGML_TYPE_F32, false);
    json_t *cases = json_object_get(ref, "cases");
    double worst = 0;
    for (size_t c = 0; c < json_array_size(cases); c++) {
        json_t *cs = json_array_get(cases, c);
        json_t *pids = json_object_get(cs, "prompt_ids"),
               *gids = json_object_get(cs, "generated_ids");
        json_t *top5 = json_object_get(cs, "top5_per_position");
        size_t np = json_array_size(pids), ng = json_array_size(gids);
        int32_t *prompt = malloc(np * sizeof *prompt);
        for (size_t i = 0; i < np; i++)
            prompt[i] = (int32_t)json_integer_value(json_array_get(pids, i));
        engine_request rq = env_greedy_request(prompt, np, (uint32_t)ng, NULL);
        rq.logprobs = true;
        rq.top_logprobs = 5;
        env_submit(e, &rq);
        engine_event ev[16];
        size_t g = 0;
        bool done = false;
        while (!done) {
            engine_wait(e, 100);
            size_t n = engine_poll(e, ev, 16);
            for (size_t i = 0; i < n; i++) {
                if (ev[i].kind == ENGINE_EV_DONE) {
                    done = true;
                    continue;
                }
                cr_assert_lt(g, ng);
                cr_assert_eq(ev[i].token, (int32_t)json_integer_value(json_array_get(gids, g)),
                             "case %zu position %zu", c, g);
                cr_assert_eq(ev[i].n_top, 5);
                cr_expect_eq(ev[i].top_id[0], ev[i].token, "greedy draws the most likely");
                cr_expect_float_eq(ev[i].logprob, ev[i].top_logprob[0], 1e-6);
                json_t *lst = json_array_get(top5, g);
                for (size_t k = 0; k < json_array_size(lst); k++) {
                    json_t *re = json_array_get(lst, k);
                    int32_t rid = (int32_t)json_integer_value(json_object_get(re, "id"));
                    double rlp = json_real_value(json_object_get(re, "logprob"));
                    size_t j = 0;
                    while (j < 5 && ev[i].top_id[j] != rid)
                        j++;
                    if (j == 5) { /* a near-tie at the cut: ours ranks another first */
                        cr_assert_leq(rlp, ev[i].top_logprob[4] + TOL_LOGPROB_VS_LLAMA_CPP,
                                      "case %zu position %zu: llama.cpp's id %d (%g) is not in "
                                      "our top 5 and not tied with our 5th (%g)",
                                      c, g, rid, rlp, ev[i].top_logprob[4]);
                        continue;
                    }
                    double d = fabs(ev[i].top_logprob[j] - rlp);
                    if (d > worst) worst = d;
                }
                g++;
            }
        }
        cr_expect_eq(g, ng);
        free(prompt);
    }
    cr_log_info("worst top-5 logprob error against llama.cpp: %g", worst);
    cr_expect_leq(worst, TOL_LOGPROB_VS_LLAMA_CPP, "worst top-5 logprob error %g", worst);
    engine_destroy(e);
    env_close(&v);
    json_decref(ref);
}
