/* Tools for a chat template that does not write them (it never reads
 * `tools`: the built-ins, Gemma, the DeepSeek distills): the request's
 * messages with the tool list written into the system message (Mistral:
 * before the last user turn), in the tool-call syntax of the format
 * (tools.h); and, for a template that does not write earlier calls
 * (it never reads tool_calls), those calls written into their assistant
 * messages and tool results as the format's turns, as tps did for every
 * template before it rendered Jinja.
 *
 * Not here: templates that write tools themselves (chat_prompt.c passes
 * them the tools), parsing calls (tools.h). */
#ifndef TPS_SERVER_CHAT_TOOLS_H
#define TPS_SERVER_CHAT_TOOLS_H

#include <jansson.h>
#include <stdbool.h>

#include "base/error.h"
#include "server/tools/tools.h"

/* A new messages array (the caller decrefs): messages (borrowed) with the
 * tools (NULL: none) written in, and, when history, earlier calls written
 * into their messages' content and (results) tool results rewritten as
 * the format's turns: a template that writes tools but not calls (LFM2,
 * Granite 3.3) still writes its own tool turns. Without system_ok (the template refuses a system
 * turn: Gemma 2) the list opens the first user turn, a blank line before
 * its text, as llama.cpp's minja folds a system message. NULL when out of
 * memory. */
json_t *chat_tools_inject(const json_t *messages, const json_t *tools, tool_format f, bool history,
                          bool results, bool system_ok, tps_err *err);

#endif
