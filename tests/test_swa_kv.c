/* Sliding-window layers keep only the KV they read.
 *
 * Gemma 2 and Gemma 3 (`tps model make --arch gemma2|gemma3 --preset
 * tiny`: window 8) run past the window with their local layers in a pool
 * of their own that lets blocks go as the window moves. Against
 * references: llama.cpp's greedy ids and logits (tests/data/<arch>), the
 * same pass over one plain pool that keeps every layer's KV (logits
 * bit-identical), and the engine without the prefix cache (tokens equal
 * with hits on shared prefixes). The pool's counters bound what the local
 * layers hold by the window. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/core/engine.h"
#include "engine/forward/forward.h"
#include "model/model_make.h"
#include "support/engine_env.h"
#include "support/llama_ref.h"
#include "support/model_run.h"
#include "support/test_data.h"

#define WINDOW 8 /* the tiny preset's */

static llama_model *make_model(const char *arch, char *path, size_t len) {
    snprintf(path, len, "/tmp/tps-swa-%s-XXXXXX", arch);
    /* seed 7: the model of tests/data/<arch>/reference.json */
    test_model_make_arch(path, "tiny", arch, GGML_TYPE_F32, 7);
    tps_err err = {0};
    llama_model *m;
    cr_assert_eq(llama_model_load(&m, path, &err), 0, "%s", err.msg);
    cr_assert_eq(m->cfg.n_swa, WINDOW);
    return m;
}

/* A pool for m: the local layers in a pool of their own (split) or every
 * layer in one. */
static kv_cache *make_pool(const llama_model *m, uint32_t block_tokens, bool split, bool cached,
                           uint32_t n_blocks, uint32_t n_local) {
    const llama_config *c = &m->cfg;
    uint8_t local[64] = {0};
    for (uint32_t l = 0; l < c->n_layers; l++)
        local[l] = (uint8_t)llama_config_is_swa(c, l);
    kv_cache_params p = test_kv_params(c, block_tokens, GGML_TYPE_F32, n_blocks);
    p.prefix_cache = cached;
    p.local_layers = split ? local : NULL;
    p.window = split ? c->n_swa : 0;
    p.n_local_blocks = n_local;
    kv_cache *kv = test_kv_create(&p);
    cr_assert_eq(kv->n_local_layers != 0, split);
    return kv;
}

static json_t *load_cases(const char *arch) {
    return test_json_load("%s/tests/data/%s/reference.json", TPS_SOURCE_DIR, arch);
}

static int argmax(const float *x, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int)best;
}

/* Each reference prompt prefilled, then llama.cpp's greedy ids decoded one
 * at a time, on the split pool (committing after each step, as the engine
 * does) and on one plain pool: argmax is llama.cpp's, the logits are
 * bit-identical, and after every step the sequence holds at most
 * ceil(window / B) + 1 local blocks while its global blocks grow. */
static void check_teacher_forced(const char *arch, uint32_t bt) {
    char path[64];
    llama_model *m = make_model(arch, path, sizeof path);
    const size_t nv = m->cfg.n_vocab;
    kv_cache *split = make_pool(m, bt, true, false, 64, 0),
             *plain = make_pool(m, bt, false, false, 64, 0);
    fwd_state *fs;
    tps_err err = {0};
    cr_assert_eq(fwd_state_create(&fs, m, 128, m->cfg.ctx_len, 1, &err), 0, "%s", err.msg);
    json_t *j = load_cases(arch), *cases = json_object_get(j, "cases");
    const uint32_t bound = (WINDOW + bt - 1) / bt + 1;
    float *want = malloc(sizeof(float) * nv);
    uint32_t longest = 0;
    for (size_t ci = 0; ci < json_array_size(cases); ci++) {
        json_t *cs = json_array_get(cases, ci);
        int32_t prompt[64], gen[32];
        size_t np = ref_ids_of(json_object_get(cs, "prompt_ids"), prompt, 64);
        size_t ng = ref_ids_of(json_object_get(cs, "greedy_ids"), gen, 32);
        int32_t toks[96];
        memcpy(toks, prompt, np * sizeof *toks);
        memcpy(toks + np, gen, ng * sizeof *toks);
        kv_seq a = {0}, b = {0};
        cr_assert_eq(kv_seq_init(&a, 64), 0);
        cr_assert_eq(kv_seq_init(&b, 64), 0);
        fwd_row rows[64];
        for (size_t i = 0; i < np; i++)
            rows[i] = (fwd_row){.token = prompt[i], .pos = (uint32_t)i, .want_logits = i + 1 == np};
        uint32_t n_rows = (uint32_t)np, done = 0;
        for (size_t k = 0; k < ng; k++) {
            const uint32_t end = done + n_rows;
            cr_assert_eq(kv_seq_reserve(split, &a, end), 0);
            cr_assert_eq(kv_seq_reserve(plain, &b, end), 0);
            const kv_seq *sa[] = {&a}, *sb[] = {&b};
            fwd_batch ba = {.n_rows = n_rows, .rows = rows, .seqs = sa};
            fwd_batch bb = {.n_rows = n_rows, .rows = rows, .seqs = sb};
            const float *logits;
            size_t nl;
            cr_assert_eq(llama_forward(fs, m, plain, &bb, &logits, &nl, &err), 0, "%s", err.msg);
            memcpy(want, logits, sizeof(float) * nv);
            cr_assert_eq(llama_forward(fs, m, split, &ba, &logits, &nl, &err), 0, "%s", err.msg);
            cr_assert_eq(memcmp(logits, want, sizeof(float) * nv), 0,
                         "%s, block %u, prompt %zu, token %zu: logits differ from one plain pool",
                         arch, bt, ci, k);
            cr_assert_eq(argmax(logits, nv), gen[k], "%s, prompt %zu, token %zu: llama.cpp's %d",
                         arch, ci, k, gen[k]);
            done = end;
            kv_seq_commit(split, &a, toks, done);
            kv_seq_commit(plain, &b, toks, done);
            cr_assert_leq(kv_cache_local_blocks_used(split), bound,
                          "%s, block %u: %u positions computed hold %u local blocks", arch, bt,
                          done, kv_cache_local_blocks_used(split));
            cr_assert_eq(kv_cache_blocks_used(split), (done + bt - 1) / bt);
            rows[0] = (fwd_row){.token = gen[k], .pos = done, .want_logits = 1};
            n_rows = 1;
        }
        if (done > longest) longest = done;
        kv_seq_release(split, &a);
        kv_seq_release(plain, &b);
        cr_assert_eq(kv_cache_local_blocks_used(split), 0);
        kv_seq_destroy(&a);
        kv_seq_destroy(&b);
    }
    cr_assert_gt(longest, bound * bt, "the runs crossed the window");
    free(want);
    json_decref(j);
    fwd_state_free(fs);
    kv_cache_free(split);
    kv_cache_free(plain);
    llama_model_free(m);
    unlink(path);
}

