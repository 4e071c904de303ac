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
#ifndef TPS_BENCH_SSE_READ_H
#define TPS_BENCH_SSE_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef struct sse_read_event {
    const char *data; /* borrowed until the callback returns; NUL-terminated */
    size_t data_len;
    const char *event; /* "" when the event had no "event:" field; NUL-terminated */
} sse_read_event;

/* Return 0 to go on, non-zero to stop: sse_reader_feed returns that value. */
typedef int (*sse_read_cb)(void *ctx, const sse_read_event *ev);

typedef struct sse_reader {
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
} sse_reader;

int sse_reader_init(sse_reader *p, size_t max_bytes, tps_err *e);
void sse_reader_free(sse_reader *p);
/* Forget any partial line or event (next response on the same parser). */
void sse_reader_reset(sse_reader *p);
/* Feeds n bytes. Returns 0, the callback's non-zero value, TPS_ERANGE when
 * an event exceeds max_bytes, or TPS_ENOMEM. */
int sse_reader_feed(sse_reader *p, const char *buf, size_t n, sse_read_cb cb, void *ctx,
                    tps_err *e);
/* True when bytes of an unfinished line or event are held: the stream ended
 * mid-event. */
bool sse_reader_pending(const sse_reader *p);

#endif
