/* Tests for constrain/constraint: the token mask against brute force over the
 * whole vocabulary (a finite language enumerated by hand; character-class
 * languages checked piece by piece with a plain byte loop, UTF-8 prefixes
 * included), random constrained walks whose output an independent parser
 * (jansson) must accept, and the end-of-generation rules. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "constrain/constraint.h"
#include "model/gguf.h"
#include "model/tokenizer.h"
#include "constrain/json_schema.h"

#define STORIES "models/stories260K.gguf"
#define SPM32K  "models/vocab/ggml-vocab-llama-spm.gguf"
#define QWEN3   "models/vocab/ggml-vocab-qwen3.gguf"

static tokenizer *load(const char *rel) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", TPS_SHARED_DIR, rel);
    if (access(path, R_OK) != 0) cr_skip_test("../shared not found: %s", path);
    gguf_file *f;
    tps_err err = {{0}};
    cr_assert_eq(gguf_open(&f, path, &err), 0, "%s", err.msg);
    tokenizer *t;
    int rc = tokenizer_load(&t, f, &err);
    gguf_close(f);
    cr_assert_eq(rc, 0, "%s", err.msg);
    return t;
}

static constraint *make(const char *gbnf, const vocab_trie *vt, const int32_t *ends, size_t n) {
    constraint *c = NULL;
    tps_err err = {{0}};
    cr_assert_eq(constraint_create(&c, gbnf, strlen(gbnf), vt, ends, n, &err), 0, "%s\n%s", err.msg,
                 gbnf);
    return c;
}

static bool bit(const uint8_t *m, int32_t id) {
    return m[id >> 3] >> (id & 7) & 1;
}

/* ---------------------------------------------------------------------------
 * A finite language, every prefix reachable, against brute force
 * ------------------------------------------------------------------------- */

static const char *const WORDS[] = {"ab", "ac", "abc", "once", "on", "\xc3\xa9t\xc3\xa9", "{}"};
#define N_WORDS (sizeof WORDS / sizeof WORDS[0])
static const char *FINITE = "root ::= \"ab\" | \"ac\" | \"abc\" | \"once\" | \"on\" | "
                            "\"\\u00e9t\\u00e9\" | \"{}\"\n";

/* Whether out + piece is a prefix of some word. */
static bool brute_allows(const char *out, size_t n_out, const char *piece, size_t len) {
    for (size_t w = 0; w < N_WORDS; w++) {
        size_t wl = strlen(WORDS[w]);
        if (n_out + len <= wl && !memcmp(WORDS[w], out, n_out) &&
            !memcmp(WORDS[w] + n_out, piece, len))
            return true;
    }
    return false;
}

static bool brute_whole(const char *out, size_t n_out) {
    for (size_t w = 0; w < N_WORDS; w++)
        if (strlen(WORDS[w]) == n_out && !memcmp(WORDS[w], out, n_out)) return true;
    return false;
}

/* Checks the mask at output `out` (reached through c), then recurses into
 * every allowed token with a fresh constraint replayed to that point. */
static void check_tree(const tokenizer *tok, const vocab_trie *vt, const int32_t *path,
                       size_t n_path, const char *out, size_t n_out, int32_t eos, int *nodes) {
    constraint *c = make(FINITE, vt, &eos, 1);
    for (size_t i = 0; i < n_path; i++)
        cr_assert_eq(constraint_accept(c, path[i]), 0);
    size_t n_allowed = 0;
    const uint8_t *m = constraint_mask(c, &n_allowed);
    uint32_t nv = tokenizer_n_vocab(tok);
    size_t count = 0;
    int32_t next[600];
    size_t n_next = 0;
    for (uint32_t id = 0; id < nv; id++) {
        size_t len = 0;
        const char *p = tokenizer_piece(tok, (int32_t)id, false, &len);
        bool want =
            (int32_t)id == eos ? brute_whole(out, n_out) : len && brute_allows(out, n_out, p, len);
        cr_assert_eq(bit(m, (int32_t)id), want, "token %u ('%.*s') after '%.*s': mask %d, want %d",
                     id, (int)len, p, (int)n_out, out, bit(m, (int32_t)id), want);
        count += want;
        if (want && (int32_t)id != eos && n_next < 600) next[n_next++] = (int32_t)id;
    }
    cr_assert_eq(count, n_allowed);
    cr_assert_eq(constraint_complete(c), brute_whole(out, n_out));
    constraint_free(c);
    (*nodes)++;
    int32_t path2[64];
    if (n_path) memcpy(path2, path, n_path * sizeof *path);
    for (size_t k = 0; k < n_next; k++) {
        size_t len = 0;
        const char *p = tokenizer_piece(tok, next[k], false, &len);
        char out2[64];
        memcpy(out2, out, n_out);
        memcpy(out2 + n_out, p, len);
        path2[n_path] = next[k];
        check_tree(tok, vt, path2, n_path + 1, out2, n_out + len, eos, nodes);
    }
}

