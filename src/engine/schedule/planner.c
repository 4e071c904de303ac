/* The step policy over scheduling state (planner.h): decode rows first,
 * prompt chunks sized by the budget and the ITL target, FCFS admission
 * with prefix-cache hits, preemption of the newest. Moves KV blocks
 * between owners; never touches K/V memory, weights or clocks. */
#include "engine/schedule/planner.h"

#include <stdlib.h>
#include <string.h>

int sched_init(sched *sc, const sched_params *p, kv_cache *kv, tps_err *err) {
    memset(sc, 0, sizeof *sc);
    if (!p->max_seqs || !p->max_batch_tokens || !p->prefill_chunk)
        return tps_fail(err, TPS_EINVAL,
                        "planner: max_seqs, max_batch_tokens and prefill_chunk must be > 0");
    sc->p = *p;
    sc->kv = kv;
    sc->batch = calloc(p->max_batch_tokens, sizeof *sc->batch);
    sc->batch_rows = calloc(p->max_batch_tokens, sizeof *sc->batch_rows);
    if (!sc->batch || !sc->batch_rows) {
        sched_free(sc);
        return tps_fail(err, TPS_ENOMEM, "planner: out of memory");
    }
    return 0;
}

void sched_free(sched *sc) {
    free(sc->batch);
    free(sc->batch_rows);
    sc->batch = NULL;
    sc->batch_rows = NULL;
}

uint32_t sched_prime_rows(const sched *sc, uint32_t n_ctx) {
    uint32_t n = 64;
    if (n > sc->p.max_batch_tokens) n = sc->p.max_batch_tokens;
    if (n > n_ctx) n = n_ctx;
    if (n > kv_cache_available(sc->kv) * sc->kv->block_tokens)
        n = kv_cache_available(sc->kv) * sc->kv->block_tokens;
    return n;
}

double sched_prime(sched *sc, const engine_macs *macs, double itl_target_ms, double t1_ns,
                   uint32_t n, double tn_ns) {
    step_cost_init(&sc->cost, 4.0 * macs->per_attended / (macs->body + macs->head));
    sc->target_ns = 0;
    if (itl_target_ms == 0) return 0;
    step_cost *c = &sc->cost;
    if (n < 2)
        step_cost_prime(c, 1, t1_ns, 2, 2 * t1_ns);
    else
        step_cost_prime(c, step_cost_work(c, 1, 1), t1_ns,
                        step_cost_work(c, n, step_cost_chunk_attended(0, n)), tn_ns);
    if (itl_target_ms < 0) {
        double ns = 3 * t1_ns;
        if (ns < ENGINE_ITL_TARGET_FLOOR_MS * 1e6) ns = ENGINE_ITL_TARGET_FLOOR_MS * 1e6;
        itl_target_ms = ns / 1e6;
    }
    sc->target_ns = (uint64_t)(itl_target_ms * 1e6);
    return itl_target_ms;
}

int sched_seq_init(seq *s, const kv_cache *kv, const int32_t *prompt, uint32_t n_prompt,
                   uint32_t max_tokens) {
    uint32_t cap = n_prompt + max_tokens;
    s->tokens = malloc(sizeof(int32_t) * ((size_t)cap + 1));
    if (!s->tokens || kv_seq_init(&s->kv, kv_blocks_for(kv, cap))) return TPS_ENOMEM;
    memcpy(s->tokens, prompt, sizeof(int32_t) * n_prompt);
    s->n_prompt = s->n_tokens = n_prompt;
    s->max_tokens = max_tokens;
    return 0;
}

void sched_drain(sched *sc, seq_list *incoming, kv_cache *kv, void (*seq_free)(seq *s)) {
    seq_list *lists[] = {&sc->running, &sc->waiting, incoming};
    for (int l = 0; l < 3; l++)
        while (lists[l]->head) {
            seq *s = lists[l]->head;
            seq_list_remove(lists[l], s);
            if (kv) kv_seq_release(kv, &s->kv);
            seq_free(s);
        }
}

void sched_seq_clear(seq *s) {
    free(s->tokens);
    s->tokens = NULL;
    kv_seq_destroy(&s->kv);
}

/* ---- preemption ----------------------------------------------------------- */

/* Returns s's KV to the pool and puts it at the head of the waiting queue to
 * recompute its tokens later (never an error, never lost). */
static void preempt(sched *sc, seq *s) {
    seq_list_remove(&sc->running, s);
    kv_seq_release(sc->kv, &s->kv);
    s->n_computed = 0;
    s->state = SEQ_WAITING;
    s->tm.preemptions++;
    sc->preemptions_total++;
    seq_list_push_front(&sc->waiting, s);
}

/* Positions beyond n_computed that s can hold without preempting anyone
 * (evicting cached blocks nobody holds is fine). */
