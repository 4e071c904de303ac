/* The KV cache as a cache: automatic prefix caching and n > 1 choices.
 *
 * The reference for every output here is the same request run alone on an
 * engine with the prefix cache off (and, for choice i of n, an n = 1
 * request with seed + i). Against it: shared-prefix requests in a
 * staggered batch (greedy and seeded sampling), a chain partly evicted, a
 * hit on a prompt another request is still prefilling, preemption of
 * sequences that share blocks, a cancelled request whose blocks another
 * one holds, and n choices forked from one prefill. The pool's own rules
 * (never-cached free blocks before eviction, a chain's tail evicted before
 * its head, keys that cannot collide) are checked on the kv_cache alone. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/core/engine.h"
#include "engine/kv/kv_cache.h"
#include "base/clock.h"
#include "model/gguf.h"
#include "support/engine_env.h"
#include "support/model_run.h"
#include "support/test_support.h"

/* BOS + n-1 pseudo-random ids of stories260K's vocabulary (3..511). */
static void fill_ids(int32_t *out, size_t n, uint64_t seed) {
    uint64_t r = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        out[i] = i == 0 ? 1 : 3 + (int32_t)((r >> 33) % 509);
    }
}

typedef struct req {
    int32_t prompt[512];
    size_t n_prompt;
    uint32_t max_tokens, n;
    uint64_t seed;
    float temp;
} req;

/* A request of n_prompt ids of fill_ids(seed) and max_tokens, the rest 0. */
static req random_req(size_t n_prompt, uint64_t seed, uint32_t max_tokens) {
    req q = {.n_prompt = n_prompt, .max_tokens = max_tokens};
    fill_ids(q.prompt, n_prompt, seed);
    return q;
}

static uint64_t submit_req(engine *e, const req *q, result *res) {
    engine_request rq = {.prompt = q->prompt,
                         .n_prompt = q->n_prompt,
                         .max_tokens = q->max_tokens,
                         .n = q->n,
                         .user = res};
    sampler_params_default(&rq.sampling);
    rq.sampling.temperature = q->temp;
    rq.sampling.seed = q->seed;
    rq.sampling.ignore_eos = true;
    uint64_t id;
    tps_err err = {0};
    cr_assert_eq(engine_submit(e, &rq, &id, &err), 0, "%s", err.msg);
    return id;
}

static result **results_new(size_t n_req, uint32_t n) {
    result **r = calloc(n_req, sizeof *r);
    for (size_t i = 0; i < n_req; i++)
        r[i] = calloc(n, sizeof **r);
    return r;
}

static void results_free(result **r, size_t n_req) {
    for (size_t i = 0; i < n_req; i++)
        free(r[i]);
    free(r);
}

/* The most choices any of the n_req requests asks for (at least 1). */
static uint32_t max_choices(const req *qs, size_t n_req) {
    uint32_t m = 1;
    for (size_t i = 0; i < n_req; i++)
        if (qs[i].n > m) m = qs[i].n;
    return m;
}

/* Each request (each choice i as n = 1 with seed + i) alone, cache off:
 * (n_req,) results of max_choices each (results_free them). */
static result **reference(env *v, const req *qs, size_t n_req) {
    result **ref = results_new(n_req, max_choices(qs, n_req));
    engine *e = env_engine(v, 1, 64, 0, GGML_TYPE_F16, true);
    for (size_t i = 0; i < n_req; i++) {
        uint32_t n = qs[i].n ? qs[i].n : 1;
        for (uint32_t c = 0; c < n; c++) {
            req one = qs[i];
            one.n = 1;
            one.seed += c;
            submit_req(e, &one, &ref[i][c]);
            drain(e, 1);
        }
    }
    engine_destroy(e);
    return ref;
}

static void expect_same(const result *got, const result *want, const char *what, size_t i,
                        uint32_t c) {
    cr_assert(got->done && want->done, "%s: request %zu choice %u unfinished", what, i, c);
    cr_assert_eq(got->finish, want->finish, "%s: request %zu choice %u", what, i, c);
    cr_assert_eq(got->n, want->n, "%s: request %zu choice %u: %zu tokens, reference %zu", what, i,
                 c, got->n, want->n);
    cr_assert_eq(memcmp(got->tokens, want->tokens, want->n * sizeof(int32_t)), 0,
                 "%s: request %zu choice %u: tokens differ from the uncached reference", what, i,
                 c);
}

