/* llama.cpp reference outputs and the teacher-forced check (llama_ref.h). */
#include "support/llama_ref.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "support/kernel_check.h"
#include "support/model_run.h"
#include "support/test_support.h"

void llama_ref_load(llama_ref *r, const char *dir) {
    char p[512];
    snprintf(p, sizeof p, "%s/tests/data/%s/reference.json", TPS_SOURCE_DIR, dir);
    json_error_t je;
    r->j = json_load_file(p, 0, &je);
    cr_assert_not_null(r->j, "%s: %s", p, je.text);
    r->n_vocab = (size_t)json_integer_value(json_object_get(r->j, "n_vocab"));
    r->n_gen = (size_t)json_integer_value(json_object_get(r->j, "n_generated"));
    r->n_logit_cases = (size_t)json_integer_value(json_object_get(r->j, "n_logit_cases"));
    snprintf(p, sizeof p, "%s/tests/data/%s/reference.logits.f32", TPS_SOURCE_DIR, dir);
    FILE *f = fopen(p, "rb");
    cr_assert_not_null(f, "%s", p);
    size_t n = r->n_logit_cases * r->n_gen * r->n_vocab;
    r->logits = malloc(n * sizeof(float));
    cr_assert_eq(fread(r->logits, sizeof(float), n, f), n, "%s is short", p);
    fclose(f);
}

void llama_ref_free(llama_ref *r) {
    json_decref(r->j);
    free(r->logits);
}

static int argmax(const float *x, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int)best;
}

void ref_rig_open(ref_rig *g, const llama_model *m, kernel_tier tier) {
    const llama_config *c = &m->cfg;
    g->kv = test_kv_for(m, 16, GGML_TYPE_F32, 64);
    tps_err err = {0};
    cr_assert_eq(fwd_state_create(&g->s, m, 128, c->ctx_len, 2, &err), 0, "%s", err.msg);
    cr_assert_eq(kernel_ctx_set_tier(fwd_state_kernels(g->s), tier), 0);
}

void ref_rig_close(ref_rig *g) {
    fwd_state_free(g->s);
    kv_cache_free(g->kv);
}

size_t ref_ids_of(json_t *arr, int32_t *out, size_t cap) {
    size_t n = json_array_size(arr);
    cr_assert_leq(n, cap);
    for (size_t i = 0; i < n; i++)
        out[i] = (int32_t)json_integer_value(json_array_get(arr, i));
    return n;
}

/* Position k of logit case ci: our logits against llama.cpp's into st;
 * the argmax check unless strict (the caller checks every argmax then). */
static void compare_position(const llama_ref *r, const float *logits, size_t ci, size_t k, int got,
                             int want, const char *label, kernel_tier tier, llama_ref_stats *st) {
    const float *ref = r->logits + (ci * r->n_gen + k) * r->n_vocab;
    const double e = test_rel_err(logits, ref, r->n_vocab);
    double dev = 0, top1 = -INFINITY, top2 = -INFINITY;
    for (size_t i = 0; i < r->n_vocab; i++) {
        const double d = fabs((double)logits[i] - ref[i]);
        if (d > dev) dev = d;
        if (ref[i] > top1) {
            top2 = top1;
            top1 = ref[i];
        } else if (ref[i] > top2) {
            top2 = ref[i];
        }
    }
    st->positions++;
    if (e > st->worst) st->worst = e;
    if (e <= LLAMA_REF_EXACT) {
        st->exact++;
        if (e > st->worst_exact_run) st->worst_exact_run = e;
    }
    if (top1 - top2 <= 2 * dev) {
        st->near_ties++;
        return;
    }
    cr_assert_eq(got, want, "%s, %s tier, prompt %zu, token %zu: got %d, llama.cpp %d (margin %g)",
                 label, kernel_tier_name(tier), ci, k, got, want, top1 - top2);
}

/* One case of llama_ref_teacher_forced: what each step is checked against. */
typedef struct ref_case {
    const llama_ref *r;
    size_t ci;
    const int32_t *gen; /* llama.cpp's greedy ids */
    const char *label;
    kernel_tier tier;
    int strict;
    llama_ref_stats *st;
} ref_case;

static int32_t check_step(const float *logits, size_t k, void *arg) {
    const ref_case *c = arg;
    const int got = argmax(logits, c->r->n_vocab);
    if (c->strict)
        cr_assert_eq(got, c->gen[k], "%s, %s tier, prompt %zu, token %zu: got %d, llama.cpp %d",
                     c->label, kernel_tier_name(c->tier), c->ci, k, got, c->gen[k]);
    if (c->ci < c->r->n_logit_cases)
        compare_position(c->r, logits, c->ci, k, got, c->gen[k], c->label, c->tier, c->st);
    return c->gen[k]; /* teacher forcing: llama.cpp's token goes next */
}

/* One case, teacher-forced on llama.cpp's ids. */
static void check_case(const llama_ref *r, const llama_model *m, ref_rig *g, size_t ci,
                       const char *label, kernel_tier tier, int strict, llama_ref_stats *st) {
    json_t *cs = json_array_get(json_object_get(r->j, "cases"), ci);
    int32_t prompt[64], gen[32];
    size_t np = ref_ids_of(json_object_get(cs, "prompt_ids"), prompt, 64);
    size_t ng = ref_ids_of(json_object_get(cs, "greedy_ids"), gen, 32);
    cr_assert_eq(ng, r->n_gen);
    ref_case c = {
        .r = r, .ci = ci, .gen = gen, .label = label, .tier = tier, .strict = strict, .st = st};
    test_greedy_run(g->s, m, g->kv, prompt, np, ng, check_step, &c);
}

double llama_ref_teacher_forced(const llama_ref *r, const llama_model *m, kernel_tier tier,
                                const char *label, int strict, llama_ref_stats *st) {
    cr_assert_eq(m->cfg.n_vocab, r->n_vocab);
    llama_ref_stats local = {0};
    if (!st) st = &local;
    *st = (llama_ref_stats){0};
    ref_rig g;
    ref_rig_open(&g, m, tier);
    const size_t nc = json_array_size(json_object_get(r->j, "cases"));
    cr_assert_eq(nc, 5);
    for (size_t ci = 0; ci < nc; ci++)
        check_case(r, m, &g, ci, label, tier, strict, st);
    ref_rig_close(&g);
    return st->worst;
}