Test(swa_kv, gemma2_local_layers_let_go_of_kv_behind_the_window) {
    check_teacher_forced("gemma2", 4);
    check_teacher_forced("gemma2", 16);
    check_teacher_forced("gemma2", 3);
}

Test(swa_kv, gemma3_local_layers_let_go_of_kv_behind_the_window) {
    check_teacher_forced("gemma3", 4);
    check_teacher_forced("gemma3", 16);
}

/* A global block the prefix cache indexes keeps its local companion while
 * the local pool does not need it: a new sequence reuses the prefix up to
 * the last block whose window still has every companion. */
Test(swa_kv, prefix_reuse_stops_where_the_window_s_local_blocks_are_gone) {
    char path[64];
    llama_model *m = make_model("gemma2", path, sizeof path);
    /* B = 4, window 8: a hit of k blocks needs the companions of blocks
     * [(4k + 1 - 8) / 4, k), i.e. k-2 and k-1. 4 local blocks in all. */
    kv_cache *kv = make_pool(m, 4, true, true, 32, 4);
    cr_assert_eq(kv->n_lblocks, 4u);
    int32_t toks[64];
    for (int i = 0; i < 64; i++)
        toks[i] = 3 + i;
    kv_seq a = {0}, b = {0};
    cr_assert_eq(kv_seq_init(&a, 16), 0);
    cr_assert_eq(kv_seq_init(&b, 16), 0);
    /* a computes 40 positions in steps of 4 (no forward: only the blocks) */
    for (uint32_t n = 4; n <= 40; n += 4) {
        cr_assert_eq(kv_seq_reserve(kv, &a, n), 0, "the window's blocks are let go as it moves");
        kv_seq_commit(kv, &a, toks, n);
        cr_assert_leq(kv_cache_local_blocks_used(kv), 3u);
    }
    cr_assert_eq(a.n_chained, 10u);
    kv_seq_release(kv, &a);
    cr_assert_eq(kv_cache_local_blocks_used(kv), 0u);
    /* the pool's 4 local blocks are now the companions of blocks 6..9, the
     * last a held */
    cr_assert_eq(kv_seq_match_prefix(kv, &b, toks, 10), 10u, "the whole chain: blocks 8, 9 kept");
    cr_assert_eq(kv_cache_local_blocks_used(kv), 2u);
    kv_seq_release(kv, &b);
    /* a hit that would end at block 5 finds no companion for blocks 3, 4 */
    cr_assert_eq(kv_seq_match_prefix(kv, &b, toks, 5), 0u);
    cr_assert_eq(kv_cache_blocks_used(kv), 0u, "a hit given up holds nothing");
    /* another sequence needs the local pool: companions are evicted, LRU first */
    kv_seq c = {0};
    cr_assert_eq(kv_seq_init(&c, 16), 0);
    int32_t other[64];
    for (int i = 0; i < 64; i++)
        other[i] = 400 + i;
    cr_assert_eq(kv_seq_reserve(kv, &c, 16), 0);
    cr_assert_eq(kv_seq_match_prefix(kv, &b, toks, 10), 0u, "every companion was taken");
    kv_seq_commit(kv, &c, other, 16);
    kv_seq_release(kv, &c);
    kv_seq_destroy(&a);
    kv_seq_destroy(&b);
    kv_seq_destroy(&c);
    kv_cache_free(kv);
    llama_model_free(m);
    unlink(path);
}

