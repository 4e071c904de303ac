/* tps plan tests' fixture (tests only): stories260K with a roofline cost
 * of a fixed machine (so no test measures this one) and a plan server of
 * tps serve's defaults; a bench spec sized by the model; one planned run.
 * Asserts (Criterion) on any failure. */
#ifndef TPS_TESTS_PLAN_ENV_H
#define TPS_TESTS_PLAN_ENV_H

#include "bench/experiment/bench_spec.h"
#include "plan/plan.h"

#define MODEL "models/stories260K.gguf"

typedef struct model_env {
    llama_model *m;
    tokenizer *tok;
    char *path;
    plan_cost cost;
    chat_prompt prompt;
    plan_server srv;
} model_env;

void plan_env_open(model_env *v);
void plan_env_close(model_env *v);
/* A bench spec against url (or none, for a plan), sized by the model. */
void spec_make(bench_spec *s, const model_env *v, const char *url);
void dist(load_dist *d, const char *text);
/* A plan's spec (spec_make, no url) whose prompts and replies take these
 * lengths (load_dist texts). */
void spec_plan(bench_spec *s, const model_env *v, const char *input_len, const char *output_len);
/* spec_plan's closed loop: `requests` requests, `concurrency` at a time. */
void spec_plan_closed(bench_spec *s, const model_env *v, const char *input_len,
                      const char *output_len, uint32_t concurrency, uint64_t requests);
void plan_once(bench_run_out *out, model_env *v, const bench_spec *s, workload *wl);

#endif
