/* The engine (engine.h): Orca-style iteration-level scheduling with chunked
 * prefill (Sarathi) over a paged KV cache (vLLM), preempting the most
 * recently admitted sequence when blocks run out. This file is the
 * object's lifecycle: parameters, the KV pool, the warm-up that primes the
 * step-time model and resolves the ITL target, create and destroy, and the
 * model-shape arithmetic the stats count with. Its parts are listed in
 * engine_internal.h. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "engine/core/engine_internal.h"
#include "engine/core/engine_setup.h"
#include "base/clock.h"
#include "base/cond.h"
#include "base/free_all.h"

void engine_params_default(engine_params *p) {
    memset(p, 0, sizeof *p);
    p->max_seqs = 64;
    p->max_batch_tokens = 256;
    p->kv_block = 16;
    p->kv_type = GGML_TYPE_F16;
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

/* Faults in the forward state with one step; with an ITL target, times a
 * one-row and a many-row step, from which the planner primes its
 * step-time model and resolves the automatic target (sched_prime). */
static int warm_up(engine *e, tps_err *err) {
    double t1, tn = 0;
    int rc = time_rows(e, 1, 1, &t1, err);
    e->macs = engine_macs_of(&e->m->cfg);
    if (rc) return rc;
    const uint32_t n = sched_prime_rows(&e->sc, e->n_ctx);
    if (e->p.itl_target_ms != 0) {
        if ((rc = time_rows(e, 1, 3, &t1, err))) return rc;
        if (n >= 2 && (rc = time_rows(e, n, 2, &tn, err))) return rc;
    }
    e->tr.prime =
        (trace_prime){.t1_ns = t1, .tn_ns = tn, .n = n, .itl_target_ms = e->p.itl_target_ms};
    e->p.itl_target_ms = sched_prime(&e->sc, &e->macs, e->p.itl_target_ms, t1, n, tn);
    return 0;
}

/* Step buffers, sized once. A step samples its batch's rows plus the
 * choices forked in it, which never outnumber the sequences that may run. */
static int alloc_step_buffers(engine *e, tps_err *err) {
    size_t mb = e->p.max_batch_tokens;
    e->rows = calloc(mb, sizeof *e->rows);
    e->row_seqs = calloc(mb, sizeof *e->row_seqs);
    e->cap_samplers = mb + e->p.max_seqs;
    e->samplers = calloc(e->cap_samplers, sizeof *e->samplers);
    e->sample_logits = calloc(e->cap_samplers, sizeof *e->sample_logits);
    e->sampled = calloc(e->cap_samplers, sizeof *e->sampled);
    if (!e->rows || !e->row_seqs || !e->samplers || !e->sample_logits || !e->sampled)
        return tps_fail(err, TPS_ENOMEM, "engine: out of memory");
    return 0;
}

/* The stats fixed for the engine's life: in local, which every sync copies. */
static void set_fixed_stats(engine *e) {
    e->local.kv_blocks_total = e->kv->n_blocks;
    e->local.kv_local_blocks_total = e->kv->n_lblocks;
    e->local.state_slots_total = e->kv->n_state_slots;
    e->local.state_slot_bytes = e->kv->state_bytes;
    e->local.state_ckpts_total = e->kv->n_ckpt;
    e->local.state_ckpt_every = e->kv->ckpt_every;
    e->local.kv_blocks_resident = e->kv->pc ? e->kv->resident_blocks : 0;
    e->local.kv_block_tokens = e->kv->block_tokens;
    e->local.n_ctx = e->n_ctx;
    e->local.model_experts = e->m->cfg.n_expert;
    e->local.model_layers = e->m->cfg.n_layers;
    e->local.itl_target_ns = e->sc.target_ns;
    e->local.step_cost_fixed_ns = (uint64_t)e->sc.cost.c0_ns;
    e->local.step_cost_row_ns = (uint64_t)e->sc.cost.c1_ns;
    e->local.warmup =
        (step_prime){.n = e->tr.prime.n, .t1_ns = e->tr.prime.t1_ns, .tn_ns = e->tr.prime.tn_ns};
    e->st = e->local;
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
    engine_params_resolve(&e->p);
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
    seq_rules_vocab_spell(&e->rules, e->tok);

    if ((rc = engine_kv_create(&e->kv, c, &e->p, false, err))) goto fail;
    if ((rc = fwd_state_create(&e->fs, e->m, e->p.max_batch_tokens, e->n_ctx, e->p.n_threads, err)))
        goto fail;
    if ((rc = alloc_step_buffers(e, err))) goto fail;
    const sched_params sp = {.max_seqs = e->p.max_seqs,
                             .max_batch_tokens = e->p.max_batch_tokens,
                             .prefill_chunk = e->p.prefill_chunk};
    if ((rc = sched_init(&e->sc, &sp, e->kv, err))) goto fail;
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
    set_fixed_stats(e);
    trace_prime prime = e->tr.prime;
    trace_init(&e->tr, tps_now_ns());
    e->tr.prime = prime;
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
    sched_drain(&e->sc, &e->incoming, e->kv, engine_seq_free);
    if (e->p.trace_path && e->thread_started) {
        tps_err err = {0};
        if (trace_write(&e->tr, e->p.trace_path, &err) != 0) fprintf(stderr, "tps: %s\n", err.msg);
    }
    trace_free(&e->tr);
    if (e->efd >= 0) close(e->efd);
    hist_free(e->h_step_ns);
    hist_free(e->h_step_tokens);
    sched_free(&e->sc);
    TPS_FREE_ALL(e->rows, e->row_seqs, e->sampled, e->sample_logits, e->samplers, e->fork_logits,
                 e->pending, e->evq, e->cancels);
    fwd_state_free(e->fs);
    kv_cache_free(e->kv);
    pthread_mutex_destroy(&e->mu);
    pthread_mutex_destroy(&e->trie_mu);
    vocab_trie_free(e->trie);
    pthread_cond_destroy(&e->work_cv);
    pthread_cond_destroy(&e->ev_cv);
    free(e);
}
