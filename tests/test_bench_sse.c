/* The bench's parsers: SSE framing on every split point of a recorded
 * stream, OpenAI event reading (the in-place scanner held to the jansson
 * reader on every event we have), length distributions and arrival processes,
 * and the JSONL dataset reader with its error messages. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/workload/load.h"
#include "bench/client/chunk.h"
#include "bench/client/sse_read.h"
#include "bench/workload/workload.h"

/* ---- SSE ----------------------------------------------------------------------------- */

/* Recorded events, flattened as "type|data" lines joined by '\x1e'. */
typedef struct sink {
    char buf[8192];
    size_t len;
    int n;
} sink;

static int collect(void *ctx, const sse_read_event *ev) {
    sink *s = ctx;
    s->len += (size_t)snprintf(s->buf + s->len, sizeof s->buf - s->len, "%s|%.*s\x1e", ev->event,
                               (int)ev->data_len, ev->data);
    s->n++;
    return 0;
}

/* A stream with every feature: comment, LF and CRLF ends, multi-line data,
 * a field without a space, an event type, id/retry, an empty data field
 * event, a data-less event (not dispatched), [DONE]. */
static const char STREAM[] =
    ": keep-alive\n\n"
    "data: {\"choices\":[{\"text\":\"Once\"}]}\n\n"
    "data: {\"choices\":[{\"text\":\" upon\"}]}\r\n\r\n"
    "data:{\"a\":1}\r\n"
    "data: second line\r\n\r\n"
    "id: 7\nretry: 100\nevent: error\ndata: {\"error\":{\"message\":\"boom\"}}\n\n"
    "event: ping\n\n"
    "data\n\n"
    "data: [DONE]\n\n";

static const char EXPECT[] = "|{\"choices\":[{\"text\":\"Once\"}]}\x1e"
                             "|{\"choices\":[{\"text\":\" upon\"}]}\x1e"
                             "|{\"a\":1}\nsecond line\x1e"
                             "error|{\"error\":{\"message\":\"boom\"}}\x1e"
                             "|\x1e"
                             "|[DONE]\x1e";

static void feed_split(const char *s, size_t n, size_t cut, sink *out) {
    sse_reader p;
    tps_err e = {{0}};
    cr_assert_eq(sse_reader_init(&p, 0, &e), 0);
    memset(out, 0, sizeof *out);
    cr_assert_eq(sse_reader_feed(&p, s, cut, collect, out, &e), 0, "%s", e.msg);
    cr_assert_eq(sse_reader_feed(&p, s + cut, n - cut, collect, out, &e), 0, "%s", e.msg);
    cr_expect(!sse_reader_pending(&p), "nothing left over at a split of %zu", cut);
    sse_reader_free(&p);
}

Test(bench_sse, every_split_point_of_a_recorded_stream_gives_the_same_events) {
    const size_t n = sizeof STREAM - 1;
    for (size_t cut = 0; cut <= n; cut++) {
        sink s;
        feed_split(STREAM, n, cut, &s);
        cr_assert_str_eq(s.buf, EXPECT, "split at byte %zu", cut);
    }
}

Test(bench_sse, every_pair_of_split_points_and_byte_by_byte) {
    const size_t n = sizeof STREAM - 1;
    for (size_t a = 0; a <= n; a += 3)
        for (size_t b = a; b <= n; b += 5) {
            sse_reader p;
            tps_err e = {{0}};
            sink s = {0};
            sse_reader_init(&p, 0, &e);
            sse_reader_feed(&p, STREAM, a, collect, &s, &e);
            sse_reader_feed(&p, STREAM + a, b - a, collect, &s, &e);
            sse_reader_feed(&p, STREAM + b, n - b, collect, &s, &e);
            cr_assert_str_eq(s.buf, EXPECT, "splits at %zu and %zu", a, b);
            sse_reader_free(&p);
        }
    sse_reader p;
    tps_err e = {{0}};
    sink s = {0};
    sse_reader_init(&p, 0, &e);
    for (size_t i = 0; i < n; i++)
        sse_reader_feed(&p, STREAM + i, 1, collect, &s, &e);
    cr_expect_str_eq(s.buf, EXPECT);
    sse_reader_free(&p);
}

