/* `tps generate` as a user runs it: greedy output on stories260K equals
 * llama.cpp's reference, the figures name their windows, and bad input gets
 * a clear error. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/machine.h"
#include "support/machine_plant.h"
#include "support/test_support.h"

static char *model_arg(void) {
    static char buf[512];
    snprintf(buf, sizeof buf, "'%s/models/stories260K.gguf'", TPS_SHARED_DIR);
    return buf;
}

/* `tps generate -m stories260K OPTS` (stderr merged when merge), asserted
 * to exit 0: its output, malloc'ed. */
static char *generate_ok(const char *opts, bool merge) {
    char args[2048], *out;
    snprintf(args, sizeof args, "generate -m %s %s", model_arg(), opts);
    cr_assert_eq(run_tps(args, merge, &out), 0, "%s", out);
    return out;
}

Test(cli_generate, json_output_reproduces_the_llama_cpp_reference) {
    REQUIRE_SHARED("models/stories260K.gguf");
    REQUIRE_SHARED("reference/stories260K_greedy.json");
    char *rp = shared_path("reference/stories260K_greedy.json");
    json_t *ref = json_load_file(rp, 0, NULL);
    free(rp);
    cr_assert_not_null(ref);
    json_t *cs = json_array_get(json_object_get(ref, "cases"), 0);
    char opts[1024];
    snprintf(opts, sizeof opts, "-p '%s' -n 64 --json",
             json_string_value(json_object_get(cs, "prompt")));
    char *out = generate_ok(opts, false);
    json_t *o = json_loads(out, 0, NULL);
    cr_assert_not_null(o, "not JSON: %s", out);
    cr_expect(json_equal(json_object_get(o, "prompt_tokens"), json_object_get(cs, "prompt_ids")));
    cr_expect(json_equal(json_object_get(o, "tokens"), json_object_get(cs, "generated_ids")));
    cr_expect_str_eq(json_string_value(json_object_get(o, "text")),
                     json_string_value(json_object_get(cs, "generated_text")));
    cr_expect_gt(json_real_value(json_object_get(o, "prefill_tps")), 0);
    cr_expect_gt(json_real_value(json_object_get(o, "decode_tps")), 0);
    json_decref(o);
    json_decref(ref);
    free(out);
}

Test(cli_generate, text_goes_to_stdout_and_figures_name_their_windows) {
    REQUIRE_SHARED("models/stories260K.gguf");
    char *out = generate_ok("-p 'Once upon a time' -n 16", true);
    cr_expect(strstr(out, ", there was a little girl") != NULL, "%s", out);
    cr_expect(strstr(out, "prefill:") && strstr(out, "window: first forward step"), "%s", out);
    cr_expect(strstr(out, "decode:") && strstr(out, "window: first generated token"), "%s", out);
    cr_expect(strstr(out, "tokens/s") != NULL, "%s", out);
    free(out);
}

/* The decode window's GB/s counts every weight once a token and the K and
 * V of each token's context: the step that yields token k reads the
 * prompt and the k - 1 tokens before it. Counted here from the model's
 * shape, for both KV element sizes stories260K allows. */
