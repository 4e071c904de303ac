/* A hybrid model (Qwen3.5: linear-attention layers with a recurrent state
 * per sequence) in the engine: every request in a staggered batch equals
 * the request run alone, with the prefix cache on and with a KV pool small
 * enough to preempt (the state is recomputed from the prompt); n choices
 * each continue the prompt's state as the request alone does; a shared
 * prompt is served from the prefix cache (the K/V of its blocks and a
 * checkpoint of the state) with answers equal to the cache off; cancels
 * and the end of every request give every state slot back. The MoE
 * variant (qwen35moe) batched as well. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/core/engine.h"
#include "model/model_make.h"
#include "plan/plan_cost.h"
#include "support/engine_env.h"
#include "support/model_run.h"

#define N_REQ 16

static const env_work_spec WORK = {N_REQ, 4242, 90, true, 20};

static void open_arch(env *v, char *path, const char *arch) {
    test_model_make_arch(path, "tiny", arch, GGML_TYPE_F32, 5);
    env_open(v, path);
}

static void open_hybrid(env *v, char *path) {
    open_arch(v, path, "qwen35");
}

/* A tiny model of one architecture in a temporary file, opened, and WORK's
 * requests for its vocabulary. */
typedef struct hybrid {
    char path[32];
    env v;
    env_work w;
} hybrid;

static void hybrid_open(hybrid *h, const char *arch) {
    snprintf(h->path, sizeof h->path, "/tmp/tps-test-hybrid-XXXXXX");
    open_arch(&h->v, h->path, arch);
    env_work_make(&h->w, &WORK, h->v.m->cfg.n_vocab);
}

static void hybrid_close(hybrid *h) {
    env_work_free(&h->w);
    env_close(&h->v);
    unlink(h->path);
}

static engine *start(env *v, uint32_t max_seqs, uint32_t kv_tokens, bool cache_prefixes) {
    engine_params p = env_params(v);
    p.n_threads = 2;
    p.max_seqs = max_seqs;
    p.max_batch_tokens = 64;
    p.kv_tokens = kv_tokens;
    p.no_prefix_cache = !cache_prefixes;
    return env_start(&p);
}

static void submit(engine *e, const env_work *w, int i, result *res) {
    engine_request rq = env_greedy_request(w->prompt[i], w->n_prompt[i], w->max_tokens[i], &res[i]);
    env_submit(e, &rq);
}

static void expect_slots_back(engine *e) {
    engine_stats st;
    engine_get_stats(e, &st);
    cr_expect_gt(st.state_slots_total, 0, "a hybrid model has a state pool");
    cr_expect_eq(st.state_slots_used, 0, "every state slot given back");
}

/* Each request alone, one at a time: the reference. */
static result *run_alone(env *v, const env_work *w) {
    result *alone = calloc(N_REQ, sizeof *alone);
    engine *e = start(v, 1, 0, false);
    for (int i = 0; i < N_REQ; i++) {
        submit(e, w, i, alone);
        drain(e, 1);
    }
    expect_slots_back(e);
    engine_destroy(e);
    return alone;
}

static void expect_same(const result *got, const result *want, const char *how) {
    for (int i = 0; i < N_REQ; i++) {
        cr_assert_eq(got[i].n, want[i].n, "%s: request %d", how, i);
        cr_expect_eq(memcmp(got[i].tokens, want[i].tokens, want[i].n * sizeof(int32_t)), 0,
                     "%s: request %d's tokens differ from its tokens alone", how, i);
    }
}

/* kv_tokens 0: the default pool; else a pool that forces preemption. */
static void check_batched(const char *arch, uint32_t kv_tokens, bool cache_prefixes,
                          const char *how) {
    hybrid h;
    hybrid_open(&h, arch);
    result *alone = run_alone(&h.v, &h.w);
    result *batched = calloc(N_REQ, sizeof *batched);
    engine *e = start(&h.v, N_REQ, kv_tokens, cache_prefixes);
    int sent = 0;
    for (; sent < N_REQ / 2; sent++)
        submit(e, &h.w, sent, batched);
    while (sent < N_REQ) {
        engine_wait(e, 5);
        submit(e, &h.w, sent++, batched);
    }
    drain(e, N_REQ);
    engine_stats st;
    engine_get_stats(e, &st);
    if (kv_tokens) cr_expect_gt(st.preemptions_total, 0, "%s: the small pool preempted", how);
    expect_slots_back(e);
    engine_destroy(e);
    expect_same(batched, alone, how);
    free(alone);
    free(batched);
    hybrid_close(&h);
}

