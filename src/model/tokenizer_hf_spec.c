/* A tokenizer.json's normalizer, pre-tokenizer and decoder read into a
 * tok_bpe_spec (tokenizer_hf_internal.h): the pipeline kinds Llama 3,
 * Qwen3/3.5, Mistral, Gemma 3, DeepSeek V3, gpt-oss and Llama 2 use
 * (normalizers NFC, Prepend, Replace of a string, Sequence; pre-tokenizers
 * Split, ByteLevel, Metaspace, Digits, Sequence; decoders ByteLevel,
 * Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence). Any other kind is an error that
 * names it and says which are supported. Not here: the vocabulary and
 * merges (tokenizer_hf.c), running the pipeline (tokenizer_bpe.c). */
#include <stdio.h>
#include <string.h>

#include "model/tokenizer_hf_internal.h"

/* Hugging Face's ByteLevel pre-tokenizer regex (use_regex: true). */
#define RE_BYTE_LEVEL                                                                              \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

static const char *type_of(const json_t *j) {
    const char *s = json_string_value(json_object_get(j, "type"));
    return s ? s : "(no type)";
}

static bool is_type(const json_t *j, const char *type) {
    return !strcmp(type_of(j), type);
}

/* {"String": s} as a literal regex into buf, or {"Regex": r} borrowed. */
static const char *pattern_regex(const json_t *pat, char *buf, size_t cap) {
    const char *r = json_string_value(json_object_get(pat, "Regex"));
    if (r) return r;
    const char *s = json_string_value(json_object_get(pat, "String"));
    if (!s || strstr(s, "\\E") || strlen(s) + 5 > cap) return NULL;
    snprintf(buf, cap, "\\Q%s\\E", s);
    return buf;
}

static int add_regex(hf_spec *h, const char *re, int behavior, tps_err *err) {
    tok_bpe_spec *s = &h->spec;
    if (s->n_regex == TOK_MAX_REGEX)
        return tps_fail(err, TPS_EUNSUP, "tokenizer.json: more than %d pre-tokenizer splits",
                        TOK_MAX_REGEX);
    s->regex[s->n_regex] = re;
    s->behavior[s->n_regex++] = (uint8_t)behavior;
    return 0;
}

/* ---- normalizer --------------------------------------------------------- */

static int add_norm(hf_spec *h, int kind, const char *from, const char *to, tps_err *err) {
    tok_bpe_spec *s = &h->spec;
    if (s->n_norm == TOK_MAX_NORM)
        return tps_fail(err, TPS_EUNSUP, "tokenizer.json: more than %d normalizer steps",
                        TOK_MAX_NORM);
    tok_norm *n = &s->norm[s->n_norm++];
    n->kind = kind;
    if (strlen(from) >= sizeof n->from || strlen(to) >= sizeof n->to)
        return tps_fail(err, TPS_EUNSUP, "tokenizer.json: normalizer strings longer than %zu bytes",
                        sizeof n->from - 1);
    strcpy(n->from, from);
    strcpy(n->to, to);
    return 0;
}

/* A Sequence's steps, the array under key, each read by read in order; the
 * first error ends it. */
static int read_steps(hf_spec *h, const json_t *seq, const char *key,
                      int (*read)(hf_spec *, const json_t *, tps_err *), tps_err *err) {
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(seq, key), i, x) {
        int rc = read(h, x, err);
        if (rc) return rc;
    }
    return 0;
}

