/* The grammars of forced tool calls (tools.h: tool_choice "required" or a
 * named function): for the formats whose call is one JSON object, the
 * objects of every tool as one schema (json_schema.h: an anyOf of
 * {"name": const, "arguments": the tool's parameters}); for the formats
 * that write the name outside the JSON (DeepSeek, harmony, Kimi K2,
 * Functionary), each tool's parameters compiled apart (args-i) and the
 * name written around them in the format's own syntax.
 * Not here: rendering (tools.c), parsing (tools_parse.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/json_schema.h"
#include "server/tools_internal.h"

/* {"type":"object","properties":{"name":{"const":N},"arguments":P},
 *  "required":["name","arguments"],"additionalProperties":false} */
static json_t *call_schema(tool_format f, const oai_tool *t) {
    /* no parameters: the function takes none (OpenAI's meaning): {} */
    json_t *params = t->parameters ? json_deep_copy(t->parameters)
                                   : json_pack("{s:s,s:{},s:b}", "type", "object", "properties",
                                               "additionalProperties", 0);
    json_t *props = json_object();
    json_object_set_new(props, "name", json_pack("{s:s}", "const", t->name));
    json_object_set_new(props, tools_args_key(f), params);
    return json_pack("{s:s,s:o,s:[s,s],s:b}", "type", "object", "properties", props, "required",
                     "name", tools_args_key(f), "additionalProperties", 0);
}