Test(constraint, finite_language_matches_brute_force_at_every_prefix) {
    tokenizer *tok = load(STORIES);
    vocab_trie *vt = NULL;
    tps_err err = {{0}};
    cr_assert_eq(vocab_trie_build(&vt, tok, tokenizer_n_vocab(tok), &err), 0, "%s", err.msg);
    int nodes = 0;
    check_tree(tok, vt, NULL, 0, "", 0, tokenizer_eos(tok), &nodes);
    cr_assert_gt(nodes, 10, "only %d prefixes visited", nodes);
    vocab_trie_free(vt);
    tokenizer_free(tok);
}

Test(constraint, finished_only_when_nothing_can_follow) {
    tokenizer *tok = load(STORIES);
    vocab_trie *vt = NULL;
    tps_err err = {{0}};
    cr_assert_eq(vocab_trie_build(&vt, tok, tokenizer_n_vocab(tok), &err), 0, "%s", err.msg);
    int32_t eos = tokenizer_eos(tok);
    constraint *c = make("root ::= \"a\" \"b\"?\n", vt, &eos, 1);
    cr_assert_not(constraint_complete(c));
    int32_t a = TOKEN_NONE, b = TOKEN_NONE;
    for (int32_t id = 0; id < (int32_t)tokenizer_n_vocab(tok); id++) {
        size_t len;
        const char *p = tokenizer_piece(tok, id, false, &len);
        if (len == 1 && p[0] == 'a' && a < 0) a = id;
        if (len == 1 && p[0] == 'b' && b < 0) b = id;
    }
    cr_assert(a >= 0 && b >= 0);
    cr_assert_eq(constraint_accept(c, b), TPS_EINVAL, "'b' first is outside the language");
    cr_assert_eq(constraint_accept(c, a), 0);
    cr_assert(constraint_complete(c));
    cr_assert_not(constraint_finished(c), "'b' may still follow");
    size_t n;
    const uint8_t *m = constraint_mask(c, &n);
    cr_assert(bit(m, eos) && bit(m, b));
    cr_assert_eq(constraint_accept(c, b), 0);
    cr_assert(constraint_finished(c));
    m = constraint_mask(c, &n);
    cr_assert_eq(n, 1, "only the end id is left; got %zu", n);
    cr_assert(bit(m, eos));
    constraint_free(c);
    vocab_trie_free(vt);
    tokenizer_free(tok);
}

/* ---------------------------------------------------------------------------
 * Character-class languages over big vocabularies, piece by piece
 * ------------------------------------------------------------------------- */

/* Whether p[0..n) is UTF-8 whose characters all pass cp_ok, the last
 * possibly cut short (then some completion of it must pass). */
static bool utf8_prefix_ok(const unsigned char *p, size_t n, bool (*cp_ok)(uint32_t)) {
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        size_t len = c < 0x80                 ? 1
                     : c >= 0xC2 && c <= 0xDF ? 2
                     : c >= 0xE0 && c <= 0xEF ? 3
                     : c >= 0xF0 && c <= 0xF4 ? 4
                                              : 0;
        if (!len) return false;
        uint32_t v = len == 1 ? c : c & (0x7Fu >> len);
        size_t k = 1;
        for (; k < len && i + k < n; k++) {
            if ((p[i + k] & 0xC0) != 0x80) return false;
            v = v << 6 | (p[i + k] & 0x3F);
        }
        static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (k < len) { /* cut inside the last character: can it still become a good one? */
            uint32_t shift = 6u * (uint32_t)(len - k);
            uint32_t lo = v << shift, hi = lo | ((1u << shift) - 1);
            for (uint32_t x = lo < min[len] ? min[len] : lo; x <= hi && x <= 0x10FFFF; x++)
                if (!(x >= 0xD800 && x <= 0xDFFF) && cp_ok(x)) return true;
            return false;
        }
        if (v < min[len] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF) || !cp_ok(v)) return false;
        i += len;
    }
    return true;
}

static bool lower_ascii(uint32_t c) {
    return c >= 'a' && c <= 'z';
}
static bool not_quote(uint32_t c) {
    return c != '"' && c != '\\';
}

