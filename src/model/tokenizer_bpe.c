/* Byte-level BPE ("gpt2" vocabularies: GPT-2, Llama 3, Qwen2, ...), the
 * algorithm of llama.cpp's llm_tokenizer_bpe: split a text fragment into
 * pieces with the pre-tokenizer regexes named by tokenizer.ggml.pre (PCRE2,
 * Unicode classes), map each piece's bytes to GPT-2's printable characters,
 * then repeatedly merge the adjacent pair with the lowest merge rank (ties:
 * leftmost) and emit the ids of the final symbols.
 *
 * Invalid UTF-8: the regexes are compiled with PCRE2_MATCH_INVALID_UTF, so
 * they never match across invalid bytes; text no regex matches becomes a
 * piece of its own, and byte-level BPE encodes any byte. (llama.cpp replaces
 * invalid bytes by U+FFFD first; we keep the bytes so decode restores them.)
 *
 * The same algorithm serves Hugging Face tokenizer.json files
 * (tokenizer_hf.c describes them as a tok_bpe_spec): their normalizer steps
 * (NFC, Replace, Prepend), Split regexes with their behaviour, byte-level
 * mapping or not, and byte fallback to <0xNN> tokens (Gemma, Llama 2).
 *
 * Not here: special tokens and BOS/EOS (tokenizer.c); pre-tokenizers other
 * than the ones in pre_table (an unknown tokenizer.ggml.pre is an error);
 * reading tokenizer.json (tokenizer_hf.c). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "model/tokenizer_internal.h"
#include "base/free_all.h"
#include "base/grow.h"
#include "base/heap.h"

/* ======================================================================== */
/* Pre-tokenizers                                                            */
/* ======================================================================== */

#define RE_GPT2         "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_LLAMA3                                                                                  \
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"   \
                    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                                   \
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"        \
                    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* o200k (GPT-4o, gpt-oss, Llama 4): llama.cpp's rewrite of tokenizer.json's
 * regex, whose letter classes are "a letter but a-z" / "a letter but A-Z"
 * where the original has \p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M} / \p{Ll}\p{Lm}\p{Lo}\p{M}:
 * so combining marks (\p{M}) do not join words, and a Khmer or Devanagari
 * word may split where Hugging Face's tokenizer keeps it whole
 * (tests/data/vocab/README.md). Followed for llama.cpp's ids. */
#define RE_O200K_UPPER "((?=[\\p{L}])([^a-z]))"
#define RE_O200K_LOWER "((?=[\\p{L}])([^A-Z]))"
#define RE_O200K_CONTR "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
#define RE_O200K                                                                                   \
    "[^\\r\\n\\p{L}\\p{N}]?" RE_O200K_UPPER "*" RE_O200K_LOWER "+" RE_O200K_CONTR                  \
    "|[^\\r\\n\\p{L}\\p{N}]?" RE_O200K_UPPER "+" RE_O200K_LOWER "*" RE_O200K_CONTR                 \
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

typedef struct pre_kind {
    const char *names; /* tokenizer.ggml.pre values, '|'-separated */
    const char *regex[TOK_MAX_REGEX];
    bool ignore_merges; /* a piece that is a whole vocab token skips merging */
    bool add_bos;       /* default for add_bos_token */
    bool clean_spaces;  /* decode clean-up */
} pre_kind;

