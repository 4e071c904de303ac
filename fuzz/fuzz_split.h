/* What the splitter harnesses (fuzz_harmony.c, fuzz_think.c) collect and
 * compare: every byte a splitter hands on, in order, and each part's bytes,
 * for a text fed whole and the same text fed in pieces. Not here: the
 * splitters' own rules (each harness checks those). */
#ifndef TPS_FUZZ_SPLIT_H
#define TPS_FUZZ_SPLIT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SPLIT_PARTS_MAX 4

typedef struct split_out {
    uint8_t *all, *parts[SPLIT_PARTS_MAX];
    size_t n_all, n[SPLIT_PARTS_MAX];
} split_out;

/* Room for a text of n bytes in a and b, for n_parts parts each, in one
 * allocation (the return value: free it; NULL when out of memory). */
static inline uint8_t *split_out_init(split_out *a, split_out *b, size_t n, int n_parts) {
    size_t w = n + 1;
    uint8_t *buf = malloc(2 * (size_t)(1 + n_parts) * w);
    if (!buf) return NULL;
    memset(a, 0, sizeof *a);
    memset(b, 0, sizeof *b);
    uint8_t *at = buf;
    split_out *both[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        both[k]->all = at;
        at += w;
        for (int p = 0; p < n_parts; p++, at += w)
            both[k]->parts[p] = at;
    }
    return buf;
}

/* A sink's body: n (> 0) bytes of part p; aborts on an empty hand-on. */
static inline void split_out_add(split_out *o, int part, const char *p, size_t n) {
    if (!n) abort();
    memcpy(o->all + o->n_all, p, n);
    o->n_all += n;
    memcpy(o->parts[part] + o->n[part], p, n);
    o->n[part] += n;
}

/* Aborts unless a handed on the text exactly, in order, and b split it
 * into the same parts. */
static inline void split_out_check(const split_out *a, const split_out *b, const uint8_t *text,
                                   size_t n, int n_parts) {
    if (a->n_all != n || memcmp(a->all, text, n)) abort(); /* the text, in order */
    for (int p = 0; p < n_parts; p++)
        if (a->n[p] != b->n[p] || memcmp(a->parts[p], b->parts[p], a->n[p])) abort();
}

/* Feeds a splitter a text of n bytes: run(ctx, text, n, step, out) feeds
 * text in pieces of step bytes (the last shorter) into out. */
typedef void split_run_fn(const void *ctx, const uint8_t *text, size_t n, size_t step,
                          split_out *out);

/* The text fed whole into a and in pieces of step into b, then checked
 * (split_out_check, aborting on a difference). Returns the allocation of
 * split_out_init (free it after reading a and b; NULL when out of memory,
 * a and b then unfilled). */
static inline uint8_t *split_out_whole_and_pieces(split_out *a, split_out *b, const uint8_t *text,
                                                  size_t n, size_t step, int n_parts,
                                                  split_run_fn *run, const void *ctx) {
    uint8_t *buf = split_out_init(a, b, n, n_parts);
    if (!buf) return NULL;
    run(ctx, text, n, n ? n : 1, a);
    run(ctx, text, n, step, b);
    split_out_check(a, b, text, n, n_parts);
    return buf;
}

#endif
