/* `tps generate --depth` and the report's context-depth part: the bytes a
 * decoded token reads, counted from each model's tensors (K and V only in
 * the layers that have attention tensors; a hybrid's state from its linear
 * layers' shape), each depth's prompt carried into the next by the prefix
 * cache, and a reading whose numbers are the table's. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/report/report_depth.h"
#include "model/gguf.h"
#include "model/llama_model.h"
#include "support/test_support.h"

/* `tps model make --arch ARCH --preset tiny` into a temporary file (path
 * malloc'ed). */
static char *make_tiny(const char *arch) {
    char *path = strdup("/tmp/tps-depth-XXXXXX");
    close(mkstemp(path));
    char args[512];
    snprintf(args, sizeof args, "model make --arch %s --preset tiny --type q8_0 --seed 3 -o '%s'",
             arch, path);
    assert_tps_ok(args);
    return path;
}

/* What the shape says a decoded token reads, counted from the file's
 * tensors and keys, not through the engine's functions. */
typedef struct shape_bytes {
    unsigned layers, attn_layers;
    double kv_per_pos; /* K and V of one position, F16, over the layers with attn_k */
    double state;      /* every layer without attn_k: conv inputs and S x S per value head, F32 */
} shape_bytes;

static shape_bytes shape_of(const char *path) {
    llama_model *m = NULL;
    tps_err err = {0};
    cr_assert_eq(llama_model_load(&m, path, &err), 0, "%s", err.msg);
    const llama_config *c = &m->cfg;
    shape_bytes s = {.layers = c->n_layers};
    for (unsigned l = 0; l < c->n_layers; l++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%u.attn_k.weight", l);
        const gguf_tensor *k = gguf_find_tensor(m->file, name);
        if (k) {
            s.attn_layers++;
            s.kv_per_pos += 2.0 * (double)k->ne[1] * 2; /* K and V rows of F16 */
        } else {
            const double S = c->ssm_state, ch = (2.0 * c->ssm_k_heads + c->ssm_v_heads) * S;
            s.state += 4.0 * ((c->ssm_conv - 1) * ch + c->ssm_v_heads * S * S);
        }
    }
    llama_model_free(m);
    return s;
}

static json_t *run_depth(const char *path, const char *depths, int n, int rounds) {
    char args[1024], *out;
    snprintf(args, sizeof args, "generate -m '%s' --depth %s -n %d --rounds %d --threads 1 --json",
             path, depths, n, rounds);
    cr_assert_eq(run_tps(args, false, &out), 0, "%s", out);
    json_t *o = json_loads(out, 0, NULL);
    cr_assert_not_null(o, "not JSON: %s", out);
    free(out);
    return o;
}

static double num(const json_t *o, const char *k) {
    return json_number_value(json_object_get(o, k));
}

/* The step that yields token k (2..n) reads the K and V of depth + k - 1
 * positions: the mean over the decode window, times one position's. */
static double mean_kv(double per_pos, double depth, int n) {
    double pos = 0;
    for (int k = 2; k <= n; k++)
        pos += depth + k - 1;
    return per_pos * pos / (n - 1);
}

static void check_model(const char *arch, bool hybrid) {
    char *path = make_tiny(arch);
    const shape_bytes sh = shape_of(path);
    cr_assert_gt(sh.attn_layers, 0);
    if (hybrid)
        cr_assert(sh.attn_layers < sh.layers && sh.state > 0, "%s: %u of %u layers attend", arch,
                  sh.attn_layers, sh.layers);
    else
        cr_assert(sh.attn_layers == sh.layers && sh.state == 0);
    const int n = 6;
    json_t *o = run_depth(path, "64,256", n, 1);
    cr_expect_str_eq(json_string_value(json_object_get(o, "format")), "tps.generate.depth");
    cr_expect_eq(num(o, "layers"), sh.layers);
    cr_expect_eq(num(o, "recurrent_layers"), sh.layers - sh.attn_layers, "%s", arch);
    cr_expect_eq(num(o, "kv_bytes_per_position"), sh.kv_per_pos,
                 "%s: K and V of one position %.0f, the attention layers' tensors say %.0f", arch,
                 num(o, "kv_bytes_per_position"), sh.kv_per_pos);
    cr_expect_eq(num(o, "state_bytes_per_token"), sh.state, "%s: state %.0f, the shape says %.0f",
                 arch, num(o, "state_bytes_per_token"), sh.state);
    const double w = num(o, "weight_bytes_per_token");
    cr_expect_gt(w, 0);
    const json_t *pts = json_object_get(o, "points");
    cr_assert_eq(json_array_size(pts), 2);
    const double depths[2] = {64, 256};
    for (size_t i = 0; i < 2; i++) {
        const json_t *p = json_array_get(pts, i);
        cr_expect_eq(num(p, "depth"), depths[i]);
        cr_expect_eq(num(p, "n_generated"), n);
        cr_expect_gt(num(p, "decode_tps"), 0);
        const double kv = mean_kv(sh.kv_per_pos, depths[i], n);
        cr_expect(fabs(num(p, "kv_bytes_per_token") - kv) <= 1e-9 * kv,
                  "%s at %.0f: KV a token %.1f, expected %.1f", arch, depths[i],
                  num(p, "kv_bytes_per_token"), kv);
        const double all = w + kv + sh.state;
        cr_expect(fabs(num(p, "bytes_per_token") - all) <= 1e-9 * all,
                  "%s at %.0f: bytes a token %.1f, expected weights + KV + state %.1f", arch,
                  depths[i], num(p, "bytes_per_token"), all);
        const double gbps = all * (n - 1) / (num(p, "decode_ms") / 1e3) / 1e9;
        cr_expect(fabs(num(p, "decode_gbps") - gbps) <= 1e-6 * gbps);
    }
    /* the second prompt extends the first: its first 64 positions (a whole
     * checkpoint interval for the hybrid) come from the prefix cache */
    cr_expect_eq(num(json_array_get(pts, 0), "cached_tokens"), 0);
    cr_expect_eq(num(json_array_get(pts, 1), "cached_tokens"), 64, "%s", arch);
    json_decref(o);
    /* three passes: each depth's decode tok/s is the median of its three */
    o = run_depth(path, "64,256", n, 3);
    pts = json_object_get(o, "points");
    for (size_t i = 0; i < 2; i++) {
        const json_t *r = json_object_get(json_array_get(pts, i), "decode_tps_rounds");
        cr_assert_eq(json_array_size(r), 3);
        double v[3];
        for (size_t k = 0; k < 3; k++)
            v[k] = json_number_value(json_array_get(r, k));
        const double mid = v[0] < v[1] ? (v[1] < v[2] ? v[1] : fmax(v[0], v[2]))
                                       : (v[0] < v[2] ? v[0] : fmax(v[1], v[2]));
        cr_expect_eq(num(json_array_get(pts, i), "decode_tps"), mid, "%g of %g %g %g",
                     num(json_array_get(pts, i), "decode_tps"), v[0], v[1], v[2]);
    }
    json_decref(o);
    unlink(path);
    free(path);
}