/* Regex lists as llama.cpp uses them for these names. */
static const pre_kind pre_table[] = {
    {"default",
     {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"},
     false,
     false,
     true},
    {"llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2",
     {RE_LLAMA3},
     true,
     true,
     true},
    {"gpt-2|phi-2|jina-es|jina-de|gigachat|jina-v2-es|jina-v2-de|a.x-4.0|mellum|modern-bert|mpt|"
     "olmo|jais|exaone4",
     {RE_GPT2},
     false,
     false,
     true},
    {"qwen2|deepseek-r1-qwen|megrez", {RE_QWEN2}, false, false, false},
    {"starcoder|refact|codeshell", {"\\p{N}", RE_GPT2}, false, false, true},
    {"command-r|smollm", {"\\p{N}", RE_GPT2}, false, false, false},
    {"gpt-4o|llama4|kanana2", {RE_O200K}, false, false, false},
};

static bool name_in(const char *names, const char *name) {
    size_t n = strlen(name);
    for (const char *p = names; *p;) {
        const char *bar = strchr(p, '|');
        size_t l = bar ? (size_t)(bar - p) : strlen(p);
        if (l == n && memcmp(p, name, n) == 0) return true;
        if (!bar) break;
        p = bar + 1;
    }
    return false;
}

/* ======================================================================== */
/* State                                                                     */
/* ======================================================================== */

typedef struct merge {
    uint32_t off, split, len; /* "left right" at text[off..off+len), space at off+split */
    int32_t rank;
} merge;

struct tok_bpe {
    pcre2_code *re[TOK_MAX_REGEX];
    uint8_t behavior[TOK_MAX_REGEX]; /* tok_split */
    int n_re;
    bool ignore_merges;
    bool byte_level;    /* bytes -> GPT-2 characters before merging */
    bool byte_fallback; /* an unknown character -> its <0xNN> tokens */
    bool prefix_space;  /* a fragment not starting with ' ' gets one (ByteLevel) */
    tok_norm norm[TOK_MAX_NORM];
    int n_norm;

    char *mtext; /* all merge strings */
    merge *merges;
    uint32_t *mslots; /* index + 1 into merges, 0 = empty */
    size_t mmask;

    uint8_t enc[256][2]; /* byte -> UTF-8 of its GPT-2 character */
    uint8_t enc_len[256];
};

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves,
 * the other 68 get code points 256.. in byte order. */
static uint32_t byte_to_cp(uint8_t b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return b;
    if (b <= 0x20) return 256u + b;
    if (b <= 0xA0) return 256u + 33u + (b - 0x7Fu);
    return 256u + 33u + 34u; /* 0xAD */
}

static int cp_to_byte(uint32_t cp) {
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp >= 256 && cp < 256 + 33) return (int)(cp - 256);
    if (cp >= 256 + 33 && cp < 256 + 67) return (int)(0x7F + cp - (256 + 33));
    if (cp == 256 + 67) return 0xAD;
    return -1;
}

size_t tok_bpe_unmap(const char *s, size_t n, char *out) {
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        uint8_t c = (uint8_t)s[i];
        size_t l = tok_utf8_len(c);
        uint32_t cp = 0;
        bool ok = l <= n - i;
        if (ok && l == 1)
            cp = c;
        else if (ok && l == 2)
            cp = ((c & 0x1Fu) << 6) | ((uint8_t)s[i + 1] & 0x3Fu);
        else if (ok && l == 3)
            cp = ((c & 0x0Fu) << 12) | (((uint8_t)s[i + 1] & 0x3Fu) << 6) |
                 ((uint8_t)s[i + 2] & 0x3Fu);
        int b = ok && l <= 3 && !(l == 1 && c >= 0x80) ? cp_to_byte(cp) : -1;
        if (b >= 0) {
            out[w++] = (char)b;
            i += l;
        } else {
            /* not a byte-level character: keep its bytes as they are */
            size_t k = ok ? l : n - i;
            memcpy(out + w, s + i, k);
            w += k;
            i += k;
        }
    }
    return w;
}

static int32_t merge_rank(const tok_bpe *b, const char *l, size_t ln, const char *r, size_t rn) {
    uint64_t h = tok_hash_more(tok_hash_more(tok_hash(l, ln), " ", 1), r, rn);
    for (size_t i = (size_t)h & b->mmask;; i = (i + 1) & b->mmask) {
        uint32_t v = b->mslots[i];
        if (!v) return -1;
        const merge *m = &b->merges[v - 1];
        if (m->split == ln && m->len == ln + 1 + rn && memcmp(b->mtext + m->off, l, ln) == 0 &&
            memcmp(b->mtext + m->off + ln + 1, r, rn) == 0)
            return m->rank;
    }
}