/* The formats whose calls carry their JSON in one object {name, arguments}. */
static int json_call_grammar(tool_format f, const oai_tool *tools, size_t n, const char *only,
                             bool parallel, sbuf *gbnf, tps_err *err) {
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
    case TOOL_FMT_APRIEL:
        sbuf_adds(gbnf, parallel ? "root ::= \"" APRIEL_OPEN
                                   "[\" call (\", \" call)* \"]" APRIEL_CLOSE "\"\n"
                                 : "root ::= \"" APRIEL_OPEN "[\" call \"]" APRIEL_CLOSE "\"\n");
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

/* The formats whose name stands outside the JSON: each call is
 * open ("NAME" mid args-i | ...) close, args-i the arguments grammar of
 * tool i, and the answer is root (one call, or many when parallel). */
typedef struct named_form {
    const char *open, *mid, *close; /* GBNF fragments */
    const char *root_one, *root_many;
    const char *extra; /* rules the fragments use, or NULL */
} named_form;

static const named_form *named_form_of(tool_format f) {
    static const named_form ds = {"\"" DS_CALL_BEGIN "function" DS_SEP "\"",
                                  "\"\\n```json\\n\"",
                                  "\"\\n```" DS_CALL_END "\"",
                                  "root ::= \"" DS_CALLS_BEGIN "\" call \"" DS_CALLS_END "\"\n",
                                  "root ::= \"" DS_CALLS_BEGIN
                                  "\" call (\"\\n\" call)* \"" DS_CALLS_END "\"\n",
                                  NULL};
    static const named_form v31 = {"\"" DS_CALL_BEGIN "\"",
                                   "\"" DS_SEP "\"",
                                   "\"" DS_CALL_END "\"",
                                   "root ::= \"" DS_CALLS_BEGIN "\" call \"" DS_CALLS_END "\"\n",
                                   "root ::= \"" DS_CALLS_BEGIN "\" call+ \"" DS_CALLS_END "\"\n",
                                   NULL};
    /* after the prompt's "<|start|>assistant": analysis first or not, then
     * the call (one: <|call|> ends the answer) */
    static const named_form harmony = {"\"<|channel|>commentary " HARMONY_TO_FN "\"",
                                       "\" <|constrain|>json" HARMONY_MESSAGE "\"",
                                       "",
                                       "root ::= (\"<|channel|>analysis" HARMONY_MESSAGE
                                       "\" thought \"<|end|><|start|>assistant\")? "
                                       "call\n",
                                       NULL,
                                       "thought ::= ([^<] | \"<\" [^|])*\n"};
    static const named_form kimi = {
        "\"" KIMI_CALL_BEGIN "functions.\"",
        "\":\" kimi-index \"" KIMI_ARGS_BEGIN "\"",
        "\"" KIMI_CALL_END "\"",
        "root ::= \"" KIMI_SECTION_BEGIN "\" call \"" KIMI_SECTION_END "\"\n",
        "root ::= \"" KIMI_SECTION_BEGIN "\" call+ \"" KIMI_SECTION_END "\"\n",
        "kimi-index ::= [0-9] [0-9]*\n"};
    static const named_form mistral = {"\"" MISTRAL_CALLS "\"", "\"" MISTRAL_ARGS "\"", "",
                                       "root ::= call\n",       "root ::= call+\n",     NULL};
    static const named_form func = {"\"" FUNC_OPEN "\"",  "\">\"",
                                    "\"" FUNC_CLOSE "\"", "root ::= call\n",
                                    "root ::= call+\n",   NULL};
    switch (f) {
    case TOOL_FMT_DEEPSEEK:
        return &ds;
    case TOOL_FMT_DEEPSEEK_V31:
        return &v31;
    case TOOL_FMT_HARMONY:
        return &harmony;
    case TOOL_FMT_KIMI:
        return &kimi;
    case TOOL_FMT_FUNCTIONARY:
        return &func;
    case TOOL_FMT_MISTRAL_V11:
        return &mistral;
    default:
        return NULL;
    }
}

/* Appends the lines of text[0..n) not already in g (the primitives every
 * schema's grammar repeats). */
static void add_new_lines(sbuf *g, const char *text, size_t n) {
    for (size_t i = 0; i < n;) {
        const char *nl = memchr(text + i, '\n', n - i);
        size_t len = nl ? (size_t)(nl - text - i) + 1 : n - i;
        bool seen = false;
        for (size_t k = 0; g->p && k + len <= g->len && !seen; k++)
            seen = (k == 0 || g->p[k - 1] == '\n') && !memcmp(g->p + k, text + i, len);
        if (!seen) sbuf_add(g, text + i, len);
        i += len;
    }
}

static int named_call_grammar(const named_form *nf, const oai_tool *tools, size_t n,
                              const char *only, bool parallel, sbuf *gbnf, tps_err *err) {
    sbuf rules, alts;
    sbuf_init(&rules);
    sbuf_init(&alts);
    int rc = 0;
    size_t k = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (only && strcmp(tools[i].name, only)) continue;
        json_t *params = tools[i].parameters ? json_incref((json_t *)tools[i].parameters)
                                             : json_pack("{s:s,s:{},s:b}", "type", "object",
                                                         "properties", "additionalProperties", 0);
        char name[32];
        snprintf(name, sizeof name, "args-%zu", i);
        sbuf one;
        sbuf_init(&one);
        rc = json_schema_to_gbnf_named(params, name, &one, err);
        json_decref(params);
        if (!rc) add_new_lines(&rules, one.p, one.len);
        sbuf_free(&one);
        sbuf_printf(&alts, "%s\"%s\" %s %s", k++ ? " | " : "", tools[i].name, nf->mid, name);
    }
    if (!rc && !k)
        rc = tps_fail(err, TPS_EINVAL, "tool_choice names a function that is not in tools");
    if (!rc) {
        sbuf_adds(gbnf, parallel && nf->root_many ? nf->root_many : nf->root_one);
        sbuf_printf(gbnf, "call ::= %s (%s) %s\n", nf->open, alts.p, nf->close);
        if (nf->extra) sbuf_adds(gbnf, nf->extra);
        sbuf_add(gbnf, rules.p, rules.len);
        if (sbuf_failed(gbnf) || sbuf_failed(&alts) || sbuf_failed(&rules))
            rc = tps_fail(err, TPS_ENOMEM, "tools: out of memory");
    }
    sbuf_free(&rules);
    sbuf_free(&alts);
    return rc;
}

int tools_grammar(tool_format f, const oai_tool *tools, size_t n, const char *only, bool parallel,
                  sbuf *gbnf, tps_err *err) {
    const named_form *nf = named_form_of(f);
    return nf ? named_call_grammar(nf, tools, n, only, parallel, gbnf, err)
              : json_call_grammar(f, tools, n, only, parallel, gbnf, err);
}
