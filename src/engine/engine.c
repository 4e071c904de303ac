/* The engine: request API (submit, cancel, events), the engine thread, and
 * one step of iteration-level scheduling (Orca) with chunked prefill
 * (Sarathi) over the paged KV cache (vLLM), preempting the most recently
 * admitted sequence when blocks run out.
 *
 * Locking: one mutex guards what the API threads touch (incoming requests,
 * cancels, the event queue, stats). The engine thread takes it a few times
 * per step, never per token; everything else (waiting and running lists,
 * KV, forward state) belongs to the engine thread alone. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "engine/constraint.h"
#include "engine/engine.h"
#include "engine/forward.h"
#include "engine/seq.h"
#include "engine/seq_rules.h"
#include "engine/step_cost.h"
#include "engine/trace.h"
#include "base/clock.h"
#include "base/cond.h"
#include "base/grow.h"

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
    seq **batch;                 /* sequences in this step, in slot order */
    uint32_t *batch_rows;        /* rows each contributes */
    seq **samplers;              /* sequences that sample this step, in batch order */
    const float **sample_logits; /* their logits rows */
    int32_t *sampled;            /* the tokens they drew */
    size_t cap_samplers;         /* rows of the three above: batch rows + forks */
    float *fork_logits;          /* copies of a prompt's logits, one per forked choice */
    size_t cap_fork_logits;      /* rows */
    engine_event *pending;       /* events of this step, pushed under one lock */
    size_t n_pending, cap_pending;

    /* engine thread only */
    seq_list waiting, running;
    uint64_t admit_counter;
    trace tr;
    step_cost cost;     /* the step-time model prompt chunks are sized by */
    engine_macs macs;   /* multiply-adds of a row, its LM head, an attended position */
    uint64_t target_ns; /* ITL target for a step carrying decode rows; 0: none */
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

void engine_params_default(engine_params *p) {
    memset(p, 0, sizeof *p);
    p->max_seqs = 64;
    p->max_batch_tokens = 256;
    p->kv_block = 16;
    p->kv_type = GGML_TYPE_F16;
}

const engine_params *engine_get_params(const engine *e) {
    return &e->p;
}

/* ---- sequences ---------------------------------------------------------- */

static void seq_free(seq *s) {
    if (!s) return;
    for (uint32_t i = 0; i < s->n_forks; i++)
        seq_free(s->forks[i]);
    free(s->forks);
    free(s->lp_raw);
    free(s->tokens);
    kv_seq_destroy(&s->kv);
    sampler_free(s->smp);
    constraint_free(s->cons);
    detok_stream_free(s->detok);
    free(s);
}

/* A recognizer over the request's compiled grammar; the model's
 * end-of-generation ids and the request's stop ids end it. */
static int seq_constraint_create(engine *e, const engine_request *r, seq *s, tps_err *err) {
    int32_t ends[CONSTRAINT_MAX_END_IDS];
    size_t n = 0;
    for (int32_t i = 0; i < e->svocab.n_eog; i++)
        ends[n++] = e->svocab.eog_ids[i];
    for (size_t i = 0; i < r->n_stop_ids && n < CONSTRAINT_MAX_END_IDS; i++)
        ends[n++] = r->stop_ids[i];
    return constraint_create_prog(&s->cons, r->grammar_prog, e->trie, ends, n, err);
}

static int seq_create(engine *e, const engine_request *r, uint32_t choice, seq **out,
                      tps_err *err) {
    *out = NULL;
    seq *s = calloc(1, sizeof *s);
    if (!s) return tps_fail(err, TPS_ENOMEM, "engine: out of memory");
    uint32_t cap = (uint32_t)r->n_prompt + r->max_tokens;
    s->tokens = malloc(sizeof(int32_t) * (cap + 1));
    int rc = s->tokens ? 0 : TPS_ENOMEM;
    if (!rc) rc = kv_seq_init(&s->kv, kv_blocks_for(e->kv, cap));
    if (rc) {
        seq_free(s);
        return tps_fail(err, rc, "engine: out of memory");
    }
    memcpy(s->tokens, r->prompt, sizeof(int32_t) * r->n_prompt);
    s->n_prompt = s->n_tokens = (uint32_t)r->n_prompt;
    s->max_tokens = r->max_tokens;
    s->user = r->user;
    s->choice = choice;
    if (r->logprobs) {
        s->lp_k = r->top_logprobs;
        if (!(s->lp_raw = malloc(sizeof(float) * (size_t)e->svocab.n_vocab))) {
            seq_free(s);
            return tps_fail(err, TPS_ENOMEM, "engine: out of memory");
        }
    }
    const char *field = NULL;
    sampler_params sp = r->sampling;
    sp.seed += choice;
    if ((rc = sampler_create(&s->smp, &sp, &e->svocab, err)) ||
        (rc = sampler_set_logit_bias(s->smp, r->logit_bias, r->n_logit_bias, err)) ||
        (rc = stop_init(&s->stop, r->stop, r->n_stop, r->stop_ids, r->n_stop_ids,
                        (int32_t)e->svocab.n_vocab, &field, err)) ||
        (rc = detok_stream_create(&s->detok, e->tok,
                                  r->render_special ? TOK_DECODE_RENDER_SPECIAL : 0, err)) ||
        (r->grammar_prog && (rc = seq_constraint_create(e, r, s, err)))) {
        seq_free(s);
        return rc;
    }
    seq_rules_init(s, r);
    s->tm.prompt_tokens = s->n_prompt;
    s->tm.seed = sp.seed;
    *out = s;
    return 0;
}

/* Choice 0 of a request, holding choices 1..n-1 as its forks. */
static int seq_group_create(engine *e, const engine_request *r, uint32_t n, seq **out,
                            tps_err *err) {
    seq *s = NULL;
    int rc = seq_create(e, r, 0, &s, err);
    if (rc) return rc;
    if (n > 1 && !(s->forks = calloc(n - 1, sizeof *s->forks))) {
        seq_free(s);
        return tps_fail(err, TPS_ENOMEM, "engine: out of memory");
    }
    for (uint32_t i = 1; i < n; i++) {
        if ((rc = seq_create(e, r, i, &s->forks[s->n_forks], err))) {
            seq_free(s);
            return rc;
        }
        s->n_forks++;
    }
    *out = s;
    return 0;
}

/* KV blocks n choices of prompt + max_tokens need at once: the prompt's
 * full blocks once, everything after them once per choice. */
static uint64_t blocks_for_choices(const kv_cache *kv, uint32_t n_prompt, uint32_t max_tokens,
                                   uint32_t n) {
    uint64_t all = kv_blocks_for(kv, n_prompt + max_tokens), shared = n_prompt / kv->block_tokens;
    return shared + (uint64_t)n * (all - shared);
}

/* ---- submit / cancel / events (any thread) ------------------------------ */

/* The request's sampling and output options (TPS_EINVAL naming the bad one). */
static int check_options(const engine *e, const engine_request *rq, tps_err *err) {
    if (rq->top_logprobs > LOGPROBS_MAX_TOP)
        return tps_fail(err, TPS_EINVAL, "top_logprobs is %u; at most %d", rq->top_logprobs,
                        LOGPROBS_MAX_TOP);
    const char *field = NULL;
    int rc = sampler_params_validate(&rq->sampling, &field, err);
    if (rc) return rc;
    if (rq->think != THINK_OFF && rq->think_budget >= 0 && e->rules.think_close < 0)
        return tps_fail(err, TPS_EINVAL,
                        "a thinking budget needs \"" THINK_CLOSE
                        "\" as one token of the vocabulary");
    return 0;
}