/* The merges "left right" (rank = index) into b's hash. Strings without a
 * space after their first byte can never match and are skipped, as in
 * llama.cpp; a pair seen twice keeps its first rank. */
static int add_merges(tok_bpe *b, const gguf_str *strs, uint64_t n, tps_err *err) {
    if (n > INT32_MAX)
        return tps_fail(err, TPS_ERANGE, "tokenizer: %llu merges are too many",
                        (unsigned long long)n);
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++)
        total += strs[i].len;
    size_t cap = 16;
    while (cap < n * 2)
        cap *= 2;
    if (total > UINT32_MAX)
        return tps_fail(err, TPS_ERANGE, "tokenizer: the merges' strings exceed 4 GiB");
    b->mtext = malloc(total ? total : 1);
    b->merges = malloc((n ? n : 1) * sizeof *b->merges);
    b->mslots = calloc(cap, sizeof *b->mslots);
    if (!b->mtext || !b->merges || !b->mslots)
        return tps_fail(err, TPS_ENOMEM, "tokenizer: out of memory for merges");
    b->mmask = cap - 1;
    uint32_t off = 0, nm = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *s = strs[i].ptr;
        size_t len = strs[i].len;
        /* split at the first space after the first byte, as llama.cpp does;
         * a string without one can never match and is skipped */
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        if (!sp) continue;
        size_t split = (size_t)(sp - s);
        if (merge_rank(b, s, split, sp + 1, len - split - 1) >= 0) continue; /* first rank wins */
        memcpy(b->mtext + off, s, len);
        b->merges[nm] = (merge){off, (uint32_t)split, (uint32_t)len, (int32_t)i};
        size_t slot = (size_t)tok_hash(s, len) & b->mmask;
        while (b->mslots[slot])
            slot = (slot + 1) & b->mmask;
        b->mslots[slot] = ++nm;
        off += (uint32_t)len;
    }
    return 0;
}

static int load_merges(tok_bpe *b, const gguf_file *f, tps_err *err) {
    const char *key = "tokenizer.ggml.merges";
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv)
        return tps_fail(err, TPS_ENOENT,
                        "tokenizer: '%s' is missing (a gpt2/BPE vocabulary needs its merges)", key);
    if (kv->val.type != GGUF_TYPE_ARRAY || kv->val.arr.type != GGUF_TYPE_STRING)
        return tps_fail(err, TPS_EINVAL, "tokenizer: '%s' is not an array of strings", key);
    uint64_t n = kv->val.arr.n;
    gguf_str *strs = malloc((n ? n : 1) * sizeof *strs);
    if (!strs) return tps_fail(err, TPS_ENOMEM, "tokenizer: out of memory for merges");
    int rc = gguf_array_strings(&kv->val, strs)
                 ? tps_fail(err, TPS_EINVAL, "tokenizer: '%s' could not be read", key)
                 : add_merges(b, strs, n, err);
    free(strs);
    return rc;
}

/* Compiles the pre-tokenizer regexes (name: for messages) and fills the
 * byte tables: GPT-2's byte characters, t->byte_id for byte-level BPE. */
