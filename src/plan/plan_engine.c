/* The simulated engine (plan.h): the engine's own scheduling state and
 * planner, stepping in simulated time. A step takes the arrivals into the
 * queue (engine_step.c's take_requests), is planned by sched_plan_step,
 * lasts what the cost model says (or, replaying, what the real step took),
 * is committed, and gives every sequence that samples a synthetic token;
 * the planner's online step-time model observes the step's forward time,
 * as the engine's observes its measured one. Requests the engine would
 * refuse at submit are refused here with its checks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cost/admit.h" /* the engine's own admission rule */
#include "plan/plan_internal.h"
#include "base/ggml_type.h"
#include "base/utf8.h"

/* ---- set-up --------------------------------------------------------------- */

/* The tokens output is drawn from: normal tokens whose text is whole
 * UTF-8 (a reply's text must be, to go into a conversation's next turn),
 * never an end of generation (with ignore_eos the engine generates
 * max_tokens; so does this). */
static int synthetic_table(sim *s, tps_err *e) {
    const tokenizer *tok = s->srv->tok;
    const uint32_t nv = tokenizer_n_vocab(tok);
    if (!(s->out_ids = malloc(sizeof *s->out_ids * (nv ? nv : 1))))
        return tps_fail(e, TPS_ENOMEM, "out of memory");
    for (uint32_t id = 0; id < nv; id++) {
        size_t len;
        const char *p = tokenizer_piece(tok, (int32_t)id, false, &len);
        if (tokenizer_token_type(tok, (int32_t)id) == TOKEN_TYPE_NORMAL &&
            !tokenizer_is_eog(tok, (int32_t)id) && p && len > 0 &&
            utf8_valid_prefix((const unsigned char *)p, len) == len)
            s->out_ids[s->n_out_ids++] = (int32_t)id;
    }
    if (!s->n_out_ids)
        return tps_fail(e, TPS_EINVAL, "plan: the vocabulary has no token of whole text to emit");
    return 0;
}

/* The blocks the engine's warm-up steps reserve and release (time_rows):
 * they leave the pool's order as it was and mark those blocks touched. */
static int touch_rows(kv_cache *kv, uint32_t n) {
    kv_seq ks = {0};
    int rc = kv_seq_init(&ks, kv_blocks_for(kv, n));
    if (!rc) rc = kv_seq_reserve(kv, &ks, n);
    kv_seq_release(kv, &ks);
    kv_seq_destroy(&ks);
    return rc;
}

/* The warm-up (engine.c) in simulated time: its steps' blocks, and the
 * step-time model primed with what the cost model says those steps take
 * (a replay: what the real ones took). */
static int prime(sim *s, tps_err *e) {
    const uint32_t n = sched_prime_rows(&s->sc, s->n_ctx);
    if (touch_rows(s->kv, 1) || (s->ep.itl_target_ms != 0 && n >= 2 && touch_rows(s->kv, n)))
        return tps_fail(e, TPS_ENOMEM, "planner: the KV pool has no room for the warm-up");
    const engine_macs macs = engine_macs_of(&s->srv->m->cfg);
    const plan_cost *c = s->srv->cost;
    step_shape one = {.rows = 1, .logit_rows = 1, .attended = 1, .kv_read = 1, .seqs = 1};
    step_shape many = {.rows = n,
                       .logit_rows = 1,
                       .attended = step_cost_chunk_attended(0, n),
                       .kv_read = n,
                       .seqs = 1};
    double t1 = plan_cost_fwd_ns(c, &one), tn = n >= 2 ? plan_cost_fwd_ns(c, &many) : 0;
    if (s->replay) {
        t1 = s->replay->prime_t1_ns;
        tn = s->replay->prime_tn_ns;
    } else if (c->kind == PLAN_COST_FIT && c->fit.prime.n == n && step_prime_ok(&c->fit.prime)) {
        /* what the engine's warm-up measured, as a server's start would:
         * a warm-up step is quicker than a served one (no HTTP thread, no
         * client beside it), and the planner's chunks follow from it */
        t1 = c->fit.prime.t1_ns;
        tn = c->fit.prime.tn_ns;
    }
    s->ep.itl_target_ms = sched_prime(&s->sc, &macs, s->ep.itl_target_ms, t1, n, tn);
    return 0;
}

