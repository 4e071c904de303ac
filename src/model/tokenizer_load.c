/* Loading a tokenizer from GGUF metadata (tokenizer.h): the token texts,
 * scores and types, the string -> id hash, the end-of-generation and
 * special tokens (longest first, for splitting), the algorithm and its
 * pre-tokenizer, the special ids and add-flags, every token's piece.
 * Messages name the key that is wrong. Not here: encoding and decoding
 * (tokenizer.c). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/free_all.h"
#include "model/tokenizer_internal.h"

/* ======================================================================== */
/* Loading                                                                   */
/* ======================================================================== */

/* Reads an optional id key. Absent: keeps *id. 4294967295, negative or past
 * the vocabulary: TOKEN_NONE. */
static int read_id_key(const gguf_file *f, const char *key, uint32_t n_vocab, int32_t *id,
                       tps_err *err) {
    int64_t v;
    int rc = gguf_get_i64(f, key, &v);
    if (rc == TPS_ENOENT) return 0;
    if (rc) return tps_fail(err, TPS_EINVAL, "tokenizer: metadata key '%s' is not an integer", key);
    *id = (v >= 0 && v < (int64_t)n_vocab) ? (int32_t)v : TOKEN_NONE;
    return 0;
}

static int read_bool_key(const gguf_file *f, const char *key, bool *out, tps_err *err) {
    int rc = gguf_get_bool(f, key, out);
    if (rc == TPS_ENOENT) return 0;
    if (rc) return tps_fail(err, TPS_EINVAL, "tokenizer: metadata key '%s' is not a bool", key);
    return 0;
}

/* The token strings, into t->text / t->text_off; n tokens. */
static int load_token_texts(tokenizer *t, const gguf_kv *kv, const char *key, tps_err *err) {
    uint64_t n = t->n_vocab;
    gguf_str *strs = malloc(n * sizeof *strs);
    if (!strs)
        return tps_fail(err, TPS_ENOMEM, "tokenizer: out of memory for %llu tokens",
                        (unsigned long long)n);
    int rc = gguf_array_strings(&kv->val, strs);
    if (rc) {
        free(strs);
        return tps_fail(err, TPS_EINVAL, "tokenizer: '%s' could not be read", key);
    }
    /* Empty strings get llama.cpp's placeholder "[EMPTY_<id>]". */
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++)
        total += strs[i].len ? strs[i].len : 24;
    if (total > UINT32_MAX) {
        free(strs);
        return tps_fail(err, TPS_ERANGE, "tokenizer: token strings total %llu bytes (max 4 GiB)",
                        (unsigned long long)total);
    }
    t->text = malloc(total ? total : 1);
    t->text_off = malloc((n + 1) * sizeof *t->text_off);
    t->score = calloc(n, sizeof *t->score);
    t->type = malloc(n);
    t->attr = malloc(n);
    if (!t->text || !t->text_off || !t->score || !t->type || !t->attr) {
        free(strs);
        return tps_fail(err, TPS_ENOMEM, "tokenizer: out of memory for the vocabulary");
    }
    uint32_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        t->text_off[i] = off;
        if (strs[i].len) {
            memcpy(t->text + off, strs[i].ptr, strs[i].len);
            off += (uint32_t)strs[i].len;
        } else {
            off += (uint32_t)snprintf(t->text + off, 24, "[EMPTY_%llu]", (unsigned long long)i);
        }
    }
    t->text_off[n] = off;
    free(strs);
    return 0;
}

