/* libFuzzer harness for the bench's receive path: any bytes, split at points
 * chosen by the input, go through the SSE parser; every event it dispatches
 * goes through both OpenAI event readers and the typed-event dialects'
 * table reader (Responses, Messages, embeddings). The parser must never read out of
 * bounds or grow past its limit, and must give the same events for the whole
 * input fed at once as for the input fed in pieces; the in-place scanner,
 * whenever it reads an event itself, must say what jansson says. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench/client/chunk.h"
#include "bench/client/sse_read.h"

typedef struct acc {
    uint64_t hash;
    size_t events;
} acc;

static int on_event(void *ctx, const sse_read_event *ev) {
    acc *a = ctx;
    for (size_t i = 0; i < ev->data_len; i++)
        a->hash = (a->hash ^ (uint8_t)ev->data[i]) * 1099511628211ull;
    for (const char *p = ev->event; *p; p++)
        a->hash = (a->hash ^ (uint8_t)*p) * 1099511628211ull;
    a->hash = (a->hash ^ 0xff) * 1099511628211ull;
    a->events++;
    bench_chunk c, s;
    tps_err e;
    const char *field;
    int rc = bench_chunk_parse_json(&c, ev->data, ev->data_len, ev->event, &e);
    if (bench_chunk_scan(&s, ev->data, ev->data_len, ev->event) &&
        (rc != 0 || !bench_chunk_same(&c, &s, &field)))
        abort(); /* the scanner took an event jansson rejects, or read it otherwise */
    if (rc == 0) {
        volatile size_t sink = c.tokens + c.text_len + c.has_usage + c.error;
        (void)sink;
        bench_chunk_release(&c);
    }
    for (int d = BENCH_DIALECT_RESPONSES; d < BENCH_DIALECT_COUNT; d++) {
        if (bench_chunk_parse_typed(&c, (bench_dialect)d, ev->data, ev->data_len, ev->event, &e))
            continue;
        if (c.text && strnlen(c.text, c.text_len) > c.text_len) abort();
        if (strnlen(c.unread, sizeof c.unread) == sizeof c.unread) abort(); /* unterminated */
        bench_chunk_release(&c);
    }
    return 0;
}

static acc feed(const uint8_t *data, size_t size, size_t step) {
    sse_reader p;
    tps_err e;
    acc a = {.hash = 1469598103934665603ull};
    if (sse_reader_init(&p, 1 << 16, &e)) abort();
    for (size_t i = 0; i < size; i += step) {
        size_t n = size - i < step ? size - i : step;
        /* a private copy of exactly n bytes so ASan catches any overread */
        char *b = malloc(n ? n : 1);
        memcpy(b, data + i, n);
        int rc = sse_reader_feed(&p, b, n, on_event, &a, &e);
        free(b);
        if (rc) {
            a.events = SIZE_MAX; /* too large: both feeds must agree on that too */
            break;
        }
    }
    sse_reader_free(&p);
    return a;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    size_t step = 1 + data[0] % 17;
    acc whole = feed(data + 1, size - 1, size);
    acc parts = feed(data + 1, size - 1, step);
    if (whole.events != parts.events || (whole.events != SIZE_MAX && whole.hash != parts.hash))
        abort(); /* splitting changed what was parsed */
    return 0;
}
