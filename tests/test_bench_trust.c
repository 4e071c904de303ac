/* The instrument trusts nothing it is sent (issue 48): a long stream of
 * large events does not grow the bench's memory and still counts exactly;
 * usage that cannot be (prompt tokens of 1e18, cached above the prompt)
 * trips the verdict's plausible check and is not used; a [DONE] alone is a
 * failed request; a 302 is filed as http_3xx, not http_5xx; a trace whose
 * send times would overflow is refused. Against the fake server of
 * test_bench_fake.h, through the client and the result as tps bench runs
 * them. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench/client/bench.h"
#include "bench/result/result.h"
#include "bench/result/verdict.h"
#include "support/bench_workload.h"
#include "support/test_support.h"
#include "test_bench_fake.h"

typedef struct trust_run {
    fake_server srv;
    workload wl;
    bench_config cfg;
    bench_run_out out;
    bench_result res;
} trust_run;

static void run(trust_run *t, uint64_t requests, uint32_t concurrency) {
    cr_assert_eq(fake_start(&t->srv), 0, "cannot start the fake server");
    t->cfg = test_bench_config(t->srv.url, concurrency, requests);
    t->cfg.keep_text = true;
    test_workload(&t->wl, (uint32_t)t->srv.tokens, 16);
    test_bench_run(&t->out, &t->cfg, &t->wl);
    fake_stop(&t->srv);
    test_result_build(&t->res, t->out.recs, t->out.n,
                      &(result_opts){.origin_ns = t->out.t_start_ns});
}

static void done(trust_run *t) {
    result_free(&t->res);
    bench_run_free(&t->out);
    workload_free(&t->wl);
}

static bool tripped(const bench_result *r, verdict_id id) {
    verdict v;
    verdict_judge(&v, r);
    return v.check[id].tripped;
}

static long max_rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024;
}

Test(bench_trust, a_long_stream_of_900_kb_events_keeps_memory_flat_and_counts_exactly,
     .timeout = 120) {
    /* 4 streams x 100 events of 900 KB: 360 MB through the client; kept
     * whole, each request's text would hold 90 MB at once */
    trust_run t = {.srv = {.mode = FAKE_OK, .tokens = 100, .event_bytes = 900 * 1024}};
    long before = max_rss_mb();
    run(&t, 4, 4);
    long grew = max_rss_mb() - before;
    cr_expect_eq(t.res.completed, 4, "%s",
                 t.out.n && t.out.recs[0].err_msg ? t.out.recs[0].err_msg : "");
    cr_expect_eq(t.res.output_tokens, 400, "usage counts every event's token");
    for (size_t i = 0; i < t.out.n; i++)
        cr_expect(t.out.recs[i].text_cut, "request %zu kept more than BENCH_TEXT_KEEP_MAX", i);
#if defined(__SANITIZE_ADDRESS__)
    (void)grew; /* ASan's quarantine holds freed memory: RSS says nothing here */
#else
    cr_log_info("the bench's peak memory grew by %ld MB", grew);
    cr_expect(grew < 256, "the bench's peak memory grew by %ld MB", grew);
#endif
    done(&t);
}

Test(bench_trust, usage_of_1e18_prompt_tokens_trips_the_verdict_and_is_not_used) {
    trust_run t = {.srv = {.mode = FAKE_OK, .tokens = 4, .usage_prompt = 1000000000000000000ll}};
    run(&t, 3, 1);
    cr_expect_eq(t.res.completed, 3);
    cr_expect(tripped(&t.res, VERDICT_PLAUSIBLE), "the plausible check did not trip");
    cr_expect(strstr(t.res.implausible_example, "usage.prompt_tokens 1000000000000000000"), "%s",
              t.res.implausible_example);
    cr_expect(t.res.input_tokens < 1000, "input tokens %llu: the implausible figure was used",
              (unsigned long long)t.res.input_tokens);
    done(&t);
}

Test(bench_trust, cached_tokens_above_the_prompt_trip_the_verdict_and_are_dropped) {
    trust_run t = {.srv = {.mode = FAKE_OK, .tokens = 4, .cached_tokens = 1000}};
    run(&t, 3, 1);
    cr_expect(tripped(&t.res, VERDICT_PLAUSIBLE));
    cr_expect(strstr(t.res.implausible_example, "cached_tokens 1000 above prompt_tokens 7"), "%s",
              t.res.implausible_example);
    cr_expect_eq(t.res.cached.requests, 0, "an impossible cached share is not reported");
    done(&t);
}

Test(bench_trust, plausible_usage_passes_the_check) {
    trust_run t = {.srv = {.mode = FAKE_OK, .tokens = 4, .cached_tokens = 5}};
    run(&t, 3, 1);
    cr_expect(!tripped(&t.res, VERDICT_PLAUSIBLE));
    cr_expect_eq(t.res.cached.requests, 3);
    done(&t);
}

Test(bench_trust, a_done_alone_is_a_failed_request) {
    trust_run t = {.srv = {.mode = FAKE_DONE_ONLY}};
    run(&t, 3, 1);
    cr_expect_eq(t.res.completed, 0);
    cr_expect_eq(t.res.errors[BENCH_ERR_NO_TOKENS], 3);
    cr_expect_str_eq(bench_err_name(BENCH_ERR_NO_TOKENS), "no_tokens");
    done(&t);
}

Test(bench_trust, a_redirect_is_filed_as_3xx) {
    trust_run t = {.srv = {.mode = FAKE_REDIRECT}};
    run(&t, 2, 1);
    cr_expect_eq(t.res.errors[BENCH_ERR_HTTP_3XX], 2);
    cr_expect_eq(t.res.errors[BENCH_ERR_HTTP_5XX], 0);
    cr_expect(t.res.error_example[BENCH_ERR_HTTP_3XX] &&
              strstr(t.res.error_example[BENCH_ERR_HTTP_3XX], "HTTP 302"));
    done(&t);
}

Test(bench_trust, a_trace_beyond_30_days_is_refused_naming_the_entry) {
    char *path = test_temp_file(
        "{\"timestamp\": 0, \"input_length\": 8, \"output_length\": 4, \"hash_ids\": [1]}\n"
        "{\"timestamp\": 9.3e12, \"input_length\": 8, \"output_length\": 4, \"hash_ids\": [2]}\n");
    char args[256];
    snprintf(args, sizeof args,
             "bench --url http://127.0.0.1:9 --dataset %s --requests 2 --no-progress", path);
    expect_tps(args, 1, "trace entry 2 is due");
    unlink(path);
    free(path);
}
