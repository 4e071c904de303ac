/* SentencePiece-style (BPE-by-score) tokenization of one text fragment, the
 * algorithm of llama.cpp's llm_tokenizer_spm: split the escaped text into
 * UTF-8 symbols, repeatedly merge the adjacent pair whose concatenation is the
 * vocabulary token with the highest score (ties: leftmost), then emit each
 * final symbol's id, or its bytes as <0xNN> tokens when it is not in the
 * vocabulary. Special tokens, BOS/EOS and the fragment splitting are
 * tokenizer.c's job. All scratch is per call. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "model/tokenizer_internal.h"
#include "base/grow.h"
#include "base/heap.h"

typedef struct spm_sym {
    int32_t prev, next; /* neighbours in the live chain, -1 at the ends */
    size_t start, n;    /* bytes of the escaped text; n = 0 once merged away */
} spm_sym;

typedef struct spm_pair {
    int32_t left, right;
    float score;
    size_t size; /* bytes of left + right when queued: stale if they changed */
} spm_pair;

typedef struct spm_heap {
    spm_pair *v;
    size_t n, cap;
} spm_heap;

/* Higher score first; equal scores: the leftmost pair. */
static bool pair_before(const void *pa, const void *pb) {
    const spm_pair *a = pa, *b = pb;
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

/* Queues (left, right) if their concatenation is a vocabulary token. */
static int try_pair(const tokenizer *t, const char *esc, const spm_sym *sym, spm_heap *h,
                    int32_t left, int32_t right) {
    if (left < 0 || right < 0) return 0;
    size_t size = sym[left].n + sym[right].n;
    int32_t id = tok_lookup(t, esc + sym[left].start, size);
    if (id == TOKEN_NONE) return 0;
    const spm_pair p = {left, right, t->score[id], size};
    if (TPS_GROW(h->v, h->cap, h->n + 1, 64)) return TPS_ENOMEM;
    tps_heap_push(h->v, h->n++, &p, sizeof p, pair_before);
    return 0;
}

static int emit_bytes(const tokenizer *t, const char *s, size_t n, tok_ids *out) {
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[(uint8_t)s[i]];
        if (id == TOKEN_NONE) id = t->unk; /* a vocab without byte tokens */
        if (id != TOKEN_NONE && tok_ids_push(out, id)) return TPS_ENOMEM;
    }
    return 0;
}

/* Escapes text into esc (room for len * 3 + 3): an optional leading ▁, and
 * every ' ' -> ▁. Returns the escaped length. */
static size_t escape_spaces(char *esc, const char *text, size_t len, bool prefix_space) {
    static const char ws[3] = {'\xe2', '\x96', '\x81'}; /* U+2581 ▁ */
    size_t n = 0;
    if (prefix_space) {
        memcpy(esc, ws, 3);
        n = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(esc + n, ws, 3);
            n += 3;
        } else {
            esc[n++] = text[i];
        }
    }
    return n;
}

/* One symbol per UTF-8 character of esc (n > 0 bytes), chained. A byte that
 * does not start a complete sequence is a symbol of its own. (llama.cpp
 * trusts the lead byte, so a stray lead byte swallows the next bytes, e.g.
 * half of a following ▁, and decode cannot give the text back; for valid
 * UTF-8 both agree.) Returns the symbol count. */
static int32_t split_chars(spm_sym *sym, const char *esc, size_t n) {
    int32_t nsym = 0;
    for (size_t off = 0; off < n;) {
        size_t l = tok_utf8_len((uint8_t)esc[off]);
        if (l > n - off) l = n - off;
        for (size_t k = 1; k < l; k++)
            if (((uint8_t)esc[off + k] & 0xC0) != 0x80) l = 1; /* see above */
        sym[nsym] = (spm_sym){nsym - 1, off + l == n ? -1 : nsym + 1, off, l};
        off += l;
        nsym++;
    }
    return nsym;
}

/* Merges the best-scoring adjacent pair until no pair is a vocabulary token. */
static int merge_pairs(const tokenizer *t, const char *esc, spm_sym *sym, int32_t nsym,
                       spm_heap *heap) {
    int rc = 0;
    for (int32_t i = 1; i < nsym && !rc; i++)
        rc = try_pair(t, esc, sym, heap, i - 1, i);

    while (heap->n && !rc) {
        spm_pair p;
        tps_heap_pop(heap->v, heap->n--, sizeof p, pair_before, &p);
        spm_sym *l = &sym[p.left], *r = &sym[p.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != p.size) continue; /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = p.left;
        rc = try_pair(t, esc, sym, heap, l->prev, p.left);
        if (!rc) rc = try_pair(t, esc, sym, heap, p.left, l->next);
    }
    return rc;
}

/* The id of each symbol left in the chain from sym[0], or its bytes. */
static int emit_symbols(const tokenizer *t, const char *esc, const spm_sym *sym, tok_ids *out) {
    int rc = 0;
    for (int32_t i = 0; i != -1 && !rc; i = sym[i].next) {
        int32_t id = tok_lookup(t, esc + sym[i].start, sym[i].n);
        if (id != TOKEN_NONE)
            rc = tok_ids_push(out, id);
        else
            rc = emit_bytes(t, esc + sym[i].start, sym[i].n, out);
    }
    return rc;
}

int tok_spm_encode(const tokenizer *t, const char *text, size_t len, bool prefix_space,
                   tok_ids *out, tps_err *err) {
    if (len > (size_t)INT32_MAX / 3 - 1)
        return tps_fail(err, TPS_ERANGE, "tokenizer: text of %zu bytes is too long (max %d)", len,
                        INT32_MAX / 3 - 1);
    char *esc = malloc(len * 3 + 3);
    spm_sym *sym = NULL;
    spm_heap heap = {0};
    int rc = 0;
    if (!esc) {
        rc = TPS_ENOMEM;
        goto done;
    }
    size_t n = escape_spaces(esc, text, len, prefix_space);
    if (n == 0) goto done;
    /* At most one symbol per escaped byte (an invalid lead byte can swallow
     * the first bytes of a following ▁, leaving its tail as 1-byte symbols). */
    sym = malloc(n * sizeof *sym);
    if (!sym) {
        rc = TPS_ENOMEM;
        goto done;
    }
    int32_t nsym = split_chars(sym, esc, n);
    rc = merge_pairs(t, esc, sym, nsym, &heap);
    if (!rc) rc = emit_symbols(t, esc, sym, out);
done:
    free(heap.v);
    free(sym);
    free(esc);
    if (rc == TPS_ENOMEM)
        return tps_fail(err, rc, "tokenizer: out of memory (text of %zu bytes)", len);
    return rc;
}
