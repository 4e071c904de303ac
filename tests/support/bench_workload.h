/* A small synthetic bench workload for tests against the fake server
 * (tests only): n completions of 8-word prompts asking for out_tokens
 * tokens each, seed 3; a closed-loop config whose timeouts no such test
 * comes near; and bench_run asserted to succeed. Asserts (Criterion) on
 * failure. */
#ifndef TPS_TESTS_BENCH_WORKLOAD_H
#define TPS_TESTS_BENCH_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "bench/client/bench.h"
#include "bench/result/result.h"
#include "bench/workload/workload.h"

void test_workload(workload *wl, uint32_t out_tokens, size_t n);
/* A closed loop of concurrency streams against url (borrowed), stopping
 * after requests (0: no limit), a request allowed 60 s in all, 30 s idle
 * and 5 s to connect: room for a real model on a busy machine, so only a
 * broken client or server meets them. A test about a timeout sets its own. */
bench_config test_bench_config(const char *url, uint32_t concurrency, uint64_t requests);
/* bench_run(out, cfg, wl), asserting that it succeeds. */
void test_bench_run(bench_run_out *out, const bench_config *cfg, const workload *wl);
/* result_build(res, recs[0..n), o), asserting that it succeeds. */
void test_result_build(bench_result *res, const bench_record *recs, size_t n, const result_opts *o);

#endif
