/* The continuous-batching engine on the real stories260K model: batch
 * invariance (every request's tokens in a mixed, staggered batch equal the
 * same request run alone), preemption under a small KV pool, cancellation
 * returning every block, chunked prefill not stalling decodes, and the
 * rejections at submit. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/core/engine.h"
#include "engine/core/engine_setup.h"
#include "engine/kv/kv_cache.h"
#include "base/clock.h"
#include "model/model_make.h"
#include "plan/plan_replay.h"
#include "support/engine_env.h"
#include "support/test_support.h"
#include "support/test_data.h"

#define N_REQ 64

static engine *start_kv(env *v, uint32_t max_seqs, uint32_t max_batch, uint32_t kv_tokens,
                        uint32_t kv_type) {
    return env_engine(v, max_seqs, max_batch, kv_tokens, kv_type, false);
}

static engine *start(env *v, uint32_t max_seqs, uint32_t max_batch, uint32_t kv_tokens) {
    return start_kv(v, max_seqs, max_batch, kv_tokens, GGML_TYPE_F16);
}

/* A workload of N_REQ requests: BOS + random ids, lengths 1..400 (the
 * first 1, the second 400), max tokens 1..48; request i's seed 1000 + i. */
static const env_work_spec WORK = {N_REQ, 12345, 400, true, 48};

static void submit(engine *e, const env_work *w, int i, float temp, result *res, uint64_t *ids) {
    engine_request rq = {.prompt = w->prompt[i],
                         .n_prompt = w->n_prompt[i],
                         .max_tokens = w->max_tokens[i],
                         .user = &res[i]};
    sampler_params_default(&rq.sampling);
    rq.sampling.temperature = temp;
    rq.sampling.seed = 1000 + (uint64_t)i;
    tps_err err = {0};
    cr_assert_eq(engine_submit(e, &rq, &ids[i], &err), 0, "request %d: %s", i, err.msg);
}

/* The reference: one request at a time, and no prefix cache (the batched
 * runs have it on, so they also show cached output equals uncached). */
static void run_alone(env *v, const env_work *w, float temp, uint32_t kv_type, result *alone) {
    engine *e = env_engine(v, 1, 256, 0, kv_type, true);
    uint64_t ids[N_REQ];
    for (int i = 0; i < N_REQ; i++) {
        submit(e, w, i, temp, alone, ids);
        drain(e, 1);
    }
    engine_destroy(e);
}

/* Staggered: a quarter at once, then the rest in small waves while the
 * engine is running. */
static engine_stats run_batched(env *v, const env_work *w, float temp, uint32_t kv_tokens,
                                uint32_t kv_type, result *res) {
    engine *e = start_kv(v, 64, 256, kv_tokens, kv_type);
    uint64_t ids[N_REQ];
    int sent = 0;
    for (; sent < N_REQ / 4; sent++)
        submit(e, w, sent, temp, res, ids);
    while (sent < N_REQ) {
        engine_wait(e, 5);
        for (int k = 0; k < 6 && sent < N_REQ; k++, sent++)
            submit(e, w, sent, temp, res, ids);
    }
    drain(e, N_REQ);
    engine_stats st;
    engine_get_stats(e, &st);
    cr_expect_eq(st.kv_blocks_used, 0, "every KV block is back when idle");
    engine_destroy(e);
    return st;
}

static void compare(const result *alone, const result *batched, const char *what) {
    for (int i = 0; i < N_REQ; i++) {
        cr_assert(batched[i].done && alone[i].done);
        cr_assert_eq(batched[i].n, alone[i].n, "%s: request %d: %zu tokens batched, %zu alone",
                     what, i, batched[i].n, alone[i].n);
        cr_assert_eq(memcmp(batched[i].tokens, alone[i].tokens, alone[i].n * sizeof(int32_t)), 0,
                     "%s: request %d: tokens differ from the request run alone", what, i);
        cr_assert_eq(batched[i].finish, alone[i].finish);
    }
}

