/* tps bench read as a user runs it (the tps binary, a real HTTP server on
 * 127.0.0.1) against a server speaking each dialect of 2026: chat with the
 * thinking in delta.reasoning (vLLM) and in delta.reasoning_content
 * (llama.cpp), OpenAI's Responses API, Anthropic's Messages API, a whole
 * non-streamed response and embeddings. Each scripted stream is 10
 * thinking tokens then 5 answer tokens, 50 ms apart, the first 50 ms after
 * the request: TTFT is 50 ms (a thinking token is a generated token), ITL
 * 50 ms, TTFO (the first answer token) 550 ms, 15 output tokens of which
 * 10 thinking. A stream whose thinking is in a field no row reads trips
 * the verdict's fields check by name. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/client/chunk.h"
#include "support/test_support.h"
#include "test_bench_fake.h"

#define GAP_MS   50
#define THINKING 10
#define TOKENS   15

typedef struct dialect_run {
    fake_server srv;
    json_t *res; /* the --json result */
    char *out;   /* what tps bench printed */
    int status;
} dialect_run;

/* Runs `tps bench` with `flags` against a fake server of dialect d. */
static void run_dialect(dialect_run *r, fake_dialect d, const char *flags) {
    r->srv = (fake_server){.mode = FAKE_OK,
                           .dialect = d,
                           .tokens = TOKENS,
                           .thinking = THINKING,
                           .gap_ms = GAP_MS,
                           .capture = true};
    cr_assert_eq(fake_start(&r->srv), 0, "cannot start the fake server");
    char path[] = "/tmp/tps-dialect-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    char args[1024];
    snprintf(args, sizeof args,
             "bench --url %s %s --requests 4 --concurrency 2 --input-len 16 --output-len %d "
             "--no-progress --json %s",
             r->srv.url, flags, TOKENS, path);
    r->status = run_tps(args, true, &r->out);
    fake_stop(&r->srv);
    json_error_t je;
    r->res = json_load_file(path, 0, &je);
    unlink(path);
    cr_assert(r->res, "tps bench wrote no result (exit %d): %s", r->status, r->out);
}

static void dialect_free(dialect_run *r) {
    json_decref(r->res);
    free(r->out);
    fake_free_log(&r->srv);
}

/* histograms.NAME.pNN in ms */
static double p_ms(const json_t *res, const char *name, const char *p) {
    json_t *h = json_object_get(json_object_get(res, "histograms"), name);
    return json_number_value(json_object_get(h, p)) / 1e6;
}

static double tok(const json_t *res, const char *k) {
    return json_number_value(json_object_get(json_object_get(res, "tokens"), k));
}

static bool tripped(const json_t *res, const char *check) {
    json_t *a = json_object_get(json_object_get(res, "verdict"), "tripped");
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) if (!strcmp(json_string_value(v), check)) return true;
    return false;
}

/* The figures every thinking dialect must read: TTFT and ITL one gap,
 * TTFO eleven, 15 tokens a request of which 10 thinking, all by usage. */
static void expect_thinking_figures(const dialect_run *r, const char *what) {
    const json_t *res = r->res;
    cr_expect_eq(r->status, 0, "%s: exit %d: %s", what, r->status, r->out);
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(res, "requests"), "completed")),
                 4, "%s: %s", what, r->out);
    double ttft = p_ms(res, "ttft", "p50"), itl = p_ms(res, "itl", "p50"),
           ttfo = p_ms(res, "ttfo", "p50");
    cr_expect(ttft > 40 && ttft < 120, "%s: TTFT p50 %.1f ms, want ~50", what, ttft);
    cr_expect(itl > 40 && itl < 70, "%s: ITL p50 %.1f ms, want ~50", what, itl);
    cr_expect(ttfo > 540 && ttfo < 700, "%s: TTFO p50 %.1f ms, want ~550", what, ttfo);
    cr_expect_eq(tok(res, "output"), 4 * TOKENS, "%s: output tokens", what);
    cr_expect_eq(tok(res, "reasoning"), 4 * THINKING, "%s: thinking tokens", what);
    cr_expect(!tripped(res, "fields"), "%s: the fields check tripped: %s", what, r->out);
    cr_expect(!tripped(res, "usage"), "%s: usage disagreed with the stream: %s", what, r->out);
    cr_expect(strstr(r->out, "TTFO (first answer token)"), "%s: no TTFO row: %s", what, r->out);
}

/* A thinking dialect d (the stream's thinking in the field `what` names)
 * run with flags: its figures are read (expect_thinking_figures). */
static void expect_thinking_dialect(fake_dialect d, const char *flags, const char *what) {
    dialect_run r;
    run_dialect(&r, d, flags);
    expect_thinking_figures(&r, what);
    dialect_free(&r);
}

Test(bench_dialects, chat_reasoning_field_of_vllm_is_timed_and_counted, .timeout = 60) {
    expect_thinking_dialect(FAKE_D_CHAT_REASONING, "--endpoint chat", "chat delta.reasoning");
}

