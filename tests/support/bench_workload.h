/* A small synthetic bench workload for tests against the fake server
 * (tests only): n completions of 8-word prompts asking for out_tokens
 * tokens each, seed 3. Asserts (Criterion) on failure. */
#ifndef TPS_TESTS_BENCH_WORKLOAD_H
#define TPS_TESTS_BENCH_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "bench/workload/workload.h"

void test_workload(workload *wl, uint32_t out_tokens, size_t n);

#endif