static int bpe_setup(tok_bpe *b, tokenizer *t, const char *const *regex, int n_regex,
                     const char *name, tps_err *err) {
    for (int i = 0; i < n_regex && i < TOK_MAX_REGEX; i++) {
        int ecode;
        PCRE2_SIZE eoff;
        b->re[i] =
            pcre2_compile((PCRE2_SPTR)regex[i], PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &ecode, &eoff, NULL);
        if (!b->re[i]) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(ecode, msg, sizeof msg);
            return tps_fail(err, TPS_EUNSUP,
                            "tokenizer: PCRE2 cannot compile the '%s' pre-tokenizer regex (%s at "
                            "offset %zu); is libpcre2-8 built with Unicode support?",
                            name, (const char *)msg, (size_t)eoff);
        }
        pcre2_jit_compile(b->re[i],
                          PCRE2_JIT_COMPLETE); /* optional: falls back to the interpreter */
        b->n_re = i + 1;
    }
    for (int v = 0; v < 256; v++) {
        uint32_t cp = byte_to_cp((uint8_t)v);
        if (cp < 0x80) {
            b->enc[v][0] = (uint8_t)cp;
            b->enc_len[v] = 1;
        } else {
            b->enc[v][0] = (uint8_t)(0xC0 | (cp >> 6));
            b->enc[v][1] = (uint8_t)(0x80 | (cp & 0x3F));
            b->enc_len[v] = 2;
        }
        if (b->byte_level) t->byte_id[v] = tok_lookup(t, (const char *)b->enc[v], b->enc_len[v]);
    }
    return 0;
}

int tok_bpe_create(tok_bpe **out, tokenizer *t, const gguf_file *f, const char *pre, tps_err *err) {
    *out = NULL;
    const char *name = pre ? pre : "default";
    const pre_kind *k = NULL;
    for (size_t i = 0; i < sizeof pre_table / sizeof pre_table[0] && !k; i++)
        if (name_in(pre_table[i].names, name)) k = &pre_table[i];
    if (!k)
        return tps_fail(err, TPS_EUNSUP,
                        "tokenizer: pre-tokenizer tokenizer.ggml.pre = '%s' is not supported "
                        "(supported: default, llama-bpe/llama3, gpt-2, qwen2, starcoder, smollm, "
                        "command-r and their aliases)",
                        name);
    tok_bpe *b = calloc(1, sizeof *b);
    if (!b) return tps_fail(err, TPS_ENOMEM, "tokenizer: out of memory");
    b->byte_level = true;
    b->ignore_merges = k->ignore_merges;
    t->add_bos = k->add_bos;
    t->clean_spaces = k->clean_spaces;
    int n_re = 0;
    while (n_re < TOK_MAX_REGEX && k->regex[n_re])
        n_re++;
    int rc = bpe_setup(b, t, k->regex, n_re, name, err);
    if (!rc) rc = load_merges(b, f, err);
    if (rc) {
        tok_bpe_free(b);
        return rc;
    }
    *out = b;
    return 0;
}

int tok_bpe_create_spec(tok_bpe **out, tokenizer *t, const tok_bpe_spec *spec,
                        const gguf_str *merges, size_t n_merges, tps_err *err) {
    *out = NULL;
    tok_bpe *b = calloc(1, sizeof *b);
    if (!b) return tps_fail(err, TPS_ENOMEM, "tokenizer: out of memory");
    b->byte_level = spec->byte_level;
    b->byte_fallback = spec->byte_fallback;
    b->ignore_merges = spec->ignore_merges;
    b->prefix_space = spec->prefix_space;
    memcpy(b->behavior, spec->behavior, sizeof b->behavior);
    memcpy(b->norm, spec->norm, sizeof b->norm);
    b->n_norm = spec->n_norm;
    int rc = bpe_setup(b, t, spec->regex, spec->n_regex, "tokenizer.json", err);
    if (!rc) rc = add_merges(b, merges, n_merges, err);
    if (rc) {
        tok_bpe_free(b);
        return rc;
    }
    *out = b;
    return 0;
}

void tok_bpe_free(tok_bpe *b) {
    if (!b) return;
    for (int i = 0; i < b->n_re; i++)
        pcre2_code_free(b->re[i]);
    TPS_FREE_ALL(b->mslots, b->merges, b->mtext, b);
}

/* ======================================================================== */
/* Encode                                                                    */
/* ======================================================================== */

typedef struct span {
    size_t off, len;
} span;

typedef struct span_list {
    span *v;
    size_t n, cap;
} span_list;

static int span_push(span_list *l, size_t off, size_t len) {
    if (TPS_GROW(l->v, l->cap, l->n + 1, 64)) return TPS_ENOMEM;
    l->v[l->n++] = (span){off, len};
    return 0;
}