/* Every request submitted to one engine at once (its max_seqs and KV
 * positions; the prefix cache on unless no_prefix_cache): each choice must
 * equal its uncached reference, and every block must be back at the end.
 * got: (n_req,) results of max n choices, filled. Returns the stats. */
static engine_stats together_equals_reference(env *v, const req *qs, size_t n_req,
                                              uint32_t max_seqs, uint32_t kv_tokens,
                                              bool no_prefix_cache, const char *what,
                                              result **got) {
    result **ref = reference(v, qs, n_req);
    engine *e = env_engine(v, max_seqs, 64, kv_tokens, GGML_TYPE_F16, no_prefix_cache);
    int want = 0;
    for (size_t i = 0; i < n_req; i++) {
        submit_req(e, &qs[i], got[i]);
        want += (int)(qs[i].n ? qs[i].n : 1);
    }
    drain(e, want);
    for (size_t i = 0; i < n_req; i++)
        for (uint32_t c = 0; c < (qs[i].n ? qs[i].n : 1); c++)
            expect_same(&got[i][c], &ref[i][c], what, i, c);
    engine_stats st;
    engine_get_stats(e, &st);
    cr_expect_eq(st.kv_blocks_used, 0, "%s: every block is back", what);
    cr_expect_eq(st.requests_total[ENGINE_FINISH_ERROR], 0);
    engine_destroy(e);
    results_free(ref, n_req);
    return st;
}

/* ---- shared prefixes in a batch --------------------------------------------- */

#define N_SHARED 24

/* Three system prompts (100, 200 and 37 tokens) each followed by a unique
 * tail of 1..60 tokens, and every fourth request extends an earlier one's
 * whole prompt (a chat's next turn). */
static void shared_work(req *qs, float temp) {
    int32_t sys[3][200];
    const size_t sys_len[3] = {100, 200, 37};
    for (int k = 0; k < 3; k++)
        fill_ids(sys[k], sys_len[k], 100 + (uint64_t)k);
    for (int i = 0; i < N_SHARED; i++) {
        req *q = &qs[i];
        memset(q, 0, sizeof *q);
        if (i % 4 == 3) {
            *q = qs[i - 2];
            fill_ids(q->prompt + q->n_prompt, 40, 900 + (uint64_t)i);
            q->prompt[q->n_prompt] = 13; /* not a second BOS */
            q->n_prompt += 40;
        } else {
            int k = i % 3;
            memcpy(q->prompt, sys[k], sys_len[k] * sizeof(int32_t));
            size_t tail = 1 + (size_t)(i * 7) % 60;
            fill_ids(q->prompt + sys_len[k], tail, 500 + (uint64_t)i);
            q->prompt[sys_len[k]] = 13;
            q->n_prompt = sys_len[k] + tail;
        }
        q->max_tokens = 8 + (uint32_t)(i % 5) * 6;
        q->seed = 4000 + (uint64_t)i;
        q->temp = temp;
    }
}

static void shared_prefix_batch(float temp) {
    REQUIRE_SHARED("models/stories260K.gguf");
    env v;
    env_open_stories(&v);
    req *qs = calloc(N_SHARED, sizeof *qs);
    shared_work(qs, temp);
    result **ref = reference(&v, qs, N_SHARED), **got = results_new(N_SHARED, 1);
    engine *e = env_engine(&v, 64, 128, 0, GGML_TYPE_F16, false);
    /* the first three alone, to fill the cache; then the rest together */
    for (int i = 0; i < 3; i++) {
        submit_req(e, &qs[i], got[i]);
        drain(e, 1);
    }
    for (int i = 3; i < N_SHARED; i++)
        submit_req(e, &qs[i], got[i]);
    drain(e, N_SHARED - 3);
    uint32_t cached = 0;
    for (int i = 0; i < N_SHARED; i++) {
        expect_same(got[i], ref[i], temp > 0 ? "sampled" : "greedy", (size_t)i, 0);
        cached += got[i]->tm.cached_tokens;
        cr_expect_eq(got[i]->tm.cached_tokens % 16, 0, "cached tokens are whole blocks");
        cr_expect_lt(got[i]->tm.cached_tokens, qs[i].n_prompt, "the last token is computed");
    }
    engine_stats st;
    engine_get_stats(e, &st);
    cr_expect_gt(cached, 1000, "the batch hit the cache (%u tokens)", cached);
    cr_expect_eq(st.prefix_cache_hits_total, cached, "stats count the hits in tokens");
    cr_expect_gt(st.prefix_cache_queries_total, st.prefix_cache_hits_total);
    cr_expect_eq(st.kv_blocks_used, 0, "every block is back when idle");
    cr_expect_gt(st.kv_blocks_cached, 0, "finished requests' blocks stay cached");
    engine_destroy(e);
    results_free(ref, N_SHARED);
    results_free(got, N_SHARED);
    free(qs);
    env_close(&v);
}

