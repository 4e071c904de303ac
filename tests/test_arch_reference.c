/* Every architecture against llama.cpp: a seeded random `tiny` model made by
 * model_make for each --arch (`tiny-moe` for Gemma 4's MoE) gives, on 5
 * prompts, the same 16 greedy tokens as llama.cpp on the same file, and
 * teacher-forced logits within the quant
 * tests' f16 tolerance of llama.cpp's, under every kernel tier; each
 * sequence's logits are bit-identical alone and in a batch of all five.
 * Reference data: tests/data/<arch>/ (README.md there says how it was made). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/forward/forward.h"
#include "model/model_make.h"
#include "support/llama_ref.h"
#include "support/model_run.h"

/* ||ours - llama.cpp|| / ||llama.cpp|| per position: the bound
 * test_quant_model.c holds an f16 model to against its f32 original.
 * Both sides here are f32 with an f32 KV cache; measured ~1e-6. */
#define TOL_NORM_ERR 2e-3
#define SEED         7

/* A reference directory that is not an --arch: its --arch and --preset
 * (else the directory is the --arch and the preset tiny). */
static const struct {
    const char *dir, *arch, *preset;
} variants[] = {{"gemma4moe", "gemma4", "tiny-moe"},
                {"gemma4e4b", "gemma4", "E4B-thin"},
                {"qwen35thin", "qwen35", "0.8B-thin"},
                {"qwen35moethin", "qwen35moe", "0.8B-thin"},
                {"deepseek2thin", "deepseek2", "16B-A2.4B-thin"}};

static const char *arch_of(const char *dir, const char **preset) {
    *preset = "tiny";
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++)
        if (!strcmp(variants[i].dir, dir)) return *preset = variants[i].preset, variants[i].arch;
    return dir;
}

/* The file of reference directory `dir` (tests/data/<dir>), made and loaded. */
static llama_model *make_and_load_opts(const char *dir, char *path, size_t path_len,
                                       int no_repack) {
    const char *preset, *arch = arch_of(dir, &preset);
    snprintf(path, path_len, "/tmp/tps-arch-%s-XXXXXX", dir);
    test_model_make_arch(path, preset, arch, GGML_TYPE_F32, SEED);
    tps_err err = {0};
    llama_model *m;
    const llama_load_opts lo = {.no_repack = no_repack};
    cr_assert_eq(llama_model_load_opts(&m, path, &lo, &err), 0, "%s", err.msg);
    return m;
}

static llama_model *make_and_load(const char *arch, char *path, size_t path_len) {
    return make_and_load_opts(arch, path, path_len, 0);
}

/* llama.cpp's greedy ids and logits, teacher-forced, on one tier: every
 * argmax llama.cpp's, the logits within tol. */
static void check_arch_tier(const char *arch, kernel_tier tier, double tol) {
    llama_ref r;
    llama_ref_load(&r, arch);
    char path[64];
    /* the reference tier reads weights in the file's layout (gpt-oss's
     * MXFP4 experts are repacked otherwise) */
    llama_model *m = make_and_load_opts(arch, path, sizeof path, tier == KERNEL_TIER_REF);
    llama_ref_stats st = {0};
    const double worst = llama_ref_teacher_forced(&r, m, tier, arch, 1, &st);
    cr_log_info("%s, %s tier: worst normalised logit error vs llama.cpp %.2e (%zu of %zu "
                "positions within %.0e)",
                arch, kernel_tier_name(tier), worst, st.exact, st.positions, LLAMA_REF_EXACT);
    cr_expect_leq(worst, tol, "%s, %s tier: %g", arch, kernel_tier_name(tier), worst);
    llama_model_free(m);
    unlink(path);
    llama_ref_free(&r);
}

static void check_arch(const char *arch) {
    const kernel_tier tiers[] = {KERNEL_TIER_BEST, KERNEL_TIER_SCALAR, KERNEL_TIER_REF};
    for (size_t t = 0; t < sizeof tiers / sizeof tiers[0]; t++)
        check_arch_tier(arch, tiers[t], TOL_NORM_ERR);
}