/* ---- through the engine ------------------------------------------------- */

static uint64_t submit(engine *e, const int32_t *p, size_t n, uint32_t max_tokens, result *res) {
    engine_request rq = env_greedy_request(p, n, max_tokens, res);
    return env_submit(e, &rq);
}

/* The engine's greedy tokens equal llama.cpp's for the reference prompts;
 * then 12 requests sharing a 100-token prefix, run together on a cached
 * engine whose local pool is only what local_blocks_needed gives (8
 * sequences x 3 blocks + 4), equal each run alone without the cache, hit
 * the cache, preempt nobody (the local pool would run dry at once if
 * blocks were not let go: each sequence reaches 10+ blocks) and leave no
 * local block held. */
static void check_engine(const char *arch) {
    char path[64];
    llama_model *m = make_model(arch, path, sizeof path);
    env v = {.m = m};
    tps_err err = {0};
    cr_assert_eq(tokenizer_load(&v.tok, m->file, &err), 0, "%s", err.msg);
    json_t *j = load_cases(arch), *cases = json_object_get(j, "cases");
    engine *e = env_engine(&v, 8, 64, 4096, GGML_TYPE_F32, false);
    for (size_t ci = 0; ci < json_array_size(cases); ci++) {
        int32_t prompt[64], gen[32];
        json_t *cs = json_array_get(cases, ci);
        size_t np = ref_ids_of(json_object_get(cs, "prompt_ids"), prompt, 64);
        size_t ng = ref_ids_of(json_object_get(cs, "greedy_ids"), gen, 32);
        result r = {0};
        submit(e, prompt, np, (uint32_t)ng, &r);
        drain(e, 1);
        cr_assert_eq(r.n, ng);
        cr_assert_eq(memcmp(r.tokens, gen, ng * sizeof(int32_t)), 0,
                     "%s, prompt %zu: engine's greedy ids differ from llama.cpp's", arch, ci);
    }
    engine_destroy(e);
    json_decref(j);

    enum { N = 12 };
    static int32_t p[N][200];
    size_t np[N];
    for (int i = 0; i < N; i++) {
        uint64_t r = 77;
        np[i] = 100 + 7 * (size_t)i;
        for (size_t k = 0; k < np[i]; k++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            p[i][k] = k == 0 ? 2 : 3 + (int32_t)((r >> 33) % 500);
            if (k >= 100) p[i][k] = 3 + (int32_t)((k * 31 + (size_t)i * 17) % 500);
        }
    }
    result *alone = calloc(N, sizeof *alone), *got = calloc(N, sizeof *got);
    e = env_engine(&v, 1, 64, 4096, GGML_TYPE_F32, true);
    for (int i = 0; i < N; i++) {
        submit(e, p[i], np[i], 40, &alone[i]);
        drain(e, 1);
    }
    engine_destroy(e);
    e = env_engine(&v, 8, 64, 8192, GGML_TYPE_F32, false);
    engine_stats st;
    engine_get_stats(e, &st);
    cr_assert_gt(st.kv_local_blocks_total, 0u);
    cr_assert_lt(st.kv_local_blocks_total, 8u * 300 / 16, "less than 8 sequences' whole KV");
    submit(e, p[0], np[0], 40, &got[0]);
    drain(e, 1);
    for (int i = 1; i < N; i++)
        submit(e, p[i], np[i], 40, &got[i]);
    drain(e, N - 1);
    uint32_t cached = 0;
    for (int i = 0; i < N; i++) {
        cr_assert_eq(got[i].n, alone[i].n);
        cr_assert_eq(memcmp(got[i].tokens, alone[i].tokens, alone[i].n * sizeof(int32_t)), 0,
                     "%s, request %d: tokens differ from the request run alone uncached", arch, i);
        cached += got[i].tm.cached_tokens;
    }
    engine_get_stats(e, &st);
    /* Companions are kept only while the local pool, sized for the running
     * sequences, has room: the prefix's last window can be evicted before
     * the last requests are admitted (9 of the 11 hit here). */
    cr_expect_geq(cached, 6 * 96u, "%s: the shared prefix was reused (%u tokens)", arch, cached);
    cr_expect_eq(st.preemptions_total, 0, "%s: the local pool never ran dry", arch);
    cr_expect_eq(st.kv_local_blocks_used, 0u);
    cr_expect_eq(st.kv_blocks_used, 0u);
    engine_destroy(e);
    free(alone);
    free(got);
    tokenizer_free(v.tok);
    llama_model_free(m);
    unlink(path);
}

Test(swa_kv, gemma2_engine_matches_llama_cpp_and_reuses_prefixes_past_the_window, .timeout = 300) {
    check_engine("gemma2");
}

Test(swa_kv, gemma3_engine_matches_llama_cpp_and_reuses_prefixes_past_the_window, .timeout = 300) {
    check_engine("gemma3");
}
