/* What one stream event (or a whole non-streamed response body) says, in
 * any of the dialects servers speak (bench_dialect): text and whether it is
 * the answer or the thinking, token ids, finish, usage, the server's
 * `timings`, an error, or the end of the stream. Where each dialect puts
 * them is a table (chunk_dialect.c); a field that carries text and is in no
 * row is named in `unread`, never silently dropped.
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

/* The shapes of response a server speaks: which fields carry the answer,
 * the thinking, tool arguments and usage. */
typedef enum bench_dialect {
    BENCH_DIALECT_OPENAI = 0, /* /v1/completions and /v1/chat/completions: choices[0] */
    BENCH_DIALECT_RESPONSES,  /* OpenAI's /v1/responses: typed events (response.*) */
    BENCH_DIALECT_MESSAGES,   /* Anthropic's /v1/messages: message_start, content_block_delta.. */
    BENCH_DIALECT_EMBEDDINGS, /* /v1/embeddings: one JSON body, usage only */
    BENCH_DIALECT_COUNT
} bench_dialect;

typedef struct bench_chunk {
    bool done;           /* the stream's end: "[DONE]", response.completed, message_stop */
    bool error;          /* an "error" object or an `event: error` */
    char error_msg[200]; /* when error */
    uint32_t tokens;     /* output tokens this event carries (see above) */
    bool from_ids;       /* tokens were counted from ids in the stream */
    /* Output text; NULL if none. Borrowed: from root (jansson), from the
     * event's data or from text_buf (scanner) -- so valid while data lives
     * and until bench_chunk_release, and never copy a chunk by value. */
    const char *text;
    size_t text_len;
    bool reasoning; /* text is thinking (reasoning_content, reasoning, thinking_delta, ..) */
    bool finished;  /* finish_reason set */
    /* A content event whose text is empty ("text": "" or a delta with
     * "content": "" and no role), no ids, not finished: llama.cpp's server
     * sends one per token whose bytes it holds back until they form UTF-8.
     * Not a token by itself (tokens stays 0); client.c counts these as one
     * token each only when usage proves it. */
    bool empty_text;
    bool has_usage;  /* completion_tokens is the server's count */
    bool has_prompt; /* prompt_tokens is the server's count (Messages: in message_start) */
    uint64_t prompt_tokens, completion_tokens;
    /* Of the completion tokens, thinking: usage.completion_tokens_details.
     * reasoning_tokens, or output_tokens_details.reasoning_tokens. */
    bool has_reasoning_count;
    uint64_t reasoning_tokens;
    /* A field that carried text but is in no row of the dialect's table
     * (e.g. "delta.thinking"): its name, "" when none. Such text is neither
     * counted nor timed; the verdict names the field. */
    char unread[48];
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

/* Parses one event's data in dialect d (event: its SSE event type, "" if
 * none). TPS_EINVAL with the JSON error (line, column) when data is not
 * JSON or not an object; a JSON error object is not a parse error
 * (c->error is set). */
int bench_chunk_parse(bench_chunk *c, bench_dialect d, const char *data, size_t len,
                      const char *event, tps_err *e);
/* The dialect-table reader for the typed-event dialects (Responses,
 * Messages, embeddings): jansson, same contract as bench_chunk_parse. */
int bench_chunk_parse_typed(bench_chunk *c, bench_dialect d, const char *data, size_t len,
                            const char *event, tps_err *e);
void bench_chunk_release(bench_chunk *c);

/* The two readers of the OpenAI dialect alone, for the tests and the fuzz
 * harness that hold them to one result. bench_chunk_parse_json: the jansson
 * reader, same contract as bench_chunk_parse. bench_chunk_scan: the in-place reader; true when it
 * read the event (c then equals what the jansson reader gives, and c->root is NULL), false when it
 * declines (malformed or unusual JSON, an error event, text that needs unescaping past text_buf): c
 * is then unspecified and the caller asks jansson. Allocates nothing; reads only data[0, len). */
int bench_chunk_parse_json(bench_chunk *c, const char *data, size_t len, const char *event,
                           tps_err *e);
bool bench_chunk_scan(bench_chunk *c, const char *data, size_t len, const char *event);

/* True when a and b say the same thing (text compared by content, not by
 * pointer); otherwise false with *field naming the first difference. */
bool bench_chunk_same(const bench_chunk *a, const bench_chunk *b, const char **field);

#endif