int sim_engine_init(sim *s, tps_err *e) {
    s->ep = s->srv->ep;
    s->ep.on_step = NULL;
    if (s->replay) s->ep.itl_target_ms = s->replay->itl_target_ms;
    engine_params_resolve(&s->ep);
    s->n_ctx = s->srv->m->cfg.ctx_len;
    int rc = engine_kv_create(&s->kv, &s->srv->m->cfg, &s->ep, true, e);
    if (rc) return rc;
    const sched_params sp = {.max_seqs = s->ep.max_seqs,
                             .max_batch_tokens = s->ep.max_batch_tokens,
                             .prefill_chunk = s->ep.prefill_chunk};
    if ((rc = sched_init(&s->sc, &sp, s->kv, e))) return rc;
    tps_rng_seed(&s->tok_rng, s->srv->seed);
    tps_rng_seed(&s->spread_rng, s->srv->seed ^ 0x5b7ead5b7ead5b7eull);
    s->eng_free = SIM_ORIGIN;
    if ((rc = synthetic_table(s, e))) return rc;
    return prime(s, e);
}

static void seq_drop(seq *q) {
    sched_seq_clear(q);
    free(q);
}

void sim_engine_free(sim *s) {
    sched_drain(&s->sc, &s->incoming, s->kv, seq_drop);
    sched_free(&s->sc);
    kv_cache_free(s->kv);
    s->kv = NULL;
    free(s->out_ids);
    s->out_ids = NULL;
}

/* ---- arrivals --------------------------------------------------------------- */

/* engine_submit's refusals, as the server answers them (400, 429): the
 * engine's own admission rule (engine/cost/admit.h) on the simulated pool. */
static const char *refusal(const sim *s, uint32_t n_prompt, uint32_t *max_tokens, tps_err *why) {
    const admit_pool pool = {.n_ctx = s->n_ctx,
                             .max_seqs = s->ep.max_seqs,
                             .block_tokens = s->kv->block_tokens,
                             .n_blocks = s->kv->n_blocks,
                             .max_queue = s->ep.max_queue};
    if (admit_request(&pool, n_prompt, max_tokens, 1, why) ||
        admit_queue(&pool, s->incoming.n + s->sc.waiting.n, why))
        return why->msg;
    return NULL;
}

bool sim_engine_busy(const sim *s) {
    return s->incoming.n || s->sc.waiting.n || s->sc.running.n;
}

int sim_engine_arrive(sim *s, size_t rec, uint64_t now, tps_err *e) {
    sim_req *q = &s->reqs[rec];
    bench_record *r = &s->recs[rec];
    if (q->done) return 0; /* the client gave up before it arrived */
    uint32_t max_tokens = r->max_tokens;
    tps_err refused;
    const char *why = refusal(s, q->n_ids, &max_tokens, &refused);
    if (why) {
        s->st.rejected++;
        return sim_finish_record(s, rec, now, BENCH_ERR_HTTP_4XX, why, e);
    }
    seq *sq = calloc(1, sizeof *sq);
    if (!sq || sched_seq_init(sq, s->kv, q->ids, q->n_ids, max_tokens)) {
        if (sq) seq_drop(sq);
        return tps_fail(e, TPS_ENOMEM, "out of memory");
    }
    free(q->ids);
    q->ids = NULL;
    sq->id = rec + 1;
    sq->user = (void *)(uintptr_t)rec;
    sq->tm.t_queued = now;
    sq->tm.prompt_tokens = sq->n_prompt;
    if (!sim_engine_busy(s) && s->eng_free < now && !s->replay) s->eng_free = now;
    seq_list_push_back(&s->incoming, sq);
    q->s = sq;
    q->in_incoming = true;
    return 0;
}