/* A real shape's layers at width 256 on the best tier alone: the tiny
 * files hold every tier to the same maths, and these files take 10-40x
 * their time a tier. */
static void check_deep(const char *arch, double tol) {
    check_arch_tier(arch, KERNEL_TIER_BEST, tol);
}

Test(arch_reference, llama_matches_llama_cpp) {
    check_arch("llama");
}

Test(arch_reference, llama3_rope_freqs_and_tied_embeddings_match_llama_cpp) {
    check_arch("llama3");
}

Test(arch_reference, qwen2_matches_llama_cpp) {
    check_arch("qwen2");
}

Test(arch_reference, qwen3_matches_llama_cpp) {
    check_arch("qwen3");
}

/* sliding window 8 on alternate layers (prompts up to 50 positions, so
 * windows start inside and on block edges), soft-capping, GeGLU, post-norms */
Test(arch_reference, gemma2_matches_llama_cpp) {
    check_arch("gemma2");
}

/* local/global layers with two RoPE bases, linear RoPE scaling, Q/K norm */
Test(arch_reference, gemma3_matches_llama_cpp) {
    check_arch("gemma3");
}

/* fused attn_qkv and gate|up, LongRoPE long factors (context 512 > 256) and
 * attn_factor */
Test(arch_reference, phi3_matches_llama_cpp) {
    check_arch("phi3");
}

Test(arch_reference, mistral3_matches_llama_cpp) {
    check_arch("mistral3");
}

/* Mixtral's layout: llama with 8 experts, 2 a token, softmax router renormalised */
Test(arch_reference, mixtral_experts_match_llama_cpp) {
    check_arch("mixtral");
}

/* Qwen3 attention with 16 experts, 4 a token, untied */
Test(arch_reference, qwen3moe_matches_llama_cpp) {
    check_arch("qwen3moe");
}

/* attention sinks, Q/K/V/output biases, window 8 on alternate layers, YaRN,
 * MXFP4 experts with biases, softmax over the top 4 logits, clamped SwiGLU */
Test(arch_reference, gpt_oss_matches_llama_cpp) {
    check_arch("gpt-oss");
}

/* Qwen3.5: gated DeltaNet layers (conv and delta-rule state per sequence)
 * beside gated full attention, M-RoPE with a pair past the sections, an
 * MTP block loaded and not run. */
Test(arch_reference, qwen35_matches_llama_cpp) {
    check_arch("qwen35");
}

/* Qwen3.5's MoE: the hybrid stack with 16 experts, 4 a token, and a
 * shared expert scaled by sigmoid(ffn_gate_inp_shexp . x), untied. */
Test(arch_reference, qwen35moe_matches_llama_cpp) {
    check_arch("qwen35moe");
}

/* Qwen3.5-0.8B's stack at width 256 (0.8B-thin), dense and with experts:
 * 24 layers, every fourth full attention with heads of 256 (RoPE on 64 of
 * them, sections 11/11/10), 16 linear heads with states of 128 x 128: the
 * real heads, states and depth, within float rounding of llama.cpp. */
Test(arch_reference, qwen35_real_layers_match_llama_cpp) {
    check_deep("qwen35thin", TOL_NORM_ERR);
    check_deep("qwen35moethin", TOL_NORM_ERR);
}

/* GLM-4.5: Q/K/V biases, NeoX RoPE on half of each head, a
 * dense first layer, sigmoid routing with a selection bias, weights
 * renormalised and scaled by 2.5, an ungated shared expert, an MTP block. */
Test(arch_reference, glm4moe_matches_llama_cpp) {
    check_arch("glm4moe");
}

/* DeepSeek's multi-head latent attention (the cache holds one latent row a
 * position, Q absorbed into it per head), YaRN with DeepSeek's mscale in
 * the attention scale, a dense first layer, then experts routed as V3 does
 * (sigmoid, a selection bias, the best 2 of 4 groups, renormalised, scaled
 * by 2.5) plus ungated shared experts. */