Test(prefix_cache, shared_prefix_batch_greedy_equals_uncached_alone, .timeout = 300) {
    shared_prefix_batch(0.0f);
}

Test(prefix_cache, shared_prefix_batch_sampled_with_seeds_equals_uncached_alone, .timeout = 300) {
    shared_prefix_batch(0.9f);
}

/* ---- eviction ----------------------------------------------------------------- */

/* A 16-block pool: A (160 tokens) leaves 10 cached blocks; B (an unrelated
 * 120 + 8) needs 8, takes the 6 never-cached free ones and evicts 2 from A's
 * chain, its tail first. A again hits the 8 blocks left of its chain. */
Test(prefix_cache, partly_evicted_chain_hits_its_head_and_recomputes_the_rest) {
    REQUIRE_SHARED("models/stories260K.gguf");
    env v;
    env_open_stories(&v);
    req qs[2] = {0};
    fill_ids(qs[0].prompt, 160, 1);
    qs[0].n_prompt = 160;
    fill_ids(qs[1].prompt, 120, 2);
    qs[1].n_prompt = 120;
    qs[0].max_tokens = qs[1].max_tokens = 8;
    result **ref = reference(&v, qs, 2), **got = results_new(3, 1);
    engine *e = env_engine(&v, 4, 64, 256, GGML_TYPE_F16, false);
    submit_req(e, &qs[0], got[0]);
    drain(e, 1);
    engine_stats st;
    engine_get_stats(e, &st);
    cr_expect_eq(st.kv_blocks_total, 16);
    cr_expect_eq(st.kv_blocks_cached, 10, "A's 10 full blocks are cached");
    submit_req(e, &qs[1], got[1]);
    drain(e, 1);
    submit_req(e, &qs[0], got[2]);
    drain(e, 1);
    expect_same(got[0], ref[0], "A", 0, 0);
    expect_same(got[1], ref[1], "B", 1, 0);
    expect_same(got[2], ref[0], "A after eviction", 0, 0);
    cr_expect_eq(got[2]->tm.cached_tokens, 128,
                 "A's chain lost its 2 last blocks, so 8 of 9 hit (%u tokens)",
                 got[2]->tm.cached_tokens);
    engine_destroy(e);
    results_free(ref, 2);
    results_free(got, 3);
    env_close(&v);
}

/* ---- a prompt still being prefilled ------------------------------------------ */

/* A's 480-token prompt prefills 16 rows a step. B, with the same prompt,
 * arrives a few steps in: it never reads a block A is still writing; it
 * waits for A's blocks to be finished and cached, then takes them all and
 * computes only its last block. C, after both, does the same. */
Test(prefix_cache, hit_on_a_prompt_still_prefilling_waits_for_finished_blocks, .timeout = 120) {
    REQUIRE_SHARED("models/stories260K.gguf");
    env v;
    env_open_stories(&v);
    req q = random_req(480, 3, 8);
    result **ref = reference(&v, &q, 1), **got = results_new(3, 1);
    engine_params p = env_params(&v);
    p.n_threads = 1;
    p.max_batch_tokens = 64;
    p.prefill_chunk = 16;
    engine *e = env_start(&p);
    engine_stats st;
    engine_get_stats(e, &st);
    uint64_t steps0 = st.steps_total;
    submit_req(e, &q, got[0]);
    uint64_t deadline = tps_now_ns() + 60ull * TPS_NS_PER_SEC;
    do {
        cr_assert_lt(tps_now_ns(), deadline);
        usleep(200);
        engine_get_stats(e, &st);
    } while (st.steps_total < steps0 + 4);
    submit_req(e, &q, got[1]);
    drain(e, 2);
    submit_req(e, &q, got[2]);
    drain(e, 1);
    for (int i = 0; i < 3; i++)
        expect_same(got[i], ref[0], "same prompt", (size_t)i, 0);
    cr_expect_eq(got[0]->tm.cached_tokens, 0);
    cr_expect_eq(got[1]->tm.cached_tokens, 464, "B waited for A's blocks (%u)",
                 got[1]->tm.cached_tokens);
    cr_expect_eq(got[2]->tm.cached_tokens, 464, "C hit every block but the last token's");
    engine_get_stats(e, &st);
    cr_expect_eq(st.prefill_rows_total, 480 + 16 + 16, "the prompt was computed once");
    engine_destroy(e);
    results_free(ref, 1);
    results_free(got, 3);
    env_close(&v);
}