Test(bench_sse, bare_cr_line_ends_and_several_events_in_one_read) {
    const char cr[] = "data: a\r\rdata: b\r\r: c\rdata: d\r\r";
    sink s;
    feed_split(cr, sizeof cr - 1, 0, &s);
    cr_expect_str_eq(s.buf, "|a\x1e|b\x1e|d\x1e");
    cr_expect_eq(s.n, 3);
}

Test(bench_sse, a_stream_cut_mid_event_is_pending) {
    sse_reader p;
    tps_err e = {{0}};
    sink s = {0};
    sse_reader_init(&p, 0, &e);
    sse_reader_feed(&p, "data: {\"x\":1}\n", 14, collect, &s, &e);
    cr_expect_eq(s.n, 0);
    cr_expect(sse_reader_pending(&p));
    sse_reader_reset(&p);
    cr_expect(!sse_reader_pending(&p));
    sse_reader_free(&p);
}

Test(bench_sse, an_event_over_the_limit_is_an_error_not_a_memory_sink) {
    sse_reader p;
    tps_err e = {{0}};
    sink s = {0};
    sse_reader_init(&p, 4096, &e);
    char *big = malloc(10000);
    memset(big, 'x', 10000);
    memcpy(big, "data: ", 6);
    cr_expect_eq(sse_reader_feed(&p, big, 10000, collect, &s, &e), TPS_ERANGE);
    cr_expect(strstr(e.msg, "larger than 4096") != NULL, "%s", e.msg);
    free(big);
    sse_reader_free(&p);
}

/* An event callback that counts its calls in ctx and stops the feed with 7. */
static int stop(void *ctx, const sse_read_event *ev) {
    (void)ev;
    ++*(int *)ctx;
    return 7;
}

Test(bench_sse, callback_can_stop_the_feed) {
    sse_reader p;
    tps_err e = {{0}};
    sse_reader_init(&p, 0, &e);
    int calls = 0;
    cr_expect_eq(sse_reader_feed(&p, "data: 1\n\ndata: 2\n\n", 18, stop, &calls, &e), 7);
    cr_expect_eq(calls, 1);
    sse_reader_free(&p);
}

/* ---- OpenAI events ----------------------------------------------------------------------- */

static bench_chunk parse(const char *s, const char *event) {
    bench_chunk c;
    tps_err e = {{0}};
    cr_assert_eq(bench_chunk_parse(&c, BENCH_DIALECT_OPENAI, s, strlen(s), event, &e), 0, "%s: %s",
                 s, e.msg);
    return c;
}

Test(bench_chunk, completion_chat_usage_timings_done_and_errors) {
    bench_chunk c =
        parse("{\"choices\":[{\"index\":0,\"text\":\" hi\",\"finish_reason\":null}]}", "");
    cr_expect_eq(c.tokens, 1);
    cr_expect(!c.from_ids && !c.finished && c.text_len == 3);
    bench_chunk_release(&c);
    c = parse("{\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}", "");
    cr_expect_eq(c.tokens, 0, "a role chunk carries no token");
    cr_expect(!c.empty_text, "a role chunk is not a held-back token");
    bench_chunk_release(&c);
    c = parse("{\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":null}]}", "");
    cr_expect(c.tokens == 0 && c.empty_text, "llama.cpp's event for held-back bytes");
    bench_chunk_release(&c);
    c = parse("{\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}]}", "");
    cr_expect(!c.empty_text, "the finishing event is not a token by itself");
    bench_chunk_release(&c);
    c = parse("{\"choices\":[{\"delta\":{\"content\":\"ab\"},\"finish_reason\":\"stop\"}]}", "");
    cr_expect(c.tokens == 1 && c.finished);
    bench_chunk_release(&c);
    c = parse("{\"choices\":[{\"text\":\"abc\"}],\"tokens\":[5,6,7]}", "");
    cr_expect(c.tokens == 3 && c.from_ids);
    bench_chunk_release(&c);
    c = parse("{\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":31},"
              "\"timings\":{\"queue_ms\":1,\"prefill_ms\":2.5,\"decode_ms\":30,\"ttft_ms\":4,"
              "\"prompt_tokens\":9,\"completion_tokens\":31,\"preemptions\":2}}",
              "");
    cr_expect(c.has_usage && c.prompt_tokens == 9 && c.completion_tokens == 31 && c.tokens == 0);
    cr_expect(c.has_timings && c.timings.prefill_ms == 2.5 && c.timings.preemptions == 2);
    bench_chunk_release(&c);
    /* a NUL byte the model emitted (a byte vocabulary's token 0x00) is text */
    c = parse("{\"choices\":[{\"index\":0,\"text\":\"a\\u0000\",\"finish_reason\":null}]}", "");
    cr_expect(c.tokens == 1 && c.text_len == 2 && c.text[1] == 0);
    bench_chunk_release(&c);
    c = parse("[DONE]", "");
    cr_expect(c.done);
    c = parse("{\"error\":{\"message\":\"queue full\"}}", "");
    cr_expect(c.error);
    cr_expect_str_eq(c.error_msg, "queue full");
    bench_chunk_release(&c);
    c = parse("overloaded", "error");
    cr_expect(c.error);
    bench_chunk_release(&c);
}

