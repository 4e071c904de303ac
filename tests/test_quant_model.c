/* Quantised models track their F32 original: a `tiny` model made in f32,
 * f16 and q8_0 from the same seed, teacher-forced on the f32 model's greedy
 * tokens for 16 steps, keeps its logits within a named normalised error of
 * the f32 logits. Also: model make is deterministic and its files load. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/llama_model.h"
#include "model/model_make.h"
#include "support/teacher_forced.h"

/* ||logits_q - logits_f32|| / ||logits_f32||, worst over 16 positions.
 * F16 rounds each weight to 11 significant bits; Q8_0 to 8 bits per block
 * and the activations too. Measured here: f16 ~2e-4, q8_0 ~1e-2. */
#define TOL_NORM_ERR_F16  2e-3
#define TOL_NORM_ERR_Q8_0 5e-2
#define TOL_NORM_ERR_Q4_0 2.5e-1
#define STEPS             16

Test(quant_model, f16_q8_0_and_q4_0_logits_track_f32_when_teacher_forced) {
    const tf_case cases[] = {{GGML_TYPE_F16, "f16", TOL_NORM_ERR_F16},
                             {GGML_TYPE_Q8_0, "q8_0", TOL_NORM_ERR_Q8_0},
                             {GGML_TYPE_Q4_0, "q4_0", TOL_NORM_ERR_Q4_0}};
    double err[3];
    teacher_forced_check(model_preset_find("tiny"), 42, cases, 3, STEPS, err);
    const double e16 = err[0], e8 = err[1];
    cr_expect_gt(e8, e16, "8-bit blocks lose more than f16 (the measurement sees quantisation)");
}

Test(quant_model, model_make_is_deterministic_for_a_seed) {
    char a[] = "/tmp/tps-make-a-XXXXXX", b[] = "/tmp/tps-make-b-XXXXXX";
    close(mkstemp(a));
    close(mkstemp(b));
    test_model_make(a, model_preset_find("tiny"), GGML_TYPE_Q8_0, 42);
    test_model_make(b, model_preset_find("tiny"), GGML_TYPE_Q8_0, 42);
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int ca, cb, same = 1;
    do {
        ca = fgetc(fa);
        cb = fgetc(fb);
        same &= ca == cb;
    } while (ca != EOF && cb != EOF);
    fclose(fa);
    fclose(fb);
    cr_expect(same, "two files from seed 42 are byte-identical");
    unlink(a);
    unlink(b);
}

Test(quant_model, made_model_has_the_preset_shape_and_a_byte_vocab) {
    char p[] = "/tmp/tps-make-XXXXXX";
    llama_model *m = test_model_made(p, model_preset_find("tiny"), GGML_TYPE_Q4_0, 42);
    const model_preset *pre = model_preset_find("tiny");
    cr_expect_eq(m->cfg.dim, pre->dim);
    cr_expect_eq(m->cfg.n_layers, pre->n_layers);
    cr_expect_eq(m->cfg.n_kv_heads, pre->n_kv_heads);
    cr_expect_eq(m->cfg.ffn_dim, 192);
    cr_expect_eq(m->cfg.n_vocab, 512);
    cr_expect_eq(m->w.layers[0].wq.type, GGML_TYPE_Q4_0);
    cr_expect_eq(m->w.tied, 0);
    uint64_t n = 0;
    for (uint64_t i = 0; i < m->file->n_tensors; i++)
        n += m->file->tensors[i].n_elements;
    cr_expect_eq(n, model_preset_params(pre));
    llama_model_free(m);
    unlink(p);
}

Test(quant_model, unknown_preset_and_unsupported_type_are_refused) {
    cr_expect_null(model_preset_find("13B"));
    model_make_opts o = {.preset = model_preset_find("tiny"),
                         .type = GGML_TYPE_Q4_K,
                         .seed = 1,
                         .out_path = "/tmp/never-written.gguf"};
    tps_err err = {0};
    cr_expect_neq(model_make(&o, &err), 0);
    cr_expect(strstr(err.msg, "multiples of 256") != NULL, "%s", err.msg);
}
