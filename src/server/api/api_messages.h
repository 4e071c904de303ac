/* POST /v1/messages and /v1/messages/count_tokens (Anthropic's Messages
 * API) parsed into the chat request every dialect shares (openai.h):
 * system becomes the system message; content blocks become chat messages
 * (text as content, tool_use as an assistant's tool_calls, tool_result as
 * tool messages, thinking as reasoning_content); tools with input_schema
 * become function tools; tool_choice auto/any/tool/none becomes
 * auto/required/named/none; thinking {enabled, budget_tokens} becomes the
 * thinking budget; stop_sequences stop. Every field is on an allow-list: an
 * unknown or refused one, a malformed shape, is a 400 naming it. Pure: no
 * tokenizer, no engine, no I/O.
 *
 * Not here: writing the answer (api_write.h), HTTP. */
#ifndef TPS_SERVER_API_MESSAGES_H
#define TPS_SERVER_API_MESSAGES_H

#include <stdbool.h>
#include <stddef.h>

#include "server/api/openai.h"

/* The Messages allow-list (docs/api.md prints it); *n its length. */
const oai_field *api_messages_fields(size_t *n);

/* Parses body[0..len) into r (dialect OAI_DIALECT_MESSAGES). counting:
 * /v1/messages/count_tokens (max_tokens not required, stream refused). */
int api_messages_parse(oai_request *r, const char *body, size_t len, bool counting,
                       const oai_policy *p, oai_error *e);

#endif
