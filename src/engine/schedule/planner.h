/* The scheduler as a planning function: the engine's whole step policy
 * (Orca iteration-level scheduling, Sarathi chunked prefill, vLLM paged
 * blocks with preemption of the newest, the prefix cache at admission, the
 * ITL target's chunk sizing) over scheduling state alone.
 *
 * State in (sched): the waiting queue and the running list of sequences
 * with their positions (seq.h), the KV pool's block accounting (free,
 * owned, cached: kv_cache.h), the step-time model and the ITL target, the
 * limits. Plan out (sched_plan): which rows of which sequences the step
 * computes, and what planning it did to the state: admissions (with their
 * prefix-cache hits), preemptions, blocks reserved and cached blocks
 * evicted for them. One policy, two callers: the engine executes a plan
 * (the forward pass, then sched_commit, then sampling) and `tps plan`
 * simulates one (a step time from a cost model, then sched_commit, then a
 * synthetic token), so a simulated run and a real one make the same
 * decisions from the same state.
 *
 * Nothing here touches model weights or K/V memory: the planner moves
 * blocks between owners (kv_seq_reserve, kv_seq_match_prefix,
 * kv_seq_release, kv_seq_fork), which a kv_cache made with
 * kv_cache_params.accounting_only does without any K/V behind them.
 * Not here: sampling, events, tokens' text, threads, clocks (callers pass
 * the step's start time). Single-threaded: the caller owns the state. */
#ifndef TPS_ENGINE_PLANNER_H
#define TPS_ENGINE_PLANNER_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/cost/engine_shape.h" /* engine_macs */
#include "engine/cost/step_cost.h"
#include "engine/kv/kv_cache.h"
#include "engine/schedule/seq.h"
#include "base/error.h"

/* Prompt rows a step carrying decode rows always gives prompts, whatever
 * the ITL target says: one for each sequence in play (streams decoding
 * plus prompts waiting for their first token), but at least 4 and at most
 * one KV block (16). So a prompt of P tokens is computed within
 * ceil(P / 4) steps of its admission (TTFT bounded), and ceil(P / 16)
 * when 16 sequences are in play, as with a flat 16. Fewer in play, the
 * minimum is smaller: with 4 streams a flat 16 pushed every step that
 * carried a new prompt far past the target (ITL p99 3.2-3.8x p50; the
 * issue asks for 3x). A row per decoding stream alone was worse: a burst
 * of arrivals behind few streams waited (TTFT p50 2.7 s vs 0.28 s at 16
 * streams, 110M, 128/128). */
#define SCHED_PREFILL_FLOOR_MIN 4u
#define SCHED_PREFILL_FLOOR_MAX 16u

typedef struct sched_params {
    uint32_t max_seqs;         /* sequences running at once */
    uint32_t max_batch_tokens; /* token rows per step */
    uint32_t prefill_chunk;    /* most prompt rows one sequence gets per step */
} sched_params;

/* The scheduling state. The caller fills cost and target_ns (0: no ITL
 * target) and moves new sequences onto `waiting`; the rest is the
 * planner's. */
typedef struct sched {
    sched_params p;
    kv_cache *kv;       /* borrowed: the block accounting plans move */
    step_cost cost;     /* the step-time model prompt chunks are sized by */
    uint64_t target_ns; /* ITL target for a step carrying decode rows; 0: none */
    seq_list waiting, running;
    uint64_t admit_counter;
    /* counters: preemptions, and the prefix cache in prompt tokens as
     * vLLM counts them (looked up at admission, found) */
    uint64_t preemptions_total;
    uint64_t prefix_queries_total, prefix_hits_total;
    /* the plan's buffers, max_batch_tokens entries each */
    seq **batch;
    uint32_t *batch_rows;
} sched;

/* One step's plan. Sequence k of the batch computes rows [n_computed,
 * n_computed + rows[k]) of its tokens (n_computed as it stands until
 * sched_commit); a row wants logits when it is its sequence's last token. */
