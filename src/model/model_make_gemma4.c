/* The Gemma 4 part of a synthetic file (--arch gemma4; model_make.c writes
 * the rest): the keys and tensors llama.cpp's converter writes for a Gemma
 * 4 text stack (conversion/gemma.py): sliding and global layers listed per
 * layer with their own head sizes, KV heads and RoPE (the global layers'
 * partial RoPE as rope_freqs, 1 then 1e30), the last layers sharing earlier
 * layers' K/V (no K/V tensors of their own), global layers without attn_v
 * where the shape says (V = K), a per-layer output scale, per-layer input
 * embeddings, the final soft-cap, and where the preset has experts
 * (26B-A4B) the router with its input scale, the experts' fused gate|up
 * and down with a scale per expert, and the norms of the two FFN halves.
 * Seeded like every tensor. Nothing here runs the model. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/model_make_internal.h"

/* What a gemma4 preset adds to its model_presets row. */
typedef struct make_gemma4_shape {
    const char *preset;
    uint32_t hd_swa, hd_full; /* head sizes of sliding and global layers */
    uint32_t kv_swa, kv_full; /* their KV heads */
    uint32_t n_shared;        /* attention.shared_kv_layers */
    uint32_t n_embd_pl;       /* embedding_length_per_layer_input (0: none) */
    uint32_t window, period;  /* sliding window; layer l global when l % period is
                                 period - 1, and the last layer */
    int k_eq_v;               /* global layers have no attn_v (V = K) */
    int double_wide;          /* the shared-KV layers' FFN twice as wide (E2B's
                                 use_double_wide_mlp: feed_forward_length a list) */
    float softcap;            /* final_logit_softcapping */
    float rope_partial;       /* the global layers' rotated share of each head */
} make_gemma4_shape;

static const make_gemma4_shape gemma4_shapes[] = {
    /* every path on a small file: heads of 16 (sliding, 4 KV heads) and 32
     * (global, 2 KV heads, V = K), layers s s g s g of which the last two
     * read layers 1 and 2's K/V and have FFNs twice as wide, a window of 8,
     * per-layer inputs of 8, a soft-cap small enough to act */
    {.preset = "tiny",
     .hd_swa = 16,
     .hd_full = 32,
     .kv_swa = 4,
     .kv_full = 2,
     .n_shared = 2,
     .n_embd_pl = 8,
     .window = 8,
     .period = 3,
     .k_eq_v = 1,
     .double_wide = 1,
     .softcap = 2.0f,
     .rope_partial = 0.25f},
    /* Gemma-4-E4B: 42 layers, 5 sliding to 1 global, the last 18 sharing
     * K/V, per-layer inputs of 256 */
    {.preset = "E4B",
     .hd_swa = 256,
     .hd_full = 512,
     .kv_swa = 2,
     .kv_full = 2,
     .n_shared = 18,
     .n_embd_pl = 256,
     .window = 512,
     .period = 6,
     .softcap = 30.0f,
     .rope_partial = 0.25f},
    /* tiny's heads and window with 8 experts beside the dense FFN (their
     * count in model_make_moe.c), no shared KV layers or per-layer inputs,
     * as 26B-A4B */
    {.preset = "tiny-moe",
     .hd_swa = 16,
     .hd_full = 32,
     .kv_swa = 4,
     .kv_full = 2,
     .window = 8,
     .period = 3,
     .k_eq_v = 1,
     .softcap = 2.0f,
     .rope_partial = 0.25f},
    /* Gemma-4-26B-A4B (its config.json): 30 layers, 5 sliding to 1 global,
     * 8 KV heads of 256 sliding, 2 of 512 global with V = K; 128 experts
     * of 704, 8 a token, beside a dense FFN of 2112 */
    {.preset = "26B-A4B",
     .hd_swa = 256,
     .hd_full = 512,
     .kv_swa = 8,
     .kv_full = 2,
     .window = 1024,
     .period = 6,
     .k_eq_v = 1,
     .softcap = 30.0f,
     .rope_partial = 0.25f},
    /* Gemma-4-31B: 60 layers, 16 KV heads sliding, 4 global with V = K */
    {.preset = "31B",
     .hd_swa = 256,
     .hd_full = 512,
     .kv_swa = 16,
     .kv_full = 4,
     .window = 1024,
     .period = 6,
     .k_eq_v = 1,
     .softcap = 30.0f,
     .rope_partial = 0.25f},
};

