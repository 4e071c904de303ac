/* Tool calling formats (tools.h): rendering tools, calls and results into
 * the prompt of a template that does not write them, each by its row
 * (tools_table.c), and a row's markers handed to constrain/tool_grammar.h
 * for the grammar of forced calls. The reader of the model's calls is in
 * tools_scan.c. */
#include "server/tools/tools.h"

#include <stdlib.h>
#include <string.h>

#include "server/tools/tools_internal.h"

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

/* The n tools' JSON, sep between them. */
static void tools_joined(const oai_tool *tools, size_t n, const char *sep, bool compact,
                         sbuf *out) {
    for (size_t i = 0; i < n; i++) {
        if (i) sbuf_adds(out, sep);
        tool_json(&tools[i], compact, out);
    }
}

void tools_render_list(tool_format f, const oai_tool *tools, size_t n, sbuf *out) {
    switch (tools_row(f)->list) {
    case TOOL_LIST_LLAMA3:
        sbuf_adds(out, "Environment: ipython\n\nYou have access to the following functions. To "
                       "call a function, respond with JSON for a function call in the format "
                       "{\"name\": function name, \"parameters\": dictionary of argument name and "
                       "its value}. Do not use variables.\n\n");
        for (size_t i = 0; i < n; i++) {
            tool_json(&tools[i], false, out);
            sbuf_adds(out, "\n\n");
        }
        break;
    case TOOL_LIST_MISTRAL:
        sbuf_adds(out, "[AVAILABLE_TOOLS] [");
        tools_joined(tools, n, ", ", false, out);
        sbuf_adds(out, "][/AVAILABLE_TOOLS]");
        break;
    case TOOL_LIST_EXAMPLE: /* (most such templates write the tools themselves) */
        sbuf_adds(out, "You can call these functions:\n");
        for (size_t i = 0; i < n; i++) {
            tool_json(&tools[i], true, out);
            sbuf_adds(out, "\n");
        }
        sbuf_adds(out, "To call one, answer with ");
        tools_render_call(f, "NAME", "{}", true, true, out);
        break;
    case TOOL_LIST_GENERIC:
        sbuf_adds(out, "Tools: [");
        tools_joined(tools, n, ",", true, out);
        sbuf_adds(out, "]\nTo call: <tool_call>\n{\"name\": N, \"arguments\": {...}}\n"
                       "</tool_call>");
        break;
    case TOOL_LIST_HERMES:
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

/* Parameters as the row writes them: p_open K p_mid V p_close for each
 * argument, a string raw (quoted where the row quotes), anything else as
 * JSON. */
static void add_params(const tool_syntax *w, const char *arguments, sbuf *out) {
    json_t *a = arguments ? json_loads(arguments, 0, NULL) : NULL;
    const char *k;
    json_t *v;
    bool first = true;
    json_object_foreach(a, k, v) {
        if (!first) sbuf_adds(out, w->p_sep ? w->p_sep : "");
        first = false;
        sbuf_adds(out, w->p_open);
        sbuf_adds(out, k);
        bool str = json_is_string(v);
        sbuf_adds(out, str || !w->p_mid_json ? w->p_mid : w->p_mid_json);
        if (str) {
            sbuf_adds(out, w->q_open ? w->q_open : "");
            sbuf_add(out, json_string_value(v), json_string_length(v));
            sbuf_adds(out, w->q_close ? w->q_close : "");
        } else {
            char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
            if (s) sbuf_adds(out, s);
            free(s);
        }
        sbuf_adds(out, w->p_close);
    }
    json_decref(a);
}

void tools_render_call(tool_format f, const char *name, const char *arguments, bool first,
                       bool last, sbuf *out) {
    const tool_syntax *w = tools_row(f);
    sbuf_adds(out, first ? (w->sec_open ? w->sec_open : "") : (w->call_sep ? w->call_sep : ""));
    sbuf_adds(out, w->hist_open ? w->hist_open : w->call_open ? w->call_open : "");
    if (w->id_close) sbuf_printf(out, "call_0%s", w->id_close);
    if (w->args == TOOL_ARGS_CALL) {
        sbuf_adds(out, "{");
        if (w->id_key) sbuf_printf(out, "\"%s\": \"0\", ", w->id_key);
        sbuf_printf(out, "\"%s\": ", w->name_key);
        sbuf_json_str(out, name, strlen(name));
        sbuf_printf(out, ", \"%s\": ", w->args_key);
        add_args(arguments, out);
        sbuf_adds(out, "}");
    } else {
        sbuf_adds(out, name);
        sbuf_adds(out, w->hist_name_close ? w->hist_name_close : w->name_close);
        if (w->indexed) sbuf_adds(out, "0");
        sbuf_adds(out, w->args_open ? w->args_open : "");
        if (w->args == TOOL_ARGS_OBJECT)
            add_args(arguments, out);
        else
            add_params(w, arguments, out);
    }
    sbuf_adds(out, w->hist_open ? "<|call|>" : w->call_close ? w->call_close : "");
    if (last) sbuf_adds(out, w->sec_close ? w->sec_close : "");
}

void tools_render_result(tool_format f, const char *content, size_t n, sbuf *out) {
    const tool_syntax *w = tools_row(f);
    sbuf_adds(out, w->res_open ? w->res_open : "");
    if (w->res_json)
        sbuf_json_str(out, content, n);
    else
        sbuf_add(out, content, n);
    sbuf_adds(out, w->res_close ? w->res_close : "");
}

const char *tools_result_role(tool_format f) {
    const char *r = tools_row(f)->res_role;
    return r ? r : "user";
}

bool tools_list_before_user(tool_format f) {
    return tools_row(f)->list == TOOL_LIST_MISTRAL;
}

void tools_calls_free(tool_call *calls, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(calls[i].name);
        free(calls[i].arguments);
        calls[i].name = calls[i].arguments = NULL;
    }
}

/* The grammar's view of row w: its markers, none of its detection,
 * rendering or reading. */
static tool_grammar_syntax grammar_syntax(const tool_syntax *w) {
    return (tool_grammar_syntax){
        .sec_open = w->sec_open,
        .sec_close = w->sec_close,
        .call_open = w->call_open,
        .call_sep = w->call_sep,
        .call_close = w->call_close,
        .id_close = w->id_close,
        .name_close = w->name_close,
        .indexed = w->indexed,
        .args_open = w->args_open,
        .args = w->args,
        .name_key = w->name_key,
        .args_key = w->args_key,
        .id_key = w->id_key,
        .p_open = w->p_open,
        .p_mid = w->p_mid,
        .p_mid_json = w->p_mid_json,
        .p_close = w->p_close,
        .p_sep = w->p_sep,
        .q_open = w->q_open,
        .q_close = w->q_close,
        .one_call = w->one_call,
        .gbnf_lead = w->gbnf_lead,
        .gbnf_extra = w->gbnf_extra,
    };
}

int tools_grammar(tool_format f, const oai_tool *tools, size_t n, const char *only, bool parallel,
                  sbuf *gbnf, tps_err *err) {
    tool_grammar_fn *fns = calloc(n ? n : 1, sizeof *fns);
    if (!fns) return tps_fail(err, TPS_ENOMEM, "tools: out of memory");
    for (size_t i = 0; i < n; i++)
        fns[i] = (tool_grammar_fn){.name = tools[i].name, .parameters = tools[i].parameters};
    tool_grammar_syntax w = grammar_syntax(tools_row(f));
    int rc = tool_grammar_gbnf(&w, fns, n, only, parallel, gbnf, err);
    free(fns);
    return rc;
}