Test(bench_chunk, malformed_json_names_the_column) {
    bench_chunk c;
    tps_err e = {{0}};
    cr_expect_eq(bench_chunk_parse(&c, BENCH_DIALECT_OPENAI, "{\"choices\":[", 12, "", &e),
                 TPS_EINVAL);
    cr_expect(strstr(e.msg, "column") != NULL, "%s", e.msg);
    cr_expect_eq(bench_chunk_parse(&c, BENCH_DIALECT_OPENAI, "[1,2]", 5, "", &e), TPS_EINVAL);
}

/* ---- the in-place scanner against jansson -------------------------------------------------- */

/* Reads one event with both readers: when the scanner takes it, jansson
 * must accept it too and say the same; bench_chunk_parse must always say what
 * jansson says. Returns whether the scanner took it. */
static bool both(const char *data, size_t n, const char *event, const char *what) {
    bench_chunk j, s, p;
    tps_err ej = {{0}}, ep = {{0}};
    const char *field = NULL;
    int rj = bench_chunk_parse_json(&j, data, n, event, &ej);
    bool took = bench_chunk_scan(&s, data, n, event);
    if (took) {
        cr_expect_eq(rj, 0, "%s: the scanner took an event jansson rejects (%s): %.*s", what,
                     ej.msg, (int)n, data);
        cr_expect_null(s.root);
        if (rj == 0)
            cr_expect(bench_chunk_same(&j, &s, &field), "%s: '%s' differs for %.*s", what, field,
                      (int)n, data);
    }
    int rp = bench_chunk_parse(&p, BENCH_DIALECT_OPENAI, data, n, event, &ep);
    cr_expect_eq(rp, rj, "%s: %.*s", what, (int)n, data);
    if (rp == 0 && rj == 0)
        cr_expect(bench_chunk_same(&j, &p, &field),
                  "%s: bench_chunk_parse differs in '%s' for %.*s", what, field, (int)n, data);
    if (rj == 0) bench_chunk_release(&j);
    if (rp == 0) bench_chunk_release(&p);
    return took;
}

typedef struct both_ctx {
    const char *what;
    int events, taken;
} both_ctx;

static int check_event(void *ctx, const sse_read_event *ev) {
    both_ctx *b = ctx;
    b->events++;
    b->taken += both(ev->data, ev->data_len, ev->event, b->what);
    return 0;
}

static both_ctx check_stream(const char *bytes, size_t n, const char *what) {
    sse_reader p;
    tps_err e = {{0}};
    both_ctx b = {.what = what};
    cr_assert_eq(sse_reader_init(&p, 0, &e), 0);
    sse_reader_feed(&p, bytes, n, check_event, &b, &e);
    sse_reader_free(&p);
    return b;
}

