/* What the two agent dialects share (api_responses.c: OpenAI's Responses
 * API; api_messages.c: Anthropic's Messages API): each builds a chat
 * completion request as JSON from its body and hands it to oai_parse_root,
 * so sampling, tools, reasoning and limits are parsed once (openai*.c).
 * Here: the limits on their shapes, joining text parts, the walk over the
 * tools (each dialect converts one), that common tail, the chat field names
 * translated back into the dialect's in a 400, and Anthropic's error shape.
 *
 * Not here: either dialect's fields (their own files), writing answers
 * (api_write.h), HTTP. */
#ifndef TPS_SERVER_API_DIALECT_H
#define TPS_SERVER_API_DIALECT_H

#include <jansson.h>

#include "base/sbuf.h"
#include "server/api/openai.h"

#define API_MAX_ITEMS 4096 /* input items (Responses) or messages (Messages) per request */
#define API_MAX_PARTS 1024 /* content parts or blocks of one item or message */
#define API_MAX_TOOLS 256  /* tools per request */

/* A dialect's field table and its length, as oai_check_table takes them. */
#define API_ROWS(t) t, sizeof t / sizeof t[0]

/* A 500 "out of memory" in e; returns its code (< 0). */
int api_oom(oai_error *e);

/* o[k] = v and a += v, taking v: a NULL v (a json_* that could not
 * allocate) or a failed set is api_oom. 0 or < 0. */
int api_set_new(json_t *o, const char *k, json_t *v, oai_error *e);
int api_append_new(json_t *a, json_t *v, oai_error *e);

/* to[as] = from[key] (a new reference) where from has key: 0, or api_oom. */
int api_copy(json_t *from, const char *key, json_t *to, const char *as, oai_error *e);

/* 0 when the array arr has at most max elements, else a 400 naming param:
 * "PARAM has N UNITS; at most MAX are accepted". */
int api_at_most(json_t *arr, size_t max, const char *param, const char *units, oai_error *e);

/* The text of content: a string, or an array (at most API_MAX_PARTS) of
 * parts {"type": one of types (NULL-ended), "text": string} joined. *out
 * gets a new JSON string. A part of another type is a 400 naming it. */
int api_join_text(json_t *content, const char *param, const char *const *types, json_t **out,
                  oai_error *e);

/* One tool of the request checked and made a chat function object (new),
 * or NULL with e filled. param names the tool in a 400 ("tools[2]"),
 * prefix goes before its keys ("tools[2]."); p and r as oai_check_table
 * takes them. */
typedef json_t *api_tool_fn(json_t *tool, const char *param, const char *prefix,
                            const oai_policy *p, oai_request *r, oai_error *e);

/* The request's "tools" as chat["tools"], {type: "function", function:
 * fn(tool)} each: nothing when absent or null; else a 400 unless it is an
 * array of at most API_MAX_TOOLS. 0 or < 0. */
int api_build_tools(json_t *root, json_t *chat, api_tool_fn *fn, const oai_policy *p,
                    oai_request *r, oai_error *e);

/* The common tail: chat (taken) parsed into r as a chat request, r->dialect
 * set, the ignored names r noted while its dialect's own fields were
 * checked kept, and a 400's chat field named as the dialect names it. */
int api_chat_parse(oai_request *r, json_t *chat, oai_dialect d, oai_error *e);

/* A 400 about a chat field (max_tokens, response_format, ...) renamed to
 * the field the dialect's client sent (max_output_tokens, text.format). */
void api_error_rename(oai_error *e, oai_dialect d);

/* Appends Anthropic's error body {"type":"error","error":{"type","message"}},
 * its type from e's status (invalid_request_error, authentication_error,
 * permission_error, not_found_error, request_too_large, rate_limit_error,
 * api_error, overloaded_error). */
void api_error_anthropic_json(const oai_error *e, sbuf *out);

#endif