typedef struct sched_plan {
    uint64_t t0;     /* the step's start (the caller's clock) */
    uint32_t budget; /* token rows left */
    uint32_t n_batch;
    uint32_t n_rows;
    seq **batch;    /* (n_batch,) in slot order; borrowed from the sched */
    uint32_t *rows; /* (n_batch,) rows each */
    uint32_t prefill_rows, decode_rows;
    uint32_t logit_rows;  /* rows that want logits (sequences that sample after the step) */
    uint32_t cached_rows; /* prompt tokens admitted from the prefix cache this step */
    uint32_t prompt_seqs; /* sequences with prompt rows still to compute */
    uint32_t admitted;    /* sequences admitted from the waiting queue */
    uint32_t preempted;   /* running sequences sent back to wait */
    double work;          /* the step's size in the cost model's units */
    double pred_ns;       /* its predicted time */
    double attended;      /* positions attended, summed over rows */
    double kv_positions;  /* K/V positions read: each sequence's context once */
} sched_plan;

/* The limits (max_seqs, max_batch_tokens and prefill_chunk > 0) over kv's
 * accounting; cost and target_ns are the caller's to set. */
int sched_init(sched *sc, const sched_params *p, kv_cache *kv, tps_err *err);
/* Frees the buffers; the sequences on the lists are the caller's to free
 * first (their blocks released). */
void sched_free(sched *sc);
/* Shutdown, before sched_free: every sequence on the running and waiting
 * lists and on `incoming` (the owner's queue of those not yet scheduled)
 * leaves its list, gives its blocks back to kv (NULL: no cache was made)
 * and goes to seq_free. */
void sched_drain(sched *sc, seq_list *incoming, kv_cache *kv, void (*seq_free)(seq *s));

/* The warm-up's shape: the rows of the many-row step that primes the
 * step-time model (64, at most the batch, the context and the pool). */
uint32_t sched_prime_rows(const sched *sc, uint32_t n_ctx);
/* Primes the step-time model from the warm-up's measurements, as the
 * engine does at start: t1_ns a one-row step, tn_ns a step of n rows from
 * position 0 (n from sched_prime_rows; n < 2: none); an attended position
 * weighs 4 x its multiply-adds in row units (attention runs in fp32 over
 * scattered KV, the weights in int8 over packed rows). itl_target_ms: 0
 * off (the model is not primed; it learns from the steps), < 0 automatic
 * (3 x t1, at least ENGINE_ITL_TARGET_FLOOR_MS), else the target. Sets
 * target_ns; returns the target in force, ms. */
double sched_prime(sched *sc, const engine_macs *macs, double itl_target_ms, double t1_ns,
                   uint32_t n, double tn_ns);

/* Sets up s for a request of n_prompt tokens (copied) and up to max_tokens
 * generated ones: its token array and an empty block table; the rest of s
 * is the caller's (zeroed by it before). sched_seq_clear frees them. */
int sched_seq_init(seq *s, const kv_cache *kv, const int32_t *prompt, uint32_t n_prompt,
                   uint32_t max_tokens);
void sched_seq_clear(seq *s);

/* Plans one step at time t0: 1. a decode row for every running sequence
 * with all but its newest token computed (a row that finds no block
 * evicts cached blocks, then preempts the most recently admitted running
 * sequence); 2. prompt chunks of running, partly prefilled sequences; 3.
 * admissions from the waiting queue, FCFS, while the token budget, the
 * sequence cap and the pool allow (never right after a preemption). Chunks
 * are cut by the budget, prefill_chunk, the pool and, in a step with
 * decode rows, the ITL target (at least the floor above). n_rows 0: nothing
 * could run. */
void sched_plan_step(sched *sc, sched_plan *pl, uint64_t t0);

/* After the plan's rows were computed: each batch sequence's positions
 * advance and its newly full blocks are indexed in the prefix cache. */
void sched_commit(sched *sc, const sched_plan *pl);

/* Choice f of s (s's prompt just computed, f holds no block): takes s's
 * KV (full blocks shared, the partial one a block of its own) and runs
 * from here; true. When ok is false or no block is left for its copy, it
 * goes to the head of the queue to compute its prompt itself (false). */
bool sched_fork(sched *sc, seq *s, seq *f, bool ok);

/* Takes s off the running list or the waiting queue (whichever holds it)
 * and releases its blocks. */
void sched_remove(sched *sc, seq *s);

#endif