Test(hybrid_engine, staggered_batch_equals_each_request_alone, .timeout = 240) {
    check_batched("qwen35", 0, true, "batched, prefix cache on");
}

/* Qwen3.5's MoE: the experts and the gated shared expert beside the
 * recurrent layers, 16 streams against each alone. */
Test(hybrid_engine, moe_variant_batched_equals_each_request_alone, .timeout = 240) {
    check_batched("qwen35moe", 0, true, "qwen35moe batched, prefix cache on");
}

Test(hybrid_engine, preempted_requests_recompute_their_state, .timeout = 240) {
    check_batched("qwen35", 160, false, "preempted");
}

/* n = 3 greedy choices of one prompt: the prompt's state copied to each,
 * so every choice is the request's answer alone. */
Test(hybrid_engine, every_choice_continues_the_prompts_state, .timeout = 120) {
    hybrid h;
    hybrid_open(&h, "qwen35");
    result one = {0};
    engine *e = start(&h.v, 4, 0, true);
    engine_request alone =
        env_greedy_request(h.w.prompt[1], h.w.n_prompt[1], h.w.max_tokens[1], &one);
    env_submit(e, &alone);
    drain(e, 1);
    result three[3] = {0};
    engine_request rq =
        env_greedy_request(h.w.prompt[1], h.w.n_prompt[1], h.w.max_tokens[1], three);
    rq.n = 3;
    env_submit(e, &rq);
    drain(e, 3);
    for (int c = 0; c < 3; c++) {
        cr_assert_eq(three[c].n, one.n, "choice %d", c);
        cr_expect_eq(memcmp(three[c].tokens, one.tokens, one.n * sizeof(int32_t)), 0,
                     "choice %d differs from the request alone", c);
    }
    expect_slots_back(e);
    engine_destroy(e);
    hybrid_close(&h);
}

/* Requests cancelled while they run give their slots back. */
Test(hybrid_engine, cancels_give_the_state_slots_back, .timeout = 120) {
    hybrid h;
    hybrid_open(&h, "qwen35");
    result res[N_REQ] = {0};
    engine *e = start(&h.v, N_REQ, 0, true);
    uint64_t ids[N_REQ];
    for (int i = 0; i < N_REQ; i++) {
        engine_request rq = env_greedy_request(h.w.prompt[i], h.w.n_prompt[i], 400, &res[i]);
        ids[i] = env_submit(e, &rq);
    }
    engine_wait(e, 20);
    for (int i = 0; i < N_REQ; i++)
        engine_cancel(e, ids[i]);
    drain(e, N_REQ);
    expect_slots_back(e);
    engine_destroy(e);
    hybrid_close(&h);
}

/* N_SHARED requests of one 150-token prompt prefix and their own 1 to 20
 * token tails, one after another: with the prefix cache every request
 * after the first reuses the prefix up to its last 64-position checkpoint
 * (128 tokens), and every answer equals its answer with the cache off. */
#define N_SHARED 8
static void run_shared(env *v, bool cache, result *res, engine_stats *st) {
    int32_t prompt[N_SHARED][200];
    size_t n[N_SHARED];
    uint64_t rng = 99;
    for (int i = 0; i < N_SHARED; i++) {
        n[i] = 150 + 1 + (size_t)i * 19 % 20;
        for (size_t k = 0; k < n[i]; k++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            prompt[i][k] = k == 0 ? 1 : 3 + (int32_t)((k < 150 ? k * 7919 : rng >> 33) % 500);
        }
    }
    engine *e = start(v, 4, 0, cache);
    for (int i = 0; i < N_SHARED; i++) {
        engine_request rq = env_greedy_request(prompt[i], n[i], 12, &res[i]);
        env_submit(e, &rq);
        drain(e, 1);
    }
    engine_get_stats(e, st);
    expect_slots_back(e);
    engine_destroy(e);
}