/* n requests of one shared prefix (seeded) and a tail of their own. */
static void prefix_tail_work(req *qs, int n, size_t prefix, uint64_t prefix_seed, size_t tail,
                             uint32_t max_tokens, float temp, uint64_t seed) {
    memset(qs, 0, (size_t)n * sizeof *qs);
    for (int i = 0; i < n; i++) {
        fill_ids(qs[i].prompt, prefix, prefix_seed);
        fill_ids(qs[i].prompt + prefix, tail, prefix_seed * 10 + (uint64_t)i);
        qs[i].prompt[prefix] = 13; /* not a second BOS */
        qs[i].n_prompt = prefix + tail;
        qs[i].max_tokens = max_tokens;
        qs[i].temp = temp;
        qs[i].seed = seed + (uint64_t)i;
    }
}

/* together_equals_reference on a fresh stories260K (skips without it), the
 * n_req results made and freed here: for the tests that read only the
 * stats. */
static engine_stats together_on_stories(const req *qs, size_t n_req, uint32_t max_seqs,
                                        uint32_t kv_tokens, const char *what) {
    REQUIRE_SHARED("models/stories260K.gguf");
    env v;
    env_open_stories(&v);
    result **got = results_new(n_req, max_choices(qs, n_req));
    engine_stats st =
        together_equals_reference(&v, qs, n_req, max_seqs, kv_tokens, false, what, got);
    results_free(got, n_req);
    env_close(&v);
    return st;
}

/* Eight requests behind one 400-token prompt arrive together: one computes
 * the prompt, the others wait for its blocks instead of computing the same
 * K/V seven more times. */
Test(prefix_cache, requests_arriving_together_compute_a_shared_prefix_once, .timeout = 120) {
    enum { N = 8 };
    req qs[N];
    prefix_tail_work(qs, N, 400, 8, 20, 16, 0.7f, 5);
    engine_stats st = together_on_stories(qs, N, 8, 0, "arriving together");
    /* 400 once, then 20 + the 400 % 16 = 0 tail each: 560 rows; 8 x 420 = 3360 without */
    cr_expect_leq(st.prefill_rows_total, 400 + 8 * 36, "prompt rows computed: %llu",
                  (unsigned long long)st.prefill_rows_total);
}

/* ---- preemption and cancellation of shared blocks ----------------------------- */

/* Eight 200-token outputs behind one 100-token prompt in a 40-block pool:
 * sequences holding shared blocks are preempted and recomputed. */
Test(prefix_cache, preempting_sequences_that_share_blocks_keeps_every_output, .timeout = 300) {
    enum { N = 8 };
    req qs[N];
    prefix_tail_work(qs, N, 100, 7, 5, 200, 0.8f, 9);
    engine_stats st = together_on_stories(qs, N, 8, 640, "preempted");
    cr_expect_gt(st.preemptions_total, 0, "the pool forced preemptions");
    cr_expect_gt(st.prefix_cache_hits_total, 0);
}

/* One wait and poll: files each event into its slot's result. */
static void poll_once(engine *e, result *slots[], int n_slots) {
    engine_event ev[16];
    engine_wait(e, 50);
    size_t k = engine_poll(e, ev, 16);
    for (size_t i = 0; i < k; i++) {
        result *x = (result *)ev[i].user + ev[i].choice;
        int known = 0;
        for (int s = 0; s < n_slots; s++)
            known |= slots[s] == ev[i].user;
        cr_assert(known);
        if (ev[i].kind == ENGINE_EV_TOKEN)
            x->tokens[x->n++] = ev[i].token;
        else
            x->done = true, x->finish = ev[i].finish, x->tm = ev[i].timings;
    }
}

/* Polls until r has at least n tokens. */
static void wait_tokens(engine *e, result *slots[], int n_slots, result *r, size_t n) {
    uint64_t deadline = tps_now_ns() + 60ull * TPS_NS_PER_SEC;
    while (r->n < n) {
        cr_assert_lt(tps_now_ns(), deadline);
        poll_once(e, slots, n_slots);
    }
}

