/* See teacher_forced.h. */
#include "support/teacher_forced.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/forward/forward.h"
#include "model/model_make.h"
#include "support/model_run.h"

typedef struct runner {
    llama_model *m;
    kv_cache *kv;
    fwd_state *s;
    kv_seq seq;
} runner;

static void runner_open(runner *r, const char *path, uint32_t steps) {
    tps_err err = {0};
    cr_assert_eq(llama_model_load(&r->m, path, &err), 0, "%s", err.msg);
    const llama_config *c = &r->m->cfg;
    const uint32_t B = 16, n_blocks = steps / B + 2;
    r->kv = test_kv_for(r->m, B, GGML_TYPE_F32, n_blocks);
    cr_assert_eq(fwd_state_create(&r->s, r->m, 1, c->ctx_len, 1, &err), 0, "%s", err.msg);
    memset(&r->seq, 0, sizeof r->seq);
    cr_assert_eq(kv_seq_init(&r->seq, n_blocks), 0);
    cr_assert_eq(kv_seq_reserve(r->kv, &r->seq, steps), 0);
}

static void runner_close(runner *r) {
    kv_seq_release(r->kv, &r->seq);
    kv_seq_destroy(&r->seq);
    fwd_state_free(r->s);
    kv_cache_free(r->kv);
    llama_model_free(r->m);
}

/* Feeds token at pos; returns the logits (borrowed). */
static const float *step(runner *r, int32_t token, uint32_t pos) {
    const kv_seq *seqs[] = {&r->seq};
    fwd_row row = {.token = token, .pos = pos, .want_logits = 1};
    fwd_batch b = {.n_rows = 1, .rows = &row, .seqs = seqs};
    const float *logits;
    size_t nl;
    tps_err err = {0};
    cr_assert_eq(llama_forward(r->s, r->m, r->kv, &b, &logits, &nl, &err), 0, "%s", err.msg);
    return logits;
}

double teacher_forced_error(const char *f32_path, const char *q_path, uint32_t steps) {
    runner a, b;
    runner_open(&a, f32_path, steps);
    runner_open(&b, q_path, steps);
    const uint32_t V = a.m->cfg.n_vocab;
    int32_t tok = 1; /* BOS */
    double worst = 0;
    for (uint32_t pos = 0; pos < steps; pos++) {
        const float *la = step(&a, tok, pos), *lb = step(&b, tok, pos);
        double num = 0, den = 0;
        size_t best = 0;
        for (uint32_t i = 0; i < V; i++) {
            cr_assert(isfinite(lb[i]), "logit %u at pos %u", i, pos);
            num += ((double)lb[i] - la[i]) * ((double)lb[i] - la[i]);
            den += (double)la[i] * la[i];
            if (la[i] > la[best]) best = i;
        }
        const double e = sqrt(num / den);
        if (e > worst) worst = e;
        tok = (int32_t)best; /* the f32 model's greedy token drives both */
    }
    runner_close(&a);
    runner_close(&b);
    return worst;
}

void test_model_make(const char *path, const model_preset *pre, uint32_t type, uint64_t seed) {
    model_make_opts o = {.preset = pre, .type = type, .seed = seed, .out_path = path};
    tps_err e = {0};
    cr_assert_eq(model_make(&o, &e), 0, "%s", e.msg);
}

llama_model *test_model_made(char *tmpl, const model_preset *pre, uint32_t type, uint64_t seed) {
    int fd = mkstemp(tmpl);
    cr_assert_geq(fd, 0, "%s", tmpl);
    close(fd);
    test_model_make(tmpl, pre, type, seed);
    llama_model *m;
    tps_err e = {0};
    cr_assert_eq(llama_model_load(&m, tmpl, &e), 0, "%s", e.msg);
    return m;
}

static void make_into(const char *dir, const model_preset *pre, uint64_t seed, uint32_t type,
                      char *path, size_t cap) {
    snprintf(path, cap, "%s/%u.gguf", dir, type);
    test_model_make(path, pre, type, seed);
}

void teacher_forced_errors(const model_preset *pre, uint64_t seed, const uint32_t *types, size_t n,
                           uint32_t steps, double *err) {
    char dir[] = "/tmp/tps-quant-XXXXXX", f32[64], q[64];
    cr_assert_not_null(mkdtemp(dir));
    make_into(dir, pre, seed, GGML_TYPE_F32, f32, sizeof f32);
    for (size_t i = 0; i < n; i++) {
        make_into(dir, pre, seed, types[i], q, sizeof q);
        err[i] = teacher_forced_error(f32, q, steps);
        unlink(q);
    }
    unlink(f32);
    rmdir(dir);
}

void teacher_forced_check(const model_preset *pre, uint64_t seed, const tf_case *cases, size_t n,
                          uint32_t steps, double *err) {
    uint32_t types[8] = {0};
    cr_assert_leq(n, sizeof types / sizeof types[0]);
    for (size_t i = 0; i < n; i++)
        types[i] = cases[i].type;
    teacher_forced_errors(pre, seed, types, n, steps, err);
    for (size_t i = 0; i < n; i++) {
        cr_log_info("normalised logit error: %s %.2e", cases[i].name, err[i]);
        cr_expect_leq(err[i], cases[i].tol, "%s: %g", cases[i].name, err[i]);
    }
}