static int read_normalizer(hf_spec *h, const json_t *n, tps_err *err) {
    if (!n || json_is_null(n)) return 0;
    if (is_type(n, "Sequence")) return read_steps(h, n, "normalizers", read_normalizer, err);
    if (is_type(n, "NFC")) return add_norm(h, TOK_NORM_NFC, "", "", err);
    if (is_type(n, "Prepend")) {
        const char *p = json_string_value(json_object_get(n, "prepend"));
        if (p) h->prepend_space = !strcmp(p, "\xe2\x96\x81");
        return add_norm(h, TOK_NORM_PREPEND, "", p ? p : "", err);
    }
    if (is_type(n, "Replace")) {
        const char *from =
            json_string_value(json_object_get(json_object_get(n, "pattern"), "String"));
        const char *to = json_string_value(json_object_get(n, "content"));
        if (!from || !to)
            return tps_fail(err, TPS_EUNSUP,
                            "tokenizer.json: a Replace normalizer with a Regex pattern is not "
                            "supported (only a String pattern)");
        return add_norm(h, TOK_NORM_REPLACE, from, to, err);
    }
    return tps_fail(err, TPS_EUNSUP,
                    "tokenizer.json: normalizer '%s' is not supported (supported: NFC, Prepend, "
                    "Replace, Sequence of these)",
                    type_of(n));
}

/* ---- pre-tokenizer ------------------------------------------------------ */

static int split_behavior(const json_t *p, tps_err *err) {
    const char *b = json_string_value(json_object_get(p, "behavior"));
    static const char *const names[] = {"Isolated", "MergedWithPrevious", "MergedWithNext",
                                        "Removed"};
    if (json_is_true(json_object_get(p, "invert")))
        return tps_fail(err, TPS_EUNSUP, "tokenizer.json: a Split with invert: true");
    for (int i = 0; b && i < 4; i++)
        if (!strcmp(b, names[i])) return i;
    return tps_fail(err, TPS_EUNSUP,
                    "tokenizer.json: Split behavior '%s' is not supported (supported: Isolated, "
                    "MergedWithPrevious, MergedWithNext, Removed)",
                    b ? b : "(none)");
}

static int read_split(hf_spec *h, const json_t *p, tps_err *err) {
    int behavior = split_behavior(p, err);
    if (behavior < 0) return behavior;
    char *buf = h->literal[h->n_literal % TOK_MAX_REGEX];
    const char *re = pattern_regex(json_object_get(p, "pattern"), buf, sizeof h->literal[0]);
    if (!re) return tps_fail(err, TPS_EUNSUP, "tokenizer.json: a Split without a usable pattern");
    h->n_literal++;
    return add_regex(h, re, behavior, err);
}

/* The prepend_scheme of a Metaspace (older files: add_prefix_space). */
static const char *metaspace_scheme(const json_t *p) {
    const char *scheme = json_string_value(json_object_get(p, "prepend_scheme"));
    if (scheme) return scheme;
    json_t *add = json_object_get(p, "add_prefix_space");
    return !add || json_is_true(add) ? "always" : "never";
}

/* Metaspace (SentencePiece's spaces: Mistral, Llama 2 files of 2024 on):
 * ' ' -> the replacement, the prefix by prepend_scheme, then a split
 * before each replacement character when split is true. */
static int read_metaspace(hf_spec *h, const json_t *p, bool first, tps_err *err) {
    const char *rep = json_string_value(json_object_get(p, "replacement"));
    const char *scheme = metaspace_scheme(p);
    if (!rep) rep = "\xe2\x96\x81";
    if (!first)
        return tps_fail(err, TPS_EUNSUP,
                        "tokenizer.json: a Metaspace pre-tokenizer after another pre-tokenizer");
    int rc = add_norm(h, TOK_NORM_REPLACE, " ", rep, err);
    if (!rc && !strcmp(scheme, "always")) rc = add_norm(h, TOK_NORM_PREFIX_ALWAYS, "", rep, err);
    if (!rc && !strcmp(scheme, "first")) rc = add_norm(h, TOK_NORM_PREFIX_FIRST, "", rep, err);
    if (!rc && strcmp(scheme, "always") && strcmp(scheme, "first") && strcmp(scheme, "never"))
        rc = tps_fail(err, TPS_EUNSUP, "tokenizer.json: Metaspace prepend_scheme '%s'", scheme);
    json_t *split = json_object_get(p, "split");
    if (rc || (split && !json_is_true(split))) return rc;
    char *buf = h->literal[h->n_literal++ % TOK_MAX_REGEX];
    snprintf(buf, sizeof h->literal[0], "\\Q%s\\E", rep);
    return add_regex(h, buf, TOK_SPLIT_MERGED_NEXT, err);
}

