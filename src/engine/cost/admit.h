/* The one admission rule: whether a request fits the engine now, fits
 * later (the queue is full: try again), or never fits (the context, the KV
 * pool or the sequence cap is too small for it), with the reason. Written
 * once and called by every place that decides: engine_submit, the server's
 * early checks and default max_tokens (server_prepare.c), and tps plan's
 * simulated engine (plan_engine.c), so the plan cannot drift from the
 * engine it predicts.
 *
 * Pure functions of plain numbers (admit_pool): no engine, no lock; the
 * caller reads the numbers (engine_admit_pool) and holds whatever lock the
 * queue length needs. Not here: validating sampling options, token ids,
 * grammars (engine_api.c), the scheduler's per-step policy (sched.h). */
#ifndef TPS_ENGINE_ADMIT_H
#define TPS_ENGINE_ADMIT_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* What the engine has for requests. */
typedef struct admit_pool {
    uint32_t n_ctx;        /* the model's context, in positions */
    uint32_t max_seqs;     /* sequences that run at once (--max-seqs): one per choice */
    uint32_t block_tokens; /* positions a KV block holds */
    uint32_t n_blocks;     /* blocks in the KV pool */
    uint32_t max_queue;    /* requests that may wait (--max-queue); 0: no limit */
} admit_pool;

/* KV blocks n choices of a prompt with max_tokens each need at most: the
 * prompt's full blocks shared, the rest once per choice. */
uint64_t admit_blocks(const admit_pool *p, size_t n_prompt, uint32_t max_tokens, uint32_t n);

/* The most tokens each of n choices can generate beside the prompt with
 * the whole pool and the context; 0 when not even one fits. */
uint64_t admit_room(const admit_pool *p, size_t n_prompt, uint32_t n);

/* n choices at once: TPS_EINVAL when over max_seqs (never fits). */
int admit_choices(const admit_pool *p, uint32_t n, tps_err *err);

/* Whether a request can ever run: TPS_OK, with *max_tokens 0 resolved to
 * the room the context leaves; TPS_EINVAL (an empty prompt, n over
 * max_seqs) or TPS_ERANGE (over the context, or the KV pool) with the
 * reason and what to change. n 0 means 1. */
int admit_request(const admit_pool *p, size_t n_prompt, uint32_t *max_tokens, uint32_t n,
                  tps_err *err);

/* Whether one more request may wait behind `waiting` others now: TPS_OK,
 * or TPS_EFULL (fits later: the queue is full). */
int admit_queue(const admit_pool *p, uint32_t waiting, tps_err *err);

#endif
