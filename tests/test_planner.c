/* The scheduler as a planning function (engine/schedule/planner.h): given a
 * scheduling state, the step's plan, checked against the rules the engine
 * tests check end to end (decode rows first, chunking by the token budget,
 * the per-sequence chunk and the ITL target with its floor, FCFS
 * admission under max_seqs, preemption of the newest, no admission right
 * after a preemption, prefix-cache hits and the wait for a block being
 * computed, n-choice forks sharing their prompt's blocks). Over a KV pool
 * of block accounting only: the planner never needs K/V memory. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "engine/schedule/planner.h"
#include "base/ggml_type.h"

#define B 16 /* positions per block */

/* A test's pool, its scheduler and the plan of the step run last. */
typedef struct fixture {
    kv_cache *kv;
    sched sc;
    sched_plan pl;
} fixture;

/* Returned by value: nothing in it points into itself. */
static fixture setup(uint32_t blocks, bool cache, uint32_t max_seqs, uint32_t max_batch,
                     uint32_t chunk) {
    fixture f = {0};
    kv_cache_params kp = {.n_layers = 2,
                          .kv_dim = 64,
                          .head_dim = 64,
                          .block_tokens = B,
                          .kv_type = GGML_TYPE_F16,
                          .n_blocks = blocks,
                          .prefix_cache = cache,
                          .accounting_only = true};
    tps_err err = {{0}};
    cr_assert_eq(kv_cache_create(&f.kv, &kp, &err), 0, "%s", err.msg);
    cr_assert_null(f.kv->k, "an accounting-only pool maps no K/V");
    sched_params sp = {.max_seqs = max_seqs, .max_batch_tokens = max_batch, .prefill_chunk = chunk};
    cr_assert_eq(sched_init(&f.sc, &sp, f.kv, &err), 0, "%s", err.msg);
    step_cost_init(&f.sc.cost, 0);
    f.sc.cost.c0_ns = 1e6; /* 1 ms a step + 0.1 ms a row */
    f.sc.cost.c1_ns = 1e5;
    return f;
}

/* A request of n_prompt tokens (token i of request `tag` is tag * 1000 + i,
 * so requests share nothing unless made from the same tag), queued. */
static seq *submit(fixture *f, uint32_t tag, uint32_t n_prompt, uint32_t max_tokens) {
    seq *s = calloc(1, sizeof *s);
    int32_t *p = malloc(n_prompt * sizeof *p);
    for (uint32_t i = 0; i < n_prompt; i++)
        p[i] = (int32_t)(tag * 1000 + i);
    cr_assert_eq(sched_seq_init(s, f->kv, p, n_prompt, max_tokens), 0);
    free(p);
    s->id = tag;
    seq_list_push_back(&f->sc.waiting, s);
    return s;
}

static void drop(fixture *f, seq *s) {
    sched_remove(&f->sc, s);
    sched_seq_clear(s);
    free(s);
}

static void teardown(fixture *f) {
    while (f->sc.running.head)
        drop(f, f->sc.running.head);
    while (f->sc.waiting.head)
        drop(f, f->sc.waiting.head);
    cr_expect_eq(kv_cache_blocks_used(f->kv), 0, "every block is back");
    sched_free(&f->sc);
    kv_cache_free(f->kv);
}

/* Plans a step into f->pl, commits it and gives every sequence that
 * sampled a token (as the engine does after its forward pass). */
static void run_step(fixture *f) {
    sched_plan *pl = &f->pl;
    sched_plan_step(&f->sc, pl, 1);
    sched_commit(&f->sc, pl);
    for (uint32_t k = 0; k < pl->n_batch; k++) {
        seq *s = pl->batch[k];
        if (s->n_computed == s->n_tokens) s->tokens[s->n_tokens++] = 7;
    }
}

static uint32_t rows_of(const sched_plan *pl, const seq *s) {
    for (uint32_t k = 0; k < pl->n_batch; k++)
        if (pl->batch[k] == s) return pl->rows[k];
    return 0;
}

