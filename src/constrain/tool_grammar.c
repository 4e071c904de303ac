/* The grammars of forced tool calls (tool_grammar.h: the server's
 * tool_choice "required" or a named function), written from a syntax's
 * markers (tool_grammar_syntax, which the server fills from its row):
 *   root ::= lead? sec_open call (call_sep call)* sec_close
 *   call ::= call_open [id id_close] body call_close
 * where body is, by the row's argument encoding: one call object whose
 * schema is the anyOf of {name: const, arguments: the tool's parameters}
 * (json_schema.h); or a tool's name, name_close and its arguments
 * compiled apart (args-i: a JSON object, or its required parameters in
 * the row's parameter syntax, string values raw and the rest JSON).
 * Not here: which syntax a template uses, rendering calls into a prompt
 * and reading them back (the server's tools*.c). */
#include "constrain/tool_grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "constrain/json_schema.h"

/* A GBNF string literal for s (nothing when s is empty or NULL). */
static void lit(sbuf *g, const char *s) {
    if (!s || !*s) return;
    sbuf_adds(g, " \"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            sbuf_printf(g, "\\%c", *s);
        else if (*s == '\n')
            sbuf_adds(g, "\\n");
        else if (*s == '\r')
            sbuf_adds(g, "\\r");
        else if (*s == '\t')
            sbuf_adds(g, "\\t");
        else
            sbuf_add(g, s, 1);
    }
    sbuf_adds(g, "\" ");
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

/* The schema's rules under the name rule (root renamed), into rules. */
static int schema_rules(const json_t *schema, const char *rule, sbuf *rules, tps_err *err) {
    sbuf one;
    sbuf_init(&one);
    int rc = json_schema_to_gbnf_named(schema, rule, &one, err);
    if (!rc) add_new_lines(rules, one.p, one.len);
    sbuf_free(&one);
    return rc;
}

static json_t *params_of(const tool_grammar_fn *t) {
    /* no parameters: the function takes none (OpenAI's meaning): {} */
    return t->parameters ? json_deep_copy(t->parameters)
                         : json_pack("{s:s,s:{},s:b}", "type", "object", "properties",
                                     "additionalProperties", 0);
}

/* {"type":"object","properties":{[id,] name: {"const": N}, args: P},
 *  "required": [...], "additionalProperties": false} */
static json_t *call_schema(const tool_grammar_syntax *w, const tool_grammar_fn *t) {
    json_t *props = json_object(), *req = json_array();
    if (w->id_key) {
        json_object_set_new(
            props, w->id_key,
            json_pack("{s:s,s:[s,s,s,s]}", "type", "string", "enum", "0", "1", "2", "3"));
        json_array_append_new(req, json_string(w->id_key));
    }
    json_object_set_new(props, w->name_key, json_pack("{s:s}", "const", t->name));
    json_object_set_new(props, w->args_key, params_of(t));
    json_array_append_new(req, json_string(w->name_key));
    json_array_append_new(req, json_string(w->args_key));
    return json_pack("{s:s,s:o,s:o,s:b}", "type", "object", "properties", props, "required", req,
                     "additionalProperties", 0);
}

/* One parameter's value: a string raw (one of its enum, or up to
 * maxLength bytes, 64 unless said, that cannot begin the close), else
 * JSON by the property's schema. */
static int param_value(const tool_grammar_syntax *w, const json_t *prop, const char *rule,
                       sbuf *rules, sbuf *g, tps_err *err) {
    json_t *type = json_object_get(prop, "type"), *en = json_object_get(prop, "enum");
    if (!json_is_string(type) || strcmp(json_string_value(type), "string")) {
        sbuf_printf(g, " %s ", rule);
        return schema_rules(prop, rule, rules, err);
    }
    sbuf_adds(g, " (");
    lit(g, w->q_open);
    if (json_array_size(en)) {
        sbuf_adds(g, "(");
        for (size_t k = 0; k < json_array_size(en); k++) {
            if (k) sbuf_adds(g, "|");
            lit(g, json_string_value(json_array_get(en, k)));
        }
        sbuf_adds(g, ")");
    } else {
        json_int_t max = json_integer_value(json_object_get(prop, "maxLength"));
        json_int_t min = json_integer_value(json_object_get(prop, "minLength"));
        sbuf_printf(g, "[^<\\n\\\"]{%lld,%lld}", (long long)(min > 0 ? min : 1),
                    (long long)(max > 0 && max < 64 ? max : 64));
    }
    lit(g, w->q_close);
    sbuf_adds(g, ") ");
    return 0;
}

/* args-i for a parameter syntax: the tool's required parameters in order. */
static int params_rule(const tool_grammar_syntax *w, const json_t *params, const char *rule,
                       sbuf *rules, tps_err *err) {
    sbuf g;
    sbuf_init(&g);
    sbuf_printf(&g, "%s ::= \"\"", rule);
    json_t *props = json_object_get(params, "properties"),
           *req = json_object_get(params, "required");
    int rc = 0;
    size_t k = 0, i;
    json_t *r;
    json_array_foreach(req, i, r) {
        json_t *prop = json_object_get(props, json_string_value(r));
        if (!prop || rc) continue;
        if (k++) lit(&g, w->p_sep);
        lit(&g, w->p_open);
        lit(&g, json_string_value(r));
        json_t *type = json_object_get(prop, "type");
        bool str = json_is_string(type) && !strcmp(json_string_value(type), "string");
        lit(&g, str || !w->p_mid_json ? w->p_mid : w->p_mid_json);
        char name[64];
        snprintf(name, sizeof name, "%s-%zu", rule, i);
        rc = param_value(w, prop, name, rules, &g, err);
        lit(&g, w->p_close);
    }
    sbuf_adds(&g, "\n");
    if (!rc) add_new_lines(rules, g.p, g.len);
    sbuf_free(&g);
    return rc;
}

/* body ::= the alternatives of every tool (only the one named, when only). */
static int body_rules(const tool_grammar_syntax *w, const tool_grammar_fn *tools, size_t n,
                      const char *only, sbuf *body, sbuf *rules, tps_err *err) {
    json_t *any = json_array();
    int rc = 0;
    size_t k = 0;
    sbuf_adds(body, "body ::=");
    for (size_t i = 0; i < n && !rc; i++) {
        if (only && strcmp(tools[i].name, only)) continue;
        if (w->args == TOOL_ARGS_CALL) {
            json_array_append_new(any, call_schema(w, &tools[i]));
            continue;
        }
        char rule[32];
        snprintf(rule, sizeof rule, "args-%zu", i);
        json_t *params = params_of(&tools[i]);
        rc = w->args == TOOL_ARGS_OBJECT ? schema_rules(params, rule, rules, err)
                                         : params_rule(w, params, rule, rules, err);
        json_decref(params);
        sbuf_adds(body, k++ ? " |" : "");
        lit(body, tools[i].name);
        lit(body, w->name_close);
        if (w->indexed) sbuf_adds(body, " [0-9] [0-9]? ");
        lit(body, w->args_open);
        sbuf_printf(body, " %s", rule);
    }
    if (!rc && json_array_size(any)) {
        json_t *schema = json_array_size(any) == 1 ? json_incref(json_array_get(any, 0))
                                                   : json_pack("{s:O}", "anyOf", any);
        rc = schema_rules(schema, "call-object", rules, err);
        json_decref(schema);
        sbuf_adds(body, " call-object");
        k = 1;
    }
    json_decref(any);
    if (!rc && !k)
        rc = tps_fail(err, TPS_EINVAL, "tool_choice names a function that is not in tools");
    sbuf_adds(body, "\n");
    return rc;
}

int tool_grammar_gbnf(const tool_grammar_syntax *w, const tool_grammar_fn *tools, size_t n,
                      const char *only, bool parallel, sbuf *gbnf, tps_err *err) {
    sbuf body, rules;
    sbuf_init(&body);
    sbuf_init(&rules);
    int rc = body_rules(w, tools, n, only, &body, &rules, err);
    if (!rc) {
        sbuf_adds(gbnf, "root ::= ");
        sbuf_adds(gbnf, w->gbnf_lead ? w->gbnf_lead : "");
        lit(gbnf, w->sec_open);
        sbuf_adds(gbnf, " call ");
        if (parallel && !w->one_call) {
            sbuf_adds(gbnf, "(");
            lit(gbnf, w->call_sep);
            sbuf_adds(gbnf, " call)* ");
        }
        lit(gbnf, w->sec_close);
        sbuf_adds(gbnf, "\ncall ::=");
        lit(gbnf, w->call_open);
        if (w->id_close) {
            sbuf_adds(gbnf, " \"call_\" [0-9] ");
            lit(gbnf, w->id_close);
        }
        sbuf_adds(gbnf, " body ");
        lit(gbnf, w->call_close);
        sbuf_adds(gbnf, "\n");
        sbuf_add(gbnf, body.p, body.len);
        if (w->gbnf_extra) sbuf_adds(gbnf, w->gbnf_extra);
        sbuf_add(gbnf, rules.p, rules.len);
        if (sbuf_failed(gbnf) || sbuf_failed(&body) || sbuf_failed(&rules))
            rc = tps_fail(err, TPS_ENOMEM, "tools: out of memory");
    }
    sbuf_free(&body);
    sbuf_free(&rules);
    return rc;
}