int engine_submit(engine *e, const engine_request *r, uint64_t *id, tps_err *err) {
    engine_request rq = *r;
    if (rq.n_prompt == 0)
        return tps_fail(err, TPS_EINVAL, "prompt is empty: it needs at least one token");
    if (rq.n_prompt >= e->n_ctx)
        return tps_fail(err, TPS_ERANGE,
                        "prompt has %zu tokens; the model's context is %u (at most %u prompt "
                        "tokens leave room to generate)",
                        rq.n_prompt, e->n_ctx, e->n_ctx - 1);
    if (rq.max_tokens == 0) rq.max_tokens = e->n_ctx - (uint32_t)rq.n_prompt;
    if ((uint64_t)rq.n_prompt + rq.max_tokens > e->n_ctx)
        return tps_fail(err, TPS_ERANGE,
                        "prompt (%zu tokens) + max_tokens (%u) = %llu exceeds the model's "
                        "context of %u tokens",
                        rq.n_prompt, rq.max_tokens, (unsigned long long)rq.n_prompt + rq.max_tokens,
                        e->n_ctx);
    const uint32_t n = rq.n ? rq.n : 1;
    if (n > e->p.max_seqs)
        return tps_fail(err, TPS_EINVAL,
                        "n = %u choices cannot run at once: the engine runs at most %u sequences "
                        "(--max-seqs)",
                        n, e->p.max_seqs);
    uint64_t blocks = blocks_for_choices(e->kv, (uint32_t)rq.n_prompt, rq.max_tokens, n);
    if (blocks > e->kv->n_blocks) {
        if (n == 1)
            return tps_fail(err, TPS_ERANGE,
                            "prompt (%zu tokens) + max_tokens (%u) needs %llu KV blocks; the pool "
                            "has %u (raise --kv-mem or lower max_tokens)",
                            rq.n_prompt, rq.max_tokens, (unsigned long long)blocks,
                            e->kv->n_blocks);
        return tps_fail(err, TPS_ERANGE,
                        "n = %u choices of prompt (%zu tokens) + max_tokens (%u) need %llu KV "
                        "blocks; the pool has %u (lower n or max_tokens, or raise --kv-mem)",
                        n, rq.n_prompt, rq.max_tokens, (unsigned long long)blocks, e->kv->n_blocks);
    }
    for (size_t i = 0; i < rq.n_prompt; i++)
        if (rq.prompt[i] < 0 || (uint32_t)rq.prompt[i] >= e->m->cfg.n_vocab)
            return tps_fail(err, TPS_EINVAL,
                            "prompt token %zu is id %d, outside the vocabulary (0..%u)", i,
                            rq.prompt[i], e->m->cfg.n_vocab - 1);
    int rc = check_options(e, &rq, err);
    if (rc) return rc;
    constraint_prog *own = NULL; /* compiled here from rq.grammar: once for every choice */
    if ((rq.grammar_prog || rq.grammar) && (rc = engine_constraints_prepare(e, err))) return rc;
    if (!rq.grammar_prog && rq.grammar) {
        if ((rc = constraint_prog_compile(&own, rq.grammar, rq.grammar_len, NULL, err))) return rc;
        rq.grammar_prog = own;
    }
    seq *s = NULL;
    rc = seq_group_create(e, &rq, n, &s, err);
    constraint_prog_unref(own); /* the choices hold their own references */
    if (rc) return rc;
    pthread_mutex_lock(&e->mu);
    if (e->stopping) {
        pthread_mutex_unlock(&e->mu);
        seq_free(s);
        return tps_fail(err, TPS_EFULL, "engine is shutting down");
    }
    if (e->p.max_queue && e->incoming.n + e->st.requests_waiting >= e->p.max_queue) {
        uint32_t q = e->incoming.n + e->st.requests_waiting;
        pthread_mutex_unlock(&e->mu);
        seq_free(s);
        return tps_fail(err, TPS_EFULL, "queue is full (%u waiting, limit %u)", q, e->p.max_queue);
    }
    s->id = ++e->next_id;
    s->tm.t_queued = tps_now_ns();
    for (uint32_t i = 0; i < s->n_forks; i++) {
        s->forks[i]->id = s->id;
        s->forks[i]->tm.t_queued = s->tm.t_queued;
    }
    seq_list_push_back(&e->incoming, s);
    *id = s->id;
    pthread_cond_signal(&e->work_cv);
    pthread_mutex_unlock(&e->mu);
    return 0;
}

int engine_constraints_prepare(engine *e, tps_err *err) {
    int rc = 0;
    pthread_mutex_lock(&e->trie_mu);
    if (!e->trie) rc = vocab_trie_build(&e->trie, e->tok, e->m->cfg.n_vocab, err);
    pthread_mutex_unlock(&e->trie_mu);
    return rc;
}

void engine_cancel(engine *e, uint64_t id) {
    pthread_mutex_lock(&e->mu);
    if (TPS_GROW(e->cancels, e->cap_cancels, e->n_cancels + 1, 64)) {
        pthread_mutex_unlock(&e->mu);
        return; /* out of memory: the request runs to its end instead */
    }
    e->cancels[e->n_cancels++] = id;
    pthread_cond_signal(&e->work_cv);
    pthread_mutex_unlock(&e->mu);
}

bool engine_reset_prefix_cache(engine *e) {
    if (!e->kv->pc) return false;
    pthread_mutex_lock(&e->mu);
    e->reset_prefix = true;
    pthread_cond_signal(&e->work_cv);
    pthread_mutex_unlock(&e->mu);
    return true;
}

size_t engine_poll(engine *e, engine_event *out, size_t max) {
    pthread_mutex_lock(&e->mu);
    size_t n = 0;
    while (n < max && e->ev_n) {
        out[n++] = e->evq[e->ev_head];
        e->ev_head = (e->ev_head + 1) % e->ev_cap;
        e->ev_n--;
    }
    if (e->ev_n == 0) {
        uint64_t v;
        while (read(e->efd, &v, sizeof v) > 0) {
        }
    }
    pthread_mutex_unlock(&e->mu);
    return n;
}

void engine_wait(engine *e, int timeout_ms) {
    pthread_mutex_lock(&e->mu);
    if (e->ev_n == 0) {
        if (timeout_ms < 0)
            pthread_cond_wait(&e->ev_cv, &e->mu);
        else
            tps_cond_wait_ns(&e->ev_cv, &e->mu, (uint64_t)timeout_ms * TPS_NS_PER_MS);
    }
    pthread_mutex_unlock(&e->mu);
}

int engine_event_fd(const engine *e) {
    return e->efd;
}

void engine_get_stats(engine *e, engine_stats *out) {
    pthread_mutex_lock(&e->mu);
    *out = e->st;
    out->requests_waiting += e->incoming.n;
    pthread_mutex_unlock(&e->mu);
}

int engine_merge_step_hists(engine *e, hist *step_ns, hist *step_tokens, tps_err *err) {
    int rc = 0;
    pthread_mutex_lock(&e->mu);
    if (step_ns) rc = hist_merge(step_ns, e->h_step_ns, err);
    if (!rc && step_tokens) rc = hist_merge(step_tokens, e->h_step_tokens, err);
    pthread_mutex_unlock(&e->mu);
    return rc;
}

/* ---- events (engine thread) --------------------------------------------- */