/* Batched with a pool too small for all at once (1024 positions): the
 * tokens of each request alone, with preemptions and no errors. */
static void check_small_pool(env *v, const env_work *w, float temp, uint32_t kv_type,
                             const result *alone, const char *what) {
    result *batched = calloc(N_REQ, sizeof *batched);
    engine_stats st = run_batched(v, w, temp, 1024, kv_type, batched);
    compare(alone, batched, what);
    cr_expect_gt(st.preemptions_total, 0, "the small pool forced preemptions");
    cr_expect_eq(st.requests_total[ENGINE_FINISH_ERROR], 0);
    free(batched);
}

/* Runs the workload alone, then batched with a roomy pool, then (when
 * small_pool) batched with a pool too small for all at once: 1024 positions,
 * where each request fits alone (<= 496) but 64 together do not. */
static void invariance(float temp, bool small_pool) {
    REQUIRE_SHARED("models/stories260K.gguf");
    env v;
    env_open_stories(&v);
    env_work w;
    env_work_make(&w, &WORK, v.m->cfg.n_vocab);
    result *alone = calloc(N_REQ, sizeof *alone), *batched = calloc(N_REQ, sizeof *batched);
    run_alone(&v, &w, temp, GGML_TYPE_F16, alone);
    engine_stats st = run_batched(&v, &w, temp, 0, GGML_TYPE_F16, batched);
    compare(alone, batched, temp > 0 ? "sampled" : "greedy");
    cr_expect_eq(st.requests_total[ENGINE_FINISH_ERROR], 0);
    if (small_pool) check_small_pool(&v, &w, temp, GGML_TYPE_F16, alone, "greedy, small KV pool");
    free(alone);
    free(batched);
    env_work_free(&w);
    env_close(&v);
}

Test(engine, batch_of_64_greedy_equals_alone_also_when_a_small_kv_pool_preempts, .timeout = 400) {
    invariance(0.0f, true);
}

Test(engine, batch_of_64_sampled_with_seeds_equals_each_request_alone, .timeout = 400) {
    invariance(0.9f, false);
}

Test(engine, cancel_mid_prefill_and_mid_decode_returns_every_block) {
    REQUIRE_SHARED("models/stories260K.gguf");
    env v;
    env_open_stories(&v);
    env_work w;
    env_work_make(&w, &WORK, v.m->cfg.n_vocab);
    /* Small budget so a 400-token prompt takes many steps to prefill. */
    engine *e = start(&v, 8, 16, 0);
    result res[N_REQ] = {0};
    uint64_t ids[N_REQ];
    w.max_tokens[1] = 100;
    submit(e, &w, 1, 0.0f, res, ids); /* 400-token prompt: cancelled during prefill */
    engine_cancel(e, ids[1]);
    /* All the context its prompt leaves (max_tokens 0), and no stop at EOS: a test thread
     * descheduled for a while (ctest -j2, a sanitizer) must still find it
     * decoding when it cancels (100 tokens once finished first). */
    engine_request rq2 = env_greedy_request(w.prompt[2], w.n_prompt[2], 0, &res[2]);
    ids[2] = env_submit(e, &rq2);
    engine_event ev[16];
    while (res[2].n < 3) { /* cancelled during decode, after 3 tokens */
        engine_wait(e, 100);
        size_t k = engine_poll(e, ev, 16);
        for (size_t i = 0; i < k; i++) {
            result *r = ev[i].user;
            if (ev[i].kind == ENGINE_EV_TOKEN)
                r->tokens[r->n++] = ev[i].token;
            else
                r->done = true, r->finish = ev[i].finish;
        }
    }
    engine_cancel(e, ids[2]);
    engine_cancel(e, 987654); /* unknown ids are ignored */
    while (!res[1].done || !res[2].done) {
        engine_wait(e, 100);
        size_t k = engine_poll(e, ev, 16);
        for (size_t i = 0; i < k; i++) {
            result *r = ev[i].user;
            if (ev[i].kind == ENGINE_EV_DONE) r->done = true, r->finish = ev[i].finish;
        }
    }
    cr_expect_eq(res[1].finish, ENGINE_FINISH_CANCELLED);
    cr_expect_eq(res[2].finish, ENGINE_FINISH_CANCELLED);
    engine_stats st;
    engine_get_stats(e, &st);
    cr_expect_eq(st.kv_blocks_used, 0, "cancelled requests returned their blocks");
    cr_expect_eq(st.requests_running + st.requests_waiting, 0);
    cr_expect_eq(st.requests_total[ENGINE_FINISH_CANCELLED], 2);
    engine_destroy(e);
    env_work_free(&w);
    env_close(&v);
}

