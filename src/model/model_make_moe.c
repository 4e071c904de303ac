/* The mixture-of-experts part of a synthetic file (model_make.c writes the
 * rest): the expert keys, each layer's router and 3-D expert tensors
 * (llama.cpp's ffn_{gate,up,down}_exps, ne = {cols, rows, n_expert}), and
 * gpt-oss's extras (attention sinks, biases, sliding window, YaRN, MXFP4
 * experts). Seeded like every tensor, so a file is the same for a seed.
 * Nothing here runs the model. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "kernels/quant.h" /* QK_MXFP4 */
#include "model/model_make_internal.h"

/* What the mixture-of-experts rows of model_presets add. */
static const model_moe_shape model_moe_shapes[] = {
    {"mini-moe", "mixtral", 0, 16, 2, 256},      {"moe-2B", "qwen3moe", 128, 64, 8, 512},
    {"30B-A3B", "qwen3moe", 128, 128, 8, 768},   {"8x7B", "mixtral", 0, 8, 2, 14336},
    {"gpt-oss-20b", "gpt-oss", 64, 32, 4, 2880}, {"35B-A3B", "qwen35moe", 256, 256, 8, 512},
    {"106B-A12B", "glm4moe", 128, 128, 8, 1408}, {"26B-A4B", "gemma4", 0, 128, 8, 704},
    {"tiny-moe", "gemma4", 0, 8, 2, 32},
};

const model_moe_shape *model_preset_moe(const model_preset *p) {
    for (size_t i = 0; i < sizeof model_moe_shapes / sizeof model_moe_shapes[0]; i++)
        if (!strcmp(model_moe_shapes[i].preset, p->name)) return &model_moe_shapes[i];
    return NULL;
}

int make_plan_experts(make_plan *pl, tps_err *err) {
    const model_preset *p = pl->p;
    const model_arch_spec *as = pl->as;
    const model_moe_shape *moe = model_preset_moe(p);
    /* gemma4 has experts only where its preset says (26B-A4B) */
    const int by_preset = as->gemma4 && moe && !strcmp(moe->arch, "gemma4");
    if (moe && !as->n_expert && !by_preset)
        return tps_fail(err, TPS_EINVAL,
                        "model make: preset %s is a mixture of experts (like %s); make it with "
                        "--arch %s",
                        p->name, p->like, moe->arch);
    if (!as->n_expert && !by_preset) return 0;
    pl->n_expert = moe ? moe->n_expert : as->n_expert;
    pl->n_used = moe ? moe->n_expert_used : as->n_expert_used;
    pl->eff = moe ? moe->expert_ffn : p->ffn_dim;
    if (as->oai && (p->dim % QK_MXFP4 || pl->eff % QK_MXFP4))
        return tps_fail(err, TPS_EINVAL,
                        "model make: gpt-oss's MXFP4 experts need dim and the expert width "
                        "multiples of 32; preset %s has %u and %u",
                        p->name, p->dim, pl->eff);
    return 0;
}

int make_moe_metadata(gguf_writer *w, const make_plan *pl) {
    const char *a = pl->as->gguf_arch;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    int rc = 0;
    if (pl->n_expert) {
        rc = rc ? rc : gguf_writer_set_u32(w, KEY("expert_count"), pl->n_expert);
        rc = rc ? rc : gguf_writer_set_u32(w, KEY("expert_used_count"), pl->n_used);
        if (strcmp(a, "llama")) /* llama's experts are feed_forward_length wide */
            rc = rc ? rc : gguf_writer_set_u32(w, KEY("expert_feed_forward_length"), pl->eff);
        if (pl->as->shexp)
            rc =
                rc ? rc : gguf_writer_set_u32(w, KEY("expert_shared_feed_forward_length"), pl->eff);
    }
    if (pl->as->oai) {
        /* tiny: a window the tests' prompts cross; else gpt-oss's 128 */
        rc = rc ? rc
                : gguf_writer_set_u32(w, KEY("attention.sliding_window"),
                                      pl->p->ctx_len <= 512 ? 8 : 128);
        rc = rc ? rc : gguf_writer_set_str(w, KEY("rope.scaling.type"), "yarn");
        rc = rc ? rc : gguf_writer_set_f32(w, KEY("rope.scaling.factor"), 32.0f);
        rc = rc ? rc : gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), 4096);
    }
#undef KEY
    return rc;
}

