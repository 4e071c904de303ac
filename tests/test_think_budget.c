/* A thinking budget where the block's close marker is not one token of the
 * vocabulary, in the engine on stories260K (whose vocabulary spells
 * "</think>" and "<|end|>" in several tokens each): once the block holds
 * the budget's tokens, the marker's tokens are sampled in turn, the block
 * closes, and a grammar then forces the answer (a forced tool call after
 * thinking). For "<think>" blocks the grammar waits outside the block; for
 * gpt-oss's analysis channel the grammar describes the channel itself and
 * the marker goes through it. The harmony row of the splitter (think.h)
 * splits as the <think> row does. The reference for the text is the
 * marker's own spelling, not the engine's tokenization of it. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/engine.h"
#include "engine/sample/think.h"
#include "support/engine_env.h"
#include "support/test_support.h"

#define STORIES "models/stories260K.gguf"

/* The output text of res (raw: no SPM space removed). */
static char *text_of(const env *v, const result *res) {
    char *text = NULL;
    size_t n = 0;
    tps_err err = {{0}};
    cr_assert_eq(
        tokenizer_decode_alloc(v->tok, res->tokens, res->n, TOK_DECODE_RAW_SPACES, &text, &n, &err),
        0, "%s", err.msg);
    return text;
}

/* Runs rq (greedy: env_think_request) to its end on a fresh engine over v,
 * its output into res. */
static void run(env *v, engine_request *rq, result *res) {
    engine *e = env_engine(v, 2, 64, 0, GGML_TYPE_F16, true);
    rq->user = res;
    uint64_t id;
    tps_err err = {{0}};
    cr_assert_eq(engine_submit(e, rq, &id, &err), 0, "%s", err.msg);
    drain(e, 1);
    engine_destroy(e);
}

Test(think_budget, a_close_marker_spelled_in_several_tokens_is_forced_token_by_token,
     .timeout = 120) {
    REQUIRE_SHARED(STORIES);
    env v;
    env_open_stories(&v);
    cr_assert_lt(tokenizer_find(v.tok, THINK_CLOSE, strlen(THINK_CLOSE)), 0,
                 "the test needs a vocabulary without \"</think>\" as one token");
    int32_t prompt[2] = {1, 500};
    result res[1] = {0};
    /* the prompt left a block open (DeepSeek-R1's "<think>\n") */
    engine_request rq = env_think_request(prompt, 2, 64, "root ::= \"ok\"", THINK_IN, 3, NULL);
    run(&v, &rq, res);
    cr_assert_eq(res[0].finish, ENGINE_FINISH_STOP, "the grammar completed the answer");
    cr_assert_gt(res[0].n, 3);
    result after = res[0]; /* the tokens past the budget's 3 */
    after.n -= 3;
    memmove(after.tokens, after.tokens + 3, after.n * sizeof *after.tokens);
    char *text = text_of(&v, &after);
    /* SPM may spell the marker with its leading space: reasoning, harmless */
    const char *t = text[0] == ' ' ? text + 1 : text;
    cr_assert_str_eq(t, THINK_CLOSE "ok", "after the budget: '%s'", text);
    free(text);
    env_close(&v);
}

Test(think_budget, harmonys_analysis_channel_closes_through_the_grammar, .timeout = 120) {
    REQUIRE_SHARED(STORIES);
    env v;
    env_open_stories(&v);
    /* the server's forced-call grammar for gpt-oss, analysis made
     * obligatory: the random model would never leave it by itself */
    static const char g[] =
        "root ::= \"<|channel|>analysis<|message|>\" thought \"<|end|><|start|>assistant\" \"ok\"\n"
        "thought ::= ([^<] | \"<\" [^|])*\n";
    int32_t prompt[2] = {1, 500};
    result res[1] = {0};
    engine_request rq = env_think_request(prompt, 2, 96, g, THINK_START, 4, NULL);
    rq.think_kind = THINK_HARMONY;
    run(&v, &rq, res);
    cr_assert_eq(res[0].finish, ENGINE_FINISH_STOP, "the grammar completed the answer");
    char *text = text_of(&v, &res[0]);
    const char *open = "<|channel|>analysis<|message|>", *end = "<|end|><|start|>assistantok";
    cr_assert(!strncmp(text, open, strlen(open)), "%s", text);
    size_t n = strlen(text);
    cr_assert(n >= strlen(end) && !strcmp(text + n - strlen(end), end), "%s", text);
    cr_assert_lt(res[0].n, 60, "%zu tokens: the budget bounded the channel", res[0].n);
    free(text);
    /* the same without a budget never leaves the channel */
    result free_run[1] = {0};
    rq.think_budget = -1;
    run(&v, &rq, free_run);
    cr_assert_eq(free_run[0].finish, ENGINE_FINISH_LENGTH);
    env_close(&v);
}

/* The harmony row of the splitter: the analysis body is reasoning. */
static void sink(void *ctx, think_part part, const char *p, size_t n) {
    char(*out)[256] = ctx;
    size_t len = strlen(out[part]);
    cr_assert_lt(len + n, 256);
    memcpy(out[part] + len, p, n);
}

Test(think_budget, the_harmony_row_splits_the_analysis_channel_in_pieces_of_any_size) {
    const char *text = "<|channel|>analysis<|message|>2 < 3, <|e fine<|end|><|start|>assistant";
    for (size_t step = 1; step <= strlen(text); step++) {
        char out[3][256] = {{0}};
        think_split t;
        think_init_kind(&t, THINK_START, THINK_HARMONY);
        for (size_t i = 0; i < strlen(text); i += step)
            think_feed(&t, text + i, strlen(text) - i < step ? strlen(text) - i : step, sink, out);
        think_flush(&t, sink, out);
        cr_assert_str_eq(out[THINK_PART_REASONING], "2 < 3, <|e fine", "pieces of %zu", step);
        cr_assert_str_eq(out[THINK_PART_MARKER], "<|channel|>analysis<|message|><|end|>");
        cr_assert_str_eq(out[THINK_PART_CONTENT], "<|start|>assistant");
    }
}
