/* The bench's --dataset formats, detected by content: ShareGPT JSON (first
 * human turn as the prompt, the reply's tokens as max_tokens, unusable
 * entries skipped and counted, errors naming line and entry), Mooncake
 * traces (prompts of input_length model tokens built from shared 512-token
 * blocks, send times scaled by the trace speed, errors naming the line),
 * and today's JSONL, still read as before. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/client/bench.h"
#include "bench/workload/dataset.h"
#include "bench/workload/workload.h"
#include "base/clock.h"
#include "model/tokenizer.h"
#include "support/bench_workload.h"
#include "support/test_support.h"
#include "test_bench_fake.h"

#define MODEL "models/stories260K.gguf"

static workload_opts opts(bench_endpoint ep) {
    return (workload_opts){
        .endpoint = ep, .seed = 5, .ignore_eos = -1, .include_usage = true, .temperature = -1};
}

/* Builds a workload from a dataset text, with the test model's tokenizer when asked. */
static int build(workload *w, const char *text, workload_opts *o, bool with_tok, tps_err *e) {
    char *path = test_temp_file(text);
    char *model = with_tok ? shared_path(MODEL) : NULL;
    o->dataset = path;
    o->tokenizer_path = model;
    int rc = workload_build(w, o, e);
    unlink(path);
    free(path);
    free(model);
    o->dataset = o->tokenizer_path = NULL;
    return rc;
}

/* build, asserting that it succeeds. */
static void build_ok(workload *w, const char *text, workload_opts *o, bool with_tok) {
    tps_err e = {{0}};
    cr_assert_eq(build(w, text, o, with_tok, &e), 0, "%s", e.msg);
}

/* build_ok with opts(ep) as they are. */
static void build_as(workload *w, const char *text, bench_endpoint ep, bool with_tok) {
    workload_opts o = opts(ep);
    build_ok(w, text, &o, with_tok);
}

/* build_as a completions workload with the test model's tokenizer (the
 * test is skipped without it), asserting the format it was read as. */
static void build_tokenized(workload *w, const char *text, const char *format) {
    REQUIRE_SHARED(MODEL);
    build_as(w, text, BENCH_EP_COMPLETIONS, true);
    cr_expect_str_eq(w->format, format);
}

/* A dataset text (a file named "f") that dataset_parse refuses, and what
 * its message must hold. */
typedef struct parse_case {
    const char *text, *want;
} parse_case;

/* dataset_parse of case k (chat as dataset_parse takes it) fails with its
 * message. */
static void expect_parse_error(dataset *d, const parse_case *cases, size_t k, bool chat) {
    tps_err e = {{0}};
    const char *text = cases[k].text;
    cr_expect_neq(dataset_parse(d, text, strlen(text), "f", chat, &e), 0, "case %zu", k);
    cr_expect(strstr(e.msg, cases[k].want) != NULL, "case %zu: %s", k, e.msg);
}

/* The prompt of an item's body (completions), borrowed from *j which the caller frees. */
static const char *prompt_of(const workload_item *it, json_t **j) {
    *j = json_loadb(it->body, it->body_len, 0, NULL);
    cr_assert_not_null(*j, "%s", it->body);
    const char *p = json_string_value(json_object_get(*j, "prompt"));
    cr_assert_not_null(p, "%s", it->body);
    return p;
}

static size_t tokens(const workload *w, const char *text, int flags) {
    int32_t *ids = NULL;
    size_t n = 0;
    tps_err e = {{0}};
    cr_assert_eq(tokenizer_encode_alloc(w->tok, text, strlen(text), flags, &ids, &n, &e), 0, "%s",
                 e.msg);
    free(ids);
    return n;
}

/* ---- detection ------------------------------------------------------------------------- */

Test(bench_dataset, format_is_detected_by_content) {
    const char *jsonl = "{\"prompt\":\"hi\"}\n";
    const char *trace = "\n  {\"timestamp\": 0, \"input_length\": 3, \"output_length\": 1}\n";
    cr_expect_eq(dataset_detect(jsonl, strlen(jsonl)), DATASET_JSONL);
    cr_expect_eq(dataset_detect(trace, strlen(trace)), DATASET_TRACE);
    cr_expect_eq(dataset_detect(" \n [ ]", 6), DATASET_SHAREGPT);
    cr_expect_eq(dataset_detect("", 0), DATASET_JSONL);
    /* a JSONL line that merely has a timestamp is still JSONL */
    const char *ts = "{\"prompt\":\"a\",\"timestamp\":3}\n";
    cr_expect_eq(dataset_detect(ts, strlen(ts)), DATASET_JSONL);
}

