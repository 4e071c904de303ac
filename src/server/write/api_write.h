/* Answers in the agent dialects: the engine's one event stream (thinking
 * text, answer text, tool calls at the end, a finish and usage) written as
 * OpenAI Responses events (response.created ... response.completed, each
 * with type and sequence_number) or Anthropic Messages events
 * (message_start ... message_stop), and the whole body of a non-streamed
 * answer built from the same items. One state per request: it keeps the
 * items written, so the body, the stored response and the next turn's
 * conversation come from what was streamed. Chat completions keep their
 * own writer (sse_write.h).
 *
 * Not here: when to write (server_stream.c), parsing tool calls (tools.h),
 * sockets. */
#ifndef TPS_SERVER_API_WRITE_H
#define TPS_SERVER_API_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/sbuf.h"
#include "engine/core/engine.h"
#include "server/api/openai.h"
#include "server/tools/tools.h"

/* What the open item (block) holds: thinking, answer text, or a tool
 * call's arguments. */
typedef enum api_part {
    API_PART_NONE = 0,
    API_PART_REASONING,
    API_PART_TEXT,
    API_PART_CALL,
} api_part;

/* Token counts of a finished answer; cached: prompt tokens the prefix
 * cache served; reasoning: thinking tokens (markers included). */
typedef struct api_usage {
    uint32_t input, cached, output, reasoning;
} api_usage;

/* How an answer ended. */
typedef struct api_final {
    engine_finish finish;
    const tool_call *calls; /* parsed from the answer; n_calls of them */
    size_t n_calls;
    const char *call_prefix; /* call k's id is call_prefix followed by k */
    api_usage usage;
    const char *stop_sequence; /* the request's stop string that ended it, NULL none */
} api_final;

typedef struct api_stream {
    oai_dialect dialect;
    char id[64];
    const char *model; /* borrowed: the server's */
    int64_t created;   /* Unix seconds (a label) */
    char *echo;        /* Responses: the request's settings as JSON members (owned) */
    uint32_t n_prompt;
    uint64_t seq;  /* Responses: the next event's sequence_number */
    api_part open; /* the item (block) open now */
    uint32_t n_out;
    sbuf part;            /* the open part's text */
    sbuf text, reasoning; /* the whole answer and thinking */
    sbuf items;           /* finished output items (content blocks), JSON, comma-separated */
    char call_id[128];    /* the open call's id and name */
    char call_name[128];
    bool call_complete; /* as it closes: its arguments are whole */
    bool ended;
    bool summary; /* Responses: the reasoning item carries the thinking as its summary too */
    char **stops; /* the request's stop strings (owned copies): which one ended it */
    size_t n_stops;
} api_stream;

/* id: the request's ("resp_..." or "msg_..."); echo copied (may be NULL). */
int api_stream_init(api_stream *st, oai_dialect d, const char *id, const char *model,
                    int64_t created, const char *echo, uint32_t n_prompt);
void api_stream_free(api_stream *st);
/* Keeps copies of the request's n stop strings; TPS_ENOMEM. */
int api_stream_set_stops(api_stream *st, const char *const *stops, size_t n);
/* The stop string of the request's index i (an engine DONE's stop_string),
 * NULL when i is -1 or not the request's (the template's end of turn). */
const char *api_stream_stop(const api_stream *st, int32_t i);

/* Each appends its events to b (nothing when the dialect writes none). */
void api_stream_start(api_stream *st, sbuf *b);
/* kind API_PART_CALL: the open call's next piece of arguments (nothing
 * when no call is open). */
void api_stream_delta(api_stream *st, sbuf *b, api_part kind, const char *p, size_t n);
/* A tool call opens (tools.h's CALL_START), and closes (CALL_DONE;
 * complete: its arguments are whole). */
void api_stream_call(api_stream *st, sbuf *b, const char *id, const char *name, size_t name_len);
void api_stream_call_done(api_stream *st, sbuf *b, bool complete);
/* Closes what is open, writes the final events (f's calls were written
 * as they came). */
void api_stream_end(api_stream *st, sbuf *b, const api_final *f);
void api_stream_error(api_stream *st, sbuf *b, const oai_error *e);

/* After api_stream_end: the whole answer (the non-streamed body; the
 * stored Responses object). */
void api_body(const api_stream *st, sbuf *b, const api_final *f);
/* After api_stream_end (Responses): history (a json_t array of chat
 * messages, borrowed) and the answer as an assistant message, as JSON text
 * (malloc'ed into *out): the conversation a next turn continues. */
int api_conversation(const api_stream *st, const void *history, const api_final *f, char **out,
                     size_t *n);

#endif
