/* A real run's timing, read back from the engine's trace (`tps serve
 * --trace FILE`), for the simulation to replay: when each request reached
 * the engine's queue, when each step began, how long its forward pass and
 * what followed took, how many requests it took into the queue, and what
 * the warm-up primed the step-time model with. A replay runs the planner
 * on those times instead of the client model and the cost model, so its
 * decisions (rows, admissions, chunks cut to the ITL target) must be the
 * real engine's, step for step: the test of the planner's two callers
 * agreeing. Not here: the simulation (plan.h). */
#ifndef TPS_PLAN_REPLAY_H
#define TPS_PLAN_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef struct plan_replay_step {
    uint64_t t0;      /* ns since the trace's origin */
    uint64_t fwd_ns;  /* t1 - t0 */
    uint64_t post_ns; /* t2 - t1 */
    uint32_t taken;
    uint32_t prefill_rows, decode_rows, cached_rows; /* what the engine ran (to compare) */
} plan_replay_step;

typedef struct plan_replay {
    plan_replay_step *steps; /* in order */
    size_t n_steps;
    uint64_t
        *arrivals; /* each request's t_queued, ns since the origin, by request id (submit order) */
    uint64_t *finishes; /* each request's end (its decode span's), same clock and ids; 0: none */
    size_t n_arrivals;
    double prime_t1_ns, prime_tn_ns; /* the warm-up's measurements */
    uint32_t prime_n;
    double itl_target_ms; /* as asked */
} plan_replay;

int plan_replay_read(plan_replay *r, const char *trace_path, tps_err *e);
/* The same from buf[0..len) (the fuzz entry point); name labels errors. */
int plan_replay_parse(plan_replay *r, const char *buf, size_t len, const char *name, tps_err *e);
void plan_replay_free(plan_replay *r);

#endif