Test(bench_dataset, jsonl_is_still_read_as_before) {
    const char *text = "{\"prompt\":\"Once upon a time\",\"max_tokens\":8}\n\n{\"prompt\":\"x\"}\n";
    workload w;
    workload_opts o = opts(BENCH_EP_COMPLETIONS);
    build_ok(&w, text, &o, false);
    cr_expect_str_eq(w.format, "jsonl");
    cr_expect_not(w.timed);
    cr_assert_eq(w.n, 2);
    cr_expect_eq(w.items[0].max_tokens, 8);
    cr_expect_eq(w.items[1].max_tokens, 128);
    cr_expect_eq(w.items[0].send_at_s, -1);
    json_t *j;
    cr_expect_str_eq(prompt_of(&w.items[0], &j), "Once upon a time");
    json_decref(j);
    workload_free(&w);

    tps_err e = {{0}};
    cr_expect_neq(build(&w, "{\"prompt\":\"ok\"}\n{\"prompt\":\n", &o, false, &e), 0);
    cr_expect(strstr(e.msg, ":2: column") != NULL, "%s", e.msg);
}

/* ---- ShareGPT ---------------------------------------------------------------------------- */

static const char *const SHAREGPT =
    "[\n"
    "  {\"id\": \"a\", \"conversations\": [\n"
    "    {\"from\": \"human\", \"value\": \"Tell me a story\"},\n"
    "    {\"from\": \"gpt\", \"value\": \"Once upon a time there was a little girl.\"}]},\n"
    "  {\"id\": \"b\", \"conversations\": [{\"from\": \"gpt\", \"value\": \"no question\"}]},\n"
    "  {\"id\": \"c\", \"conversations\": [\n"
    "    {\"from\": \"system\", \"value\": \"be kind\"},\n"
    "    {\"from\": \"user\", \"value\": \"Hi there\"},\n"
    "    {\"from\": \"assistant\", \"value\": \"Hello friend\"},\n"
    "    {\"from\": \"human\", \"value\": \"later turn\"},\n"
    "    {\"from\": \"gpt\", \"value\": \"not used\"}]},\n"
    "  {\"id\": \"d\", \"conversations\": [{\"from\": \"human\", \"value\": \"no reply\"}]}\n"
    "]\n";

Test(bench_dataset, sharegpt_prompt_is_the_first_human_turn_and_max_tokens_the_replys_tokens) {
    workload w;
    build_tokenized(&w, SHAREGPT, "sharegpt");
    cr_assert_eq(w.n, 2);
    json_t *j;
    cr_expect_str_eq(prompt_of(&w.items[0], &j), "Tell me a story");
    json_decref(j);
    cr_expect_str_eq(prompt_of(&w.items[1], &j), "Hi there");
    json_decref(j);
    size_t want0 = tokens(&w, "Once upon a time there was a little girl.", 0);
    size_t want1 = tokens(&w, "Hello friend", 0);
    cr_expect_gt(want0, 9, "the test model splits words: %zu", want0);
    cr_expect_eq(w.items[0].max_tokens, want0);
    cr_expect_eq(w.items[1].max_tokens, want1);
    workload_free(&w);
}

Test(bench_dataset, sharegpt_skips_and_counts_entries_without_a_human_turn_and_reply) {
    workload w;
    workload_opts o = opts(BENCH_EP_CHAT);
    build_ok(&w, SHAREGPT, &o, false);
    cr_expect_eq(w.n, 2);
    cr_expect_eq(w.skipped, 2);
    cr_expect(strstr(w.note, "2 of 4 ShareGPT entries skipped") != NULL, "%s", w.note);
    /* no tokenizer: the reply's words */
    cr_expect_eq(w.items[0].max_tokens, 9);
    cr_expect_eq(w.items[1].max_tokens, 2);
    /* chat: the prompt is the user message */
    json_t *j = json_loadb(w.items[1].body, w.items[1].body_len, 0, NULL);
    json_t *m = json_array_get(json_object_get(j, "messages"), 0);
    cr_expect_str_eq(json_string_value(json_object_get(m, "content")), "Hi there");
    json_decref(j);
    workload_free(&w);

    const char *none = "[{\"conversations\": [{\"from\": \"gpt\", \"value\": \"x\"}]}]";
    tps_err e = {{0}};
    cr_expect_neq(build(&w, none, &o, false, &e), 0);
    cr_expect(strstr(e.msg, "none of the 1 ShareGPT entries") != NULL, "%s", e.msg);
}

Test(bench_dataset, sharegpt_output_len_overrides_the_reply_length) {
    workload w;
    workload_opts o = opts(BENCH_EP_COMPLETIONS);
    o.has_output_len = true;
    o.output_len = (load_dist){.kind = LOAD_DIST_FIXED, .a = 7};
    build_ok(&w, SHAREGPT, &o, false);
    for (size_t i = 0; i < w.n; i++)
        cr_expect_eq(w.items[i].max_tokens, 7);
    workload_free(&w);
}

