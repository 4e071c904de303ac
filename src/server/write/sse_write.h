/* Response bodies in OpenAI's shapes: the Server-Sent Events of a streamed
 * completion or chat completion (`data: {json}\n\n`, `data: [DONE]\n\n`) and
 * the single JSON object of a non-streamed one, each final one with the
 * `timings` object (the server's ground truth for the bench) computed from
 * engine_timings. Everything is appended to a caller-owned sbuf, so a
 * connection reuses one buffer for its whole stream.
 *
 * Not here: sockets, HTTP headers, when to send what (server_stream.c). */
#ifndef TPS_SERVER_SSE_WRITE_H
#define TPS_SERVER_SSE_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/core/engine.h"
#include "model/tokenizer.h"
#include "server/api/openai.h"
#include "base/sbuf.h"
#include "server/tools/tools.h"

/* What every chunk of one response repeats. Strings are borrowed. */
typedef struct sse_meta {
    oai_kind kind;
    const char *id;    /* "cmpl-..." / "chatcmpl-..." */
    int64_t created;   /* Unix seconds (wall clock: a label) */
    const char *model; /* the served model's id */
} sse_meta;

/* Counts of a response's usage object. completion_tokens_details
 * {"reasoning_tokens"} is written for chat (the thinking block's tokens,
 * markers included; 0 without one). */
typedef struct sse_usage {
    uint32_t prompt_tokens, completion_tokens, reasoning_tokens;
} sse_usage;

/* Borrowed text; p NULL: absent (the field is not written). */
typedef struct sse_text {
    const char *p;
    size_t n;
} sse_text;

/* One token's logprobs as the engine reported them, and where its text
 * starts in the choice's text (completions' text_offset). */
typedef struct sse_lp {
    int32_t token;
    float logprob;
    uint32_t text_offset;
    uint32_t n_top;
    int32_t top_id[LOGPROBS_MAX_TOP];
    float top_logprob[LOGPROBS_MAX_TOP];
} sse_lp;

/* The value of a choice's "logprobs" for recs (n,), tokens spelled by tok:
 * completions {"tokens","token_logprobs","top_logprobs","text_offset"},
 * chat {"content":[{"token","logprob","bytes","top_logprobs":[...]}]}.
 * Token text that is not whole UTF-8 (a byte token) is written with
 * U+FFFD in "token"; chat's "bytes" carries the exact bytes. */
void sse_logprobs_json(sbuf *b, oai_kind kind, const tokenizer *tok, const sse_lp *recs, size_t n);

/* The timings object in milliseconds:
 * {"queue_ms","prefill_ms","prompt_tokens","cached_tokens","decode_ms",
 *  "completion_tokens","ttft_ms","preemptions","seed"}; phases that never
 * started are 0; seed (signed 64-bit) replays the choice (or, in a body or
 * usage chunk, the request: choice i samples with seed + i). */
void sse_timings_json(sbuf *b, const engine_timings *t);

/* Chunks of a stream. `index` is the choice (0 .. n-1) the chunk is for:
 * with n > 1 the choices' chunks interleave as their tokens come. */

/* Chat only: a choice's first event, delta {"role":"assistant","content":""}. */
void sse_chunk_role(sbuf *b, const sse_meta *m, uint32_t index);
/* One token's event: its text (possibly empty) and, as an extension, its id
 * in choices[0].token_ids; with lp (may be NULL) its logprobs, spelled by
 * tok. token < 0: text earlier tokens brought and the stream held back
 * (sent when the choice ends), with "token_ids":[] so that the ids a stream
 * carries add up to its usage. */
void sse_chunk_text(sbuf *b, const sse_meta *m, uint32_t index, const char *text, size_t n,
                    int32_t token, const sse_lp *lp, const tokenizer *tok);
/* Chat: the same with the text as delta {"reasoning_content": ...}, the
 * field vLLM and llama-server stream a reasoning model's thinking in. */
void sse_chunk_reasoning(sbuf *b, const sse_meta *m, uint32_t index, const char *text, size_t n,
                         int32_t token, const sse_lp *lp, const tokenizer *tok);
/* A choice's last event: empty text/delta, finish_reason, and the choice's
 * timings. */
void sse_chunk_finish(sbuf *b, const sse_meta *m, uint32_t index, const char *finish_reason,
                      const engine_timings *t);
/* stream_options.include_usage, once after every choice finished: choices
 * [], usage (with prompt_tokens_details.cached_tokens from t) and timings. */
void sse_chunk_usage(sbuf *b, const sse_meta *m, const sse_usage *u, const engine_timings *t);
/* A chat stream's tool call number call_index of choice index as it
 * streams (tools.h's tool_stream events), as OpenAI streams one: its first
 * chunk {id, type, function {name, arguments ""}}, then each piece of its
 * arguments as {function {arguments: piece}}; the SDKs concatenate them. */
void sse_chunk_tool_start(sbuf *b, const sse_meta *m, uint32_t index, uint32_t call_index,
                          const char *id, const char *name, size_t name_len);
void sse_chunk_tool_args(sbuf *b, const sse_meta *m, uint32_t index, uint32_t call_index,
                         const char *args, size_t n);
/* An error in the middle of a stream: data: {"error": {...}}. */
void sse_error(sbuf *b, const oai_error *e);
void sse_done(sbuf *b);

/* Non-streamed response, written in three steps so the server can add each
 * choice from its own state without gathering them first: open, then
 * sse_body_choice for index 0, 1, ... n-1 in order, then close with usage
 * (cached tokens from t) and timings. */
void sse_body_open(sbuf *b, const sse_meta *m);
/* lp: the choice's logprobs (n_lp records), or NULL for "logprobs": null.
 * reasoning_content (chat; NULL or .p NULL: none) goes in the message. */
void sse_body_choice(sbuf *b, const sse_meta *m, uint32_t index, const char *text, size_t n,
                     const sse_text *reasoning_content, const char *finish_reason, const sse_lp *lp,
                     size_t n_lp, const tokenizer *tok);
/* A chat choice whose answer was tool calls: message {role, content (the
 * text before the calls, or null), tool_calls [{id, type, function {name,
 * arguments}}]}; call k's id is ids_prefix followed by k. finish_reason:
 * "tool_calls", or "length" when max_tokens cut a later call. */
void sse_body_choice_tool_calls(sbuf *b, const sse_meta *m, uint32_t index, const char *content,
                                size_t n, const sse_text *reasoning_content, const tool_call *calls,
                                size_t n_calls, const char *ids_prefix, const char *finish_reason,
                                const sse_lp *lp, size_t n_lp, const tokenizer *tok);
void sse_body_close(sbuf *b, const sse_meta *m, const sse_usage *u, const engine_timings *t);

#endif
