/* Engine tests' fixtures (tests only): open a model and its tokenizer (the
 * shared stories260K, or a made model of a given shape), start an engine
 * with the sizes a test asks for, and drain events into per-request
 * results. Asserts (Criterion) on any failure. */
#ifndef TPS_TESTS_ENGINE_ENV_H
#define TPS_TESTS_ENGINE_ENV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/core/engine.h"
#include "model/model_make.h"

typedef struct env {
    llama_model *m;
    tokenizer *tok;
} env;

void env_open(env *v, const char *path);
/* Makes a model of shape pre (seeded random weights) in a temporary file,
 * path a "...XXXXXX" template it fills in, and opens it. */
void env_open_made(env *v, char *path, const model_preset *pre, uint32_t type, uint64_t seed);
void env_open_stories(env *v); /* ../shared/models/stories260K.gguf */
void env_close(env *v);

/* engine_params_default with v's model and tokenizer. */
engine_params env_params(const env *v);
/* engine_create(p), asserting that it succeeds. */
engine *env_start(const engine_params *p);
/* An engine on one kernel thread with these sizes (0: the default) and KV
 * type; prefix caching on unless no_prefix_cache. */
engine *env_engine(env *v, uint32_t max_seqs, uint32_t max_batch, uint32_t kv_tokens,
                   uint32_t kv_type, bool no_prefix_cache);

#define RESULT_MAX_TOKENS 512

/* One choice's output, as events deliver it. */
typedef struct result {
    int32_t tokens[RESULT_MAX_TOKENS];
    size_t n;
    bool done;
    engine_finish finish;
    engine_timings tm;
} result;

/* A greedy request for prompt (n ids) that runs to max_tokens whatever it
 * samples (ignore_eos); its events' user is `user`. */
engine_request env_greedy_request(const int32_t *prompt, size_t n, uint32_t max_tokens, void *user);
/* A greedy request for prompt (n ids) of at most max_tokens (ending where
 * the model or the grammar ends it) under grammar (GBNF text), starting in
 * think with a block budget of budget tokens (think.h: THINK_TAGS markers;
 * -1: no limit); its events' user is `user`. */
engine_request env_think_request(const int32_t *prompt, size_t n, uint32_t max_tokens,
                                 const char *grammar, think_state think, int32_t budget,
                                 void *user);
/* Submits rq and asserts the engine took it; its id. */
uint64_t env_submit(engine *e, const engine_request *rq);
/* Submits rq and expects (Criterion expect, not assert) the engine to
 * refuse it with rc and a message holding each string of the NULL-ended
 * list after rc. */
void env_expect_refused(engine *e, const engine_request *rq, int rc, ...) __attribute__((sentinel));

/* A random workload for the batch-invariance tests: n requests drawn from
 * one LCG stream (Knuth's MMIX constants) seeded with seed. Request i: a
 * step, then a prompt of BOS (1) + ids in [3, n_vocab), one step each, of
 * 1 + r % max_len ids (request 0:
 * 1; request 1: max_len when second_longest), then 1 + r % max_out tokens
 * to generate. */
#define ENV_WORK_MAX 64
typedef struct env_work_spec {
    size_t n;
    uint64_t seed;
    size_t max_len;
    bool second_longest;
    uint32_t max_out;
} env_work_spec;
typedef struct env_work {
    int32_t *prompt[ENV_WORK_MAX]; /* malloc'ed */
    size_t n_prompt[ENV_WORK_MAX];
    uint32_t max_tokens[ENV_WORK_MAX];
    size_t n;
} env_work;
void env_work_make(env_work *w, const env_work_spec *sp, uint32_t n_vocab);
void env_work_free(env_work *w);

/* Drains events until `want` DONE events arrived (bounded by 300 s). Each
 * event's user is a result array indexed by the event's choice. */
void drain(engine *e, int want);

#endif
