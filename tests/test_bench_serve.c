/* tps bench against a real `tps serve` on 127.0.0.1 (stories260K): the
 * bench's output tokens equal the server's usage and its /metrics counter
 * delta; TTFT <= E2E; each request's ITLs sum to its last token - first
 * token (E2E - TTFT less the short tail after the last token); the server's
 * timings come through; open loop above capacity shows latencies from the
 * schedule above those from the actual send; runs, capacity probes and
 * sweep points send prompts no earlier one sent. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/client/bench.h"
#include "bench/result/result.h"
#include "base/clock.h"
#include "support/serve_proc.h"
#include "support/bench_workload.h"
#include "support/test_support.h"

typedef serve_proc server_proc;

static void serve_start(server_proc *s) {
    REQUIRE_SHARED("models/stories260K.gguf");
    char *model = shared_path("models/stories260K.gguf");
    static const char *const admin[] = {"--enable-admin-routes", NULL}; /* /reset_prefix_cache */
    serve_proc_start(s, model, admin);
    free(model);
}

static void serve_stop(server_proc *s) {
    serve_proc_stop(s);
}

static void make_workload(workload *wl, uint32_t out, size_t n) {
    char *tok = shared_path("models/stories260K.gguf");
    workload_opts o = {.endpoint = BENCH_EP_COMPLETIONS,
                       .n_items = n,
                       .seed = 5,
                       .ignore_eos = 1,
                       .include_usage = true,
                       .temperature = -1,
                       .tokenizer_path = tok};
    tps_err e = {{0}};
    cr_assert_eq(load_dist_parse(&o.input_len, "uniform:8:32", &e), 0);
    o.output_len = (load_dist){.kind = LOAD_DIST_FIXED, .a = out};
    cr_assert_eq(workload_build(wl, &o, &e), 0, "%s", e.msg);
    free(tok);
}

Test(bench_serve, tokens_match_usage_and_metrics_and_latencies_add_up, .timeout = 120) {
    server_proc s;
    serve_start(&s);
    double before = serve_proc_metric(&s, "tps_generation_tokens_total");
    workload wl;
    make_workload(&wl, 24, 16);
    bench_config cfg = test_bench_config(s.url, 4, 16);
    cfg.keep_text = true;
    bench_run_out out;
    test_bench_run(&out, &cfg, &wl);
    double after = serve_proc_metric(&s, "tps_generation_tokens_total");
    serve_stop(&s);

    uint64_t tokens = 0, usage = 0;
    for (size_t i = 0; i < out.n; i++) {
        const bench_record *r = &out.recs[i];
        const timeline *t = &r->tl;
        cr_assert_eq(r->err, BENCH_OK, "request %zu: %s", i, r->err_msg);
        cr_expect_eq(t->source, TL_COUNT_USAGE);
        cr_expect_eq(t->output_tokens, 24, "ignore_eos: all max_tokens");
        cr_expect_eq(r->stream_tokens, r->usage_completion, "stream and usage agree");
        cr_expect(r->has_timings, "tps serve sends timings");
        tokens += t->output_tokens;
        usage += r->usage_completion;
        uint64_t ttft = timeline_ttft(t, TL_FROM_SCHEDULED),
                 e2e = timeline_e2e(t, TL_FROM_SCHEDULED);
        cr_expect(ttft <= e2e);
        uint64_t gaps[64], sum = 0;
        size_t n = timeline_itls(t, gaps, 64);
        cr_expect_eq(n, t->output_tokens - 1);
        for (size_t k = 0; k < n; k++)
            sum += gaps[k];
        cr_expect_eq(sum, timeline_last_token_ns(t) - timeline_first_token_ns(t));
        cr_expect(sum <= e2e - ttft && e2e - ttft - sum == t->t_end - timeline_last_token_ns(t),
                  "E2E - TTFT = sum of ITLs + the tail after the last token");
    }
    cr_expect_eq(tokens, usage);
    if (before >= 0 && after >= 0)
        cr_expect_eq((uint64_t)(after - before), tokens, "/metrics moved by %.0f, bench saw %llu",
                     after - before, (unsigned long long)tokens);
    else
        cr_expect_fail("/metrics has no tps_generation_tokens_total");
    bench_run_free(&out);
    workload_free(&wl);
}

