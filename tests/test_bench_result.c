/* Bench results: windows, percentiles and goodput on hand-built request
 * records with the answers worked out here; the JSON file round-trips; a
 * merge of split runs equals the one run; and `tps bench` / `tps bench
 * merge` as a user runs them against a local fake server. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/client/bench.h"
#include "bench/report/report.h"
#include "bench/result/result.h"
#include "base/clock.h"
#include "support/bench_workload.h"
#include "support/test_support.h"
#include "support/test_data.h"
#include "test_bench_fake.h"

#define MS(x) ((uint64_t)(x)*TPS_NS_PER_MS)

typedef struct ev {
    uint64_t t, k;
} ev;

static void rec(bench_record *r, uint64_t sent, uint64_t prompt, const ev *e, size_t n,
                uint64_t end, bench_errkind err) {
    tps_err x = {{0}};
    memset(r, 0, sizeof *r);
    cr_assert_eq(timeline_init(&r->tl, 4, &x), 0);
    timeline_start(&r->tl, MS(sent), MS(sent));
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(timeline_add(&r->tl, MS(e[i].t), (uint32_t)e[i].k, &x), 0);
    timeline_finish(&r->tl, MS(end), err == BENCH_OK);
    timeline_set_prompt_tokens(&r->tl, prompt);
    timeline_set_count_source(&r->tl, TL_COUNT_USAGE);
    r->err = err;
    if (err) r->err_msg = strdup("connection reset");
    r->has_usage = err == BENCH_OK;
    r->usage_completion = r->tl.output_tokens;
    r->stream_tokens = r->tl.output_tokens;
}

/* A: sent 1000 ms, tokens at 1100, 1150, 1200 (x2), last byte 1210, 10 prompt tokens.
 * B: sent 1050, tokens at 1300, 1400, last byte 1400, 5 prompt tokens.
 * C: sent 1100, one token at 1250, reset at 1260, 3 prompt tokens. */
static void three(bench_record r[3]) {
    const ev a[] = {{1100, 1}, {1150, 1}, {1200, 2}}, b[] = {{1300, 1}, {1400, 1}},
             c[] = {{1250, 1}};
    rec(&r[0], 1000, 10, a, 3, 1210, BENCH_OK);
    rec(&r[1], 1050, 5, b, 2, 1400, BENCH_OK);
    rec(&r[2], 1100, 3, c, 1, 1260, BENCH_ERR_RESET);
}

static void free3(bench_record *r, size_t n) {
    for (size_t i = 0; i < n; i++)
        bench_record_free(&r[i]);
}

static result_opts opts(void) {
    return (result_opts){
        .origin_ns = MS(900), .target_concurrency = 2, .slo = {.ttft_ns = MS(200)}};
}

