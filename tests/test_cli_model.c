/* `tps model info` as a user runs it: the facts of stories260K, --json, and
 * clear errors for bad files and flags. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/test_support.h"

/* `tps model info OPTS 'PATH'`: its stdout, malloc'ed, after asserting it
 * exited 0. */
static char *info_of(const char *path, const char *opts) {
    char *out;
    char args[1024];
    snprintf(args, sizeof args, "model info %s'%s'", opts, path);
    cr_assert_eq(run_tps(args, false, &out), 0, "%s", out);
    return out;
}

/* `tps model info --json PATH` parsed (asserting it is JSON); the caller
 * decrefs it. */
static json_t *info_json_of(const char *path) {
    char *out = info_of(path, "--json ");
    json_error_t jerr;
    json_t *o = json_loads(out, 0, &jerr);
    cr_assert_not_null(o, "not JSON (%s): %s", jerr.text, out);
    free(out);
    return o;
}

/* `tps model info OPTS` of the shared stories260K (skips without it). */
static char *info_of_stories(const char *opts) {
    REQUIRE_SHARED("models/stories260K.gguf");
    char *path = shared_path("models/stories260K.gguf");
    char *out = info_of(path, opts);
    free(path);
    return out;
}

/* Expects out to hold text. */
static void expect_says(const char *out, const char *text) {
    cr_expect(strstr(out, text) != NULL, "%s\n(want %s)", out, text);
}

/* `tps model make` of ARCH's PRESET (f32) into path, asserting it exits 0. */
static void make_arch(const char *path, const char *arch, const char *preset) {
    char args[512];
    snprintf(args, sizeof args, "model make --arch %s --preset %s --type f32 -o %s", arch, preset,
             path);
    assert_tps_ok(args);
}

/* make_arch into a fresh temporary file; its path, malloc'ed (the caller
 * gives it to drop_made). */
static char *made_arch(const char *arch, const char *preset) {
    char *path = test_temp_file("");
    make_arch(path, arch, preset);
    return path;
}

/* Unlinks and frees a made file's path (made_arch, test_temp_file). */
static void drop_made(char *path) {
    unlink(path);
    free(path);
}

/* `tps model info` of a fresh ARCH PRESET file (made_arch, removed here);
 * its stdout, malloc'ed. */
static char *info_of_arch(const char *arch, const char *preset) {
    char *path = made_arch(arch, preset);
    char *out = info_of(path, "");
    drop_made(path);
    return out;
}

/* Expects out (model info's text) to say a token adds n KV bytes in an F16
 * cache. */
static void expect_kv_bytes(const char *out, long n) {
    char want[128];
    snprintf(want, sizeof want, "KV bytes per token     %ld (F16 cache)", n);
    expect_says(out, want);
}

/* `tps model make FLAGS -o path` exits with status, printing says: a
 * refusal. */
static void expect_make_refused(const char *flags, const char *path, int status, const char *says) {
    char args[512];
    snprintf(args, sizeof args, "model make %s -o %s", flags, path);
    expect_tps(args, status, says);
}

Test(cli_model, info_prints_the_facts_of_stories260K) {
    char *out = info_of_stories("");
    expect_says(out, "architecture           llama");
    expect_says(out, "layers                 5");
    expect_says(out, "kv heads               4");
    expect_says(out, "vocabulary size        512");
    free(out);
}

Test(cli_model, info_json_is_one_object_with_the_same_facts) {
    REQUIRE_SHARED("models/stories260K.gguf");
    char *path = shared_path("models/stories260K.gguf");
    json_t *o = info_json_of(path);
    free(path);
    cr_expect_str_eq(json_string_value(json_object_get(o, "architecture")), "llama");
    cr_expect_eq(json_integer_value(json_object_get(o, "layers")), 5);
    cr_expect_eq(json_integer_value(json_object_get(o, "embedding_length")), 64);
    cr_expect_eq(json_integer_value(json_object_get(o, "heads")), 8);
    cr_expect_eq(json_integer_value(json_object_get(o, "kv_heads")), 4);
    cr_expect_eq(json_integer_value(json_object_get(o, "vocab_size")), 512);
    cr_expect_eq(json_integer_value(json_object_get(o, "bos_token_id")), 1);
    cr_expect_eq(json_integer_value(json_object_get(o, "eos_token_id")), 2);
    cr_expect(json_is_false(json_object_get(o, "chat_template")));
    /* what tps serve would render chat with */
    cr_expect_str_eq(json_string_value(json_object_get(o, "chat_template_served")),
                     "ChatML (the model file has no chat template)");
    json_t *f32 = json_object_get(json_object_get(o, "tensor_types"), "f32");
    cr_expect_eq(json_integer_value(json_object_get(f32, "tensors")), 48);
    json_decref(o);
}