Test(hybrid_engine, a_shared_prompt_is_served_from_the_cache_with_the_same_answers,
     .timeout = 120) {
    char path[] = "/tmp/tps-test-hybrid-XXXXXX";
    env v;
    open_hybrid(&v, path);
    result off[N_SHARED] = {0}, on[N_SHARED] = {0};
    engine_stats st_off, st_on;
    run_shared(&v, false, off, &st_off);
    run_shared(&v, true, on, &st_on);
    cr_expect_eq(st_on.prefix_cache_hits_total, (uint64_t)128 * (N_SHARED - 1),
                 "every request after the first reuses 128 prompt tokens");
    cr_expect_lt(st_on.prefill_rows_total, st_off.prefill_rows_total - 128 * (N_SHARED - 2));
    for (int i = 0; i < N_SHARED; i++) {
        cr_assert_eq(on[i].n, off[i].n);
        cr_expect_eq(memcmp(on[i].tokens, off[i].tokens, off[i].n * sizeof(int32_t)), 0,
                     "request %d: the cached answer differs from the uncached one", i);
    }
    env_close(&v);
    unlink(path);
}

/* tps plan's roofline (uncalibrated) on a hybrid model: a decode step
 * reads and writes each sequence's recurrent state once, whatever the
 * context (the shape's arithmetic: per linear layer the conv's last taps -
 * 1 inputs and the value heads' S x S matrices, F32), and the K/V it reads
 * grows with context in the attention layers only. */
Test(hybrid_engine, the_plan_roofline_counts_each_sequence_s_state_once_a_step) {
    env v;
    char path[] = "/tmp/tps-hybrid-XXXXXX";
    open_hybrid(&v, path);
    const llama_config *c = &v.m->cfg;
    uint64_t floats = 0;
    for (uint32_t l = 0; l < c->n_layers; l++)
        if ((l + 1) % c->full_attn_interval != 0)
            floats +=
                (uint64_t)(c->ssm_conv - 1) * (2 * c->ssm_k_heads + c->ssm_v_heads) * c->ssm_state +
                (uint64_t)c->ssm_v_heads * c->ssm_state * c->ssm_state;
    cr_assert_gt(floats, 0);
    const machine_limits ml = {.threads = 2, .read_gbs = 10, .int8_gops = 1e3, .fp32_gflops = 1e3};
    plan_cost pc;
    plan_cost_roofline(&pc, &ml, v.m, GGML_TYPE_F16);
    const double bw = plan_cost_fwd_ns(
        &pc, &(step_shape){.rows = 16, .logit_rows = 16, .attended = 16000, .kv_read = 16000});
    const double with = plan_cost_fwd_ns(
        &pc, &(step_shape){
                 .rows = 16, .logit_rows = 16, .attended = 16000, .kv_read = 16000, .seqs = 16});
    /* 16 states read and written at the roofline's bandwidth */
    const double per_byte = (with - bw) / (2.0 * 16 * 4 * (double)floats);
    cr_expect_gt(per_byte, 0, "the states cost nothing");
    const double deeper = plan_cost_fwd_ns(
        &pc, &(step_shape){
                 .rows = 16, .logit_rows = 16, .attended = 16000, .kv_read = 32000, .seqs = 16});
    /* the attention layers' K and V (F16) a position, at the same rate */
    uint64_t kv_dims = 0;
    for (uint32_t l = 0; l < c->n_layers; l++)
        if ((l + 1) % c->full_attn_interval == 0) kv_dims += 2ull * c->n_kv_heads * c->head_dim;
    cr_expect_float_eq((deeper - with) / (16000.0 * 2 * (double)kv_dims), per_byte, 1e-6 * per_byte,
                       "K/V bytes and state bytes at different rates");
    env_close(&v);
    unlink(path);
}