static engine_event *pending_add(engine *e) {
    if (TPS_GROW(e->pending, e->cap_pending, e->n_pending + 1, 64)) return NULL;
    engine_event *ev = &e->pending[e->n_pending++];
    ev->text_len = 0;
    ev->error[0] = 0;
    return ev;
}

static void text_append(engine_event *ev, const char *p, size_t n) {
    if (!n) return;
    if (n > ENGINE_TEXT_MAX - ev->text_len) n = ENGINE_TEXT_MAX - ev->text_len;
    memcpy(ev->text + ev->text_len, p, n);
    ev->text_len += (uint32_t)n;
}

/* Moves this step's events into the shared queue under one lock. */
static void publish(engine *e, uint64_t t_now) {
    if (!e->n_pending) return;
    pthread_mutex_lock(&e->mu);
    if (e->ev_n + e->n_pending > e->ev_cap) {
        size_t nc = e->ev_cap ? e->ev_cap : 256;
        while (nc < e->ev_n + e->n_pending)
            nc *= 2;
        engine_event *q = malloc(nc * sizeof *q);
        if (q) {
            for (size_t i = 0; i < e->ev_n; i++)
                q[i] = e->evq[(e->ev_head + i) % e->ev_cap];
            free(e->evq);
            e->evq = q;
            e->ev_cap = nc;
            e->ev_head = 0;
        }
    }
    bool was_empty = e->ev_n == 0;
    for (size_t i = 0; i < e->n_pending && e->ev_n < e->ev_cap; i++) {
        e->pending[i].t_ns = t_now;
        e->evq[(e->ev_head + e->ev_n) % e->ev_cap] = e->pending[i];
        e->ev_n++;
    }
    if (was_empty && e->ev_n) {
        uint64_t one = 1;
        ssize_t w = write(e->efd, &one, sizeof one);
        (void)w;
    }
    pthread_cond_broadcast(&e->ev_cv);
    pthread_mutex_unlock(&e->mu);
    e->n_pending = 0;
}

/* ---- finishing ------------------------------------------------------------ */

/* Ends s: releases its KV, queues DONE with any held text, frees it. The
 * caller has already unlinked it from its list. */
static void finish(engine *e, seq *s, engine_finish why, uint64_t t_now, const char *error) {
    kv_seq_release(e->kv, &s->kv);
    /* choices not forked yet end with the one that holds them */
    while (s->n_forks) {
        seq *f = s->forks[--s->n_forks];
        f->tm.t_first_scheduled = s->tm.t_first_scheduled;
        finish(e, f, why, t_now, error);
    }
    engine_event *ev = pending_add(e);
    if (ev) {
        ev->kind = ENGINE_EV_DONE;
        ev->id = s->id;
        ev->choice = s->choice;
        ev->user = s->user;
        ev->token = -1;
        ev->finish = why;
        if (why != ENGINE_FINISH_CANCELLED && why != ENGINE_FINISH_ERROR && !s->stop.matched) {
            const char *t;
            size_t n;
            stop_emit em;
            detok_stream_flush(s->detok, &t, &n);
            if (n) {
                stop_feed(&s->stop, t, n, &em);
                text_append(ev, em.head, em.head_len);
                text_append(ev, em.tail, em.tail_len);
            }
            if (!s->stop.matched) {
                stop_flush(&s->stop, &em);
                text_append(ev, em.head, em.head_len);
                text_append(ev, em.tail, em.tail_len);
            }
        }
        s->tm.t_finished = t_now;
        ev->timings = s->tm;
        if (error) snprintf(ev->error, sizeof ev->error, "%s", error);
    }
    if (e->p.trace_path) trace_req_add(&e->tr, s->id, s->choice, &s->tm, why);
    e->local.requests_total[why]++;
    seq_free(s);
}

/* Returns s's KV to the pool and puts it at the head of the waiting queue to
 * recompute its tokens later (never an error, never lost). */
static void preempt(engine *e, seq *s) {
    seq_list_remove(&e->running, s);
    kv_seq_release(e->kv, &s->kv);
    s->n_computed = 0;
    s->state = SEQ_WAITING;
    s->tm.preemptions++;
    e->local.preemptions_total++;
    seq_list_push_front(&e->waiting, s);
}

/* Positions beyond n_computed that s can hold without preempting anyone
 * (evicting cached blocks nobody holds is fine). */
static uint32_t room_for(const engine *e, const seq *s) {
    uint64_t cap = ((uint64_t)s->kv.n_blocks + kv_cache_available(e->kv)) * e->kv->block_tokens;
    uint64_t limit = (uint64_t)s->kv.cap * e->kv->block_tokens;
    if (cap > limit) cap = limit;
    return cap > s->n_computed ? (uint32_t)(cap - s->n_computed) : 0;
}

/* Makes room for s to hold n positions, preempting the most recently
 * admitted running sequences. Returns false when s itself was preempted.
 * Only for decode rows: the victim (the running tail) comes after s in
 * admission order, so it has no rows in this step's batch yet. */
static bool reserve_or_preempt(engine *e, seq *s, uint32_t n) {
    for (;;) {
        int rc = kv_seq_reserve(e->kv, &s->kv, n);
        if (rc == 0) return true;
        seq *victim = e->running.tail;
        preempt(e, victim);
        if (victim == s) return false;
    }
}

/* ---- one step ------------------------------------------------------------- */

/* Publishes the engine thread's counters and gauges for engine_get_stats. */
static void sync_stats(engine *e) {
    e->local.requests_running = e->running.n;
    e->local.requests_waiting = e->waiting.n;
    e->local.kv_blocks_used = kv_cache_blocks_used(e->kv);
    e->local.kv_local_blocks_used = kv_cache_local_blocks_used(e->kv);
    e->local.kv_blocks_cached = kv_cache_blocks_cached(e->kv);
    pthread_mutex_lock(&e->mu);
    e->st = e->local;
    pthread_mutex_unlock(&e->mu);
}

static void take_requests(engine *e, uint64_t t_now) {
    pthread_mutex_lock(&e->mu);
    /* a request submitted after engine_reset_prefix_cache waits for the
     * reset (at the next turn of engine_main), not admitted before it */
    while (e->incoming.head && !e->reset_prefix) {
        seq *s = e->incoming.head;
        seq_list_remove(&e->incoming, s);
        seq_list_push_back(&e->waiting, s);
    }
    /* engine_submit's queue limit counts incoming + published waiting: publish
     * the taken requests now, not at the step's end, or a burst of submits
     * during the step sees neither and overfills the queue */
    e->st.requests_waiting = e->waiting.n;
    size_t nc = e->n_cancels;
    uint64_t local[64];
    uint64_t *ids = nc <= 64 ? local : malloc(nc * sizeof *ids);
    if (ids && nc) memcpy(ids, e->cancels, nc * sizeof *ids);
    e->n_cancels = 0;
    pthread_mutex_unlock(&e->mu);
    if (!ids) return;
    /* every choice of the request: forked ones run as sequences of their own */
    for (size_t i = 0; i < nc; i++) {
        seq_list *lists[] = {&e->running, &e->waiting};
        for (int l = 0; l < 2; l++)
            for (seq *s = lists[l]->head, *next; s; s = next) {
                next = s->next;
                if (s->id != ids[i]) continue;
                seq_list_remove(lists[l], s);
                finish(e, s, ENGINE_FINISH_CANCELLED, t_now, NULL);
            }
    }
    if (ids != local) free(ids);
}