Test(arch_reference, deepseek2_matches_llama_cpp) {
    check_arch("deepseek2");
}

/* DeepSeek-V2-Lite's stack at width 256 (16B-A2.4B-thin): 27 layers of
 * latent attention at the real sizes (a latent of 512 + 64 RoPE dims, 16
 * heads of 128 + 64 for Q/K and 128 for V, Q without a bottleneck), YaRN
 * x40, softmax routing 6 of 64, layer 0 dense. */
Test(arch_reference, deepseek2_real_layers_match_llama_cpp) {
    check_deep("deepseek2thin", TOL_NORM_ERR);
}

/* Gemma 4: sliding layers with heads of 16 (4 KV heads) beside global ones
 * of 32 (2 KV heads, V = K, partial RoPE through rope_freqs), the last two
 * layers reading layers 1 and 2's K/V, per-layer input embeddings, a layer
 * output scale, attention scale 1, final soft-cap. */
Test(arch_reference, gemma4_matches_llama_cpp) {
    check_arch("gemma4");
}

/* Gemma-4-E4B's stack at width 256 (E4B-thin): 42 layers, five sliding
 * (heads of 256) to one global (heads of 512 with V of their own), the
 * last 18 reading layers 22 and 23's K/V, per-layer inputs of 256. The
 * logits' bound is wider than the tiny files': ggml's GELU by F16 table
 * (tests/data/README.md) moves a last-bit difference to 1e-3 at a GeGLU
 * input, and 42 layers carry it to ~2e-3; every greedy id is still
 * llama.cpp's. */
Test(arch_reference, gemma4_e4b_stack_matches_llama_cpp) {
    check_deep("gemma4e4b", 5e-3);
}

/* Gemma 4's MoE (26B-A4B's layout, tiny-moe): 8 experts, 2 a token, beside
 * the dense FFN: the router on rms_norm(x) / sqrt(dim) * ffn_gate_inp.scale,
 * softmax, top 2 renormalised, fused ffn_gate_up_exps, GeGLU, each expert's
 * output times ffn_down_exps.scale; post_ffw_norm_1 on the dense half,
 * pre_ffw_norm_2 / post_ffw_norm_2 on the experts', post_ffw_norm on both. */
Test(arch_reference, gemma4_moe_matches_llama_cpp) {
    check_arch("gemma4moe");
}

/* The split buffers of split_gate_up, freed by the caller after the write. */
typedef struct split_bufs {
    float *v[64];
    size_t n;
} split_bufs;

/* A fused ffn_gate_up_exps (F32) written as ffn_gate_exps and ffn_up_exps
 * (each expert's first and last ff rows, into arg's split_bufs); every
 * other tensor left to be copied. */
static bool split_gate_up(gguf_writer *w, const gguf_tensor *t, char *name, void *arg) {
    split_bufs *bufs = arg;
    char *fused = strstr(name, "ffn_gate_up_exps");
    if (!fused) return false;
    cr_assert_eq(t->type, GGML_TYPE_F32);
    const uint64_t cols = t->ne[0], ff = t->ne[1] / 2, E = t->ne[2], half = cols * ff;
    const uint64_t ne[3] = {cols, ff, E};
    const float *src = t->data;
    for (int part = 0; part < 2; part++) { /* gate rows, then up rows, of each expert */
        cr_assert_lt(bufs->n, sizeof bufs->v / sizeof bufs->v[0]);
        float *dst = bufs->v[bufs->n++] = malloc(sizeof(float) * half * E);
        for (uint64_t e = 0; e < E; e++)
            memcpy(dst + e * half, src + (2 * e + part) * half, sizeof(float) * half);
        snprintf(fused, TEST_GGUF_NAME_CAP - (size_t)(fused - name), "%s",
                 part ? "ffn_up_exps.weight" : "ffn_gate_exps.weight");
        cr_assert_eq(gguf_writer_add_tensor(w, name, GGML_TYPE_F32, 3, ne, dst), 0);
    }
    return true;
}