Test(bench_chunk_scan, agrees_with_jansson_on_the_recorded_stream_and_the_fuzz_corpus) {
    both_ctx b = check_stream(STREAM, sizeof STREAM - 1, "STREAM");
    cr_expect_eq(b.events, 6);
    cr_expect_geq(b.taken, 3, "the scanner read the plain events itself");
    const char *dir = TPS_SOURCE_DIR "/fuzz/corpus/fuzz_sse_read";
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s", dir);
    int files = 0, events = 0, taken = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (de->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        FILE *f = fopen(path, "rb");
        cr_assert_not_null(f, "%s", path);
        static char buf[1 << 16];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        /* the harness's first byte picks the split step; the rest is the stream */
        if (n) b = check_stream(buf + 1, n - 1, path);
        files++, events += b.events, taken += b.taken;
    }
    closedir(d);
    cr_expect_geq(files, 4);
    cr_expect_geq(events, 12);
    cr_expect_geq(taken, events / 2, "%d of %d events scanned", taken, events);
}

/* Hand-written events: S the scanner must read itself, J it must leave to
 * jansson (which may accept or reject); both must agree either way. */
typedef struct tricky {
    const char *data;
    size_t len; /* 0: strlen */
    const char *event;
    bool scanned;
} tricky;

#define S(d)                                                                                       \
    { d, 0, "", true }
#define J(d)                                                                                       \
    { d, 0, "", false }