/* Adds rows [n_computed, n_computed + n) of s to the batch. */
static void add_rows(engine *e, seq *s, uint32_t n, size_t *n_rows, uint32_t *n_batch) {
    uint32_t slot = *n_batch;
    e->batch[slot] = s;
    e->batch_rows[slot] = n;
    e->row_seqs[slot] = &s->kv;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t pos = s->n_computed + i;
        e->rows[(*n_rows)++] = (fwd_row){.token = s->tokens[pos],
                                         .pos = pos,
                                         .seq = slot,
                                         .want_logits = pos + 1 == s->n_tokens};
    }
    (*n_batch)++;
}

/* Takes the prefix cache's blocks for s's leading tokens (s holds none);
 * returns the positions they cover. The last token is always computed,
 * since sampling needs its logits: a block is taken only when all of it
 * lies before that token. */
static uint32_t take_cached_prefix(engine *e, seq *s) {
    uint32_t max_blocks = (s->n_tokens - 1) / e->kv->block_tokens;
    uint32_t k = kv_seq_match_prefix(e->kv, &s->kv, s->tokens, max_blocks);
    s->n_computed = k * e->kv->block_tokens;
    return s->n_computed;
}

/* True when a running sequence is computing the block s would take next
 * (the same tokens from position 0 to that block's end, not all computed
 * yet): s waits a step or two for it to be cached instead of computing the
 * same K/V again beside it. Only running sequences count, and they always
 * progress, so the wait ends. */
static bool prefix_in_flight(const engine *e, const seq *s, uint32_t hit) {
    const uint32_t end = hit + e->kv->block_tokens;
    if (!e->kv->pc || end >= s->n_tokens) return false;
    for (const seq *r = e->running.head; r; r = r->next)
        if (r->n_computed < end && r->n_tokens >= end &&
            memcmp(r->tokens + hit, s->tokens + hit, (end - hit) * sizeof *s->tokens) == 0 &&
            memcmp(r->tokens, s->tokens, hit * sizeof *s->tokens) == 0)
            return true;
    return false;
}

/* Handles a sampled token for s (s may finish and be freed); returns true
 * when it was an output token (an end-of-generation or stop id is not). */
static bool on_token(engine *e, seq *s, int32_t tok, uint64_t t_now) {
    /* the grammar allowed nothing, or the sampler had to pick a masked
     * token (logit_bias, ignore_eos or min_tokens took every allowed one
     * away) */
    if (s->cons_dead || seq_rules_grammar_take(s, tok, &e->rules) != 0) {
        seq_list_remove(&e->running, s);
        finish(e, s, ENGINE_FINISH_ERROR, t_now,
               s->cons_dead ? "grammar: no token of the vocabulary can continue the output"
                            : "grammar: every token the grammar allows was banned (logit_bias, "
                              "ignore_eos or min_tokens)");
        return false;
    }
    sampler_accept(s->smp, tok);
    if (!s->tm.t_first_token) s->tm.t_first_token = t_now;
    s->tokens[s->n_tokens++] = tok;
    bool eog = tokenizer_is_eog(e->tok, tok) || stop_is_token(&s->stop, tok);
    if (eog) {
        seq_list_remove(&e->running, s);
        finish(e, s, ENGINE_FINISH_STOP, t_now, NULL);
        return false;
    }
    s->tm.generated_tokens++;
    engine_event *ev = pending_add(e);
    const char *t = NULL;
    size_t n;
    tps_err err;
    stop_emit em = {0};
    seq_rules_before_stop(s, s->tm.generated_tokens);
    if (detok_stream_push(s->detok, tok, &t, &n, &err) != 0) n = 0;
    seq_rules_after_text(s, t, n);
    if (n) stop_feed(&s->stop, t, n, &em);
    if (ev) {
        ev->kind = ENGINE_EV_TOKEN;
        ev->id = s->id;
        ev->choice = s->choice;
        ev->n_top = 0;
        if (s->lp_raw) {
            ev->logprob = (float)((double)s->lp_raw[tok] - s->lp_lse);
            ev->n_top = s->lp_n_top;
            memcpy(ev->top_id, s->lp_top_id, s->lp_n_top * sizeof *ev->top_id);
            memcpy(ev->top_logprob, s->lp_top, s->lp_n_top * sizeof *ev->top_logprob);
        }
        ev->user = s->user;
        ev->token = tok;
        text_append(ev, em.head, em.head_len);
        text_append(ev, em.tail, em.tail_len);
    }
    engine_finish why = ENGINE_FINISH_LENGTH;
    bool done = false;
    if (em.matched)
        why = ENGINE_FINISH_STOP, done = true;
    else if (seq_rules_grammar_active(s) && constraint_finished(s->cons))
        why = ENGINE_FINISH_STOP, done = true; /* the grammar is complete: nothing can follow */
    else if (s->tm.generated_tokens >= s->max_tokens || s->n_tokens >= e->n_ctx)
        done = true;
    if (done) {
        seq_list_remove(&e->running, s);
        finish(e, s, why, t_now, NULL);
    }
    return true;
}

static void sample_all(engine *e, uint32_t n);

/* Room for n forked choices' copies of a logits row; false when out of
 * memory (the choices then recompute their prompt instead). */
static bool reserve_fork_logits(engine *e, size_t n) {
    if (n <= e->cap_fork_logits) return true;
    float *p = realloc(e->fork_logits, n * e->m->cfg.n_vocab * sizeof *p);
    if (!p) return false;
    e->fork_logits = p;
    e->cap_fork_logits = n;
    return true;
}

/* s's prompt is computed: each choice it holds takes s's KV (full blocks
 * shared, the partial one copied) and a copy of the prompt's logits, and
 * samples in this step as a sequence of its own. A choice that finds no
 * block for its copy (or no memory for the logits: logits NULL) goes back
 * to wait and computes its prompt itself, where the prefix cache serves
 * the full blocks: the same tokens either way. */
static void fork_choices(engine *e, seq *s, const float *logits, uint32_t *n_sample,
                         uint32_t *n_fork) {
    const size_t nv = e->m->cfg.n_vocab;
    for (uint32_t i = 0; i < s->n_forks; i++) {
        seq *f = s->forks[i];
        f->tm.t_first_scheduled = s->tm.t_first_scheduled;
        f->tm.cached_tokens = s->tm.cached_tokens;
        if (!logits || kv_seq_fork(e->kv, &f->kv, &s->kv, s->n_prompt) != 0) {
            f->state = SEQ_WAITING;
            seq_list_push_front(&e->waiting, f);
            continue;
        }
        f->n_computed = s->n_prompt;
        f->state = SEQ_RUNNING;
        f->admit_order = ++e->admit_counter;
        seq_list_push_back(&e->running, f);
        float *row = e->fork_logits + (size_t)(*n_fork)++ * nv;
        memcpy(row, logits, nv * sizeof *row);
        e->sample_logits[*n_sample] = row;
        e->samplers[(*n_sample)++] = f;
    }
    s->n_forks = 0;
}

/* Builds and runs one batch. Returns false when there was nothing to do. */
/* What one step is building: its budget left, the rows and sequences
 * added so far, and the counts the step records. */
typedef struct step_plan {
    uint64_t t0;
    uint32_t budget, n_batch;
    size_t n_rows;
    uint32_t prefill_rows, decode_rows, cached_rows;
    uint32_t prompt_seqs; /* sequences with prompt rows still to compute */
    uint64_t preempt_before;
    double work;     /* the step's size in the cost model's units */
    double pred_ns;  /* its predicted time */
    double attended; /* positions attended, summed over rows */
    double kv_bytes; /* KV bytes read: each sequence's last row's context */
} step_plan;

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
#define ENGINE_PREFILL_FLOOR_MIN 4u
#define ENGINE_PREFILL_FLOOR_MAX 16u