void sim_engine_cancel(sim *s, size_t rec) {
    sim_req *q = &s->reqs[rec];
    seq *sq = q->s;
    if (!sq) return;
    if (q->in_incoming)
        seq_list_remove(&s->incoming, sq);
    else
        sched_remove(&s->sc, sq);
    q->s = NULL;
    seq_drop(sq);
}

/* ---- tokens ------------------------------------------------------------------ */

static int32_t synthetic_token(sim *s) {
    return s->out_ids[load_rng_below(&s->tok_rng, s->n_out_ids)];
}

/* The record of a finished request, as the client reads the server's
 * final chunk: usage, cached tokens, the engine's timings. */
static void close_record(sim *s, bench_record *r, const seq *sq) {
    const engine_timings *tm = &sq->tm;
    r->has_usage = true;
    r->usage_prompt = sq->n_prompt;
    r->usage_completion = tm->generated_tokens;
    r->stream_tokens = tm->generated_tokens;
    if (s->kv->pc) {
        r->has_cached = r->cached_from_usage = true;
        r->cached_tokens = tm->cached_tokens;
    }
    r->has_timings = true;
    const double ms = 1e-6;
    r->timings =
        (bench_timings){.queue_ms = (double)(tm->t_first_scheduled - tm->t_queued) * ms,
                        .prefill_ms = (double)(tm->t_first_token - tm->t_first_scheduled) * ms,
                        .decode_ms = (double)(tm->t_finished - tm->t_first_token) * ms,
                        .ttft_ms = (double)(tm->t_first_token - tm->t_queued) * ms,
                        .prompt_tokens = sq->n_prompt,
                        .completion_tokens = tm->generated_tokens,
                        .preemptions = tm->preemptions};
    timeline_set_prompt_tokens(&r->tl, sq->n_prompt);
    timeline_set_count_source(&r->tl, TL_COUNT_USAGE);
}

/* Sequence sq finished at t1: it leaves the engine, its record closes. */
static int finish(sim *s, seq *sq, uint64_t t1, tps_err *e) {
    const size_t rec = (size_t)(uintptr_t)sq->user;
    sim_req *q = &s->reqs[rec];
    sched_remove(&s->sc, sq);
    sq->tm.t_finished = t1;
    close_record(s, &s->recs[rec], sq);
    int rc = s->multi_turn ? tokenizer_decode_alloc(s->srv->tok, sq->tokens + sq->n_prompt,
                                                    sq->n_tokens - sq->n_prompt, 0, &q->reply,
                                                    &q->reply_len, e)
                           : 0;
    if (rc) return rc;
    q->s = NULL;
    seq_drop(sq);
    uint64_t at = s->replay ? t1 : t1 + (uint64_t)s->srv->cost->deliver_ns;
    return sim_finish_record(s, rec, at, BENCH_OK, NULL, e);
}

/* A sampled token for sq at t1 (the engine's on_token, ignore_eos). */
static int on_token(sim *s, seq *sq, uint64_t t1, tps_err *e) {
    const size_t rec = (size_t)(uintptr_t)sq->user;
    if (!sq->tm.t_first_token) sq->tm.t_first_token = t1;
    sq->tokens[sq->n_tokens++] = synthetic_token(s);
    sq->tm.generated_tokens++;
    uint64_t at = s->replay ? t1 : t1 + (uint64_t)s->srv->cost->deliver_ns;
    int rc = timeline_add(&s->recs[rec].tl, at, 1, e);
    if (rc) return rc;
    if (sq->tm.generated_tokens >= sq->max_tokens || sq->n_tokens >= s->n_ctx)
        return finish(s, sq, t1, e);
    return 0;
}

/* ---- one step ------------------------------------------------------------------ */

/* The arrivals into the queue: all of them, or replaying, as many as the
 * real step took. */
static uint32_t take(sim *s) {
    uint32_t n = 0, limit = UINT32_MAX;
    if (s->replay) limit = s->replay->steps[s->replay_step].taken;
    while (s->incoming.head && n < limit) {
        seq *sq = s->incoming.head;
        seq_list_remove(&s->incoming, sq);
        seq_list_push_back(&s->sc.waiting, sq);
        s->reqs[(size_t)(uintptr_t)sq->user].in_incoming = false;
        n++;
    }
    return n;
}

