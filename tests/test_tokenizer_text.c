/* Tokenizer tests of text in and out: decode restores text, the streaming
 * detokenizer never emits half a character, bad input neither crashes nor
 * loses bytes, the API's flags, capacities, special ids and threads, and
 * load errors say what is wrong. Files come from TPS_SHARED_DIR; tests skip
 * when it is absent. Ids against llama.cpp's are tests/test_tokenizer.c. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "model/tokenizer.h"
#include "model/tokenizer_stream.h"
#include "support/tok_check.h"

/* ---- helpers ----------------------------------------------------------- */

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
    int32_t *ids = tok_encode(t, s, strlen(s), 0, &n);
    char *back = tok_decode(t, ids, n, decode_flags, &len);
    cr_expect_str_eq(back, s);
    free(back);
    free(ids);
}

Test(tokenizer, spm_decode_of_encode_restores_valid_utf8) {
    tokenizer *t = tok_load(SPM_VOCAB);
    for (size_t i = 0; i < sizeof roundtrip_texts / sizeof *roundtrip_texts; i++) {
        const char *s = roundtrip_texts[i];
        /* the dummy-prefix space is stripped back from the first piece */
        expect_round_trip(t, s, 0);
        /* with BOS: llama.cpp strips nothing once it has removed the BOS */
        size_t n, len;
        int32_t *ids = tok_encode(t, s, strlen(s), TOK_ENCODE_ADD_SPECIAL, &n);
        cr_assert(n >= 1 && ids[0] == tokenizer_bos(t));
        char *back = tok_decode(t, ids, n, TOK_DECODE_REMOVE_SPECIAL, &len);
        if (*s) cr_expect(back[0] == ' ' && strcmp(back + 1, s) == 0, "\"%s\" -> \"%s\"", s, back);
        free(back);
        free(ids);
    }
    tokenizer_free(t);
}

Test(tokenizer, gpt2_decode_of_encode_restores_valid_utf8) {
    tokenizer *t = tok_load(GPT2_VOCAB);
    for (size_t i = 0; i < sizeof roundtrip_texts / sizeof *roundtrip_texts; i++)
        expect_round_trip(t, roundtrip_texts[i], TOK_DECODE_RAW_SPACES);
    tokenizer_free(t);
}

Test(tokenizer, gpt2_decode_cleans_spaces_like_llama_cpp) {
    tokenizer *t = tok_load(GPT2_VOCAB);
    const char *s = "Hello , world ! It 's here ' ok ' .";
    size_t n, len;
    int32_t *ids = tok_encode(t, s, strlen(s), 0, &n);
    char *back = tok_decode(t, ids, n, 0, &len);
    /* " ' " loses both spaces; " '." keeps its space (llama.cpp's passes) */
    cr_expect_str_eq(back, "Hello, world! It's here'ok '.");
    free(back);
    free(ids);
    tokenizer_free(t);
}

Test(tokenizer, pieces_render_control_tokens_only_when_asked) {
    tokenizer *t = tok_load(SPM_VOCAB);
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
    char *s = tok_decode(t, ids, 3, TOK_DECODE_RENDER_SPECIAL, &len);
    cr_expect_str_eq(s, "<s> Hello</s>");
    free(s);
    s = tok_decode(t, ids, 3, 0, &len);
    cr_expect_str_eq(s, " Hello");
    free(s);
    tokenizer_free(t);
}

Test(tokenizer, decode_rejects_out_of_range_ids) {
    tokenizer *t = tok_load(SPM_VOCAB);
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
    tokenizer *t = tok_load(SPM_VOCAB);
    const char *s = "🦙 llama 😀";
    size_t n, chunks;
    int32_t *ids = tok_encode(t, s, strlen(s), 0, &n);
    /* ▁ then the llama as 4 byte tokens: <0xF0><0x9F><0xA6><0x99> */
    cr_assert_geq(n, 5);
    cr_expect_eq(tokenizer_token_type(t, ids[1]), TOKEN_TYPE_BYTE);
    char *out = stream_all(t, ids, n, &chunks);
    cr_expect_str_eq(out, " 🦙 llama 😀");
    cr_expect_lt(chunks, n, "bytes of one character must come out together");
    free(out);
    free(ids);
    tokenizer_free(t);

    t = tok_load(GPT2_VOCAB);
    ids = tok_encode(t, s, strlen(s), 0, &n);
    out = stream_all(t, ids, n, &chunks);
    cr_expect_str_eq(out, s);
    free(out);
    free(ids);
    tokenizer_free(t);
}

