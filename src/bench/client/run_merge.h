/* The outputs of several event loops of one run, merged into the output one
 * loop would have given on the same timeline: the loops share one clock and
 * one origin, so their request records simply join, in request order (seq),
 * and every figure built from records afterwards (histograms, windows, time
 * series: result_build) is exactly the one-loop figure. CPU time, bytes and
 * events add up; the run stops when its last loop does.
 *
 * Results of separate runs (other processes or machines, each with its own
 * origin) merge as results instead: result_merge. Not here: running loops
 * (client_pool.c). */
#ifndef TPS_BENCH_RUN_MERGE_H
#define TPS_BENCH_RUN_MERGE_H

#include <stddef.h>

#include "bench/client/bench.h"
#include "base/error.h"

/* *out = parts[0..n) merged (n >= 1, all with the same t_start_ns). The
 * records move: the parts are left empty. On failure (out of memory) the
 * parts keep theirs. */
int bench_run_merge(bench_run_out *out, bench_run_out *parts, size_t n, tps_err *e);

#endif