/* A sliding-window layer reads at most its window's K and V; the others
 * the whole context. 6 layers of which every 3rd is global (llama.cpp's
 * pattern: layers 2 and 5), window 4, F16 rows of 2 heads x 8. */
Test(engine, kv_bytes_attended_counts_each_layer_s_window) {
    llama_config c = {.n_layers = 6, .n_kv_heads = 2, .head_dim = 8, .n_swa = 4, .swa_period = 3};
    const double row = 2 * 8 * 2; /* heads x head_dim x F16 */
    cr_expect_eq(engine_kv_bytes_attended(&c, GGML_TYPE_F16, 10), 2 * row * (4 * 4 + 2 * 10));
    cr_expect_eq(engine_kv_bytes_attended(&c, GGML_TYPE_F16, 3), 2 * row * (6 * 3));
    cr_expect_eq(engine_kv_bytes_attended(&c, GGML_TYPE_F32, 10), 2 * 2 * row * (4 * 4 + 2 * 10));
    c.n_swa = 0;
    cr_expect_eq(engine_kv_bytes_attended(&c, GGML_TYPE_F16, 10), 2 * row * (6 * 10));
}

/* Latent attention (DeepSeek's MLA) stores and reads one latent row a
 * position and layer, keys and values both: V2-Lite's 512 + 64 elements,
 * 27 layers. Its pool is K alone: a token of --kv-tokens takes the latent's
 * bytes, not twice them. */
Test(engine, latent_attention_kv_is_the_latent_once) {
    llama_config c = {.n_layers = 27,
                      .n_heads = 16,
                      .n_kv_heads = 1,
                      .head_dim = 576,
                      .kv_lora_rank = 512,
                      .ctx_len = 4096};
    cr_expect_eq(engine_kv_bytes_attended(&c, GGML_TYPE_F16, 10), 27.0 * 576 * 2 * 10);
    engine_params p = {.kv_tokens = 1024, .kv_type = GGML_TYPE_F16, .max_seqs = 4};
    engine_params_resolve(&p);
    kv_cache *kv;
    tps_err err = {0};
    cr_assert_eq(engine_kv_create(&kv, &c, &p, false, &err), 0, "%s", err.msg);
    cr_expect(kv->k_only && kv->v == kv->k);
    cr_expect_eq(kv->block_bytes, (size_t)27 * 16 * 576 * 2);
    cr_expect_eq(p.kv_mem, (size_t)kv->n_blocks * 16 * 27 * 576 * 2);
    cr_expect_eq(kv->n_blocks, 1024 / 16);
    kv_cache_free(kv);
}

/* Gemma 4's pool (tiny's shape): the sliding layers' blocks in the local
 * pool with their own heads (4 of 16), the global layer's with its (2 of
 * 32), and no slot and no bytes for the last two layers, which read layers
 * 1 and 2's K/V; a row's reads count those shared layers' reads too. */
