/* Chat template rendering cost (issue 32): what turning a ~4k-token chat
 * request into its prompt costs on the thread that prepares requests, with
 * real templates (tests/data/templates): the request's messages and tools
 * converted into template values and rendered by src/jinja, as tps serve
 * does (chat_prompt_render). The target is well under 1 ms.
 *
 * The conversation: a system message, 40 turns of ~400 characters (text
 * with newlines, quotes and non-ASCII), two tools; its prompt is counted in
 * tokens with the Qwen3 vocabulary from ../shared when it is there. Each
 * template: compile once, 20 warm-up renders, then 300 timed; reported:
 * median, p99, output bytes and tokens. Numbers, not pass/fail.
 *
 * usage: bench_template [shared dir (default ../shared beside the source)]
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/file_read.h"
#include "model/gguf.h"
#include "model/tokenizer.h"
#include "server/chat/chat_prompt.h"

#define TURNS 40
#define RUNS  300

static const char *const TEMPLATES[] = {
    "Qwen-Qwen3-0.6B.jinja",
    "meta-llama-Llama-3.1-8B-Instruct.jinja",
    "google-gemma-3-it.jinja",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja",
    "HuggingFaceTB-SmolLM3-3B.jinja",
};

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The source tree, from this file's path (CMake compiles it by its full path). */
static void template_path(char *out, size_t cap, const char *name) {
    const char *me = __FILE__, *cut = strstr(me, "bench/bench_template.c");
    snprintf(out, cap, "%.*stests/data/templates/%s", cut ? (int)(cut - me) : 0, me, name);
}

static json_t *conversation(void) {
    json_t *msgs = json_array();
    json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "system", "content",
                                          "You are a careful assistant. Answer briefly."));
    char text[512];
    for (int i = 0; i < TURNS; i++) {
        snprintf(text, sizeof text,
                 "Turn %d: here is a longer message about the weather in Oslo, Bergen and "
                 "Tromsø, with \"quotes\", a {brace} and a list:\n- first point about rain\n"
                 "- second point about wind speed of %d m/s\n- third, café prices.\nWhat do you "
                 "think about it, and what should I pack for a week-long trip in %s?",
                 i, i % 17, i % 2 ? "spring" : "autumn");
        json_array_append_new(
            msgs, json_pack("{s:s,s:s}", "role", i % 2 ? "assistant" : "user", "content", text));
    }
    json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "user", "content", "Thanks!"));
    return msgs;
}

static json_t *tools(void) {
    return json_loads(
        "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"The "
        "weather in a city\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{"
        "\"type\":\"string\"}},\"required\":[\"city\"]}}},{\"type\":\"function\",\"function\":{"
        "\"name\":\"get_time\",\"parameters\":{\"type\":\"object\",\"properties\":{}}}}]",
        0, NULL);
}

static void bench_one(const char *name, const json_t *msgs, const json_t *tl, tokenizer *tok) {
    char path[1024];
    template_path(path, sizeof path, name);
    size_t len;
    char *src;
    if (tps_read_file(path, SIZE_MAX - 2, &src, &len)) {
        printf("%-48s skipped: %s not found\n", name, path);
        return;
    }
    chat_prompt p;
    tps_err err = {{0}};
    uint64_t t0 = tps_now_ns();
    int rc = chat_prompt_init(&p, src, len, NULL, 0, CHAT_SRC_FILE, name, &err);
    uint64_t compile_ns = tps_now_ns() - t0;
    free(src);
    if (rc) {
        printf("%-48s compile failed: %s\n", name, err.msg);
        return;
    }
    p.tools_known = true;
    chat_request rq = {
        .messages = msgs, .tools = p.template_tools ? tl : NULL, .add_generation_prompt = true};
    static uint64_t ns[RUNS];
    sbuf out;
    sbuf_init(&out);
    for (int i = -20; i < RUNS; i++) {
        sbuf_reset(&out);
        chat_error ce;
        t0 = tps_now_ns();
        if (chat_prompt_render(&p, &rq, &out, &ce)) {
            printf("%-48s render failed: %s\n", name, ce.msg);
            break;
        }
        if (i >= 0) ns[i] = tps_now_ns() - t0;
    }
    qsort(ns, RUNS, sizeof ns[0], cmp_u64);
    size_t n_tok = 0;
    int32_t *ids = NULL;
    if (tok &&
        !tokenizer_encode_alloc(tok, out.p, out.len, TOK_ENCODE_PARSE_SPECIAL, &ids, &n_tok, &err))
        free(ids);
    printf("%-48s render median %7.1f us, p99 %7.1f us; %6zu bytes", name, ns[RUNS / 2] / 1e3,
           ns[RUNS * 99 / 100] / 1e3, out.len);
    if (n_tok) printf(", %zu Qwen3 tokens", n_tok);
    printf("%s; compile %.2f ms\n", rq.tools ? " (with tools)" : "", compile_ns / 1e6);
    sbuf_free(&out);
    chat_prompt_free(&p);
}

int main(int argc, char **argv) {
    const char *shared = argc > 1 ? argv[1] : TPS_BENCH_SHARED;
    char vocab[1024];
    snprintf(vocab, sizeof vocab, "%s/models/vocab/ggml-vocab-qwen3.gguf", shared);
    gguf_file *f = NULL;
    tokenizer *tok = NULL;
    tps_err err = {{0}};
    if (gguf_open(&f, vocab, &err) || tokenizer_load(&tok, f, &err)) {
        printf("(no Qwen3 vocabulary: %s; token counts left out)\n", err.msg);
        tok = NULL;
    }
    json_t *msgs = conversation(), *tl = tools();
    printf("chat template render, %d turns (~4k tokens), as tps serve prepares a request:\n",
           TURNS);
    for (size_t i = 0; i < sizeof TEMPLATES / sizeof TEMPLATES[0]; i++)
        bench_one(TEMPLATES[i], msgs, tl, tok);
    json_decref(msgs);
    json_decref(tl);
    tokenizer_free(tok);
    if (f) gguf_close(f);
    return 0;
}