Test(bench_dataset, sharegpt_errors_name_the_line_and_the_entry) {
    static const parse_case cases[] = {
        {"[{\"conversations\": []},\n {\"conversations\": [{\"from\": \"human\"}]}]",
         "f:2: entry 1: conversations[0] must be an object"},
        {"[{\"conversations\": []},\n\n {\"conversations\": \"x\"}]",
         "f:3: entry 1: expected an object with \"conversations\""},
        {"[{\"conversations\": []},\n {\"conversations\": [}\n]", "f:2: entry 1: "},
        {"[{\"conversations\": []}", "f:1: entry 0: the array is not closed"},
        {"[{\"conversations\": []}] x", "f:1: unexpected text after the array"},
        {"[{\"conversations\": []},]", "f:1: entry 1: "},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        dataset d;
        expect_parse_error(&d, cases, k, true);
        cr_expect_eq(d.n, 0);
    }
}

/* ---- Mooncake traces --------------------------------------------------------------------- */

static const char *const TRACE =
    "{\"timestamp\": 1000, \"input_length\": 1100, \"output_length\": 4, \"hash_ids\": [7, 8, 9]}\n"
    "{\"timestamp\": 1500, \"input_length\": 1200, \"output_length\": 5, \"hash_ids\": [7, 8, 3]}\n"
    "{\"timestamp\": 1500, \"input_length\": 700, \"output_length\": 6, \"hash_ids\": [5, 6]}\n"
    "{\"timestamp\": 4000, \"input_length\": 40, \"output_length\": 7}\n";

Test(bench_dataset, trace_prompts_have_the_asked_tokens_and_share_blocks_by_hash_id) {
    workload w;
    build_tokenized(&w, TRACE, "trace");
    cr_expect_str_eq(w.input_source, "tokenizer");
    cr_assert(w.timed);
    cr_assert_eq(w.n, 4);
    const uint32_t in[] = {1100, 1200, 700, 40}, out[] = {4, 5, 6, 7};
    json_t *j[4];
    const char *p[4];
    for (size_t i = 0; i < 4; i++) {
        p[i] = prompt_of(&w.items[i], &j[i]);
        cr_expect_eq(w.items[i].max_tokens, out[i]);
        cr_expect_eq(w.items[i].input_target, in[i]);
        size_t n = tokens(&w, p[i], TOK_ENCODE_ADD_SPECIAL);
        cr_expect_eq(w.items[i].input_tokens, n, "item %zu counted", i);
        cr_expect_eq(n, in[i], "item %zu: %zu tokens, asked %u", i, n, in[i]);
    }
    /* items 0 and 1 both start with blocks 7 and 8: the same text, two blocks long */
    size_t common = 0;
    while (p[0][common] && p[0][common] == p[1][common])
        common++;
    char *two = strndup(p[0], common);
    size_t shared_tokens = tokens(&w, two, 0);
    cr_expect_geq(shared_tokens, 2 * DATASET_BLOCK_TOKENS - 2, "shared %zu tokens", shared_tokens);
    cr_expect_leq(shared_tokens, 2 * DATASET_BLOCK_TOKENS + 3, "shared %zu tokens", shared_tokens);
    free(two);
    /* item 2 names other blocks: its text differs from the first word on */
    cr_expect_neq(strncmp(p[0], p[2], 3), 0, "%.20s / %.20s", p[0], p[2]);
    /* item 0 has room for 2 whole blocks of its 3 (1100 < 3 x 512): block 9 is not sent,
     * item 2's 700 tokens hold one whole block (5) */
    for (size_t i = 0; i < 4; i++)
        json_decref(j[i]);
    workload_free(&w);
}

Test(bench_dataset, trace_send_times_are_from_the_first_timestamp_over_the_trace_speed) {
    workload w;
    workload_opts o = opts(BENCH_EP_COMPLETIONS);
    build_ok(&w, TRACE, &o, false);
    cr_expect_str_eq(w.input_source, "approximate (words)");
    const double at1[] = {0, 0.5, 0.5, 3.0};
    for (size_t i = 0; i < 4; i++)
        cr_expect_float_eq(w.items[i].send_at_s, at1[i], 1e-9, "item %zu", i);
    workload_free(&w);

    o.trace_speed = 2;
    build_ok(&w, TRACE, &o, false);
    for (size_t i = 0; i < 4; i++)
        cr_expect_float_eq(w.items[i].send_at_s, at1[i] / 2, 1e-9, "item %zu", i);
    workload_free(&w);

    o.trace_speed = -1;
    tps_err e = {{0}};
    cr_expect_neq(build(&w, TRACE, &o, false, &e), 0);
    cr_expect(strstr(e.msg, "--trace-speed") != NULL, "%s", e.msg);
}

