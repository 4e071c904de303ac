/* Tool calling formats (tools.h): their names, and rendering tools, calls
 * and results into the prompt of a template that does not write them.
 * The grammars of forced calls are in tools_grammar.c, the parser of the
 * model's calls in tools_parse.c. */
#include "server/tools.h"

#include <stdlib.h>
#include <string.h>

#include "server/tools_internal.h"

const char *tools_format_name(tool_format f) {
    static const char *const names[TOOL_FMT_COUNT] = {
        [TOOL_FMT_HERMES] = "hermes",
        [TOOL_FMT_LLAMA3] = "llama3",
        [TOOL_FMT_MISTRAL] = "mistral",
        [TOOL_FMT_GENERIC] = "generic",
        [TOOL_FMT_DEEPSEEK] = "deepseek",
        [TOOL_FMT_DEEPSEEK_V31] = "deepseek-v3.1",
        [TOOL_FMT_MISTRAL_V11] = "mistral-v11",
        [TOOL_FMT_APRIEL] = "apriel",
        [TOOL_FMT_HARMONY] = "harmony",
        [TOOL_FMT_KIMI] = "kimi-k2",
        [TOOL_FMT_FUNCTIONARY] = "functionary-v3.1",
    };
    return (unsigned)f < TOOL_FMT_COUNT ? names[f] : "hermes";
}

/* {"type": "function", "function": {name, description, parameters}} */
static void tool_json(const oai_tool *t, bool compact, sbuf *out) {
    json_t *fn = json_object();
    json_object_set_new(fn, "name", json_string(t->name));
    if (t->description) json_object_set_new(fn, "description", json_string(t->description));
    if (t->parameters) json_object_set(fn, "parameters", (json_t *)t->parameters);
    json_t *o = json_pack("{s:s,s:o}", "type", "function", "function", fn);
    char *s = o ? json_dumps(o, JSON_PRESERVE_ORDER | (compact ? JSON_COMPACT : 0)) : NULL;
    if (s) sbuf_adds(out, s);
    free(s);
    json_decref(o);
}

void tools_render_list(tool_format f, const oai_tool *tools, size_t n, sbuf *out) {
    switch (f) {
    case TOOL_FMT_LLAMA3:
        sbuf_adds(out, "Environment: ipython\n\nYou have access to the following functions. To "
                       "call a function, respond with JSON for a function call in the format "
                       "{\"name\": function name, \"parameters\": dictionary of argument name and "
                       "its value}. Do not use variables.\n\n");
        for (size_t i = 0; i < n; i++) {
            tool_json(&tools[i], false, out);
            sbuf_adds(out, "\n\n");
        }
        break;
    case TOOL_FMT_MISTRAL:
    case TOOL_FMT_MISTRAL_V11:
        sbuf_adds(out, "[AVAILABLE_TOOLS] [");
        for (size_t i = 0; i < n; i++) {
            if (i) sbuf_adds(out, ", ");
            tool_json(&tools[i], false, out);
        }
        sbuf_adds(out, "][/AVAILABLE_TOOLS]");
        break;
    case TOOL_FMT_DEEPSEEK:
    case TOOL_FMT_DEEPSEEK_V31:
    case TOOL_FMT_HARMONY:
    case TOOL_FMT_KIMI:
    case TOOL_FMT_FUNCTIONARY: /* (their templates write the tools themselves) */
        sbuf_adds(out, "You can call these functions:\n");
        for (size_t i = 0; i < n; i++) {
            tool_json(&tools[i], true, out);
            sbuf_adds(out, "\n");
        }
        sbuf_adds(out, "To call one, answer with ");
        tools_render_call(f, "NAME", "{}", true, true, out);
        break;
    case TOOL_FMT_GENERIC:
        sbuf_adds(out, "Tools: [");
        for (size_t i = 0; i < n; i++) {
            if (i) sbuf_adds(out, ",");
            tool_json(&tools[i], true, out);
        }
        sbuf_adds(out, "]\nTo call: <tool_call>\n{\"name\": N, \"arguments\": {...}}\n"
                       "</tool_call>");
        break;
    default:
        sbuf_adds(out, "# Tools\n\nYou may call one or more functions to assist with the user "
                       "query.\n\nYou are provided with function signatures within "
                       "<tools></tools> XML tags:\n<tools>");
        for (size_t i = 0; i < n; i++) {
            sbuf_adds(out, "\n");
            tool_json(&tools[i], false, out);
        }
        sbuf_adds(out, "\n</tools>\n\nFor each function call, return a json object with function "
                       "name and arguments within <tool_call></tool_call> XML tags:\n"
                       "<tool_call>\n{\"name\": <function-name>, \"arguments\": "
                       "<args-json-object>}\n</tool_call>");
        break;
    }
}