static const tricky TRICKY[] = {
    /* escapes and unicode in the text */
    S("{\"choices\":[{\"text\":\"a\\\"b\\\\c\\/d\\n\\t\\r\\b\\f\"}]}"),
    S("{\"choices\":[{\"text\":\"\\u00e9\\u4E2D\\ud83d\\ude00 \\u0041\"}]}"),
    S("{\"choices\":[{\"delta\":{\"content\":\"caf\xc3\xa9 \xf0\x9f\x98\x80 \xe4\xb8\xad\"}}]}"),
    J("{\"choices\":[{\"text\":\"\\ud83d\"}]}"),
    J("{\"choices\":[{\"text\":\"\\ud83dx\"}]}"),
    J("{\"choices\":[{\"text\":\"\\ud83d\\u0041\"}]}"),
    J("{\"choices\":[{\"text\":\"\\ude00\"}]}"),
    J("{\"choices\":[{\"text\":\"\\u0000\"}]}"),
    J("{\"choices\":[{\"text\":\"\\u12\"}]}"),
    J("{\"choices\":[{\"text\":\"\\x41\"}]}"),
    J("{\"choices\":[{\"text\":\"\xff\"}]}"),
    J("{\"choices\":[{\"text\":\"\xc0\xaf\"}]}"),
    J("{\"choices\":[{\"text\":\"\xed\xa0\x80\"}]}"),
    J("{\"choices\":[{\"text\":\"\xe4\xb8\"}]}"),
    J("{\"choices\":[{\"text\":\"\xf4\x90\x80\x80\"}]}"),
    J("{\"choices\":[{\"text\":\"a\tb\"}]}"),
    {"{\"choices\":[{\"text\":\"a\0b\"}]}", 26, "", false},
    /* nested objects the reader skips, keys in other orders, whitespace */
    S("{\"id\":\"x\",\"choices\":[{\"index\":0,\"logprobs\":{\"content\":[{\"token\":\"a\","
      "\"logprob\":-0.1,\"bytes\":[97],\"top_logprobs\":[{\"token\":\"b\",\"logprob\":-1.5e-3}]}]},"
      "\"delta\":{\"content\":\"hi\",\"tool_calls\":[{\"function\":{\"arguments\":\"{\\\"a\\\":1}"
      "\"}}]},"
      "\"finish_reason\":null}],\"created\":1712345678,\"system_fingerprint\":null}"),
    S("{\"usage\":{\"completion_tokens\":4,\"prompt_tokens\":2},\"choices\":[{\"finish_reason\":"
      "\"stop\",\"delta\":{\"role\":\"assistant\",\"content\":\"x\"}}],\"id\":\"a\"}"),
    S(" \r\n\t{ \"choices\" : [ { \"text\" : \"a\" , \"finish_reason\" : null } ] , "
      "\"usage\" : null }\r\n "),
    S("{\"choices\":[{\"text\":\"a\"}],\"usage\":null,\"timings\":null}"),
    S("{}"),
    S("{\"choices\":[]}"),
    S("{\"choices\":{\"text\":\"a\"}}"),
    S("{\"choices\":[1,{\"text\":\"a\"}]}"),
    S("{\"choices\":[{\"text\":\"b\"},{\"text\":\"a\"}]}"),
    S("{\"choices\":[{\"text\":5,\"finish_reason\":false}]}"),
    S("{\"choices\":[{\"text\":\"\",\"delta\":{\"content\":\"x\"}}]}"),
    S("{\"choices\":[{\"delta\":\"x\",\"message\":{\"content\":\"m\"}}]}"),
    S("{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":\"full reply\"},"
      "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2,"
      "\"prompt_tokens_details\":{\"cached_tokens\":3}}}"),
    S("{\"choices\":[{\"delta\":{\"reasoning_content\":\"think\",\"content\":\"\"}}]}"),
    /* empty text: held-back bytes, role chunks, finishing events */
    S("{\"choices\":[{\"text\":\"\",\"finish_reason\":null}]}"),
    S("{\"choices\":[{\"delta\":{\"content\":\"\"}}]}"),
    S("{\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}"),
    S("{\"choices\":[{\"delta\":{\"role\":null,\"content\":\"\"}}]}"),
    S("{\"choices\":[{\"message\":{\"content\":\"\"},\"finish_reason\":\"stop\"}]}"),
    J("{\"choices\":[{\"text\":\"\",\"text\":\"a\"}]}"),
    J("{\"choices\":[{\"text\":\"a\",\"text\":\"\"}]}"),
    S("{\"choices\":[{\"delta\":{\"reasoning_content\":\"think\",\"content\":\"say\"}}]}"),
    S("{\"choices\":[{\"delta\":{\"content\":null,\"reasoning_content\":\"t\\n\"}}]}"),
    /* token ids at each level */
    S("{\"choices\":[{\"text\":\"ab\",\"token_ids\":[1,2]}]}"),
    S("{\"token_ids\":[1],\"tokens\":[1,2,3],\"choices\":[{\"text\":\"a\"}]}"),
    S("{\"token_ids\":null,\"tokens\":[1,2,3],\"choices\":[{\"text\":\"a\"}]}"),
    S("{\"tokens\":\"x\",\"choices\":[{\"delta\":{\"content\":\"a\",\"token_ids\":[7,8]},"
      "\"tokens\":[1]}]}"),
    S("{\"choices\":[{\"text\":\"\",\"token_ids\":[]}]}"),
    S("{\"choices\":[{\"text\":\"a\",\"tokens\":[[1],{\"a\":2},\"x\",null,true]}]}"),
    /* usage and timings edge values */
    S("{\"choices\":[],\"usage\":{\"prompt_tokens\":-1,\"completion_tokens\":3.0}}"),
    S("{\"choices\":[],\"usage\":{\"prompt_tokens\":2.5,\"completion_tokens\":-0}}"),
    S("{\"choices\":[],\"usage\":{\"completion_tokens\":9223372036854775807,"
      "\"prompt_tokens_details\":{\"cached_tokens\":null}}}"),
    S("{\"usage\":{\"completion_tokens\":1,\"prompt_tokens_details\":[1]},\"timings\":{\"cache_n\":"
      "5}}"),
    S("{\"usage\":{\"completion_tokens\":1,\"prompt_tokens_details\":{\"cached_tokens\":2}},"
      "\"timings\":{\"cache_n\":5,\"prompt_ms\":1.25,\"predicted_ms\":3e2,\"prompt_n\":4,"
      "\"predicted_n\":5E+1,\"queue_ms\":-0.0,\"ttft_ms\":1e-400,\"preemptions\":\"x\"}}"),
    S("{\"timings\":{\"queue_ms\":1,\"prefill_ms\":2.5,\"prompt_ms\":9,\"decode_ms\":30,"
      "\"ttft_ms\":4,\"prompt_tokens\":9,\"completion_tokens\":31,\"preemptions\":2,"
      "\"cache_n\":-3}}"),
    J("{\"choices\":[],\"usage\":{\"completion_tokens\":9223372036854775808}}"),
    J("{\"choices\":[],\"usage\":{\"completion_tokens\":-9223372036854775809}}"),
    J("{\"timings\":{\"decode_ms\":1e400}}"),
    J("{\"x\":-1e400}"),
    /* duplicates, errors, escaped keys, depth, long text */
    J("{\"a\":1,\"a\":2}"),
    J("{\"x\":{\"k\":1,\"k\":2},\"choices\":[{\"text\":\"a\"}]}"),
    J("{\"choices\":[{\"text\":\"a\"}],\"choices\":[]}"),
    S("{\"x\":{\"k\":1},\"y\":{\"k\":2},\"k\":3,\"choices\":[{\"k\":{\"k\":{}}}]}"),
    J("{\"error\":{\"message\":\"boom\"}}"),
    J("{\"error\":\"boom\",\"choices\":[{\"text\":\"a\"}]}"),
    S("{\"error\":null,\"choices\":[{\"text\":\"a\"}]}"),
    {"{\"message\":\"bad\"}", 0, "error", false},
    {"overloaded", 0, "error", false},
    S("{\"choices\":[{\"text\":\"a\"}]}"), /* with event "" below, and a custom one */
    {"{\"choices\":[{\"text\":\"a\"}]}", 0, "message", true},
    J("{\"ch\\u006fices\":[{\"text\":\"a\"}]}"),
    J("{\"x\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
      "]]]]]]]]]]]]],"
      "\"choices\":[{\"text\":\"a\"}]}"),
    /* malformed */
    J(""),
    J("   "),
    J("[DONE] "),
    J("[1]"),
    J("\"s\""),
    J("{\"choices\":["),
    J("{}x"),
    J("{} {}"),
    J("{\"a\":01}"),
    J("{\"a\":1.}"),
    J("{\"a\":-}"),
    J("{\"a\":.5}"),
    J("{\"a\":1e}"),
    J("{\"a\":+1}"),
    J("{\"a\":tru}"),
    J("{\"a\":nullx}"),
    J("{\"a\":true1}"),
    J("{,}"),
    J("{\"a\":1,}"),
    J("{\"a\" 1}"),
    J("{\"a\":[1,]}"),
    J("{\"a\":[1 2]}"),
    J("{\"a\":\"x}"),
    J("{\"a\":NaN}"),
    J("{'a':1}"),
    J("\xef\xbb\xbf{}"),
    {"{\"a\":1}\x00", 8, "", false},
};

