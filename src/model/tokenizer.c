/* The tokenizer object once loaded (tokenizer_load.c): its queries,
 * special-token splitting, the encode entry point that dispatches to the
 * SPM or BPE algorithm, token pieces and full-text decode. The merge
 * algorithms themselves live in tokenizer_spm.c / tokenizer_bpe.c, the
 * streaming detokenizer in tokenizer_stream.c. Holds no global state. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/tokenizer_internal.h"

/* ======================================================================== */
/* Queries                                                                   */
/* ======================================================================== */

tokenizer_kind tokenizer_type(const tokenizer *t) {
    return t->kind;
}
uint32_t tokenizer_n_vocab(const tokenizer *t) {
    return t->n_vocab;
}
int32_t tokenizer_bos(const tokenizer *t) {
    return t->bos;
}
int32_t tokenizer_eos(const tokenizer *t) {
    return t->eos;
}
int32_t tokenizer_unk(const tokenizer *t) {
    return t->unk;
}
int32_t tokenizer_pad(const tokenizer *t) {
    return t->pad;
}
bool tokenizer_adds_bos(const tokenizer *t) {
    return t->add_bos;
}
bool tokenizer_adds_eos(const tokenizer *t) {
    return t->add_eos;
}

bool tokenizer_is_eog(const tokenizer *t, int32_t id) {
    if (id == TOKEN_NONE) return false;
    for (size_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) return true;
    return false;
}

void tokenizer_render_as_text(tokenizer *t, int32_t id) {
    if (tok_valid_id(t, id))
        t->attr[id] = (uint8_t)((t->attr[id] & ~TOK_ATTR_CONTROL) | TOK_ATTR_USER_DEFINED);
}

int tokenizer_token_type(const tokenizer *t, int32_t id) {
    return tok_valid_id(t, id) ? t->type[id] : 0;
}

bool tokenizer_is_control(const tokenizer *t, int32_t id) {
    return tok_valid_id(t, id) && (t->attr[id] & TOK_ATTR_CONTROL);
}

const char *tokenizer_token_text(const tokenizer *t, int32_t id, size_t *len) {
    if (!tok_valid_id(t, id)) {
        *len = 0;
        return NULL;
    }
    *len = t->text_off[id + 1] - t->text_off[id];
    return t->text + t->text_off[id];
}

int32_t tokenizer_find(const tokenizer *t, const char *text, size_t len) {
    return tok_lookup(t, text, len);
}

/* ======================================================================== */
/* Encode                                                                    */
/* ======================================================================== */

/* A stretch of the input: raw text (id == TOKEN_NONE) or one special token. */
typedef struct fragment {
    int32_t id;
    size_t off, len;
} fragment;

typedef struct frag_list {
    fragment *v;
    size_t n, cap;
} frag_list;

static int frag_push(frag_list *l, int32_t id, size_t off, size_t len) {
    if (TPS_GROW(l->v, l->cap, l->n + 1, 16)) return TPS_ENOMEM;
    l->v[l->n++] = (fragment){id, off, len};
    return 0;
}

/* Splits text on occurrences of special tokens, longest token first, as
 * llama.cpp's tokenizer_st_partition does; result in *out. */
static int partition(const tokenizer *t, const char *text, size_t len, bool parse_special,
                     frag_list *out) {
    frag_list a = {0}, b = {0};
    int rc = frag_push(&a, TOKEN_NONE, 0, len);
    for (size_t s = 0; s < t->n_special && !rc; s++) {
        int32_t id = t->special[s];
        if (!parse_special && (t->attr[id] & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN))) continue;
        const char *st = t->text + t->text_off[id];
        size_t sl = t->text_off[id + 1] - t->text_off[id];
        if (sl == 0) continue; /* empty: it would match everywhere and never advance */
        bool any = false;
        for (size_t i = 0; i < a.n && !any; i++)
            any = a.v[i].id == TOKEN_NONE && memmem(text + a.v[i].off, a.v[i].len, st, sl);
        if (!any) continue;
        b.n = 0;
        for (size_t i = 0; i < a.n && !rc; i++) {
            fragment f = a.v[i];
            if (f.id != TOKEN_NONE) {
                rc = frag_push(&b, f.id, f.off, f.len);
                continue;
            }
            size_t pos = f.off, end = f.off + f.len;
            const char *p;
            while (!rc && pos < end && (p = memmem(text + pos, end - pos, st, sl))) {
                size_t m = (size_t)(p - text);
                if (m > pos) rc = frag_push(&b, TOKEN_NONE, pos, m - pos);
                if (!rc) rc = frag_push(&b, id, m, sl);
                pos = m + sl;
                if (t->attr[id] & TOK_ATTR_RSTRIP)
                    while (pos < end && isspace((unsigned char)text[pos]))
                        pos++;
            }
            if (!rc && pos < end) rc = frag_push(&b, TOKEN_NONE, pos, end - pos);
        }
        frag_list tmp = a;
        a = b;
        b = tmp;
    }
    free(b.v);
    if (rc) {
        free(a.v);
        return rc;
    }
    *out = a;
    return 0;
}