Test(engine, gemma4_kv_pool_stores_nothing_for_shared_layers) {
    llama_config c = {.n_layers = 5,
                      .n_heads = 8,
                      .n_kv_heads = 2,
                      .head_dim = 32,
                      .n_kv_heads_swa = 4,
                      .head_dim_swa = 16,
                      .n_swa = 8,
                      .swa_list = 1,
                      .n_kv_shared = 2,
                      .ctx_len = 512};
    c.swa_bits[0] = 0x0b; /* layers 0, 1 and 3 slide */
    cr_expect_eq(llama_config_kv_elems(&c), 2 * (2 * 4 * 16 + 2 * 32));
    cr_expect_eq(llama_config_kv_source(&c, 3), 1);
    cr_expect_eq(llama_config_kv_source(&c, 4), 2);
    engine_params p = {.kv_tokens = 1024, .kv_type = GGML_TYPE_F16, .max_seqs = 4};
    engine_params_resolve(&p);
    kv_cache *kv;
    tps_err err = {0};
    cr_assert_eq(engine_kv_create(&kv, &c, &p, false, &err), 0, "%s", err.msg);
    cr_expect_eq(kv->block_bytes, (size_t)16 * 2 * 32 * 2);      /* K (or V): 1 global layer */
    cr_expect_eq(kv->lblock_bytes, (size_t)2 * 16 * 4 * 16 * 2); /* 2 sliding layers */
    cr_expect_eq(kv->layer_slot[3], UINT32_MAX);
    cr_expect_eq(kv->layer_slot[4], UINT32_MAX);
    cr_expect_eq(kv_layer_head_dim(kv, 1), 16);
    cr_expect_eq(kv_layer_head_dim(kv, 2), 32);
    kv_cache_free(kv);
    /* at context 10: 3 sliding layers read 8 positions of 4 x 16, 2 global 10 of 2 x 32 */
    cr_expect_eq(engine_kv_bytes_attended(&c, GGML_TYPE_F16, 10),
                 2.0 * 2 * (3 * 8 * 64 + 2 * 10 * 64));
}

/* The stats' multiply-adds: every row through the layers, the LM head only
 * on rows that sample (the prompt's last and each decode row), and each
 * row's attention over its context. One request of P prompt tokens and N
 * generated: P + N - 1 rows, N heads, row p attending p + 1 positions. */
Test(engine, multiply_adds_count_the_lm_head_only_on_rows_that_sample) {
    REQUIRE_SHARED("models/stories260K.gguf");
    env v;
    env_open_stories(&v);
    engine *e = env_engine(&v, 1, 0, 0, GGML_TYPE_F16, true);
    enum { P = 40, N = 12 };
    int32_t prompt[P];
    for (int i = 0; i < P; i++)
        prompt[i] = 1 + (i * 37) % ((int)v.m->cfg.n_vocab - 1);
    result res = {0};
    engine_request rq = {.prompt = prompt, .n_prompt = P, .max_tokens = N, .user = &res};
    sampler_params_default(&rq.sampling);
    rq.sampling.ignore_eos = true;
    uint64_t id;
    tps_err err = {0};
    cr_assert_eq(engine_submit(e, &rq, &id, &err), 0, "%s", err.msg);
    drain(e, 1);
    cr_assert_eq(res.n, N);
    engine_stats st;
    engine_get_stats(e, &st);
    const model_shape sh = model_shape_of(v.m);
    const double rows = P + N - 1, attended = rows * (rows + 1) / 2;
    const double want = rows * sh.body + N * sh.head + attended * sh.per_pos;
    cr_expect(fabs(st.macs_total - want) <= 1e-9 * want, "macs_total %.0f, expected %.0f",
              st.macs_total, want);
    engine_destroy(e);
    env_close(&v);
}