Test(bench_dialects, chat_reasoning_content_of_llama_cpp_is_timed_and_counted, .timeout = 60) {
    expect_thinking_dialect(FAKE_D_CHAT_REASONING_CONTENT, "--endpoint chat",
                            "chat delta.reasoning_content");
}

/* An API of its own (d, named `what`) run with flags: its thinking figures
 * are read, the request went to path with the API's max field (15 tokens)
 * and the input tokens are its usage's (4 requests of 7). The caller frees
 * r. */
static void run_api_dialect(dialect_run *r, fake_dialect d, const char *flags, const char *what,
                            const char *path, const char *max_field) {
    run_dialect(r, d, flags);
    expect_thinking_figures(r, what);
    char line[64], max[64];
    snprintf(line, sizeof line, "POST %s ", path);
    snprintf(max, sizeof max, "\"%s\":15", max_field);
    cr_expect(strstr(r->srv.log, line), "%s", r->srv.log);
    cr_expect(strstr(r->srv.log, max), "%s", r->srv.log);
    cr_expect_eq(tok(r->res, "input"), 4 * 7, "%s: input tokens from the usage: %.0f: %s", what,
                 tok(r->res, "input"), r->out);
}

Test(bench_dialects, responses_api_stream_is_read_by_its_events, .timeout = 60) {
    dialect_run r;
    run_api_dialect(&r, FAKE_D_RESPONSES, "--endpoint responses --model m", "responses",
                    "/v1/responses", "max_output_tokens");
    /* the request is the Responses API's: input items, no stream_options */
    cr_expect(strstr(r.srv.log, "\"input\":[{"), "%s", r.srv.log);
    cr_expect(!strstr(r.srv.log, "stream_options") && !strstr(r.srv.log, "ignore_eos"), "%s",
              r.srv.log);
    dialect_free(&r);
}

Test(bench_dialects, messages_api_stream_with_anthropic_headers, .timeout = 60) {
    dialect_run r;
    run_api_dialect(&r, FAKE_D_MESSAGES, "--endpoint messages --model m --api-key sk-test",
                    "messages", "/v1/messages", "max_tokens");
    cr_expect(strcasestr(r.srv.log, "x-api-key: sk-test"), "%s", r.srv.log);
    cr_expect(strcasestr(r.srv.log, "anthropic-version: 2023-06-01"), "%s", r.srv.log);
    cr_expect(!strcasestr(r.srv.log, "Authorization: Bearer"), "%s", r.srv.log);
    dialect_free(&r);
}

Test(bench_dialects, thinking_in_an_unread_field_trips_the_verdict_by_name, .timeout = 60) {
    dialect_run r;
    run_dialect(&r, FAKE_D_CHAT_UNKNOWN, "--endpoint chat");
    cr_expect(tripped(r.res, "fields"), "the fields check did not trip: %s", r.out);
    cr_expect(strstr(r.out, "delta.thinking"), "the verdict does not name the field: %s", r.out);
    cr_expect_str_eq(
        json_string_value(json_object_get(json_object_get(r.res, "tokens"), "unread_field")),
        "delta.thinking");
    dialect_free(&r);
}

/* A dialect without thinking run with flags: tps bench exits 0 and the
 * server's log of the requests holds `sent` (what the dialect asks). The
 * caller frees r. */
static void run_plain_dialect(dialect_run *r, fake_dialect d, const char *flags, const char *sent) {
    run_dialect(r, d, flags);
    cr_expect_eq(r->status, 0, "%s", r->out);
    cr_expect(strstr(r->srv.log, sent), "%s", r->srv.log);
}

Test(bench_dialects, no_stream_reports_e2e_and_says_why_ttft_is_absent, .timeout = 60) {
    dialect_run r;
    run_plain_dialect(&r, FAKE_D_CHAT_WHOLE, "--endpoint chat --no-stream", "\"stream\":false");
    cr_expect_eq(tok(r.res, "output"), 4 * TOKENS, "%s", r.out);
    json_t *ttft = json_object_get(json_object_get(r.res, "histograms"), "ttft");
    cr_expect_eq(json_integer_value(json_object_get(ttft, "count")), 0,
                 "a whole response has no first-token time");
    double e2e = p_ms(r.res, "e2e", "p50");
    cr_expect(e2e > 700 && e2e < 1000, "E2E p50 %.1f ms, want ~750", e2e);
    cr_expect(strstr(r.out, "not measured: --no-stream"), "%s", r.out);
    dialect_free(&r);
}

