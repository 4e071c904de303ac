/* Incremental Server-Sent Events parser (the WHATWG event-stream format):
 * bytes go in as they arrive, in any split; complete events come out through
 * a callback. Handles LF, CRLF and CR line ends (also when a CRLF is split
 * across reads), comment lines (": keep-alive"), multi-line data (joined with
 * "\n"), the "event:" field, and a space after the colon. A blank line
 * dispatches the event if it carried data.
 *
 * Buffers grow to the largest line/event seen and are reused: no allocation
 * per event once warm. An event over max_bytes is an error (a hostile or
 * broken stream cannot eat the memory). Not here: JSON, [DONE], timing —
 * the caller stamps the time of the read before feeding it. */
#ifndef TPS_BENCH_SSE_H
#define TPS_BENCH_SSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef struct sse_event {
    const char *data; /* borrowed until the callback returns; NUL-terminated */
    size_t data_len;
    const char *event; /* "" when the event had no "event:" field; NUL-terminated */
} sse_event;

/* Return 0 to go on, non-zero to stop: sse_parser_feed returns that value. */
typedef int (*sse_cb)(void *ctx, const sse_event *ev);

typedef struct sse_parser {
    char *line; /* the current, unfinished line */
    size_t line_len, line_cap;
    char *data; /* data of the current event */
    size_t data_len, data_cap;
    char event[64]; /* event type of the current event (truncated) */
    bool has_data;  /* a data field was seen (even empty) */
    bool skip_lf;   /* the last byte was CR: a following LF ends nothing */
    size_t max_bytes;
    uint64_t events;   /* dispatched */
    uint64_t comments; /* comment lines seen */
} sse_parser;

int sse_parser_init(sse_parser *p, size_t max_bytes, tps_err *e);
void sse_parser_free(sse_parser *p);
/* Forget any partial line or event (next response on the same parser). */
void sse_parser_reset(sse_parser *p);
/* Feeds n bytes. Returns 0, the callback's non-zero value, TPS_ERANGE when
 * an event exceeds max_bytes, or TPS_ENOMEM. */
int sse_parser_feed(sse_parser *p, const char *buf, size_t n, sse_cb cb, void *ctx, tps_err *e);
/* True when bytes of an unfinished line or event are held: the stream ended
 * mid-event. */
bool sse_parser_pending(const sse_parser *p);

#endif