Test(planner, decode_rows_come_first_then_chunks_then_admissions_fcfs) {
    fixture f = setup(256, false, 8, 64, 64);
    seq *a = submit(&f, 1, 10, 8), *b = submit(&f, 2, 10, 8);
    run_step(&f); /* both prompts fit: admitted in order */
    cr_assert_eq(f.pl.n_batch, 2);
    cr_expect(f.pl.batch[0] == a && f.pl.batch[1] == b);
    cr_expect_eq(f.pl.admitted, 2);
    cr_expect_eq(f.pl.prefill_rows, 20);
    cr_expect_eq(f.pl.logit_rows, 2);
    seq *c = submit(&f, 3, 100, 8);
    run_step(&f);
    /* the two streams decode first, then c gets what the budget leaves */
    cr_assert_eq(f.pl.n_batch, 3);
    cr_expect(f.pl.batch[0] == a && f.pl.batch[1] == b && f.pl.batch[2] == c);
    cr_expect_eq(f.pl.decode_rows, 2);
    cr_expect_eq(rows_of(&f.pl, c), 62, "budget 64 - 2 decode rows");
    cr_expect_eq(f.pl.logit_rows, 2, "c's chunk is not its last token");
    run_step(&f);
    cr_expect_eq(rows_of(&f.pl, c), 38, "the rest of c's prompt");
    cr_expect_eq(f.pl.prefill_rows, 38);
    teardown(&f);
}

Test(planner, prefill_chunk_caps_one_sequence_and_leaves_budget_to_the_next) {
    fixture f = setup(256, false, 8, 64, 24);
    seq *a = submit(&f, 1, 100, 4), *b = submit(&f, 2, 100, 4);
    run_step(&f);
    cr_expect_eq(rows_of(&f.pl, a), 24);
    cr_expect_eq(rows_of(&f.pl, b), 24);
    cr_expect_eq(f.pl.n_rows, 48);
    teardown(&f);
}

Test(planner, itl_target_cuts_prompt_chunks_beside_decodes_but_keeps_the_floor) {
    fixture f = setup(256, false, 8, 256, 256);
    seq *a = submit(&f, 1, 8, 32);
    run_step(&f); /* a prompt alone is not cut */
    cr_expect_eq(rows_of(&f.pl, a), 8);
    f.sc.target_ns = 3000000; /* 3 ms: 1 ms fixed + 0.1 ms a row -> 20 rows */
    seq *b = submit(&f, 2, 200, 4);
    run_step(&f);
    cr_expect_eq(f.pl.decode_rows, 1);
    cr_expect_eq(rows_of(&f.pl, b), 19, "1 ms + 20 rows x 0.1 ms = 3 ms");
    cr_expect(f.pl.pred_ns <= 3000000 + 1);
    f.sc.target_ns = 1100000; /* room for the decode row only: the floor (4) still goes */
    run_step(&f);
    cr_expect_eq(rows_of(&f.pl, b), SCHED_PREFILL_FLOOR_MIN);
    f.sc.target_ns = 0;
    run_step(&f);
    cr_expect_eq(rows_of(&f.pl, b), 200 - 19 - 4, "no target: the rest at once");
    teardown(&f);
}

Test(planner, admission_stops_at_max_seqs_counting_every_choice) {
    fixture f = setup(256, false, 3, 256, 256);
    seq *b = submit(&f, 2, 4, 4), *a = submit(&f, 1, 4, 4), *c = submit(&f, 3, 4, 4);
    a->n_forks = 2; /* three choices: with b running, 4 sequences > 3 */
    sched_plan_step(&f.sc, &f.pl, 1);
    cr_expect_eq(f.pl.admitted, 1);
    cr_expect(b->state == SEQ_RUNNING && a->state == SEQ_WAITING);
    cr_expect(c->state == SEQ_WAITING, "FCFS: nobody passes a at the head");
    a->n_forks = 0;
    teardown(&f);
}

Test(planner, a_decode_row_without_a_block_preempts_the_newest_and_admits_nobody) {
    /* 6 blocks: a and b take 3 each (33 tokens + their first token) */
    fixture f = setup(6, false, 8, 256, 256);
    seq *a = submit(&f, 1, 32, 64), *b = submit(&f, 2, 32, 64);
    run_step(&f);
    cr_expect_eq(kv_cache_blocks_used(f.kv), 4);
    submit(&f, 3, 4, 4);
    /* a decodes into a third block; b needs one too: none left -> b, the
     * newest, is preempted; the waiting request is not admitted this step */
    run_step(&f);
    run_step(&f);
    int preempted = 0;
    for (int i = 0; i < 20 && !preempted; i++) {
        run_step(&f);
        preempted = f.pl.preempted;
    }
    cr_assert_eq(preempted, 1);
    cr_expect(b->state == SEQ_WAITING && b->n_computed == 0, "the newest gave its blocks back");
    cr_expect(f.sc.waiting.head == b, "and waits at the head of the queue");
    cr_expect_eq(b->tm.preemptions, 1);
    cr_expect_eq(f.pl.admitted, 0, "no admission in a step that preempted");
    cr_expect(a->state == SEQ_RUNNING);
    teardown(&f);
}