Test(bench_chunk_scan, agrees_with_jansson_on_tricky_events) {
    for (size_t i = 0; i < sizeof TRICKY / sizeof TRICKY[0]; i++) {
        const tricky *t = &TRICKY[i];
        size_t n = t->len ? t->len : strlen(t->data);
        char what[32];
        snprintf(what, sizeof what, "TRICKY[%zu]", i);
        bool took = both(t->data, n, t->event, what);
        cr_expect_eq(took, t->scanned, "%s: the scanner %s %.*s", what, took ? "took" : "declined",
                     (int)n, t->data);
    }
    /* the NUL after {"a":1} is past the length: only len bytes are read */
    cr_expect(both("{\"a\":1}\x00", 7, "", "prefix"));
}

Test(bench_chunk_scan, unescaped_text_that_overflows_the_inline_buffer_goes_to_jansson) {
    char ev[2048];
    int n = snprintf(ev, sizeof ev, "{\"choices\":[{\"text\":\"");
    for (int i = 0; i < 300; i++)
        n += snprintf(ev + n, sizeof ev - (size_t)n, "\\n");
    n += snprintf(ev + n, sizeof ev - (size_t)n, "\"}]}");
    cr_expect(!both(ev, (size_t)n, "", "300 escapes"), "needs 300 bytes of text_buf");
    ev[21 + 2 * 255] = '"'; /* 255 escapes: fits with its NUL */
    memcpy(ev + 22 + 2 * 255, "}]}", 4);
    cr_expect(both(ev, strlen(ev), "", "255 escapes"));
    /* plain text of any length is borrowed, never copied */
    n = snprintf(ev, sizeof ev, "{\"choices\":[{\"text\":\"%01500d\"}]}", 7);
    cr_expect(both(ev, (size_t)n, "", "long plain text"));
}

