/* Engine test fixtures (see engine_env.h). */
#include "support/engine_env.h"

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "support/test_support.h"

void env_open(env *v, const char *path) {
    tps_err err = {0};
    cr_assert_eq(llama_model_load(&v->m, path, &err), 0, "%s", err.msg);
    cr_assert_eq(tokenizer_load(&v->tok, v->m->file, &err), 0, "%s", err.msg);
}

void env_open_made(env *v, char *path, const model_preset *pre, uint32_t type, uint64_t seed) {
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    model_make_opts mo = {.preset = pre, .type = type, .seed = seed, .out_path = path};
    tps_err err = {0};
    cr_assert_eq(model_make(&mo, &err), 0, "%s", err.msg);
    env_open(v, path);
}

void env_open_stories(env *v) {
    char *p = shared_path("models/stories260K.gguf");
    env_open(v, p);
    free(p);
}

void env_close(env *v) {
    tokenizer_free(v->tok);
    llama_model_free(v->m);
}

engine_params env_params(const env *v) {
    engine_params p;
    engine_params_default(&p);
    p.model = v->m;
    p.tok = v->tok;
    return p;
}

engine *env_start(const engine_params *p) {
    engine *e;
    tps_err err = {0};
    cr_assert_eq(engine_create(&e, p, &err), 0, "%s", err.msg);
    return e;
}

engine *env_engine(env *v, uint32_t max_seqs, uint32_t max_batch, uint32_t kv_tokens,
                   uint32_t kv_type, bool no_prefix_cache) {
    engine_params p = env_params(v);
    p.kv_type = kv_type;
    p.n_threads = 1; /* a 260K-parameter model gains nothing from a second thread */
    p.max_seqs = max_seqs;
    p.max_batch_tokens = max_batch;
    p.kv_tokens = kv_tokens;
    p.no_prefix_cache = no_prefix_cache;
    return env_start(&p);
}

engine_request env_greedy_request(const int32_t *prompt, size_t n, uint32_t max_tokens,
                                  void *user) {
    engine_request rq = {.prompt = prompt, .n_prompt = n, .max_tokens = max_tokens, .user = user};
    sampler_params_default(&rq.sampling);
    rq.sampling.temperature = 0;
    rq.sampling.ignore_eos = true;
    return rq;
}

engine_request env_think_request(const int32_t *prompt, size_t n, uint32_t max_tokens,
                                 const char *grammar, think_state think, int32_t budget,
                                 void *user) {
    engine_request rq = {.prompt = prompt,
                         .n_prompt = n,
                         .max_tokens = max_tokens,
                         .grammar = grammar,
                         .grammar_len = strlen(grammar),
                         .think = think,
                         .think_budget = budget,
                         .user = user};
    sampler_params_default(&rq.sampling);
    rq.sampling.temperature = 0;
    return rq;
}

uint64_t env_submit(engine *e, const engine_request *rq) {
    uint64_t id;
    tps_err err = {0};
    cr_assert_eq(engine_submit(e, rq, &id, &err), 0, "%s", err.msg);
    return id;
}

void env_expect_refused(engine *e, const engine_request *rq, int rc, ...) {
    uint64_t id;
    tps_err err = {0};
    cr_expect_eq(engine_submit(e, rq, &id, &err), rc, "%s", err.msg);
    va_list ap;
    va_start(ap, rc);
    for (const char *s; (s = va_arg(ap, const char *));)
        cr_expect(strstr(err.msg, s) != NULL, "%s (want %s)", err.msg, s);
    va_end(ap);
}

static uint64_t env_lcg(uint64_t *r) {
    return *r = *r * 6364136223846793005ull + 1442695040888963407ull;
}

static void env_random_prompt(int32_t *prompt, size_t n, uint32_t n_vocab, uint64_t *r) {
    prompt[0] = 1;
    for (size_t k = 1; k < n; k++)
        prompt[k] = 3 + (int32_t)((env_lcg(r) >> 33) % (n_vocab - 3));
}

void env_work_make(env_work *w, const env_work_spec *sp, uint32_t n_vocab) {
    cr_assert_leq(sp->n, ENV_WORK_MAX);
    w->n = sp->n;
    uint64_t r = sp->seed;
    for (size_t i = 0; i < sp->n; i++) {
        env_lcg(&r);
        size_t n = 1 + (size_t)((r >> 33) % sp->max_len);
        if (i == 0) n = 1;
        if (i == 1 && sp->second_longest) n = sp->max_len;
        w->n_prompt[i] = n;
        w->prompt[i] = malloc(n * sizeof(int32_t));
        env_random_prompt(w->prompt[i], n, n_vocab, &r);
        w->max_tokens[i] = 1 + (uint32_t)((r >> 20) % sp->max_out);
    }
}

void env_work_free(env_work *w) {
    for (size_t i = 0; i < w->n; i++)
        free(w->prompt[i]);
}

void drain(engine *e, int want) {
    engine_event ev[64];
    int done = 0;
    uint64_t deadline = tps_now_ns() + 300ull * TPS_NS_PER_SEC;
    while (done < want) {
        cr_assert_lt(tps_now_ns(), deadline, "engine did not finish in time");
        engine_wait(e, 100);
        size_t k = engine_poll(e, ev, 64);
        for (size_t i = 0; i < k; i++) {
            result *r = (result *)ev[i].user + ev[i].choice;
            if (ev[i].kind == ENGINE_EV_TOKEN) {
                cr_assert_lt(r->n, RESULT_MAX_TOKENS);
                r->tokens[r->n++] = ev[i].token;
            } else {
                cr_assert(!r->done, "two DONE events for one choice");
                r->done = true;
                r->finish = ev[i].finish;
                r->tm = ev[i].timings;
                done++;
            }
        }
    }
}
