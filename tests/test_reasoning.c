/* Reasoning output on a model that thinks: a tiny seeded random Qwen3 made
 * at test time with Qwen3's real vocabulary (../shared/models/vocab), whose
 * "<think>" and "</think>" are single added tokens. The random model never
 * thinks by itself, so the tests make it: logit_bias raises "<think>" (with
 * repetition_penalty so it comes once), and a thinking budget makes the
 * engine sample "</think>" after 4 tokens. Against a real `tps serve` on
 * 127.0.0.1: the thinking comes back in message.reasoning_content and,
 * streamed, in delta.reasoning_content, the two agreeing byte for byte; no
 * marker reaches content, even when a stop string's hold splits one across
 * events; reasoning_format "none" keeps it inline, include_reasoning false
 * drops it; usage counts its tokens; a grammar constrains only the answer.
 * A DeepSeek-R1-Distill-shaped file (llama, R1's template in the GGUF)
 * gets jinja2's prompt and thinks from the block that prompt opens.
 * And in the engine: a prompt that left the block open starts inside it. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/core/engine.h"
#include "model/model_make.h"
#include "support/model_run.h"
#include "support/engine_env.h"
#include "support/oai_client.h"
#include "support/server_fixture.h"
#include "support/test_support.h"

#define VOCAB       "models/vocab/ggml-vocab-qwen3.gguf"
#define THINK_ID    151667 /* "<think>" in Qwen3's vocabulary */
#define THINK_END   151668 /* "</think>" */
#define BUDGET      4
#define CHAT_PREFIX "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"temperature\":0,"
/* thinking made deterministic: "<think>" first, 4 tokens, "</think>" */
#define THINKS "\"logit_bias\":{\"151667\":3},\"repetition_penalty\":10,\"thinking_token_budget\":4"

static server_fixture F;
static char model_path[64];

/* arch "qwen3", or "llama" with a chat template (the R1 distills' shape) */
static void make_model_as(const char *arch, const char *chat_template) {
    REQUIRE_SHARED(VOCAB);
    char *vocab = shared_path(VOCAB);
    snprintf(model_path, sizeof model_path, "/tmp/tps-qwen3-think-XXXXXX");
    int fd = mkstemp(model_path);
    cr_assert_geq(fd, 0);
    close(fd);
    test_model_make_chat(model_path, model_preset_find("tiny"), arch, vocab, chat_template);
    free(vocab);
}

static void make_model(void) {
    make_model_as("qwen3", NULL);
}

static void start(void) {
    make_model();
    server_config c;
    fixture_defaults(&c, &F);
    c.model_path = model_path;
    fixture_start(&F, &c, true);
}

static void finish(void) {
    fixture_finish(&F);
    unlink(model_path);
}

/* The chat answer to CHAT_PREFIX + fields, streamed or whole (asserted 200). */
static void ask(const char *fields, bool stream, oai_answer *a) {
    oai_chat_ok(F.port, CHAT_PREFIX "\"max_tokens\":12,", fields, stream, a);
}

static void no_markers(const char *s, const char *what) {
    cr_assert(s, "%s is absent", what);
    cr_assert(!strstr(s, "<think>") && !strstr(s, "</think>") && !strstr(s, "think>") &&
                  !strstr(s, "</thi"),
              "a marker leaked into %s: '%s'", what, s);
}

/* Thinking and answer both there, markers in neither, streamed (s) as
 * whole (w). */
static void split_alike(const oai_answer *w, const oai_answer *s) {
    no_markers(w->choice[0].reasoning, "reasoning_content");
    no_markers(w->choice[0].content, "content");
    cr_assert_gt(strlen(w->choice[0].reasoning), 0, "%s", w->body);
    cr_assert_gt(strlen(w->choice[0].content), 0, "%s", w->body);
    cr_assert_str_eq(s->choice[0].reasoning, w->choice[0].reasoning);
    cr_assert_str_eq(s->choice[0].content, w->choice[0].content);
}

static long reasoning_tokens(const oai_answer *a) {
    return (long)json_integer_value(json_object_get(
        json_object_get(a->usage, "completion_tokens_details"), "reasoning_tokens"));
}

Test(reasoning, thinking_is_split_off_streamed_and_whole_alike, .timeout = 120) {
    start();
    oai_answer w, s;
    ask(THINKS ",", false, &w);
    ask(THINKS ",", true, &s);
    split_alike(&w, &s);
    /* "<think>", the budget's 4 tokens, "</think>" */
    cr_assert_eq(s.choice[0].n_ids, 12);
    cr_assert_eq(s.choice[0].ids[0], THINK_ID);
    cr_assert_eq(s.choice[0].ids[1 + BUDGET], THINK_END, "the budget did not close the block");
    cr_assert_eq(reasoning_tokens(&w), 2 + BUDGET, "%s", w.body);
    cr_assert_eq(reasoning_tokens(&s), 2 + BUDGET);
    oai_answer_free(&w);
    oai_answer_free(&s);
    /* a model that does not think this time: no reasoning_content */
    ask("", false, &w);
    cr_assert_null(w.choice[0].reasoning, "%s", w.body);
    cr_assert_eq(reasoning_tokens(&w), 0);
    oai_answer_free(&w);
    finish();
}

