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
    TOOL_FMT_QWEN3_CODER,
    TOOL_FMT_SEED_OSS,
    TOOL_FMT_GLM,
    TOOL_FMT_MINIMAX,
    TOOL_FMT_DEEPSEEK_V32,
    TOOL_FMT_NEMOTRON_V2,
    TOOL_FMT_APERTUS,
    TOOL_FMT_COMMAND_R7B,
    TOOL_FMT_COMMAND_R_PLUS,
    TOOL_FMT_GRANITE,
    TOOL_FMT_LFM2,
    TOOL_FMT_GIGACHAT3,
    TOOL_FMT_GIGACHAT31,
    TOOL_FMT_SOLAR_OPEN,
    TOOL_FMT_FUNCTIONARY_V32,
    TOOL_FMT_FIREFUNCTION,
    TOOL_FMT_GEMMA4,
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

/* The syntax a chat template's text implies (the first row whose markers
 * it holds); *known false and generic when none (a template that reads
 * tools then asks for calls tps cannot read). */
tool_format tools_detect(const char *text, size_t len, bool *known);

/* The request's functions as the parser needs them after the request is
 * gone: each name and which of its parameters are strings (an XML-like
 * syntax writes a string raw and anything else as JSON). Owned; NULL when
 * out of memory. */
typedef struct tool_set tool_set;
tool_set *tools_set_new(const oai_tool *tools, size_t n);
void tools_set_free(tool_set *ts);

/* The text that introduces the tools to the model (for the system message,
 * or, mistral, the [AVAILABLE_TOOLS] block). */
void tools_render_list(tool_format f, const oai_tool *tools, size_t n, sbuf *out);
/* One earlier call of an assistant message, in the model's own syntax;
 * arguments is the JSON text OpenAI carries (a string). For mistral, calls
 * of one message go together: first and last say where the list opens and
 * closes. */
void tools_render_call(tool_format f, const char *name, const char *arguments, bool first,
                       bool last, sbuf *out);
/* A tool result message's content as the model expects it, in a turn of
 * role tools_result_role (user, ipython, tool). */
void tools_render_result(tool_format f, const char *content, size_t n, sbuf *out);
const char *tools_result_role(tool_format f);
/* Whether the tool list goes before the last user turn (Mistral's
 * [AVAILABLE_TOOLS]) rather than into the system message. */
bool tools_list_before_user(tool_format f);

/* GBNF for a valid answer made of calls only: one call (parallel false) or
 * one or more, each a tool's name with arguments that validate against its
 * parameters schema; only the tool called `only` when it is not NULL.
 * TPS_EINVAL naming the tool when a parameters schema cannot be compiled
 * (json_schema.h's message). Format f's row, written by
 * constrain/tool_grammar.h. */
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

/* ---------------------------------------------------------------------------
 * Calls as they stream (tools_stream.c): one per answer (a request's
 * choice), fed the answer's text as the model writes it. It reports, in
 * order: the content before the first call (CONTENT, as soon as no marker
 * can begin in it), then for each call CALL_START (index, id, name),
 * ARGS (the next piece of its arguments' JSON text: the pieces of a call
 * add up to its final arguments string) and CALL_DONE (complete: its
 * arguments are whole and parse as an object; false: the answer ended
 * inside it, e.g. at max_tokens). The chat stream writes them as
 * tool_calls deltas; the Responses and Messages writers can write them as
 * function_call_arguments.delta and input_json_delta. A forced call's
 * grammar holds its arguments to the tool's schema, so a complete call
 * validates against it.
 *
 *   tool_stream *ts = tool_stream_new(fmt, set, "call_abc_0_");
 *   per token:  tool_stream_feed(ts, text, n, on_event, ctx);
 *   at the end: tool_stream_end(ts, on_event, ctx);
 *               k = tool_stream_calls(ts, calls, cap, &content_len);
 *   tool_stream_free(ts);
 *
 * Not thread-safe (one answer, one thread); the set is borrowed and must
 * outlive the stream. Each feed re-reads the answer so far (bounded by the
 * answer's length, TOOLS_MAX_CALLS calls).
 * ------------------------------------------------------------------------- */

typedef enum tool_event_kind {
    TOOL_EV_CONTENT = 0,
    TOOL_EV_CALL_START,
    TOOL_EV_ARGS,
    TOOL_EV_CALL_DONE,
} tool_event_kind;

typedef struct tool_event {
    tool_event_kind kind;
    size_t index;     /* the call's, from 0 */
    const char *id;   /* CALL_START: the call's id (id prefix + index) */
    const char *name; /* CALL_START: the function (name_len bytes) */
    size_t name_len;
    const char *text; /* CONTENT, ARGS: n bytes (borrowed for the call) */
    size_t n;
    bool complete; /* CALL_DONE */
    /* CALL_DONE, complete: the request offered the function and its
     * arguments are an instance of its parameters schema
     * (json_schema_check.h). A forced call's grammar makes that so; a
     * call the model wrote freely (tool_choice auto) may fail it, and is
     * still reported as written (as vLLM and llama-server do; the client
     * decides), counted by tool_stream_invalid. */
    bool valid;
} tool_event;

typedef void tool_event_fn(void *ctx, const tool_event *ev);

typedef struct tool_stream tool_stream;

/* A stream for one answer in format f, typed by ts (NULL: untyped); the
 * calls' ids are id_prefix and their index. NULL when out of memory. */
tool_stream *tool_stream_new(tool_format f, const tool_set *ts, const char *id_prefix);
void tool_stream_free(tool_stream *s);
/* The answer's next text; fn (may be NULL) gets what it settles. */
void tool_stream_feed(tool_stream *s, const char *text, size_t n, tool_event_fn *fn, void *ctx);
/* The answer is done: the rest of the content (all of the answer when no
 * call was whole), the rest of each call, CALL_DONE for every call begun. */
void tool_stream_end(tool_stream *s, tool_event_fn *fn, void *ctx);
/* After tool_stream_end: the complete calls (copies into calls, freed with
 * tools_calls_free) and in *content_len the bytes of content before them. */
size_t tool_stream_calls(const tool_stream *s, tool_call *calls, size_t cap, size_t *content_len);
/* Calls complete so far (CALL_DONE sent, complete). */
size_t tool_stream_whole(const tool_stream *s);
/* Of those, how many failed their schema check (tool_event.valid). */
size_t tool_stream_invalid(const tool_stream *s);

#endif
