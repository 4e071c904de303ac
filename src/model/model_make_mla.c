/* The DeepSeek-V2/V3 part of a synthetic file (--arch deepseek2;
 * model_make.c writes the rest): multi-head latent attention's tensors and
 * keys as llama.cpp's converter writes them (attn_k_b and attn_v_b split
 * per head, key_length the latent plus the RoPE part, one KV head), YaRN
 * with DeepSeek's mscale, and the experts as the preset's row routes them,
 * with ungated shared experts and a dense first layer. Seeded like every
 * tensor. Nothing here runs the model. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/model_make_internal.h"

/* What a deepseek2 preset adds to its model_presets row. */
typedef struct make_mla_shape {
    const char *preset;
    uint32_t q_lora, kv_lora, rope, nope, v; /* ranks and per-head sizes */
    uint32_t n_expert, n_used, eff;          /* experts (eff 0: the preset's FFN width) */
    uint32_t n_shared, dense_lead;           /* shared experts; leading dense layers */
    uint32_t gating;                         /* expert_gating_func: 1 softmax, 2 sigmoid */
    int norm_w, sel_bias;                    /* weights renormalised; exp_probs_b */
    float w_scale;                           /* expert_weights_scale */
    uint32_t n_groups, groups_used;          /* expert groups (0: none) */
    float yarn_factor;                       /* rope.scaling.factor */
    uint32_t yarn_ctx;                       /* rope.scaling.original_context_length */
    float mscale_all_dim;                    /* written x 0.1 as yarn_log_multiplier */
} make_mla_shape;

static const make_mla_shape mla_shapes[] = {
    /* every path on a small file: Q through its bottleneck, DeepSeek-V3's
     * routing (sigmoid, a selection bias, 4 groups of 4 of which 2 are
     * chosen, weights renormalised and scaled by 2.5), YaRN x4 of 128;
     * sizes multiples of 32 so a q8_0 file and cache fit */
    {.preset = "tiny",
     .q_lora = 64,
     .kv_lora = 64,
     .rope = 32,
     .nope = 32,
     .v = 32,
     .n_expert = 16,
     .n_used = 4,
     .n_shared = 2,
     .dense_lead = 1,
     .gating = 2,
     .norm_w = 1,
     .sel_bias = 1,
     .w_scale = 2.5f,
     .n_groups = 4,
     .groups_used = 2,
     .yarn_factor = 4.0f,
     .yarn_ctx = 128,
     .mscale_all_dim = 0.707f},
    /* DeepSeek-V2-Lite: Q without a bottleneck, softmax over 64 experts of
     * 1408, 6 a token, not renormalised, 2 shared, layer 0 dense, YaRN x40 */
    {.preset = "16B-A2.4B",
     .kv_lora = 512,
     .rope = 64,
     .nope = 128,
     .v = 128,
     .n_expert = 64,
     .n_used = 6,
     .eff = 1408,
     .n_shared = 2,
     .dense_lead = 1,
     .gating = 1,
     .w_scale = 1.0f,
     .yarn_factor = 40.0f,
     .yarn_ctx = 4096,
     .mscale_all_dim = 0.707f},
};

int make_plan_mla(make_plan *pl, tps_err *err) {
    if (!pl->as->mla) return 0;
    const make_mla_shape *sh = NULL;
    for (size_t i = 0; i < sizeof mla_shapes / sizeof mla_shapes[0]; i++)
        if (model_preset_is(pl->p, mla_shapes[i].preset)) sh = &mla_shapes[i];
    if (!sh)
        return tps_fail(err, TPS_EINVAL,
                        "model make: --arch deepseek2 has presets tiny, 16B-A2.4B "
                        "(DeepSeek-V2-Lite) and 16B-A2.4B-thin, not %s",
                        pl->p->name);
    pl->mla = sh;
    pl->hd = sh->kv_lora + sh->rope;
    pl->n_expert = sh->n_expert, pl->n_used = sh->n_used;
    pl->eff = sh->eff && !model_preset_thin(pl->p) ? sh->eff : pl->p->ffn_dim;
    pl->dense_lead = sh->dense_lead;
    return 0;
}

int make_mla_metadata(gguf_writer *w, const make_plan *pl) {
    const make_mla_shape *sh = pl->mla;
    if (!sh) return 0;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, pl->as->gguf_arch), key)
    int rc = gguf_writer_set_u32(w, KEY("attention.head_count_kv"), 1);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("leading_dense_block_count"), sh->dense_lead);
    if (sh->q_lora) rc = rc ? rc : gguf_writer_set_u32(w, KEY("attention.q_lora_rank"), sh->q_lora);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("attention.kv_lora_rank"), sh->kv_lora);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("attention.key_length"), sh->kv_lora + sh->rope);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("attention.value_length"), sh->kv_lora);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("attention.key_length_mla"), sh->nope + sh->rope);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("attention.value_length_mla"), sh->v);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("expert_shared_count"), sh->n_shared);
    rc = rc ? rc : gguf_writer_set_f32(w, KEY("expert_weights_scale"), sh->w_scale);
    if (sh->norm_w) rc = rc ? rc : gguf_writer_set_bool(w, KEY("expert_weights_norm"), true);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("expert_gating_func"), sh->gating);
    if (sh->n_groups) {
        rc = rc ? rc : gguf_writer_set_u32(w, KEY("expert_group_count"), sh->n_groups);
        rc = rc ? rc : gguf_writer_set_u32(w, KEY("expert_group_used_count"), sh->groups_used);
    }
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("rope.dimension_count"), sh->rope);
    rc = rc ? rc : gguf_writer_set_str(w, KEY("rope.scaling.type"), "yarn");
    rc = rc ? rc : gguf_writer_set_f32(w, KEY("rope.scaling.factor"), sh->yarn_factor);
    rc =
        rc ? rc : gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), sh->yarn_ctx);
    rc = rc ? rc
            : gguf_writer_set_f32(w, KEY("rope.scaling.yarn_log_multiplier"),
                                  0.1f * sh->mscale_all_dim);