typedef struct bpe_sym {
    int32_t prev, next;
    size_t start, n;
} bpe_sym;

typedef struct bpe_pair {
    int32_t left, right, rank;
    size_t left_n, size; /* to recognise stale entries */
} bpe_pair;

/* Per-call scratch, grown as needed and reused across pieces. */
typedef struct bpe_scratch {
    char *enc;
    size_t enc_cap;
    bpe_sym *sym;
    size_t sym_cap;
    bpe_pair *heap;
    size_t heap_n, heap_cap;
} bpe_scratch;

/* Lower rank first; equal ranks: the leftmost pair. */
static bool pair_before(const void *pa, const void *pb) {
    const bpe_pair *a = pa, *b = pb;
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static int try_pair(const tok_bpe *b, bpe_scratch *s, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return 0;
    const bpe_sym *l = &s->sym[left], *r = &s->sym[right];
    int32_t rank = merge_rank(b, s->enc + l->start, l->n, s->enc + r->start, r->n);
    if (rank < 0) return 0;
    const bpe_pair p = {left, right, rank, l->n, l->n + r->n};
    if (TPS_GROW(s->heap, s->heap_cap, s->heap_n + 1, 64)) return TPS_ENOMEM;
    tps_heap_push(s->heap, s->heap_n++, &p, sizeof p, pair_before);
    return 0;
}

/* The piece's symbols before merging, into s->enc / s->sym: byte-level,
 * one GPT-2 character per byte; else one per UTF-8 character (a byte on
 * its own where the UTF-8 is cut short). Returns the number of symbols,
 * -1 when out of memory. */
static int32_t piece_symbols(const tok_bpe *b, const char *p, size_t len, bpe_scratch *s,
                             size_t *n_enc) {
    if (TPS_GROW(s->enc, s->enc_cap, len * 2, 64)) return -1;
    size_t n = 0;
    if (b->byte_level) {
        for (size_t i = 0; i < len; i++) {
            uint8_t c = (uint8_t)p[i];
            memcpy(s->enc + n, b->enc[c], b->enc_len[c]);
            n += b->enc_len[c];
        }
    } else {
        memcpy(s->enc, p, len);
        n = len;
    }
    *n_enc = n;
    if (TPS_GROW(s->sym, s->sym_cap, n, 64)) return -1;
    int32_t nsym = 0;
    for (size_t off = 0; off < n;) {
        size_t l = tok_utf8_len((uint8_t)s->enc[off]);
        if (l > n - off) l = 1;
        s->sym[nsym] = (bpe_sym){nsym - 1, off + l == n ? -1 : nsym + 1, off, l};
        off += l;
        nsym++;
    }
    return nsym;
}

/* A final symbol that is no token: byte-level, each of its bytes that is
 * one (llama.cpp's fallback); with byte fallback its <0xNN> tokens when
 * all exist; else the unknown token, consecutive ones fused (Hugging
 * Face's fuse_unk). */
static int emit_unknown(const tokenizer *t, const char *str, size_t n, tok_ids *out) {
    const tok_bpe *b = t->bpe;
    int rc = 0;
    if (b->byte_level) {
        for (size_t j = 0; j < n && !rc; j++) {
            int32_t id = tok_lookup(t, str + j, 1);
            if (id != TOKEN_NONE) rc = tok_ids_push(out, id);
        }
        return rc;
    }
    bool bytes = b->byte_fallback;
    for (size_t j = 0; j < n && bytes; j++)
        bytes = t->byte_id[(uint8_t)str[j]] != TOKEN_NONE;
    if (bytes) {
        for (size_t j = 0; j < n && !rc; j++)
            rc = tok_ids_push(out, t->byte_id[(uint8_t)str[j]]);
        return rc;
    }
    if (t->unk == TOKEN_NONE || (out->n && out->v[out->n - 1] == t->unk)) return 0;
    return tok_ids_push(out, t->unk);
}

/* One pre-tokenized piece: map, merge, emit. */
static int encode_piece(const tokenizer *t, const char *p, size_t len, bpe_scratch *s,
                        tok_ids *out) {
    const tok_bpe *b = t->bpe;
    size_t n;
    int32_t nsym = piece_symbols(b, p, len, s, &n);
    if (nsym < 0) return TPS_ENOMEM;
    if (b->ignore_merges) {
        int32_t id = tok_lookup(t, s->enc, n);
        if (id != TOKEN_NONE) return tok_ids_push(out, id);
    }
    s->heap_n = 0;
    int rc = 0;
    for (int32_t i = 1; i < nsym && !rc; i++)
        rc = try_pair(b, s, i - 1, i);
    while (s->heap_n && !rc) {
        bpe_pair pr;
        tps_heap_pop(s->heap, s->heap_n--, sizeof pr, pair_before, &pr);
        bpe_sym *l = &s->sym[pr.left], *r = &s->sym[pr.right];
        if (l->n == 0 || r->n == 0 || l->n != pr.left_n || l->n + r->n != pr.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s->sym[r->next].prev = pr.left;
        rc = try_pair(b, s, l->prev, pr.left);
        if (!rc) rc = try_pair(b, s, pr.left, l->next);
    }
    for (int32_t i = 0; nsym > 0 && i != -1 && !rc; i = s->sym[i].next) {
        const char *str = s->enc + s->sym[i].start;
        int32_t id = tok_lookup(t, str, s->sym[i].n);
        rc = id != TOKEN_NONE ? tok_ids_push(out, id) : emit_unknown(t, str, s->sym[i].n, out);
    }
    return rc;
}

/* Splits each span of `in` into regex matches and the unmatched stretches
 * between them. Each span is matched as a string of its own, so
 * lookarounds do not see past it, as in llama.cpp and Hugging Face.
 * behavior (tok_split): a match is a piece of its own (isolated), joins
 * the stretch before it (merged with previous) or after it (merged with
 * next), or is dropped (removed). */
static int split_spans(const pcre2_code *re, int behavior, pcre2_match_data *md, const char *text,
                       const span_list *in, span_list *out) {
    out->n = 0;
    int rc = 0;
    for (size_t k = 0; k < in->n && !rc; k++) {
        const char *subj = text + in->v[k].off;
        size_t len = in->v[k].len, done = 0, from = 0, base = in->v[k].off;
        while (from < len && !rc) {
            int m = pcre2_match(re, (PCRE2_SPTR)subj, len, from, 0, md, NULL);
            if (m < 0 && m != PCRE2_ERROR_NOMATCH) /* JIT stack or match limit: retry slowly */
                m = pcre2_match(re, (PCRE2_SPTR)subj, len, from, PCRE2_NO_JIT, md, NULL);
            if (m < 0) break; /* no match (or still failing): the rest is one piece */
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            size_t ms = ov[0], me = ov[1];
            if (me <= ms) { /* empty match: step one character */
                from = ms + tok_utf8_len((uint8_t)subj[ms]);
                continue;
            }
            if (behavior == TOK_SPLIT_MERGED_PREV) {
                rc = span_push(out, base + done, me - done);
            } else if (behavior == TOK_SPLIT_MERGED_NEXT) {
                if (ms > done) rc = span_push(out, base + done, ms - done);
                done = ms; /* the match starts the next piece */
                from = me;
                continue;
            } else {
                if (ms > done) rc = span_push(out, base + done, ms - done);
                if (!rc && behavior != TOK_SPLIT_REMOVED) rc = span_push(out, base + ms, me - ms);
            }
            done = from = me;
        }
        if (!rc && done < len) rc = span_push(out, base + done, len - done);
    }
    return rc;
}

/* Prepends s to buf's text, in place, using tmp. */
static void prepend(sbuf *buf, sbuf *tmp, const char *s) {
    sbuf_truncate(tmp, 0);
    sbuf_adds(tmp, s);
    sbuf_add(tmp, buf->p, buf->len);
    sbuf_truncate(buf, 0);
    sbuf_add(buf, tmp->p, tmp->len);
}

/* Whether a Metaspace-style prefix `to` goes before buf's text. */
static bool wants_prefix(const tok_norm *nm, const sbuf *buf, bool at_start) {
    size_t n = strlen(nm->to);
    bool has = buf->len >= n && !memcmp(buf->p, nm->to, n);
    return buf->len && !has && (nm->kind == TOK_NORM_PREFIX_ALWAYS || at_start);
}

/* The normalizer steps on buf's text, in place. 0, or TPS_ENOMEM. */
static int normalize(const tok_bpe *b, sbuf *buf, bool at_start) {
    sbuf tmp;
    sbuf_init(&tmp);
    for (int i = 0; i < b->n_norm && !sbuf_failed(buf); i++) {
        const tok_norm *nm = &b->norm[i];
        if (nm->kind == TOK_NORM_NFC) {
            if (tok_nfc(buf)) break;
        } else if (nm->kind == TOK_NORM_PREPEND) {
            if (buf->len) prepend(buf, &tmp, nm->to); /* Hugging Face: not to empty text */
        } else if (nm->kind == TOK_NORM_PREFIX_ALWAYS || nm->kind == TOK_NORM_PREFIX_FIRST) {
            if (wants_prefix(nm, buf, at_start)) prepend(buf, &tmp, nm->to);
        } else if (nm->kind == TOK_NORM_REPLACE && nm->from[0]) {
            size_t fl = strlen(nm->from);
            sbuf_truncate(&tmp, 0);
            for (size_t r = 0; r < buf->len;) {
                if (r + fl <= buf->len && !memcmp(buf->p + r, nm->from, fl)) {
                    sbuf_adds(&tmp, nm->to);
                    r += fl;
                } else {
                    sbuf_add(&tmp, buf->p + r++, 1);
                }
            }
            sbuf_truncate(buf, 0);
            sbuf_add(buf, tmp.p ? tmp.p : "", tmp.len);
        }
    }
    int rc = sbuf_failed(buf) || sbuf_failed(&tmp) ? TPS_ENOMEM : 0;
    sbuf_free(&tmp);
    return rc;
}

int tok_bpe_encode(const tokenizer *t, const char *text, size_t len, bool at_start, tok_ids *out,
                   tps_err *err) {
    const tok_bpe *b = t->bpe;
    if (len > (size_t)INT32_MAX / 4)
        return tps_fail(err, TPS_ERANGE, "tokenizer: text of %zu bytes is too long (max %d)", len,
                        INT32_MAX / 4);
    sbuf norm;
    sbuf_init(&norm);
    int rc = 0;
    if (b->n_norm || b->prefix_space) {
        if (b->prefix_space && len && text[0] != ' ') sbuf_add(&norm, " ", 1);
        sbuf_add(&norm, text, len);
        rc = sbuf_failed(&norm) ? TPS_ENOMEM : normalize(b, &norm, at_start);
        text = norm.p ? norm.p : "";
        len = norm.len;
    }
    span_list a = {0}, c = {0};
    bpe_scratch s = {0};
    pcre2_match_data *md = rc ? NULL : pcre2_match_data_create(1, NULL);
    rc = md ? span_push(&a, 0, len) : TPS_ENOMEM;
    for (int i = 0; i < b->n_re && !rc; i++) {
        rc = split_spans(b->re[i], b->behavior[i], md, text, &a, &c);
        span_list tmp = a;
        a = c;
        c = tmp;
    }
    for (size_t i = 0; i < a.n && !rc; i++)
        rc = encode_piece(t, text + a.v[i].off, a.v[i].len, &s, out);
    pcre2_match_data_free(md);
    TPS_FREE_ALL(s.heap, s.sym, s.enc, c.v, a.v);
    sbuf_free(&norm);
    if (rc) return tps_fail(err, TPS_ENOMEM, "tokenizer: out of memory (text of %zu bytes)", len);
    return 0;
}