static uint32_t prefill_floor(const step_plan *pl) {
    uint32_t in_play = pl->decode_rows + pl->prompt_seqs;
    if (in_play < ENGINE_PREFILL_FLOOR_MIN) return ENGINE_PREFILL_FLOOR_MIN;
    return in_play > ENGINE_PREFILL_FLOOR_MAX ? ENGINE_PREFILL_FLOOR_MAX : in_play;
}

/* Prompt rows s gets now: what it still needs, within the step's budget,
 * the per-sequence chunk, what the pool can hold without preempting and,
 * when the step carries decode rows, what keeps the step's predicted time
 * within the ITL target (a step of prompts alone keeps no stream waiting,
 * so it is not cut). */
static uint32_t chunk_for(const engine *e, const seq *s, const step_plan *pl) {
    uint32_t need = s->n_tokens - s->n_computed;
    uint32_t chunk = need < pl->budget ? need : pl->budget;
    if (chunk > e->p.prefill_chunk) chunk = e->p.prefill_chunk;
    if (e->target_ns && pl->decode_rows) {
        uint32_t fit = step_cost_rows_within(&e->cost, pl->pred_ns, (double)e->target_ns,
                                             s->n_computed, chunk);
        uint32_t least = prefill_floor(pl);
        uint32_t floor = pl->prefill_rows < least ? least - pl->prefill_rows : 0;
        if (fit < floor) fit = floor;
        if (chunk > fit) chunk = fit;
    }
    uint32_t room = room_for(e, s);
    return chunk < room ? chunk : room;
}

/* Adds n rows of s to the step, and their cost to its prediction. */
static void plan_rows(engine *e, step_plan *pl, seq *s, uint32_t n) {
    double att = step_cost_chunk_attended(s->n_computed, n);
    double w = step_cost_work(&e->cost, n, att);
    pl->work += w;
    pl->attended += att;
    pl->kv_bytes += engine_kv_bytes_attended(&e->m->cfg, e->kv->kv_type, s->n_computed + n);
    pl->pred_ns += e->cost.c1_ns * w;
    add_rows(e, s, n, &pl->n_rows, &pl->n_batch);
    pl->budget -= n;
}

/* 1. decode first: every running sequence that has all but its newest
 *    token computed gets one row. */
static void plan_decodes(engine *e, step_plan *pl) {
    for (seq *s = e->running.head; s && pl->budget;) {
        seq *next = s->next;
        if (s->n_tokens - s->n_computed == 1 && reserve_or_preempt(e, s, s->n_tokens)) {
            plan_rows(e, pl, s, 1);
            pl->decode_rows++;
        } else if (s->n_tokens - s->n_computed > 1) {
            pl->prompt_seqs++;
        }
        /* a preemption may have removed `next` (it was the newest) */
        s = (next && next->state == SEQ_RUNNING) ? next : NULL;
    }
}

/* 2. prompt chunks of running, partly prefilled sequences, FCFS. Prompt
 *    chunks never preempt (a victim could already have rows in this
 *    batch): they take what the pool can give. */
static void plan_prefill_chunks(engine *e, step_plan *pl) {
    for (seq *s = e->running.head; s && pl->budget; s = s->next) {
        bool in_batch = false;
        for (uint32_t k = 0; k < pl->n_batch; k++)
            in_batch |= e->batch[k] == s;
        if (s->n_tokens - s->n_computed <= 1 || in_batch) continue;
        uint32_t chunk = chunk_for(e, s, pl);
        if (chunk && kv_seq_reserve(e->kv, &s->kv, s->n_computed + chunk) == 0) {
            plan_rows(e, pl, s, chunk);
            pl->prefill_rows += chunk;
        }
    }
}

typedef enum admit_result { ADMITTED, ADMIT_LATER, ADMIT_STOP } admit_result;

/* Admits waiting s with its first chunk: it first takes the prefix cache's
 * blocks for its leading tokens; when another sequence is computing its
 * next block right now, it lets those behind it go first (ADMIT_LATER);
 * without KV for a chunk, admission stops for this step. */
static admit_result admit_one(engine *e, seq *s, step_plan *pl) {
    uint32_t hit = take_cached_prefix(e, s);
    bool wait = prefix_in_flight(e, s, hit);
    uint32_t chunk = wait ? 0 : chunk_for(e, s, pl);
    if (!chunk || kv_seq_reserve(e->kv, &s->kv, s->n_computed + chunk) != 0) {
        kv_seq_release(e->kv, &s->kv); /* the hit waits with it, unheld */
        s->n_computed = 0;
        return wait ? ADMIT_LATER : ADMIT_STOP;
    }
    if (e->kv->pc) {
        e->local.prefix_cache_queries_total += s->n_tokens;
        e->local.prefix_cache_hits_total += hit;
    }
    if (!s->tm.t_first_token) s->tm.cached_tokens = hit < s->n_prompt ? hit : s->n_prompt;
    pl->cached_rows += hit;
    seq_list_remove(&e->waiting, s);
    s->state = SEQ_RUNNING;
    s->admit_order = ++e->admit_counter;
    seq_list_push_back(&e->running, s);
    if (!s->tm.t_first_scheduled) s->tm.t_first_scheduled = pl->t0;
    plan_rows(e, pl, s, chunk);
    pl->prefill_rows += chunk;
    return ADMITTED;
}

/* 3. admit waiting sequences while there is budget, a sequence slot for
 *    each of their choices and KV for their first chunk; never right after
 *    a preemption. */
static void plan_admissions(engine *e, step_plan *pl) {
    for (seq *s = e->waiting.head, *next; s && pl->budget; s = next) {
        next = s->next;
        if (e->running.n + 1 + s->n_forks > e->p.max_seqs ||
            e->local.preemptions_total != pl->preempt_before || admit_one(e, s, pl) == ADMIT_STOP)
            break;
    }
}

/* After a forward pass: advance and index each sequence's computed KV,
 * fork the choices of prompts just computed, sample every sequence whose
 * tokens are all computed, and hand out the tokens. Returns the tokens
 * generated (end-of-generation ids are not). */
static uint32_t sample_batch(engine *e, uint32_t n_batch, const float *logits, uint64_t t1) {
    uint32_t n_sample = 0, n_logit_rows = 0, n_fork = 0, generated = 0;
    for (uint32_t k = 0; k < n_batch; k++) {
        seq *s = e->batch[k];
        s->n_computed += e->batch_rows[k];
        kv_seq_commit(e->kv, &s->kv, s->tokens, s->n_computed);
        if (s->n_computed == s->n_tokens) n_fork += s->n_forks;
    }
    bool forks_ok = n_fork == 0 || reserve_fork_logits(e, n_fork);
    n_fork = 0;
    for (uint32_t k = 0; k < n_batch; k++) {
        seq *s = e->batch[k];
        if (s->n_computed != s->n_tokens) continue;
        const float *row = logits + (size_t)n_logit_rows++ * e->m->cfg.n_vocab;
        e->sample_logits[n_sample] = row;
        e->samplers[n_sample++] = s;
        if (s->n_forks) fork_choices(e, s, forks_ok ? row : NULL, &n_sample, &n_fork);
    }
    sample_all(e, n_sample);
    for (uint32_t k = 0; k < n_sample; k++) {
        seq *s = e->samplers[k];
        if (!s->tm.t_first_token && s->choice == 0) e->local.prompt_tokens_total += s->n_prompt;
        generated += on_token(e, s, e->sampled[k], t1);
    }
    return generated;
}

