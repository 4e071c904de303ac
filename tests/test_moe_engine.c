/* Mixture-of-experts models in the engine: every request's tokens in a
 * staggered batch equal the request run alone (its rows share experts and
 * steps with others' but never their results), on two kernel threads; a
 * step of one row runs exactly its k experts a layer and reads the active
 * weights only; a repacked MoE model gives back its experts' file pages. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/core/engine.h"
#include "kernels/matmul.h"
#include "model/model_make.h"
#include "support/engine_env.h"
#include "support/model_run.h"
#include "support/test_data.h"

#define N_REQ 24

static void open_made(env *v, char *path, const char *arch, const char *preset, uint32_t type) {
    test_model_make_arch(path, preset, arch, type, 11);
    env_open(v, path);
}

static engine *start_traced(env *v, uint32_t max_seqs, int threads, const char *trace) {
    engine_params p = env_params(v);
    p.n_threads = threads;
    p.max_seqs = max_seqs;
    p.max_batch_tokens = 128;
    p.no_prefix_cache = max_seqs == 1;
    p.trace_path = trace;
    return env_start(&p);
}

static engine *start(env *v, uint32_t max_seqs, int threads) {
    return start_traced(v, max_seqs, threads, NULL);
}

/* N_REQ requests: BOS + random ids, lengths 1..150 (the first 1), max
 * tokens 1..24. */
static const env_work_spec WORK = {N_REQ, 777, 150, false, 24};

static void submit(engine *e, const env_work *w, int i, result *res) {
    engine_request rq = env_greedy_request(w->prompt[i], w->n_prompt[i], w->max_tokens[i], &res[i]);
    env_submit(e, &rq);
}

static void check_invariance_of(const char *arch, const char *preset, uint32_t type) {
    char path[] = "/tmp/tps-test-moe-XXXXXX";
    env v;
    open_made(&v, path, arch, preset, type);
    env_work w;
    env_work_make(&w, &WORK, v.m->cfg.n_vocab);
    result *alone = calloc(N_REQ, sizeof *alone), *batched = calloc(N_REQ, sizeof *batched);
    engine *e = start(&v, 1, 1);
    for (int i = 0; i < N_REQ; i++) {
        submit(e, &w, i, alone);
        drain(e, 1);
    }
    engine_destroy(e);
    e = start(&v, N_REQ, 2);
    int sent = 0;
    for (; sent < N_REQ / 3; sent++)
        submit(e, &w, sent, batched);
    while (sent < N_REQ) {
        engine_wait(e, 5);
        for (int k = 0; k < 3 && sent < N_REQ; k++, sent++)
            submit(e, &w, sent, batched);
    }
    drain(e, N_REQ);
    engine_stats st;
    engine_get_stats(e, &st);
    engine_destroy(e);
    for (int i = 0; i < N_REQ; i++) {
        cr_assert_eq(batched[i].n, alone[i].n, "%s: request %d", arch, i);
        cr_assert_eq(memcmp(batched[i].tokens, alone[i].tokens, alone[i].n * sizeof(int32_t)), 0,
                     "%s: request %d's tokens in the batch differ from its tokens alone", arch, i);
    }
    cr_expect_gt(st.experts_run_total, 0);
    free(alone);
    free(batched);
    env_work_free(&w);
    env_close(&v);
    unlink(path);
}

static void check_invariance(const char *arch, uint32_t type) {
    check_invariance_of(arch, "tiny", type);
}

Test(moe_engine, mixtral_batch_equals_each_request_alone, .timeout = 240) {
    check_invariance("mixtral", GGML_TYPE_Q8_0);
}

Test(moe_engine, qwen3moe_batch_equals_each_request_alone, .timeout = 240) {
    check_invariance("qwen3moe", GGML_TYPE_F16);
}

/* GLM-4.5: a dense first layer, sigmoid routing with a selection bias,
 * weights scaled, an ungated shared expert, an MTP block not run */
Test(moe_engine, glm4moe_batch_equals_each_request_alone, .timeout = 240) {
    check_invariance("glm4moe", GGML_TYPE_Q8_0);
}

/* DeepSeek: latent attention (the cache holds the latent alone), routing
 * within the best expert groups, shared experts, a dense first layer */
Test(moe_engine, deepseek2_batch_equals_each_request_alone, .timeout = 240) {
    check_invariance("deepseek2", GGML_TYPE_Q8_0);
}

/* Gemma 4's MoE: experts beside the dense FFN, their fused gate|up
 * repacked and split, sliding windows the prompts cross */
Test(moe_engine, gemma4_moe_batch_equals_each_request_alone, .timeout = 240) {
    check_invariance_of("gemma4", "tiny-moe", GGML_TYPE_Q8_0);
}

/* MXFP4 experts, sinks and sliding windows the prompts cross */
Test(moe_engine, gpt_oss_batch_equals_each_request_alone, .timeout = 240) {
    check_invariance("gpt-oss", GGML_TYPE_Q8_0);
}

/* Every step record of the trace says the experts it ran and the weight
 * bytes it read: for one-row steps k a layer and the active bytes. */
static void check_trace(const char *path, const llama_model *m) {
    json_t *t = test_json_load("%s", path); /* the trace */
    json_t *evs = json_object_get(t, "traceEvents");
    size_t steps = 0;
    for (size_t i = 0; i < json_array_size(evs); i++) {
        json_t *ev = json_array_get(evs, i);
        if (strcmp(json_string_value(json_object_get(ev, "name")), "step")) continue;
        json_t *args = json_object_get(ev, "args");
        steps++;
        cr_expect_eq(json_integer_value(json_object_get(args, "experts")),
                     (json_int_t)((m->cfg.n_layers - m->cfg.n_dense_lead) * m->cfg.n_expert_used));
        cr_expect_eq(json_integer_value(json_object_get(args, "weight_bytes")),
                     (json_int_t)m->w.bytes_per_token);
    }
    cr_expect_gt(steps, 0);
    json_decref(t);
}