#undef KEY
    return rc;
}

/* Layer l's latent attention. Q's and the absorbed K's scales make a head's
 * scores of order one, so attention is far from uniform and a wrong RoPE
 * or scale shows in the logits. */
static void plan_attention(make_plan *pl, uint32_t l) {
    const make_mla_shape *sh = pl->mla;
    const uint32_t dim = pl->p->dim, H = pl->p->n_heads, qk = sh->nope + sh->rope;
    make_add_layer_gen(pl, l, "attn_norm.weight", GGML_TYPE_F32, 1, dim, 0.0f);
    if (sh->q_lora) {
        make_add_layer_gen(pl, l, "attn_q_a.weight",
                           make_matrix_type(pl, "attn_q_a.weight", l, dim), sh->q_lora, dim,
                           pl->std);
        make_add_layer_gen(pl, l, "attn_q_a_norm.weight", GGML_TYPE_F32, 1, sh->q_lora, 0.2f)
            ->offset = 1.0f;
        make_add_layer_gen(pl, l, "attn_q_b.weight",
                           make_matrix_type(pl, "attn_q_b.weight", l, sh->q_lora), H * qk,
                           sh->q_lora, 1.0f / sqrtf((float)sh->q_lora));
    } else {
        make_add_layer_gen(pl, l, "attn_q.weight", make_matrix_type(pl, "attn_q.weight", l, dim),
                           H * qk, dim, 1.0f / sqrtf((float)dim));
    }
    make_add_layer_gen(pl, l, "attn_kv_a_mqa.weight",
                       make_matrix_type(pl, "attn_kv_a_mqa.weight", l, dim), sh->kv_lora + sh->rope,
                       dim, 1.0f / sqrtf((float)dim));
    make_add_layer_gen(pl, l, "attn_kv_a_norm.weight", GGML_TYPE_F32, 1, sh->kv_lora, 0.2f)
        ->offset = 1.0f;
    make_add_layer_gen(pl, l, "attn_k_b.weight",
                       make_matrix_type(pl, "attn_k_b.weight", l, sh->nope), sh->kv_lora, sh->nope,
                       1.0f / sqrtf((float)sh->nope))
        ->n_mats = H;
    make_add_layer_gen(pl, l, "attn_v_b.weight",
                       make_matrix_type(pl, "attn_v_b.weight", l, sh->kv_lora), sh->v, sh->kv_lora,
                       1.0f / sqrtf((float)sh->kv_lora))
        ->n_mats = H;
    make_add_layer_gen(pl, l, "attn_output.weight",
                       make_matrix_type(pl, "attn_output.weight", l, H * sh->v), dim, H * sh->v,
                       pl->proj);
}

/* A dense FFN of width ff (the leading layers; the shared experts, named
 * *_shexp, as one FFN of their summed width). */
static void plan_swiglu(make_plan *pl, uint32_t l, const char *const names[3], uint32_t ff) {
    const uint32_t dim = pl->p->dim;
    make_add_layer_gen(pl, l, names[0], make_matrix_type(pl, names[0], l, dim), ff, dim, pl->std);
    make_add_layer_gen(pl, l, names[1], make_matrix_type(pl, names[1], l, dim), ff, dim, pl->std);
    make_add_layer_gen(pl, l, names[2], make_matrix_type(pl, names[2], l, ff), dim, ff, pl->proj);
}

/* Layer l's FFN: dense, or the router (its selection bias), the experts and
 * the shared experts. */
static void plan_ffn(make_plan *pl, uint32_t l) {
    const make_mla_shape *sh = pl->mla;
    const uint32_t dim = pl->p->dim, E = pl->n_expert, ff = pl->eff;
    make_add_layer_gen(pl, l, "ffn_norm.weight", GGML_TYPE_F32, 1, dim, 0.0f);
    if (l < pl->dense_lead) {
        static const char *const dense[3] = {"ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};
        plan_swiglu(pl, l, dense, pl->p->ffn_dim);
        return;
    }
    /* router logits of std ~1 on a unit-RMS row, a selection bias of the
     * sigmoids' own size: it moves the choice, not the weights */
    make_add_layer_gen(pl, l, "ffn_gate_inp.weight", GGML_TYPE_F32, E, dim,
                       1.0f / sqrtf((float)dim));
    if (sh->sel_bias) make_add_layer_gen(pl, l, "exp_probs_b.bias", GGML_TYPE_F32, 1, E, 0.3f);
    const uint32_t tg = make_matrix_type(pl, "ffn_gate_exps.weight", l, dim);
    const uint32_t td = make_matrix_type(pl, "ffn_down_exps.weight", l, ff);
    make_add_layer_gen(pl, l, "ffn_gate_exps.weight", tg, ff, dim, pl->std)->n_mats = E;
    make_add_layer_gen(pl, l, "ffn_up_exps.weight", tg, ff, dim, pl->std)->n_mats = E;
    make_add_layer_gen(pl, l, "ffn_down_exps.weight", td, dim, ff, pl->proj)->n_mats = E;
    static const char *const shared[3] = {"ffn_gate_shexp.weight", "ffn_up_shexp.weight",
                                          "ffn_down_shexp.weight"};
    plan_swiglu(pl, l, shared, sh->n_shared * ff);
}

void make_plan_mla_layer(make_plan *pl, uint32_t l) {
    plan_attention(pl, l);
    plan_ffn(pl, l);
}