static const make_gemma4_shape *shape_of(const make_plan *pl) {
    for (size_t i = 0; i < sizeof gemma4_shapes / sizeof gemma4_shapes[0]; i++)
        if (model_preset_is(pl->p, gemma4_shapes[i].preset)) return &gemma4_shapes[i];
    return NULL;
}

static int layer_is_swa(const make_plan *pl, uint32_t l) {
    const make_gemma4_shape *sh = pl->g4;
    return l + 1 != pl->p->n_layers && l % sh->period != sh->period - 1;
}

/* 1 when layer l stores K/V of its own (not one of the last n_shared). */
static int layer_has_kv(const make_plan *pl, uint32_t l) {
    return l + pl->g4->n_shared < pl->p->n_layers;
}

/* Layer l's FFN width: the preset's, twice it on the shared-KV layers
 * where the shape says. */
static uint32_t layer_ffn(const make_plan *pl, uint32_t l) {
    return pl->p->ffn_dim * (pl->g4->double_wide && !layer_has_kv(pl, l) ? 2 : 1);
}

int make_plan_gemma4(make_plan *pl, tps_err *err) {
    if (!pl->as->gemma4) return 0;
    const make_gemma4_shape *sh = shape_of(pl);
    if (!sh)
        return tps_fail(
            err, TPS_EINVAL,
            "model make: --arch gemma4 has presets tiny, E4B, E4B-thin, 31B, 26B-A4B and "
            "tiny-moe, not %s",
            pl->p->name);
    if (pl->p->n_layers > LLAMA_GEMMA4_MAX_LAYERS || sh->n_shared + 2 > pl->p->n_layers)
        return tps_fail(err, TPS_EINVAL,
                        "model make: gemma4 preset %s takes %u to %u layers (its %u shared "
                        "layers read K/V of two before them), not %u",
                        pl->p->name, sh->n_shared + 2, LLAMA_GEMMA4_MAX_LAYERS, sh->n_shared,
                        pl->p->n_layers);
    if (sh->hd_full / 2 > pl->p->dim)
        return tps_fail(err, TPS_EINVAL, "model make: gemma4: preset %s does not fit its shape",
                        pl->p->name);
    pl->g4 = sh;
    pl->hd = sh->hd_full;
    pl->q_dim = pl->p->n_heads * sh->hd_full;
    pl->kv = sh->kv_full * sh->hd_full;
    pl->rope_base = 1000000.0f;
    return 0;
}

/* The per-layer lists and Gemma 4's head, RoPE, sharing and per-layer
 * input keys (replacing the Llama layout's head count and sizes). */