Test(cli_model, info_on_a_non_gguf_file_fails_with_a_message) {
    char args[1024];
    snprintf(args, sizeof args, "model info '%s/CMakeLists.txt'", TPS_SOURCE_DIR);
    expect_tps(args, 1, "not a GGUF file");
}

Test(cli_model, unknown_flag_is_rejected) {
    expect_tps("model info --bogus x.gguf", 2, "unknown option '--bogus'");
    expect_tps("frobnicate", 2, NULL);
}

/* `model make --arch` then `model info`: the architecture's specifics are
 * printed (what tps will compute for it). */
Test(cli_model, make_arch_then_info_prints_the_architecture_specifics) {
    char *path = made_arch("gemma2", "tiny");
    char *out = info_of(path, "");
    expect_says(out, "architecture           gemma2");
    expect_says(out, "sliding window         8 positions, 3 of 5 layers");
    expect_says(out, "soft-capping           attention 1, final 2");
    expect_says(out, "tied embeddings        yes");
    expect_says(out, "rope order             neox");
    free(out);
    expect_make_refused("--arch mamba --preset tiny --type f32", path, 2,
                        "unknown architecture 'mamba'");
    drop_made(path);
}

/* A hybrid file: the KV bytes a token adds count only the full-attention
 * layers (2 of tiny's 5: K and V, 4 heads of 32, F16), the linear layers'
 * state is (taps - 1) conv inputs of (2 x 2 + 4) x 16 channels and 4
 * matrices of 16 x 16 per layer, and the MTP block is named as not run. */
Test(cli_model, hybrid_info_counts_kv_only_for_attention_layers_and_the_state_apart) {
    char *out = info_of_arch("qwen35", "tiny");
    expect_says(out, "KV bytes per token     1024 (F16 cache)");
    const long state = 3 * (3 * (2 * 2 + 4) * 16 + 4 * 16 * 16) * 4;
    char want[128];
    snprintf(want, sizeof want, "3 of 5 layers, a state of %.2f MiB", (double)state / 1048576.0);
    expect_says(out, want);
    expect_says(out, "not run (drafting");
    free(out);
}

/* A latent attention file: a token adds one latent row a layer (tiny's
 * kv_lora_rank 64 + RoPE 32, F16, 5 layers), not the K and V of its 8
 * decompressed heads (64 + 32 each, 8x as many bytes). */
Test(cli_model, deepseek2_info_counts_the_latent_as_its_kv_bytes) {
    char *out = info_of_arch("deepseek2", "tiny");
    expect_kv_bytes(out, 5 * (64 + 32) * 2);
    char want[160];
    snprintf(want, sizeof want,
             "latent rank 64 (Q rank 64): the cache holds the latent, not the %d",
             5 * 8 * (64 + 32) * 2);
    expect_says(out, want);
    expect_says(out, "architecture           deepseek2");
    free(out);
}

/* --layers N: the preset's shape cut to N layers (GLM's leading dense layer
 * and its MTP block kept), its KV bytes those of N layers; a count the
 * architecture cannot lay out, or none, is refused with the reason. */
Test(cli_model, make_layers_cuts_a_preset_to_that_many_layers) {
    char *path = test_temp_file("");
    char args[512];
    snprintf(args, sizeof args,
             "model make --arch glm4moe --preset tiny --layers 3 --type f32 -o %s", path);
    assert_tps_ok(args);
    char *out = info_of(path, "");
    expect_kv_bytes(out, 3 * 2 * 4 * 16 * 2);
    expect_says(out, "leading dense layers   1");
    expect_says(out, "not run (drafting");
    free(out);
    json_t *o = info_json_of(path);
    cr_expect_eq(json_integer_value(json_object_get(o, "layers")), 3);
    cr_expect_eq(json_integer_value(json_object_get(o, "embedding_length")), 64);
    json_decref(o);
    expect_make_refused("--arch gemma4 --preset tiny --layers 2 --type f32", path, 1,
                        "shared layers");
    /* a preset without the architecture's shape: the refusal lists the
     * presets that have one, thin variants included */
    expect_make_refused("--arch qwen35 --preset 1B --type f32", path, 1,
                        "linear-attention shape: tiny, 0.8B, 0.8B-thin, 9B, 35B-A3B");
    expect_make_refused("--preset tiny --layers 0 --type f32", path, 2, "--layers");
    drop_made(path);
}

