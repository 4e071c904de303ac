/* The bench's parsers: SSE framing on every split point of a recorded
 * stream, OpenAI event reading, length distributions and arrival processes,
 * and the JSONL dataset reader with its error messages. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/load.h"
#include "bench/oai.h"
#include "bench/sse.h"
#include "bench/workload.h"

/* ---- SSE ----------------------------------------------------------------------------- */

/* Recorded events, flattened as "type|data" lines joined by '\x1e'. */
typedef struct sink {
    char buf[8192];
    size_t len;
    int n;
} sink;

static int collect(void *ctx, const sse_event *ev) {
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
    sse_parser p;
    tps_err e = {{0}};
    cr_assert_eq(sse_parser_init(&p, 0, &e), 0);
    memset(out, 0, sizeof *out);
    cr_assert_eq(sse_parser_feed(&p, s, cut, collect, out, &e), 0, "%s", e.msg);
    cr_assert_eq(sse_parser_feed(&p, s + cut, n - cut, collect, out, &e), 0, "%s", e.msg);
    cr_expect(!sse_parser_pending(&p), "nothing left over at a split of %zu", cut);
    sse_parser_free(&p);
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
            sse_parser p;
            tps_err e = {{0}};
            sink s = {0};
            sse_parser_init(&p, 0, &e);
            sse_parser_feed(&p, STREAM, a, collect, &s, &e);
            sse_parser_feed(&p, STREAM + a, b - a, collect, &s, &e);
            sse_parser_feed(&p, STREAM + b, n - b, collect, &s, &e);
            cr_assert_str_eq(s.buf, EXPECT, "splits at %zu and %zu", a, b);
            sse_parser_free(&p);
        }
    sse_parser p;
    tps_err e = {{0}};
    sink s = {0};
    sse_parser_init(&p, 0, &e);
    for (size_t i = 0; i < n; i++)
        sse_parser_feed(&p, STREAM + i, 1, collect, &s, &e);
    cr_expect_str_eq(s.buf, EXPECT);
    sse_parser_free(&p);
}

Test(bench_sse, bare_cr_line_ends_and_several_events_in_one_read) {
    const char cr[] = "data: a\r\rdata: b\r\r: c\rdata: d\r\r";
    sink s;
    feed_split(cr, sizeof cr - 1, 0, &s);
    cr_expect_str_eq(s.buf, "|a\x1e|b\x1e|d\x1e");
    cr_expect_eq(s.n, 3);
}

Test(bench_sse, a_stream_cut_mid_event_is_pending) {
    sse_parser p;
    tps_err e = {{0}};
    sink s = {0};
    sse_parser_init(&p, 0, &e);
    sse_parser_feed(&p, "data: {\"x\":1}\n", 14, collect, &s, &e);
    cr_expect_eq(s.n, 0);
    cr_expect(sse_parser_pending(&p));
    sse_parser_reset(&p);
    cr_expect(!sse_parser_pending(&p));
    sse_parser_free(&p);
}

Test(bench_sse, an_event_over_the_limit_is_an_error_not_a_memory_sink) {
    sse_parser p;
    tps_err e = {{0}};
    sink s = {0};
    sse_parser_init(&p, 4096, &e);
    char *big = malloc(10000);
    memset(big, 'x', 10000);
    memcpy(big, "data: ", 6);
    cr_expect_eq(sse_parser_feed(&p, big, 10000, collect, &s, &e), TPS_ERANGE);
    cr_expect(strstr(e.msg, "larger than 4096") != NULL, "%s", e.msg);
    free(big);
    sse_parser_free(&p);
}

Test(bench_sse, callback_can_stop_the_feed) {
    sse_parser p;
    tps_err e = {{0}};
    sse_parser_init(&p, 0, &e);
    int calls = 0;
    int stop(void *ctx, const sse_event *ev);
    cr_expect_eq(sse_parser_feed(&p, "data: 1\n\ndata: 2\n\n", 18, stop, &calls, &e), 7);
    cr_expect_eq(calls, 1);
    sse_parser_free(&p);
}

int stop(void *ctx, const sse_event *ev) {
    (void)ev;
    ++*(int *)ctx;
    return 7;
}

/* ---- OpenAI events ----------------------------------------------------------------------- */

static oai_chunk parse(const char *s, const char *event) {
    oai_chunk c;
    tps_err e = {{0}};
    cr_assert_eq(bench_oai_parse(&c, s, strlen(s), event, &e), 0, "%s: %s", s, e.msg);
    return c;
}

Test(bench_oai, completion_chat_usage_timings_done_and_errors) {
    oai_chunk c =
        parse("{\"choices\":[{\"index\":0,\"text\":\" hi\",\"finish_reason\":null}]}", "");
    cr_expect_eq(c.tokens, 1);
    cr_expect(!c.from_ids && !c.finished && c.text_len == 3);
    bench_oai_release(&c);
    c = parse("{\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}", "");
    cr_expect_eq(c.tokens, 0, "a role chunk carries no token");
    bench_oai_release(&c);
    c = parse("{\"choices\":[{\"delta\":{\"content\":\"ab\"},\"finish_reason\":\"stop\"}]}", "");
    cr_expect(c.tokens == 1 && c.finished);
    bench_oai_release(&c);
    c = parse("{\"choices\":[{\"text\":\"abc\"}],\"tokens\":[5,6,7]}", "");
    cr_expect(c.tokens == 3 && c.from_ids);
    bench_oai_release(&c);
    c = parse("{\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":31},"
              "\"timings\":{\"queue_ms\":1,\"prefill_ms\":2.5,\"decode_ms\":30,\"ttft_ms\":4,"
              "\"prompt_tokens\":9,\"completion_tokens\":31,\"preemptions\":2}}",
              "");
    cr_expect(c.has_usage && c.prompt_tokens == 9 && c.completion_tokens == 31 && c.tokens == 0);
    cr_expect(c.has_timings && c.timings.prefill_ms == 2.5 && c.timings.preemptions == 2);
    bench_oai_release(&c);
    c = parse("[DONE]", "");
    cr_expect(c.done);
    c = parse("{\"error\":{\"message\":\"queue full\"}}", "");
    cr_expect(c.error);
    cr_expect_str_eq(c.error_msg, "queue full");
    bench_oai_release(&c);
    c = parse("overloaded", "error");
    cr_expect(c.error);
    bench_oai_release(&c);
}

Test(bench_oai, malformed_json_names_the_column) {
    oai_chunk c;
    tps_err e = {{0}};
    cr_expect_eq(bench_oai_parse(&c, "{\"choices\":[", 12, "", &e), TPS_EINVAL);
    cr_expect(strstr(e.msg, "column") != NULL, "%s", e.msg);
    cr_expect_eq(bench_oai_parse(&c, "[1,2]", 5, "", &e), TPS_EINVAL);
}

/* ---- load ---------------------------------------------------------------------------------- */

Test(bench_load, length_distributions_parse_and_stay_in_range) {
    load_dist d;
    tps_err e = {{0}};
    load_rng r;
    load_rng_seed(&r, 1);
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
    load_rng r;
    load_rng_seed(&r, 42);
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
    load_rng a, b;
    load_rng_seed(&a, 9);
    load_rng_seed(&b, 9);
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