/* tokenizer.ggml.scores, optional (0 when absent): floats or integers. */
static int load_scores(tokenizer *t, const gguf_file *f, tps_err *err) {
    const char *key = "tokenizer.ggml.scores";
    const gguf_kv *kv = gguf_find(f, key);
    uint64_t n = t->n_vocab;
    if (!kv) return 0;
    if (kv->val.type != GGUF_TYPE_ARRAY || kv->val.arr.n < n)
        return tps_fail(err, TPS_EINVAL, "tokenizer: '%s' must be a numeric array of %llu scores",
                        key, (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++) {
        double d;
        if (gguf_array_f64(&kv->val, i, &d)) {
            int64_t iv;
            if (gguf_array_i64(&kv->val, i, &iv))
                return tps_fail(err, TPS_EINVAL, "tokenizer: '%s'[%llu] is not a number", key,
                                (unsigned long long)i);
            d = (double)iv;
        }
        t->score[i] = (float)d;
    }
    return 0;
}

/* tokenizer.ggml.token_type, optional (all normal when absent), and the
 * attributes that follow from it; unknown types get neither. */
static int load_token_types(tokenizer *t, const gguf_file *f, tps_err *err) {
    const char *key = "tokenizer.ggml.token_type";
    const gguf_kv *kv = gguf_find(f, key);
    uint64_t n = t->n_vocab;
    if (kv && (kv->val.type != GGUF_TYPE_ARRAY || kv->val.arr.n < n))
        return tps_fail(err, TPS_EINVAL, "tokenizer: '%s' must be an integer array of %llu types",
                        key, (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++) {
        int64_t ty = TOKEN_TYPE_NORMAL;
        if (kv && gguf_array_i64(&kv->val, i, &ty))
            return tps_fail(err, TPS_EINVAL, "tokenizer: '%s'[%llu] is not an integer", key,
                            (unsigned long long)i);
        static const uint8_t attr_of[7] = {0,
                                           TOK_ATTR_NORMAL,
                                           TOK_ATTR_UNKNOWN,
                                           TOK_ATTR_CONTROL,
                                           TOK_ATTR_USER_DEFINED,
                                           TOK_ATTR_UNUSED,
                                           TOK_ATTR_BYTE};
        bool known = ty >= 1 && ty <= 6;
        t->type[i] = known ? (uint8_t)ty : 0;
        t->attr[i] = known ? attr_of[ty] : 0;
    }
    return 0;
}

/* Token strings, scores and types. */
static int load_vocab(tokenizer *t, const gguf_file *f, tps_err *err) {
    const char *key = "tokenizer.ggml.tokens";
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv) return tps_fail(err, TPS_ENOENT, "tokenizer: '%s' is missing: no vocabulary", key);
    if (kv->val.type != GGUF_TYPE_ARRAY || kv->val.arr.type != GGUF_TYPE_STRING)
        return tps_fail(err, TPS_EINVAL, "tokenizer: '%s' is not an array of strings", key);
    uint64_t n = kv->val.arr.n;
    if (n == 0 || n > INT32_MAX - 1)
        return tps_fail(err, TPS_ERANGE, "tokenizer: '%s' has %llu tokens (need 1..%d)", key,
                        (unsigned long long)n, INT32_MAX - 1);
    t->n_vocab = (uint32_t)n;
    int rc;
    if ((rc = load_token_texts(t, kv, key, err))) return rc;
    if ((rc = load_scores(t, f, err))) return rc;
    return load_token_types(t, f, err);
}

int tok_build_hash(tokenizer *t, tps_err *err) {
    size_t cap = 16;
    while (cap < (size_t)t->n_vocab * 2)
        cap *= 2;
    t->slots = calloc(cap, sizeof *t->slots);
    if (!t->slots) return tps_fail(err, TPS_ENOMEM, "tokenizer: out of memory for the hash");
    t->slot_mask = cap - 1;
    t->max_len = SIZE_MAX; /* while building, so duplicates are found */
    for (uint32_t id = 0; id < t->n_vocab; id++) {
        const char *s = t->text + t->text_off[id];
        size_t n = t->text_off[id + 1] - t->text_off[id];
        int32_t dup = tok_lookup(t, s, n);
        if (dup != TOKEN_NONE)
            return tps_fail(err, TPS_EINVAL,
                            "tokenizer: duplicate token in vocabulary: '%.*s' has ids %d and %u",
                            (int)(n > 64 ? 64 : n), s, dup, id);
        size_t i = (size_t)tok_hash(s, n) & t->slot_mask;
        while (t->slots[i])
            i = (i + 1) & t->slot_mask;
        t->slots[i] = id + 1;
    }
    t->max_len = 0;
    for (uint32_t id = 0; id < t->n_vocab; id++)
        if (t->text_off[id + 1] - t->text_off[id] > t->max_len)
            t->max_len = t->text_off[id + 1] - t->text_off[id];
    return 0;
}

/* End-of-generation tokens, found by id keys and by text as llama.cpp does;
 * tokens found by text become control tokens. */
static void find_eog(tokenizer *t) {
    static const char *const eot_texts[] = {"<|eot_id|>",
                                            "<|im_end|>",
                                            "<|end|>",
                                            "<end_of_turn>",
                                            "<|endoftext|>",
                                            "<|end_of_text|>",
                                            "<EOT>",
                                            "_<EOT>",
                                            "[EOT]",
                                            "<\xef\xbd\x9c"
                                            "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
                                            "<end_of_utterance>",
                                            NULL};
    static const char *const eog_texts[] = {"<|eot_id|>",
                                            "<|im_end|>",
                                            "<|end|>",
                                            "<end_of_turn>",
                                            "<|endoftext|>",
                                            "</s>",
                                            "<|eom_id|>",
                                            "<EOT>",
                                            "_<EOT>",
                                            "[EOT]",
                                            "[EOS]",
                                            "<|return|>", /* o200k_harmony (gpt-oss) */
                                            "<|call|>",
                                            "<|flush|>", /* solar-open */
                                            "<|calls|>",
                                            "<|end_of_text|>",
                                            "<end_of_utterance>",
                                            "<eos>",
                                            NULL};
    for (uint32_t id = 0; id < t->n_vocab; id++) {
        for (const char *const *s = eot_texts; *s && t->eot == TOKEN_NONE; s++)
            if (tok_text_is(t, id, *s)) {
                t->eot = (int32_t)id;
                t->attr[id] |= TOK_ATTR_CONTROL;
            }
        if (t->eom == TOKEN_NONE && tok_text_is(t, id, "<|eom_id|>")) {
            t->eom = (int32_t)id;
            t->attr[id] |= TOK_ATTR_CONTROL;
        }
    }
    t->n_eog = 0;
    for (uint32_t id = 0; id < t->n_vocab && t->n_eog < TOK_MAX_EOG - 3; id++)
        for (const char *const *s = eog_texts; *s; s++)
            if (tok_text_is(t, id, *s)) {
                t->eog[t->n_eog++] = (int32_t)id;
                t->attr[id] |= TOK_ATTR_CONTROL;
                break;
            }
    const int32_t keyed[3] = {t->eos, t->eot, t->eom};
    for (int k = 0; k < 3; k++)
        if (keyed[k] != TOKEN_NONE && !tokenizer_is_eog(t, keyed[k])) t->eog[t->n_eog++] = keyed[k];
}

typedef struct len_id {
    uint32_t len;
    int32_t id;
} len_id;

static void eog_remove(tokenizer *t, int32_t id) {
    for (size_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) {
            t->eog[i] = t->eog[--t->n_eog];
            return;
        }
}

static bool eog_text(const tokenizer *t, const char *text) {
    int32_t id = tok_lookup(t, text, strlen(text));
    return id != TOKEN_NONE && tokenizer_is_eog(t, id);
}

/* llama.cpp's workarounds for gpt-oss's o200k_harmony vocabulary (and
 * solar-open's), by token text: <|channel|>, <|message|>, <|start|> and
 * <|constrain|> are user-defined (rendered as text, so the answer's
 * channels can be read); and when <|return|> and <|call|> (or <|calls|>
 * and <|flush|>) end generation, <|end|>, which closes one message of an
 * answer of several, does not: it is user-defined too. */
static void harmony_tokens(tokenizer *t) {
    static const char *const shown[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};
    for (size_t i = 0; i < sizeof shown / sizeof shown[0]; i++) {
        int32_t id = tok_lookup(t, shown[i], strlen(shown[i]));
        if (id != TOKEN_NONE) t->attr[id] = TOK_ATTR_USER_DEFINED;
    }
    int32_t end = tok_lookup(t, "<|end|>", 7);
    bool ret = eog_text(t, "<|return|>"),
         call = eog_text(t, "<|call|>") || eog_text(t, "<|calls|>");
    if (end == TOKEN_NONE || !tokenizer_is_eog(t, end) || !call ||
        !(ret || eog_text(t, "<|flush|>")))
        return;
    eog_remove(t, end);
    t->attr[end] = TOK_ATTR_USER_DEFINED;
}

static int by_len_desc(const void *a, const void *b) {
    const len_id *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int collect_special(tokenizer *t, tps_err *err) {
    size_t n = 0;
    for (uint32_t id = 0; id < t->n_vocab; id++)
        if (t->attr[id] & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN)) n++;
    if (!n) return 0;
    len_id *tmp = malloc(n * sizeof *tmp);
    t->special = malloc(n * sizeof *t->special);
    if (!tmp || !t->special) {
        free(tmp);
        return tps_fail(err, TPS_ENOMEM, "tokenizer: out of memory");
    }
    n = 0;
    for (uint32_t id = 0; id < t->n_vocab; id++)
        if (t->attr[id] & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN))
            tmp[n++] = (len_id){t->text_off[id + 1] - t->text_off[id], (int32_t)id};
    qsort(tmp, n, sizeof *tmp, by_len_desc);
    for (size_t i = 0; i < n; i++)
        t->special[i] = tmp[i].id;
    t->n_special = n;
    free(tmp);
    return 0;
}