Test(engine, rejects_what_could_never_run_with_both_numbers) {
    REQUIRE_SHARED("models/stories260K.gguf");
    env v;
    env_open_stories(&v);
    engine *e = start(&v, 4, 64, 0);
    int32_t *long_prompt = calloc(600, sizeof(int32_t));
    for (int i = 0; i < 600; i++)
        long_prompt[i] = 100;
    engine_request rq = {.prompt = long_prompt, .n_prompt = 600, .max_tokens = 1};
    sampler_params_default(&rq.sampling);
    env_expect_refused(e, &rq, TPS_ERANGE, "600", "512", NULL);
    rq.n_prompt = 500;
    rq.max_tokens = 20;
    env_expect_refused(e, &rq, TPS_ERANGE, "500", "20", "512", NULL);
    rq.n_prompt = 0;
    env_expect_refused(e, &rq, TPS_EINVAL, NULL);
    rq.n_prompt = 2;
    long_prompt[1] = 512;
    env_expect_refused(e, &rq, TPS_EINVAL, "512", NULL);
    long_prompt[1] = 5;
    rq.sampling.top_p = 2.0f;
    env_expect_refused(e, &rq, TPS_EINVAL, "top_p", NULL);
    rq.sampling.top_p = 1.0f;
    rq.max_tokens = 0; /* 0 means: up to the context */
    uint64_t id;
    tps_err err = {0};
    cr_expect_eq(engine_submit(e, &rq, &id, &err), 0, "%s", err.msg);
    engine_cancel(e, id);
    free(long_prompt);
    engine_destroy(e);
    env_close(&v);
}

Test(engine, full_queue_is_refused) {
    REQUIRE_SHARED("models/stories260K.gguf");
    env v;
    env_open_stories(&v);
    engine_params p = env_params(&v);
    p.max_queue = 2;
    p.max_seqs = 1;
    engine *e = env_start(&p);
    int32_t prompt[] = {1, 100, 200};
    engine_request rq = {.prompt = prompt, .n_prompt = 3, .max_tokens = 400};
    sampler_params_default(&rq.sampling);
    rq.sampling.ignore_eos = true;
    uint64_t id;
    tps_err err = {0};
    int refused = 0;
    for (int i = 0; i < 6; i++)
        refused += engine_submit(e, &rq, &id, &err) == TPS_EFULL;
    cr_expect_geq(refused, 3, "at most 1 running + 2 waiting are accepted");
    cr_expect(strstr(err.msg, "queue is full") != NULL, "%s", err.msg);
    engine_destroy(e);
    env_close(&v);
}

/* GGML_TYPE_F32 is 0: asking for it must not read as "unset" (it used to
 * become F16 silently, so --kv-type f32 did nothing). */
Test(engine, f32_kv_asked_for_is_kept_and_q8_0_on_small_heads_is_refused) {
    REQUIRE_SHARED("models/stories260K.gguf");
    env v;
    env_open_stories(&v);
    engine *e = start_kv(&v, 4, 64, 0, GGML_TYPE_F32);
    cr_assert_eq(engine_get_params(e)->kv_type, GGML_TYPE_F32);
    engine_destroy(e);
    /* and Q8_0 on heads of 8 (not whole blocks of 32) is refused by name */
    engine_params p = env_params(&v);
    p.n_threads = 1;
    p.kv_type = GGML_TYPE_Q8_0;
    tps_err err = {0};
    e = NULL;
    cr_assert_neq(engine_create(&e, &p, &err), 0);
    cr_assert_null(e);
    cr_assert(strstr(err.msg, "multiple of 32") != NULL, "%s", err.msg);
    env_close(&v);
}

/* Q8_0 KV (a made model: its heads of 32 are whole Q8_0 blocks, which
 * stories260K's heads of 8 are not): sampled tokens in a staggered batch of
 * 64, with a pool small enough to preempt, equal each request alone. */
Test(engine, q8_0_kv_batch_of_64_sampled_equals_alone_under_preemption, .timeout = 400) {
    char path[] = "/tmp/tps-test-h32-XXXXXX";
    const model_preset pre = {"h32", "test", 128, 2, 4, 2, 256, 512, 1024, 10000.0f};
    env v;
    env_open_made(&v, path, &pre, GGML_TYPE_Q8_0, 5);
    env_work w;
    env_work_make(&w, &WORK, v.m->cfg.n_vocab);
    result *alone = calloc(N_REQ, sizeof *alone);
    run_alone(&v, &w, 1.0f, GGML_TYPE_Q8_0, alone);
    check_small_pool(&v, &w, 1.0f, GGML_TYPE_Q8_0, alone, "sampled, q8_0 KV, small pool");
    free(alone);
    env_work_free(&w);
    env_close(&v);
    unlink(path);
}