void make_plan_moe_ffn(make_plan *pl, uint32_t l) {
    const model_preset *p = pl->p;
    const int oai = pl->as->oai;
    const uint32_t E = pl->n_expert, ff = pl->eff;
    /* the router sees a unit-RMS row: logits of std ~1 pick experts by a
     * clear margin, so float rounding never decides which run */
    const float router = 1.0f / sqrtf((float)p->dim);
    /* gpt-oss: weights and biases large enough that the clamps at +-7 act */
    const float std = oai ? router : pl->std;
    /* gpt-oss, Qwen3.5 and GLM-4.5 name the FFN's pre-norm post_attention_norm */
    make_add_layer_gen(
        pl, l, oai || pl->hy || pl->as->glm ? "post_attention_norm.weight" : "ffn_norm.weight",
        GGML_TYPE_F32, 1, p->dim, 0.0f);
    make_add_layer_gen(pl, l, "ffn_gate_inp.weight", GGML_TYPE_F32, E, p->dim, router);
    if (oai) make_add_layer_gen(pl, l, "ffn_gate_inp.bias", GGML_TYPE_F32, 1, E, 0.5f);
    /* a selection bias of the sigmoids' own size: it changes which experts
     * run, not their weights, so a bias used as a weight shows */
    if (pl->as->glm) make_add_layer_gen(pl, l, "exp_probs_b.bias", GGML_TYPE_F32, 1, E, 0.3f);
    const uint32_t tg =
        oai ? GGML_TYPE_MXFP4 : make_matrix_type(pl, "ffn_gate_exps.weight", l, p->dim);
    const uint32_t td = oai ? GGML_TYPE_MXFP4 : make_matrix_type(pl, "ffn_down_exps.weight", l, ff);
    make_add_layer_gen(pl, l, "ffn_gate_exps.weight", tg, ff, p->dim, std)->n_mats = E;
    make_add_layer_gen(pl, l, "ffn_up_exps.weight", tg, ff, p->dim, std)->n_mats = E;
    make_add_layer_gen(pl, l, "ffn_down_exps.weight", td, p->dim, ff, pl->proj)->n_mats = E;
    if (oai) {
        make_add_layer_gen(pl, l, "ffn_gate_exps.bias", GGML_TYPE_F32, E, ff, 3.0f);
        make_add_layer_gen(pl, l, "ffn_up_exps.bias", GGML_TYPE_F32, E, ff, 3.0f);
        make_add_layer_gen(pl, l, "ffn_down_exps.bias", GGML_TYPE_F32, E, p->dim, 0.1f);
    }
    if (!pl->as->shexp && !pl->as->glm) return;
    /* the shared expert's gate of std ~1 on a unit-RMS row: sigmoids spread
     * over (0, 1), so a missed or inverted gate shows */
    if (pl->as->shexp)
        make_add_layer_gen(pl, l, "ffn_gate_inp_shexp.weight", GGML_TYPE_F32, 1, p->dim, router);
    make_add_layer_gen(pl, l, "ffn_gate_shexp.weight",
                       make_matrix_type(pl, "ffn_gate_shexp.weight", l, p->dim), ff, p->dim, std);
    make_add_layer_gen(pl, l, "ffn_up_shexp.weight",
                       make_matrix_type(pl, "ffn_up_shexp.weight", l, p->dim), ff, p->dim, std);
    make_add_layer_gen(pl, l, "ffn_down_shexp.weight",
                       make_matrix_type(pl, "ffn_down_shexp.weight", l, ff), p->dim, ff, pl->proj);
}

int make_glm_metadata(gguf_writer *w, const make_plan *pl) {
    if (!pl->as->glm) return 0;
    const char *a = pl->as->gguf_arch;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    int rc = gguf_writer_set_u32(w, KEY("expert_shared_count"), 1);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("leading_dense_block_count"), pl->dense_lead);
    rc = rc ? rc : gguf_writer_set_bool(w, KEY("expert_weights_norm"), true);
    /* GLM-4.5's routed_scaling_factor (the Air's is 1): a missed scale shows */
    rc = rc ? rc : gguf_writer_set_f32(w, KEY("expert_weights_scale"), 2.5f);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("expert_gating_func"), 2); /* sigmoid */
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("nextn_predict_layers"), pl->nextn);
#undef KEY
    return rc;
}

void make_plan_oai_attention(make_plan *pl, uint32_t l) {
    /* sink logits of order one: they take a real share of each softmax */
    make_add_layer_gen(pl, l, "attn_sinks.weight", GGML_TYPE_F32, 1, pl->p->n_heads, 1.0f);
    make_add_layer_gen(pl, l, "attn_output.bias", GGML_TYPE_F32, 1, pl->p->dim, 0.1f);
}