/* llama.cpp marks a model named Phi-3 (general.name holding "phi-3" or
 * "phi3", any case) so that whitespace after its special tokens and </s> is
 * dropped, except after <unk>, <s> and <|endoftext|>: "<|user|>\nHi" is
 * <|user|> then "Hi". */
static void phi3_rstrip(tokenizer *t, const gguf_file *f) {
    gguf_str name;
    if (gguf_get_str(f, "general.name", &name) != 0) return;
    char low[256];
    size_t n = name.len < sizeof low - 1 ? name.len : sizeof low - 1;
    for (size_t i = 0; i < n; i++)
        low[i] = (char)tolower((unsigned char)name.ptr[i]);
    low[n] = 0;
    if (!strstr(low, "phi-3") && !strstr(low, "phi3")) return;
    for (size_t i = 0; i < t->n_special; i++)
        t->attr[t->special[i]] |= TOK_ATTR_RSTRIP;
    static const char *const on[] = {"</s>"}, *const off[] = {"<unk>", "<s>", "<|endoftext|>"};
    int32_t id = tok_lookup(t, on[0], strlen(on[0]));
    if (id != TOKEN_NONE) t->attr[id] |= TOK_ATTR_RSTRIP;
    for (size_t i = 0; i < sizeof off / sizeof off[0]; i++)
        if ((id = tok_lookup(t, off[i], strlen(off[i]))) != TOKEN_NONE)
            t->attr[id] &= (uint8_t)~TOK_ATTR_RSTRIP;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Byte of a "<0xNN>" token, or -1. */
static int byte_token_value(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int hi = hexval(s[3]), lo = hexval(s[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

void tok_spm_byte_ids(tokenizer *t) {
    static const char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; b++) {
        char buf[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
        int32_t id = tok_lookup(t, buf, 6);
        if (id == TOKEN_NONE) {
            char c = (char)b;
            id = tok_lookup(t, &c, 1);
        }
        t->byte_id[b] = id;
    }
}

/* The piece of every token with specials rendered: one buffer. */
static int build_pieces(tokenizer *t, tps_err *err) {
    /* A piece is never longer than its token string (▁ -> ' ' shrinks,
     * byte-level unmapping shrinks or keeps), except a "<0xNN>" byte -> 1. */
    t->piece = malloc(t->text_off[t->n_vocab] + 1);
    t->piece_off = malloc(((size_t)t->n_vocab + 1) * sizeof *t->piece_off);
    if (!t->piece || !t->piece_off)
        return tps_fail(err, TPS_ENOMEM, "tokenizer: out of memory for the piece cache");
    uint32_t off = 0;
    for (uint32_t id = 0; id < t->n_vocab; id++) {
        t->piece_off[id] = off;
        const char *s = t->text + t->text_off[id];
        size_t n = t->text_off[id + 1] - t->text_off[id];
        uint8_t a = t->attr[id];
        char *dst = t->piece + off;
        if (a & (TOK_ATTR_UNKNOWN | TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED)) {
            memcpy(dst, s, n);
            off += (uint32_t)n;
        } else if (a & TOK_ATTR_NORMAL) {
            if (t->kind == TOKENIZER_BPE) {
                off += (uint32_t)tok_bpe_unmap(s, n, dst);
            } else {
                size_t w = 0;
                for (size_t i = 0; i < n;) {
                    if (i + 3 <= n && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
                        dst[w++] = ' ';
                        i += 3;
                    } else {
                        dst[w++] = s[i++];
                    }
                }
                off += (uint32_t)w;
            }
        } else if (a & TOK_ATTR_BYTE) {
            int b = byte_token_value(s, n);
            if (b >= 0) {
                dst[0] = (char)b;
                off += 1;
            } else {
                memcpy(dst, s, n);
                off += (uint32_t)n;
            }
        }
        /* unused / undefined: empty */
    }
    t->piece_off[t->n_vocab] = off;
    return 0;
}

int tok_check_added(const tokenizer *t, const char *no_bos, const char *no_eos, tps_err *err) {
    if (t->add_bos && t->bos == TOKEN_NONE) return tps_fail(err, TPS_EINVAL, "%s", no_bos);
    if (t->add_eos && t->eos == TOKEN_NONE) return tps_fail(err, TPS_EINVAL, "%s", no_eos);
    return 0;
}

int tok_finish(tokenizer *t, tps_err *err) {
    find_eog(t);
    harmony_tokens(t);
    int rc = collect_special(t, err);
    return rc ? rc : build_pieces(t, err);
}

/* tokenizer.ggml.model (which algorithm) and tokenizer.ggml.pre (which
 * pre-tokenizer, "" when absent) into pre[64]. */
static int read_kind(const gguf_file *f, tokenizer_kind *kind, char pre[64], tps_err *err) {
    gguf_str model;
    int rc = gguf_get_str(f, "tokenizer.ggml.model", &model);
    if (rc == TPS_ENOENT)
        return tps_fail(err, TPS_ENOENT,
                        "tokenizer: 'tokenizer.ggml.model' is missing: the file has no vocabulary");
    if (rc) return tps_fail(err, TPS_EINVAL, "tokenizer: 'tokenizer.ggml.model' is not a string");
    if (gguf_str_eq(model, "llama"))
        *kind = TOKENIZER_SPM;
    else if (gguf_str_eq(model, "gpt2"))
        *kind = TOKENIZER_BPE;
    else
        return tps_fail(err, TPS_EUNSUP,
                        "tokenizer: tokenizer.ggml.model = '%.*s' is not supported (supported: "
                        "'llama' (SentencePiece), 'gpt2' (byte-level BPE))",
                        (int)(model.len > 64 ? 64 : model.len), model.ptr);

    pre[0] = 0;
    gguf_str pre_s;
    if (gguf_get_str(f, "tokenizer.ggml.pre", &pre_s) == 0) {
        if (pre_s.len >= 64)
            return tps_fail(err, TPS_EUNSUP,
                            "tokenizer: tokenizer.ggml.pre is too long (%llu bytes)",
                            (unsigned long long)pre_s.len);
        memcpy(pre, pre_s.ptr, pre_s.len);
        pre[pre_s.len] = 0;
    }
    return 0;
}

/* The special token ids: defaults as llama.cpp has them, then the file's keys. */
static int read_special_ids(tokenizer *t, const gguf_file *f, tps_err *err) {
    t->bos = t->eos = t->eot = t->eom = t->unk = t->pad = TOKEN_NONE;
    if (t->kind == TOKENIZER_SPM) {
        t->bos = t->n_vocab > 1 ? 1 : TOKEN_NONE;
        t->eos = t->n_vocab > 2 ? 2 : TOKEN_NONE;
        t->unk = 0;
        t->add_bos = true;
        t->add_space_prefix = true;
    }
    static const struct {
        const char *key;
        size_t field;
    } id_keys[] = {
        {"tokenizer.ggml.bos_token_id", offsetof(tokenizer, bos)},
        {"tokenizer.ggml.eos_token_id", offsetof(tokenizer, eos)},
        {"tokenizer.ggml.eot_token_id", offsetof(tokenizer, eot)},
        {"tokenizer.ggml.eom_token_id", offsetof(tokenizer, eom)},
        {"tokenizer.ggml.unknown_token_id", offsetof(tokenizer, unk)},
        {"tokenizer.ggml.padding_token_id", offsetof(tokenizer, pad)},
    };
    int rc;
    for (size_t i = 0; i < sizeof id_keys / sizeof id_keys[0]; i++)
        if ((rc = read_id_key(f, id_keys[i].key, t->n_vocab,
                              (int32_t *)((char *)t + id_keys[i].field), err)))
            return rc;
    return 0;
}

/* The add_space_prefix / add_bos_token / add_eos_token flags; a BOS or EOS
 * to add must exist. */
static int read_add_flags(tokenizer *t, const gguf_file *f, tps_err *err) {
    int rc;
    if ((rc = read_bool_key(f, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix, err)) ||
        (rc = read_bool_key(f, "tokenizer.ggml.add_bos_token", &t->add_bos, err)) ||
        (rc = read_bool_key(f, "tokenizer.ggml.add_eos_token", &t->add_eos, err)))
        return rc;
    return tok_check_added(t,
                           "tokenizer: add_bos_token is true but the vocabulary has no BOS token "
                           "(tokenizer.ggml.bos_token_id)",
                           "tokenizer: add_eos_token is true but the vocabulary has no EOS token "
                           "(tokenizer.ggml.eos_token_id)",
                           err);
}

int tokenizer_load(tokenizer **out, const gguf_file *f, tps_err *err) {
    *out = NULL;
    tokenizer_kind kind = TOKENIZER_SPM; /* read_kind sets it */
    char pre[64];
    int rc = read_kind(f, &kind, pre, err);
    if (rc) return rc;

    tokenizer *t = calloc(1, sizeof *t);
    if (!t) return tps_fail(err, TPS_ENOMEM, "tokenizer: out of memory");
    t->kind = kind;
    if ((rc = load_vocab(t, f, err))) goto fail;
    if ((rc = tok_build_hash(t, err))) goto fail;
    if ((rc = read_special_ids(t, f, err))) goto fail;
    if (kind == TOKENIZER_BPE) {
        if ((rc = tok_bpe_create(&t->bpe, t, f, pre[0] ? pre : NULL, err))) goto fail;
    } else {
        tok_spm_byte_ids(t);
    }
    if ((rc = read_add_flags(t, f, err))) goto fail;
    if ((rc = tok_finish(t, err))) goto fail;
    phi3_rstrip(t, f);
    *out = t;
    return 0;
fail:
    tokenizer_free(t);
    return rc;
}

void tokenizer_free(tokenizer *t) {
    if (!t) return;
    tok_bpe_free(t->bpe);
    TPS_FREE_ALL(t->piece_off, t->piece, t->special, t->slots, t->attr, t->type, t->score,
                 t->text_off, t->text, t);
}
