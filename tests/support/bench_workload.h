/* A small synthetic bench workload for tests against the fake server
 * (tests only): n completions of 8-word prompts asking for out_tokens
 * tokens each, seed 3; and bench_run asserted to succeed. Asserts
 * (Criterion) on failure. */
#ifndef TPS_TESTS_BENCH_WORKLOAD_H
#define TPS_TESTS_BENCH_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "bench/client/bench.h"
#include "bench/result/result.h"
#include "bench/workload/workload.h"

void test_workload(workload *wl, uint32_t out_tokens, size_t n);
/* bench_run(out, cfg, wl), asserting that it succeeds. */
void test_bench_run(bench_run_out *out, const bench_config *cfg, const workload *wl);
/* result_build(res, recs[0..n), o), asserting that it succeeds. */
void test_result_build(bench_result *res, const bench_record *recs, size_t n, const result_opts *o);

#endif