/* Counters, step histograms and the trace's step record. */
static void record_step(engine *e, const step_plan *pl, uint32_t generated, size_t n_logits,
                        uint64_t t1) {
    e->local.steps_total++;
    e->local.prefill_rows_total += pl->prefill_rows;
    e->local.generation_tokens_total += generated;
    if (e->target_ns && pl->decode_rows && t1 - pl->t0 > e->target_ns)
        e->local.steps_over_itl_target_total++;
    e->local.step_cost_fixed_ns = (uint64_t)e->cost.c0_ns;
    e->local.step_cost_row_ns = (uint64_t)e->cost.c1_ns;
    /* the roofline's inputs: every weight once per step (the batch shares
     * the stream), each sequence's KV once, and the multiply-adds */
    e->local.step_seconds_total += (double)(t1 - pl->t0) * 1e-9;
    const fwd_step_stats fst = fwd_state_last_step(e->fs); /* counted where read */
    e->local.weight_bytes_read_total += (double)fst.weight_bytes;
    e->local.experts_run_total += fst.experts;
    e->local.kv_bytes_read_total += pl->kv_bytes;
    e->local.macs_total += (double)pl->n_rows * e->macs.body + (double)n_logits * e->macs.head +
                           pl->attended * e->macs.per_attended;
    pthread_mutex_lock(&e->mu);
    hist_record(e->h_step_ns, t1 - pl->t0);
    hist_record(e->h_step_tokens, pl->n_rows);
    pthread_mutex_unlock(&e->mu);
    sync_stats(e);
    if (!e->p.trace_path) return;
    trace_step ts = {.t0 = pl->t0,
                     .t1 = t1,
                     .prefill_tokens = pl->prefill_rows,
                     .decode_tokens = pl->decode_rows,
                     .running = e->running.n,
                     .waiting = e->waiting.n,
                     .kv_blocks = kv_cache_blocks_used(e->kv),
                     .preemptions = (uint32_t)(e->local.preemptions_total - pl->preempt_before),
                     .cached_tokens = pl->cached_rows,
                     .predicted_ns = (uint64_t)pl->pred_ns,
                     .weight_bytes = fst.weight_bytes,
                     .experts = (uint32_t)fst.experts};
    trace_step_add(&e->tr, &ts);
}

/* Builds and runs one batch. Returns false when there was nothing to do. */
static bool step(engine *e) {
    step_plan pl = {.t0 = tps_now_ns(),
                    .budget = e->p.max_batch_tokens,
                    .preempt_before = e->local.preemptions_total,
                    .pred_ns = e->cost.c0_ns};
    take_requests(e, pl.t0);
    pl.prompt_seqs = e->waiting.n;
    plan_decodes(e, &pl);
    plan_prefill_chunks(e, &pl);
    plan_admissions(e, &pl);
    if (pl.n_rows == 0) {
        sync_stats(e);
        publish(e, tps_now_ns()); /* cancellations */
        return e->running.n || e->waiting.n;
    }
    fwd_batch b = {.n_rows = pl.n_rows, .rows = e->rows, .seqs = e->row_seqs};
    const float *logits;
    size_t n_logits = 0;
    tps_err err = {0};
    int rc = llama_forward(e->fs, e->m, e->kv, &b, &logits, &n_logits, &err);
    uint64_t t1 = tps_now_ns();
    uint32_t generated = 0;
    if (rc) /* a forward failure is the batch's, not the server's: fail these requests */
        for (uint32_t k = 0; k < pl.n_batch; k++) {
            seq_list_remove(&e->running, e->batch[k]);
            finish(e, e->batch[k], ENGINE_FINISH_ERROR, t1, err.msg);
        }
    else {
        generated = sample_batch(e, pl.n_batch, logits, t1);
        step_cost_observe(&e->cost, pl.work, (double)(t1 - pl.t0));
    }
    record_step(e, &pl, generated, rc ? 0 : n_logits, t1);
    publish(e, t1);
    return true;
}

/* ---- sampling ------------------------------------------------------------ */

/* Each sampling sequence draws from its own sampler and RNG and its own
 * logits row, so the draws are independent tasks on the kernels' thread
 * pool; a full-vocabulary draw (temperature without top-k) is tens of
 * microseconds per sequence, which a 32-sequence step otherwise pays
 * serially. Same tokens whatever thread draws them. */
static void sample_task(void *arg, size_t k, int thread) {
    (void)thread;
    engine *e = arg;
    seq *s = e->samplers[k];
    if (s->lp_raw) { /* the raw row, before the sampler rewrites it */
        const size_t nv = (size_t)e->svocab.n_vocab;
        memcpy(s->lp_raw, e->sample_logits[k], nv * sizeof *s->lp_raw);
        s->lp_lse = logprobs_lse(s->lp_raw, nv);
        s->lp_n_top =
            (uint32_t)logprobs_top(s->lp_top_id, s->lp_top, s->lp_raw, nv, s->lp_k, s->lp_lse);
    }
    /* the grammar's mask after the logprobs' copy, before the sampler: it
     * only sets logits to -inf, which logit_bias and the penalties keep at
     * -inf, so it acts as if applied after logit_bias */
    seq_rules_mask(s, (float *)e->sample_logits[k], &e->rules);
    e->sampled[k] = sampler_sample(s->smp, (float *)e->sample_logits[k]);
}

static void sample_all(engine *e, uint32_t n) {
    tps_pool *pool = n > 1 ? kernel_ctx_pool(fwd_state_kernels(e->fs)) : NULL;
    if (pool)
        tps_pool_run(pool, n, sample_task, e);
    else
        for (uint32_t k = 0; k < n; k++)
            sample_task(e, k, 0);
}

/* Idle-time slices of KV pool warming: one huge page of each map, a few
 * milliseconds, so a request arriving meanwhile waits little. */
#define ENGINE_WARM_SLICE (2u << 20)

static void *engine_main(void *arg) {
    engine *e = arg;
    bool warming = true;
    for (;;) {
        pthread_mutex_lock(&e->mu);
        while (!e->stopping && !e->reset_prefix && !e->incoming.n && !e->n_cancels &&
               !e->waiting.n && !e->running.n) {
            if (warming) { /* nothing to do: fault in the next slice of the pool */
                pthread_mutex_unlock(&e->mu);
                warming = kv_cache_warm(e->kv, ENGINE_WARM_SLICE);
                pthread_mutex_lock(&e->mu);
                e->local.kv_pool_warm = e->st.kv_pool_warm = !warming;
                continue;
            }
            pthread_cond_wait(&e->work_cv, &e->mu);
        }
        bool stop = e->stopping, reset = e->reset_prefix;
        e->reset_prefix = false;
        pthread_mutex_unlock(&e->mu);
        if (stop) break;
        if (reset) { /* between steps: the next admission finds an empty cache */
            kv_cache_reset_prefix(e->kv);
            sync_stats(e);
            continue;
        }
        if (!step(e)) {
            /* Work exists but nothing could be scheduled (cannot happen
             * while submit checks that every request fits the pool alone):
             * wait for news rather than spin. */
            pthread_mutex_lock(&e->mu);
            if (!e->stopping && !e->incoming.n && !e->n_cancels)
                tps_cond_wait_ns(&e->work_cv, &e->mu, TPS_NS_PER_MS);
            pthread_mutex_unlock(&e->mu);
        }
    }
    return NULL;
}

/* ---- create / destroy ----------------------------------------------------- */

