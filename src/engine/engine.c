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

#include "engine/engine_internal.h"
#include "engine/step_cost.h"
#include "base/clock.h"
#include "base/cond.h"

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

/* Faults in the forward state with one step; with an ITL target, primes
 * the step-time model with a one-row and a many-row step and resolves
 * the automatic target from them. */
static int warm_up(engine *e, tps_err *err) {
    double t1, tn;
    int rc = time_rows(e, 1, 1, &t1, err);
    e->macs = engine_macs_of(&e->m->cfg);
    /* an attended position in row-equivalents, x 4: attention runs in fp32
     * over scattered KV, the weights in int8 over packed rows */
    step_cost_init(&e->sc.cost, 4.0 * e->macs.per_attended / (e->macs.body + e->macs.head));
    if (rc || e->p.itl_target_ms == 0) return rc;
    uint32_t n = 64;
    if (n > e->p.max_batch_tokens) n = e->p.max_batch_tokens;
    if (n > e->n_ctx) n = e->n_ctx;
    if (n > kv_cache_available(e->kv) * e->kv->block_tokens)
        n = kv_cache_available(e->kv) * e->kv->block_tokens;
    if ((rc = time_rows(e, 1, 3, &t1, err))) return rc;
    if (n < 2) {
        step_cost_prime(&e->sc.cost, 1, t1, 2, 2 * t1);
    } else {
        if ((rc = time_rows(e, n, 2, &tn, err))) return rc;
        const step_cost *c = &e->sc.cost;
        step_cost_prime(&e->sc.cost, step_cost_work(c, 1, 1), t1,
                        step_cost_work(c, n, step_cost_chunk_attended(0, n)), tn);
    }
    if (e->p.itl_target_ms < 0) {
        double ns = 3 * t1;
        if (ns < ENGINE_ITL_TARGET_FLOOR_MS * 1e6) ns = ENGINE_ITL_TARGET_FLOOR_MS * 1e6;
        e->p.itl_target_ms = ns / 1e6;
    }
    e->sc.target_ns = (uint64_t)(e->p.itl_target_ms * 1e6);
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
    e->cap_samplers = mb + e->p.max_seqs;
    e->samplers = calloc(e->cap_samplers, sizeof *e->samplers);
    e->sample_logits = calloc(e->cap_samplers, sizeof *e->sample_logits);
    e->sampled = calloc(e->cap_samplers, sizeof *e->sampled);
    if (!e->rows || !e->row_seqs || !e->samplers || !e->sample_logits || !e->sampled)
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
    /* fixed for the engine's life: in local, which every sync copies */
    e->local.kv_blocks_total = e->kv->n_blocks;
    e->local.kv_local_blocks_total = e->kv->n_lblocks;
    e->local.kv_blocks_resident = e->kv->pc ? e->kv->resident_blocks : 0;
    e->local.kv_block_tokens = e->kv->block_tokens;
    e->local.n_ctx = e->n_ctx;
    e->local.model_experts = e->m->cfg.n_expert;
    e->local.model_layers = e->m->cfg.n_layers;
    e->local.itl_target_ns = e->sc.target_ns;
    e->local.step_cost_fixed_ns = (uint64_t)e->sc.cost.c0_ns;
    e->local.step_cost_row_ns = (uint64_t)e->sc.cost.c1_ns;
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
    seq_list *lists[] = {&e->sc.running, &e->sc.waiting, &e->incoming};
    for (int l = 0; l < 3; l++)
        while (lists[l]->head) {
            seq *s = lists[l]->head;
            seq_list_remove(lists[l], s);
            if (e->kv) kv_seq_release(e->kv, &s->kv);
            engine_seq_free(s);
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
    sched_free(&e->sc);
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
