/* The fake-server tests' workload (see bench_workload.h). */
#include "support/bench_workload.h"

#include <criterion/criterion.h>

#include "bench/workload/load.h"

void test_workload(workload *wl, uint32_t out_tokens, size_t n) {
    workload_opts o = {.endpoint = BENCH_EP_COMPLETIONS,
                       .n_items = n,
                       .seed = 3,
                       .ignore_eos = 1,
                       .include_usage = true,
                       .temperature = -1};
    tps_err e = {{0}};
    cr_assert_eq(load_dist_parse(&o.input_len, "8", &e), 0);
    o.output_len = (load_dist){.kind = LOAD_DIST_FIXED, .a = out_tokens};
    cr_assert_eq(workload_build(wl, &o, &e), 0, "%s", e.msg);
}

bench_config test_bench_config(const char *url, uint32_t concurrency, uint64_t requests) {
    return (bench_config){.base_url = url,
                          .concurrency = concurrency,
                          .requests = requests,
                          .timeout_s = 60,
                          .idle_timeout_s = 30,
                          .connect_timeout_s = 5};
}

void test_bench_run(bench_run_out *out, const bench_config *cfg, const workload *wl) {
    tps_err e = {{0}};
    cr_assert_eq(bench_run(out, cfg, wl, &e), 0, "%s", e.msg);
}

void test_result_build(bench_result *res, const bench_record *recs, size_t n,
                       const result_opts *o) {
    tps_err e = {{0}};
    cr_assert_eq(result_build(res, recs, n, o, &e), 0, "%s", e.msg);
}
