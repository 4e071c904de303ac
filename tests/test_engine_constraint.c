/* Constrained decoding in the engine on stories260K: a grammar-constrained
 * request's tokens are the same alone and in a staggered batch beside free
 * and other constrained requests (batch invariance, also under preemption),
 * its output parses (jansson, not our grammar) whenever it finished with
 * "stop", and it finishes as soon as the grammar is complete with nothing
 * left to follow. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/engine.h"
#include "constrain/json_schema.h"
#include "support/engine_env.h"
#include "support/test_support.h"

#define N_REQ 12

static const char *SCHEMA =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},"
    "\"n\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":99},\"ok\":{\"type\":\"boolean\"}},"
    "\"required\":[\"name\",\"n\",\"ok\"],\"additionalProperties\":false}";

typedef struct work {
    int32_t prompt[N_REQ][8];
    char *gbnf;
} work;

static void submit(engine *e, const work *w, int i, float temp, result *res, uint64_t *ids) {
    engine_request rq = {.prompt = w->prompt[i], .n_prompt = 8, .max_tokens = 200, .user = &res[i]};
    sampler_params_default(&rq.sampling);
    rq.sampling.temperature = temp;
    rq.sampling.seed = 100 + (uint64_t)i;
    if (i % 3 != 2) { /* two of three constrained */
        rq.grammar = i % 3 == 0 ? w->gbnf : "root ::= [a-z ]{1,30} \".\"\n";
        rq.grammar_len = strlen(rq.grammar);
    }
    tps_err err = {0};
    cr_assert_eq(engine_submit(e, &rq, &ids[i], &err), 0, "request %d: %s", i, err.msg);
}

static uint64_t run(env *v, const work *w, float temp, bool alone, uint32_t kv_tokens,
                    result *res) {
    engine *e = env_engine(v, alone ? 1 : 64, 256, kv_tokens, GGML_TYPE_F16, alone);
    uint64_t ids[N_REQ];
    for (int i = 0; i < N_REQ; i++) {
        submit(e, w, i, temp, res, ids);
        if (alone) drain(e, 1);
        if (!alone && i % 4 == 3) engine_wait(e, 5);
    }
    if (!alone) drain(e, N_REQ);
    engine_stats st;
    engine_get_stats(e, &st);
    engine_destroy(e);
    return st.preemptions_total;
}

static char *text_of(const tokenizer *tok, const result *r) {
    char *out = NULL;
    size_t n = 0;
    tps_err err = {0};
    cr_assert_eq(
        tokenizer_decode_alloc(tok, r->tokens, r->n, TOK_DECODE_RAW_SPACES, &out, &n, &err), 0);
    return out;
}

static void invariance(float temp, uint32_t small_kv) {
    REQUIRE_SHARED("models/stories260K.gguf");
    env v;
    env_open_stories(&v);
    work w;
    for (int i = 0; i < N_REQ; i++)
        for (int k = 0; k < 8; k++)
            w.prompt[i][k] = k == 0 ? 1 : 3 + (int32_t)((i * 37 + k * 11) % 500);
    json_t *schema = json_loads(SCHEMA, 0, NULL);
    sbuf gb;
    sbuf_init(&gb);
    tps_err err = {0};
    cr_assert_eq(json_schema_to_gbnf(schema, &gb, &err), 0, "%s", err.msg);
    w.gbnf = gb.p;
    result *alone = calloc(N_REQ, sizeof *alone), *batched = calloc(N_REQ, sizeof *batched);
    run(&v, &w, temp, true, 0, alone);
    uint64_t preempted = run(&v, &w, temp, false, small_kv, batched);
    if (small_kv) cr_assert_gt(preempted, 0, "the small pool forced no preemption");
    int parsed = 0;
    for (int i = 0; i < N_REQ; i++) {
        cr_assert(alone[i].done && batched[i].done);
        cr_assert_eq(batched[i].n, alone[i].n, "request %d: %zu tokens batched, %zu alone", i,
                     batched[i].n, alone[i].n);
        cr_assert_eq(memcmp(batched[i].tokens, alone[i].tokens, alone[i].n * 4), 0,
                     "request %d: tokens differ from the request run alone", i);
        cr_assert_eq(batched[i].finish, alone[i].finish);
        cr_assert_neq(alone[i].finish, ENGINE_FINISH_ERROR, "request %d failed", i);
        char *text = text_of(v.tok, &alone[i]);
        if (i % 3 == 0 && alone[i].finish == ENGINE_FINISH_STOP) {
            json_error_t je;
            json_t *j = json_loads(text, 0, &je);
            cr_assert_not_null(j, "request %d: not JSON (%s): %s", i, je.text, text);
            cr_assert(json_is_string(json_object_get(j, "name")), "%s", text);
            cr_assert(json_is_boolean(json_object_get(j, "ok")), "%s", text);
            json_int_t n = json_integer_value(json_object_get(j, "n"));
            cr_assert(n >= 0 && n <= 99, "%s", text);
            json_decref(j);
            parsed++;
        }
        if (i % 3 == 1) {
            /* [a-z ]{1,30} "." : nothing can follow the period, so the
             * choice stops right there, without an end-of-generation token */
            size_t len = strlen(text);
            cr_assert_eq(alone[i].finish, ENGINE_FINISH_STOP, "request %d: %s", i, text);
            cr_assert(len >= 2 && len <= 31 && text[len - 1] == '.', "request %d: '%s'", i, text);
            for (size_t k = 0; k + 1 < len; k++)
                cr_assert((text[k] >= 'a' && text[k] <= 'z') || text[k] == ' ', "'%s'", text);
        }
        free(text);
    }
    cr_assert_geq(parsed, 2, "only %d JSON outputs finished", parsed);
    free(alone);
    free(batched);
    sbuf_free(&gb);
    json_decref(schema);
    env_close(&v);
}

Test(engine_constraint, greedy_constrained_tokens_do_not_depend_on_the_batch, .timeout = 240) {
    invariance(0.0f, 0);
}

Test(engine_constraint, sampled_constrained_tokens_do_not_depend_on_the_batch, .timeout = 240) {
    invariance(1.0f, 0);
}

Test(engine_constraint, constrained_tokens_survive_preemption, .timeout = 240) {
    invariance(1.0f, 512);
}

Test(engine_constraint, a_grammar_that_fails_to_parse_is_refused_at_submit) {
    REQUIRE_SHARED("models/stories260K.gguf");
    env v;
    env_open_stories(&v);
    engine *e = env_engine(&v, 4, 64, 0, GGML_TYPE_F16, false);
    int32_t prompt[] = {1, 5, 6};
    engine_request rq = {.prompt = prompt,
                         .n_prompt = 3,
                         .max_tokens = 4,
                         .grammar = "root ::= x\n",
                         .grammar_len = 11};
    sampler_params_default(&rq.sampling);
    uint64_t id;
    tps_err err = {0};
    cr_assert_eq(engine_submit(e, &rq, &id, &err), TPS_EINVAL);
    cr_assert(strstr(err.msg, "rule 'x' is not defined"), "%s", err.msg);
    engine_destroy(e);
    env_close(&v);
}