/* ---- load ---------------------------------------------------------------------------------- */

Test(bench_load, length_distributions_parse_and_stay_in_range) {
    load_dist d;
    tps_err e = {{0}};
    tps_rng r;
    tps_rng_seed(&r, 1);
    cr_assert_eq(load_dist_parse(&d, "uniform:10:20", &e), 0);
    for (int i = 0; i < 1000; i++) {
        uint32_t v = load_dist_sample(&d, &r);
        cr_assert(v >= 10 && v <= 20, "%u", v);
    }
    cr_assert_eq(load_dist_parse(&d, "normal:100:10", &e), 0);
    double sum = 0;
    for (int i = 0; i < 10000; i++)
        sum += load_dist_sample(&d, &r);
    cr_expect(fabs(sum / 10000 - 100) < 1, "mean %.2f", sum / 10000);
    cr_assert_eq(load_dist_parse(&d, "64", &e), 0);
    cr_expect_eq(load_dist_sample(&d, &r), 64);
    const char *bad[] = {"0", "-3", "x", "uniform:5", "uniform:9:2", "normal:0:1", "64:3", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_expect_neq(load_dist_parse(&d, bad[i], &e), 0, "'%s' accepted", bad[i]);
}

Test(bench_load, arrival_gaps_have_mean_one_over_rate) {
    tps_rng r;
    tps_rng_seed(&r, 42);
    const load_arrival kinds[] = {LOAD_ARRIVAL_POISSON, LOAD_ARRIVAL_GAMMA, LOAD_ARRIVAL_CONSTANT};
    const double burst[] = {1, 0.5, 1};
    for (int k = 0; k < 3; k++) {
        double sum = 0, sq = 0;
        const int n = 40000;
        for (int i = 0; i < n; i++) {
            double g = (double)load_next_gap_ns(kinds[k], 50, burst[k], &r) / 1e9;
            sum += g;
            sq += g * g;
        }
        double mean = sum / n, cv = sqrt(sq / n - mean * mean) / mean;
        cr_expect(fabs(mean - 0.02) < 0.02 * 0.03, "%s mean %.5f", load_arrival_name(kinds[k]),
                  mean);
        /* coefficient of variation: poisson 1, gamma shape 0.5 -> sqrt(2), constant 0 */
        double want = k == 0 ? 1 : k == 1 ? sqrt(2) : 0;
        cr_expect(fabs(cv - want) < 0.05, "%s cv %.3f", load_arrival_name(kinds[k]), cv);
    }
}

Test(bench_load, same_seed_same_schedule) {
    tps_rng a, b;
    tps_rng_seed(&a, 9);
    tps_rng_seed(&b, 9);
    for (int i = 0; i < 100; i++)
        cr_assert_eq(load_next_gap_ns(LOAD_ARRIVAL_POISSON, 3, 1, &a),
                     load_next_gap_ns(LOAD_ARRIVAL_POISSON, 3, 1, &b));
}

/* ---- dataset ------------------------------------------------------------------------------- */

static workload_opts dopts(bench_endpoint ep) {
    return (workload_opts){.endpoint = ep,
                           .seed = 1,
                           .ignore_eos = -1,
                           .include_usage = true,
                           .temperature = -1,
                           .model = "m"};
}

Test(bench_dataset, prompts_and_messages_become_request_bodies) {
    const char data[] = "{\"prompt\":\"Once upon\",\"max_tokens\":5}\n"
                        "\n"
                        "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}\r\n";
    workload w = {0};
    workload_opts o = dopts(BENCH_EP_CHAT);
    tps_err e = {{0}};
    cr_assert_eq(workload_parse_dataset(&w, data, sizeof data - 1, "d.jsonl", &o, &e), 0, "%s",
                 e.msg);
    cr_assert_eq(w.n, 2);
    cr_expect_eq(w.items[0].max_tokens, 5);
    cr_expect_eq(w.items[1].max_tokens, 128, "default when the line has none");
    cr_expect(
        strstr(w.items[0].body, "\"messages\":[{\"role\":\"user\",\"content\":\"Once upon\"}]"),
        "%s", w.items[0].body);
    cr_expect(strstr(w.items[0].body, "\"stream\":true"));
    cr_expect(strstr(w.items[0].body, "\"include_usage\":true"));
    cr_expect(strstr(w.items[0].body, "ignore_eos") == NULL, "datasets keep EOS by default");
    workload_free(&w);
}

Test(bench_dataset, errors_name_the_file_and_line) {
    workload w = {0};
    workload_opts o = dopts(BENCH_EP_COMPLETIONS);
    tps_err e = {{0}};
    const char bad_json[] = "{\"prompt\":\"a\"}\n{\"prompt\": }\n";
    cr_expect_eq(workload_parse_dataset(&w, bad_json, sizeof bad_json - 1, "d.jsonl", &o, &e),
                 TPS_EINVAL);
    cr_expect(strstr(e.msg, "d.jsonl:2: column") != NULL, "%s", e.msg);
    cr_expect_eq(w.n, 0, "nothing kept on error");
    const char msgs[] = "{\"messages\":[]}\n";
    cr_expect_eq(workload_parse_dataset(&w, msgs, sizeof msgs - 1, "d.jsonl", &o, &e), TPS_EINVAL);
    cr_expect(strstr(e.msg, "--endpoint chat") != NULL, "%s", e.msg);
    const char mt[] = "{\"prompt\":\"a\",\"max_tokens\":0}\n";
    cr_expect_eq(workload_parse_dataset(&w, mt, sizeof mt - 1, "d.jsonl", &o, &e), TPS_EINVAL);
    cr_expect_eq(workload_parse_dataset(&w, "\n\n", 2, "d.jsonl", &o, &e), TPS_EINVAL);
    cr_expect(strstr(e.msg, "no requests") != NULL);
    workload_free(&w);
}

Test(bench_dataset, synthetic_prompts_hit_the_token_target_with_the_tokenizer) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", TPS_SHARED_DIR);
    FILE *fp = fopen(path, "rb");
    if (!fp) cr_skip_test("../shared/models/stories260K.gguf not found");
    fclose(fp);
    workload w;
    workload_opts o = dopts(BENCH_EP_COMPLETIONS);
    o.tokenizer_path = path;
    o.n_items = 20;
    tps_err e = {{0}};
    cr_assert_eq(load_dist_parse(&o.input_len, "uniform:16:200", &e), 0);
    cr_assert_eq(load_dist_parse(&o.output_len, "32", &e), 0);
    cr_assert_eq(workload_build(&w, &o, &e), 0, "%s", e.msg);
    cr_expect_str_eq(w.input_source, "tokenizer");
    size_t exact = 0;
    for (size_t i = 0; i < w.n; i++) {
        exact += w.items[i].input_tokens == w.items[i].input_target;
        cr_expect(abs((int)w.items[i].input_tokens - (int)w.items[i].input_target) <= 2,
                  "item %zu: %u tokens for a target of %u", i, w.items[i].input_tokens,
                  w.items[i].input_target);
        cr_expect(strstr(w.items[i].body, "\"ignore_eos\":true"));
    }
    cr_expect(exact >= w.n * 8 / 10, "%zu of %zu exact", exact, w.n);
    /* unique prefixes: no two prompts share their first 12 bytes */
    for (size_t i = 0; i < w.n; i++)
        for (size_t j = i + 1; j < w.n; j++)
            cr_expect(strncmp(strstr(w.items[i].body, "\"prompt\""),
                              strstr(w.items[j].body, "\"prompt\""), 14) != 0);
    workload_free(&w);
}