Test(tokenizer, stream_holds_then_flushes_an_unfinished_character) {
    tokenizer *t = tok_load(SPM_VOCAB);
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
    tokenizer *spm = tok_load(SPM_VOCAB), *bpe = tok_load(GPT2_VOCAB);
    for (size_t i = 0; i < sizeof invalid_inputs / sizeof *invalid_inputs; i++) {
        const char *s = invalid_inputs[i];
        size_t n, len;
        int32_t *ids = tok_encode(spm, s, strlen(s), TOK_ENCODE_PARSE_SPECIAL, &n);
        cr_expect_gt(n, 0);
        char *back = tok_decode(spm, ids, n, 0, &len);
        cr_expect(len == strlen(s) && memcmp(back, s, len) == 0, "SPM case %zu", i);
        free(back);
        free(ids);
        ids = tok_encode(bpe, s, strlen(s), TOK_ENCODE_PARSE_SPECIAL, &n);
        back = tok_decode(bpe, ids, n, TOK_DECODE_RAW_SPACES, &len);
        cr_expect(len == strlen(s) && memcmp(back, s, len) == 0, "BPE case %zu", i);
        free(back);
        free(ids);
    }
    /* embedded NUL bytes are text too */
    size_t n, len;
    int32_t *ids = tok_encode(bpe, "a\0b", 3, 0, &n);
    char *back = tok_decode(bpe, ids, n, TOK_DECODE_RAW_SPACES, &len);
    cr_expect(len == 3 && memcmp(back, "a\0b", 3) == 0);
    free(back);
    free(ids);
    tokenizer_free(spm);
    tokenizer_free(bpe);
}

/* ---- API behaviour ----------------------------------------------------- */

Test(tokenizer, special_token_text_is_plain_text_without_parse_special) {
    tokenizer *t = tok_load(SPM_VOCAB);
    size_t n;
    int32_t *ids = tok_encode(t, "<s>x</s>", 8, 0, &n);
    for (size_t i = 0; i < n; i++)
        cr_expect(!tokenizer_is_control(t, ids[i]), "id %d", ids[i]);
    free(ids);
    ids = tok_encode(t, "<s>x</s>", 8, TOK_ENCODE_PARSE_SPECIAL, &n);
    cr_assert_geq(n, 3);
    cr_expect_eq(ids[0], tokenizer_bos(t));
    cr_expect_eq(ids[n - 1], tokenizer_eos(t));
    free(ids);
    tokenizer_free(t);
}

Test(tokenizer, encode_reports_needed_capacity_when_buffer_is_small) {
    tokenizer *t = tok_load(SPM_VOCAB);
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
    tokenizer *t = tok_load(SPM_VOCAB);
    cr_expect_eq(tokenizer_bos(t), 1);
    cr_expect_eq(tokenizer_eos(t), 2);
    cr_expect_eq(tokenizer_unk(t), 0);
    cr_expect(tokenizer_adds_bos(t));
    cr_expect(!tokenizer_adds_eos(t));
    cr_expect(tokenizer_is_eog(t, 2));
    cr_expect(!tokenizer_is_eog(t, 1));
    cr_expect(!tokenizer_is_eog(t, TOKEN_NONE));
    tokenizer_free(t);
    t = tok_load(GPT2_VOCAB);
    cr_expect_eq(tokenizer_type(t), TOKENIZER_BPE);
    cr_expect_eq(tokenizer_n_vocab(t), 50257);
    cr_expect(!tokenizer_adds_bos(t));
    cr_expect(tokenizer_is_eog(t, 50256));
    cr_expect_eq(tokenizer_find(t, "<|endoftext|>", 13), 50256);
    tokenizer_free(t);
    t = tok_load(STORIES);
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
        char *text = tok_read_file(tok_shared_path(rel), &len);
        tokenizer *t = tok_load(v ? GPT2_VOCAB : SPM_VOCAB);
        size_t n;
        int32_t *want = tok_encode(t, text, len, TOK_ENCODE_PARSE_SPECIAL, &n);
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
    int32_t *ids = tok_encode(t, "a b", 3, TOK_ENCODE_ADD_SPECIAL, &n);
    /* ▁a ▁ b ; no byte tokens, so nothing unknown here */
    int32_t want[] = {1, 3, 6, 4};
    cr_expect(tok_same_ids("tiny", "a b", ids, n, want, 4));
    free(ids);
    /* a character the vocab cannot spell and no <0xNN> tokens: <unk> per byte */
    ids = tok_encode(t, "é", 2, 0, &n);
    int32_t want2[] = {6, 0, 0};
    cr_expect(tok_same_ids("tiny", "é", ids, n, want2, 3));
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
    int32_t *ids =
        tok_encode(t, s, strlen(s), TOK_ENCODE_ADD_SPECIAL | TOK_ENCODE_PARSE_SPECIAL, &n);
    /* BOS | Hello | " world" | " " | 123 | 456 | " I" (no merges: bytes) | 'M | <|eot_id|> */
    int32_t want[] = {261, 256, 257, ' ', 258, 259, ' ', 'I', 260, 262};
    cr_expect(tok_same_ids("llama-bpe", s, ids, n, want, sizeof want / sizeof *want));
    cr_expect(tokenizer_is_eog(t, 262));
    free(ids);
    tokenizer_free(t);

    /* the same vocab with GPT-2's regex: " 123456" is one piece, "'M" is not a contraction */
    cr_assert_eq(load_mem(byte_level_vocab("gpt-2"), &t, &err), 0, "%s", err.msg);
    cr_expect(!tokenizer_adds_bos(t));
    ids = tok_encode(t, "world 123 I'M", 13, 0, &n);
    int32_t want2[] = {'w', 'o', 'r', 'l', 'd', 263, ' ', 'I', '\'', 'M'};
    cr_expect(tok_same_ids("gpt-2", "world 123 I'M", ids, n, want2, sizeof want2 / sizeof *want2));
    free(ids);
    tokenizer_free(t);
}
