/* tps plan: a discrete-event simulation of `tps serve` under a `tps bench`
 * load, predicting tokens per second, TTFT, ITL and E2E without running
 * the model.
 *
 * The simulated server is the engine's own scheduler (engine/schedule/planner.h)
 * over the same scheduling state the engine would build (engine_setup.h:
 * the same KV pool, in block accounting only), stepping in simulated time:
 * each step is planned by sched_plan_step exactly as the engine plans it,
 * lasts what the cost model says its shape costs (plan_cost.h), is
 * committed (positions advance, full blocks enter the prefix cache), and
 * gives each sequence that samples a synthetic token. The planner's own
 * online step-time model, which cuts prompt chunks to the ITL target,
 * is primed and fed the simulated times as the engine feeds it measured
 * ones. Prompts are the workload's bodies tokenized as the server does
 * (chat template, BOS), so prefix-cache hits come from real token ids.
 *
 * The simulated client is tps bench's load (bench.h): closed loop
 * (--concurrency), open loop (--rate with its arrival process and seed,
 * the in-flight cap), a trace's send times, multi-turn conversations with
 * think time (convo.h), each turn's body carrying the simulated replies.
 * plan_run has bench_run's shape (bench_run_fn): its records are what the
 * client would have recorded, so result.h turns them into the same
 * result, and the capacity search and a spec's run take it in bench_run's
 * place.
 *
 * Assumptions, said in the result: every request generates max_tokens
 * (the model's end-of-generation token is not predicted), the server
 * answers every request it accepts, the network adds the cost model's
 * fixed delivery latency. Not here: parsing options (src/cli/cli_plan.c),
 * the cost model's sources (plan_cost.h), printing. Single-threaded. */
#ifndef TPS_PLAN_PLAN_H
#define TPS_PLAN_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench/client/bench.h"
#include "engine/core/engine.h"
#include "plan/plan_cost.h"
#include "server/chat/chat_prompt.h"
#include "base/error.h"

/* What one simulated run did, beside its records. */
typedef struct plan_stats {
    uint64_t steps;
    uint64_t prefill_rows, decode_rows, cached_rows;
    uint64_t preemptions;
    uint64_t rejected; /* requests the server would refuse (too long for the context or pool) */
    double busy_s;     /* simulated time the engine spent in steps */
    double wall_s;     /* how long the simulation took to run */
} plan_stats;

/* One simulated step, for plan_server.on_step (tests, traces). */
typedef struct plan_step {
    uint64_t t0, t1, t2; /* start, tokens stamped, next step may start (simulated ns) */
    uint32_t rows, prefill_rows, decode_rows, cached_rows, logit_rows, running, waiting;
    uint32_t taken;                   /* requests moved from the arrivals into the queue */
    double attended, kv_read;         /* the shape's attention (step_fit.h) */
    double cost_fwd_ns, cost_post_ns; /* what the cost model says the shape takes (a
                                         replay's times are the real run's) */
} plan_step;

/* The simulated server: the model (shape, tokenizer, chat template), the
 * engine parameters as tps serve takes them, the cost model. */
typedef struct plan_server {
    const llama_model *m;      /* borrowed: config and weight bytes (no weights are read) */
    const tokenizer *tok;      /* borrowed: prompts as the server tokenizes them */
    const chat_prompt *prompt; /* the chat template the server would use (borrowed;
                                  chat_prompt_for_model) */
    engine_params ep;          /* as `tps serve` parses them; defaults resolved per run */
    const plan_cost *cost;     /* borrowed */
    uint64_t seed;             /* synthetic output tokens */
    /* Replay (tests): the arrivals and steps of a real run instead of the
     * client model and the cost model (plan_replay.h); NULL: predict. */
    const struct plan_replay *replay;
    void (*on_step)(void *arg, const plan_step *st); /* NULL: none */
    void *on_step_arg;
    plan_stats stats; /* the last run's */
} plan_server;

/* Simulates the load cfg/wl against the server `srv` (a plan_server *):
 * bench_run's contract (bench_run_fn), records in send order, times on a
 * simulated clock whose origin is out->t_start_ns. */
int plan_run(bench_run_out *out, const bench_config *cfg, const workload *wl, void *srv,
             tps_err *e);

#endif