/* A stop string that never matches but whose start ("nk>") the engine
 * holds back splits each marker across two events: "<thi" | "nk>...",
 * "</thi" | "nk>...". The answer is the same as without it. */
Test(reasoning, a_marker_split_across_events_never_leaks, .timeout = 120) {
    start();
    oai_answer plain, split, split_w;
    ask(THINKS ",", true, &plain);
    ask(THINKS ",\"stop\":[\"nk>QQ\"],", true, &split);
    ask(THINKS ",\"stop\":[\"nk>QQ\"],", false, &split_w);
    no_markers(split.choice[0].content, "content");
    no_markers(split.choice[0].reasoning, "reasoning_content");
    cr_assert_str_eq(split.choice[0].reasoning, plain.choice[0].reasoning);
    cr_assert_str_eq(split.choice[0].content, plain.choice[0].content);
    cr_assert_str_eq(split_w.choice[0].reasoning, plain.choice[0].reasoning);
    cr_assert_str_eq(split_w.choice[0].content, plain.choice[0].content);
    /* the hold shows in the stream: the marker token's event carried "<thi" */
    cr_assert(strstr(split.body, "\"token_ids\":[151667]"));
    oai_answer_free(&plain);
    oai_answer_free(&split);
    oai_answer_free(&split_w);
    finish();
}

Test(reasoning, format_none_keeps_it_inline_and_include_reasoning_false_drops_it, .timeout = 120) {
    start();
    oai_answer split, none, hidden;
    ask(THINKS ",", false, &split);
    ask(THINKS ",\"reasoning_format\":\"none\",", true, &none);
    ask(THINKS ",\"include_reasoning\":false,", false, &hidden);
    char want[512];
    snprintf(want, sizeof want, "<think>%s</think>%s", split.choice[0].reasoning,
             split.choice[0].content);
    cr_assert_str_eq(none.choice[0].content, want);
    cr_assert_null(none.choice[0].reasoning);
    cr_assert_str_eq(hidden.choice[0].content, split.choice[0].content);
    cr_assert_null(hidden.choice[0].reasoning, "%s", hidden.body);
    /* the tokens were thought either way */
    cr_assert_eq(reasoning_tokens(&none), 2 + BUDGET);
    cr_assert_eq(reasoning_tokens(&hidden), 2 + BUDGET);
    oai_answer_free(&split);
    oai_answer_free(&none);
    oai_answer_free(&hidden);
    finish();
}

/* structured output holds the answer only: the thinking is free text, the
 * answer one of the choices. Before any text the grammar allows "<think>"
 * besides its own tokens (a model may think first); with it banned there is
 * no block and the grammar holds everything. */
Test(reasoning, a_grammar_constrains_the_answer_not_the_thinking, .timeout = 120) {
    start();
    const char *choice = "\"structured_outputs\":{\"choice\":[\"yes\",\"no\"]},";
    char fields[256];
    snprintf(fields, sizeof fields, THINKS ",%s", choice);
    for (int stream = 0; stream < 2; stream++) {
        oai_answer a;
        ask(fields, stream, &a);
        const char *c = a.choice[0].content;
        cr_assert(!strcmp(c, "yes") || !strcmp(c, "no"), "answer '%s': %s", c, a.body);
        cr_assert_str_eq(a.choice[0].finish, "stop");
        const char *r = a.choice[0].reasoning;
        cr_assert(r && strlen(r) > 0 && strcmp(r, "yes") && strcmp(r, "no"), "thinking '%s'", r);
        oai_answer_free(&a);
    }
    /* "<think>" banned: no block can open, so the grammar holds everything */
    oai_answer a;
    snprintf(fields, sizeof fields, "\"logit_bias\":{\"151667\":-100},%s", choice);
    ask(fields, false, &a);
    cr_assert(!strcmp(a.choice[0].content, "yes") || !strcmp(a.choice[0].content, "no"), "%s",
              a.body);
    cr_assert_null(a.choice[0].reasoning);
    oai_answer_free(&a);
    /* a budget of 0 closes the block at once */
    ask("\"logit_bias\":{\"151667\":3},\"repetition_penalty\":10,\"thinking_budget_tokens\":0,",
        true, &a);
    cr_assert_eq(a.choice[0].ids[0], THINK_ID);
    cr_assert_eq(a.choice[0].ids[1], THINK_END);
    oai_answer_free(&a);
    ask("\"logit_bias\":{\"151667\":3},\"repetition_penalty\":10,\"thinking_budget_tokens\":0,",
        false, &a);
    cr_assert_str_eq(a.choice[0].reasoning, "", "an empty block is an empty reasoning_content");
    cr_assert_eq(reasoning_tokens(&a), 2);
    oai_answer_free(&a);
    finish();
}

