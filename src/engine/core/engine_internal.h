/* The engine object's inside, shared by the files of core/, the engine's
 * top room (no room below it includes this). They call one way, from the
 * top down:
 *
 *   engine.c       the object's lifecycle: parameters, the KV pool, the
 *                  warm-up that primes the step-time model, create/destroy
 *   engine_step.c  the engine thread: its loop, and one step (take the new
 *                  requests, plan with planner.h, run the forward pass,
 *                  sample, hand out tokens and events, record the step)
 *   engine_api.c   the request API of any thread: submit, cancel, events,
 *                  stats; building and freeing a request's sequences
 *   planner.c      the step policy over scheduling state (schedule/planner.h)
 *
 * Locking: one mutex guards what the API threads touch (incoming requests,
 * cancels, the event queue, stats). The engine thread takes it a few times
 * per step, never per token; everything else (the scheduling state, KV,
 * forward state) belongs to the engine thread alone. */
#ifndef TPS_ENGINE_INTERNAL_H
#define TPS_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "constrain/constraint.h"
#include "engine/core/engine.h"
#include "engine/forward/forward.h"
#include "engine/schedule/planner.h"
#include "engine/schedule/seq.h"
#include "engine/schedule/seq_rules.h"
#include "engine/core/trace.h"

struct engine {
    engine_params p;
    const llama_model *m;
    const tokenizer *tok;
    uint32_t n_ctx;
    sampler_vocab svocab;
    seq_rules_vocab rules; /* what the output rules need of the vocabulary */
    kv_cache *kv;
    fwd_state *fs;
    vocab_trie *trie;        /* built by engine_constraints_prepare, once */
    pthread_mutex_t trie_mu; /* guards building it */

    /* step buffers, sized once (engine thread) */
    fwd_row *rows;
    const kv_seq **row_seqs;     /* per batch sequence slot */
    seq **samplers;              /* sequences that sample this step, in batch order */
    const float **sample_logits; /* their logits rows */
    int32_t *sampled;            /* the tokens they drew */
    size_t cap_samplers;         /* rows of the three above: batch rows + forks */
    float *fork_logits;          /* copies of a prompt's logits, one per forked choice */
    size_t cap_fork_logits;      /* rows */
    engine_event *pending;       /* events of this step, pushed under one lock */
    size_t n_pending, cap_pending;

    /* engine thread only */
    sched sc; /* the scheduling state: waiting queue, running list, cost model, target */
    trace tr;
    uint32_t taken;     /* requests taken into the queue since the last step that ran rows */
    engine_macs macs;   /* multiply-adds of a row, its LM head, an attended position */
    engine_stats local; /* counters the engine thread updates; copied to st under mu */

    /* shared, under mu */
    pthread_mutex_t mu;
    pthread_cond_t work_cv;
    pthread_cond_t ev_cv;
    bool stopping;
    bool reset_prefix; /* engine_reset_prefix_cache: empty the prefix cache before the next step */
    seq_list incoming;
    uint64_t *cancels;
    size_t n_cancels, cap_cancels;
    uint64_t next_id;
    engine_event *evq; /* ring */
    size_t ev_head, ev_n, ev_cap;
    int efd;
    engine_stats st;
    hist *h_step_ns, *h_step_tokens;

    pthread_t thread;
    bool thread_started;
};

/* engine_api.c: frees s and the choices it still holds (its blocks must
 * have been released). */
void engine_seq_free(seq *s);

/* engine_step.c: the engine thread's body. */
void *engine_main(void *arg);

#endif