Test(cli_generate, decode_bandwidth_counts_the_weights_and_each_token_s_context) {
    REQUIRE_SHARED("models/stories260K.gguf");
    const model_shape sh = model_shape_shared("models/stories260K.gguf");
    cr_assert_gt(sh.n_layers, 0);
    const struct {
        const char *type;
        double elem;
    } kinds[] = {{"f16", 2}, {"f32", 4}};
    for (size_t i = 0; i < 2; i++) {
        char args[2048], *out;
        snprintf(args, sizeof args,
                 "generate -m %s -p 'Once upon a time' -n 20 --ignore-eos --kv-type %s --json",
                 model_arg(), kinds[i].type);
        cr_assert_eq(run_tps(args, false, &out), 0, "%s", out);
        json_t *o = json_loads(out, 0, NULL);
        cr_assert_not_null(o, "not JSON: %s", out);
        const double n_prompt = (double)json_integer_value(json_object_get(o, "n_prompt"));
        const json_int_t n = json_integer_value(json_object_get(o, "n_generated"));
        cr_assert_eq(n, 20);
        double positions = 0;
        for (json_int_t k = 2; k <= n; k++)
            positions += n_prompt + (double)k - 1;
        const double kv = 2 * sh.n_layers * sh.kv_dim * kinds[i].elem * positions;
        const double got = json_real_value(json_object_get(o, "decode_kv_bytes"));
        cr_expect(fabs(got - kv) < 0.5, "%s: decode_kv_bytes %.1f, expected %.1f", kinds[i].type,
                  got, kv);
        const double weights =
            (double)json_integer_value(json_object_get(o, "weight_bytes_per_token"));
        const double bytes = json_real_value(json_object_get(o, "decode_gbps")) * 1e9 *
                             json_real_value(json_object_get(o, "decode_ms")) / 1e3;
        const double want = (double)(n - 1) * weights + kv;
        cr_expect(fabs(bytes - want) <= 1e-6 * want,
                  "%s: %.1f bytes over the window, expected %.1f", kinds[i].type, bytes, want);
        json_decref(o);
        free(out);
    }
}

/* The prompt's multiply-adds per second, counted from the model's tensors:
 * every prompt row through the layer matrices, the last row's LM head, and
 * row p's attention over p + 1 positions (a QK dot and an AV sum per query
 * head and layer). */
Test(cli_generate, prefill_multiply_adds_count_every_row_and_one_lm_head) {
    REQUIRE_SHARED("models/stories260K.gguf");
    const model_shape sh = model_shape_shared("models/stories260K.gguf");
    cr_assert_gt(sh.body, 0);
    char args[2048], *out;
    snprintf(args, sizeof args,
             "generate -m %s -p 'Once upon a time, there was a cat' -n 2 --ignore-eos --json",
             model_arg());
    cr_assert_eq(run_tps(args, false, &out), 0, "%s", out);
    json_t *o = json_loads(out, 0, NULL);
    cr_assert_not_null(o, "not JSON: %s", out);
    const double p = (double)json_integer_value(json_object_get(o, "n_prompt"));
    const double want = p * sh.body + sh.head + sh.per_pos * p * (p + 1) / 2;
    const double got = json_real_value(json_object_get(o, "prefill_gmacs")) * 1e9 *
                       json_real_value(json_object_get(o, "prefill_ms")) / 1e3;
    cr_expect(fabs(got - want) <= 1e-6 * want, "%.0f multiply-adds over the prefill, expected %.0f",
              got, want);
    json_decref(o);
    free(out);
}

/* Writes limits for one thread into a fresh cache directory. */
static void cache_limits(char *dir, double read_gbs, double int8_gops) {
    machine_limits m = {
        .threads = 1, .read_gbs = read_gbs, .int8_gops = int8_gops, .fp32_gflops = int8_gops};
    machine_plant(dir, &m);
}

/* Past the machine's limits is impossible: the cached limits were measured
 * on a busy machine, and generate says so and how to measure again. */
Test(cli_generate, figures_past_the_cached_limits_say_to_measure_again) {
    REQUIRE_SHARED("models/stories260K.gguf");
    char args[2048], *out;
    snprintf(args, sizeof args, "generate -m %s -p 'Once upon a time' -n 8 --threads 1",
             model_arg());
    char low[] = "/tmp/tps-gen-cache-XXXXXX";
    cache_limits(low, 0.01, 0.01);
    cr_assert_eq(run_tps(args, true, &out), 0, "%s", out);
    cr_expect(strstr(out, "note: above the limit, which no computation can be") != NULL, "%s", out);
    cr_expect(strstr(out, "tps machine --redo") != NULL, "%s", out);
    free(out);
    machine_unplant(low, 1);
    char high[] = "/tmp/tps-gen-cache-XXXXXX";
    cache_limits(high, 1e6, 1e9);
    cr_assert_eq(run_tps(args, true, &out), 0, "%s", out);
    cr_expect(strstr(out, "note:") == NULL, "%s", out);
    cr_expect(strstr(out, "% of the roofline") != NULL, "%s", out);
    free(out);
    machine_unplant(high, 1);
}