/* The engine, given a prompt that left a block open (think = THINK_IN):
 * the grammar waits for "</think>", which the budget forces after 3. */
Test(reasoning, engine_starts_inside_a_block_the_prompt_opened, .timeout = 120) {
    make_model();
    env v;
    env_open(&v, model_path);
    engine *e = env_engine(&v, 4, 64, 0, GGML_TYPE_F16, true);
    int32_t prompt[3] = {9707, 198, THINK_ID}; /* "Hello", "\n", "<think>" */
    result res[1] = {0};
    engine_request rq = env_think_request(prompt, 3, 16, "root ::= \"ok\"", THINK_IN, 3, res);
    uint64_t id;
    tps_err err = {{0}};
    cr_assert_eq(engine_submit(e, &rq, &id, &err), 0, "%s", err.msg);
    drain(e, 1);
    cr_assert_eq(res[0].finish, ENGINE_FINISH_STOP);
    cr_assert_geq(res[0].n, 5);
    cr_assert_eq(res[0].tokens[3], THINK_END, "the budget's close came at %d", res[0].tokens[3]);
    char *text = NULL;
    size_t n = 0;
    cr_assert_eq(tokenizer_decode_alloc(v.tok, res[0].tokens + 4, res[0].n - 4,
                                        TOK_DECODE_RAW_SPACES, &text, &n, &err),
                 0);
    cr_assert_str_eq(text, "ok", "the answer after the block");
    free(text);
    engine_destroy(e);
    env_close(&v);
    unlink(model_path);
}

/* A DeepSeek-R1-Distill-shaped file: a llama model whose GGUF carries the
 * real R1-Distill-Llama template, whose generation prompt opens the block
 * ("<｜Assistant｜><think>\n") so the model never writes "<think>" itself.
 * The prompt is jinja2's (tests/data/templates/corpus.json, BOS aside); the
 * answer starts inside the block: the budget's 4 tokens and "</think>"
 * come back as reasoning_content, streamed and whole alike, the rest as
 * content, no marker in either. */
#define R1_TEMPLATE                                                                                \
    TPS_SOURCE_DIR "/tests/data/templates/deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja"
#define R1_ASK                                                                                     \
    "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello!\"}],\"temperature\":0,"                \
    "\"max_tokens\":12,\"thinking_token_budget\":4,\"repetition_penalty\":10,"

/* jinja2's prompt, its BOS (DeepSeek's) cut from the front */
static char *r1_reference_prompt(void) {
    char *out = corpus_output("deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", "user");
    const char *bos = "<\xef\xbd\x9c"
                      "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>";
    cr_assert(!strncmp(out, bos, strlen(bos)), "%s", out);
    memmove(out, out + strlen(bos), strlen(out) - strlen(bos) + 1);
    return out;
}

Test(reasoning, an_r1_distill_file_thinks_from_its_prompts_open_block, .timeout = 120) {
    size_t n;
    char *tmpl = read_file_all(R1_TEMPLATE, &n);
    cr_assert_not_null(tmpl);
    make_model_as("llama", tmpl);
    free(tmpl);
    server_config c;
    fixture_defaults(&c, &F);
    c.model_path = model_path;
    fixture_start(&F, &c, true);
    oai_answer p;
    cr_assert_eq(oai_post(F.port, "/apply-template",
                          "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello!\"}]}", &p),
                 200, "%s", p.body);
    json_t *pj = json_loads(p.body, 0, NULL);
    const char *prompt = json_string_value(json_object_get(pj, "prompt"));
    char *want = r1_reference_prompt();
    /* the vocabulary's own BOS text stands where DeepSeek's was */
    cr_assert(prompt && strlen(prompt) >= strlen(want) &&
                  !strcmp(prompt + strlen(prompt) - strlen(want), want),
              "prompt '%s', jinja2's '%s'", prompt, want);
    free(want);
    json_decref(pj);
    oai_answer_free(&p);
    oai_answer w, s;
    oai_chat_ok(F.port, R1_ASK, "", false, &w);
    oai_chat_ok(F.port, R1_ASK, "", true, &s);
    split_alike(&w, &s);
    /* no "<think>" generated: the budget's 4 tokens, then "</think>" */
    cr_assert_eq(s.choice[0].n_ids, 12);
    for (int i = 0; i < BUDGET; i++)
        cr_assert_neq(s.choice[0].ids[i], THINK_ID);
    cr_assert_eq(s.choice[0].ids[BUDGET], THINK_END, "the budget did not close the block");
    cr_assert_eq(reasoning_tokens(&w), 1 + BUDGET, "%s", w.body);
    cr_assert_eq(reasoning_tokens(&s), 1 + BUDGET);
    oai_answer_free(&w);
    oai_answer_free(&s);
    finish();
}
