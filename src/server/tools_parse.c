/* Reading tool calls back out of a model's answer (tools.h), each format
 * by its own syntax, and how much of a streamed answer is surely content.
 * A call whose JSON does not parse ends the parse: what came before stays.
 * Not here: rendering (tools.c), grammars (tools_grammar.c). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "server/tools_internal.h"

/* One call object {"name": N, "arguments"|"parameters": {...} or "..."}
 * into c; false when it is not one. */
static bool call_from_json(const json_t *o, tool_call *c) {
    json_t *name = json_object_get(o, "name");
    json_t *args = json_object_get(o, "arguments");
    if (!args) args = json_object_get(o, "parameters");
    /* a name with a NUL byte would come out cut short (empty, at worst) */
    if (!json_is_object(o) || !json_is_string(name) || json_string_length(name) == 0 ||
        memchr(json_string_value(name), 0, json_string_length(name)))
        return false;
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

static size_t parse_hermes(const char *text, size_t n, tool_call *calls, size_t cap,
                           size_t *content_len) {
    size_t k = 0;
    const char *p = tools_find(text, n, "<tool_call>");
    if (!p) return 0;
    *content_len = (size_t)(p - text);
    while (p && k < cap) {
        const char *body = p + strlen("<tool_call>");
        const char *end = tools_find(body, n - (size_t)(body - text), "</tool_call>");
        size_t len = end ? (size_t)(end - body) : n - (size_t)(body - text);
        json_t *o = json_loadb(body, len, 0, NULL);
        bool ok = o && call_from_json(o, &calls[k]);
        json_decref(o);
        if (!ok) break;
        k++;
        if (!end) break;
        const char *rest = end + strlen("</tool_call>");
        p = tools_find(rest, n - (size_t)(rest - text), "<tool_call>");
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

/* One call from name[0..nl) and the JSON object at args (the first JSON
 * value there; what follows it is not read). */
static bool named_call(const char *name, size_t nl, const char *args, size_t left, tool_call *c) {
    if (!nl) return false;
    json_t *a = json_loadb(args, left, JSON_DISABLE_EOF_CHECK, NULL);
    json_t *o = json_object();
    json_object_set_new(o, "name", json_stringn(name, nl));
    if (a) json_object_set_new(o, "arguments", a);
    bool ok = a && call_from_json(o, c);
    json_decref(o);
    return ok;
}

/* The calls in the JSON array at body[0..left) (what follows it is not
 * read), {"name": N, "arguments": {...}} each, up to cap of them. */
static size_t array_calls(const char *body, size_t left, tool_call *calls, size_t cap) {
    json_t *a = json_loadb(body, left, JSON_DISABLE_EOF_CHECK, NULL);
    size_t k = 0;
    for (size_t i = 0; json_is_array(a) && i < json_array_size(a) && k < cap; i++) {
        if (!call_from_json(json_array_get(a, i), &calls[k])) break;
        k++;
    }
    json_decref(a);
    return k;
}

/* The text after "to=functions." up to a blank, '<' or the end. */
static size_t name_len(const char *p, const char *end) {
    size_t k = 0;
    while (p + k < end && p[k] != ' ' && p[k] != '<' && p[k] != '\n' && p[k] != ':' && p[k] != '>')
        k++;
    return k;
}

/* The calls OPEN id ARGS {...} OPEN id ARGS {...} ..., p at the first
 * OPEN, up to cap of them: the name is the id whole (Mistral's
 * [TOOL_CALLS]N[ARGS]), or with indexed_id (Kimi's functions.N:IDX) the
 * part after "functions." up to the index. */
static size_t marked_calls(const char *p, const char *end, const char *open, const char *args_mark,
                           bool indexed_id, tool_call *calls, size_t cap) {
    size_t k = 0;
    while (p && k < cap) {
        const char *id = p + strlen(open);
        const char *args = tools_find(id, (size_t)(end - id), args_mark);
        if (!args) break;
        const char *name = id;
        size_t nl = (size_t)(args - id);
        if (indexed_id) {
            if (nl > 10 && !memcmp(id, "functions.", 10)) name += 10;
            nl = name_len(name, args);
        }
        args += strlen(args_mark);
        if (!named_call(name, nl, args, (size_t)(end - args), &calls[k])) break;
        k++;
        p = tools_find(args, (size_t)(end - args), open);
    }
    return k;
}

/* [TOOL_CALLS] [{"name": N, "arguments": {...}}, ...], or the later
 * tokenizers' [TOOL_CALLS]N[ARGS]{...} for each call. */
static size_t parse_mistral(const char *text, size_t n, tool_call *calls, size_t cap,
                            size_t *content_len) {
    const char *end = text + n, *p = tools_find(text, n, MISTRAL_CALLS);
    if (!p) return 0;
    *content_len = (size_t)(p - text);
    const char *body = p + strlen(MISTRAL_CALLS);
    while (body < end && *body == ' ')
        body++;
    if (body < end && *body == '[') return array_calls(body, (size_t)(end - body), calls, cap);
    return marked_calls(p, end, MISTRAL_CALLS, MISTRAL_ARGS, false, calls, cap);
}

/* Apriel: <tool_calls>[{"name": N, "arguments": {...}}, ...] */
static size_t parse_apriel(const char *text, size_t n, tool_call *calls, size_t cap,
                           size_t *content_len) {
    const char *p = tools_find(text, n, APRIEL_OPEN);
    if (!p) return 0;
    *content_len = (size_t)(p - text);
    const char *body = p + strlen(APRIEL_OPEN);
    return array_calls(body, n - (size_t)(body - text), calls, cap);
}

/* One DeepSeek call after <｜tool▁call▁begin｜> (body[0..n)): R1's
 * "function<｜tool▁sep｜>NAME\n```json\nARGS\n```" or V3.1's
 * "NAME<｜tool▁sep｜>ARGS". */
static bool deepseek_call(const char *body, size_t n, tool_call *c) {
    const char *sep = tools_find(body, n, DS_SEP);
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
    return named_call(name, name_len, rest, left, c);
}

static size_t parse_deepseek(const char *text, size_t n, tool_call *calls, size_t cap,
                             size_t *content_len) {
    const char *p = tools_find(text, n, DS_CALLS_BEGIN);
    if (!p) return 0;
    *content_len = (size_t)(p - text);
    size_t k = 0;
    for (p = tools_find(p, n - (size_t)(p - text), DS_CALL_BEGIN); p && k < cap;) {
        const char *body = p + strlen(DS_CALL_BEGIN);
        size_t left = n - (size_t)(body - text);
        const char *end = tools_find(body, left, DS_CALL_END);
        if (!end || !deepseek_call(body, (size_t)(end - body), &calls[k])) break;
        k++;
        const char *next = end + strlen(DS_CALL_END);
        p = tools_find(next, n - (size_t)(next - text), DS_CALL_BEGIN);
    }
    return k;
}

static bool starts(const char *p, const char *end, const char *lit) {
    size_t l = strlen(lit);
    return (size_t)(end - p) >= l && !memcmp(p, lit, l);
}

/* gpt-oss: every message to functions.N, as harmony.h hands them on (or
 * in the raw text: reasoning_format "none"). The call's header begins at
 * the <|start|> or <|channel|> before its recipient, with no <|message|>
 * between, or at the recipient's blank. */
static size_t parse_harmony(const char *text, size_t n, tool_call *calls, size_t cap,
                            size_t *content_len) {
    size_t k = 0;
    const char *end = text + n;
    for (const char *to = tools_find(text, n, HARMONY_TO_FN); to && k < cap;) {
        const char *name = to + strlen(HARMONY_TO_FN);
        size_t nl = name_len(name, end);
        const char *msg = tools_find(name, (size_t)(end - name), HARMONY_MESSAGE);
        if (!msg || !named_call(name, nl, msg + strlen(HARMONY_MESSAGE),
                                (size_t)(end - msg) - strlen(HARMONY_MESSAGE), &calls[k]))
            break;
        if (k++ == 0) {
            const char *head = to > text && to[-1] == ' ' ? to - 1 : to;
            for (const char *q = text; q < to; q++)
                if ((starts(q, to, "<|start|>") || starts(q, to, "<|channel|>")) &&
                    !tools_find(q, (size_t)(to - q), HARMONY_MESSAGE)) {
                    head = q;
                    break;
                }
            *content_len = (size_t)(head - text);
        }
        to = tools_find(msg, (size_t)(end - msg), HARMONY_TO_FN);
    }
    return k;
}

/* Kimi K2: <|tool_call_begin|>functions.N:IDX<|tool_call_argument_begin|>{...} */
static size_t parse_kimi(const char *text, size_t n, tool_call *calls, size_t cap,
                         size_t *content_len) {
    const char *end = text + n, *sec = tools_find(text, n, KIMI_SECTION_BEGIN);
    const char *p = tools_find(text, n, KIMI_CALL_BEGIN);
    if (!p) return 0;
    *content_len = (size_t)((sec && sec < p ? sec : p) - text);
    return marked_calls(p, end, KIMI_CALL_BEGIN, KIMI_ARGS_BEGIN, true, calls, cap);
}

/* Functionary v3.1: <function=N>{...}</function> ... */
static size_t parse_functionary(const char *text, size_t n, tool_call *calls, size_t cap,
                                size_t *content_len) {
    const char *end = text + n, *p = tools_find(text, n, FUNC_OPEN);
    if (!p) return 0;
    *content_len = (size_t)(p - text);
    size_t k = 0;
    while (p && k < cap) {
        const char *name = p + strlen(FUNC_OPEN);
        size_t nl = name_len(name, end);
        if (name + nl >= end || name[nl] != '>') break;
        const char *args = name + nl + 1;
        if (!named_call(name, nl, args, (size_t)(end - args), &calls[k])) break;
        k++;
        p = tools_find(args, (size_t)(end - args), FUNC_OPEN);
    }
    return k;
}

size_t tools_parse(tool_format f, const char *text, size_t n, tool_call *calls, size_t cap,
                   size_t *content_len) {
    *content_len = n;
    if (!text) return 0;
    typedef size_t parse_fn(const char *, size_t, tool_call *, size_t, size_t *);
    static parse_fn *const PARSE[TOOL_FMT_COUNT] = {
        [TOOL_FMT_LLAMA3] = parse_llama3,           [TOOL_FMT_MISTRAL] = parse_mistral,
        [TOOL_FMT_MISTRAL_V11] = parse_mistral,     [TOOL_FMT_DEEPSEEK] = parse_deepseek,
        [TOOL_FMT_DEEPSEEK_V31] = parse_deepseek,   [TOOL_FMT_APRIEL] = parse_apriel,
        [TOOL_FMT_HARMONY] = parse_harmony,         [TOOL_FMT_KIMI] = parse_kimi,
        [TOOL_FMT_FUNCTIONARY] = parse_functionary,
    };
    parse_fn *parse = (unsigned)f < TOOL_FMT_COUNT && PARSE[f] ? PARSE[f] : parse_hermes;
    size_t k = parse(text, n, calls, cap, content_len);
    if (!k) *content_len = n; /* no call: all of it is content */
    return k;
}

/* The markers where a format's calls may begin (NULL-ended). */
static const char *const *call_markers(tool_format f) {
    static const char *const mistral[] = {MISTRAL_CALLS, NULL};
    static const char *const ds[] = {DS_CALLS_BEGIN, NULL};
    /* the recipient wherever it stands, with the space before it when there
     * is one (the parser reads it anywhere: the content ends before it) */
    static const char *const harmony[] = {"<|start|>", "<|channel|>", " " HARMONY_TO_FN,
                                          HARMONY_TO_FN, NULL};
    static const char *const kimi[] = {KIMI_SECTION_BEGIN, KIMI_CALL_BEGIN, NULL};
    static const char *const func[] = {FUNC_OPEN, NULL};
    static const char *const apriel[] = {APRIEL_OPEN, NULL};
    static const char *const hermes[] = {"<tool_call>", NULL};
    switch (f) {
    case TOOL_FMT_MISTRAL:
    case TOOL_FMT_MISTRAL_V11:
        return mistral;
    case TOOL_FMT_DEEPSEEK:
    case TOOL_FMT_DEEPSEEK_V31:
        return ds;
    case TOOL_FMT_HARMONY:
        return harmony;
    case TOOL_FMT_KIMI:
        return kimi;
    case TOOL_FMT_FUNCTIONARY:
        return func;
    case TOOL_FMT_APRIEL:
        return apriel;
    default:
        return hermes;
    }
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
    const char *const *markers = call_markers(f);
    size_t safe = n;
    for (size_t m = 0; markers[m]; m++) {
        const char *p = tools_find(text, n, markers[m]);
        if (p && (size_t)(p - text) <= safe) {
            *hold = true;
            safe = (size_t)(p - text);
        }
    }
    if (*hold) return safe;
    for (size_t m = 0; markers[m]; m++) { /* a tail that may grow into a marker */
        size_t ml = strlen(markers[m]);
        for (size_t k = ml - 1; k > 0; k--)
            if (n >= k && n - k < safe && !memcmp(text + n - k, markers[m], k)) {
                safe = n - k;
                break;
            }
    }
    return safe;
}

const char *const *tools_marker_texts(tool_format f) {
    static const char *const hermes[] = {"<tool_call>", "</tool_call>", NULL};
    static const char *const mistral[] = {MISTRAL_CALLS, MISTRAL_ARGS, NULL};
    static const char *const apriel[] = {APRIEL_OPEN, APRIEL_CLOSE, NULL};
    static const char *const ds[] = {DS_CALLS_BEGIN, DS_CALLS_END, DS_CALL_BEGIN,
                                     DS_CALL_END,    DS_SEP,       NULL};
    static const char *const kimi[] = {KIMI_SECTION_BEGIN, KIMI_SECTION_END, KIMI_CALL_BEGIN,
                                       KIMI_ARGS_BEGIN,    KIMI_CALL_END,    NULL};
    static const char *const none[] = {NULL}; /* harmony's: the tokenizer shows them */
    switch (f) {
    case TOOL_FMT_HERMES:
    case TOOL_FMT_GENERIC:
        return hermes;
    case TOOL_FMT_MISTRAL:
    case TOOL_FMT_MISTRAL_V11:
        return mistral;
    case TOOL_FMT_APRIEL:
        return apriel;
    case TOOL_FMT_DEEPSEEK:
    case TOOL_FMT_DEEPSEEK_V31:
        return ds;
    case TOOL_FMT_KIMI:
        return kimi;
    default:
        return none;
    }
}