Test(bench_dataset, trace_errors_name_the_line) {
    static const parse_case cases[] = {
        {"{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1}\n{\"timestamp\": 1,",
         "f:2: column"},
        {"{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1}\n\n"
         "{\"timestamp\": 1, \"input_length\": 0, \"output_length\": 1}",
         "f:3: \"input_length\" must be"},
        {"{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1}\n"
         "{\"timestamp\": 1, \"input_length\": 5}",
         "f:2: \"output_length\" must be"},
        {"{\"timestamp\": 9, \"input_length\": 5, \"output_length\": 1}\n"
         "{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 1}",
         "f:2: \"timestamp\" 1 is before the previous line's 9"},
        {"{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1, \"hash_ids\": [1, -2]}",
         "f:1: \"hash_ids\"[1] must be"},
        {"{\"timestamp\": \"x\", \"input_length\": 5, \"output_length\": 1}",
         "f:1: \"timestamp\" must be"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        dataset d;
        expect_parse_error(&d, cases, k, false);
    }
}

Test(bench_dataset, a_trace_is_replayed_once_at_its_scaled_timestamps) {
    /* 0, 200, 200, 600 ms at speed 2: 0, 100, 100, 300 ms after the start */
    const char *trace = "{\"timestamp\": 50, \"input_length\": 5, \"output_length\": 2}\n"
                        "{\"timestamp\": 250, \"input_length\": 5, \"output_length\": 2}\n"
                        "{\"timestamp\": 250, \"input_length\": 5, \"output_length\": 2}\n"
                        "{\"timestamp\": 650, \"input_length\": 5, \"output_length\": 2}\n";
    workload w;
    workload_opts o = opts(BENCH_EP_COMPLETIONS);
    o.trace_speed = 2;
    build_ok(&w, trace, &o, false);
    fake_server srv = {.mode = FAKE_OK, .tokens = 2, .per_event = 1};
    cr_assert_eq(fake_start(&srv), 0);
    /* neither --requests nor --duration: the trace bounds the run */
    bench_config cfg = test_bench_config(srv.url, 8, 0);
    bench_run_out out;
    tps_err e = {{0}};
    cr_assert_eq(bench_run(&out, &cfg, &w, &e), 0, "%s", e.msg);
    fake_stop(&srv);
    cr_assert_eq(out.n, 4, "each item once");
    const uint64_t want_ms[] = {0, 100, 100, 300};
    for (size_t i = 0; i < 4; i++) {
        cr_expect_eq(out.recs[i].item, i);
        cr_expect_eq(out.recs[i].err, BENCH_OK, "request %zu", i);
        cr_expect_eq(out.recs[i].tl.t_sched - out.t_start_ns, want_ms[i] * TPS_NS_PER_MS,
                     "request %zu", i);
    }
    bench_run_free(&out);

    cfg.rate = 5;
    cr_expect_neq(bench_run(&out, &cfg, &w, &e), 0);
    cr_expect(strstr(e.msg, "--rate does not apply to a trace") != NULL, "%s", e.msg);
    workload_free(&w);
}

/* A dataset run with neither --requests nor --duration is one pass over
 * its entries (it used to be refused: "a run must end"). */
Test(datasets, cli_dataset_without_requests_sends_each_entry_once, .timeout = 60) {
    char *path = test_temp_file("{\"prompt\":\"a b c\",\"max_tokens\":2}\n"
                                "{\"prompt\":\"d e\",\"max_tokens\":2}\n"
                                "{\"prompt\":\"f\",\"max_tokens\":2}\n");
    fake_server s = {.mode = FAKE_OK, .tokens = 2, .gap_ms = 1};
    cr_assert_eq(fake_start(&s), 0);
    char cmd[512], *out = NULL;
    snprintf(cmd, sizeof cmd, "bench --url http://127.0.0.1:%d --dataset %s --no-progress", s.port,
             path);
    int rc = run_tps(cmd, true, &out);
    fake_stop(&s);
    cr_expect_eq(rc, 0, "%s", out);
    cr_expect(out && strstr(out, "3 sent, 3 completed"), "%s", out);
    free(out);
    unlink(path);
    free(path);
}

/* --trace-speed only means something for a timed trace: with another
 * dataset it is refused, not ignored. */
Test(datasets, trace_speed_on_a_dataset_without_times_is_refused) {
    const char *jsonl = "{\"prompt\":\"a\",\"max_tokens\":2}\n";
    workload_opts o = {.endpoint = BENCH_EP_COMPLETIONS, .trace_speed = 2, .temperature = -1};
    workload w = {0};
    tps_err e = {{0}};
    cr_expect_eq(workload_parse_dataset(&w, jsonl, strlen(jsonl), "d.jsonl", &o, &e), TPS_EINVAL);
    cr_expect(strstr(e.msg, "--trace-speed") && strstr(e.msg, "d.jsonl"), "%s", e.msg);
    workload_free(&w);
}