/* B shares A's 200-token prompt; A is cancelled while both decode. B
 * finishes as if alone; every block comes back. A may decode up to the
 * context (300 tokens), so it is still decoding when the cancel comes:
 * with B's 100 it had finished first once in a ctest -j2 run (100 tokens
 * of stories260K take ~10 ms, a descheduled test thread longer). */
Test(prefix_cache, cancelled_request_leaves_shared_blocks_to_the_other) {
    REQUIRE_SHARED("models/stories260K.gguf");
    env v;
    env_open_stories(&v);
    req q = random_req(200, 11, 100);
    result **ref = reference(&v, &q, 1), **got = results_new(2, 1);
    engine *e = env_engine(&v, 4, 64, 0, GGML_TYPE_F16, false);
    req qa = q;
    qa.max_tokens = 300;
    uint64_t a = submit_req(e, &qa, got[0]);
    wait_tokens(e, got, 2, got[0], 1);
    submit_req(e, &q, got[1]);
    wait_tokens(e, got, 2, got[1], 2);
    engine_cancel(e, a);
    /* Poll on each pass: a poll can end between B's last token and its DONE,
     * and then waiting for "100 tokens" would spin without polling again. */
    uint64_t deadline = tps_now_ns() + 60ull * TPS_NS_PER_SEC;
    while (!got[0]->done || !got[1]->done) {
        cr_assert_lt(tps_now_ns(), deadline, "A's cancel or B's finish never came");
        poll_once(e, got, 2);
    }
    cr_expect_eq(got[0]->finish, ENGINE_FINISH_CANCELLED);
    cr_expect_eq(got[1]->tm.cached_tokens, 192, "B shared A's blocks");
    expect_same(got[1], ref[0], "B after A's cancel", 1, 0);
    engine_stats st;
    engine_get_stats(e, &st);
    cr_expect_eq(st.kv_blocks_used, 0);
    engine_destroy(e);
    results_free(ref, 1);
    results_free(got, 2);
    env_close(&v);
}

/* ---- n choices ---------------------------------------------------------------- */

/* Choice i of n equals an n = 1 request with seed + i: prompts of 37 tokens
 * (a partial last block, copied per choice) and 48 (whole blocks only),
 * sampled, in one batch, with the cache on and off; greedy choices agree. */
static void n_choices(bool no_prefix_cache) {
    REQUIRE_SHARED("models/stories260K.gguf");
    env v;
    env_open_stories(&v);
    enum { N_REQ = 3, N = 4 };
    req qs[N_REQ];
    memset(qs, 0, sizeof qs);
    const size_t len[N_REQ] = {37, 48, 37};
    for (int i = 0; i < N_REQ; i++) {
        fill_ids(qs[i].prompt, len[i], 20 + (uint64_t)i);
        qs[i].n_prompt = len[i];
        qs[i].max_tokens = 30;
        qs[i].n = N;
        qs[i].temp = i == 2 ? 0.0f : 1.0f;
        qs[i].seed = 300 + 10 * (uint64_t)i;
    }
    result **got = results_new(N_REQ, N);
    engine_stats st =
        together_equals_reference(&v, qs, N_REQ, 16, 0, no_prefix_cache, "choice", got);
    for (uint32_t c = 1; c < N; c++)
        cr_expect_eq(memcmp(got[2][c].tokens, got[2][0].tokens, got[2][0].n * sizeof(int32_t)), 0,
                     "greedy choices agree");
    cr_expect_neq(memcmp(got[0][1].tokens, got[0][0].tokens, 30 * sizeof(int32_t)), 0,
                  "sampled choices differ");
    cr_expect_eq(st.prefill_rows_total, 37 + 48 + 37, "each prompt was prefilled once");
    results_free(got, N_REQ);
    env_close(&v);
}

Test(prefix_cache, n_choices_equal_n1_requests_with_seed_plus_i, .timeout = 120) {
    n_choices(false);
}

Test(prefix_cache, n_choices_without_prefix_cache_still_share_one_prefill, .timeout = 120) {
    n_choices(true);
}

/* Eight n = 4 requests in a pool that cannot hold them: forks that find no
 * block recompute, sequences holding shared blocks are preempted, and every
 * choice still equals its reference. */
