/* The vocabulary trie (constraint.h): every token's bytes in one byte trie,
 * laid out in preorder with each node's subtree end, built once per
 * tokenizer and then read-only (shared by every sequence and thread).
 *
 * Not here: walking it under a grammar (constraint_mask.c). */
#include "constrain/constraint_internal.h"

#include <stdlib.h>
#include <string.h>

#include "base/free_all.h"

#define TRIE_MAX_PIECE 65535u /* longer pieces are left out (none exist in practice) */

static int cmp_piece(const void *pa, const void *pb, void *ctx) {
    const vocab_trie *t = ctx;
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    size_t la = t->tok_len[a], lb = t->tok_len[b];
    int c = memcmp(t->blob + t->tok_off[a], t->blob + t->tok_off[b], la < lb ? la : lb);
    if (c) return c;
    if (la != lb) return la < lb ? -1 : 1;
    return a < b ? -1 : a > b;
}

void vocab_trie_free(vocab_trie *t) {
    if (!t) return;
    TPS_FREE_ALL(t->nodes, t->ids, t->tok_off, t->tok_len, t->blob, t);
}

uint32_t vocab_trie_nodes(const vocab_trie *t) {
    return t->n_nodes;
}

/* Builds the preorder nodes from the sorted ids: each token opens the nodes
 * past its common prefix with the previous one and closes those deeper. */
static int trie_link(vocab_trie *t, size_t total) {
    t->nodes = malloc((total ? total : 1) * sizeof *t->nodes);
    uint32_t *path = malloc((t->max_depth + 1) * sizeof *path);
    if (!t->nodes || !path) {
        free(path);
        return TPS_ENOMEM;
    }
    uint32_t depth = 0, n = 0;
    const char *prev = NULL;
    size_t prev_len = 0;
    for (uint32_t k = 0; k < t->n_ids; k++) {
        int32_t id = t->ids[k];
        const char *b = t->blob + t->tok_off[id];
        size_t len = t->tok_len[id], lcp = 0;
        while (prev && lcp < len && lcp < prev_len && b[lcp] == prev[lcp])
            lcp++;
        for (; depth > lcp; depth--)
            t->nodes[path[depth]].end = n;
        for (; depth < len; depth++) {
            t->nodes[n] = (trie_node){.byte = (uint8_t)b[depth], .depth = (uint16_t)(depth + 1)};
            path[depth + 1] = n++;
        }
        trie_node *nd = &t->nodes[path[len]];
        if (!nd->tok_n) nd->tok_begin = k;
        nd->tok_n++;
        prev = b, prev_len = len;
    }
    for (; depth > 0; depth--)
        t->nodes[path[depth]].end = n;
    t->n_nodes = n;
    free(path);
    return 0;
}

int vocab_trie_build(vocab_trie **out, const tokenizer *tok, uint32_t n_vocab, tps_err *err) {
    *out = NULL;
    vocab_trie *t = calloc(1, sizeof *t);
    if (!t) return tps_fail(err, TPS_ENOMEM, "constraint: out of memory");
    t->n_vocab = n_vocab;
    t->tok_off = calloc(n_vocab ? n_vocab : 1, sizeof *t->tok_off);
    t->tok_len = calloc(n_vocab ? n_vocab : 1, sizeof *t->tok_len);
    t->ids = malloc((n_vocab ? n_vocab : 1) * sizeof *t->ids);
    size_t total = 0;
    uint32_t tv = tokenizer_n_vocab(tok);
    for (uint32_t i = 0; i < n_vocab && i < tv; i++) {
        size_t len = 0;
        tokenizer_piece(tok, (int32_t)i, false, &len);
        if (len <= TRIE_MAX_PIECE) total += len;
    }
    t->blob = malloc(total ? total : 1);
    if (!t->tok_off || !t->tok_len || !t->ids || !t->blob) {
        vocab_trie_free(t);
        return tps_fail(err, TPS_ENOMEM, "constraint: out of memory for the vocabulary trie");
    }
    size_t off = 0;
    for (uint32_t i = 0; i < n_vocab && i < tv; i++) {
        size_t len = 0;
        const char *p = tokenizer_piece(tok, (int32_t)i, false, &len);
        if (!p || !len || len > TRIE_MAX_PIECE) continue;
        memcpy(t->blob + off, p, len);
        t->tok_off[i] = (uint32_t)off;
        t->tok_len[i] = (uint16_t)len;
        off += len;
        t->ids[t->n_ids++] = (int32_t)i;
        if (len > t->max_depth) t->max_depth = (uint32_t)len;
    }
    qsort_r(t->ids, t->n_ids, sizeof *t->ids, cmp_piece, t);
    if (trie_link(t, total)) {
        vocab_trie_free(t);
        return tps_fail(err, TPS_ENOMEM, "constraint: out of memory for the vocabulary trie");
    }
    *out = t;
    return 0;
}
