/* Tool calling formats (tools.h): rendering tools, calls and results into
 * the prompt of a template that does not write them, the constraining
 * grammar (through json_schema.h: every tool's call is one object schema,
 * the choice among tools an anyOf), and the parser of the model's calls. */
#include "server/tools.h"

#include <stdlib.h>
#include <string.h>

#include "server/json_schema.h"

#define DS_CALLS_BEGIN "<｜tool▁calls▁begin｜>"
#define DS_CALLS_END   "<｜tool▁calls▁end｜>"
#define DS_CALL_BEGIN  "<｜tool▁call▁begin｜>"
#define DS_CALL_END    "<｜tool▁call▁end｜>"
#define DS_SEP         "<｜tool▁sep｜>"

const char *tools_format_name(tool_format f) {
    static const char *const names[] = {"hermes", "llama3", "mistral", "generic", "deepseek"};
    return (unsigned)f < 5 ? names[f] : "hermes";
}

static const char *args_key(tool_format f) {
    return f == TOOL_FMT_LLAMA3 ? "parameters" : "arguments";
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
        sbuf_adds(out, "[AVAILABLE_TOOLS] [");
        for (size_t i = 0; i < n; i++) {
            if (i) sbuf_adds(out, ", ");
            tool_json(&tools[i], false, out);
        }
        sbuf_adds(out, "][/AVAILABLE_TOOLS]");
        break;
    case TOOL_FMT_DEEPSEEK:
        sbuf_adds(out, "You can call these functions:\n");
        for (size_t i = 0; i < n; i++) {
            tool_json(&tools[i], true, out);
            sbuf_adds(out, "\n");
        }
        sbuf_adds(out, "To call one, answer with " DS_CALLS_BEGIN DS_CALL_BEGIN "function" DS_SEP
                       "NAME\n```json\n{arguments}\n```" DS_CALL_END DS_CALLS_END);
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

void tools_render_call(tool_format f, const char *name, const char *arguments, bool first,
                       bool last, sbuf *out) {
    if (f == TOOL_FMT_DEEPSEEK) {
        sbuf_adds(out, first ? DS_CALLS_BEGIN DS_CALL_BEGIN "function" DS_SEP
                             : "\n" DS_CALL_BEGIN "function" DS_SEP);
        sbuf_adds(out, name);
        sbuf_adds(out, "\n```json\n");
        add_args(arguments, out);
        sbuf_adds(out, "\n```" DS_CALL_END);
        if (last) sbuf_adds(out, DS_CALLS_END);
        return;
    }
    bool tags = f == TOOL_FMT_HERMES || f == TOOL_FMT_GENERIC;
    if (tags) sbuf_adds(out, first ? "<tool_call>\n" : "\n<tool_call>\n");
    if (f == TOOL_FMT_MISTRAL) sbuf_adds(out, first ? "[TOOL_CALLS] [" : ", ");
    sbuf_adds(out, "{\"name\": ");
    sbuf_json_str(out, name, strlen(name));
    sbuf_printf(out, ", \"%s\": ", args_key(f));
    add_args(arguments, out);
    sbuf_adds(out, "}");
    if (tags) sbuf_adds(out, "\n</tool_call>");
    if (f == TOOL_FMT_MISTRAL && last) sbuf_adds(out, "]");
}

void tools_render_result(tool_format f, const char *content, size_t n, sbuf *out) {
    switch (f) {
    case TOOL_FMT_LLAMA3:
        sbuf_add(out, content, n);
        break;
    case TOOL_FMT_MISTRAL:
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

/* ---------------------------------------------------------------------------
 * Grammar
 * ------------------------------------------------------------------------- */

/* {"type":"object","properties":{"name":{"const":N},"arguments":P},
 *  "required":["name","arguments"],"additionalProperties":false} */
static json_t *call_schema(tool_format f, const oai_tool *t) {
    /* no parameters: the function takes none (OpenAI's meaning): {} */
    json_t *params = t->parameters ? json_deep_copy(t->parameters)
                                   : json_pack("{s:s,s:{},s:b}", "type", "object", "properties",
                                               "additionalProperties", 0);
    json_t *props = json_object();
    json_object_set_new(props, "name", json_pack("{s:s}", "const", t->name));
    json_object_set_new(props, args_key(f), params);
    return json_pack("{s:s,s:o,s:[s,s],s:b}", "type", "object", "properties", props, "required",
                     "name", args_key(f), "additionalProperties", 0);
}

int tools_grammar(tool_format f, const oai_tool *tools, size_t n, const char *only, bool parallel,
                  sbuf *gbnf, tps_err *err) {
    if (f == TOOL_FMT_DEEPSEEK)
        return tps_fail(err, TPS_EUNSUP,
                        "tool_choice \"required\" or a named function is not supported with "
                        "DeepSeek's tool-call format yet: use \"auto\"");
    json_t *any = json_array();
    for (size_t i = 0; i < n; i++)
        if (!only || !strcmp(tools[i].name, only))
            json_array_append_new(any, call_schema(f, &tools[i]));
    if (json_array_size(any) == 0) {
        json_decref(any);
        return tps_fail(err, TPS_EINVAL, "tool_choice names a function that is not in tools");
    }
    json_t *schema = json_array_size(any) == 1 ? json_incref(json_array_get(any, 0))
                                               : json_pack("{s:O}", "anyOf", any);
    json_decref(any);
    sbuf body;
    sbuf_init(&body);
    int rc = json_schema_to_gbnf(schema, &body, err);
    json_decref(schema);
    if (!rc && (!body.p || strncmp(body.p, "root ::= ", 9)))
        rc = tps_fail(err, TPS_EINVAL, "tools: unexpected grammar from the parameters schema");
    if (rc) {
        sbuf_free(&body);
        return rc;
    }
    switch (f) {
    case TOOL_FMT_LLAMA3: /* one JSON call: Llama 3.1 makes one at a time */
        sbuf_adds(gbnf, "root ::= call\n");
        break;
    case TOOL_FMT_MISTRAL:
        sbuf_adds(gbnf, parallel ? "root ::= \"[TOOL_CALLS] [\" call (\", \" call)* \"]\"\n"
                                 : "root ::= \"[TOOL_CALLS] [\" call \"]\"\n");
        break;
    default:
        sbuf_adds(gbnf, parallel ? "root ::= tc (\"\\n\" tc)*\n" : "root ::= tc\n");
        sbuf_adds(gbnf, "tc ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\n");
        break;
    }
    sbuf_adds(gbnf, "call ::= ");
    sbuf_add(gbnf, body.p + 9, body.len - 9);
    sbuf_free(&body);
    if (sbuf_failed(gbnf)) return tps_fail(err, TPS_ENOMEM, "tools: out of memory");
    return 0;
}

/* ---------------------------------------------------------------------------
 * Parsing the model's calls
 * ------------------------------------------------------------------------- */

/* One call object {"name": N, "arguments"|"parameters": {...} or "..."}
 * into c; false when it is not one. */
static bool call_from_json(const json_t *o, tool_call *c) {
    json_t *name = json_object_get(o, "name");
    json_t *args = json_object_get(o, "arguments");
    if (!args) args = json_object_get(o, "parameters");
    if (!json_is_object(o) || !json_is_string(name) || json_string_length(name) == 0) return false;
    json_t *parsed = NULL;
    if (json_is_string(args)) args = parsed = json_loads(json_string_value(args), 0, NULL);
    if (args && !json_is_object(args)) {
        json_decref(parsed);
        return false;
    }
    c->name = strdup(json_string_value(name));
    c->arguments = args ? json_dumps(args, JSON_COMPACT | JSON_PRESERVE_ORDER) : strdup("{}");
    json_decref(parsed);
    if (!c->name || !c->arguments) {
        free(c->name);
        free(c->arguments);
        return false;
    }
    return true;
}

static const char *find(const char *s, size_t n, const char *needle) {
    return memmem(s, n, needle, strlen(needle));
}

static size_t parse_hermes(const char *text, size_t n, tool_call *calls, size_t cap,
                           size_t *content_len) {
    size_t k = 0;
    const char *p = find(text, n, "<tool_call>");
    if (!p) return 0;
    *content_len = (size_t)(p - text);
    while (p && k < cap) {
        const char *body = p + strlen("<tool_call>");
        const char *end = find(body, n - (size_t)(body - text), "</tool_call>");
        size_t len = end ? (size_t)(end - body) : n - (size_t)(body - text);
        json_t *o = json_loadb(body, len, 0, NULL);
        bool ok = o && call_from_json(o, &calls[k]);
        json_decref(o);
        if (!ok) break;
        k++;
        if (!end) break;
        const char *rest = end + strlen("</tool_call>");
        p = find(rest, n - (size_t)(rest - text), "<tool_call>");
    }
    return k;
}

static size_t parse_llama3(const char *text, size_t n, tool_call *calls, size_t cap,
                           size_t *content_len) {
    size_t i = 0;
    while (i < n && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t'))
        i++;
    if (i == n || text[i] != '{' || !cap) return 0;
    json_t *o = json_loadb(text + i, n - i, 0, NULL);
    bool ok = o && json_object_get(o, "name") && call_from_json(o, &calls[0]);
    json_decref(o);
    *content_len = 0;
    return ok ? 1 : 0;
}

static size_t parse_mistral(const char *text, size_t n, tool_call *calls, size_t cap,
                            size_t *content_len) {
    const char *p = find(text, n, "[TOOL_CALLS]");
    if (!p) return 0;
    *content_len = (size_t)(p - text);
    const char *body = p + strlen("[TOOL_CALLS]");
    json_t *a = json_loadb(body, n - (size_t)(body - text), JSON_DISABLE_EOF_CHECK, NULL);
    size_t k = 0;
    for (size_t i = 0; json_is_array(a) && i < json_array_size(a) && k < cap; i++) {
        if (!call_from_json(json_array_get(a, i), &calls[k])) break;
        k++;
    }
    json_decref(a);
    return k;
}

/* One DeepSeek call after <｜tool▁call▁begin｜> (body[0..n)): R1's
 * "function<｜tool▁sep｜>NAME\n```json\nARGS\n```" or V3.1's
 * "NAME<｜tool▁sep｜>ARGS". */
static bool deepseek_call(const char *body, size_t n, tool_call *c) {
    const char *sep = find(body, n, DS_SEP);
    if (!sep) return false;
    const char *name = body, *rest = sep + strlen(DS_SEP);
    size_t name_len = (size_t)(sep - body), left = n - (size_t)(rest - body);
    if (name_len == strlen("function") && !memcmp(body, "function", name_len)) {
        const char *nl = memchr(rest, '\n', left);
        if (!nl) return false;
        name = rest;
        name_len = (size_t)(nl - rest);
        rest = nl + 1;
        left = n - (size_t)(rest - body);
        if (left >= 7 && !memcmp(rest, "```json", 7)) rest += 7, left -= 7;
    }
    while (left && (rest[left - 1] == '`' || rest[left - 1] == '\n' || rest[left - 1] == ' '))
        left--;
    json_t *args = json_loadb(rest, left, 0, NULL);
    json_t *o = json_object();
    json_object_set_new(o, "name", json_stringn(name, name_len));
    if (args) json_object_set_new(o, "arguments", args);
    bool ok = args && call_from_json(o, c);
    json_decref(o);
    return ok;
}

static size_t parse_deepseek(const char *text, size_t n, tool_call *calls, size_t cap,
                             size_t *content_len) {
    const char *p = find(text, n, DS_CALLS_BEGIN);
    if (!p) return 0;
    *content_len = (size_t)(p - text);
    size_t k = 0;
    for (p = find(p, n - (size_t)(p - text), DS_CALL_BEGIN); p && k < cap;) {
        const char *body = p + strlen(DS_CALL_BEGIN);
        size_t left = n - (size_t)(body - text);
        const char *end = find(body, left, DS_CALL_END);
        if (!end || !deepseek_call(body, (size_t)(end - body), &calls[k])) break;
        k++;
        const char *next = end + strlen(DS_CALL_END);
        p = find(next, n - (size_t)(next - text), DS_CALL_BEGIN);
    }
    return k;
}

size_t tools_parse(tool_format f, const char *text, size_t n, tool_call *calls, size_t cap,
                   size_t *content_len) {
    *content_len = n;
    if (!text) return 0;
    size_t k = f == TOOL_FMT_LLAMA3     ? parse_llama3(text, n, calls, cap, content_len)
               : f == TOOL_FMT_MISTRAL  ? parse_mistral(text, n, calls, cap, content_len)
               : f == TOOL_FMT_DEEPSEEK ? parse_deepseek(text, n, calls, cap, content_len)
                                        : parse_hermes(text, n, calls, cap, content_len);
    if (!k) *content_len = n; /* no call: all of it is content */
    return k;
}

size_t tools_stream_safe(tool_format f, const char *text, size_t n, bool *hold) {
    *hold = false;
    if (f == TOOL_FMT_LLAMA3) {
        size_t i = 0;
        while (i < n && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r'))
            i++;
        if (i == n) return 0;
        *hold = text[i] == '{';
        return *hold ? 0 : n;
    }
    const char *marker = f == TOOL_FMT_MISTRAL    ? "[TOOL_CALLS]"
                         : f == TOOL_FMT_DEEPSEEK ? DS_CALLS_BEGIN
                                                  : "<tool_call>";
    size_t ml = strlen(marker);
    const char *p = find(text, n, marker);
    if (p) {
        *hold = true;
        return (size_t)(p - text);
    }
    for (size_t k = ml - 1; k > 0; k--) /* a tail that may grow into the marker */
        if (n >= k && !memcmp(text + n - k, marker, k)) return n - k;
    return n;
}

void tools_calls_free(tool_call *calls, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(calls[i].name);
        free(calls[i].arguments);
        calls[i].name = calls[i].arguments = NULL;
    }
}
