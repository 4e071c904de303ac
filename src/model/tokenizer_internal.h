/* Private to the tokenizer*.c files: the tokenizer struct, the vocabulary
 * hash lookup, the growable id list and the entry points of the SPM and BPE
 * algorithms. Nothing outside src/model/tokenizer*.c includes this. */
#ifndef TPS_TOKENIZER_INTERNAL_H
#define TPS_TOKENIZER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/grow.h"
#include "base/sbuf.h"
#include "model/tokenizer.h"

/* Token attributes as a bit set (llama.cpp's llama_token_attr subset): a
 * token can gain CONTROL on top of its stored type (EOG tokens). */
enum {
    TOK_ATTR_NORMAL = 1u << 0,
    TOK_ATTR_UNKNOWN = 1u << 1,
    TOK_ATTR_CONTROL = 1u << 2,
    TOK_ATTR_USER_DEFINED = 1u << 3,
    TOK_ATTR_UNUSED = 1u << 4,
    TOK_ATTR_BYTE = 1u << 5,
    TOK_ATTR_RSTRIP = 1u << 6, /* whitespace after it in the text is dropped (Phi-3) */
};

#define TOK_MAX_EOG 16

typedef struct tok_bpe tok_bpe; /* merges + pre-tokenizer (tokenizer_bpe.c) */

struct tokenizer {
    tokenizer_kind kind;
    uint32_t n_vocab;

    /* Vocabulary strings, one buffer: token i is text[text_off[i] .. text_off[i+1]). */
    char *text;
    uint32_t *text_off; /* (n_vocab + 1,) */
    float *score;       /* (n_vocab,) SPM merge priority */
    uint8_t *type;      /* (n_vocab,) TOKEN_TYPE_* as stored */
    uint8_t *attr;      /* (n_vocab,) TOK_ATTR_* bits */

    /* Pieces with special tokens rendered (llama.cpp's token_to_piece cache). */
    char *piece;
    uint32_t *piece_off; /* (n_vocab + 1,) */

    /* Open-addressing hash of the vocabulary strings: slot = id + 1, 0 = empty. */
    uint32_t *slots;
    size_t slot_mask;
    size_t max_len; /* longest token string: longer lookups fail at once */

    /* Control / user-defined / unknown ids, longest text first (ties: lower id). */
    int32_t *special;
    size_t n_special;

    int32_t bos, eos, eot, eom, unk, pad;
    int32_t eog[TOK_MAX_EOG];
    size_t n_eog;
    bool add_bos, add_eos;
    bool add_space_prefix; /* SPM dummy prefix; decode strips it back */
    bool clean_spaces;     /* BPE decode clean-up (" ," -> ",") */

    /* Token for each byte value: SPM <0xNN> (or the 1-byte string), BPE the
     * byte-level character. TOKEN_NONE where the vocab lacks it. */
    int32_t byte_id[256];

    tok_bpe *bpe; /* BPE only */
};

static inline bool tok_valid_id(const tokenizer *t, int32_t id) {
    return id >= 0 && (uint32_t)id < t->n_vocab;
}

/* Whether token id's text is exactly s. */
static inline bool tok_text_is(const tokenizer *t, uint32_t id, const char *s) {
    size_t n = strlen(s);
    return t->text_off[id + 1] - t->text_off[id] == n &&
           memcmp(t->text + t->text_off[id], s, n) == 0;
}

/* Growable list of ids, the output of the algorithms. */
typedef struct tok_ids {
    int32_t *v;
    size_t n, cap;
} tok_ids;

static inline int tok_ids_push(tok_ids *ids, int32_t id) {
    if (TPS_GROW(ids->v, ids->cap, ids->n + 1, 64)) return TPS_ENOMEM;
    ids->v[ids->n++] = id;
    return 0;
}

/* FNV-1a over bytes; tok_hash_more continues a running hash. */
static inline uint64_t tok_hash_more(uint64_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 1099511628211ull;
    }
    return h;
}
static inline uint64_t tok_hash(const char *s, size_t n) {
    return tok_hash_more(1469598103934665603ull, s, n);
}

/* Vocabulary lookup; TOKEN_NONE if absent. Inline here, with the other
 * helpers the algorithm files share, so that tokenizer.c calls the SPM and
 * BPE files and they never call it back. */
static inline int32_t tok_lookup(const tokenizer *t, const char *s, size_t n) {
    if (n > t->max_len) return TOKEN_NONE;
    size_t i = (size_t)tok_hash(s, n) & t->slot_mask;
    for (;;) {
        uint32_t v = t->slots[i];
        if (!v) return TOKEN_NONE;
        uint32_t id = v - 1;
        uint32_t off = t->text_off[id];
        if (t->text_off[id + 1] - off == n && memcmp(t->text + off, s, n) == 0) return (int32_t)id;
        i = (i + 1) & t->slot_mask;
    }
}

