/* tps plan tests' fixture (plan_env.h). */
#include "support/plan_env.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "support/test_support.h"

/* The model, a roofline cost (a fixed machine, so the test does not
 * measure this one) and a server of tps serve's defaults. */
void plan_env_open(model_env *v) {
    memset(v, 0, sizeof *v);
    v->path = shared_path(MODEL);
    tps_err e = {{0}};
    llama_load_opts lo = {.no_repack = 1};
    cr_assert_eq(llama_model_load_opts(&v->m, v->path, &lo, &e), 0, "%s", e.msg);
    cr_assert_eq(tokenizer_load(&v->tok, v->m->file, &e), 0, "%s", e.msg);
    machine_limits ml = {
        .cpu = "test", .threads = 1, .read_gbs = 10, .int8_gops = 50, .fp32_gflops = 20};
    plan_cost_roofline(&v->cost, &ml, v->m, GGML_TYPE_F16);
    v->srv = (plan_server){.m = v->m, .tok = v->tok, .cost = &v->cost, .seed = 1};
    engine_params_default(&v->srv.ep);
    v->srv.ep.itl_target_ms = ENGINE_ITL_TARGET_AUTO;
    cr_assert_eq(chat_prompt_for_model(&v->prompt, v->m->file, v->tok, NULL, &e), 0, "%s", e.msg);
    v->srv.prompt = &v->prompt;
}

void plan_env_close(model_env *v) {
    chat_prompt_free(&v->prompt);
    tokenizer_free(v->tok);
    llama_model_free(v->m);
    free(v->path);
}

/* A bench spec against url (or none, for a plan), sized by the model. */
void spec_make(bench_spec *s, const model_env *v, const char *url) {
    bench_spec_init(s);
    s->cfg.base_url = url ? url : "plan:";
    s->wo.tokenizer_path = v->path;
    s->scrape = "off";
    s->seed_given = true; /* cfg.seed, 1 unless a test sets it: runs repeat */
}

void dist(load_dist *d, const char *text) {
    tps_err e = {{0}};
    cr_assert_eq(load_dist_parse(d, text, &e), 0);
}

void spec_plan(bench_spec *s, const model_env *v, const char *input_len, const char *output_len) {
    spec_make(s, v, NULL);
    dist(&s->wo.input_len, input_len);
    dist(&s->wo.output_len, output_len);
}

void spec_plan_closed(bench_spec *s, const model_env *v, const char *input_len,
                      const char *output_len, uint32_t concurrency, uint64_t requests) {
    spec_plan(s, v, input_len, output_len);
    s->cfg.concurrency = concurrency;
    s->cfg.requests = requests;
}

void plan_once(bench_run_out *out, model_env *v, const bench_spec *s, workload *wl) {
    bench_config cfg;
    tps_err e = {{0}};
    cr_assert_eq(bench_spec_prepare(wl, &cfg, s, NULL, "test", &e), 0, "%s", e.msg);
    cr_assert_eq(plan_run(out, &cfg, wl, &v->srv, &e), 0, "%s", e.msg);
}
