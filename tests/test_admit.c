/* The one admission rule (engine/cost/admit.h): its edges on purpose (an empty
 * prompt, one token short of the context, the context, exactly the KV
 * pool and one block past it, n choices over the sequence cap), and the
 * engine held to it: over a grid of prompt lengths, max_tokens, choices
 * and pool sizes, engine_submit refuses exactly what admit_request
 * refuses, with the same message; admit_room's max_tokens is always
 * admitted and one more token is not; tps plan's simulated engine files
 * a request the rule refuses as a 4xx with the rule's words. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/cost/admit.h"
#include "engine/core/engine.h"
#include "support/engine_env.h"
#include "support/test_support.h"

static const admit_pool POOL = {
    .n_ctx = 512, .max_seqs = 4, .block_tokens = 16, .n_blocks = 20, .max_queue = 3};

Test(admit, edges_of_the_context_and_the_pool) {
    tps_err e;
    uint32_t mt = 0;
    cr_expect_eq(admit_request(&POOL, 0, &mt, 1, &e), TPS_EINVAL);
    cr_expect(strstr(e.msg, "prompt is empty"));
    mt = 0;
    cr_expect_eq(admit_request(&POOL, 512, &mt, 1, &e), TPS_ERANGE, "the context is no prompt");
    mt = 1;
    cr_expect_eq(admit_request(&POOL, 511, &mt, 1, &e), TPS_ERANGE, "511 + 1 is 32 blocks > 20");
    /* 20 blocks of 16: 320 positions exactly fit, 321 do not */
    mt = 20;
    cr_expect_eq(admit_request(&POOL, 300, &mt, 1, &e), TPS_OK, "%s", e.msg);
    mt = 21;
    cr_expect_eq(admit_request(&POOL, 300, &mt, 1, &e), TPS_ERANGE);
    cr_expect(strstr(e.msg, "needs 21 KV blocks; the pool has 20"), "%s", e.msg);
    /* max_tokens 0: the room the context leaves (then the pool judges it) */
    mt = 0;
    const admit_pool big = {.n_ctx = 64, .max_seqs = 4, .block_tokens = 16, .n_blocks = 64};
    cr_expect_eq(admit_request(&big, 10, &mt, 1, &e), TPS_OK);
    cr_expect_eq(mt, 54);
    mt = 1;
    cr_expect_eq(admit_request(&POOL, 10, &mt, 5, &e), TPS_EINVAL, "5 choices, 4 sequences");
    cr_expect(strstr(e.msg, "--max-seqs"), "%s", e.msg);
    cr_expect_eq(admit_queue(&POOL, 2, &e), TPS_OK);
    cr_expect_eq(admit_queue(&POOL, 3, &e), TPS_EFULL);
    cr_expect_eq(admit_queue(&(admit_pool){.max_queue = 0}, 1000000, &e), TPS_OK, "no limit");
}

Test(admit, room_is_admitted_and_one_more_token_is_not) {
    for (uint32_t n = 1; n <= 4; n++)
        for (size_t np = 1; np < 330; np += 7) {
            uint64_t room = admit_room(&POOL, np, n);
            tps_err e;
            uint32_t mt = (uint32_t)room;
            if (room) {
                cr_expect_eq(admit_request(&POOL, np, &mt, n, &e), TPS_OK,
                             "prompt %zu, n %u: room %llu refused: %s", np, n,
                             (unsigned long long)room, e.msg);
            }
            mt = (uint32_t)room + 1;
            cr_expect_neq(admit_request(&POOL, np, &mt, n, &e), TPS_OK,
                          "prompt %zu, n %u: room %llu + 1 admitted", np, n,
                          (unsigned long long)room);
        }
}

/* The engine refuses what the rule refuses, and nothing else. */
Test(admit, engine_submit_answers_as_the_rule_over_a_grid, .timeout = 120) {
    REQUIRE_SHARED("models/stories260K.gguf");
    env v;
    env_open_stories(&v);
    static const uint32_t KV_TOKENS[] = {64, 256};
    for (size_t k = 0; k < 2; k++) {
        engine *eng = env_engine(&v, 3, 0, KV_TOKENS[k], 0, false);
        admit_pool pool;
        engine_admit_pool(eng, &pool);
        cr_assert(pool.n_blocks > 0 && pool.max_seqs == 3);
        static const size_t PROMPTS[] = {0, 1, 15, 16, 17, 63, 64, 200};
        static const uint32_t MAXT[] = {1, 16, 47, 48, 49, 200};
        int32_t prompt[256];
        for (size_t i = 0; i < 256; i++)
            prompt[i] = (int32_t)(1 + i % 100);
        for (size_t a = 0; a < sizeof PROMPTS / sizeof *PROMPTS; a++)
            for (size_t b = 0; b < sizeof MAXT / sizeof *MAXT; b++)
                for (uint32_t n = 1; n <= 4; n++) {
                    engine_request rq = {
                        .prompt = prompt, .n_prompt = PROMPTS[a], .max_tokens = MAXT[b], .n = n};
                    sampler_params_default(&rq.sampling);
                    uint32_t mt = MAXT[b];
                    tps_err want = {{0}}, got = {{0}};
                    int rule = admit_request(&pool, PROMPTS[a], &mt, n, &want);
                    uint64_t id;
                    int rc = engine_submit(eng, &rq, &id, &got);
                    if (rc == TPS_OK) engine_cancel(eng, id);
                    cr_expect_eq(rc, rule,
                                 "kv %u, prompt %zu, max_tokens %u, n %u: engine %d (%s), "
                                 "rule %d (%s)",
                                 KV_TOKENS[k], PROMPTS[a], MAXT[b], n, rc, got.msg, rule, want.msg);
                    if (rule) cr_expect_str_eq(got.msg, want.msg);
                }
        engine_destroy(eng);
    }
    env_close(&v);
}

/* tps plan's simulated engine refuses by the same rule, in its words. */
Test(admit, plan_files_what_the_rule_refuses_as_the_engine_would, .timeout = 120) {
    REQUIRE_SHARED("models/stories260K.gguf");
    char *path = test_temp_file("");
    char args[1024], *out = NULL, *model = shared_path("models/stories260K.gguf");
    /* 64 KV positions: a 40-token prompt with 40 to generate needs 5 blocks of 16, the pool 4 */
    snprintf(args, sizeof args,
             "plan -m %s --kv-tokens 64 --requests 2 --input-len 40 --output-len 40 --json %s",
             model, path);
    free(model);
    int rc = run_tps(args, true, &out);
    free(out);
    char *json = read_file_all(path, NULL);
    unlink(path);
    free(path);
    cr_assert(json, "tps plan wrote no result (exit %d)", rc);
    cr_expect(strstr(json, "KV blocks; the pool has"),
              "the plan did not refuse by the rule: %.400s", json);
    free(json);
}