/* Bytes of a UTF-8 sequence by its first byte (1 for continuation or
 * invalid bytes), the way llama.cpp splits text into symbols. */
static inline size_t tok_utf8_len(uint8_t c) {
    static const uint8_t lens[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lens[c >> 4];
}

/* ---- SPM (tokenizer_spm.c) ---- */

/* Appends the ids of one text fragment (no special tokens in it). The text is
 * escaped here (' ' -> ▁, with a leading ▁ when prefix_space). */
int tok_spm_encode(const tokenizer *t, const char *text, size_t len, bool prefix_space,
                   tok_ids *out, tps_err *err);

/* ---- the loaders' shared steps (tokenizer_load.c) ---- */

/* The string -> id hash of t's vocabulary; a duplicate string is an error. */
int tok_build_hash(tokenizer *t, tps_err *err);
/* After the vocabulary, special ids, types and algorithm are set: the
 * end-of-generation tokens, gpt-oss's harmony markers, the special tokens
 * longest first, every token's piece. */
int tok_finish(tokenizer *t, tps_err *err);
/* After the add flags are read: a flag set whose token the vocabulary
 * lacks is an error, each message naming where its loader read the two. */
int tok_check_added(const tokenizer *t, const char *no_bos, const char *no_eos, tps_err *err);
/* t->byte_id from the <0xNN> tokens (else the one-byte strings). */
void tok_spm_byte_ids(tokenizer *t);

/* ---- BPE (tokenizer_bpe.c) ---- */

#define TOK_MAX_REGEX 6
#define TOK_MAX_NORM  4

/* What a pre-tokenizer split does with a match (Hugging Face's Split behaviours). */
typedef enum tok_split {
    TOK_SPLIT_ISOLATED = 0,
    TOK_SPLIT_MERGED_PREV,
    TOK_SPLIT_MERGED_NEXT,
    TOK_SPLIT_REMOVED,
} tok_split;

/* A normalizer step: Hugging Face's NFC, Prepend (to any non-empty text),
 * Replace of a string; and the Metaspace pre-tokenizer's prefix, added
 * when the text does not start with it already (always, or only to the
 * fragment at the start of the input: prepend_scheme "first"). */
typedef enum tok_norm_kind {
    TOK_NORM_NFC = 1,
    TOK_NORM_PREPEND,
    TOK_NORM_REPLACE,
    TOK_NORM_PREFIX_ALWAYS,
    TOK_NORM_PREFIX_FIRST,
} tok_norm_kind;
typedef struct tok_norm {
    int kind;
    char from[16], to[16]; /* Replace: from -> to; Prepend: to */
} tok_norm;

/* A BPE described by a tokenizer.json (tokenizer_hf.c): applied to each
 * text fragment between special tokens in this order: prefix_space, the
 * normalizer steps, the regex splits, then the model. */
typedef struct tok_bpe_spec {
    const char *regex[TOK_MAX_REGEX]; /* borrowed for the call */
    uint8_t behavior[TOK_MAX_REGEX];  /* tok_split */
    int n_regex;
    tok_norm norm[TOK_MAX_NORM];
    int n_norm;
    bool byte_level;    /* ByteLevel pre-tokenizer: bytes -> GPT-2 characters */
    bool byte_fallback; /* an unknown character -> its <0xNN> tokens (t->byte_id) */
    bool ignore_merges; /* a piece that is a whole token skips merging */
    bool prefix_space;  /* ByteLevel add_prefix_space: a fragment gets a leading ' ' */
} tok_bpe_spec;

/* NFC of buf's text in place (tokenizer_nfc.c); 0, or TPS_ENOMEM. */
int tok_nfc(sbuf *buf);

/* Reads tokenizer.ggml.merges and compiles the regexes for tokenizer.ggml.pre
 * (pre may be NULL: "default"). Sets t->clean_spaces and, for Llama 3, the
 * add_bos default. */
int tok_bpe_create(tok_bpe **out, tokenizer *t, const gguf_file *f, const char *pre, tps_err *err);
/* The same from a spec and merges "left right" (rank = index); the
 * caller has set t->byte_id for byte fallback. */
int tok_bpe_create_spec(tok_bpe **out, tokenizer *t, const tok_bpe_spec *spec,
                        const gguf_str *merges, size_t n_merges, tps_err *err);
void tok_bpe_free(tok_bpe *b);
/* Appends the ids of one text fragment; at_start: the fragment begins the
 * input (no special token before it). */
int tok_bpe_encode(const tokenizer *t, const char *text, size_t len, bool at_start, tok_ids *out,
                   tps_err *err);
/* Byte-level decode of a token string into out (capacity >= n); returns bytes written. */
size_t tok_bpe_unmap(const char *s, size_t n, char *out);

#endif
