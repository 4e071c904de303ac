/* The engine's request API, callable from any thread (engine.h): submit
 * (checks, then a request's sequences built and queued), cancel, the event
 * queue, stats. Never waits on a step: it takes the mutex the engine
 * thread takes a few times per step. Not here: the engine thread
 * (engine_step.c), the object's lifecycle (engine.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/cost/admit.h" /* the one admission rule */
#include "engine/core/engine_internal.h"
#include "constrain/constrain.h" /* the one compile path */
#include "base/clock.h"
#include "base/cond.h"
#include "base/grow.h"

const engine_params *engine_get_params(const engine *e) {
    return &e->p;
}

/* ---- sequences ---------------------------------------------------------- */

void engine_seq_free(seq *s) {
    if (!s) return;
    for (uint32_t i = 0; i < s->n_forks; i++)
        engine_seq_free(s->forks[i]);
    free(s->forks);
    free(s->lp_raw);
    sched_seq_clear(s);
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
    int rc = sched_seq_init(s, e->kv, r->prompt, (uint32_t)r->n_prompt, r->max_tokens);
    if (rc) {
        engine_seq_free(s);
        return tps_fail(err, rc, "engine: out of memory");
    }
    s->user = r->user;
    s->choice = choice;
    if (r->logprobs) {
        s->lp_k = r->top_logprobs;
        if (!(s->lp_raw = malloc(sizeof(float) * (size_t)e->svocab.n_vocab))) {
            engine_seq_free(s);
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
        engine_seq_free(s);
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
        engine_seq_free(s);
        return tps_fail(err, TPS_ENOMEM, "engine: out of memory");
    }
    for (uint32_t i = 1; i < n; i++) {
        if ((rc = seq_create(e, r, i, &s->forks[s->n_forks], err))) {
            engine_seq_free(s);
            return rc;
        }
        s->n_forks++;
    }
    *out = s;
    return 0;
}

/* KV blocks n choices of prompt + max_tokens need at once: the prompt's
 * full blocks once, everything after them once per choice. */
void engine_admit_pool(const engine *e, admit_pool *out) {
    *out = (admit_pool){.n_ctx = e->n_ctx,
                        .max_seqs = e->p.max_seqs,
                        .block_tokens = e->kv->block_tokens,
                        .n_blocks = e->kv->n_blocks,
                        .max_queue = e->p.max_queue};
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
    const think_kind kind = (unsigned)rq->think_kind < THINK_N_KINDS ? rq->think_kind : THINK_TAGS;
    if (rq->think != THINK_OFF && rq->think_budget >= 0 && !e->rules.n_close_ids[kind])
        return tps_fail(err, TPS_EINVAL,
                        "a thinking budget needs the vocabulary to spell \"%s\" in at most %d "
                        "tokens",
                        think_markers_of(kind)->close, SEQ_CLOSE_MAX);
    return 0;
}

int engine_submit(engine *e, const engine_request *r, uint64_t *id, tps_err *err) {
    engine_request rq = *r;
    admit_pool pool;
    engine_admit_pool(e, &pool);
    const uint32_t n = rq.n ? rq.n : 1;
    int rc = admit_request(&pool, rq.n_prompt, &rq.max_tokens, n, err); /* never fits? */
    if (rc) return rc;
    for (size_t i = 0; i < rq.n_prompt; i++)
        if (rq.prompt[i] < 0 || (uint32_t)rq.prompt[i] >= e->m->cfg.n_vocab)
            return tps_fail(err, TPS_EINVAL,
                            "prompt token %zu is id %d, outside the vocabulary (0..%u)", i,
                            rq.prompt[i], e->m->cfg.n_vocab - 1);
    if ((rc = check_options(e, &rq, err))) return rc;
    constraint_prog *own = NULL; /* compiled here from rq.grammar: once for every choice */
    if ((rq.grammar_prog || rq.grammar) && (rc = engine_constraints_prepare(e, err))) return rc;
    if (!rq.grammar_prog && rq.grammar) {
        bool hit; /* no cache here: compiled as it is */
        if ((rc = constrain_compile(NULL, rq.grammar, rq.grammar_len, 0, &own, &hit, err)))
            return rc;
        rq.grammar_prog = own;
    }
    seq *s = NULL;
    rc = seq_group_create(e, &rq, n, &s, err);
    constrain_release(NULL, own, 0); /* the choices hold their own references */
    if (rc) return rc;
    pthread_mutex_lock(&e->mu);
    if (e->stopping) {
        pthread_mutex_unlock(&e->mu);
        engine_seq_free(s);
        return tps_fail(err, TPS_EFULL, "engine is shutting down");
    }
    if ((rc = admit_queue(&pool, e->incoming.n + e->st.requests_waiting, err))) { /* later */
        pthread_mutex_unlock(&e->mu);
        engine_seq_free(s);
        return rc;
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
