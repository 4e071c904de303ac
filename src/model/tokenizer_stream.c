/* Streaming detokenizer (see tokenizer_stream.h): pieces from
 * tokenizer_piece pass through a UTF-8 validator that holds an unfinished
 * character and replaces invalid sequences by U+FFFD (one per maximal
 * invalid subpart, as the WHATWG decoder does). It knows nothing of how
 * pieces are made. */
#include <stdlib.h>
#include <string.h>

#include "model/tokenizer_internal.h"
#include "model/tokenizer_stream.h"

struct detok_stream {
    const tokenizer *tok; /* borrowed */
    bool render_special;
    uint8_t seq[4]; /* the character being completed */
    int seq_n;
    int need;       /* continuation bytes still expected */
    uint8_t lo, hi; /* allowed range of the next continuation byte */
    char *out;      /* text handed out by the last call */
    size_t cap;
};

int detok_stream_create(detok_stream **out, const tokenizer *t, unsigned flags, tps_err *err) {
    *out = NULL;
    detok_stream *s = calloc(1, sizeof *s);
    if (s) s->out = malloc(s->cap = 256);
    if (!s || !s->out) {
        free(s);
        return tps_fail(err, TPS_ENOMEM, "detok_stream: out of memory");
    }
    s->tok = t;
    s->render_special = flags & TOK_DECODE_RENDER_SPECIAL;
    *out = s;
    return 0;
}

void detok_stream_free(detok_stream *s) {
    if (!s) return;
    free(s->out);
    free(s);
}

size_t detok_stream_pending(const detok_stream *s) {
    return (size_t)s->seq_n;
}

static size_t put_replacement(char *o, size_t w) {
    o[w] = (char)0xEF;
    o[w + 1] = (char)0xBF;
    o[w + 2] = (char)0xBD;
    return w + 3;
}

/* Feeds one byte; returns the new write position in s->out. */
static size_t feed(detok_stream *s, uint8_t b, size_t w) {
    char *o = s->out;
    if (s->need) {
        if (b >= s->lo && b <= s->hi) {
            s->seq[s->seq_n++] = b;
            s->lo = 0x80;
            s->hi = 0xBF;
            if (--s->need == 0) {
                memcpy(o + w, s->seq, (size_t)s->seq_n);
                w += (size_t)s->seq_n;
                s->seq_n = 0;
            }
            return w;
        }
        w = put_replacement(o, w); /* unfinished sequence; b starts afresh */
        s->seq_n = 0;
        s->need = 0;
    }
    if (b < 0x80) {
        o[w++] = (char)b;
    } else if (b >= 0xC2 && b <= 0xDF) {
        s->need = 1, s->lo = 0x80, s->hi = 0xBF;
    } else if (b >= 0xE0 && b <= 0xEF) {
        s->need = 2, s->lo = b == 0xE0 ? 0xA0 : 0x80, s->hi = b == 0xED ? 0x9F : 0xBF;
    } else if (b >= 0xF0 && b <= 0xF4) {
        s->need = 3, s->lo = b == 0xF0 ? 0x90 : 0x80, s->hi = b == 0xF4 ? 0x8F : 0xBF;
    } else {
        return put_replacement(o, w); /* stray continuation or impossible byte */
    }
    if (b >= 0x80) s->seq[s->seq_n++] = b;
    return w;
}

int detok_stream_push(detok_stream *s, int32_t id, const char **text, size_t *len, tps_err *err) {
    *text = s->out;
    *len = 0;
    size_t n;
    const char *p = tokenizer_piece(s->tok, id, s->render_special, &n);
    if (!p)
        return tps_fail(err, TPS_ERANGE,
                        "detok_stream: token id %d is outside the vocabulary (0..%u)", id,
                        tokenizer_n_vocab(s->tok) - 1);
    /* a byte yields at most 4 output bytes (U+FFFD for a broken sequence,
     * then itself), a completed character at most 3 held ones more */
    size_t need = 4 * n + 8;
    if (need > s->cap) {
        char *o = realloc(s->out, need);
        if (!o)
            return tps_fail(err, TPS_ENOMEM, "detok_stream: out of memory for a %zu-byte piece", n);
        s->out = o;
        s->cap = need;
    }
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        w = feed(s, (uint8_t)p[i], w);
    *text = s->out;
    *len = w;
    return 0;
}

void detok_stream_flush(detok_stream *s, const char **text, size_t *len) {
    size_t w = 0;
    if (s->need) w = put_replacement(s->out, 0);
    s->seq_n = 0;
    s->need = 0;
    *text = s->out;
    *len = w;
}