Test(prefix_cache, n_choices_under_kv_exhaustion_lose_nothing, .timeout = 300) {
    enum { N_REQ = 8, N = 4 };
    req qs[N_REQ];
    memset(qs, 0, sizeof qs);
    for (int i = 0; i < N_REQ; i++) {
        fill_ids(qs[i].prompt, 70, 50 + (uint64_t)(i % 2));
        qs[i].n_prompt = 70;
        qs[i].max_tokens = 60;
        qs[i].n = N;
        qs[i].temp = 0.9f;
        qs[i].seed = 77 + 100 * (uint64_t)i;
    }
    engine_stats st = together_on_stories(qs, N_REQ, 32, 384, "exhausted");
    cr_expect_gt(st.preemptions_total, 0, "the pool forced preemptions");
}

Test(prefix_cache, cancel_ends_every_choice) {
    REQUIRE_SHARED("models/stories260K.gguf");
    env v;
    env_open_stories(&v);
    req q = random_req(300, 5, 150);
    q.n = 4;
    q.temp = 1.0f;
    result **got = results_new(1, 4);
    engine *e = env_engine(&v, 8, 16, 0, GGML_TYPE_F16, false);
    uint64_t id = submit_req(e, &q, got[0]);
    wait_tokens(e, got, 1, &got[0][0], 1);
    engine_cancel(e, id);
    drain(e, 4 - (got[0][0].done + got[0][1].done + got[0][2].done + got[0][3].done));
    for (int c = 0; c < 4; c++)
        cr_expect_eq(got[0][c].finish, ENGINE_FINISH_CANCELLED, "choice %d", c);
    engine_stats st;
    engine_get_stats(e, &st);
    cr_expect_eq(st.kv_blocks_used, 0);
    cr_expect_eq(st.requests_total[ENGINE_FINISH_CANCELLED], 4);
    /* cancelled while still prefilling: the unforked choices end too */
    q.n_prompt = 480;
    q.max_tokens = 20;
    fill_ids(q.prompt, 480, 6);
    memset(got[0], 0, 4 * sizeof(result));
    id = submit_req(e, &q, got[0]);
    engine_cancel(e, id);
    drain(e, 4);
    engine_get_stats(e, &st);
    cr_expect_eq(st.requests_total[ENGINE_FINISH_CANCELLED], 8);
    cr_expect_eq(st.kv_blocks_used, 0);
    engine_destroy(e);
    results_free(got, 1);
    env_close(&v);
}

Test(prefix_cache, n_beyond_what_could_run_is_refused_with_the_numbers) {
    REQUIRE_SHARED("models/stories260K.gguf");
    env v;
    env_open_stories(&v);
    engine *e = env_engine(&v, 8, 64, 1024, GGML_TYPE_F16, false);
    int32_t prompt[40];
    fill_ids(prompt, 40, 1);
    engine_request rq = {.prompt = prompt, .n_prompt = 40, .max_tokens = 10, .n = 9};
    sampler_params_default(&rq.sampling);
    env_expect_refused(e, &rq, TPS_EINVAL, "n = 9", "8", NULL);
    /* 2 shared blocks + 8 x (30 - 2) = 226 blocks; the pool has 64 */
    rq.n = 8;
    rq.max_tokens = 440;
    env_expect_refused(e, &rq, TPS_ERANGE, "n = 8", "226", "64", NULL);
    engine_destroy(e);
    env_close(&v);
}

Test(prefix_cache, off_means_no_hits_and_nothing_kept) {
    REQUIRE_SHARED("models/stories260K.gguf");
    env v;
    env_open_stories(&v);
    req q = random_req(100, 4, 4);
    result **got = results_new(2, 1);
    engine *e = env_engine(&v, 4, 64, 0, GGML_TYPE_F16, true);
    for (int i = 0; i < 2; i++) {
        submit_req(e, &q, got[i]);
        drain(e, 1);
        cr_expect_eq(got[i]->tm.cached_tokens, 0);
    }
    engine_stats st;
    engine_get_stats(e, &st);
    cr_expect_eq(st.prefix_cache_queries_total, 0);
    cr_expect_eq(st.prefix_cache_hits_total, 0);
    cr_expect_eq(st.kv_blocks_cached, 0);
    cr_expect_eq(st.prefill_rows_total, 200);
    engine_destroy(e);
    results_free(got, 2);
    env_close(&v);
}

/* ---- the pool's rules, on the kv_cache alone ---------------------------------- */

static kv_cache *small_pool(uint32_t n_blocks) {
    kv_cache_params p = {.n_layers = 1,
                         .kv_dim = 8,
                         .block_tokens = 4,
                         .kv_type = GGML_TYPE_F32,
                         .n_blocks = n_blocks,
                         .prefix_cache = true};
    return test_kv_create(&p);
}