static void class_language(const char *rel) {
    tokenizer *tok = load(rel);
    vocab_trie *vt = NULL;
    tps_err err = {{0}};
    uint32_t nv = tokenizer_n_vocab(tok);
    cr_assert_eq(vocab_trie_build(&vt, tok, nv, &err), 0, "%s", err.msg);
    static const struct {
        const char *gbnf;
        bool (*ok)(uint32_t);
    } langs[] = {{"root ::= [a-z]+\n", lower_ascii}, {"root ::= [^\"\\\\]*\n", not_quote}};
    for (size_t l = 0; l < 2; l++) {
        constraint *c = make(langs[l].gbnf, vt, NULL, 0);
        size_t n = 0, want_n = 0;
        const uint8_t *m = constraint_mask(c, &n);
        for (uint32_t id = 0; id < nv; id++) {
            size_t len;
            const char *p = tokenizer_piece(tok, (int32_t)id, false, &len);
            bool want = len && utf8_prefix_ok((const unsigned char *)p, len, langs[l].ok);
            cr_assert_eq(bit(m, (int32_t)id), want, "%s: token %u ('%.*s'): mask %d", rel, id,
                         (int)len, p, bit(m, (int32_t)id));
            want_n += want;
        }
        cr_assert_eq(n, want_n);
        constraint_free(c);
    }
    vocab_trie_free(vt);
    tokenizer_free(tok);
}

Test(constraint, class_languages_over_the_spm_32k_vocab) {
    class_language(SPM32K);
}

Test(constraint, class_languages_over_the_qwen3_150k_vocab) {
    class_language(QWEN3);
}

/* ---------------------------------------------------------------------------
 * Random walks: the output is in the language (jansson parses it)
 * ------------------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* Walks from the start picking allowed tokens at random (end ids only when
 * nothing else is left or by chance), appending their bytes to out. */
static size_t random_walk(const tokenizer *tok, constraint *c, uint64_t seed, int32_t eos,
                          char *out, size_t cap, int max_steps) {
    size_t n_out = 0;
    uint32_t nv = tokenizer_n_vocab(tok);
    for (int step = 0; step < max_steps && !constraint_finished(c); step++) {
        size_t n;
        const uint8_t *m = constraint_mask(c, &n);
        cr_assert_gt(n, 0, "dead end after '%.*s'", (int)n_out, out);
        if (constraint_complete(c) && rng_next(&seed) % 4 == 0) break; /* EOS */
        /* prefer short structural tokens so objects close in bounded steps */
        int32_t pick = -1;
        for (int tries = 0; tries < 64 && pick < 0; tries++) {
            int32_t id = (int32_t)(rng_next(&seed) % nv);
            if (bit(m, id) && id != eos) pick = id;
        }
        for (int32_t id = 0; pick < 0 && id < (int32_t)nv; id++)
            if (bit(m, id) && id != eos) pick = id;
        if (pick < 0) break; /* only the end id is left */
        cr_assert_eq(constraint_accept(c, pick), 0);
        size_t len;
        const char *p = tokenizer_piece(tok, pick, false, &len);
        cr_assert_lt(n_out + len, cap);
        memcpy(out + n_out, p, len);
        n_out += len;
    }
    out[n_out] = 0;
    return n_out;
}

Test(constraint, random_walks_on_a_json_schema_give_parseable_json) {
    tokenizer *tok = load(STORIES);
    vocab_trie *vt = NULL;
    tps_err err = {{0}};
    cr_assert_eq(vocab_trie_build(&vt, tok, tokenizer_n_vocab(tok), &err), 0, "%s", err.msg);
    json_t *schema = json_loads(
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":6},"
        "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},"
        "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\"]},\"maxItems\":3}},"
        "\"required\":[\"name\",\"age\"],\"additionalProperties\":false}",
        0, NULL);
    cr_assert_not_null(schema);
    sbuf gb;
    sbuf_init(&gb);
    cr_assert_eq(json_schema_to_gbnf(schema, &gb, &err), 0, "%s", err.msg);
    int32_t eos = tokenizer_eos(tok);
    int complete = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        constraint *c = make(gb.p, vt, &eos, 1);
        char out[8192];
        size_t n = random_walk(tok, c, seed, eos, out, sizeof out, 2000);
        if (constraint_complete(c)) {
            complete++;
            json_error_t je;
            json_t *v = json_loadb(out, n, 0, &je);
            cr_assert_not_null(v, "seed %llu: not JSON (%s): %s", (unsigned long long)seed, je.text,
                               out);
            cr_assert(json_is_string(json_object_get(v, "name")), "%s", out);
            json_int_t age = json_integer_value(json_object_get(v, "age"));
            cr_assert(json_is_integer(json_object_get(v, "age")) && age >= 0 && age <= 150, "%s",
                      out);
            json_decref(v);
        }
        constraint_free(c);
    }
    cr_assert_gt(complete, 20, "only %d of 40 walks completed", complete);
    sbuf_free(&gb);
    json_decref(schema);
    vocab_trie_free(vt);
    tokenizer_free(tok);
}
