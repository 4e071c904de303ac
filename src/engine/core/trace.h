/* Step and request records for `--trace FILE`: Chrome trace JSON (opens in
 * Perfetto or chrome://tracing) with one track for engine steps (args:
 * prefill/decode tokens, running/waiting sequences, KV blocks) and one track
 * per request (queued, prefill, decode spans). Recorded by the engine thread
 * only; written once at the end. Bounded: past TRACE_MAX_RECORDS of either
 * kind, later ones are counted as dropped. */
#ifndef TPS_TRACE_H
#define TPS_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/core/engine.h"

#define TRACE_MAX_RECORDS (1u << 20)

typedef struct trace_step {
    uint64_t t0, t1;
    uint64_t t2;    /* its events published: the next step may start */
    uint32_t taken; /* requests moved from submit into the queue since the last step */
    uint32_t prefill_tokens, decode_tokens, running, waiting, kv_blocks, preemptions;
    uint32_t cached_tokens; /* prompt tokens admitted from the prefix cache this step */
    uint64_t predicted_ns;  /* the step-time model's prediction (t1 - t0 is the actual) */
    uint64_t weight_bytes;  /* weight bytes the step read (its experts' only) */
    uint32_t experts;       /* experts it ran, summed over the layers (0: dense) */
} trace_step;

typedef struct trace_req {
    uint64_t id;
    uint32_t choice;
    engine_timings tm;
    engine_finish finish;
} trace_req;

/* The warm-up's measurements the step-time model was primed with
 * (sched_prime), so a replay of the trace can prime its own the same way. */
typedef struct trace_prime {
    double t1_ns, tn_ns;
    uint32_t n;
    double itl_target_ms; /* as asked (< 0 automatic, 0 off) */
} trace_prime;

typedef struct trace {
    trace_prime prime;
    trace_step *steps;
    size_t n_steps, cap_steps;
    trace_req *reqs;
    size_t n_reqs, cap_reqs;
    uint64_t dropped;
    uint64_t t_origin;
} trace;

void trace_init(trace *t, uint64_t t_origin);
void trace_step_add(trace *t, const trace_step *s);
void trace_req_add(trace *t, uint64_t id, uint32_t choice, const engine_timings *tm,
                   engine_finish finish);
int trace_write(const trace *t, const char *path, tps_err *err);
void trace_free(trace *t);

#endif
