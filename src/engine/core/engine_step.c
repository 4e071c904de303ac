/* The engine thread (engine_internal.h): its loop, and one step: take the
 * requests and cancels that came in, plan the step (planner.h), run the
 * forward pass over the plan's rows, commit them, sample (one task per
 * sampling sequence on the kernels' pool), hand out tokens, fork the
 * choices of prompts just computed, record the step and publish its events
 * under one lock. Not here: the step policy (planner.c), the request API
 * (engine_api.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/core/engine_internal.h"
#include "base/clock.h"
#include "base/cond.h"
#include "base/grow.h"

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
        ev->stop_string = why == ENGINE_FINISH_STOP && s->stop.matched ? s->stop.which : -1;
        if (error) snprintf(ev->error, sizeof ev->error, "%s", error);
    }
    if (e->p.trace_path) trace_req_add(&e->tr, s->id, s->choice, &s->tm, why);
    e->local.requests_total[why]++;
    engine_seq_free(s);
}

/* ---- one step ------------------------------------------------------------- */

/* Publishes the engine thread's counters and gauges for engine_get_stats. */
static void sync_stats(engine *e) {
    e->local.requests_running = e->sc.running.n;
    e->local.requests_waiting = e->sc.waiting.n;
    e->local.preemptions_total = e->sc.preemptions_total;
    e->local.prefix_cache_queries_total = e->sc.prefix_queries_total;
    e->local.prefix_cache_hits_total = e->sc.prefix_hits_total;
    e->local.kv_blocks_used = kv_cache_blocks_used(e->kv);
    e->local.kv_local_blocks_used = kv_cache_local_blocks_used(e->kv);
    e->local.state_slots_used = kv_cache_states_used(e->kv);
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
        seq_list_push_back(&e->sc.waiting, s);
        e->taken++;
    }
    /* engine_submit's queue limit counts incoming + published waiting: publish
     * the taken requests now, not at the step's end, or a burst of submits
     * during the step sees neither and overfills the queue */
    e->st.requests_waiting = e->sc.waiting.n;
    size_t nc = e->n_cancels;
    uint64_t local[64];
    uint64_t *ids = nc <= 64 ? local : malloc(nc * sizeof *ids);
    if (ids && nc) memcpy(ids, e->cancels, nc * sizeof *ids);
    e->n_cancels = 0;
    pthread_mutex_unlock(&e->mu);
    if (!ids) return;
    /* every choice of the request: forked ones run as sequences of their own */
    for (size_t i = 0; i < nc; i++) {
        seq_list *lists[] = {&e->sc.running, &e->sc.waiting};
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

/* Handles a sampled token for s (s may finish and be freed); returns true
 * when it was an output token (an end-of-generation or stop id is not). */
static bool on_token(engine *e, seq *s, int32_t tok, uint64_t t_now) {
    /* the grammar allowed nothing, or the sampler had to pick a masked
     * token (logit_bias, ignore_eos or min_tokens took every allowed one
     * away) */
    if (tok < 0 && !s->cons_dead) {
        seq_list_remove(&e->sc.running, s);
        finish(e, s, ENGINE_FINISH_ERROR, t_now,
               "sampling: no token of the vocabulary can be sampled (every logit is -inf or "
               "NaN: logit_bias, the model's suppressed tokens, ignore_eos or min_tokens banned "
               "them all)");
        return false;
    }
    if (s->cons_dead || seq_rules_grammar_take(s, tok, &e->rules) != 0) {
        seq_list_remove(&e->sc.running, s);
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
        seq_list_remove(&e->sc.running, s);
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
        seq_list_remove(&e->sc.running, s);
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
        if (!sched_fork(&e->sc, s, f, logits != NULL)) continue;
        float *row = e->fork_logits + (size_t)(*n_fork)++ * nv;
        memcpy(row, logits, nv * sizeof *row);
        e->sample_logits[*n_sample] = row;
        e->samplers[(*n_sample)++] = f;
    }
    s->n_forks = 0;
}

/* After a forward pass and sched_commit: fork the choices of prompts just
 * computed, sample every sequence whose tokens are all computed, and hand
 * out the tokens. Returns the tokens generated (end-of-generation ids are
 * not). */
static uint32_t sample_batch(engine *e, const sched_plan *pl, const float *logits, uint64_t t1) {
    uint32_t n_sample = 0, n_logit_rows = 0, n_fork = 0, generated = 0;
    for (uint32_t k = 0; k < pl->n_batch; k++) {
        seq *s = pl->batch[k];
        if (s->n_computed == s->n_tokens) n_fork += s->n_forks;
    }
    bool forks_ok = n_fork == 0 || reserve_fork_logits(e, n_fork);
    n_fork = 0;
    for (uint32_t k = 0; k < pl->n_batch; k++) {
        seq *s = pl->batch[k];
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

/* The forward pass's rows for the plan: each batch sequence's rows in
 * position order, the last one of a sequence's tokens wanting logits; and
 * the K/V bytes the step reads (each sequence's context once). */
static double build_rows(engine *e, const sched_plan *pl) {
    size_t n = 0;
    double kv_bytes = 0;
    for (uint32_t k = 0; k < pl->n_batch; k++) {
        const seq *s = pl->batch[k];
        e->row_seqs[k] = &s->kv;
        for (uint32_t i = 0; i < pl->rows[k]; i++) {
            uint32_t pos = s->n_computed + i;
            e->rows[n++] = (fwd_row){.token = s->tokens[pos],
                                     .pos = pos,
                                     .seq = k,
                                     .want_logits = pos + 1 == s->n_tokens};
        }
        kv_bytes +=
            engine_kv_bytes_attended(&e->m->cfg, e->kv->kv_type, s->n_computed + pl->rows[k]);
    }
    return kv_bytes;
}

/* Counters, step histograms and the trace's step record. */
static void record_step(engine *e, const sched_plan *pl, double kv_bytes, uint32_t generated,
                        size_t n_logits, uint64_t t1) {
    e->local.steps_total++;
    e->local.prefill_rows_total += pl->prefill_rows;
    e->local.generation_tokens_total += generated;
    if (e->sc.target_ns && pl->decode_rows && t1 - pl->t0 > e->sc.target_ns)
        e->local.steps_over_itl_target_total++;
    e->local.step_cost_fixed_ns = (uint64_t)e->sc.cost.c0_ns;
    e->local.step_cost_row_ns = (uint64_t)e->sc.cost.c1_ns;
    /* the roofline's inputs: every weight once per step (the batch shares
     * the stream), each sequence's KV once, and the multiply-adds */
    e->local.step_seconds_total += (double)(t1 - pl->t0) * 1e-9;
    const fwd_step_stats fst = fwd_state_last_step(e->fs); /* counted where read */
    e->local.weight_bytes_read_total += (double)fst.weight_bytes;
    e->local.experts_run_total += fst.experts;
    e->local.kv_bytes_read_total += kv_bytes;
    e->local.macs_total += (double)pl->n_rows * e->macs.body + (double)n_logits * e->macs.head +
                           pl->attended * e->macs.per_attended;
    pthread_mutex_lock(&e->mu);
    hist_record(e->h_step_ns, t1 - pl->t0);
    hist_record(e->h_step_tokens, pl->n_rows);
    pthread_mutex_unlock(&e->mu);
    sync_stats(e);
}

/* After the step's events are published (t2): the trace's step record,
 * and the step observer. */
static void after_step(engine *e, const sched_plan *pl, uint64_t t1) {
    const uint64_t t2 = tps_now_ns();
    if (e->p.trace_path) {
        const fwd_step_stats fst = fwd_state_last_step(e->fs); /* the step just run's */
        trace_step ts = {.t0 = pl->t0,
                         .t1 = t1,
                         .t2 = t2,
                         .taken = e->taken,
                         .prefill_tokens = pl->prefill_rows,
                         .decode_tokens = pl->decode_rows,
                         .running = e->sc.running.n,
                         .waiting = e->sc.waiting.n,
                         .kv_blocks = kv_cache_blocks_used(e->kv),
                         .preemptions = pl->preempted,
                         .cached_tokens = pl->cached_rows,
                         .predicted_ns = (uint64_t)pl->pred_ns,
                         .weight_bytes = fst.weight_bytes,
                         .experts = (uint32_t)fst.experts};
        trace_step_add(&e->tr, &ts);
    }
    e->taken = 0;
    if (!e->p.on_step) return;
    engine_step_obs o = {.rows = pl->n_rows,
                         .logit_rows = pl->logit_rows,
                         .prefill_rows = pl->prefill_rows,
                         .decode_rows = pl->decode_rows,
                         .seqs = pl->n_batch,
                         .attended = pl->attended,
                         .kv_positions = pl->kv_positions,
                         .t0 = pl->t0,
                         .t1 = t1,
                         .t2 = t2};
    e->p.on_step(e->p.on_step_arg, &o);
}

/* Plans and runs one batch. Returns false when there was nothing to do. */
static bool step(engine *e) {
    take_requests(e, tps_now_ns());
    /* read after the take: a request submitted while the step began is
     * taken by it, and its first step must not start before its submit
     * (the trace's queued span, a replay's arrival order) */
    const uint64_t t0 = tps_now_ns();
    sched_plan pl;
    sched_plan_step(&e->sc, &pl, t0);
    if (pl.n_rows == 0) {
        sync_stats(e);
        publish(e, tps_now_ns()); /* cancellations */
        return e->sc.running.n || e->sc.waiting.n;
    }
    double kv_bytes = build_rows(e, &pl);
    fwd_batch b = {.n_rows = pl.n_rows, .rows = e->rows, .seqs = e->row_seqs};
    const float *logits;
    size_t n_logits = 0;
    tps_err err = {0};
    int rc = llama_forward(e->fs, e->m, e->kv, &b, &logits, &n_logits, &err);
    uint64_t t1 = tps_now_ns();
    uint32_t generated = 0;
    if (rc) /* a forward failure is the batch's, not the server's: fail these requests */
        for (uint32_t k = 0; k < pl.n_batch; k++) {
            seq_list_remove(&e->sc.running, pl.batch[k]);
            finish(e, pl.batch[k], ENGINE_FINISH_ERROR, t1, err.msg);
        }
    else {
        sched_commit(&e->sc, &pl);
        generated = sample_batch(e, &pl, logits, t1);
        step_cost_observe(&e->sc.cost, pl.work, (double)(t1 - pl.t0));
    }
    record_step(e, &pl, kv_bytes, generated, rc ? 0 : n_logits, t1);
    publish(e, t1);
    after_step(e, &pl, t1);
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
    tps_pool_run_any(n > 1 ? kernel_ctx_pool(fwd_state_kernels(e->fs)) : NULL, n, sample_task, e);
}

/* Idle-time slices of KV pool warming: one huge page of each map, a few
 * milliseconds, so a request arriving meanwhile waits little. */
#define ENGINE_WARM_SLICE (2u << 20)

void *engine_main(void *arg) {
    engine *e = arg;
    bool warming = true;
    for (;;) {
        pthread_mutex_lock(&e->mu);
        while (!e->stopping && !e->reset_prefix && !e->incoming.n && !e->n_cancels &&
               !e->sc.waiting.n && !e->sc.running.n) {
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