/* A Gemma 4 file: K and V of the layers that store them, each of its own
 * head shape (tiny's sliding layers 0 and 1: 4 heads of 16; global layer
 * 2: 2 heads of 32; F16), and none for the last two, which read layers 1
 * and 2's. */
Test(cli_model, gemma4_info_counts_no_kv_for_the_shared_layers) {
    char *path = made_arch("gemma4", "tiny");
    json_t *o = info_json_of(path);
    const long per_token = 2 * 2 * (2 * 4 * 16 + 1 * 2 * 32); /* F16 x (K, V) x layers' heads */
    cr_expect_eq(json_integer_value(json_object_get(o, "kv_bytes_per_token")), per_token);
    cr_expect_eq(json_integer_value(json_object_get(o, "kv_shared_layers")), 2);
    cr_expect_str_eq(json_string_value(json_object_get(o, "architecture")), "gemma4");
    cr_expect_eq(json_integer_value(json_object_get(o, "head_dim_swa")), 16);
    json_decref(o);
    char *out = info_of(path, "");
    expect_says(out, "sliding layers' heads  4 kv heads of 16");
    expect_says(out, "shared KV layers       the last 2 read earlier");
    free(out);
    drop_made(path);
}

/* The MoE files of 2026: GLM-4.5's dense first layer, ungated shared
 * expert and MTP block (K and V of tiny's 5 layers, 4 heads of 16, F16:
 * the MTP block adds none), and Qwen3.5 MoE's gated shared expert. */
Test(cli_model, moe_info_names_the_shared_expert_and_the_dense_lead) {
    char *path = made_arch("glm4moe", "tiny");
    char *out = info_of(path, "");
    expect_kv_bytes(out, 5 * 2 * 4 * 16 * 2);
    expect_says(out, "shared expert          1 a layer, of ffn 192, run by every token\n");
    expect_says(out, "leading dense layers   1");
    expect_says(out, "q/k/v biases           yes");
    expect_says(out, "not run (drafting");
    cr_expect(strstr(out, "linear attention") == NULL, "%s", out);
    free(out);
    make_arch(path, "qwen35moe", "tiny");
    out = info_of(path, "");
    expect_says(out, "shared expert          1 a layer, of ffn 192, run by every token, "
                     "scaled by its sigmoid gate");
    expect_says(out, "3 of 5 layers");
    free(out);
    drop_made(path);
}

/* Gemma 4's MoE (tiny-moe, f32): 8 experts of 32, 2 a token, beside the
 * dense FFN of 192; the active parameters are all but 6 of 8 experts a
 * layer (their fused gate|up, down and output scale), the dense FFN and
 * router counted whole. */
Test(cli_model, gemma4_moe_info_counts_the_dense_ffn_and_k_experts_active) {
    char *path = made_arch("gemma4", "tiny-moe");
    json_t *o = info_json_of(path);
    const long E = 8, k = 2, ff = 32, dim = 64, layers = 5;
    const long expert = 2 * ff * dim + dim * ff + 1; /* gate|up, down, its scale */
    const long all = (long)json_integer_value(json_object_get(o, "parameters"));
    cr_expect_eq(json_integer_value(json_object_get(o, "experts")), E);
    cr_expect_eq(json_integer_value(json_object_get(o, "experts_used")), k);
    cr_expect_eq(json_integer_value(json_object_get(o, "expert_feed_forward_length")), ff);
    cr_expect_eq(json_integer_value(json_object_get(o, "dense_ffn_beside_experts")), 192);
    cr_expect_eq(json_integer_value(json_object_get(o, "parameters_active")),
                 all - layers * (E - k) * expert);
    json_decref(o);
    char *out = info_of(path, "");
    expect_says(out, "experts                8 a layer, 2 a token, of ffn 32");
    expect_says(out, "dense FFN              of ffn 192 beside the experts");
    free(out);
    drop_made(path);
}