/* Sarathi's point: a long prompt arriving while others decode is split into
 * chunks that share steps with the decodes, so they keep streaming. */
Test(engine, long_prompt_prefill_does_not_stall_running_decodes, .timeout = 240) {
    char path[] = "/tmp/tps-test-longctx-XXXXXX";
    const model_preset pre = {"longctx", "test", 64, 2, 4, 2, 128, 512, 4096, 10000.0f};
    env v;
    env_open_made(&v, path, &pre, GGML_TYPE_F32, 7);
    tps_err err = {0};
    engine *e = start(&v, 16, 256, 0);
    enum { N_DEC = 8, LONG = 2000 };
    result res[N_DEC + 1] = {0};
    int32_t *prompt = malloc(LONG * sizeof(int32_t));
    for (int i = 0; i < LONG; i++)
        prompt[i] = 3 + (i * 7) % 500;
    engine_request rq = {.prompt = prompt, .n_prompt = 4, .max_tokens = 1000};
    sampler_params_default(&rq.sampling);
    rq.sampling.temperature = 0;
    rq.sampling.ignore_eos = true;
    uint64_t id;
    for (int i = 0; i < N_DEC; i++) {
        rq.user = &res[i];
        cr_assert_eq(engine_submit(e, &rq, &id, &err), 0, "%s", err.msg);
    }
    /* Wait until all eight decode, then send the long prompt. */
    engine_event ev[64];
    uint64_t *times[N_DEC];
    size_t n_times[N_DEC] = {0};
    for (int i = 0; i < N_DEC; i++)
        times[i] = malloc(2000 * sizeof(uint64_t));
    int decoding = 0;
    bool long_sent = false;
    uint64_t deadline = tps_now_ns() + 120ull * TPS_NS_PER_SEC;
    while (!res[N_DEC].done) {
        cr_assert_lt(tps_now_ns(), deadline);
        if (!long_sent && decoding == N_DEC) {
            engine_request lr = rq;
            lr.n_prompt = LONG;
            lr.max_tokens = 1;
            lr.user = &res[N_DEC];
            cr_assert_eq(engine_submit(e, &lr, &id, &err), 0, "%s", err.msg);
            long_sent = true;
        }
        engine_wait(e, 50);
        size_t k = engine_poll(e, ev, 64);
        for (size_t i = 0; i < k; i++) {
            result *r = ev[i].user;
            int idx = (int)(r - res);
            if (ev[i].kind == ENGINE_EV_DONE) {
                r->done = true;
                r->tm = ev[i].timings;
            } else if (idx < N_DEC) {
                if (n_times[idx] == 0) decoding++;
                times[idx][n_times[idx]++] = ev[i].t_ns;
            }
        }
    }
    uint64_t a = res[N_DEC].tm.t_first_scheduled, b = res[N_DEC].tm.t_first_token;
    cr_assert(a && b > a);
    for (int d = 0; d < N_DEC; d++) {
        int during = 0;
        for (size_t k = 0; k < n_times[d]; k++)
            during += times[d][k] >= a && times[d][k] <= b;
        /* 2000 prompt rows at <= 248 a step take >= 8 steps; a decode that
         * was not stalled got a token in each of them. */
        cr_expect_geq(during, 8, "decoder %d got only %d tokens while the long prompt prefilled", d,
                      during);
        free(times[d]);
    }
    free(prompt);
    engine_destroy(e);
    env_close(&v);
    unlink(path);
}

/* An engine on stories260K, one kernel thread, max_seqs requests at a time
 * (0: the default), writing its trace to path (a "...XXXXXX" template it
 * fills in). */