/* One request of a one-token prompt: every step has one row, so each runs
 * k experts a MoE layer and reads the model's active bytes (stats and
 * trace): the dense leading layers and a shared expert read whole. */
static void check_one_row_steps_of(const char *arch, const char *preset) {
    char path[] = "/tmp/tps-test-moe-XXXXXX", trace[] = "/tmp/tps-test-moe-trace-XXXXXX";
    close(mkstemp(trace));
    env v;
    open_made(&v, path, arch, preset, GGML_TYPE_Q8_0);
    const llama_config *c = &v.m->cfg;
    engine *e = start_traced(&v, 1, 1, trace);
    engine_stats before;
    engine_get_stats(e, &before);
    env_work w;
    env_work_make(&w, &WORK, c->n_vocab); /* request 0 has a one-token prompt */
    result res[N_REQ] = {0};
    submit(e, &w, 0, res);
    drain(e, 1);
    engine_stats st;
    engine_get_stats(e, &st);
    const uint64_t steps = st.steps_total - before.steps_total;
    cr_assert_gt(steps, 0);
    cr_expect_eq(st.experts_run_total - before.experts_run_total,
                 steps * (c->n_layers - c->n_dense_lead) * c->n_expert_used);
    cr_expect_eq(st.weight_bytes_read_total - before.weight_bytes_read_total,
                 (double)steps * (double)v.m->w.bytes_per_token);
    /* 4 of 16 experts: a token reads far less than the model (tiny-moe's 2
     * of 8 narrow experts beside a dense FFN: less) */
    cr_expect_lt(v.m->w.bytes_per_token,
                 c->dense_with_experts ? v.m->w.bytes_total : v.m->w.bytes_total / 2);
    cr_expect_eq(st.model_experts, c->n_expert);
    engine_destroy(e); /* writes the trace */
    check_trace(trace, v.m);
    env_work_free(&w);
    env_close(&v);
    unlink(trace);
    unlink(path);
}

static void check_one_row_steps(const char *arch) {
    check_one_row_steps_of(arch, "tiny");
}

Test(moe_engine, one_row_steps_run_k_experts_a_layer_and_read_the_active_bytes) {
    check_one_row_steps("qwen3moe");
}

Test(moe_engine, glm4moe_one_row_steps_skip_the_dense_layer_and_read_the_shared_expert) {
    check_one_row_steps("glm4moe");
}

/* Gemma 4's dense FFN beside the experts is read whole every step, the
 * fused gate|up of k experts a layer */
Test(moe_engine, gemma4_one_row_steps_read_the_dense_ffn_and_k_experts) {
    check_one_row_steps_of("gemma4", "tiny-moe");
}

/* The latent attention's per-head matrices (attn_k_b, attn_v_b) are read
 * whole every step, like any dense matrix. */
Test(moe_engine, deepseek2_one_row_steps_read_the_latent_attention_and_k_experts) {
    check_one_row_steps("deepseek2");
}

/* The process's resident bytes now, with its high-water mark reset to them
 * (proc(5), clear_refs 5), so that a peak read later is what came after. */
static size_t rss_now_reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    cr_assert_not_null(f);
    fputs("5", f);
    fclose(f);
    long size = 0, resident = 0;
    f = fopen("/proc/self/statm", "r");
    cr_assert(f && fscanf(f, "%ld %ld", &size, &resident) == 2);
    fclose(f);
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* The experts are repacked like any matrix and their file pages given back
 * as each copy is made: all but page fragments at the tensors' ends. The
 * load's peak is counted above the process's resident bytes before it
 * (the test process's own: 11 MB, 46 MB under ASan, whose shadow and
 * quarantine add 23 MB more to the load's 18 MB). Kept, the file's 16 MB
 * of pages would be over the slack. */
#if defined(__SANITIZE_ADDRESS__)
#define LOAD_RSS_SLACK (32u << 20)
#else
#define LOAD_RSS_SLACK (8u << 20)
#endif
Test(moe_engine, repacked_experts_give_back_their_file_pages) {
    char path[] = "/tmp/tps-test-moe-XXXXXX";
    env v;
    const size_t before = rss_now_reset_peak();
    open_made(&v, path, "mixtral", "mini-moe", GGML_TYPE_Q8_0);
    const llama_weights *w = &v.m->w;
    cr_assert_not_null(w->packed);
    size_t experts = 0;
    for (uint32_t l = 0; l < v.m->cfg.n_layers; l++) {
        const llama_layer *L = &w->layers[l];
        cr_assert_not_null(L->gate_exps.packed, "layer %u's experts are repacked", l);
        experts += (size_t)L->expert_bytes * v.m->cfg.n_expert;
    }
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    cr_expect_geq(w->released_bytes, experts - 2 * page * 3 * v.m->cfg.n_layers,
                  "%zu bytes given back of %zu in experts", w->released_bytes, experts);
    cr_expect_leq(v.m->load_peak_rss - before, (size_t)(1.1 * v.m->file->size) + LOAD_RSS_SLACK,
                  "peak RSS %zu, %zu before the load, for a file of %zu", v.m->load_peak_rss,
                  before, v.m->file->size);
    env_close(&v);
    unlink(path);
}