Test(prefix_cache, pool_takes_free_blocks_before_evicting_and_evicts_a_chains_tail_first) {
    kv_cache *kv = small_pool(8);
    int32_t toks[16];
    for (int i = 0; i < 16; i++)
        toks[i] = 100 + i;
    kv_seq a = {0}, b = {0}, c = {0}, d = {0};
    kv_seq_init(&a, 8);
    kv_seq_init(&b, 8);
    kv_seq_init(&c, 8);
    kv_seq_init(&d, 8);
    cr_assert_eq(kv_seq_reserve(kv, &a, 16), 0);
    kv_seq_commit(kv, &a, toks, 16);
    cr_expect_eq(kv_cache_blocks_cached(kv), 4);
    kv_seq_release(kv, &a);
    cr_expect_eq(kv_cache_blocks_used(kv), 0);
    cr_expect_eq(kv_cache_available(kv), 8);
    /* 4 never-cached blocks are taken before any cached one */
    cr_assert_eq(kv_seq_reserve(kv, &b, 16), 0);
    cr_expect_eq(kv_cache_blocks_cached(kv), 4, "nothing evicted while free blocks remained");
    /* 2 more: evicts the chain's last two blocks, not its first */
    cr_assert_eq(kv_seq_reserve(kv, &c, 8), 0);
    cr_expect_eq(kv_cache_blocks_cached(kv), 2);
    cr_expect_eq(kv_seq_match_prefix(kv, &d, toks, 4), 2, "the chain's head survived");
    cr_expect_eq(kv_cache_available(kv), 0);
    cr_expect_eq(kv_seq_reserve(kv, &d, 12), TPS_EFULL, "nothing left to evict");
    kv_seq_release(kv, &b);
    kv_seq_release(kv, &c);
    kv_seq_release(kv, &d);
    cr_expect_eq(kv_cache_blocks_used(kv), 0);
    kv_seq_destroy(&a);
    kv_seq_destroy(&b);
    kv_seq_destroy(&c);
    kv_seq_destroy(&d);
    kv_cache_free(kv);
}

/* The same block tokens after different prefixes are different keys; a
 * block whose parent was evicted is unreachable. */
Test(prefix_cache, keys_name_the_whole_chain_and_die_with_their_parent) {
    kv_cache *kv = small_pool(4);
    int32_t x[8] = {1, 2, 3, 4, 9, 9, 9, 9}, y[8] = {5, 6, 7, 8, 9, 9, 9, 9};
    kv_seq a = {0}, b = {0}, q = {0};
    kv_seq_init(&a, 4);
    kv_seq_init(&b, 4);
    kv_seq_init(&q, 4);
    cr_assert_eq(kv_seq_reserve(kv, &a, 8), 0);
    kv_seq_commit(kv, &a, x, 8);
    cr_assert_eq(kv_seq_reserve(kv, &b, 8), 0);
    kv_seq_commit(kv, &b, y, 8);
    cr_expect_eq(kv_cache_blocks_cached(kv), 4, "9 9 9 9 after x and after y: two entries");
    cr_expect_eq(kv_seq_match_prefix(kv, &q, x, 2), 2);
    cr_expect_eq(q.blocks[1], a.blocks[1], "x's second block, not y's");
    kv_seq_release(kv, &q);
    kv_seq_release(kv, &a); /* a's second block is evicted first, then its first */
    kv_seq_release(kv, &b);
    kv_seq c = {0};
    kv_seq_init(&c, 4);
    cr_assert_eq(kv_seq_reserve(kv, &c, 8), 0); /* evicts x's chain: 2 blocks */
    cr_expect_eq(kv_seq_match_prefix(kv, &q, x, 2), 0, "x's chain is gone");
    cr_expect_eq(kv_seq_match_prefix(kv, &q, y, 2), 2, "y's is whole");
    kv_seq_release(kv, &q);
    kv_seq_release(kv, &c);
    kv_seq_destroy(&a);
    kv_seq_destroy(&b);
    kv_seq_destroy(&c);
    kv_seq_destroy(&q);
    kv_cache_free(kv);
}

/* Peak resident memory follows the load, not the pool: with a resident
 * bound of 64 of 1024 blocks, 200 unique 16-token prompts, 4 running at a
 * time, touch only the blocks the 4 hold at once (or the bound), the idle
 * warm-up stops at the bound, and the most recent prompt is still cached.
 * Before the bound, the pool handed out never-touched blocks while any
 * was left (all 1024 faulted in) and the warm-up faulted in all of it. */
