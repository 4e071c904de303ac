/* A sequence: one request's life inside the engine (tokens, KV block table,
 * sampler, stop matcher, detokenizer, timings). Owned by the engine thread
 * from admission to finish; shared with nobody. */
#ifndef TPS_SEQ_H
#define TPS_SEQ_H

#include <stdbool.h>
#include <stdint.h>

#include "base/dlist.h"
#include "engine/kv/kv_cache.h"
#include "engine/sample/logprobs.h"
#include "engine/sample/sampler.h"
#include "engine/sample/stop.h"
#include "engine/sample/think.h"
#include "engine/schedule/request.h" /* engine_timings */
#include "model/tokenizer_stream.h"

typedef enum seq_state { SEQ_WAITING = 0, SEQ_RUNNING = 1 } seq_state;

typedef struct seq {
    uint64_t id;
    uint32_t choice; /* which of its request's n choices */
    void *user;
    seq_state state;
    int32_t *tokens;      /* prompt then generated, (cap,) */
    uint32_t n_prompt;    /* prompt tokens */
    uint32_t n_tokens;    /* prompt + generated so far */
    uint32_t n_computed;  /* positions whose K/V are in the cache */
    uint32_t max_tokens;  /* generated tokens allowed */
    uint64_t admit_order; /* larger = admitted more recently (preemption victim order) */
    bool cancelled;
    kv_seq kv;
    sampler *smp;
    struct constraint *cons; /* the request's grammar; NULL: free text */
    bool cons_dead;          /* the grammar allowed no token this step */
    bool cons_takes;         /* the grammar masked this step: the token goes through it */
    uint32_t min_tokens;     /* end ids masked, stop strings disarmed until this many are out */
    think_split think;       /* where the output is: before, in or after a thinking block */
    int32_t think_budget;    /* tokens a block may hold; -1: no limit */
    uint32_t n_think;        /* tokens sampled inside the block */
    stop_matcher stop;
    detok_stream *detok;
    engine_timings tm;
    /* logprobs: the raw logits row of the step (n_vocab,), owned, NULL when
     * not asked for; the sampled token's and the top alternatives'. */
    float *lp_raw;
    uint32_t lp_k;
    double lp_lse;
    uint32_t lp_n_top;
    int32_t lp_top_id[LOGPROBS_MAX_TOP];
    float lp_top[LOGPROBS_MAX_TOP];
    /* Choices 1..n-1 of this request (choice 0), held here until this
     * one's prompt is computed; then each forks its KV and samples from
     * the same logits. Owned until forked. */
    struct seq **forks;
    uint32_t n_forks;
    struct seq *next; /* intrusive list link (waiting queue or running list) */
    struct seq *prev;
} seq;

/* Doubly linked FIFO of sequences. */
typedef struct seq_list {
    seq *head, *tail;
    uint32_t n;
} seq_list;

static inline void seq_list_push_back(seq_list *l, seq *s) {
    TPS_DLIST_PUSH_BACK(l, s);
}

static inline void seq_list_push_front(seq_list *l, seq *s) {
    TPS_DLIST_PUSH_FRONT(l, s);
}

static inline void seq_list_remove(seq_list *l, seq *s) {
    TPS_DLIST_REMOVE(l, s);
}

#endif