Test(cli_generate, empty_prompt_is_bos_only) {
    REQUIRE_SHARED("models/stories260K.gguf");
    char *out = generate_ok("-p '' -n 3 --json", false);
    json_t *o = json_loads(out, 0, NULL);
    cr_assert_not_null(o);
    json_t *pt = json_object_get(o, "prompt_tokens");
    cr_expect_eq(json_array_size(pt), 1);
    cr_expect_eq(json_integer_value(json_array_get(pt, 0)), 1);
    cr_expect_eq(json_array_size(json_object_get(o, "tokens")), 3);
    json_decref(o);
    free(out);
}

Test(cli_generate, prompt_longer_than_the_context_names_both_numbers) {
    REQUIRE_SHARED("models/stories260K.gguf");
    size_t n = 16 + 6 * 700;
    char *args = malloc(n + 1024), *out;
    int k = snprintf(args, 1024, "generate -m %s -n 4 -p '", model_arg());
    for (int i = 0; i < 700; i++)
        k += sprintf(args + k, "hello ");
    strcpy(args + k, "'");
    cr_expect_eq(run_tps(args, true, &out), 1);
    cr_expect(strstr(out, "context is 512") != NULL && strstr(out, "prompt has") != NULL, "%s",
              out);
    free(out);
    free(args);
}

Test(cli_generate, invalid_utf8_zero_tokens_and_unknown_flags_are_refused) {
    REQUIRE_SHARED("models/stories260K.gguf");
    char args[2048];
    snprintf(args, sizeof args, "generate -m %s -p \"$(printf 'ab\\377c')\"", model_arg());
    expect_tps(args, 2, "not valid UTF-8 (byte 2)");
    snprintf(args, sizeof args, "generate -m %s -p x -n 0", model_arg());
    expect_tps(args, 2, "-n takes a number");
    snprintf(args, sizeof args, "generate -m %s -p x --frobnicate", model_arg());
    expect_tps(args, 2, "unknown option '--frobnicate'");
    expect_tps("generate -p x", 2, "-m MODEL");
    expect_tps("generate -m /nonexistent.gguf -p x", 1, "/nonexistent.gguf");
}

/* Repacked weights (the default) and the file's own layout compute the same
 * bits, so greedy tokens are identical either way. */
Test(cli_generate, no_repack_gives_the_same_tokens_as_repacked_weights) {
    char path[] = "/tmp/tps-repack-XXXXXX";
    close(mkstemp(path));
    char args[2048], *a, *b;
    snprintf(args, sizeof args, "model make --preset tiny --type q8_0 --seed 3 -o %s", path);
    cr_assert_eq(run_tps(args, true, &a), 0, "%s", a);
    free(a);
    snprintf(args, sizeof args, "generate -m %s -p 'The cat' -n 24 --ignore-eos --json", path);
    cr_assert_eq(run_tps(args, false, &a), 0, "%s", a);
    snprintf(args, sizeof args, "generate -m %s -p 'The cat' -n 24 --ignore-eos --json --no-repack",
             path);
    cr_assert_eq(run_tps(args, false, &b), 0, "%s", b);
    json_t *ja = json_loads(a, 0, NULL), *jb = json_loads(b, 0, NULL);
    cr_assert(ja && jb);
    cr_expect_eq(json_array_size(json_object_get(ja, "tokens")), 24);
    cr_expect(json_equal(json_object_get(ja, "tokens"), json_object_get(jb, "tokens")),
              "repacked: %s\nplain: %s", a, b);
    json_decref(ja);
    json_decref(jb);
    free(a);
    free(b);
    unlink(path);
}