Test(bench_result, windows_percentiles_and_goodput_on_hand_built_requests) {
    bench_record r[3];
    three(r);
    bench_result res;
    result_opts o = opts();
    test_result_build(&res, r, 3, &o);
    cr_expect_eq(res.completed, 2);
    cr_expect_eq(res.failed, 1);
    cr_expect_eq(res.errors[BENCH_ERR_RESET], 1);
    cr_expect(fabs(result_error_rate(&res) - 1.0 / 3) < 1e-12);
    /* run (1000, 1400]: 0.4 s; output 4 + 2 + 1 (C's delivered token counts) = 7 */
    cr_expect_eq(res.run.tps.w.t0, MS(100), "offsets from the origin at 900 ms");
    cr_expect_eq(res.run.tps.w.t1, MS(500));
    cr_expect_eq(res.run.tps.output_tokens, 7);
    cr_expect(fabs(res.run.tps.output_tps - 17.5) < 1e-9);
    /* input: A 10 at 1100, B 5 at 1300, C 3 at 1250 (it had a token) = 18 -> 45/s */
    cr_expect_eq(res.run.tps.input_tokens, 18);
    cr_expect(fabs(res.run.tps.total_tps - 62.5) < 1e-9);
    cr_expect(fabs(res.run.tps.request_rate - 5.0) < 1e-9);
    /* goodput with TTFT <= 200 ms: A (100 ms) good, B (250 ms) not: 1 / 0.4 s */
    cr_expect_eq(res.run.good.good, 1);
    cr_expect(fabs(res.run.good.goodput - 2.5) < 1e-9);
    cr_expect(fabs(res.run.good.good_fraction - 0.5) < 1e-12);
    /* steady, auto, 2 in flight: from B's send (1050) to the first end after the last send
     * (C sent 1100; A ends 1210 first): (1050, 1210] = 0.16 s with A's 4 tokens */
    cr_assert(res.steady.valid, "%s", res.steady.why);
    cr_expect_eq(res.steady.tps.w.t0, MS(150));
    cr_expect_eq(res.steady.tps.w.t1, MS(310));
    cr_expect_eq(res.steady.tps.output_tokens, 4);
    cr_expect(fabs(res.steady.tps.output_tps - 25.0) < 1e-9);
    /* distributions over completed requests: TTFT 100, 250; ITL 50, 50, 0, 100;
     * TPOT (1210-1100)/3 = 36.667 and 100; E2E 210, 350 */
    cr_expect_eq(hist_count(res.h[RH_TTFT]), 2);
    cr_expect_eq(hist_min(res.h[RH_TTFT]), MS(100));
    cr_expect_eq(hist_max(res.h[RH_TTFT]), MS(250));
    cr_expect_eq(hist_count(res.h[RH_ITL]), 4);
    cr_expect_eq(hist_min(res.h[RH_ITL]), 0);
    cr_expect_eq(hist_sum(res.h[RH_ITL]), MS(200));
    cr_expect_eq(hist_min(res.h[RH_TPOT]), 36666667);
    cr_expect_eq(hist_max(res.h[RH_E2E]), MS(350));
    cr_expect_eq(hist_count(res.h[RH_SEND_LAG]), 3, "every request");
    cr_expect_eq(hist_max(res.h[RH_SEND_LAG]), 0, "closed loop: no lag");
    cr_expect_eq(res.multi_token_events, 1);
    cr_expect_eq(res.by_source[TL_COUNT_USAGE], 2);
    /* series: 1 s bins over a 0.4 s run: one short bin holding all 7 tokens */
    cr_expect_eq(res.nbins, 1);
    cr_expect_eq(res.series_out[0], 7);
    result_free(&res);
    free3(r, 3);
}

/* A reader waits between arrivals: A's tokens arrive two to an event (held
 * until they make whole UTF-8 characters), B's events arrive two to a read
 * at 1160 and 1200. Half the per-token gaps are zero, so ITL p50 is 0
 * while a reader waits 40 ms between updates; the result keeps the gap per
 * arrival beside the ITL, and the summary says why the two differ. */