int make_gemma4_metadata(gguf_writer *w, const make_plan *pl) {
    const make_gemma4_shape *sh = pl->g4;
    if (!sh) return 0;
    const uint32_t L = pl->p->n_layers;
    uint8_t swa[LLAMA_GEMMA4_MAX_LAYERS];
    int32_t kvh[LLAMA_GEMMA4_MAX_LAYERS], ffn[LLAMA_GEMMA4_MAX_LAYERS];
    for (uint32_t l = 0; l < L; l++) {
        swa[l] = (uint8_t)layer_is_swa(pl, l);
        kvh[l] = (int32_t)(swa[l] ? sh->kv_swa : sh->kv_full);
        ffn[l] = (int32_t)layer_ffn(pl, l);
    }
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "gemma4." suffix), key)
    int rc = gguf_writer_set_array(w, KEY("attention.head_count_kv"), GGUF_TYPE_INT32, kvh, L);
    if (sh->double_wide)
        rc =
            rc ? rc : gguf_writer_set_array(w, KEY("feed_forward_length"), GGUF_TYPE_INT32, ffn, L);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("attention.key_length"), sh->hd_full);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("attention.value_length"), sh->hd_full);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("attention.key_length_swa"), sh->hd_swa);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("attention.value_length_swa"), sh->hd_swa);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("rope.dimension_count"), sh->hd_full);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("rope.dimension_count_swa"), sh->hd_swa);
    rc = rc ? rc : gguf_writer_set_f32(w, KEY("rope.freq_base_swa"), 10000.0f);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("attention.sliding_window"), sh->window);
    rc = rc ? rc
            : gguf_writer_set_array(w, KEY("attention.sliding_window_pattern"), GGUF_TYPE_BOOL, swa,
                                    L);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("attention.shared_kv_layers"), sh->n_shared);
    rc = rc ? rc : gguf_writer_set_u32(w, KEY("embedding_length_per_layer_input"), sh->n_embd_pl);
    rc = rc ? rc : gguf_writer_set_f32(w, KEY("final_logit_softcapping"), sh->softcap);
#undef KEY
    return rc;
}

/* rope_freqs (the global layers' partial RoPE: 1 for the rotated pairs,
 * 1e30 for the rest, as the converter writes it; values in rope_factors,
 * at least hd_full / 2) and the per-layer input embeddings. */
void make_plan_gemma4_globals(make_plan *pl, float *rope_factors) {
    const make_gemma4_shape *sh = pl->g4;
    const uint32_t half = sh->hd_full / 2, rot = (uint32_t)(sh->hd_full * sh->rope_partial / 2);
    for (uint32_t i = 0; i < half; i++)
        rope_factors[i] = i < rot ? 1.0f : 1e30f;
    make_add_gen(pl, "rope_freqs.weight", GGML_TYPE_F32, 1, half, 0.0f)->values = rope_factors;
    if (!sh->n_embd_pl) return;
    const model_preset *p = pl->p;
    const uint32_t n = p->n_layers * sh->n_embd_pl;
    make_add_gen(pl, "per_layer_token_embd.weight",
                 make_matrix_type(pl, "per_layer_token_embd.weight", 0, n), pl->n_vocab, n,
                 pl->std_embd);
    make_add_gen(pl, "per_layer_model_proj.weight",
                 make_matrix_type(pl, "per_layer_model_proj.weight", 0, p->dim), n, p->dim,
                 pl->std);
    make_add_gen(pl, "per_layer_proj_norm.weight", GGML_TYPE_F32, 1, sh->n_embd_pl, 0.2f)->offset =
        1.0f;
}

/* A norm weight of layer l: 1 +- 0.2, so a missed weight shows. */
static void norm(make_plan *pl, uint32_t l, const char *suffix, uint32_t n) {
    make_add_layer_gen(pl, l, suffix, GGML_TYPE_F32, 1, n, 0.2f)->offset = 1.0f;
}

/* A Q or K norm weight of layer l: hd^-1/4 +- 20 %. Gemma 4 scores
 * attention with scale 1 and leaves the temperature to these learned
 * weights; at 1 a score of unit q and k has a spread of sqrt(hd) (16 to 22
 * on real heads), a softmax so sharp that a last-bit difference in a score
 * moves the output, and across 42 layers llama.cpp's own logits change
 * wholesale when its GELU rounding does. hd^-1/4 on both gives scores of
 * unit spread, as 1/sqrt(hd) does for other families, so the file's tokens
 * are a function of its weights. */
static void qk_norm(make_plan *pl, uint32_t l, const char *suffix, uint32_t hd) {
    const float t = 1.0f / sqrtf(sqrtf((float)hd));
    make_add_layer_gen(pl, l, suffix, GGML_TYPE_F32, 1, hd, 0.2f * t)->offset = t;
}

static void matrix(make_plan *pl, uint32_t l, const char *suffix, uint32_t rows, uint32_t cols,
                   float std) {
    make_add_layer_gen(pl, l, suffix, make_matrix_type(pl, suffix, l, cols), rows, cols, std);
}

