/* The hybrid (Qwen3.5) part of a synthetic file (model_make.c writes the
 * rest): the linear layers' tensors and keys as llama.cpp's qwen35.cpp
 * loads them, the M-RoPE sections, and the MTP blocks after the stack.
 * Seeded like every tensor. Nothing here runs the model. */
#include <stdio.h>
#include <string.h>

#include "model/model_make_internal.h"

/* tiny: two full-attention layers of five (layers 1 and 3), 4 value heads
 * on 2 key heads, 8 RoPE pairs of which the last lies past the t/h/w
 * sections (so the M-RoPE rule is exercised), one MTP block. The real
 * shapes: Qwen3.5-0.8B, 9B and 35B-A3B as their config.json give them;
 * 0.8B-thin is 0.8B's layers at width 256 (the reference tests' real
 * heads, states and depth). */
static const model_hybrid_shape model_hybrid_shapes[] = {
    {"tiny", 32, 2, 4, 16, 2, {1, 1, 1, 1}, 1},
    {"0.8B", 256, 16, 16, 128, 4, {11, 11, 10, 0}, 1},
    {"9B", 256, 16, 32, 128, 4, {11, 11, 10, 0}, 1},
    {"35B-A3B", 256, 16, 32, 128, 4, {11, 11, 10, 0}, 1},
};

const model_hybrid_shape *model_preset_hybrid(const model_preset *p) {
    for (size_t i = 0; i < sizeof model_hybrid_shapes / sizeof model_hybrid_shapes[0]; i++)
        if (model_preset_is(p, model_hybrid_shapes[i].preset)) return &model_hybrid_shapes[i];
    return NULL;
}

int make_plan_hybrid(make_plan *pl, tps_err *err) {
    if (!pl->as->hybrid) return 0;
    pl->hy = model_preset_hybrid(pl->p);
    if (!pl->hy) {
        char names[160] = "";
        for (const model_preset *q = model_presets; q->name; q++)
            if (model_preset_hybrid(q))
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                         names[0] ? ", " : "", q->name);
        return tps_fail(err, TPS_EINVAL,
                        "model make: --arch %s needs a preset with a linear-attention shape: %s",
                        pl->as->name, names);
    }
    pl->hd = pl->hy->head_dim;
    pl->q_dim = pl->p->n_heads * pl->hd;
    pl->kv = pl->p->n_kv_heads * pl->hd;
    return 0;
}

int make_layer_is_linear(const make_plan *pl, uint32_t l) {
    return pl->hy && l < pl->p->n_layers && (l + 1) % pl->hy->interval != 0;
}

int make_hybrid_metadata(gguf_writer *w, const make_plan *pl) {
    if (!pl->hy) return 0;
    const model_hybrid_shape *h = pl->hy;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, pl->as->gguf_arch), key)
    const int32_t sections[4] = {(int32_t)h->sections[0], (int32_t)h->sections[1],
                                 (int32_t)h->sections[2], (int32_t)h->sections[3]};
    int rc = gguf_writer_set_array(w, KEY("rope.dimension_sections"), GGUF_TYPE_INT32, sections, 4);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("ssm.conv_kernel"), 4);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("ssm.state_size"), h->state);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("ssm.group_count"), h->k_heads);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("ssm.time_step_rank"), h->v_heads);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("ssm.inner_size"), h->v_heads * h->state);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("full_attention_interval"), h->interval);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("nextn_predict_layers"), h->nextn);
#undef KEY
    return rc;
}

void make_plan_linear_attention(make_plan *pl, uint32_t l) {
    const model_hybrid_shape *h = pl->hy;
    const uint32_t dim = pl->p->dim, inner = h->v_heads * h->state;
    const uint32_t ch = (2 * h->k_heads + h->v_heads) * h->state;
    const float std = pl->std;
    make_add_layer_gen(pl, l, "attn_norm.weight", GGML_TYPE_F32, 1, dim, 0.0f);
    make_add_layer_gen(pl, l, "attn_qkv.weight", make_matrix_type(pl, "attn_qkv.weight", l, dim),
                       ch, dim, std);
    make_add_layer_gen(pl, l, "attn_gate.weight", make_matrix_type(pl, "attn_gate.weight", l, dim),
                       inner, dim, std);
    /* conv taps around 1/4 each, so the conv averages its window */
    make_add_layer_gen(pl, l, "ssm_conv1d.weight", GGML_TYPE_F32, ch, 4, 0.2f)->offset = 0.25f;
    make_add_layer_gen(pl, l, "ssm_dt.bias", GGML_TYPE_F32, 1, h->v_heads, 1.0f);
    /* -exp(A_log) in [-1.5, -0.5]: decays between 0.2 and 0.9 a step */
    make_add_layer_gen(pl, l, "ssm_a", GGML_TYPE_F32, 1, h->v_heads, 0.5f)->offset = -1.0f;
    make_add_layer_gen(pl, l, "ssm_beta.weight", make_matrix_type(pl, "ssm_beta.weight", l, dim),
                       h->v_heads, dim, std);
    make_add_layer_gen(pl, l, "ssm_alpha.weight", make_matrix_type(pl, "ssm_alpha.weight", l, dim),
                       h->v_heads, dim, std);
    make_add_layer_gen(pl, l, "ssm_norm.weight", GGML_TYPE_F32, 1, h->state, 0.2f)->offset = 1.0f;
    make_add_layer_gen(pl, l, "ssm_out.weight", make_matrix_type(pl, "ssm_out.weight", l, inner),
                       dim, inner, pl->proj);
}

void make_plan_mtp_extras(make_plan *pl, uint32_t l) {
    const uint32_t dim = pl->p->dim;
    make_add_layer_gen(pl, l, "nextn.eh_proj.weight",
                       make_matrix_type(pl, "nextn.eh_proj.weight", l, 2 * dim), dim, 2 * dim,
                       pl->std);
    make_add_layer_gen(pl, l, "nextn.enorm.weight", GGML_TYPE_F32, 1, dim, 0.0f);
    make_add_layer_gen(pl, l, "nextn.hnorm.weight", GGML_TYPE_F32, 1, dim, 0.0f);
    make_add_layer_gen(pl, l, "nextn.shared_head_norm.weight", GGML_TYPE_F32, 1, dim, 0.0f);
}