Test(bench_result, tokens_arriving_together_keep_the_gap_per_arrival_beside_the_itl) {
    bench_record r[2];
    const ev a[] = {{1100, 2}, {1140, 2}, {1180, 2}, {1220, 2}},
             b[] = {{1120, 1}, {1160, 1}, {1160, 1}, {1200, 1}, {1200, 1}, {1240, 1}};
    rec(&r[0], 1000, 10, a, 4, 1230, BENCH_OK);
    rec(&r[1], 1010, 10, b, 6, 1250, BENCH_OK);
    bench_result res;
    result_opts o = opts();
    tps_err e = {{0}};
    test_result_build(&res, r, 2, &o);
    /* gaps: A 0, then 3 x (40, 0); B 40, 0, 40, 0, 40: 12 gaps, 6 zero */
    cr_expect_eq(hist_count(res.h[RH_ITL]), 12);
    cr_expect_eq(hist_percentile(res.h[RH_ITL], 50), 0, "half the per-token gaps are zero");
    cr_expect_eq(hist_count(res.h[RH_ARRIVAL_GAP]), 6, "3 gaps between the 4 arrivals of each");
    cr_expect_eq(hist_min(res.h[RH_ARRIVAL_GAP]), MS(40));
    cr_expect_eq(res.token_arrivals, 8);
    cr_expect_eq(res.multi_token_arrivals, 6, "A's 4 events and B's 2 double reads");
    cr_expect_eq(res.multi_token_events, 4);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    report_print(f, &res);
    fclose(f);
    cr_expect(strstr(text, "gap per arrival (of tokens)") != NULL, "%s", text);
    cr_expect(strstr(text, "6 of 8 token arrivals (75.0%) brought more than one token") != NULL,
              "%s", text);
    cr_expect(strstr(text, "has p50 40.") != NULL, "%s", text);
    free(text);
    /* the gaps per arrival survive the file */
    json_t *j = result_to_json(&res);
    bench_result back;
    cr_assert_eq(result_from_json(&back, j, &e), 0, "%s", e.msg);
    cr_expect_eq(hist_count(back.h[RH_ARRIVAL_GAP]), 6);
    cr_expect_eq(back.multi_token_arrivals, 6);
    /* and a file from before they were kept still reads, with none */
    json_object_del(json_object_get(j, "histograms"), "arrival_gap");
    result_free(&back);
    cr_assert_eq(result_from_json(&back, j, &e), 0, "%s", e.msg);
    cr_expect_eq(hist_count(back.h[RH_ARRIVAL_GAP]), 0);
    result_free(&back);
    json_decref(j);
    result_free(&res);
    free3(r, 2);
}

Test(bench_result, trimming_by_requests_and_a_user_window) {
    bench_record r[3];
    three(r);
    bench_result res;
    result_opts o = opts();
    o.warmup_reqs = 1; /* after the 1st end (1210) */
    o.has_user = true;
    o.user_t0_s = 0.1, o.user_t1_s = 0.3; /* (1100, 1300] */
    test_result_build(&res, r, 3, &o);
    cr_assert(res.steady.valid, "%s", res.steady.why);
    cr_expect_eq(res.steady.tps.w.t0, MS(310));
    cr_expect_eq(res.steady.tps.w.t1, MS(500));
    cr_expect_eq(res.steady.tps.output_tokens, 3, "C at 1250, B at 1300 and 1400");
    cr_assert(res.user.valid);
    cr_expect_eq(res.user.tps.output_tokens, 5, "1150, 1200 x2, 1250, 1300");
    result_free(&res);
    o.warmup_reqs = 2, o.cooldown_reqs = 1;
    test_result_build(&res, r, 3, &o);
    cr_expect(!res.steady.valid);
    cr_expect(strstr(res.steady.why, "only 3 ended") != NULL, "%s", res.steady.why);
    result_free(&res);
    free3(r, 3);
}

static void expect_same_hist(const hist *a, const hist *b, const char *name) {
    hist_summary sa, sb;
    hist_summarize(a, &sa);
    hist_summarize(b, &sb);
    cr_expect(sa.count == sb.count && sa.min == sb.min && sa.max == sb.max && sa.sum == sb.sum &&
                  sa.underflow == sb.underflow && sa.overflow == sb.overflow &&
                  sa.config.lowest == sb.config.lowest && sa.config.highest == sb.config.highest &&
                  sa.config.sig_digits == sb.config.sig_digits,
              "%s: summaries differ", name);
    size_t n = hist_nonempty(a);
    cr_assert_eq(n, hist_nonempty(b), "%s", name);
    uint32_t ia[64], ib[64];
    uint64_t ca[64], cb[64];
    hist_export(a, ia, ca, 64);
    hist_export(b, ib, cb, 64);
    cr_expect(!memcmp(ia, ib, n * sizeof *ia) && !memcmp(ca, cb, n * sizeof *ca), "%s", name);
}