static void report_step(sim *s, const sched_plan *pl, uint32_t taken, uint64_t t1, uint64_t t2,
                        const step_shape *sh) {
    s->st.steps++;
    s->st.prefill_rows += pl->prefill_rows;
    s->st.decode_rows += pl->decode_rows;
    s->st.cached_rows += pl->cached_rows;
    s->st.busy_s += (double)(t2 - pl->t0) * 1e-9;
    if (!s->srv->on_step) return;
    plan_step st = {.t0 = pl->t0,
                    .t1 = t1,
                    .t2 = t2,
                    .rows = pl->n_rows,
                    .prefill_rows = pl->prefill_rows,
                    .decode_rows = pl->decode_rows,
                    .cached_rows = pl->cached_rows,
                    .logit_rows = pl->logit_rows,
                    .running = s->sc.running.n,
                    .waiting = s->sc.waiting.n,
                    .taken = taken,
                    .attended = sh->attended,
                    .kv_read = sh->kv_read,
                    .cost_fwd_ns = plan_cost_fwd_ns(s->srv->cost, sh),
                    .cost_post_ns = plan_cost_post_ns(s->srv->cost, sh)};
    s->srv->on_step(s->srv->on_step_arg, &st);
}

int sim_engine_step(sim *s, bool *ran, tps_err *e) {
    const plan_replay_step *rs = s->replay ? &s->replay->steps[s->replay_step] : NULL;
    const uint64_t t0 = s->eng_free;
    const uint32_t taken = take(s);
    sched_plan pl;
    sched_plan_step(&s->sc, &pl, t0);
    *ran = pl.n_rows > 0;
    if (!*ran && rs) { /* the real engine ran a step here: stay on its clock */
        s->replay_step++;
        s->eng_free = s->replay_step < s->replay->n_steps
                          ? SIM_ORIGIN + s->replay->steps[s->replay_step].t0
                          : UINT64_MAX;
    }
    if (!*ran) return 0;
    step_shape sh = {.rows = pl.n_rows,
                     .logit_rows = pl.logit_rows,
                     .attended = pl.attended,
                     .kv_read = pl.kv_positions,
                     .seqs = pl.n_batch};
    double fwd = rs ? (double)rs->fwd_ns : plan_cost_fwd_ns(s->srv->cost, &sh);
    double post = rs ? (double)rs->post_ns : plan_cost_post_ns(s->srv->cost, &sh);
    if (!rs) {
        /* at the steal of the second it starts in (--steal-series) */
        const double at = plan_cost_scale_at(s->srv->cost, t0 > SIM_ORIGIN ? t0 - SIM_ORIGIN : 0);
        fwd *= at, post *= at;
        /* a served step's spread, in the forward pass: never below a quarter of it */
        double extra =
            (plan_cost_spread(s->srv->cost, sh.rows, tps_rng_uniform(&s->spread_rng)) - 1) *
            (fwd + post);
        fwd = fwd + extra > fwd / 4 ? fwd + extra : fwd / 4;
    }
    const uint64_t t1 = t0 + (uint64_t)fwd, t2 = t1 + (uint64_t)post;
    sched_commit(&s->sc, &pl);
    for (uint32_t k = 0; k < pl.n_batch; k++) {
        seq *sq = pl.batch[k];
        int rc = sq->n_computed == sq->n_tokens ? on_token(s, sq, t1, e) : 0;
        if (rc) return rc;
    }
    step_cost_observe(&s->sc.cost, pl.work, fwd);
    s->st.preemptions = s->sc.preemptions_total;
    report_step(s, &pl, taken, t1, t2, &sh);
    if (rs) {
        s->replay_step++;
        s->eng_free = s->replay_step < s->replay->n_steps
                          ? SIM_ORIGIN + s->replay->steps[s->replay_step].t0
                          : UINT64_MAX;
    } else {
        s->eng_free = t2;
    }
    return 0;
}