/* Layer l's experts beside its dense FFN: the norms of the two halves, the
 * router and its input scale, the experts' gate|up fused (the converter
 * maps the checkpoint's experts.gate_up_proj to it) and down, and each
 * expert's output scale (router.per_expert_scale). */
static void plan_experts(make_plan *pl, uint32_t l) {
    const uint32_t dim = pl->p->dim, E = pl->n_expert, ff = pl->eff;
    norm(pl, l, "post_ffw_norm_1.weight", dim);
    norm(pl, l, "pre_ffw_norm_2.weight", dim);
    norm(pl, l, "post_ffw_norm_2.weight", dim);
    /* the router reads rms_norm(x) / sqrt(dim): weights of ~1 give logits of
     * ~1, so experts are chosen by clear margins and float rounding never
     * decides which run */
    make_add_layer_gen(pl, l, "ffn_gate_inp.weight", GGML_TYPE_F32, E, dim, 1.0f);
    norm(pl, l, "ffn_gate_inp.scale", dim);
    make_add_layer_gen(pl, l, "ffn_gate_up_exps.weight",
                       make_matrix_type(pl, "ffn_gate_up_exps.weight", l, dim), 2 * ff, dim,
                       pl->std)
        ->n_mats = E;
    make_add_layer_gen(pl, l, "ffn_down_exps.weight",
                       make_matrix_type(pl, "ffn_down_exps.weight", l, ff), dim, ff, pl->proj)
        ->n_mats = E;
    make_add_layer_gen(pl, l, "ffn_down_exps.scale", GGML_TYPE_F32, 1, E, 0.3f)->offset = 1.0f;
}

/* Layer l's tensors in the converter's order: attention (Q always; K, V
 * and K's norm where the layer stores K/V, V unless the shape makes it K),
 * the GeGLU FFN with Gemma's norms (and the experts beside it), the
 * output scale, the per-layer input's
 * gate, projection and norm. */
void make_plan_gemma4_layer(make_plan *pl, uint32_t l) {
    const make_gemma4_shape *sh = pl->g4;
    const model_preset *p = pl->p;
    const int swa = layer_is_swa(pl, l);
    const uint32_t hd = swa ? sh->hd_swa : sh->hd_full, dim = p->dim, ffn = layer_ffn(pl, l);
    const uint32_t q_dim = p->n_heads * hd, kv = (swa ? sh->kv_swa : sh->kv_full) * hd;
    norm(pl, l, "attn_norm.weight", dim);
    matrix(pl, l, "attn_q.weight", q_dim, dim, pl->std);
    if (layer_has_kv(pl, l)) {
        matrix(pl, l, "attn_k.weight", kv, dim, pl->std);
        if (swa || !sh->k_eq_v) matrix(pl, l, "attn_v.weight", kv, dim, pl->std);
        qk_norm(pl, l, "attn_k_norm.weight", hd);
    }
    qk_norm(pl, l, "attn_q_norm.weight", hd);
    matrix(pl, l, "attn_output.weight", dim, q_dim, pl->proj);
    norm(pl, l, "post_attention_norm.weight", dim);
    norm(pl, l, "ffn_norm.weight", dim);
    matrix(pl, l, "ffn_gate.weight", ffn, dim, pl->std);
    matrix(pl, l, "ffn_up.weight", ffn, dim, pl->std);
    matrix(pl, l, "ffn_down.weight", dim, ffn, pl->proj);
    norm(pl, l, "post_ffw_norm.weight", dim);
    if (pl->n_expert) plan_experts(pl, l);
    make_add_layer_gen(pl, l, "layer_output_scale.weight", GGML_TYPE_F32, 1, 1, 0.3f)->offset =
        1.0f;
    if (!sh->n_embd_pl) return;
    matrix(pl, l, "inp_gate.weight", sh->n_embd_pl, dim, pl->std);
    matrix(pl, l, "proj.weight", dim, sh->n_embd_pl, pl->proj);
    norm(pl, l, "post_norm.weight", dim);
}