/* A Gemma 4 MoE file with the experts' gate and up apart (llama.cpp loads
 * either form) gives the fused file's tokens and logits. */
Test(arch_reference, gemma4_moe_with_gate_and_up_apart_matches_llama_cpp) {
    char path[64], apart[] = "/tmp/tps-arch-apart-XXXXXX";
    llama_model *m = make_and_load("gemma4moe", path, sizeof path);
    split_bufs bufs = {.n = 0};
    gguf_writer *w = test_gguf_copy_each(m->file, split_gate_up, &bufs);
    close(mkstemp(apart));
    tps_err err = {0};
    cr_assert_eq(gguf_writer_write_file(w, apart, &err), 0, "%s", err.msg);
    gguf_writer_free(w);
    for (size_t i = 0; i < bufs.n; i++)
        free(bufs.v[i]);
    llama_model *m2;
    cr_assert_eq(llama_model_load(&m2, apart, &err), 0, "%s", err.msg);
    cr_assert_null(m2->w.layers[0].gate_up_exps.data);
    cr_assert_not_null(m2->w.layers[0].up_exps.data);
    cr_expect_eq(m2->w.bytes_per_token, m->w.bytes_per_token);
    llama_ref r;
    llama_ref_load(&r, "gemma4moe");
    const double worst = llama_ref_teacher_forced(&r, m2, KERNEL_TIER_BEST, "apart", 1, NULL);
    cr_expect_leq(worst, TOL_NORM_ERR, "%g", worst);
    llama_ref_free(&r);
    llama_model_free(m2);
    llama_model_free(m);
    unlink(apart);
    unlink(path);
}

/* The five prompts prefilled together in one batch give each prompt's last
 * logits bit-identical to its prefill alone. */
static void check_batch_invariance(const char *arch) {
    llama_ref r;
    llama_ref_load(&r, arch);
    char path[64];
    llama_model *m = make_and_load(arch, path, sizeof path);
    ref_rig g;
    ref_rig_open(&g, m, KERNEL_TIER_BEST);
    json_t *cases = json_object_get(r.j, "cases");
    const size_t nc = json_array_size(cases), nv = r.n_vocab;
    float *solo = malloc(sizeof(float) * nc * nv);
    kv_seq seqs[5] = {0};
    const kv_seq *all[5];
    fwd_row rows[128];
    size_t n = 0;
    for (size_t ci = 0; ci < nc; ci++) {
        int32_t prompt[64];
        size_t np =
            ref_ids_of(json_object_get(json_array_get(cases, ci), "prompt_ids"), prompt, 64);
        cr_assert_eq(kv_seq_init(&seqs[ci], 8), 0);
        cr_assert_eq(kv_seq_reserve(g.kv, &seqs[ci], (uint32_t)np), 0);
        all[ci] = &seqs[ci];
        fwd_row one[64];
        for (size_t i = 0; i < np; i++) {
            one[i] = (fwd_row){.token = prompt[i], .pos = (uint32_t)i, .want_logits = i + 1 == np};
            cr_assert_lt(n, 128u);
            rows[n] = one[i];
            rows[n++].seq = (uint32_t)ci;
        }
        const kv_seq *s1[] = {&seqs[ci]};
        fwd_batch b = {.n_rows = np, .rows = one, .seqs = s1};
        const float *logits;
        size_t nl;
        tps_err err = {0};
        cr_assert_eq(llama_forward(g.s, m, g.kv, &b, &logits, &nl, &err), 0, "%s", err.msg);
        memcpy(solo + ci * nv, logits, sizeof(float) * nv);
    }
    fwd_batch b = {.n_rows = n, .rows = rows, .seqs = all};
    const float *logits;
    size_t nl;
    tps_err err = {0};
    cr_assert_eq(llama_forward(g.s, m, g.kv, &b, &logits, &nl, &err), 0, "%s", err.msg);
    cr_assert_eq(nl, nc);
    for (size_t ci = 0; ci < nc; ci++)
        cr_expect_eq(memcmp(logits + ci * nv, solo + ci * nv, sizeof(float) * nv), 0,
                     "%s: prompt %zu differs in a batch", arch, ci);
    for (size_t ci = 0; ci < nc; ci++) {
        kv_seq_release(g.kv, &seqs[ci]);
        kv_seq_destroy(&seqs[ci]);
    }
    free(solo);
    ref_rig_close(&g);
    llama_model_free(m);
    unlink(path);
    llama_ref_free(&r);
}

