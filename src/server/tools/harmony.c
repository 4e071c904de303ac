/* The harmony splitter (harmony.h). Each byte moves a small state machine;
 * runs of bytes of one part go to the sink in one call. A body's held tail
 * is a proper prefix of one of its closing markers, which all begin with
 * "<|" and hold no other '<', so a mismatch needs only the byte that broke
 * it looked at again. Not here: allocation, tokens, JSON. */
#include "server/tools/harmony.h"

#include <string.h>

#include "base/text_run.h"

#define H_CHANNEL "<|channel|>"
#define H_MESSAGE "<|message|>"
#define H_START   "<|start|>"

/* What a header may open with, and what closes a body. */
static const char *const OPENERS[] = {H_CHANNEL, H_START, H_MESSAGE, " to=", NULL};
static const char *const CLOSERS[] = {"<|end|>", "<|call|>", "<|return|>", H_START, NULL};
#define CLOSER_START 3 /* <|start|> closes a body that skipped <|end|>, and opens a header */

void harmony_init(harmony_split *h) {
    memset(h, 0, sizeof *h);
    h->state = HARMONY_HEAD;
}

bool harmony_in_reasoning(const harmony_split *h) {
    return h->state == HARMONY_BODY && h->body == HARMONY_REASONING;
}

/* Runs of one part within the piece being fed go to the caller's sink. */
TEXT_RUN_TYPED(harmony_emit, harmony_sink, harmony_part)

static void held_out(harmony_split *h, text_run *r, harmony_part part) {
    text_run_held(r, part, h->held, h->n_held);
    h->n_held = 0;
}

/* Which of list held[0..n) is a prefix of (-1: none), and whether whole. */
static int prefix_of(const char *const *list, const char *held, size_t n, bool *whole) {
    for (int i = 0; list[i]; i++) {
        size_t l = strlen(list[i]);
        if (n <= l && !memcmp(list[i], held, n)) {
            *whole = n == l;
            return i;
        }
    }
    return -1;
}

static const char *find(const char *s, size_t n, const char *needle) {
    return memmem(s, n, needle, strlen(needle));
}

/* A whole header (ending in <|message|>): where its body goes, from its
 * recipient ("to=X", in the role or the channel part) and channel. */
static harmony_part classify(const char *hd, size_t n) {
    const char *to = find(hd, n, "to=");
    if (to) {
        const char *v = to + 3, *end = hd + n;
        size_t k = 0;
        while (v + k < end && v[k] != ' ' && v[k] != '<' && v[k] != '\n')
            k++;
        if (k > 10 && !memcmp(v, "functions.", 10)) return HARMONY_CALL;
        if (!(k == 9 && !memcmp(v, "assistant", 9))) return HARMONY_MARKER; /* not offered */
    }
    const char *ch = find(hd, n, H_CHANNEL);
    if (ch) {
        const char *v = ch + strlen(H_CHANNEL);
        size_t left = n - (size_t)(v - hd);
        if (left >= 8 && !memcmp(v, "analysis", 8)) return HARMONY_REASONING;
    }
    return HARMONY_CONTENT; /* final, a commentary preamble, no channel */
}

/* HEAD: one byte of a header. */
static void feed_head(harmony_split *h, text_run *r, const char *p) {
    if (h->n_held == HARMONY_MAX_HEADER) { /* no header is this long: not harmony */
        held_out(h, r, h->started ? HARMONY_MARKER : HARMONY_CONTENT);
        h->state = HARMONY_RAW;
        text_run_add(r, HARMONY_CONTENT, p);
        return;
    }
    h->held[h->n_held++] = *p;
    if (!h->started) {
        bool whole = false;
        if (prefix_of(OPENERS, h->held, h->n_held, &whole) < 0) {
            held_out(h, r, HARMONY_CONTENT); /* plain text: the answer ignores the format */
            h->state = HARMONY_RAW;
            return;
        }
        h->started = whole;
        if (!whole) return;
    }
    size_t ml = strlen(H_MESSAGE);
    if (h->n_held < ml || memcmp(h->held + h->n_held - ml, H_MESSAGE, ml)) return;
    harmony_part body = classify(h->held, h->n_held);
    held_out(h, r, body == HARMONY_CALL ? HARMONY_CALL : HARMONY_MARKER);
    h->analysed |= body == HARMONY_REASONING;
    h->body = body;
    h->state = HARMONY_BODY;
}

/* BODY: one byte of a body, or of the marker that closes it. */
static void feed_body(harmony_split *h, text_run *r, const char *p) {
    h->held[h->n_held] = *p;
    bool whole = false;
    int m = prefix_of(CLOSERS, h->held, h->n_held + 1u, &whole);
    if (m >= 0) {
        text_run_flush(r);
        h->n_held++;
        if (!whole) return;
        bool start = m == CLOSER_START;
        if (!start) held_out(h, r, HARMONY_MARKER);
        h->state = HARMONY_HEAD; /* <|start|> is the next header's first marker */
        h->started = start;
        return;
    }
    if (h->n_held) { /* no border: only this byte may begin a marker */
        held_out(h, r, h->body);
        if (*p == '<') {
            h->held[h->n_held++] = *p;
            return;
        }
    }
    text_run_add(r, h->body, p);
}

void harmony_feed(harmony_split *h, const char *p, size_t n, harmony_sink sink, void *ctx) {
    harmony_emit_to to = {sink, ctx};
    text_run r = {.sink = harmony_emit, .ctx = &to};
    for (size_t i = 0; i < n; i++) {
        switch (h->state) {
        case HARMONY_HEAD:
            feed_head(h, &r, p + i);
            break;
        case HARMONY_BODY:
            feed_body(h, &r, p + i);
            break;
        default: /* RAW: the rest of the piece is content */
            text_run_rest(&r, HARMONY_CONTENT, p + i, n - i);
            i = n;
            break;
        }
    }
    text_run_flush(&r);
}

void harmony_flush(harmony_split *h, harmony_sink sink, void *ctx) {
    harmony_emit_to to = {sink, ctx};
    text_run r = {.sink = harmony_emit, .ctx = &to};
    harmony_part part = h->state == HARMONY_BODY ? h->body
                        : h->started             ? HARMONY_MARKER
                                                 : HARMONY_CONTENT;
    held_out(h, &r, part);
}