static uint32_t room_for(const sched *sc, const seq *s) {
    uint64_t cap = ((uint64_t)s->kv.n_blocks + kv_cache_available(sc->kv)) * sc->kv->block_tokens;
    uint64_t limit = (uint64_t)s->kv.cap * sc->kv->block_tokens;
    if (cap > limit) cap = limit;
    return cap > s->n_computed ? (uint32_t)(cap - s->n_computed) : 0;
}

/* Makes room for s to hold n positions, preempting the most recently
 * admitted running sequences. Returns false when s itself was preempted.
 * Only for decode rows: the victim (the running tail) comes after s in
 * admission order, so it has no rows in this step's batch yet. */
static bool reserve_or_preempt(sched *sc, seq *s, uint32_t n) {
    for (;;) {
        int rc = kv_seq_reserve(sc->kv, &s->kv, n);
        if (rc == 0) return true;
        seq *victim = sc->running.tail;
        preempt(sc, victim);
        if (victim == s) return false;
    }
}

/* ---- prefix cache at admission --------------------------------------------- */

/* Takes the prefix cache's blocks for s's leading tokens (s holds none);
 * returns the positions they cover. The last token is always computed,
 * since sampling needs its logits: a block is taken only when all of it
 * lies before that token. */
static uint32_t take_cached_prefix(sched *sc, seq *s) {
    uint32_t max_blocks = (s->n_tokens - 1) / sc->kv->block_tokens;
    uint32_t k = kv_seq_match_prefix(sc->kv, &s->kv, s->tokens, max_blocks);
    s->n_computed = k * sc->kv->block_tokens;
    return s->n_computed;
}

/* True when a running sequence is computing the block s would take next
 * (the same tokens from position 0 to that block's end, not all computed
 * yet): s waits a step or two for it to be cached instead of computing the
 * same K/V again beside it. Only running sequences count, and they always
 * progress, so the wait ends. */
static bool prefix_in_flight(const sched *sc, const seq *s, uint32_t hit) {
    const uint32_t end = hit + sc->kv->block_tokens;
    if (!sc->kv->pc || end >= s->n_tokens) return false;
    for (const seq *r = sc->running.head; r; r = r->next)
        if (r->n_computed < end && r->n_tokens >= end &&
            memcmp(r->tokens + hit, s->tokens + hit, (end - hit) * sizeof *s->tokens) == 0 &&
            memcmp(r->tokens, s->tokens, hit * sizeof *s->tokens) == 0)
            return true;
    return false;
}

/* ---- one step --------------------------------------------------------------- */

static uint32_t prefill_floor(const sched_plan *pl) {
    uint32_t in_play = pl->decode_rows + pl->prompt_seqs;
    if (in_play < SCHED_PREFILL_FLOOR_MIN) return SCHED_PREFILL_FLOOR_MIN;
    return in_play > SCHED_PREFILL_FLOOR_MAX ? SCHED_PREFILL_FLOOR_MAX : in_play;
}

/* Prompt rows s gets now: what it still needs, within the step's budget,
 * the per-sequence chunk, what the pool can hold without preempting and,
 * when the step carries decode rows, what keeps the step's predicted time
 * within the ITL target (a step of prompts alone keeps no stream waiting,
 * so it is not cut). */
static uint32_t chunk_for(const sched *sc, const seq *s, const sched_plan *pl) {
    uint32_t need = s->n_tokens - s->n_computed;
    uint32_t chunk = need < pl->budget ? need : pl->budget;
    if (chunk > sc->p.prefill_chunk) chunk = sc->p.prefill_chunk;
    if (sc->target_ns && pl->decode_rows) {
        uint32_t fit = step_cost_rows_within(&sc->cost, pl->pred_ns, (double)sc->target_ns,
                                             s->n_computed, chunk);
        uint32_t least = prefill_floor(pl);
        uint32_t floor = pl->prefill_rows < least ? least - pl->prefill_rows : 0;
        if (fit < floor) fit = floor;
        if (chunk > fit) chunk = fit;
    }
    uint32_t room = room_for(sc, s);
    return chunk < room ? chunk : room;
}

/* Adds n rows of s to the step, and their cost to its prediction. */
static void plan_rows(sched *sc, sched_plan *pl, seq *s, uint32_t n) {
    double att = step_cost_chunk_attended(s->n_computed, n);
    double w = step_cost_work(&sc->cost, n, att);
    pl->work += w;
    pl->attended += att;
    pl->kv_positions += (double)s->n_computed + n;
    pl->pred_ns += sc->cost.c1_ns * w;
    pl->batch[pl->n_batch] = s;
    pl->rows[pl->n_batch++] = n;
    pl->n_rows += n;
    pl->logit_rows += s->n_computed + n == s->n_tokens;
    pl->budget -= n;
}

/* 1. decode first: every running sequence that has all but its newest
 *    token computed gets one row. */