Test(bench_result, json_round_trip_is_lossless) {
    bench_record r[3];
    three(r);
    bench_result a, b;
    result_opts o = opts();
    o.per_request = true;
    o.config = json_pack("{s:s}", "url", "http://x");
    tps_err e = {{0}};
    test_result_build(&a, r, 3, &o);
    json_t *ja = result_to_json(&a);
    char *text = json_dumps(ja, 0);
    json_t *parsed = json_loads(text, 0, NULL);
    cr_assert_eq(result_from_json(&b, parsed, &e), 0, "%s", e.msg);
    json_t *jb = result_to_json(&b);
    cr_expect(json_equal(ja, jb), "the file read back writes the same file");
    for (int i = 0; i < RH_COUNT; i++)
        expect_same_hist(a.h[i], b.h[i], result_hist_name(i));
    json_t *pr = json_object_get(ja, "per_request");
    cr_expect_eq(json_array_size(pr), 3);
    json_t *ev0 = json_object_get(json_array_get(pr, 0), "events");
    cr_expect_eq(json_integer_value(json_array_get(json_array_get(ev0, 2), 0)), MS(300),
                 "token arrival offsets from the origin");
    cr_expect_not_null(json_object_get(json_object_get(ja, "histograms"), "ttft"));
    cr_expect_str_eq(json_string_value(json_object_get(ja, "schema")), BENCH_RESULT_SCHEMA);
    /* a wrong version is refused with a message */
    json_object_set_new(parsed, "version", json_integer(99));
    bench_result c;
    cr_expect_eq(result_from_json(&c, parsed, &e), TPS_EUNSUP);
    cr_expect(strstr(e.msg, "version 99") != NULL, "%s", e.msg);
    free(text);
    json_decref(ja);
    json_decref(jb);
    json_decref(parsed);
    json_decref(o.config);
    result_free(&a);
    result_free(&b);
    free3(r, 3);
}

Test(bench_result, merge_of_split_runs_equals_the_one_run) {
    bench_record r[3];
    three(r);
    result_opts o = opts();
    o.target_concurrency = 1;
    tps_err e = {{0}};
    bench_result all, p1, p2;
    test_result_build(&all, r, 3, &o);
    test_result_build(&p1, r, 1, &o);
    test_result_build(&p2, r + 1, 2, &o);
    /* through files, as `tps bench merge` does */
    json_t *j2 = result_to_json(&p2);
    bench_result p2b;
    cr_assert_eq(result_from_json(&p2b, j2, &e), 0, "%s", e.msg);
    cr_assert_eq(result_merge(&p1, &p2b, &e), 0, "%s", e.msg);
    for (int i = 0; i < RH_COUNT; i++)
        expect_same_hist(p1.h[i], all.h[i], result_hist_name(i));
    cr_expect_eq(p1.runs, 2);
    cr_expect_eq(p1.requests, all.requests);
    cr_expect_eq(p1.completed, all.completed);
    cr_expect_eq(p1.failed, all.failed);
    cr_expect_eq(p1.errors[BENCH_ERR_RESET], 1);
    cr_expect_eq(p1.output_tokens, all.output_tokens);
    cr_expect_eq(p1.input_tokens, all.input_tokens);
    cr_expect_eq(p1.run.tps.output_tokens, all.run.tps.output_tokens);
    cr_expect_eq(hist_percentile(p1.h[RH_E2E], 50), hist_percentile(all.h[RH_E2E], 50));
    /* both runs have the same wall-clock origin: series add bin by bin */
    cr_expect_eq(p1.series_out[0], all.series_out[0]);
    json_decref(j2);
    result_free(&all);
    result_free(&p1);
    result_free(&p2);
    result_free(&p2b);
    free3(r, 3);
}