static int encode_ids(const tokenizer *t, const char *text, size_t len, unsigned flags,
                      tok_ids *ids, tps_err *err) {
    bool add_special = flags & TOK_ENCODE_ADD_SPECIAL;
    if (len && !text) return tps_fail(err, TPS_EINVAL, "tokenizer: NULL text of %zu bytes", len);
    if (add_special && t->add_bos && tok_ids_push(ids, t->bos))
        return tps_fail(err, TPS_ENOMEM, "tokenizer: out of memory");
    frag_list frags = {0};
    if (len && partition(t, text, len, flags & TOK_ENCODE_PARSE_SPECIAL, &frags))
        return tps_fail(err, TPS_ENOMEM, "tokenizer: out of memory splitting special tokens");
    int rc = 0;
    bool prev_special = true; /* SPM: a dummy prefix space at the start and after specials */
    for (size_t i = 0; i < frags.n && !rc; i++) {
        const fragment *f = &frags.v[i];
        if (f->id != TOKEN_NONE) {
            if (tok_ids_push(ids, f->id))
                rc = tps_fail(err, TPS_ENOMEM, "tokenizer: out of memory");
            prev_special = true;
        } else if (!t->bpe) { /* SentencePiece; a tokenizer.json's BPE of ▁ pieces merges */
            rc = tok_spm_encode(t, text + f->off, f->len, t->add_space_prefix && prev_special, ids,
                                err);
            prev_special = false;
        } else {
            rc = tok_bpe_encode(t, text + f->off, f->len, f->off == 0, ids, err);
        }
    }
    free(frags.v);
    if (!rc && add_special && t->add_eos && tok_ids_push(ids, t->eos))
        rc = tps_fail(err, TPS_ENOMEM, "tokenizer: out of memory");
    return rc;
}

int tokenizer_encode(const tokenizer *t, const char *text, size_t len, unsigned flags, int32_t *out,
                     size_t cap, size_t *n_out, tps_err *err) {
    tok_ids ids = {0};
    *n_out = 0;
    int rc = encode_ids(t, text, len, flags, &ids, err);
    if (!rc) {
        *n_out = ids.n;
        if (ids.n > cap)
            rc = tps_fail(err, TPS_ERANGE, "tokenizer: text needs %zu tokens, buffer holds %zu",
                          ids.n, cap);
        else if (ids.n)
            memcpy(out, ids.v, ids.n * sizeof *out);
    }
    free(ids.v);
    return rc;
}

int tokenizer_encode_alloc(const tokenizer *t, const char *text, size_t len, unsigned flags,
                           int32_t **out, size_t *n_out, tps_err *err) {
    tok_ids ids = {0};
    *out = NULL;
    *n_out = 0;
    int rc = encode_ids(t, text, len, flags, &ids, err);
    if (rc || !ids.n) {
        free(ids.v);
        return rc;
    }
    *out = ids.v;
    *n_out = ids.n;
    return 0;
}

/* ======================================================================== */
/* Pieces and decode                                                         */
/* ======================================================================== */

const char *tokenizer_piece(const tokenizer *t, int32_t id, bool render_special, size_t *len) {
    if (!tok_valid_id(t, id)) {
        *len = 0;
        return NULL;
    }
    const char *p = t->piece + t->piece_off[id];
    if (!render_special && (t->attr[id] & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN))) {
        *len = 0;
        return p;
    }
    *len = t->piece_off[id + 1] - t->piece_off[id];
    return p;
}