Test(planner, a_prompt_takes_the_cached_blocks_of_an_earlier_one) {
    fixture f = setup(64, true, 8, 256, 256);
    seq *a = submit(&f, 1, 40, 2);
    run_step(&f);
    cr_expect_eq(f.pl.cached_rows, 0);
    drop(&f, a); /* finished: its two full blocks stay indexed */
    cr_expect_eq(kv_cache_blocks_cached(f.kv), 2);
    seq *b = submit(&f, 1, 40, 2); /* the same prompt */
    run_step(&f);
    cr_expect_eq(f.pl.cached_rows, 32, "two full blocks served");
    cr_expect_eq(rows_of(&f.pl, b), 8, "only the rest computed");
    cr_expect_eq(b->tm.cached_tokens, 32);
    cr_expect_eq(f.sc.prefix_hits_total, 32);
    cr_expect_eq(f.sc.prefix_queries_total, 80);
    /* a prompt of exactly two blocks computes its last token itself */
    drop(&f, b);
    seq *c = submit(&f, 1, 32, 2);
    run_step(&f);
    cr_expect_eq(f.pl.cached_rows, 16);
    cr_expect_eq(rows_of(&f.pl, c), 16);
    teardown(&f);
}

Test(planner, a_prompt_waits_for_the_block_another_is_computing) {
    fixture f = setup(64, true, 8, 256, 20);
    seq *a = submit(&f, 1, 64, 2);
    run_step(&f); /* a computes rows 0..19: its first block is full, the second not */
    seq *b = submit(&f, 1, 64, 2), *c = submit(&f, 2, 8, 2);
    run_step(&f);
    cr_expect(b->state == SEQ_WAITING, "b waits for a's second block");
    cr_expect(c->state == SEQ_RUNNING, "c, behind it, goes first");
    cr_expect_eq(rows_of(&f.pl, a), 20);
    while (a->n_computed < 48)
        run_step(&f);
    run_step(&f);
    cr_expect(b->state == SEQ_RUNNING);
    cr_expect_eq(b->tm.cached_tokens, 48, "three blocks a computed meanwhile");
    teardown(&f);
}

Test(planner, choices_fork_sharing_full_blocks_and_copying_the_partial_one) {
    fixture f = setup(64, true, 8, 256, 256);
    seq *a = submit(&f, 1, 40, 4);
    seq *g = calloc(1, sizeof *g);
    int32_t p[40];
    for (int i = 0; i < 40; i++)
        p[i] = 1000 + i;
    cr_assert_eq(sched_seq_init(g, f.kv, p, 40, 4), 0);
    sched_plan_step(&f.sc, &f.pl, 1);
    sched_commit(&f.sc, &f.pl);
    uint32_t used = kv_cache_blocks_used(f.kv);
    cr_expect_eq(used, 3);
    cr_assert(sched_fork(&f.sc, a, g, true));
    cr_expect_eq(kv_cache_blocks_used(f.kv), 4, "two shared, the partial one copied");
    cr_expect_eq(g->n_computed, 40);
    cr_expect(g->state == SEQ_RUNNING && f.sc.running.tail == g);
    cr_expect_eq(g->kv.blocks[0], a->kv.blocks[0]);
    cr_expect_neq(g->kv.blocks[2], a->kv.blocks[2]);
    teardown(&f);
}

Test(planner, plan_state_is_only_block_accounting_a_null_map_is_never_touched) {
    /* a whole run over an accounting-only pool, forks included, with
     * preemptions: the pool's maps are NULL, so any K/V access would crash */
    fixture f = setup(12, true, 4, 64, 64);
    for (uint32_t i = 0; i < 6; i++)
        submit(&f, i % 2, 30 + i, 40);
    for (int i = 0; i < 2000 && (f.sc.running.n || f.sc.waiting.n); i++) {
        run_step(&f);
        for (seq *s = f.sc.running.head, *n; s; s = n) {
            n = s->next;
            if (s->n_tokens - s->n_prompt >= s->max_tokens) drop(&f, s);
        }
    }
    cr_expect_eq(f.sc.running.n + f.sc.waiting.n, 0, "every request ran to its end");
    cr_expect_gt(f.sc.preemptions_total, 0, "the small pool preempted");
    teardown(&f);
}
