/* libFuzzer harness for the server's request framing (src/server/http/http_frame.c):
 * one byte stream must never yield two different request boundaries. The
 * first input byte picks a split step; the rest is a client's byte stream.
 * Checked:
 *   - fed whole, one byte at a time, and in pieces of the chosen step, the
 *     parser reports the same events at the same offsets and the same
 *     refusal (the network may split a request anywhere);
 *   - every request it accepts is framed the same by a second, naive
 *     reader: the header block ends at the first CRLFCRLF, the body is the
 *     Content-Length or the chunks a plain chunk decoder reads, so no
 *     other HTTP parser that follows RFC 9112 sees a different boundary;
 *   - an accepted header block holds no NUL, bare CR or LF, and at most one
 *     Content-Length and Host. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/http/http_frame.h"

#define FRAME_MAX_EVENTS 256

typedef struct frame_trace {
    size_t n;
    int ev[FRAME_MAX_EVENTS];
    size_t at[FRAME_MAX_EVENTS];
    int status;
} frame_trace;

static void run_frames(const uint8_t *data, size_t size, size_t step, frame_trace *t) {
    http_frame f;
    http_frame_init(&f, 4096, 1 << 16);
    memset(t, 0, sizeof *t);
    for (size_t off = 0; off < size && !t->status;) {
        size_t n = size - off < step ? size - off : step;
        /* a private copy of exactly n bytes so ASan catches any overread */
        uint8_t *b = malloc(n);
        memcpy(b, data + off, n);
        size_t pos = 0;
        for (;;) {
            size_t used = 0;
            http_frame_ev ev = http_frame_feed(&f, b + pos, n - pos, &used);
            pos += used;
            if (pos > n) abort();
            if (ev == HTTP_FRAME_MORE) {
                if (pos != n) abort(); /* MORE means every byte was taken */
                break;
            }
            if (t->n < FRAME_MAX_EVENTS) {
                t->ev[t->n] = ev;
                t->at[t->n] = off + pos;
                t->n++;
            }
            if (ev == HTTP_FRAME_ERROR) {
                if (f.status < 400 || f.status > 599 || !f.message[0]) abort();
                t->status = f.status;
                break;
            }
        }
        free(b);
        off += n;
    }
}

static bool same_trace(const frame_trace *a, const frame_trace *b) {
    if (a->n != b->n || a->status != b->status) return false;
    for (size_t i = 0; i < a->n; i++)
        if (a->ev[i] != b->ev[i] || a->at[i] != b->at[i]) return false;
    return true;
}

/* The naive reader: the header block of the request at p[0..n) ends at the
 * first CRLFCRLF; returns its length (0: none). */
static size_t naive_head_end(const uint8_t *p, size_t n) {
    for (size_t i = 0; i + 3 < n; i++)
        if (p[i] == '\r' && p[i + 1] == '\n' && p[i + 2] == '\r' && p[i + 3] == '\n') return i + 4;
    return 0;
}

/* The value of header name in the block (first occurrence), and how many
 * times it occurs. */
static int naive_header(const uint8_t *h, size_t n, const char *name, const uint8_t **val,
                        size_t *vl) {
    size_t nl = strlen(name);
    int count = 0;
    for (size_t i = 0; i < n; i++) {
        if (i && h[i - 1] != '\n') continue;
        if (i + nl + 1 > n || strncasecmp((const char *)h + i, name, nl) || h[i + nl] != ':')
            continue;
        if (count++) continue;
        size_t s = i + nl + 1, e = s;
        while (e < n && h[e] != '\r')
            e++;
        while (s < e && (h[s] == ' ' || h[s] == '\t'))
            s++;
        while (e > s && (h[e - 1] == ' ' || h[e - 1] == '\t'))
            e--;
        *val = h + s;
        *vl = e - s;
    }
    return count;
}

/* A plain chunk decoder from p: returns the bytes up to the end of the
 * trailer, 0 when it does not end within n. */
static size_t naive_chunked_end(const uint8_t *p, size_t n) {
    size_t i = 0;
    for (;;) {
        uint64_t size = 0;
        size_t digits = 0;
        while (i < n && p[i] != '\r') {
            uint8_t c = p[i++];
            int v = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
            if (v < 0) return 0;
            size = size * 16 + (uint64_t)v;
            digits++;
        }
        if (!digits || i + 1 >= n || p[i + 1] != '\n') return 0;
        i += 2;
        if (size == 0) break;
        if (size > n - i) return 0;
        i += (size_t)size;
        if (i + 1 >= n || p[i] != '\r' || p[i + 1] != '\n') return 0;
        i += 2;
    }
    size_t t = naive_head_end(p + i - 2, n - (i - 2)); /* the trailer ends in CRLFCRLF */
    return t ? i - 2 + t : 0;
}

/* Checks each request the trace accepted (HEAD then END) against the naive
 * reader. */
static void check_boundaries(const uint8_t *data, size_t size, const frame_trace *t) {
    size_t start = 0;
    for (size_t i = 0; i + 1 < t->n; i++) {
        if (t->ev[i] != HTTP_FRAME_HEAD) continue;
        if (t->ev[i + 1] != HTTP_FRAME_END) break; /* refused mid-body: not accepted */
        size_t head = t->at[i], end = t->at[i + 1];
        const uint8_t *r = data + start;
        if (naive_head_end(r, size - start) != head - start) abort();
        for (size_t k = start; k < head; k++) /* no NUL, bare CR or bare LF */
            if (!data[k] || (data[k] == '\r' && data[k + 1] != '\n') ||
                (data[k] == '\n' && (k == start || data[k - 1] != '\r')))
                abort();
        const uint8_t *v = NULL;
        size_t vl = 0;
        if (naive_header(r, head - start, "host", &v, &vl) > 1) abort();
        int n_te = naive_header(r, head - start, "transfer-encoding", &v, &vl);
        int n_cl = naive_header(r, head - start, "content-length", &v, &vl);
        if (n_cl > 1 || (n_cl && n_te)) abort();
        size_t body_end;
        if (n_te) {
            body_end = head + naive_chunked_end(data + head, size - head);
        } else if (n_cl) {
            uint64_t cl = 0;
            for (size_t k = 0; k < vl; k++)
                cl = cl * 10 + (uint64_t)(v[k] - '0');
            body_end = head + (size_t)cl;
        } else {
            body_end = head;
        }
        if (body_end != end) abort();
        start = end;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    size_t step = 1 + data[0] % 17;
    data++;
    size--;
    frame_trace whole, bytes, pieces;
    run_frames(data, size, size ? size : 1, &whole);
    run_frames(data, size, 1, &bytes);
    run_frames(data, size, step, &pieces);
    if (!same_trace(&whole, &bytes) || !same_trace(&whole, &pieces)) abort();
    check_boundaries(data, size, &whole);
    return 0;
}