static int read_pre(hf_spec *h, const json_t *p, bool first, tps_err *err) {
    if (!p || json_is_null(p)) return 0;
    if (is_type(p, "Sequence")) {
        size_t i;
        json_t *x;
        int rc = 0;
        json_array_foreach(json_object_get(p, "pretokenizers"), i, x) {
            if (!rc) rc = read_pre(h, x, first && i == 0, err);
        }
        return rc;
    }
    if (is_type(p, "Split")) return read_split(h, p, err);
    if (is_type(p, "Digits"))
        return add_regex(
            h, json_is_true(json_object_get(p, "individual_digits")) ? "\\p{N}" : "\\p{N}+",
            TOK_SPLIT_ISOLATED, err);
    if (is_type(p, "ByteLevel")) {
        h->spec.byte_level = true;
        if (json_is_true(json_object_get(p, "add_prefix_space"))) {
            if (!first)
                return tps_fail(err, TPS_EUNSUP,
                                "tokenizer.json: a ByteLevel pre-tokenizer with add_prefix_space "
                                "after another pre-tokenizer");
            h->spec.prefix_space = true;
        }
        json_t *use = json_object_get(p, "use_regex");
        return !use || json_is_true(use) ? add_regex(h, RE_BYTE_LEVEL, TOK_SPLIT_ISOLATED, err) : 0;
    }
    if (is_type(p, "Metaspace")) return read_metaspace(h, p, first, err);
    return tps_fail(err, TPS_EUNSUP,
                    "tokenizer.json: pre-tokenizer '%s' is not supported (supported: Split, "
                    "ByteLevel, Metaspace, Digits, Sequence of these)",
                    type_of(p));
}

/* ---- decoder ------------------------------------------------------------ */

static int read_decoder(hf_spec *h, const json_t *d, tps_err *err) {
    if (!d || json_is_null(d)) return 0;
    if (is_type(d, "Sequence")) return read_steps(h, d, "decoders", read_decoder, err);
    if (is_type(d, "Strip")) {
        h->strip_space = json_integer_value(json_object_get(d, "start")) > 0;
        return 0;
    }
    if (is_type(d, "Metaspace")) {
        h->strip_space = strcmp(metaspace_scheme(d), "never") != 0;
        return 0;
    }
    static const char *const ok[] = {"ByteLevel", "Replace", "ByteFallback", "Fuse"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (is_type(d, ok[i])) return 0;
    return tps_fail(
        err, TPS_EUNSUP,
        "tokenizer.json: decoder '%s' is not supported (supported: ByteLevel, Metaspace, "
        "Replace, ByteFallback, Fuse, Strip, Sequence of these)",
        type_of(d));
}

int hf_read_spec(hf_spec *h, const json_t *root, tps_err *err) {
    memset(h, 0, sizeof *h);
    const json_t *model = json_object_get(root, "model");
    int rc = read_normalizer(h, json_object_get(root, "normalizer"), err);
    if (!rc) rc = read_pre(h, json_object_get(root, "pre_tokenizer"), true, err);
    if (!rc) rc = read_decoder(h, json_object_get(root, "decoder"), err);
    if (rc) return rc;
    h->spec.byte_fallback = json_is_true(json_object_get(model, "byte_fallback"));
    h->spec.ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));
    if (h->spec.byte_level && h->spec.byte_fallback)
        return tps_fail(err, TPS_EUNSUP,
                        "tokenizer.json: a ByteLevel pre-tokenizer with a byte_fallback model");
    return 0;
}
