/* K-quant models made by `tps model make`: a small preset (every row a
 * multiple of 256) made in f32, q4_k, q6_k and q4_k_m from one seed loads,
 * has the tensor types the mix promises, and its logits track the f32
 * model's within a named error (teacher-forced on the f32 greedy tokens).
 * Presets whose rows are not whole superblocks are refused up front. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/llama_model.h"
#include "model/model_make.h"
#include "support/teacher_forced.h"

/* ||logits_q - logits_f32|| / ||logits_f32||, worst over STEPS positions.
 * Q6_K keeps ~6 bits per weight, Q4_K ~4 (test_quant_model.c's q4_0 bound
 * is 2.5e-1); activations go through 8-bit Q8_K either way. */
#define TOL_NORM_ERR_Q6_K 5e-2
#define TOL_NORM_ERR_Q4_K 2.5e-1
#define STEPS             8

static const model_preset PRESET = {"k256",  "test: rows of 256", 256, 2, 4, 4, 512, 512, 64,
                                    10000.0f};

Test(kquant_model, q4_k_q6_k_and_q4_k_m_logits_track_f32_when_teacher_forced) {
    const tf_case cases[] = {{GGML_TYPE_Q4_K, "q4_k", TOL_NORM_ERR_Q4_K},
                             {GGML_TYPE_Q6_K, "q6_k", TOL_NORM_ERR_Q6_K},
                             {MODEL_MAKE_Q4_K_M, "q4_k_m", TOL_NORM_ERR_Q4_K}};
    double err[3];
    teacher_forced_check(&PRESET, 5, cases, 3, STEPS, err);
    const double e4 = err[0], e6 = err[1], e4m = err[2];
    cr_expect_lt(e6, e4, "6-bit weights lose less than 4-bit ones");
    cr_expect_leq(e4m, e4, "the mix's Q6_K tensors do not make it worse than all-Q4_K");
}

Test(kquant_model, q4_k_m_uses_q6_k_for_output_and_some_attn_v_and_ffn_down) {
    char p[] = "/tmp/tps-kquant-m-XXXXXX";
    llama_model *m = test_model_made(p, &PRESET, MODEL_MAKE_Q4_K_M, 5);
    cr_expect_eq(m->w.token_embd.type, GGML_TYPE_Q4_K);
    cr_expect_eq(m->w.output.type, GGML_TYPE_Q6_K);
    for (uint32_t l = 0; l < PRESET.n_layers; l++) {
        /* of 2 layers only the last is in the last eighth ("more bits") */
        const uint32_t more = l == 1 ? GGML_TYPE_Q6_K : GGML_TYPE_Q4_K;
        cr_expect_eq(m->w.layers[l].wq.type, GGML_TYPE_Q4_K, "layer %u", l);
        cr_expect_eq(m->w.layers[l].wk.type, GGML_TYPE_Q4_K, "layer %u", l);
        cr_expect_eq(m->w.layers[l].wv.type, more, "layer %u", l);
        cr_expect_eq(m->w.layers[l].wo.type, GGML_TYPE_Q4_K, "layer %u", l);
        cr_expect_eq(m->w.layers[l].w_gate.type, GGML_TYPE_Q4_K, "layer %u", l);
        cr_expect_eq(m->w.layers[l].w_up.type, GGML_TYPE_Q4_K, "layer %u", l);
        cr_expect_eq(m->w.layers[l].w_down.type, more, "layer %u", l);
    }
    llama_model_free(m);
    unlink(p);
}

/* A pure K-quant type must fit every row; llama.cpp's mixes fall back
 * as llama-quantize does (test_quant_reference.c checks the bytes). */
Test(kquant_model, pure_k_quants_refuse_rows_not_whole_superblocks_and_mixes_fall_back) {
    const uint32_t types[] = {GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q5_K, GGML_TYPE_IQ4_XS};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        model_make_opts o = {.preset = model_preset_find("mini"),
                             .type = types[i],
                             .seed = 1,
                             .out_path = "/tmp/never-written.gguf"};
        tps_err err = {0};
        cr_expect_eq(model_make(&o, &err), TPS_EINVAL);
        cr_expect(strstr(err.msg, "multiples of 256") != NULL, "%s", err.msg);
    }
    cr_expect_eq(access("/tmp/never-written.gguf", F_OK), -1);
    char p[] = "/tmp/tps-kquant-mini-XXXXXX";
    close(mkstemp(p));
    model_make_opts o = {
        .preset = model_preset_find("mini"), .type = MODEL_MAKE_Q4_K_M, .seed = 1, .out_path = p};
    tps_err err = {0};
    cr_assert_eq(model_make(&o, &err), 0, "%s", err.msg);
    llama_model *m;
    cr_assert_eq(llama_model_load(&m, p, &err), 0, "%s", err.msg);
    /* dim 192: Q4_K falls back to Q5_0, Q6_K (layer 2 of 6 has "more bits")
       and output.weight to Q8_0; ffn_down's rows of 512 keep Q4_K / Q6_K */
    cr_expect_eq(m->w.output.type, GGML_TYPE_Q8_0);
    cr_expect_eq(m->w.layers[0].wq.type, GGML_TYPE_Q5_0);
    cr_expect_eq(m->w.layers[0].wv.type, GGML_TYPE_Q5_0);
    cr_expect_eq(m->w.layers[2].wv.type, GGML_TYPE_Q8_0);
    cr_expect_eq(m->w.layers[0].w_down.type, GGML_TYPE_Q4_K);
    cr_expect_eq(m->w.layers[2].w_down.type, GGML_TYPE_Q6_K);
    llama_model_free(m);
    unlink(p);
}