Test(arch_reference, every_arch_is_batch_invariant) {
    const char *archs[] = {"llama",        "llama3",    "qwen2",     "qwen3",      "gemma2",
                           "gemma3",       "phi3",      "mistral3",  "mixtral",    "qwen3moe",
                           "gpt-oss",      "qwen35",    "deepseek2", "qwen35moe",  "glm4moe",
                           "gemma4",       "gemma4moe", "gemma4e4b", "qwen35thin", "qwen35moethin",
                           "deepseek2thin"};
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        check_batch_invariance(archs[i]);
}

/* A file whose architecture tps does not run, one missing a tensor the
 * architecture needs, and one with a tensor tps would not read: errors that
 * name the architecture, the tensor and where in the file to look. */
Test(arch_reference, unknown_arch_and_missing_tensor_are_named) {
    char path[64];
    llama_model *m = make_and_load("qwen3", path, sizeof path);
    gguf_file *f = m->file;
    /* the same file without blk.2.attn_k_norm.weight */
    gguf_writer *w = test_gguf_copy(f, "blk.2.attn_k_norm.weight");
    char cut[] = "/tmp/tps-arch-cut-XXXXXX";
    close(mkstemp(cut));
    tps_err err = {0};
    cr_assert_eq(gguf_writer_write_file(w, cut, &err), 0, "%s", err.msg);
    gguf_writer_set_str(w, "general.architecture", "mamba");
    /* an extra tensor tps would not read: refused by name, not ignored */
    gguf_writer *wx = test_gguf_copy(f, NULL);
    static float bias[64];
    const uint64_t ne_b[1] = {64};
    cr_assert_eq(gguf_writer_add_tensor(wx, "blk.0.attn_output.bias", GGML_TYPE_F32, 1, ne_b, bias),
                 0);
    char extra[] = "/tmp/tps-arch-extra-XXXXXX";
    close(mkstemp(extra));
    cr_assert_eq(gguf_writer_write_file(wx, extra, &err), 0, "%s", err.msg);
    gguf_writer_free(wx);
    char other[] = "/tmp/tps-arch-mamba-XXXXXX";
    close(mkstemp(other));
    cr_assert_eq(gguf_writer_write_file(w, other, &err), 0, "%s", err.msg);
    gguf_writer_free(w);
    llama_model_free(m);
    llama_model *bad = NULL;
    cr_expect_neq(llama_model_load(&bad, cut, &err), 0);
    cr_expect_null(bad);
    cr_expect(strstr(err.msg, "qwen3: tensor 'blk.2.attn_k_norm.weight' is missing") &&
                  strstr(err.msg, "byte offset"),
              "%s", err.msg);
    cr_expect_eq(llama_model_load(&bad, extra, &err), TPS_EUNSUP);
    cr_expect(strstr(err.msg, "qwen3: tensor 'blk.0.attn_output.bias'") &&
                  strstr(err.msg, "not used"),
              "%s", err.msg);
    unlink(extra);
    cr_expect_eq(llama_model_load(&bad, other, &err), TPS_EUNSUP);
    cr_expect(strstr(err.msg, "architecture 'mamba'") && strstr(err.msg, "byte offset") &&
                  strstr(err.msg, "qwen3"),
              "%s", err.msg);
    unlink(cut);
    unlink(other);
    unlink(path);
}
