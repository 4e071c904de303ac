/* Greedy decoding of quantized models on the best kernel tier gives the
 * scalar tier's tokens and logits, bit for bit: the prompt as one batch
 * (the multi-row tiles: AVX2's, NEON's sdot or i8mm's smmla), then one
 * token a step (the one-row tiles), for each weight type with a vector
 * kernel. The engine-level face of the kernels' contract (every tier
 * reduces each element in the scalar tier's order); on aarch64 it runs
 * under qemu in make test-arm, once per ARM table. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/forward/forward.h"
#include "model/llama_model.h"
#include "model/model_make.h"
#include "support/model_run.h"
#include "support/teacher_forced.h"

#define STEPS 12
#define SEED  11

/* rows of 256, so every K-quant type applies */
static const model_preset PRESET = {"k256",  "test: rows of 256", 256, 2, 4, 4, 512, 512, 64,
                                    10000.0f};

typedef struct greedy_rec {
    float *logits; /* (STEPS, n_vocab): the best tier's */
    int32_t tokens[STEPS];
    size_t n_vocab;
    int compare; /* 0: record (best tier), 1: compare (scalar tier) */
    const char *name;
} greedy_rec;

static int32_t step(const float *logits, size_t k, void *arg) {
    greedy_rec *r = arg;
    float *mine = r->logits + k * r->n_vocab;
    if (!r->compare) {
        memcpy(mine, logits, r->n_vocab * sizeof *logits);
        size_t best = 0;
        for (size_t v = 1; v < r->n_vocab; v++)
            if (logits[v] > logits[best]) best = v;
        r->tokens[k] = (int32_t)best;
    } else {
        cr_assert_eq(memcmp(mine, logits, r->n_vocab * sizeof *logits), 0,
                     "%s: step %zu's logits differ between the %s tier and the scalar tier",
                     r->name, k, kernel_tier_name(KERNEL_TIER_BEST));
    }
    return r->tokens[k];
}

static void run_tier(const llama_model *m, kernel_tier tier, greedy_rec *r) {
    static const int32_t prompt[] = {1, 17, 300, 42, 99, 7, 256, 3, 511};
    fwd_state *s;
    tps_err err = {0};
    cr_assert_eq(fwd_state_create(&s, m, 16, 64, 1, &err), 0, "%s", err.msg);
    cr_assert_eq(kernel_ctx_set_tier(fwd_state_kernels(s), tier), 0);
    kv_cache *kv = test_kv_for(m, 16, GGML_TYPE_F32, 8);
    test_greedy_run(s, m, kv, prompt, sizeof prompt / sizeof prompt[0], STEPS, step, r);
    kv_cache_free(kv);
    fwd_state_free(s);
}

static void check_type(uint32_t type, const char *name) {
    char path[] = "/tmp/tps-tier-greedy-XXXXXX";
    llama_model *m = test_model_made(path, &PRESET, type, SEED);
    greedy_rec r = {.n_vocab = m->cfg.n_vocab, .name = name};
    r.logits = malloc(STEPS * r.n_vocab * sizeof *r.logits);
    cr_assert_not_null(r.logits);
    run_tier(m, KERNEL_TIER_BEST, &r);
    r.compare = 1;
    run_tier(m, KERNEL_TIER_SCALAR, &r);
    cr_log_info("%s: %d greedy tokens equal on the %s and scalar tiers", name, STEPS,
                kernel_tier_name(KERNEL_TIER_BEST));
    free(r.logits);
    llama_model_free(m);
    unlink(path);
}

Test(tier_greedy, q8_0_best_tier_gives_the_scalar_tiers_tokens_and_logits) {
    check_type(GGML_TYPE_Q8_0, "q8_0");
}

Test(tier_greedy, q4_0_best_tier_gives_the_scalar_tiers_tokens_and_logits) {
    check_type(GGML_TYPE_Q4_0, "q4_0");
}

Test(tier_greedy, q4_k_m_best_tier_gives_the_scalar_tiers_tokens_and_logits) {
    check_type(MODEL_MAKE_Q4_K_M, "q4_k_m");
}

Test(tier_greedy, q6_k_best_tier_gives_the_scalar_tiers_tokens_and_logits) {
    check_type(GGML_TYPE_Q6_K, "q6_k");
}