static engine *start_traced(env *v, char *path, uint32_t max_seqs) {
    REQUIRE_SHARED("models/stories260K.gguf");
    env_open_stories(v);
    close(mkstemp(path));
    engine_params p = env_params(v);
    p.n_threads = 1;
    if (max_seqs) p.max_seqs = max_seqs;
    p.trace_path = path;
    return env_start(&p);
}

/* --trace writes Chrome trace JSON: a step track with its counts and one
 * track per request with queued / prefill / decode spans. */
Test(engine, trace_file_has_steps_and_request_spans) {
    env v;
    char path[] = "/tmp/tps-trace-XXXXXX";
    engine *e = start_traced(&v, path, 0);
    int32_t prompt[] = {1, 403, 407, 261, 378};
    engine_request rq = {.prompt = prompt, .n_prompt = 5, .max_tokens = 8};
    sampler_params_default(&rq.sampling);
    rq.sampling.temperature = 0;
    result res[2] = {0};
    uint64_t id;
    tps_err err = {0};
    for (int i = 0; i < 2; i++) {
        rq.user = &res[i];
        cr_assert_eq(engine_submit(e, &rq, &id, &err), 0, "%s", err.msg);
    }
    drain(e, 2);
    engine_destroy(e);
    json_t *t = test_json_load("%s", path); /* the trace */
    json_t *evs = json_object_get(t, "traceEvents");
    size_t steps = 0, spans = 0, tokens = 0;
    for (size_t i = 0; i < json_array_size(evs); i++) {
        json_t *ev = json_array_get(evs, i);
        const char *name = json_string_value(json_object_get(ev, "name"));
        if (!strcmp(name, "step")) {
            steps++;
            json_t *args = json_object_get(ev, "args");
            tokens += (size_t)json_integer_value(json_object_get(args, "prefill_tokens")) +
                      (size_t)json_integer_value(json_object_get(args, "decode_tokens"));
        } else if (!strcmp(name, "queued") || !strcmp(name, "prefill") || !strcmp(name, "decode")) {
            spans++;
        }
    }
    cr_expect_geq(steps, 8, "one step per generated token at least");
    cr_expect_eq(spans, 6, "queued, prefill and decode for each of 2 requests");
    /* 2 x 5 prompt rows + 2 x 7 decode rows (the 8th token needs no forward). */
    cr_expect_eq(tokens, 2 * 5 + 2 * 7);
    json_decref(t);
    unlink(path);
    env_close(&v);
}

/* A request cancelled while it waits never runs a chunk: its track still
 * shows the wait (queued until the cancel), so a replay of the trace finds
 * every id (`tps plan calibrate` read such a trace and refused it). */
Test(engine, trace_keeps_the_wait_of_a_request_cancelled_before_it_ran) {
    env v;
    char path[] = "/tmp/tps-trace-XXXXXX";
    engine *e = start_traced(&v, path, 1); /* the second request waits while the first runs */
    int32_t prompt[] = {1, 403, 407, 261, 378};
    result res[2] = {0};
    /* the first runs to the context's end unless cancelled: however late
     * this thread gets to cancel the second, the second is still waiting */
    engine_request rq = env_greedy_request(prompt, 5, 0, &res[0]);
    const uint64_t running = env_submit(e, &rq);
    rq.user = &res[1];
    const uint64_t waiting = env_submit(e, &rq);
    engine_cancel(e, waiting);
    engine_cancel(e, running);
    drain(e, 2);
    engine_destroy(e);
    cr_assert_eq(res[1].finish, ENGINE_FINISH_CANCELLED, "cancelled while it waited");
    cr_expect_eq(res[1].n, 0);
    plan_replay rp;
    tps_err err = {0};
    cr_assert_eq(plan_replay_read(&rp, path, &err), 0, "%s", err.msg);
    cr_expect_eq(rp.n_arrivals, 2);
    cr_expect_neq(rp.arrivals[1], 0, "the cancelled request's arrival");
    cr_expect_eq(rp.finishes[1], 0, "it never decoded");
    plan_replay_free(&rp);
    unlink(path);
    env_close(&v);
}
