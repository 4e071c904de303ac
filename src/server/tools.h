/* Tool (function) calling for the chat endpoint: the grammar that holds
 * the output to a valid call when tool_choice is "required" or names a
 * function, the parser that turns the model's call text back into OpenAI's
 * tool_calls, and, for a chat template that does not write the tools
 * itself (it never reads `tools`: the built-ins, Gemma, the DeepSeek
 * distills), the text that introduces them and earlier calls and results
 * in the format's own syntax. A template that reads `tools` writes them
 * (chat_prompt.h); the format is the one its text implies.
 *
 * Formats:
 *   hermes  - ChatML (Qwen 2.5/3, Hermes): the tools as JSON lines inside
 *             <tools></tools> in the system message (Qwen's own wording); a
 *             call is <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>;
 *             a result is a user turn <tool_response>\n...\n</tool_response>.
 *   generic - every other template (and none): hermes's call and result
 *             syntax with a terse introduction ("Tools: [...]" and one line
 *             saying how to call), for models trained on no tool format.
 *   llama3  - Llama 3.1+ JSON tool calling: the tools as JSON in the system
 *             message; a call is {"name": N, "parameters": {...}}; a result
 *             is an "ipython" turn.
 *   mistral - [AVAILABLE_TOOLS] [...] [/AVAILABLE_TOOLS] before the last user
 *             turn; calls are [TOOL_CALLS] [{"name": N, "arguments": {...}}];
 *             a result is [TOOL_RESULTS] {"content": ...} [/TOOL_RESULTS].
 *   mistral-v11 - Mistral's later tokenizers (Mistral Small 3.2, Devstral,
 *             Ministral 3): [TOOL_CALLS]N[ARGS]{...} for each call (both
 *             Mistral forms parse in both).
 *   apriel   - Apriel 1.5: <tool_calls>[{"name": N, "arguments": {...}}, ...]
 *             </tool_calls>.
 *   deepseek - DeepSeek R1 (and its distills, V3-0324):
 *             <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>N
 *             ```json\n{...}\n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
 *   deepseek-v3.1 - DeepSeek V3.1: <｜tool▁call▁begin｜>N<｜tool▁sep｜>{...}
 *             <｜tool▁call▁end｜> in the same section (both forms parse in
 *             both; the grammar writes the template's own).
 *   harmony  - gpt-oss: a message to functions.N on the commentary channel,
 *             <|channel|>commentary to=functions.N <|constrain|>json
 *             <|message|>{...} (or the recipient in the role part,
 *             <|start|>assistant to=functions.N<|channel|>commentary json
 *             <|message|>{...}), ended by <|call|>; one call per answer.
 *             The text parsed is what harmony.h hands on as calls.
 *   kimi-k2  - Kimi K2: <|tool_calls_section_begin|><|tool_call_begin|>
 *             functions.N:IDX<|tool_call_argument_begin|>{...}
 *             <|tool_call_end|>...<|tool_calls_section_end|>.
 *   functionary-v3.1 - Functionary v3.1 (Llama 3.1): <function=N>{...}
 *             </function>, one after another.
 *
 * Not here: HTTP, SSE, tokenizing. Pure functions over jansson values. */
#ifndef TPS_SERVER_TOOLS_H
#define TPS_SERVER_TOOLS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/sbuf.h"
#include "base/error.h"

#define TOOLS_MAX       128 /* tools per request */
#define TOOLS_MAX_CALLS 64  /* calls parsed from one answer */

typedef enum tool_format {
    TOOL_FMT_HERMES = 0,
    TOOL_FMT_LLAMA3,
    TOOL_FMT_MISTRAL,
    TOOL_FMT_GENERIC,
    TOOL_FMT_DEEPSEEK,
    TOOL_FMT_DEEPSEEK_V31,
    TOOL_FMT_MISTRAL_V11,
    TOOL_FMT_APRIEL,
    TOOL_FMT_HARMONY,
    TOOL_FMT_KIMI,
    TOOL_FMT_FUNCTIONARY,
    TOOL_FMT_COUNT
} tool_format;

typedef enum tool_choice {
    TOOL_CHOICE_NONE = 0, /* no tools in the prompt, no parsing */
    TOOL_CHOICE_AUTO,     /* the model decides; its calls are parsed */
    TOOL_CHOICE_REQUIRED, /* constrained to one or more calls (one without parallel_tool_calls) */
    TOOL_CHOICE_NAMED,    /* constrained to calls of the named function */
} tool_choice;

/* One function of the request (borrowed from the request's JSON). */
typedef struct oai_tool {
    const char *name;
    const char *description;  /* NULL when absent */
    const json_t *parameters; /* a JSON schema object; NULL: no arguments ({}) */
} oai_tool;

/* One parsed call (owned strings). */
typedef struct tool_call {
    char *name;
    char *arguments; /* a JSON object as compact text */
} tool_call;

const char *tools_format_name(tool_format f);

/* The text that introduces the tools to the model (for the system message,
 * or, mistral, the [AVAILABLE_TOOLS] block). */
void tools_render_list(tool_format f, const oai_tool *tools, size_t n, sbuf *out);
/* One earlier call of an assistant message, in the model's own syntax;
 * arguments is the JSON text OpenAI carries (a string). For mistral, calls
 * of one message go together: first and last say where the list opens and
 * closes. */
void tools_render_call(tool_format f, const char *name, const char *arguments, bool first,
                       bool last, sbuf *out);
/* A tool result message's content as the model expects it. */
void tools_render_result(tool_format f, const char *content, size_t n, sbuf *out);

/* GBNF for a valid answer made of calls only: one call (parallel false) or
 * one or more, each a tool's name with arguments that validate against its
 * parameters schema; only the tool called `only` when it is not NULL.
 * TPS_EINVAL naming the tool when a parameters schema cannot be compiled
 * (json_schema.h's message). */
int tools_grammar(tool_format f, const oai_tool *tools, size_t n, const char *only, bool parallel,
                  sbuf *gbnf, tps_err *err);

/* Finds the calls in a model's answer text[0..n). Returns how many
 * (0: none: the answer is plain content) into calls (each freed with
 * tools_calls_free), and in *content_len how much text precedes the first
 * call (the rest of the answer is the calls). A call whose JSON does not
 * parse, or names no function, ends the parse: what came before stays. */
size_t tools_parse(tool_format f, const char *text, size_t n, tool_call *calls, size_t cap,
                   size_t *content_len);
void tools_calls_free(tool_call *calls, size_t n);

/* Every marker text the parser of format f reads (NULL-ended; static). A
 * vocabulary may hold them as control tokens, whose text is not output by
 * default: the server has those rendered as text (tokenizer_render_as_text). */
const char *const *tools_marker_texts(tool_format f);

/* While an answer streams: how many of its first bytes text[0..n) are
 * surely content (no part of a call), so they can be sent now. *hold
 * becomes true once a call has surely begun (the rest waits for the
 * answer's end). hermes/generic/mistral: everything before the call marker,
 * minus a tail that could be the marker's start; llama3: nothing while only
 * blanks came, nothing once the answer starts with '{', all otherwise;
 * the others: everything before the first of their call markers. */
size_t tools_stream_safe(tool_format f, const char *text, size_t n, bool *hold);

#endif
