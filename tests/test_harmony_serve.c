/* gpt-oss's chat format served for real: a tiny seeded random llama model
 * with gpt-oss's o200k_harmony vocabulary (made at test time from the npm
 * package, tests/data/vocab/README.md) and gpt-oss's own template in the
 * GGUF, on 127.0.0.1. The prompt with reasoning_effort is jinja2's
 * (tests/data/templates/corpus.json); the random model never writes the
 * channels by itself, so a grammar makes it write them (a marker as its
 * one token or spelled in pieces, as the grammar lets it), and the
 * answer's analysis channel comes back as
 * reasoning_content, the final channel as content, a message to
 * functions.NAME as a tool call, streamed and whole alike, with no header
 * or marker in either. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "model/gguf.h"
#include "model/model_make.h"
#include "support/model_run.h"
#include "support/oai_client.h"
#include "support/server_fixture.h"
#include "support/test_support.h"
#include "support/npm_vocab.h"
#include "support/vocab_make.h"

#define TEMPLATES TPS_SOURCE_DIR "/tests/data/templates/"
#define GPTOSS    "openai-gpt-oss-120b.jinja"

static server_fixture F;
static char dir[64];

/* gpt-oss's vocabulary written to dir/vocab.gguf, then a tiny llama model
 * with it and gpt-oss's template: dir/model.gguf. */
static void make_model(char *model, size_t cap) {
    const char *src = npm_tokenizer_dir("gptoss", GPTOSS_PACKAGE);
    snprintf(dir, sizeof dir, "/tmp/tps-harmony-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    uint8_t *buf = NULL;
    size_t size = 0;
    tps_err err = {{0}};
    cr_assert_eq(vocab_make_gptoss(src, &buf, &size, &err), 0, "%s", err.msg);
    char vocab[128];
    snprintf(vocab, sizeof vocab, "%s/vocab.gguf", dir);
    FILE *f = fopen(vocab, "wb");
    cr_assert(f && fwrite(buf, 1, size, f) == size && fclose(f) == 0);
    free(buf);
    size_t n;
    char *tmpl = read_file_all(TEMPLATES GPTOSS, &n);
    cr_assert_not_null(tmpl);
    snprintf(model, cap, "%s/model.gguf", dir);
    test_model_make_chat(model, model_preset_find("tiny"), "llama", vocab, tmpl);
    free(tmpl);
    unlink(vocab);
}

static void start(void) {
    static char model[128];
    make_model(model, sizeof model);
    server_config c;
    fixture_defaults(&c, &F);
    c.model_path = model;
    fixture_start(&F, &c, true);
}

static void finish(void) {
    char path[128];
    fixture_finish(&F);
    snprintf(path, sizeof path, "%s/model.gguf", dir);
    unlink(path);
    rmdir(dir);
}

/* jinja2's rendering of the corpus's reasoning_effort conversation, with
 * today's date where the generator pinned strftime_now to 2024-07-26 (the
 * server renders with the current time). */
static char *reference_prompt(void) {
    char *want = corpus_output(GPTOSS, "reasoning_effort");
    char *date = strstr(want, "Current date: 2024-07-26");
    cr_assert_not_null(date);
    time_t now = time(NULL);
    struct tm tm;
    char today[16];
    strftime(today, sizeof today, "%Y-%m-%d", localtime_r(&now, &tm));
    memcpy(date + strlen("Current date: "), today, 10);
    return want;
}

#define ASK                                                                                        \
    "{\"messages\":[{\"role\":\"user\",\"content\":\"What is 2+2?\"}],\"max_tokens\":256,"         \
    "\"temperature\":0,"
/* what a gpt-oss answer looks like after the prompt's "<|start|>assistant" */
#define ANSWER                                                                                     \
    "<|channel|>analysis<|message|>Add them.<|end|><|start|>assistant<|channel|>final<|message|>"  \
    "It is 4."
#define ANSWER_GRAMMAR                                                                             \
    "\"grammar\":\"root ::= \\\"<|channel|>analysis<|message|>Add them.<|end|><|start|>"           \
    "assistant<|channel|>final<|message|>It is 4.\\\"\","

static void ask(const char *fields, bool stream, oai_answer *a) {
    oai_chat_ok(F.port, ASK, fields, stream, a);
}

static long reasoning_tokens(const oai_answer *a) {
    return (long)json_integer_value(json_object_get(
        json_object_get(a->usage, "completion_tokens_details"), "reasoning_tokens"));
}

Test(harmony_serve, gpt_oss_channels_split_into_reasoning_and_content, .timeout = 180) {
    start();
    /* the prompt: jinja2's, with reasoning_effort in the system message */
    oai_answer p;
    cr_assert_eq(oai_post(F.port, "/apply-template",
                          "{\"messages\":[{\"role\":\"user\",\"content\":\"What is 2+2?\"}],"
                          "\"reasoning_effort\":\"low\"}",
                          &p),
                 200, "%s", p.body);
    json_t *pj = json_loads(p.body, 0, NULL);
    char *want = reference_prompt();
    cr_assert_str_eq(json_string_value(json_object_get(pj, "prompt")), want);
    cr_assert(strstr(want, "Reasoning: low"));
    free(want);
    json_decref(pj);
    oai_answer_free(&p);

    oai_answer w, s, inline_;
    ask(ANSWER_GRAMMAR, false, &w);
    ask(ANSWER_GRAMMAR, true, &s);
    ask(ANSWER_GRAMMAR "\"reasoning_format\":\"none\",", false, &inline_);
    cr_assert_str_eq(w.choice[0].reasoning, "Add them.", "%s", w.body);
    cr_assert_str_eq(w.choice[0].content, "It is 4.", "%s", w.body);
    cr_assert_str_eq(s.choice[0].reasoning, "Add them.", "%s", s.body);
    cr_assert_str_eq(s.choice[0].content, "It is 4.", "%s", s.body);
    cr_assert_str_eq(inline_.choice[0].content, ANSWER, "%s", inline_.body);
    cr_assert_null(inline_.choice[0].reasoning);
    cr_assert_gt(reasoning_tokens(&w), 0, "%s", w.body);
    cr_assert_eq(reasoning_tokens(&s), reasoning_tokens(&w), "%ld vs %ld: %s", reasoning_tokens(&s),
                 reasoning_tokens(&w), s.body);
    oai_answer_free(&w);
    oai_answer_free(&s);
    oai_answer_free(&inline_);
    finish();
}

#define TOOLS                                                                                      \
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":"    \
    "\"The weather.\",\"parameters\":"                                                             \
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}}],"
#define CALL_GRAMMAR                                                                               \
    "\"grammar\":\"root ::= \\\"<|channel|>analysis<|message|>Look it up.<|end|><|start|>"         \
    "assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"         \
    "{\\\\\\\"city\\\\\\\":\\\\\\\"Oslo\\\\\\\"}\\\"\","