Test(bench_serve, open_loop_above_capacity_shows_scheduled_latency_above_sent, .timeout = 120) {
    server_proc s;
    serve_start(&s);
    workload wl;
    make_workload(&wl, 32, 24);
    /* 200 req/s with at most 2 in flight is far above what 2 streams of 32 tokens sustain */
    bench_config cfg = test_bench_config(s.url, 2, 24);
    cfg.rate = 200;
    cfg.arrival = LOAD_ARRIVAL_POISSON;
    cfg.burstiness = 1;
    cfg.seed = 7;
    bench_run_out out;
    test_bench_run(&out, &cfg, &wl);
    serve_stop(&s);
    bench_result res;
    result_opts ro = {.origin_ns = out.t_start_ns};
    test_result_build(&res, out.recs, out.n, &ro);
    cr_expect_eq(res.completed, 24);
    cr_expect(hist_mean(res.h[RH_TTFT]) > hist_mean(res.h[RH_TTFT_SENT]));
    cr_expect(hist_percentile(res.h[RH_E2E], 90) > hist_percentile(res.h[RH_E2E_SENT], 90));
    cr_expect(hist_max(res.h[RH_SEND_LAG]) > 0, "sends were late");
    result_free(&res);
    bench_run_free(&out);
    workload_free(&wl);
}

/* ---- prompts unique across runs, probes and points (no run measures another's cache) ---- */

/* tokens.cached_input_fraction of a tps.bench.result object; -1 when absent. */
static double cached_fraction(const json_t *result) {
    const json_t *f = json_object_get(json_object_get(result, "tokens"), "cached_input_fraction");
    return json_is_number(f) ? json_number_value(f) : -1;
}

/* Runs `tps ARGS --json FILE` against s and returns the file's JSON (asserts). */
static json_t *tps_json(const server_proc *s, const char *args) {
    char file[] = "/tmp/tps-unique-XXXXXX", *out;
    int fd = mkstemp(file);
    cr_assert_geq(fd, 0);
    close(fd);
    char *tok = shared_path("models/stories260K.gguf"), cmd[2048];
    snprintf(cmd, sizeof cmd, "%s --url %s --tokenizer %s --json %s", args, s->url, tok, file);
    free(tok);
    int rc = run_tps(cmd, true, &out);
    cr_assert_eq(rc, 0, "tps %s: %s", cmd, out);
    free(out);
    json_error_t je;
    json_t *j = json_load_file(file, 0, &je);
    unlink(file);
    cr_assert_not_null(j, "%s: %s", file, je.text);
    return j;
}

static void post_reset(const server_proc *s) {
    char *body;
    cr_assert_eq(serve_proc_post(s, "/reset_prefix_cache", "{}", &body), 200);
    cr_assert(strstr(body, "\"prefix_cache\":true") != NULL, "reset answered '%s'", body);
    free(body);
}

#define RUN_ARGS "--input-len 64 --output-len 4 --quiet --no-progress"

/* Two runs in a row, a capacity search and a sweep against one server are
 * each served nothing from the prefix cache (<= 1%) without --prefix-len;
 * the same --seed twice is (the cache works, so the check can see it), and
 * POST /reset_prefix_cache empties it. */
Test(bench_serve, runs_probes_and_points_send_prompts_no_cache_has_seen, .timeout = 180) {
    server_proc s;
    serve_start(&s);
    for (int k = 0; k < 2; k++) {
        json_t *r = tps_json(&s, "bench --concurrency 2 --requests 8 " RUN_ARGS);
        cr_expect_leq(cached_fraction(r), 0.01, "run %d: %.3f cached", k + 1, cached_fraction(r));
        cr_expect_geq(cached_fraction(r), 0, "run %d: the server said nothing", k + 1);
        json_decref(r);
    }
    /* an E2E limit 32 tokens cannot meet: every probe fails, the search
     * brackets down 8, 4, 2, 1, 0.5 requests/s, one second each */
    json_t *cap = tps_json(&s, "bench --find-max-rate --slo e2e=1 --rate 8 --duration 1 "
                               "--timeout 20 --input-len 64 --output-len 32 --quiet --no-progress");
    json_t *probes = json_object_get(cap, "probes");
    size_t measured = 0;
    for (size_t i = 0; i < json_array_size(probes); i++) {
        json_t *p = json_array_get(probes, i), *f = json_object_get(p, "cached_fraction");
        if (!json_is_number(f)) continue; /* sent nothing in its second */
        measured++;
        cr_expect_leq(json_number_value(f), 0.01, "probe %zu: %.3f cached", i + 1,
                      json_number_value(f));
    }
    cr_expect_geq(measured, 3, "%zu probes had requests", measured);
    json_decref(cap);
    json_t *sw = tps_json(&s, "sweep --concurrency 1,2 --requests 6 " RUN_ARGS);
    json_t *points = json_object_get(sw, "points");
    cr_expect_eq(json_array_size(points), 2);
    for (size_t i = 0; i < json_array_size(points); i++) {
        double f = cached_fraction(json_object_get(json_array_get(points, i), "result"));
        cr_expect(f >= 0 && f <= 0.01, "point %zu: %.3f cached", i + 1, f);
    }
    json_decref(sw);
    /* the control: a run repeated with its seed is served from the cache */
    json_t *a = tps_json(&s, "bench --seed 77 --concurrency 1 --requests 6 " RUN_ARGS);
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(a, "config"), "seed")), 77);
    json_t *b = tps_json(&s, "bench --seed 77 --concurrency 1 --requests 6 " RUN_ARGS);
    cr_expect_gt(cached_fraction(b), 0.5, "the repeat was served %.3f from the cache",
                 cached_fraction(b));
    post_reset(&s);
    json_t *c = tps_json(&s, "bench --seed 77 --concurrency 1 --requests 6 " RUN_ARGS);
    cr_expect_leq(cached_fraction(c), 0.01, "after /reset_prefix_cache: %.3f cached",
                  cached_fraction(c));
    json_decref(a);
    json_decref(b);
    json_decref(c);
    serve_stop(&s);
}

