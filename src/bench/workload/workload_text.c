/* Synthetic text of a given length in model tokens (workload_internal.h):
 * random words after a number, grown by batches and trimmed word by word
 * while re-counting, so prompts hit their token counts. */
#include <stdio.h>
#include <string.h>

#include "bench/workload/workload_internal.h"

static const char *const WORDS[] = {
    "the",   "little", "girl",  "saw",   "a",     "big",   "red",    "ball",  "in",   "park",
    "she",   "was",    "happy", "and",   "ran",   "to",    "her",    "mom",   "one",  "day",
    "boy",   "named",  "Tim",   "found", "shiny", "stone", "under",  "tree",  "they", "played",
    "with",  "dog",    "sun",   "sky",   "blue",  "bird",  "sang",   "song",  "fish", "swam",
    "cat",   "jumped", "over",  "wall",  "cake",  "sweet", "friend", "help",  "box",  "toy",
    "car",   "fast",   "slow",  "rain",  "fell",  "warm",  "cold",   "house", "door", "open",
    "green", "grass",  "small", "kind"};
#define N_WORDS (sizeof WORDS / sizeof WORDS[0])

/* Word boundaries to take words off again: a ring of the last MARKS_KEPT
 * ends, enough for the trim below, whatever the prompt's length. */
#define MARKS_KEPT 64

typedef struct marks {
    size_t at[MARKS_KEPT];
    size_t n; /* pushed, of which the last min(n, MARKS_KEPT) are kept */
    size_t popped;
} marks;

static void marks_push(marks *m, size_t len) {
    m->at[m->n++ % MARKS_KEPT] = len;
}

static bool marks_pop(marks *m, size_t *len) {
    if (m->n == 0 || m->popped == MARKS_KEPT) return false;
    *len = m->at[--m->n % MARKS_KEPT];
    m->popped++;
    return true;
}

/* Text of `target` tokens (as close as counting allows) after s's first
 * `keep` bytes (a shared prefix and its space, or nothing): "<number> "
 * then random words, adjusted by re-counting the whole text. Returns the
 * count reached (or target when nothing can count); -1 when counting
 * failed. Never removes any of the kept bytes. */
int64_t wl_text(sbuf *s, size_t keep, size_t number, uint32_t target, wl_counter *c, tps_rng *r) {
    sbuf_truncate(s, keep);
    char head[32];
    snprintf(head, sizeof head, "%zu", number);
    if (wl_add(s, head)) return -1;
    marks mk = {0};
    const bool can_count = wl_can_count(c);
    int64_t have = can_count ? wl_count_tokens(c, s->p) : 1;
    if (have < 0) return -1;
    /* grow by words, re-counting after each batch; batches shrink as the
     * measured tokens-per-word ratio says we are close */
    const int64_t base = have;
    size_t words = 0;
    for (int iter = 0; iter < 100000 && have < (int64_t)target; iter++) {
        int64_t gap = (int64_t)target - have;
        double ratio = words ? (double)(have - base) / (double)words : 4.0;
        if (ratio < 0.5) ratio = 0.5;
        int64_t add = can_count ? (int64_t)((double)gap / ratio * 0.9) : gap;
        if (add < 1) add = 1;
        words += (size_t)add;
        for (int64_t k = 0; k < add; k++) {
            marks_push(&mk, s->len);
            if (wl_add(s, " ") || wl_add(s, WORDS[load_rng_below(r, N_WORDS)])) return -1;
        }
        have = can_count ? wl_count_tokens(c, s->p) : have + add;
        if (have < 0) return -1;
    }
    /* overshot: drop trailing words while that keeps us >= target, then pad */
    size_t at;
    for (int k = 0; k < MARKS_KEPT && have > (int64_t)target && marks_pop(&mk, &at); k++) {
        sbuf_truncate(s, at);
        have = wl_count_tokens(c, s->p);
        if (have < 0) return -1;
        /* under again: try single-letter fillers, which are often one token */
        static const char *const FILL[] = {" a", " I", ".", ","};
        for (int f = 0; f < 4 && have < (int64_t)target; f++) {
            size_t keep_len = s->len;
            if (wl_add(s, FILL[f])) return -1;
            int64_t h2 = wl_count_tokens(c, s->p);
            if (h2 < 0) return -1;
            if (h2 > (int64_t)target)
                sbuf_truncate(s, keep_len);
            else
                have = h2, f = -1;
        }
    }
    return have;
}
