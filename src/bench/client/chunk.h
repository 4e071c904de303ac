/* What one OpenAI-compatible stream event (or a whole non-streamed response
 * body) says: text, token ids, finish, usage, the server's `timings`, an
 * error, or the [DONE] sentinel. Both /v1/completions (choices[0].text) and
 * /v1/chat/completions (choices[0].delta.content / message.content) shapes.
 *
 * Token evidence per event, most trusted first: token ids carried in the
 * event ("tokens" or "token_ids", top level or in choices[0]) give their
 * count; otherwise non-empty text counts as one token (an approximation the
 * result names). Not here: SSE framing (sse_read.h), timing, HTTP.
 *
 * Two readers give one result: an in-place scanner (chunk_scan.c: no JSON
 * tree, no allocation, the per-event fast path) and jansson (chunk.c: the
 * reference, and the fallback for anything the scanner is not sure of).
 * bench_chunk_parse runs the first and falls back to the second. */
#ifndef TPS_BENCH_CHUNK_H
#define TPS_BENCH_CHUNK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* The server's own view of a request (tps serve's `timings`; llama.cpp's
 * prompt_ms / predicted_ms map to prefill_ms / decode_ms). -1: not given. */
typedef struct bench_timings {
    double queue_ms, prefill_ms, decode_ms, ttft_ms;
    int64_t prompt_tokens, completion_tokens, preemptions;
} bench_timings;

typedef struct bench_chunk {
    bool done;           /* data was "[DONE]" */
    bool error;          /* an "error" object or an `event: error` */
    char error_msg[200]; /* when error */
    uint32_t tokens;     /* output tokens this event carries (see above) */
    bool from_ids;       /* tokens were counted from ids in the stream */
    /* Output text; NULL if none. Borrowed: from root (jansson), from the
     * event's data or from text_buf (scanner) -- so valid while data lives
     * and until bench_chunk_release, and never copy a chunk by value. */
    const char *text;
    size_t text_len;
    bool reasoning; /* text is reasoning_content, not the reply's content */
    bool finished;  /* finish_reason set */
    /* A content event whose text is empty ("text": "" or a delta with
     * "content": "" and no role), no ids, not finished: llama.cpp's server
     * sends one per token whose bytes it holds back until they form UTF-8.
     * Not a token by itself (tokens stays 0); client.c counts these as one
     * token each only when usage proves it. */
    bool empty_text;
    bool has_usage;
    uint64_t prompt_tokens, completion_tokens;
    /* Prompt tokens the server served from its prefix cache:
     * usage.prompt_tokens_details.cached_tokens (OpenAI, vLLM, tps serve,
     * recent llama.cpp), else llama.cpp's timings.cache_n. Absent (or null)
     * is unknown, never zero. */
    bool has_cached;
    bool cached_from_usage; /* the usage field, which wins over timings.cache_n */
    uint64_t cached_tokens;
    bool has_timings;
    bench_timings timings;
    json_t *root;       /* owned (jansson path only); release with bench_chunk_release */
    char text_buf[256]; /* the scanner's unescaped text; last, so not cleared per event */
} bench_chunk;

/* Parses one event's data (event: its SSE event type, "" if none).
 * TPS_EINVAL with the JSON error (line, column) when data is not JSON or not
 * an object; a JSON error object is not a parse error (c->error is set). */
int bench_chunk_parse(bench_chunk *c, const char *data, size_t len, const char *event, tps_err *e);
void bench_chunk_release(bench_chunk *c);

/* The two readers alone, for the tests and the fuzz harness that hold them
 * to one result. bench_chunk_parse_json: the jansson reader, same contract as
 * bench_chunk_parse. bench_chunk_scan: the in-place reader; true when it read
 * the event (c then equals what the jansson reader gives, and c->root is
 * NULL), false when it declines (malformed or unusual JSON, an error event,
 * text that needs unescaping past text_buf): c is then unspecified and the
 * caller asks jansson. Allocates nothing; reads only data[0, len). */
int bench_chunk_parse_json(bench_chunk *c, const char *data, size_t len, const char *event,
                           tps_err *e);
bool bench_chunk_scan(bench_chunk *c, const char *data, size_t len, const char *event);

/* True when a and b say the same thing (text compared by content, not by
 * pointer); otherwise false with *field naming the first difference. */
bool bench_chunk_same(const bench_chunk *a, const bench_chunk *b, const char **field);

#endif