/* arguments as JSON when it parses, else as a JSON string of the text */
static void add_args(const char *arguments, sbuf *out) {
    json_t *a = arguments ? json_loads(arguments, JSON_DECODE_ANY, NULL) : NULL;
    char *s = a ? json_dumps(a, JSON_PRESERVE_ORDER | JSON_ENCODE_ANY) : NULL;
    if (s)
        sbuf_adds(out, s);
    else if (arguments)
        sbuf_json_str(out, arguments, strlen(arguments));
    else
        sbuf_adds(out, "{}");
    free(s);
    json_decref(a);
}

/* The formats whose name stands outside the JSON, as each writes a call:
 * what opens the first call (later: each one after it), the head with the
 * name at its %s, the tail after the arguments, what closes the last. */
static const struct named_call_fmt {
    const char *first, *later, *head, *tail, *last;
} NAMED[TOOL_FMT_COUNT] = {
    [TOOL_FMT_DEEPSEEK] = {DS_CALLS_BEGIN, "\n", DS_CALL_BEGIN "function" DS_SEP "%s\n```json\n",
                           "\n```" DS_CALL_END, DS_CALLS_END},
    [TOOL_FMT_DEEPSEEK_V31] = {DS_CALLS_BEGIN, "", DS_CALL_BEGIN "%s" DS_SEP, DS_CALL_END,
                               DS_CALLS_END},
    /* as the gpt-oss template writes an earlier call */
    [TOOL_FMT_HARMONY] = {"", "",
                          "<|start|>assistant " HARMONY_TO_FN
                          "%s<|channel|>commentary json" HARMONY_MESSAGE,
                          "<|call|>", ""},
    [TOOL_FMT_KIMI] = {KIMI_SECTION_BEGIN, "", KIMI_CALL_BEGIN "functions.%s:0" KIMI_ARGS_BEGIN,
                       KIMI_CALL_END, KIMI_SECTION_END},
    [TOOL_FMT_MISTRAL_V11] = {"", "", MISTRAL_CALLS "%s" MISTRAL_ARGS, "", ""},
    [TOOL_FMT_FUNCTIONARY] = {"", "", FUNC_OPEN "%s>", FUNC_CLOSE, ""},
};

static bool render_named_call(tool_format f, const char *name, const char *arguments, bool first,
                              bool last, sbuf *out) {
    const struct named_call_fmt *t = (unsigned)f < TOOL_FMT_COUNT ? &NAMED[f] : NULL;
    if (!t || !t->head) return false;
    sbuf_adds(out, first ? t->first : t->later);
    sbuf_printf(out, t->head, name);
    add_args(arguments, out);
    sbuf_adds(out, t->tail);
    if (last) sbuf_adds(out, t->last);
    return true;
}

void tools_render_call(tool_format f, const char *name, const char *arguments, bool first,
                       bool last, sbuf *out) {
    if (render_named_call(f, name, arguments, first, last, out)) return;
    bool tags = f == TOOL_FMT_HERMES || f == TOOL_FMT_GENERIC;
    if (tags) sbuf_adds(out, first ? "<tool_call>\n" : "\n<tool_call>\n");
    if (f == TOOL_FMT_MISTRAL) sbuf_adds(out, first ? "[TOOL_CALLS] [" : ", ");
    if (f == TOOL_FMT_APRIEL) sbuf_adds(out, first ? APRIEL_OPEN "[" : ", ");
    sbuf_adds(out, "{\"name\": ");
    sbuf_json_str(out, name, strlen(name));
    sbuf_printf(out, ", \"%s\": ", tools_args_key(f));
    add_args(arguments, out);
    sbuf_adds(out, "}");
    if (tags) sbuf_adds(out, "\n</tool_call>");
    if (f == TOOL_FMT_MISTRAL && last) sbuf_adds(out, "]");
    if (f == TOOL_FMT_APRIEL && last) sbuf_adds(out, "]" APRIEL_CLOSE);
}

void tools_render_result(tool_format f, const char *content, size_t n, sbuf *out) {
    switch (f) {
    case TOOL_FMT_LLAMA3:
        sbuf_add(out, content, n);
        break;
    case TOOL_FMT_MISTRAL:
    case TOOL_FMT_MISTRAL_V11:
        sbuf_adds(out, "[TOOL_RESULTS] {\"content\": ");
        sbuf_json_str(out, content, n);
        sbuf_adds(out, "}[/TOOL_RESULTS]");
        break;
    default:
        sbuf_adds(out, "<tool_response>\n");
        sbuf_add(out, content, n);
        sbuf_adds(out, "\n</tool_response>");
        break;
    }
}

void tools_calls_free(tool_call *calls, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(calls[i].name);
        free(calls[i].arguments);
        calls[i].name = calls[i].arguments = NULL;
    }
}