/* Bytes of a split UTF-8 character still held when a choice ends go out in
 * one more text event at its end: it reports no new token, so the bench's
 * count of the stream must equal usage and the verdict must trust it. Byte
 * 0xE2 (<0xE2>, id 229 in stories260K's vocabulary) starts a three-byte
 * character; forced as every token, each stream ends with bytes held. */
static void expect_stream_equals_usage(const char *what, const char *args) {
    server_proc s;
    serve_start(&s);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "bench --concurrency 2 --requests 4 --input-len 16 --output-len 5 %s "
             "--per-request --quiet --no-progress",
             args);
    json_t *r = tps_json(&s, cmd);
    serve_stop(&s);
    json_t *reqs = json_object_get(r, "per_request");
    cr_assert_eq(json_array_size(reqs), 4);
    for (size_t i = 0; i < json_array_size(reqs); i++) {
        json_t *q = json_array_get(reqs, i);
        json_int_t usage = json_integer_value(
                       json_object_get(json_object_get(q, "usage"), "completion_tokens")),
                   stream = json_integer_value(json_object_get(q, "stream_tokens"));
        cr_expect_eq(usage, 5, "%s, request %zu: usage %lld", what, i, (long long)usage);
        cr_expect_eq(stream, usage, "%s, request %zu: the stream showed %lld tokens, usage %lld",
                     what, i, (long long)stream, (long long)usage);
        cr_expect_eq(json_array_size(json_object_get(q, "events")), 5,
                     "%s, request %zu: one arrival per token", what, i);
    }
    json_t *usage_check =
        json_object_get(json_object_get(json_object_get(r, "verdict"), "checks"), "usage");
    cr_expect(json_is_true(json_object_get(usage_check, "ok")), "%s: usage check: %s", what,
              json_string_value(json_object_get(usage_check, "evidence")));
    json_decref(r);
}

Test(bench_serve, held_bytes_flushed_at_the_end_are_no_extra_token, .timeout = 120) {
    expect_stream_equals_usage("held bytes", "--extra-body '{\"logit_bias\":{\"229\":100}}'");
}

/* With tools, text that may begin a call is held until it cannot; each held
 * token still arrives (an empty delta with its id), and what is still held
 * at the end comes with no id. '<' (<0x3C>, id 63) may begin <tool_call>. */
Test(bench_serve, a_tool_stream_holding_text_shows_every_token, .timeout = 120) {
    expect_stream_equals_usage(
        "tools", "--endpoint chat --extra-body '{\"logit_bias\":{\"63\":100},\"tools\":[{"
                 "\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}'");
}

/* A run of two seconds reads this machine's CPU counters (Linux has
 * /proc/stat): the share the hypervisor stole and the share other
 * processes (the server among them) used, over the run and per bin. */
Test(bench_serve, a_run_says_how_much_of_the_machine_it_had, .timeout = 120) {
    server_proc s;
    serve_start(&s);
    json_t *r = tps_json(&s, "bench --concurrency 2 --duration 2 --input-len 16 --output-len 8 "
                             "--quiet --no-progress");
    serve_stop(&s);
    json_t *host = json_object_get(r, "host");
    double steal = json_number_value(json_object_get(host, "steal")),
           others = json_number_value(json_object_get(host, "others_cpu"));
    cr_expect(json_is_object(host) && steal >= 0 && steal <= 1 && others > 0 && others <= 1,
              "host steal %.3f, others %.3f", steal, others);
    json_t *series = json_object_get(r, "series"), *st = json_object_get(series, "steal");
    cr_expect_eq(json_array_size(st), json_array_size(json_object_get(series, "output_tokens")),
                 "a steal share for every bin of the time series");
    cr_expect(json_is_number(json_array_get(st, 0)), "the first second's share is known");
    json_decref(r);
}