/* One forward row before serving: pages the mmapped weights in and starts
 * the kernel threads, so the first request's prefill time measures compute,
 * not page faults. Its KV block goes straight back to the pool. */
/* Times n rows of one scratch sequence from position 0 (the best of
 * reps runs); the sequence's blocks are released, never indexed. */
static int time_rows(engine *e, uint32_t n, int reps, double *best_ns, tps_err *err) {
    kv_seq ks = {0};
    if (kv_seq_init(&ks, kv_blocks_for(e->kv, n)) || kv_seq_reserve(e->kv, &ks, n)) {
        kv_seq_destroy(&ks);
        return tps_fail(err, TPS_ENOMEM, "engine: KV pool has no room for the warm-up");
    }
    const kv_seq *seqs[] = {&ks};
    for (uint32_t i = 0; i < n; i++)
        e->rows[i] = (fwd_row){.token = 0, .pos = i, .seq = 0, .want_logits = i + 1 == n};
    fwd_batch b = {.n_rows = n, .rows = e->rows, .seqs = seqs};
    int rc = 0;
    *best_ns = 0;
    for (int r = 0; r < reps && !rc; r++) {
        const float *logits;
        size_t nl;
        uint64_t t0 = tps_now_ns();
        rc = llama_forward(e->fs, e->m, e->kv, &b, &logits, &nl, err);
        double ns = (double)(tps_now_ns() - t0);
        if (r == 0 || ns < *best_ns) *best_ns = ns;
    }
    kv_seq_release(e->kv, &ks);
    kv_seq_destroy(&ks);
    return rc;
}

double engine_kv_bytes_attended(const llama_config *c, uint32_t kv_type, uint64_t n_ctx) {
    const double row = (double)kv_cache_row_bytes(kv_type, c->n_kv_heads * c->head_dim);
    double positions = 0;
    for (uint32_t l = 0; l < c->n_layers; l++)
        positions += (double)(llama_config_is_swa(c, l) && n_ctx > c->n_swa ? c->n_swa : n_ctx);
    return 2.0 * row * positions;
}

engine_macs engine_macs_of(const llama_config *c) {
    const double kv_dim = (double)c->n_kv_heads * c->head_dim;
    const double q_dim = (double)c->n_heads * c->head_dim;
    return (engine_macs){.body = (double)c->n_layers * (c->dim * (q_dim + 2 * kv_dim) +
                                                        q_dim * c->dim + llama_config_ffn_macs(c)),
                         .head = (double)c->dim * c->n_vocab,
                         .per_attended = (double)c->n_layers * 2.0 * q_dim};
}

/* Faults in the forward state with one step; with an ITL target, primes
 * the step-time model with a one-row and a many-row step and resolves
 * the automatic target from them. */
static int warm_up(engine *e, tps_err *err) {
    double t1, tn;
    int rc = time_rows(e, 1, 1, &t1, err);
    e->macs = engine_macs_of(&e->m->cfg);
    /* an attended position in row-equivalents, x 4: attention runs in fp32
     * over scattered KV, the weights in int8 over packed rows */
    step_cost_init(&e->cost, 4.0 * e->macs.per_attended / (e->macs.body + e->macs.head));
    if (rc || e->p.itl_target_ms == 0) return rc;
    uint32_t n = 64;
    if (n > e->p.max_batch_tokens) n = e->p.max_batch_tokens;
    if (n > e->n_ctx) n = e->n_ctx;
    if (n > kv_cache_available(e->kv) * e->kv->block_tokens)
        n = kv_cache_available(e->kv) * e->kv->block_tokens;
    if ((rc = time_rows(e, 1, 3, &t1, err))) return rc;
    if (n < 2) {
        step_cost_prime(&e->cost, 1, t1, 2, 2 * t1);
    } else {
        if ((rc = time_rows(e, n, 2, &tn, err))) return rc;
        const step_cost *c = &e->cost;
        step_cost_prime(&e->cost, step_cost_work(c, 1, 1), t1,
                        step_cost_work(c, n, step_cost_chunk_attended(0, n)), tn);
    }
    if (e->p.itl_target_ms < 0) {
        double ns = 3 * t1;
        if (ns < ENGINE_ITL_TARGET_FLOOR_MS * 1e6) ns = ENGINE_ITL_TARGET_FLOOR_MS * 1e6;
        e->p.itl_target_ms = ns / 1e6;
    }
    e->target_ns = (uint64_t)(e->p.itl_target_ms * 1e6);
    return 0;
}

/* Local-pool blocks the engine can ever hold at once: every sequence its
 * window's blocks plus one it is filling, and one step's prompt rows. */
static uint32_t local_blocks_needed(const engine *e, uint32_t window) {
    const uint64_t B = e->p.kv_block;
    uint64_t n =
        (uint64_t)e->p.max_seqs * ((window + B - 1) / B + 2) + (e->p.max_batch_tokens + B - 1) / B;
    return n > UINT32_MAX / 2 ? UINT32_MAX / 2 : (uint32_t)n;
}

/* The KV pool: --kv-mem, or --kv-tokens, or by default max_seqs full
 * contexts capped at 1 GiB. Sliding-window layers get a pool of their own
 * sized by local_blocks_needed (kv_cache.h). */
static int create_kv(engine *e, tps_err *err) {
    const llama_config *c = &e->m->cfg;
    uint8_t *local = calloc(c->n_layers ? c->n_layers : 1, 1);
    if (!local) return tps_fail(err, TPS_ENOMEM, "engine: out of memory");
    uint32_t n_local = 0;
    for (uint32_t l = 0; l < c->n_layers; l++)
        n_local += local[l] = (uint8_t)llama_config_is_swa(c, l);
    kv_cache_params kp = {.n_layers = c->n_layers,
                          .kv_dim = c->n_kv_heads * c->head_dim,
                          .head_dim = c->head_dim,
                          .block_tokens = e->p.kv_block,
                          .kv_type = e->p.kv_type,
                          .mem_bytes = e->p.kv_mem,
                          .prefix_cache = !e->p.no_prefix_cache,
                          .local_layers = local,
                          .window = c->n_swa,
                          .n_local_blocks = local_blocks_needed(e, c->n_swa)};
    if (!kp.mem_bytes) {
        uint64_t tokens = e->p.kv_tokens ? e->p.kv_tokens : (uint64_t)e->p.max_seqs * e->n_ctx;
        uint64_t blocks = (tokens + kp.block_tokens - 1) / kp.block_tokens;
        if (n_local == c->n_layers) n_local = 0; /* kv_cache keeps them in one pool */
        /* the cap counts the global layers' blocks and as many local ones */
        size_t bb = kv_cache_block_bytes(kp.n_layers - n_local, kp.kv_dim, kp.block_tokens,
                                         kp.kv_type),
               lb = kv_cache_block_bytes(n_local, kp.kv_dim, kp.block_tokens, kp.kv_type);
        uint64_t nl = blocks < kp.n_local_blocks ? blocks : kp.n_local_blocks;
        if (!e->p.kv_tokens && blocks * bb + nl * lb > (1ull << 30))
            blocks = (1ull << 30) > nl * lb ? ((1ull << 30) - nl * lb) / bb : 1;
        if (blocks < 1) blocks = 1;
        kp.n_blocks = (uint32_t)blocks;
    }
    if (!e->p.kv_prefault) {
        /* the bound counts global blocks (the local pool is small and bounded) */
        const uint32_t n_global = n_local == c->n_layers ? c->n_layers : c->n_layers - n_local;
        const size_t bb = kv_cache_block_bytes(n_global, kp.kv_dim, kp.block_tokens, kp.kv_type);
        uint64_t pool = kp.n_blocks ? kp.n_blocks : kp.mem_bytes / bb;
        uint64_t resident = ENGINE_KV_RESIDENT_MIN / bb;
        if (resident < pool / 8) resident = pool / 8;
        kp.resident_blocks = resident < pool ? (uint32_t)resident : 0; /* 0: the whole pool */
    }
    int rc = kv_cache_create(&e->kv, &kp, err);
    free(local);
    if (!rc) e->p.kv_mem = 2 * e->kv->map_bytes;
    return rc;
}

