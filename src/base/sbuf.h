/* A growable byte buffer for building text (HTTP bodies, SSE events, the
 * Prometheus page, reports), plus a JSON string escaper that writes into it.
 * The server keeps one per connection and reuses it for every event, so
 * streaming a token allocates only when a chunk is longer than any before.
 *
 * Not here: parsing (jansson), I/O. Allocation failure is sticky: the buffer
 * remembers it (sbuf_failed) and further appends do nothing, so callers check
 * once at the end instead of after every append. */
#ifndef TPS_BASE_SBUF_H
#define TPS_BASE_SBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sbuf {
    char *p;    /* NUL-terminated when len > 0 or after any append */
    size_t len; /* bytes in use, without the NUL */
    size_t cap; /* bytes allocated */
    bool failed;
} sbuf;

void sbuf_init(sbuf *b);
void sbuf_free(sbuf *b);
/* Empties the buffer and keeps its memory. */
void sbuf_reset(sbuf *b);
/* Keeps the first n bytes (n <= len), NUL-terminated. */
void sbuf_truncate(sbuf *b, size_t n);
static inline bool sbuf_failed(const sbuf *b) {
    return b->failed;
}

void sbuf_add(sbuf *b, const void *data, size_t n);
void sbuf_adds(sbuf *b, const char *s);
void sbuf_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string literal with its quotes: control characters, '"' and '\\'
 * escaped; valid UTF-8 copied as it is, and each invalid sequence (a stray
 * byte, a truncated or overlong sequence, a surrogate: the maximal subpart,
 * as Unicode and WHATWG count them) written as U+FFFD, so the output is
 * always valid JSON text (a raw byte from a byte token or a template
 * would not be). */
void sbuf_json_str(sbuf *b, const char *s, size_t n);
/* The same for a NUL-terminated s, or null when s is NULL or empty (an
 * optional field, e.g. an error's param and code). */
void sbuf_json_str_or_null(sbuf *b, const char *s);
/* A JSON number for a double: integers without a fraction, finite values
 * with up to 6 decimals, non-finite values as 0 (JSON has no NaN). */
void sbuf_json_num(sbuf *b, double v);

#endif
