/* The Prometheus text reader (src/metrics/prom_read.h): what the server's
 * writer (src/server/write/prom_write.h) emits reads back sample for sample with its
 * family types; vLLM- and llama.cpp-style text as those servers write it
 * (labels, escapes, timestamps, untyped lines); malformed lines are errors
 * naming their line; the scrape keeps both spellings of our names. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "bench/result/scrape.h"
#include "metrics/prom_read.h"
#include "server/write/prom_write.h"

typedef struct got {
    char key[32][96];
    double v[32];
    prom_type t[32];
    int n;
} got;

static int collect(void *arg, const prom_sample_view *s) {
    got *g = arg;
    if (g->n == 32) return 0;
    snprintf(g->key[g->n], sizeof g->key[0], "%.*s{%.*s}", (int)s->name_len, s->name,
             (int)s->labels_len, s->labels ? s->labels : "");
    g->v[g->n] = s->value;
    g->t[g->n++] = s->type;
    return 0;
}

Test(prom_text, the_servers_own_output_reads_back) {
    sbuf b;
    sbuf_init(&b);
    prom_family(&b, "tps:generation_tokens_total", "counter", "Output tokens.");
    prom_sample(&b, "tps:generation_tokens_total", NULL, 1234);
    prom_family(&b, "tps:requests_total", "counter", "By reason.");
    prom_sample(&b, "tps:requests_total", "finish_reason=\"stop\"", 7);
    prom_family(&b, "tps:kv_cache_usage_ratio", "gauge", "KV use.");
    prom_sample(&b, "tps:kv_cache_usage_ratio", NULL, 0.125);
    hist *h;
    hist_config hc = HIST_CONFIG_LATENCY_NS;
    tps_err e = {{0}};
    cr_assert_eq(hist_create(&h, &hc, &e), 0);
    hist_record(h, 2000000);
    prom_histogram(&b, "tps:ttft_seconds", "TTFT.", h, 1e-9, prom_latency_bounds,
                   prom_n_latency_bounds);
    got g = {0};
    cr_assert_eq(prom_text_parse(b.p, b.len, collect, &g, &e), 0, "%s", e.msg);
    cr_assert_eq(g.n, 3 + (int)prom_n_latency_bounds + 3);
    cr_expect_str_eq(g.key[0], "tps:generation_tokens_total{}");
    cr_expect_eq(g.v[0], 1234);
    cr_expect_eq(g.t[0], PROM_COUNTER);
    cr_expect_str_eq(g.key[1], "tps:requests_total{finish_reason=\"stop\"}");
    cr_expect_eq(g.t[2], PROM_GAUGE);
    cr_expect_eq(g.v[2], 0.125);
    cr_expect_eq(g.t[3], PROM_HISTOGRAM, "a _bucket line belongs to its family");
    cr_expect(strstr(g.key[3 + prom_n_latency_bounds], "le=\"+Inf\"") != NULL, "%s",
              g.key[3 + prom_n_latency_bounds]);
    cr_expect_eq(g.v[3 + prom_n_latency_bounds], 1);
    cr_expect_eq(g.v[g.n - 1], 1, "_count");
    hist_free(h);
    sbuf_free(&b);
}

Test(prom_text, other_servers_text_with_labels_escapes_and_timestamps) {
    const char *t =
        "# HELP vllm:num_requests_running Number of requests.\r\n"
        "# TYPE vllm:num_requests_running gauge\r\n"
        "vllm:num_requests_running{model_name=\"a \\\"b\\\" \\\\ c\"} 3 1700000000000\r\n"
        "\n"
        "llamacpp:tokens_predicted_total 42\n"
        "sglang:x{a=\"1\",b=\"2\",} -Inf\n"
        "vllm:y NaN";
    got g = {0};
    tps_err e = {{0}};
    cr_assert_eq(prom_text_parse(t, strlen(t), collect, &g, &e), 0, "%s", e.msg);
    cr_assert_eq(g.n, 4);
    cr_expect_eq(g.v[0], 3);
    cr_expect_eq(g.t[0], PROM_GAUGE);
    cr_expect_eq(g.t[1], PROM_UNTYPED, "no TYPE line for it");
    cr_expect(isinf(g.v[2]) && g.v[2] < 0);
    cr_expect(isnan(g.v[3]), "no final newline is fine");
}

static void expect_error(const char *text, const char *what) {
    got g = {0};
    tps_err e = {{0}};
    cr_expect_neq(prom_text_parse(text, strlen(text), collect, &g, &e), 0, "%s", text);
    cr_expect(strstr(e.msg, what) != NULL, "'%s' for %s", e.msg, text);
}

Test(prom_text, malformed_lines_are_errors_naming_the_line) {
    expect_error("a 1\nb{x=\"1} 2\n", "line 2: malformed labels");
    expect_error("a 1\n\nb inf\n", "line 3: 'inf' is not a sample value");
    expect_error("a\n", "line 1: expected a value");
    expect_error("{x=\"1\"} 2\n", "line 1: expected a metric name");
    expect_error("a 1 2 3\n", "line 1: unexpected text");
    expect_error("a{x=\"\\q\"} 1\n", "malformed labels");
}

Test(prom_text, the_scrape_keeps_both_spellings_of_our_names_and_the_peers) {
    cr_expect(scrape_wanted("tps:requests_running", 20));
    cr_expect(scrape_wanted("tps_requests_running", 20));
    cr_expect(scrape_wanted("vllm:num_requests_running", 25));
    cr_expect(scrape_wanted("llamacpp:requests_processing", 28));
    cr_expect(scrape_wanted("sglang:num_running_reqs", 23));
    cr_expect(!scrape_wanted("process_cpu_seconds_total", 25));
    cr_expect(!scrape_wanted("tps:", 4));
}
