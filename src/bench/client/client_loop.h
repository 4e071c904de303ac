/* The bench client's parts, inside the bench module: one event loop
 * (client.c) and what the loops of one run share (client_pool.c starts
 * them, one thread each, and merges what they recorded, run_merge.h).
 *
 * Requests are spread over the loops so that together they send what one
 * loop would: a closed loop's requests are numbered from one shared counter
 * (request k sends workload item k mod n); an open loop's arrival times are
 * the one schedule of the seed, arrival k going to loop k mod loops; a trace
 * likewise. Each loop holds its share of the connections. A multi-turn run
 * has one loop. Not here: metrics (result.h), the public API (bench.h). */
#ifndef TPS_BENCH_CLIENT_LOOP_H
#define TPS_BENCH_CLIENT_LOOP_H

#include <stdatomic.h>
#include <stdint.h>

#include "bench/client/bench.h"
#include "base/error.h"

typedef struct bench_shared {
    const bench_config *cfg;
    const workload *wl;
    uint32_t n_loops;
    uint64_t planned;          /* requests at most; 0: bounded by time (or conversations) */
    uint64_t t0;               /* CLOCK_MONOTONIC when the run began: every loop's origin */
    int64_t t0_unix_ns;        /* the same instant on the wall clock */
    _Atomic uint64_t next_seq; /* closed loop: the next request's number */
    _Atomic bool stop;         /* set by a loop that failed: the others end too */
} bench_shared;

/* What a loop shows while it runs (read by the progress bar on another
 * thread; only the loop writes them). */
typedef struct bench_loop_progress {
    _Atomic uint64_t completed, failed, out_tokens, in_flight;
} bench_loop_progress;

/* One loop: its share of connections (set up here, before the run's clock
 * starts), its records. */
typedef struct bench_loop bench_loop;

/* Loop `index` of sh with `conns` connections; sh->t0_unix_ns must be set
 * (multi-turn session ids use it). */
int bench_loop_new(bench_loop **out, bench_shared *sh, uint32_t index, uint32_t conns,
                   bench_loop_progress *prog, tps_err *e);
/* Runs the loop's share of the run (from sh->t0, which must be set) until it
 * is done; on its own thread. Fails only on a setup error, and then sets
 * sh->stop so the other loops end too. */
int bench_loop_run(bench_loop *l, tps_err *e);
/* Moves the loop's records and figures to *out (t_start_ns = sh->t0; the
 * CPU is the loop thread's own, while it ran). */
void bench_loop_take(bench_loop *l, bench_run_out *out);
void bench_loop_free(bench_loop *l);

#endif