/* A message to functions.get_weather is a tool call, its analysis the
 * reasoning; streamed, the call comes as delta.tool_calls. */
Test(harmony_serve, a_message_to_a_function_is_a_tool_call, .timeout = 180) {
    start();
    oai_answer w, s;
    ask(TOOLS CALL_GRAMMAR, false, &w);
    ask(TOOLS CALL_GRAMMAR, true, &s);
    json_t *j = json_loads(w.body, 0, NULL);
    json_t *msg = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "message");
    json_t *call = json_array_get(json_object_get(msg, "tool_calls"), 0);
    json_t *fn = json_object_get(call, "function");
    cr_assert_str_eq(json_string_value(json_object_get(fn, "name")), "get_weather", "%s", w.body);
    json_t *args = json_loads(json_string_value(json_object_get(fn, "arguments")), 0, NULL);
    cr_assert_str_eq(json_string_value(json_object_get(args, "city")), "Oslo", "%s", w.body);
    cr_assert_str_eq(w.choice[0].finish, "tool_calls", "%s", s.body);
    cr_assert_str_eq(w.choice[0].reasoning, "Look it up.", "%s", w.body);
    cr_assert(json_is_null(json_object_get(msg, "content")), "%s", w.body);
    cr_assert_str_eq(s.choice[0].finish, "tool_calls", "%s", s.body);
    cr_assert_str_eq(s.choice[0].reasoning, "Look it up.", "%s", s.body);
    cr_assert(strstr(s.body, "\"get_weather\""), "%s", s.body);
    cr_assert(!strstr(s.body, "<|channel|>") && !strstr(s.body, "to=functions"), "%s", s.body);
    json_decref(args);
    json_decref(j);
    oai_answer_free(&w);
    oai_answer_free(&s);
    finish();
}