/* Step buffers, sized once. A step samples its batch's rows plus the
 * choices forked in it, which never outnumber the sequences that may run. */
static int alloc_step_buffers(engine *e, tps_err *err) {
    size_t mb = e->p.max_batch_tokens;
    e->rows = calloc(mb, sizeof *e->rows);
    e->row_seqs = calloc(mb, sizeof *e->row_seqs);
    e->batch = calloc(mb, sizeof *e->batch);
    e->batch_rows = calloc(mb, sizeof *e->batch_rows);
    e->cap_samplers = mb + e->p.max_seqs;
    e->samplers = calloc(e->cap_samplers, sizeof *e->samplers);
    e->sample_logits = calloc(e->cap_samplers, sizeof *e->sample_logits);
    e->sampled = calloc(e->cap_samplers, sizeof *e->sampled);
    if (!e->rows || !e->row_seqs || !e->batch || !e->batch_rows || !e->samplers ||
        !e->sample_logits || !e->sampled)
        return tps_fail(err, TPS_ENOMEM, "engine: out of memory");
    return 0;
}

int engine_create(engine **out, const engine_params *p, tps_err *err) {
    *out = NULL;
    engine *e = calloc(1, sizeof *e);
    if (!e) return tps_fail(err, TPS_ENOMEM, "engine: out of memory");
    e->efd = -1;
    e->p = *p;
    e->m = p->model;
    e->tok = p->tok;
    const llama_config *c = &e->m->cfg;
    e->n_ctx = c->ctx_len;
    if (!e->p.max_seqs) e->p.max_seqs = 64;
    if (!e->p.max_batch_tokens) e->p.max_batch_tokens = 256;
    if (!e->p.prefill_chunk || e->p.prefill_chunk > e->p.max_batch_tokens)
        e->p.prefill_chunk = e->p.max_batch_tokens;
    if (!e->p.kv_block) e->p.kv_block = 16;
    /* kv_type comes from engine_params_default (F16); 0 is F32, asked for */
    int rc;
    pthread_mutex_init(&e->mu, NULL);
    pthread_mutex_init(&e->trie_mu, NULL);
    tps_cond_init_monotonic(&e->work_cv);
    tps_cond_init_monotonic(&e->ev_cv);
    if (tokenizer_n_vocab(e->tok) > c->n_vocab) {
        rc = tps_fail(err, TPS_EINVAL, "engine: tokenizer has %u tokens, the model %u",
                      tokenizer_n_vocab(e->tok), c->n_vocab);
        goto fail;
    }
    e->svocab.n_vocab = (int32_t)c->n_vocab;
    e->svocab.n_ctx = (int32_t)e->n_ctx;
    for (int32_t id = 0;
         id < (int32_t)tokenizer_n_vocab(e->tok) && e->svocab.n_eog < SAMPLER_MAX_EOG; id++)
        if (tokenizer_is_eog(e->tok, id)) e->svocab.eog_ids[e->svocab.n_eog++] = id;
    e->rules = (seq_rules_vocab){
        .n_vocab = e->svocab.n_vocab,
        .eog = e->svocab.eog_ids,
        .n_eog = (size_t)e->svocab.n_eog,
        .think_open = tokenizer_find(e->tok, THINK_OPEN, sizeof THINK_OPEN - 1),
        .think_close = tokenizer_find(e->tok, THINK_CLOSE, sizeof THINK_CLOSE - 1)};

    if ((rc = create_kv(e, err))) goto fail;
    if ((rc = fwd_state_create(&e->fs, e->m, e->p.max_batch_tokens, e->n_ctx, e->p.n_threads, err)))
        goto fail;
    if ((rc = alloc_step_buffers(e, err))) goto fail;
    hist_config hc = HIST_CONFIG_LATENCY_NS, cc = ENGINE_HIST_STEP_TOKENS;
    if ((rc = hist_create(&e->h_step_ns, &hc, err)) ||
        (rc = hist_create(&e->h_step_tokens, &cc, err)))
        goto fail;
    e->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (e->efd < 0) {
        rc = tps_fail(err, TPS_EIO, "engine: eventfd: %s", strerror(errno));
        goto fail;
    }
    if ((rc = warm_up(e, err))) goto fail;
    /* fixed for the engine's life: in local, which every sync copies */
    e->local.kv_blocks_total = e->kv->n_blocks;
    e->local.kv_local_blocks_total = e->kv->n_lblocks;
    e->local.kv_blocks_resident = e->kv->pc ? e->kv->resident_blocks : 0;
    e->local.kv_block_tokens = e->kv->block_tokens;
    e->local.n_ctx = e->n_ctx;
    e->local.model_experts = e->m->cfg.n_expert;
    e->local.model_layers = e->m->cfg.n_layers;
    e->local.itl_target_ns = e->target_ns;
    e->local.step_cost_fixed_ns = (uint64_t)e->cost.c0_ns;
    e->local.step_cost_row_ns = (uint64_t)e->cost.c1_ns;
    e->st = e->local;
    trace_init(&e->tr, tps_now_ns());
    if (pthread_create(&e->thread, NULL, engine_main, e) != 0) {
        rc = tps_fail(err, TPS_EIO, "engine: cannot start the engine thread");
        goto fail;
    }
    e->thread_started = true;
    *out = e;
    return 0;
fail:
    engine_destroy(e);
    return rc;
}

void engine_destroy(engine *e) {
    if (!e) return;
    if (e->thread_started) {
        pthread_mutex_lock(&e->mu);
        e->stopping = true;
        pthread_cond_broadcast(&e->work_cv);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->thread, NULL);
    }
    seq_list *lists[] = {&e->running, &e->waiting, &e->incoming};
    for (int l = 0; l < 3; l++)
        while (lists[l]->head) {
            seq *s = lists[l]->head;
            seq_list_remove(lists[l], s);
            if (e->kv) kv_seq_release(e->kv, &s->kv);
            seq_free(s);
        }
    if (e->p.trace_path && e->thread_started) {
        tps_err err = {0};
        if (trace_write(&e->tr, e->p.trace_path, &err) != 0) fprintf(stderr, "tps: %s\n", err.msg);
    }
    trace_free(&e->tr);
    if (e->efd >= 0) close(e->efd);
    hist_free(e->h_step_ns);
    hist_free(e->h_step_tokens);
    free(e->rows);
    free(e->row_seqs);
    free(e->batch);
    free(e->batch_rows);
    free(e->sampled);
    free(e->sample_logits);
    free(e->samplers);
    free(e->fork_logits);
    free(e->pending);
    free(e->evq);
    free(e->cancels);
    fwd_state_free(e->fs);
    kv_cache_free(e->kv);
    pthread_mutex_destroy(&e->mu);
    pthread_mutex_destroy(&e->trie_mu);
    vocab_trie_free(e->trie);
    pthread_cond_destroy(&e->work_cv);
    pthread_cond_destroy(&e->ev_cv);
    free(e);
}