Test(generate_depth, full_attention_reads_every_layer_s_kv_growing_with_depth, .timeout = 120) {
    check_model("qwen3", false);
}

Test(generate_depth, a_hybrid_reads_kv_of_its_attention_layers_only_and_a_fixed_state,
     .timeout = 120) {
    check_model("qwen35", true);
}

Test(generate_depth, depths_must_increase_and_fit_the_context) {
    expect_tps("generate -m /nonexistent --depth 8k,1k", 2, "increasing depths");
    expect_tps("generate -m /nonexistent --depth 0", 2, "increasing depths");
    char *path = make_tiny("qwen3");
    char args[512];
    snprintf(args, sizeof args, "generate -m '%s' --depth 1024 -n 4", path);
    expect_tps(args, 1, "the model's context is 512");
    unlink(path);
    free(path);
}

/* ---- the reading ------------------------------------------------------------------------- */

/* A two-depth document: decode tok/s at 1024 and 8192. */
static const char *doc(char *buf, size_t cap, unsigned rec, double tps1, double tps2, double st) {
    snprintf(buf, cap,
             "{\"format\":\"tps.generate.depth\",\"version\":1,\"arch\":\"x\",\"layers\":24,"
             "\"recurrent_layers\":%u,\"threads\":2,\"weight_bytes_per_token\":5e8,"
             "\"state_bytes_per_token\":%g,\"kv_bytes_per_position\":1000,\"points\":["
             "{\"depth\":1024,\"decode_tps\":%g,\"kv_bytes_per_token\":1e6,"
             "\"bytes_per_token\":5.01e8,\"prefill_ms\":1,\"cached_tokens\":0,\"decode_gbps\":1},"
             "{\"depth\":8192,\"decode_tps\":%g,\"kv_bytes_per_token\":8e6,"
             "\"bytes_per_token\":5.08e8,\"prefill_ms\":1,\"cached_tokens\":1024,"
             "\"decode_gbps\":1}]}",
             rec, st, tps1, tps2);
    return buf;
}

Test(generate_depth, the_reading_compares_the_share_each_model_keeps) {
    depth_set *d = calloc(1, sizeof *d);
    char a[1024], h[1024];
    tps_err e = {0};
    cr_assert_eq(depth_add_json(d, "att", doc(a, sizeof a, 0, 30, 15, 0), "a.json", &e), 0, "%s",
                 e.msg);
    cr_assert_eq(depth_add_json(d, "hyb", doc(h, sizeof h, 18, 25, 23.5, 1.89e7), "h.json", &e), 0,
                 "%s", e.msg);
    depth_finish(d);
    cr_expect(strstr(d->reading,
                     "From depth 1024 to 8192 the full-attention att kept 0.50x of "
                     "its decode speed at 8192 (30.00 \xe2\x86\x92 15.00 tok/s)") != NULL,
              "%s", d->reading);
    cr_expect(strstr(d->reading, "the hybrid hyb (18 of 24 layers linear attention) kept 0.94x") !=
                  NULL,
              "%s", d->reading);
    /* 501.0 -> 508.0 MB: a bandwidth-bound decode would keep 501.0 / 508.0 */
    cr_expect(strstr(d->reading, "went 501.0 \xe2\x86\x92 508.0 MB (bytes alone would keep 0.99x; "
                                 "a fixed 18.90 MB state") != NULL,
              "%s", d->reading);
    cr_expect(strstr(d->reading, "By depth 8192 the hybrid had lost 6% of its depth-1024 speed, "
                                 "the attention model 50% (0.12x its loss), and decoded 1.57x as "
                                 "fast as the attention model there (23.50 against 15.00 tok/s): "
                                 "a linear layer reads a state that does not grow") != NULL,
              "%s", d->reading);
    cr_expect_float_eq(depth_share(&d->s[1], 1), 23.5 / 25, 1e-12);
    /* a document of another kind is refused, naming the file */
    cr_expect_neq(depth_add_json(d, "x", "{\"format\":\"tps.sweep.result\"}", "s.json", &e), 0);
    cr_expect(strstr(e.msg, "s.json: not a tps.generate.depth document") != NULL, "%s", e.msg);
    free(d);
}