Test(bench_dialects, embeddings_count_the_servers_input_tokens_in_batches, .timeout = 60) {
    dialect_run r;
    run_plain_dialect(&r, FAKE_D_EMBEDDINGS, "--endpoint embeddings --batch-size 8 --model m",
                      "POST /v1/embeddings ");
    cr_expect(!strstr(r.srv.log, "\"stream\"") && !strstr(r.srv.log, "max_tokens"), "%s",
              r.srv.log);
    /* one request carries 8 texts */
    const char *in = strstr(r.srv.log, "\"input\":[");
    cr_assert(in, "%s", r.srv.log);
    int strings = 0;
    for (const char *p = in + 9; *p && *p != ']'; p++)
        strings += *p == '"';
    cr_expect_eq(strings, 16, "8 texts in one request: %s", in);
    cr_expect_eq(tok(r.res, "input"), 4 * 40, "input tokens are the server's usage");
    cr_expect_eq(tok(r.res, "output"), 0);
    cr_expect(strstr(r.out, "an embeddings response is one body"), "%s", r.out);
    dialect_free(&r);
}

Test(bench_dialects, flags_that_an_endpoint_cannot_apply_are_refused) {
    expect_tps("bench --endpoint embeddings --requests 1 --temperature 0.5", 2,
               "--endpoint embeddings does not take --temperature");
    expect_tps("bench --endpoint chat --requests 1 --batch-size 4", 2,
               "--batch-size is for --endpoint embeddings");
    expect_tps("bench --endpoint chat --no-stream --requests 1 --slo ttft=100", 2, "need a stream");
    expect_tps("plan --endpoint messages --requests 1", 2, "is not simulated");
}

/* tps report and tps bench compare carry TTFO and the thinking share. */
Test(bench_dialects, report_and_compare_show_ttfo_and_thinking, .timeout = 90) {
    dialect_run a, b;
    run_dialect(&a, FAKE_D_CHAT_REASONING, "--endpoint chat --per-request");
    run_dialect(&b, FAKE_D_RESPONSES, "--endpoint responses --per-request");
    char pa[] = "/tmp/tps-dialect-a-XXXXXX", pb[] = "/tmp/tps-dialect-b-XXXXXX";
    int fa = mkstemp(pa), fb = mkstemp(pb);
    cr_assert(fa >= 0 && fb >= 0);
    close(fa), close(fb);
    cr_assert_eq(json_dump_file(a.res, pa, 0), 0);
    cr_assert_eq(json_dump_file(b.res, pb, 0), 0);
    char args[256], *out = NULL;
    snprintf(args, sizeof args, "report %s %s", pa, pb);
    cr_expect_eq(run_tps(args, true, &out), 0, "%s", out);
    cr_expect(strstr(out, "TTFO, the first answer token"), "%s", out);
    cr_expect(strstr(out, "thinking 67% of the output"), "%s", out);
    free(out);
    snprintf(args, sizeof args, "bench compare %s %s", pa, pb);
    cr_expect_eq(run_tps(args, true, &out), 0, "%s", out);
    cr_expect(strstr(out, "TTFO p50 ms") && strstr(out, "thinking share"), "%s", out);
    free(out);
    unlink(pa), unlink(pb);
    dialect_free(&a);
    dialect_free(&b);
}

/* The two readers of the OpenAI dialect agree on what the new rows read. */
Test(bench_dialects, scanner_and_jansson_agree_on_reasoning_and_unread_fields) {
    static const char *const EVENTS[] = {
        "{\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\"hm\"}}]}",
        "{\"choices\":[{\"index\":0,\"delta\":{\"thinking\":\"hm\",\"content\":null}}]}",
        "{\"choices\":[{\"index\":0,\"delta\":{\"zz\":\"a\",\"thinking\":\"b\"}}]}",
        "{\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":9,"
        "\"completion_tokens_details\":{\"reasoning_tokens\":4}}}",
        "{\"choices\":[{\"index\":0,\"delta\":{\"refusal\":\"no\"}}]}",
    };
    for (size_t i = 0; i < sizeof EVENTS / sizeof EVENTS[0]; i++) {
        bench_chunk a, b;
        tps_err e;
        size_t n = strlen(EVENTS[i]);
        cr_assert(bench_chunk_scan(&a, EVENTS[i], n, ""), "the scanner declined %s", EVENTS[i]);
        cr_assert_eq(bench_chunk_parse_json(&b, EVENTS[i], n, "", &e), 0, "%s", e.msg);
        const char *field = NULL;
        cr_expect(bench_chunk_same(&a, &b, &field), "%s: readers differ in %s", EVENTS[i], field);
        bench_chunk_release(&b);
    }
    bench_chunk c;
    tps_err e;
    const char *ev = EVENTS[2];
    cr_assert_eq(bench_chunk_parse(&c, BENCH_DIALECT_OPENAI, ev, strlen(ev), "", &e), 0);
    cr_expect_str_eq(c.unread, "delta.thinking", "the first unread field by name");
    bench_chunk_release(&c);
    const char *tool = "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{"
                       "\"arguments\":\"{\\\"a\\\":\"}}]}}]}";
    cr_assert_eq(bench_chunk_parse(&c, BENCH_DIALECT_OPENAI, tool, strlen(tool), "", &e), 0);
    cr_expect_eq(c.tokens, 1, "tool-call arguments are generated tokens");
    cr_expect(!c.reasoning && !c.unread[0]);
    bench_chunk_release(&c);
}