Test(bench_result, csv_has_one_header_and_one_row) {
    bench_record r[3];
    three(r);
    bench_result res;
    result_opts o = opts();
    tps_err e = {{0}};
    test_result_build(&res, r, 3, &o);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(result_write_csv(&res, f, &e), 0);
    fclose(f);
    char *nl = strchr(buf, '\n');
    cr_assert(nl && strchr(nl + 1, '\n') && !strchr(nl + 1, '\n')[1]);
    int commas_h = 0, commas_v = 0;
    for (char *p = buf; p < nl; p++)
        commas_h += *p == ',';
    for (char *p = nl + 1; *p; p++)
        commas_v += *p == ',';
    cr_expect_eq(commas_h, commas_v);
    cr_expect(strncmp(nl + 1, "3,2,1,0,", 8) == 0, "%s", nl + 1);
    free(buf);
    result_free(&res);
    free3(r, 3);
}

/* ---- the CLI against a fake server ------------------------------------------------------- */

Test(bench_cli, bench_writes_json_and_csv_and_merge_adds_runs, .timeout = 60) {
    fake_server s = {.mode = FAKE_OK, .tokens = 5, .gap_ms = 2};
    cr_assert_eq(fake_start(&s), 0);
    char dir[] = "/tmp/tps_bench_cliXXXXXX";
    cr_assert(mkdtemp(dir));
    char args[2048], *out;
    snprintf(args, sizeof args,
             "bench --url http://127.0.0.1:%d --requests 6 --concurrency 2 --output-len 5 "
             "--input-len 8 --json %s/a.json --csv %s/a.csv --per-request --slo ttft=1000",
             s.port, dir, dir);
    int rc = run_tps(args, true, &out);
    cr_expect_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "throughput (per second over the named window") != NULL, "%s", out);
    cr_expect(strstr(out, "TTFT from scheduled start") != NULL);
    cr_expect(strstr(out, "steady") != NULL);
    free(out);
    json_t *j = test_json_load("%s/a.json", dir);
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(j, "requests"), "completed")),
                 6);
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(j, "tokens"), "output")), 30);
    cr_expect_eq(json_array_size(json_object_get(j, "per_request")), 6);
    json_decref(j);
    snprintf(args, sizeof args, "bench merge %s/a.json %s/a.json --json %s/m.json --quiet", dir,
             dir, dir);
    expect_tps(args, 0, NULL);
    j = test_json_load("%s/m.json", dir);
    cr_expect_eq(json_integer_value(json_object_get(j, "runs")), 2);
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(j, "requests"), "sent")), 12);
    json_t *ttft = json_object_get(json_object_get(j, "histograms"), "ttft");
    cr_expect_eq(json_integer_value(json_object_get(ttft, "count")), 12);
    json_decref(j);
    fake_stop(&s);
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    cr_expect_eq(system(args), 0);
}

Test(bench_cli, errors_above_the_limit_exit_1_and_bad_flags_exit_2, .timeout = 60) {
    fake_server s = {.mode = FAKE_HTTP500};
    cr_assert_eq(fake_start(&s), 0);
    char args[512], *out;
    snprintf(args, sizeof args, "bench --url http://127.0.0.1:%d --requests 3 --input-len 4",
             s.port);
    cr_expect_eq(run_tps(args, true, &out), 1, "%s", out);
    cr_expect(strstr(out, "http_5xx") != NULL, "%s", out);
    cr_expect(strstr(out, "above --max-error-rate") != NULL, "%s", out);
    free(out);
    snprintf(args, sizeof args,
             "bench --url http://127.0.0.1:%d --requests 3 --input-len 4 --max-error-rate 1",
             s.port);
    cr_expect_eq(run_tps(args, true, &out), 1, "no request completed: still a failure");
    free(out);
    fake_stop(&s);
    expect_tps("bench --requests 1 --bogus", 2, "unknown option '--bogus'");
    expect_tps("bench --url http://127.0.0.1:9", 2, "--requests N and/or --duration S");
    expect_tps("bench --requests 1 --input-len uniform:9:1", 2, NULL);
    cr_expect_eq(run_tps("bench --help", false, &out), 0);
    cr_expect(strstr(out, "TPOT") && strstr(out, "steady") && strstr(out, "window"));
    free(out);
}