static void plan_decodes(sched *sc, sched_plan *pl) {
    for (seq *s = sc->running.head; s && pl->budget;) {
        seq *next = s->next;
        if (s->n_tokens - s->n_computed == 1 && reserve_or_preempt(sc, s, s->n_tokens)) {
            plan_rows(sc, pl, s, 1);
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
 *    batch): they take what the pool can give. A sequence with more than
 *    one position to compute got no decode row, so none is in the batch
 *    twice (the engine once checked the batch for it: a scan per sequence
 *    that never matched, and quadratic in a simulation's long runs). */
static void plan_prefill_chunks(sched *sc, sched_plan *pl) {
    for (seq *s = sc->running.head; s && pl->budget; s = s->next) {
        if (s->n_tokens - s->n_computed <= 1) continue;
        uint32_t chunk = chunk_for(sc, s, pl);
        if (chunk && kv_seq_reserve(sc->kv, &s->kv, s->n_computed + chunk) == 0) {
            plan_rows(sc, pl, s, chunk);
            pl->prefill_rows += chunk;
        }
    }
}

typedef enum admit_result { ADMITTED, ADMIT_LATER, ADMIT_STOP } admit_result;

/* Admits waiting s with its first chunk: it first takes the prefix cache's
 * blocks for its leading tokens; when another sequence is computing its
 * next block right now, it lets those behind it go first (ADMIT_LATER);
 * without KV for a chunk, admission stops for this step. */
static admit_result admit_one(sched *sc, seq *s, sched_plan *pl) {
    uint32_t hit = take_cached_prefix(sc, s);
    bool wait = prefix_in_flight(sc, s, hit);
    uint32_t chunk = wait ? 0 : chunk_for(sc, s, pl);
    if (!chunk || kv_seq_reserve(sc->kv, &s->kv, s->n_computed + chunk) != 0) {
        kv_seq_release(sc->kv, &s->kv); /* the hit waits with it, unheld */
        s->n_computed = 0;
        return wait ? ADMIT_LATER : ADMIT_STOP;
    }
    if (sc->kv->pc) {
        sc->prefix_queries_total += s->n_tokens;
        sc->prefix_hits_total += hit;
    }
    if (!s->tm.t_first_token) s->tm.cached_tokens = hit < s->n_prompt ? hit : s->n_prompt;
    pl->cached_rows += hit;
    seq_list_remove(&sc->waiting, s);
    s->state = SEQ_RUNNING;
    s->admit_order = ++sc->admit_counter;
    seq_list_push_back(&sc->running, s);
    if (!s->tm.t_first_scheduled) s->tm.t_first_scheduled = pl->t0;
    plan_rows(sc, pl, s, chunk);
    pl->prefill_rows += chunk;
    pl->admitted++;
    return ADMITTED;
}

/* 3. admit waiting sequences while there is budget, a sequence slot for
 *    each of their choices and KV for their first chunk; never right after
 *    a preemption. */
static void plan_admissions(sched *sc, sched_plan *pl) {
    for (seq *s = sc->waiting.head, *next; s && pl->budget; s = next) {
        next = s->next;
        if (sc->running.n + 1 + s->n_forks > sc->p.max_seqs || pl->preempted ||
            admit_one(sc, s, pl) == ADMIT_STOP)
            break;
    }
}

void sched_plan_step(sched *sc, sched_plan *pl, uint64_t t0) {
    *pl = (sched_plan){.t0 = t0,
                       .budget = sc->p.max_batch_tokens,
                       .batch = sc->batch,
                       .rows = sc->batch_rows,
                       .prompt_seqs = sc->waiting.n,
                       .pred_ns = sc->cost.c0_ns};
    const uint64_t preempt_before = sc->preemptions_total;
    plan_decodes(sc, pl);
    pl->preempted = (uint32_t)(sc->preemptions_total - preempt_before);
    plan_prefill_chunks(sc, pl);
    plan_admissions(sc, pl);
}

void sched_commit(sched *sc, const sched_plan *pl) {
    for (uint32_t k = 0; k < pl->n_batch; k++) {
        seq *s = pl->batch[k];
        s->n_computed += pl->rows[k];
        kv_seq_commit(sc->kv, &s->kv, s->tokens, s->n_computed);
    }
}

bool sched_fork(sched *sc, seq *s, seq *f, bool ok) {
    f->tm.t_first_scheduled = s->tm.t_first_scheduled;
    f->tm.cached_tokens = s->tm.cached_tokens;
    if (!ok || kv_seq_fork(sc->kv, &f->kv, &s->kv, s->n_prompt) != 0) {
        f->state = SEQ_WAITING;
        seq_list_push_front(&sc->waiting, f);
        return false;
    }
    f->n_computed = s->n_prompt;
    f->state = SEQ_RUNNING;
    f->admit_order = ++sc->admit_counter;
    seq_list_push_back(&sc->running, f);
    return true;
}

void sched_remove(sched *sc, seq *s) {
    seq_list_remove(s->state == SEQ_RUNNING ? &sc->running : &sc->waiting, s);
    kv_seq_release(sc->kv, &s->kv);
}
