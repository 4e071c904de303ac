/* POST /v1/responses (OpenAI's Responses API, as OpenAI and vLLM document
 * it) parsed into the chat request every dialect shares (openai.h):
 * instructions become the system message, input items (messages,
 * function_call, function_call_output, reasoning) become chat messages
 * after the stored conversation previous_response_id names, function tools
 * and tool_choice become chat's, text.format response_format,
 * reasoning.effort reasoning_effort, max_output_tokens max_tokens. Every
 * field is on an allow-list: a built-in tool, a refused field, a malformed
 * shape is a 400 naming it. Pure apart from the lookup: no tokenizer, no
 * engine, no I/O, so the fuzzer drives it directly.
 *
 * Not here: the store itself (response_store.h), writing the answer
 * (api_write.h), HTTP. */
#ifndef TPS_SERVER_API_RESPONSES_H
#define TPS_SERVER_API_RESPONSES_H

#include <stddef.h>

#include "base/error.h"
#include "server/api/openai.h"

/* The conversation stored under id: 0 with a malloc'ed JSON array of chat
 * messages in *out (the caller frees it), or TPS_ENOENT with why in err. */
typedef int (*api_lookup_fn)(void *ctx, const char *id, char **out, size_t *n, tps_err *err);

/* The Responses allow-list (docs/api.md prints it); *n its length. */
const oai_field *api_responses_fields(size_t *n);

/* Parses body[0..len) into r (dialect OAI_DIALECT_RESPONSES, r->store,
 * r->history: the conversation without the instructions, r->echo: the
 * settings the response object repeats). lookup (NULL: no store) resolves
 * previous_response_id; a missing id is a 404 naming the reason. */
int api_responses_parse(oai_request *r, const char *body, size_t len, const oai_policy *p,
                        api_lookup_fn lookup, void *lookup_ctx, oai_error *e);

#endif
