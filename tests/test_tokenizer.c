/* Tokenizer tests against llama.cpp: ids equal llama.cpp's on its reference
 * data (the JSON cases, the .inp/.out vocab test files of every vocabulary,
 * the special tokens as llama.cpp loads them, the stories260K prompts and
 * llama-server's text of its generated ids). Files come from
 * TPS_SHARED_DIR; tests skip when it is absent. The Gemma 3, gpt-oss and
 * Phi-3 vocabularies are made from their sources
 * (tests/data/vocab/README.md). Decode, streaming, bad input, the API and
 * load errors are tests/test_tokenizer_text.c. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/tokenizer.h"
#include "model/tokenizer_stream.h"
#include "support/tok_check.h"

/* ---- helpers ----------------------------------------------------------- */

static int32_t *json_ids(json_t *arr, size_t *n) {
    *n = json_array_size(arr);
    int32_t *v = malloc((*n + 1) * sizeof *v);
    for (size_t i = 0; i < *n; i++)
        v[i] = (int32_t)json_integer_value(json_array_get(arr, i));
    return v;
}

/* ---- llama.cpp reference cases ----------------------------------------- */

static void check_json_cases(const char *json_rel, const char *vocab_rel) {
    const char *path = tok_shared_path(json_rel);
    tokenizer *t = tok_load(vocab_rel);
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
            tok_encode(t, text, len, TOK_ENCODE_ADD_SPECIAL | TOK_ENCODE_PARSE_SPECIAL, &n_got);
        bool ok = tok_same_ids("ids", text, got, n_got, want, n_want);
        free(want);
        free(got);
        want = json_ids(json_object_get(c, "ids_no_bos"), &n_want);
        got = tok_encode(t, text, len, TOK_ENCODE_PARSE_SPECIAL, &n_got);
        ok = tok_same_ids("ids_no_bos", text, got, n_got, want, n_want) && ok;
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
    char *inp = tok_read_file(inp_path ? inp_path : tok_shared_path(rel), &n_inp);
    snprintf(rel, sizeof rel, "%s.out", vocab_rel);
    char *out = tok_read_file(out_path ? out_path : tok_shared_path(rel), &n_out);
    tokenizer *t = tok_load(vocab_rel);
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
        int32_t *got = tok_encode(t, ip, (size_t)(iend - ip), flags, &n_got);
        matched += tok_same_ids(vocab_rel, ip, got, n_got, want, n_want);
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
    tokenizer *t = tok_load(GPTOSS_VOCAB);
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
    tokenizer *t = tok_load(vocab_rel);
    size_t n;
    int32_t *ids = tok_encode(t, "Hello world", 11, TOK_ENCODE_ADD_SPECIAL, &n);
    cr_expect(tok_same_ids(name, "Hello world", ids, n, hello, n_hello));
    free(ids);
    ids = tok_encode(t, eog, strlen(eog), TOK_ENCODE_PARSE_SPECIAL, &n);
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
    const char *path = tok_shared_path("reference/stories260K_greedy.json");
    tokenizer *t = tok_load(STORIES);
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
        int32_t *got = tok_encode(t, prompt, strlen(prompt),
                                  TOK_ENCODE_ADD_SPECIAL | TOK_ENCODE_PARSE_SPECIAL, &n_got);
        cr_expect(tok_same_ids("prompt_ids", prompt, got, n_got, want, n_want), "prompt \"%s\"",
                  prompt);
        free(want);
        free(got);
    }
    json_decref(root);
    tokenizer_free(t);
}

Test(tokenizer, stories260K_generated_ids_detokenize_to_llama_server_text) {
    const char *path = tok_shared_path("reference/stories260K_greedy.json");
    tokenizer *t = tok_load(STORIES);
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
        char *s = tok_decode(t, ids, n, TOK_DECODE_RAW_SPACES, &len);
        cr_expect_str_eq(s, want, "case %zu decoded", i);
        free(s);
        free(ids);
    }
    detok_stream_free(ds);
    json_decref(root);
    tokenizer_free(t);
}
