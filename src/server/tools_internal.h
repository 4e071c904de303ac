/* Private to src/server/tools*.c: the formats' marker texts and the helpers
 * the files share. tools.c renders, tools_grammar.c writes the forced-call
 * grammars, tools_parse.c reads calls back; none calls another. */
#ifndef TPS_SERVER_TOOLS_INTERNAL_H
#define TPS_SERVER_TOOLS_INTERNAL_H

#include <string.h>

#include "server/tools.h"

/* DeepSeek R1 / V3.1 */
#define DS_CALLS_BEGIN "<｜tool▁calls▁begin｜>"
#define DS_CALLS_END   "<｜tool▁calls▁end｜>"
#define DS_CALL_BEGIN  "<｜tool▁call▁begin｜>"
#define DS_CALL_END    "<｜tool▁call▁end｜>"
#define DS_SEP         "<｜tool▁sep｜>"
/* Kimi K2 */
#define KIMI_SECTION_BEGIN "<|tool_calls_section_begin|>"
#define KIMI_SECTION_END   "<|tool_calls_section_end|>"
#define KIMI_CALL_BEGIN    "<|tool_call_begin|>"
#define KIMI_ARGS_BEGIN    "<|tool_call_argument_begin|>"
#define KIMI_CALL_END      "<|tool_call_end|>"
/* gpt-oss harmony */
#define HARMONY_TO_FN   "to=functions."
#define HARMONY_MESSAGE "<|message|>"
/* Mistral */
#define MISTRAL_CALLS "[TOOL_CALLS]"
#define MISTRAL_ARGS  "[ARGS]"
/* Apriel */
#define APRIEL_OPEN  "<tool_calls>"
#define APRIEL_CLOSE "</tool_calls>"
/* Functionary v3.1 */
#define FUNC_OPEN  "<function="
#define FUNC_CLOSE "</function>"

/* "arguments", or Llama 3.1's "parameters" */
static inline const char *tools_args_key(tool_format f) {
    return f == TOOL_FMT_LLAMA3 ? "parameters" : "arguments";
}

static inline const char *tools_find(const char *s, size_t n, const char *needle) {
    return memmem(s, n, needle, strlen(needle));
}

#endif