/* llama.cpp's post-decode clean-up for BPE vocabs, in place; returns the new
 * length. Pass 1 drops a space before ? ! . , ; pass 2 turns " ' " into "'";
 * pass 3 drops the space before 's 'm 're 've. */
static size_t clean_spaces(char *s, size_t n) {
    if (n == 0) return 0;
    size_t w = 1;
    for (size_t r = 1; r < n; r++) {
        char x = s[r];
        if (s[r - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) w--;
        s[w++] = x;
    }
    n = w;
    w = 1;
    for (size_t r = 1; r < n; r++) {
        char x = s[r];
        if (x == '\'' && r + 1 < n && s[r - 1] == ' ' && s[r + 1] == ' ') {
            w--;        /* the space before */
            s[++r] = 0; /* and the one after, which the next test then sees as 0 */
        }
        s[w++] = x;
    }
    n = w;
    w = 1;
    for (size_t r = 1; r < n; r++) {
        char x = s[r];
        if (s[r - 1] == ' ' && x == '\'' && r + 1 < n) {
            char x1 = s[r + 1];
            if (x1 == 's' || x1 == 'm')
                w--;
            else if (r + 2 < n &&
                     ((x1 == 'r' && s[r + 2] == 'e') || (x1 == 'v' && s[r + 2] == 'e')))
                w--;
        }
        s[w++] = x;
    }
    return w;
}

static int decode_into(const tokenizer *t, const int32_t *ids, size_t n, unsigned flags,
                       char **buf_out, size_t *len_out, tps_err *err) {
    bool render = flags & TOK_DECODE_RENDER_SPECIAL;
    bool raw = flags & TOK_DECODE_RAW_SPACES;
    bool strip = t->add_space_prefix && !raw;
    if ((flags & TOK_DECODE_REMOVE_SPECIAL) && t->add_bos && n > 0 && ids[0] == t->bos) {
        strip = false;
        ids++;
        n--;
    }
    if ((flags & TOK_DECODE_REMOVE_SPECIAL) && t->add_eos && n > 0 && ids[n - 1] == t->eos) n--;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!tok_valid_id(t, ids[i]))
            return tps_fail(err, TPS_ERANGE,
                            "tokenizer: token id %d at position %zu is outside the vocabulary "
                            "(0..%u)",
                            ids[i], i, t->n_vocab - 1);
        size_t l;
        tokenizer_piece(t, ids[i], render, &l);
        total += l;
    }
    char *buf = malloc(total + 1);
    if (!buf)
        return tps_fail(err, TPS_ENOMEM, "tokenizer: out of memory decoding %zu bytes", total);
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        size_t l;
        const char *p = tokenizer_piece(t, ids[i], render, &l);
        if (strip && l && p[0] == ' ') {
            p++;
            l--;
        }
        strip = false;
        memcpy(buf + w, p, l);
        w += l;
    }
    if (t->clean_spaces && !raw) w = clean_spaces(buf, w);
    buf[w] = 0;
    *buf_out = buf;
    *len_out = w;
    return 0;
}

int tokenizer_decode(const tokenizer *t, const int32_t *ids, size_t n, unsigned flags, char *out,
                     size_t cap, size_t *n_out, tps_err *err) {
    char *buf;
    size_t len;
    *n_out = 0;
    int rc = decode_into(t, ids, n, flags, &buf, &len, err);
    if (rc) return rc;
    *n_out = len;
    if (len + 1 > cap) {
        free(buf);
        return tps_fail(err, TPS_ERANGE,
                        "tokenizer: decoded text needs %zu bytes, buffer holds %zu", len + 1, cap);
    }
    memcpy(out, buf, len + 1);
    free(buf);
    return 0;
}

int tokenizer_decode_alloc(const tokenizer *t, const int32_t *ids, size_t n, unsigned flags,
                           char **out, size_t *n_out, tps_err *err) {
    *out = NULL;
    *n_out = 0;
    return decode_into(t, ids, n, flags, out, n_out, err);
}