Test(prefix_cache, resident_blocks_bound_the_touched_pool_and_the_warm_up) {
    kv_cache_params p = {.n_layers = 1,
                         .kv_dim = 8,
                         .block_tokens = 4,
                         .kv_type = GGML_TYPE_F32,
                         .n_blocks = 1024,
                         .prefix_cache = true,
                         .resident_blocks = 64};
    kv_cache *kv = test_kv_create(&p);
    kv_seq s[4] = {0};
    int32_t toks[4][16];
    for (int r = 0; r < 200; r++) {
        kv_seq *q = &s[r % 4];
        if (r >= 4) kv_seq_release(kv, q);
        kv_seq_destroy(q);
        cr_assert_eq(kv_seq_init(q, 4), 0);
        for (int i = 0; i < 16; i++)
            toks[r % 4][i] = r * 16 + i;
        cr_assert_eq(kv_seq_match_prefix(kv, q, toks[r % 4], 4), 0, "unique prompt");
        cr_assert_eq(kv_seq_reserve(kv, q, 16), 0);
        kv_seq_commit(kv, q, toks[r % 4], 16);
    }
    cr_expect_leq(kv->n_touched, 64, "touched %u blocks; the load held 16 at once", kv->n_touched);
    for (int k = 0; k < 4; k++)
        kv_seq_release(kv, &s[k]);
    kv_seq last = {0};
    kv_seq_init(&last, 4);
    cr_expect_eq(kv_seq_match_prefix(kv, &last, toks[199 % 4], 4), 4, "the last prompt is cached");
    kv_seq_release(kv, &last);
    kv_seq_destroy(&last);
    while (kv_cache_warm(kv, 4096))
        ;
    cr_expect_eq(kv->warm_bytes, 64 * kv->block_bytes, "the warm-up stops at the bound");
    cr_expect_lt(kv->warm_bytes, kv->map_bytes);
    /* Past the bound the pool still grows when the running sequences need
     * it: 300 blocks held at once. */
    kv_seq big[3] = {0};
    for (int k = 0; k < 3; k++) {
        kv_seq_init(&big[k], 100);
        cr_assert_eq(kv_seq_reserve(kv, &big[k], 400), 0);
    }
    cr_expect_geq(kv->n_touched, 300);
    for (int k = 0; k < 3; k++) {
        kv_seq_release(kv, &big[k]);
        kv_seq_destroy(&big[k]);
    }
    for (int k = 0; k < 4; k++)
        kv_seq_destroy(&s[k]);
    kv_cache_free(kv);
}

/* The pool is faulted in a slice at a time: kv_cache_warm says when it is
 * done; without the cache there is nothing to warm (freed blocks are
 * reused warm). The engine does it while idle and then says so. */
Test(prefix_cache, pool_warms_in_slices_and_the_idle_engine_reports_it) {
    kv_cache *kv = small_pool(1024); /* 1024 blocks x 4 positions x 32 B = 128 KiB each map */
    int slices = 0;
    while (kv_cache_warm(kv, 16384))
        slices++;
    cr_expect_eq(slices, 7, "128 KiB in slices of 16 KiB: 7 with more to come, then done");
    cr_expect_eq(kv->warm_bytes, kv->map_bytes);
    cr_expect(!kv_cache_warm(kv, 16384));
    kv_cache_free(kv);
    kv_cache_params p = {
        .n_layers = 1, .kv_dim = 8, .block_tokens = 4, .kv_type = GGML_TYPE_F32, .n_blocks = 8};
    kv = test_kv_create(&p);
    cr_expect(!kv_cache_warm(kv, 16384), "no prefix cache: nothing to warm");
    kv_cache_free(kv);

    REQUIRE_SHARED("models/stories260K.gguf");
    env v;
    env_open_stories(&v);
    engine *e = env_engine(&v, 4, 64, 0, GGML_TYPE_F16, false);
    engine_stats st = {0};
    uint64_t deadline = tps_now_ns() + 30ull * TPS_NS_PER_SEC;
    while (!st.kv_pool_warm && tps_now_ns() < deadline) {
        usleep(1000);
        engine_get_stats(e, &st);
    }
    cr_expect(st.kv_pool_warm, "the idle engine warmed its pool");
    engine_destroy(e);
    env_close(&v);
}
