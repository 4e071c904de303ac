/* OpenAI request parsing and error bodies (see openai.h). Every field is
 * read through one of the typed getters below, which name the field in the
 * 400 when its type or value is wrong; null counts as absent, as in the
 * OpenAI API. */
#include "server/openai.h"

#include "engine/stop.h"
#include "server/json_schema.h"
#include "server/regex_gbnf.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PROMPT_IDS (1u << 20) /* more ids than any context; bounds the copy */

int oai_error_set(oai_error *e, int status, const char *type, const char *param, const char *code,
                  const char *fmt, ...) {
    e->status = status;
    e->type = type;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    snprintf(e->code, sizeof e->code, "%s", code ? code : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return TPS_EINVAL;
}

void oai_error_json(const oai_error *e, sbuf *out) {
    sbuf_adds(out, "{\"error\":{\"message\":");
    sbuf_json_str(out, e->message, strlen(e->message));
    sbuf_adds(out, ",\"type\":");
    const char *type = e->type ? e->type : "invalid_request_error";
    sbuf_json_str(out, type, strlen(type));
    sbuf_adds(out, ",\"param\":");
    if (e->param[0])
        sbuf_json_str(out, e->param, strlen(e->param));
    else
        sbuf_adds(out, "null");
    sbuf_adds(out, ",\"code\":");
    if (e->code[0])
        sbuf_json_str(out, e->code, strlen(e->code));
    else
        sbuf_adds(out, "null");
    sbuf_adds(out, "}}");
}

static int bad(oai_error *e, const char *param, const char *fmt, const char *detail) {
    return oai_error_set(e, 400, "invalid_request_error", param, "invalid_value", fmt, param,
                         detail);
}

/* ---------------------------------------------------------------------------
 * Typed getters: 0 and *out set; 1 when absent or null; <0 with e filled.
 * ------------------------------------------------------------------------- */

static int get_bool(json_t *o, const char *key, bool *out, oai_error *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 1;
    if (!json_is_boolean(v)) return bad(e, key, "%s must be a boolean%s", "");
    *out = json_is_true(v);
    return 0;
}

static int get_num(json_t *o, const char *key, double *out, oai_error *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 1;
    if (!json_is_number(v)) return bad(e, key, "%s must be a number%s", "");
    *out = json_number_value(v);
    if (!isfinite(*out)) return bad(e, key, "%s must be finite%s", "");
    return 0;
}

static int get_int(json_t *o, const char *key, json_int_t *out, oai_error *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 1;
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d != floor(d) || fabs(d) > 9e15) return bad(e, key, "%s must be an integer%s", "");
        *out = (json_int_t)d;
        return 0;
    }
    if (!json_is_integer(v)) return bad(e, key, "%s must be an integer%s", "");
    *out = json_integer_value(v);
    return 0;
}

static int get_float(json_t *o, const char *key, float *out, oai_error *e) {
    double d = 0;
    int rc = get_num(o, key, &d, e);
    if (rc == 0) *out = (float)d;
    return rc;
}

/* ---------------------------------------------------------------------------
 * Fields shared by both endpoints
 * ------------------------------------------------------------------------- */

/* n: choices per request. The upper bound here only keeps the count in a
 * uint32_t; the server refuses more than its --max-n with its own 400. */
static int parse_n(json_t *o, oai_request *r, oai_error *e) {
    json_int_t n;
    int rc = get_int(o, "n", &n, e);
    if (rc < 0) return rc;
    if (rc == 1) return 0;
    if (n < 1)
        return oai_error_set(e, 400, "invalid_request_error", "n", "invalid_value",
                             "n must be at least 1 (the number of choices); got %lld",
                             (long long)n);
    if (n > UINT32_MAX)
        return oai_error_set(e, 400, "invalid_request_error", "n", "invalid_value",
                             "n is %lld; at most %u choices per request", (long long)n, UINT32_MAX);
    r->n = (uint32_t)n;
    return 0;
}

/* Fields of OpenAI's request schemas (and the extensions other servers
 * take) that this server does not act on. Each is refused with a 400
 * naming it unless its value is absent, null, or the one value that asks
 * for nothing (`neutral`: a JSON text compared as JSON; NULL: any falsy
 * value - false, "", [], {} - is neutral). A field outside every schema is
 * ignored, as OpenAI does. */
typedef struct refused_field {
    const char *name;
    const char *neutral;
    const char *why;
} refused_field;

static const refused_field REFUSED[] = {
    {"function_call", "\"none\"", "function calling is not supported yet (function_call)"},
    {"suffix", NULL, "suffix needs an insertion (fill-in-the-middle) model; none is served"},
    {"guided_choice", NULL,
     "guided_choice is not supported: use regex (\"a|b\") or a "
     "json_schema enum"},
    {"store", NULL, "stored completions are not supported (store)"},
    {"audio", NULL, "audio output is not supported"},
    {"modalities", "[\"text\"]", "only text output is supported (modalities)"},
    {"prediction", NULL, "predicted outputs are not supported"},
    {"reasoning_effort", NULL, "reasoning_effort needs a reasoning model; none is served"},
    {"web_search_options", NULL, "web search is not supported"},
    {"n_probs", NULL, "n_probs (llama.cpp's name) is not supported: use logprobs / top_logprobs"},
};

static bool falsy(json_t *v) {
    return json_is_false(v) || (json_is_string(v) && json_string_length(v) == 0) ||
           (json_is_array(v) && json_array_size(v) == 0) ||
           (json_is_object(v) && json_object_size(v) == 0);
}

static int parse_refused(json_t *o, oai_error *e) {
    for (size_t i = 0; i < sizeof REFUSED / sizeof REFUSED[0]; i++) {
        json_t *v = json_object_get(o, REFUSED[i].name);
        if (!v || json_is_null(v)) continue;
        bool neutral = falsy(v);
        if (REFUSED[i].neutral) {
            json_t *n = json_loads(REFUSED[i].neutral, JSON_DECODE_ANY, NULL);
            neutral = n && json_equal(v, n);
            json_decref(n);
        }
        if (!neutral)
            return oai_error_set(e, 400, "invalid_request_error", REFUSED[i].name,
                                 "unsupported_parameter", "%s", REFUSED[i].why);
    }
    return 0;
}

/* logit_bias: {"token id": bias}, ids as decimal strings (OpenAI's form),
 * biases in [-100, 100]. The vocabulary bound is checked by the server
 * (it knows the model). */
static int parse_logit_bias(json_t *o, oai_request *r, oai_error *e) {
    json_t *lb = json_object_get(o, "logit_bias");
    if (!lb || json_is_null(lb)) return 0;
    if (!json_is_object(lb))
        return bad(e, "logit_bias", "%s must be an object mapping token ids to biases%s", "");
    size_t n = json_object_size(lb);
    if (n > SAMPLER_MAX_LOGIT_BIAS)
        return oai_error_set(e, 400, "invalid_request_error", "logit_bias", "invalid_value",
                             "logit_bias has %zu entries; at most %d", n, SAMPLER_MAX_LOGIT_BIAS);
    if (!n) return 0;
    r->logit_bias = calloc(n, sizeof *r->logit_bias);
    if (!r->logit_bias) return oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    const char *key;
    json_t *val;
    json_object_foreach(lb, key, val) {
        char *end = NULL;
        long long id = strtoll(key, &end, 10);
        if (!*key || *end || id < 0 || id > INT32_MAX)
            return oai_error_set(e, 400, "invalid_request_error", "logit_bias", "invalid_value",
                                 "logit_bias keys are token ids (decimal integers); got '%.40s'",
                                 key);
        if (!json_is_number(val) || !(json_number_value(val) >= -100.0) ||
            !(json_number_value(val) <= 100.0))
            return oai_error_set(e, 400, "invalid_request_error", "logit_bias", "invalid_value",
                                 "logit_bias[%lld] must be a number in [-100, 100]", id);
        r->logit_bias[r->n_logit_bias++] =
            (sampler_bias){.id = (int32_t)id, .bias = (float)json_number_value(val)};
    }
    return 0;
}

/* logprobs: completions `logprobs: k` (0..20 alternatives; null: none),
 * chat `logprobs: true` with `top_logprobs: k`. */
static int parse_logprobs(json_t *o, oai_request *r, oai_error *e) {
    json_t *lp = json_object_get(o, "logprobs");
    json_int_t k = 0;
    int rc;
    if (r->kind == OAI_COMPLETION) {
        if (lp && !json_is_null(lp) && !json_is_integer(lp) && !json_is_boolean(lp))
            return bad(e, "logprobs", "%s must be %s",
                       "an integer (alternatives per token) or null");
        r->logprobs = lp && (json_is_integer(lp) || json_is_true(lp));
        k = json_is_integer(lp) ? json_integer_value(lp) : 0;
        if (r->logprobs && (k < 0 || k > LOGPROBS_MAX_TOP))
            return oai_error_set(e, 400, "invalid_request_error", "logprobs", "invalid_value",
                                 "logprobs must be in [0, %d]; got %lld", LOGPROBS_MAX_TOP,
                                 (long long)k);
    } else {
        if (lp && !json_is_null(lp) && !json_is_boolean(lp))
            return bad(e, "logprobs", "%s must be %s", "a boolean");
        r->logprobs = lp && json_is_true(lp);
        if ((rc = get_int(o, "top_logprobs", &k, e)) < 0) return rc;
        if (rc == 0 && (k < 0 || k > LOGPROBS_MAX_TOP))
            return oai_error_set(e, 400, "invalid_request_error", "top_logprobs", "invalid_value",
                                 "top_logprobs must be in [0, %d]; got %lld", LOGPROBS_MAX_TOP,
                                 (long long)k);
        if (rc == 0 && k > 0 && !r->logprobs)
            return oai_error_set(e, 400, "invalid_request_error", "top_logprobs", "invalid_value",
                                 "top_logprobs needs logprobs: true");
    }
    r->top_logprobs = (uint32_t)k;
    return 0;
}

/* ---------------------------------------------------------------------------
 * Constrained output: response_format, grammar, regex and the extensions,
 * each turned into GBNF here; the GBNF is parsed and compiled by the server
 * (its grammar cache, off the HTTP thread), whose errors name the same field
 * ------------------------------------------------------------------------- */

int oai_constraint_error(oai_error *e, int rc, const char *param, const char *msg) {
    size_t pl = strlen(param);
    bool named = !strncmp(msg, param, pl) && msg[pl] == ':';
    return oai_error_set(e, rc == TPS_ENOMEM ? 500 : 400,
                         rc == TPS_ENOMEM ? "server_error" : "invalid_request_error", param,
                         rc == TPS_ENOMEM ? NULL : "invalid_value", "%s%s%s", named ? "" : param,
                         named ? "" : ": ", msg);
}

/* Hands the GBNF text in g to r, with the field it came from (a static
 * string, for the compile's errors). */
static int take_grammar(oai_request *r, sbuf *g, const char *param, oai_error *e) {
    if (sbuf_failed(g)) return oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    sbuf_adds(g, ""); /* a buffer even for an empty grammar (refused when compiled) */
    if (sbuf_failed(g)) return oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    r->grammar = g->p;
    r->grammar_len = g->len;
    r->grammar_param = param;
    g->p = NULL;
    return 0;
}

static int schema_grammar(oai_request *r, const json_t *schema, const char *param, oai_error *e) {
    sbuf g;
    sbuf_init(&g);
    tps_err err = {{0}};
    int rc = json_schema_to_gbnf(schema, &g, &err);
    if (rc)
        rc = oai_constraint_error(e, rc, param, err.msg);
    else
        rc = take_grammar(r, &g, param, e);
    sbuf_free(&g);
    return rc;
}

/* response_format: {"type": "text"} asks for nothing; "json_object" is any
 * JSON object; "json_schema" takes {name, schema, strict, description}. */
static int parse_response_format(json_t *rf, oai_request *r, oai_error *e) {
    if (!json_is_object(rf))
        return bad(e, "response_format", "%s must be an object with a \"type\"%s", "");
    json_t *type = json_object_get(rf, "type");
    if (!json_is_string(type))
        return oai_error_set(e, 400, "invalid_request_error", "response_format.type",
                             "invalid_value",
                             "response_format.type must be \"text\", \"json_object\" or "
                             "\"json_schema\"");
    const char *t = json_string_value(type);
    if (!strcmp(t, "text")) return 0;
    if (!strcmp(t, "json_object")) {
        json_t *any = json_pack("{s:s}", "type", "object");
        int rc = any ? schema_grammar(r, any, "response_format", e)
                     : oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        json_decref(any);
        return rc;
    }
    if (strcmp(t, "json_schema"))
        return oai_error_set(e, 400, "invalid_request_error", "response_format.type",
                             "invalid_value",
                             "response_format.type '%.40s' is not supported: use \"text\", "
                             "\"json_object\" or \"json_schema\"",
                             t);
    json_t *js = json_object_get(rf, "json_schema");
    if (!json_is_object(js))
        return oai_error_set(e, 400, "invalid_request_error", "response_format.json_schema",
                             "invalid_value",
                             "response_format.json_schema must be an object {name, schema, "
                             "strict}");
    json_t *name = json_object_get(js, "name"), *strict = json_object_get(js, "strict");
    if (name && !json_is_null(name) && !json_is_string(name))
        return oai_error_set(e, 400, "invalid_request_error", "response_format.json_schema.name",
                             "invalid_type", "response_format.json_schema.name must be a string");
    if (strict && !json_is_null(strict) && !json_is_boolean(strict))
        return oai_error_set(e, 400, "invalid_request_error", "response_format.json_schema.strict",
                             "invalid_type",
                             "response_format.json_schema.strict must be a boolean");
    json_t *schema = json_object_get(js, "schema");
    if (!json_is_object(schema))
        return oai_error_set(e, 400, "invalid_request_error", "response_format.json_schema.schema",
                             "invalid_value",
                             "response_format.json_schema.schema must be a JSON schema object");
    /* strict or not, the output is held to the schema: there is no weaker mode */
    return schema_grammar(r, schema, "response_format.json_schema.schema", e);
}

static int parse_constraint(json_t *o, oai_request *r, oai_error *e) {
    static const char *const keys[] = {"response_format", "json_schema", "guided_json", "grammar",
                                       "guided_grammar",  "regex",       "guided_regex"};
    const char *given = NULL;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *v = json_object_get(o, keys[i]);
        if (!v || json_is_null(v)) continue;
        if (i == 0 && json_is_object(v) && json_is_string(json_object_get(v, "type")) &&
            !strcmp(json_string_value(json_object_get(v, "type")), "text"))
            continue;
        if (given)
            return oai_error_set(e, 400, "invalid_request_error", keys[i], "invalid_value",
                                 "%s and %s both constrain the output: give one", given, keys[i]);
        given = keys[i];
    }
    if (!given) return 0;
    json_t *v = json_object_get(o, given);
    if (!strcmp(given, "response_format")) return parse_response_format(v, r, e);
    if (!strcmp(given, "json_schema") || !strcmp(given, "guided_json")) {
        json_t *schema = v, *parsed = NULL;
        if (json_is_string(v)) { /* vLLM accepts the schema as a JSON string */
            json_error_t je;
            parsed = json_loads(json_string_value(v), 0, &je);
            if (!parsed)
                return oai_error_set(e, 400, "invalid_request_error", given, "invalid_value",
                                     "%s: invalid JSON at line %d, column %d: %s", given, je.line,
                                     je.column, je.text);
            schema = parsed;
        }
        int rc = json_is_object(schema) ? schema_grammar(r, schema, given, e)
                                        : bad(e, given, "%s must be a JSON schema object%s", "");
        json_decref(parsed);
        return rc;
    }
    if (!json_is_string(v)) return bad(e, given, "%s must be a string%s", "");
    sbuf g;
    sbuf_init(&g);
    int rc;
    if (!strcmp(given, "regex") || !strcmp(given, "guided_regex")) {
        tps_err err = {{0}};
        rc = regex_to_gbnf(json_string_value(v), json_string_length(v), &g, &err);
        if (rc) rc = oai_constraint_error(e, rc, given, err.msg);
    } else {
        sbuf_add(&g, json_string_value(v), json_string_length(v));
        rc = 0;
    }
    if (!rc) rc = take_grammar(r, &g, given, e);
    sbuf_free(&g);
    return rc;
}

/* ---------------------------------------------------------------------------
 * Tools (chat)
 * ------------------------------------------------------------------------- */

static bool tool_name_ok(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 64) return false;
    for (size_t i = 0; i < n; i++)
        if (!(s[i] == '_' || s[i] == '-' || (s[i] >= 'a' && s[i] <= 'z') ||
              (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9')))
            return false;
    return true;
}

/* tools[i]: {"type": "function", "function": {name, description,
 * parameters, strict}}, appended to r->tools (room for it allocated). */
static int parse_tool(json_t *t, size_t i, oai_request *r, oai_error *e) {
    char param[48];
    snprintf(param, sizeof param, "tools[%zu]", i);
    json_t *fn = json_object_get(t, "function");
    json_t *type = json_object_get(t, "type");
    if (!json_is_object(t) || !json_is_string(type) ||
        strcmp(json_string_value(type), "function") || !json_is_object(fn))
        return oai_error_set(e, 400, "invalid_request_error", param, "invalid_value",
                             "%s must be {\"type\": \"function\", \"function\": "
                             "{name, description, parameters}}",
                             param);
    json_t *name = json_object_get(fn, "name"), *desc = json_object_get(fn, "description");
    json_t *params = json_object_get(fn, "parameters"), *strict = json_object_get(fn, "strict");
    if (!json_is_string(name) || !tool_name_ok(json_string_value(name)))
        return oai_error_set(e, 400, "invalid_request_error", param, "invalid_value",
                             "%s.function.name must be 1 to 64 letters, digits, _ or -", param);
    for (size_t k = 0; k < r->n_tools; k++)
        if (!strcmp(r->tools[k].name, json_string_value(name)))
            return oai_error_set(e, 400, "invalid_request_error", param, "invalid_value",
                                 "%s: the function '%s' is defined twice", param,
                                 json_string_value(name));
    if ((desc && !json_is_null(desc) && !json_is_string(desc)) ||
        (params && !json_is_null(params) && !json_is_object(params)) ||
        (strict && !json_is_null(strict) && !json_is_boolean(strict)))
        return oai_error_set(e, 400, "invalid_request_error", param, "invalid_type",
                             "%s.function: description must be a string, parameters a "
                             "JSON schema object, strict a boolean",
                             param);
    r->tools[r->n_tools++] =
        (oai_tool){.name = json_string_value(name),
                   .description = json_is_string(desc) ? json_string_value(desc) : NULL,
                   .parameters = json_is_object(params) ? params : NULL};
    return 0;
}

/* tool_choice: "none", "auto", "required" or a named function in tools. */
static int parse_tool_choice(json_t *o, oai_request *r, oai_error *e) {
    json_t *tc = json_object_get(o, "tool_choice");
    r->tool_choice = r->n_tools ? TOOL_CHOICE_AUTO : TOOL_CHOICE_NONE;
    if (!tc || json_is_null(tc)) return 0;
    if (json_is_string(tc)) {
        const char *v = json_string_value(tc);
        if (!strcmp(v, "none")) {
            r->tool_choice = TOOL_CHOICE_NONE;
            return 0;
        }
        if (!strcmp(v, "auto"))
            r->tool_choice = TOOL_CHOICE_AUTO;
        else if (!strcmp(v, "required"))
            r->tool_choice = TOOL_CHOICE_REQUIRED;
        else
            return bad(e, "tool_choice", "%s must be \"none\", \"auto\", \"required\" or %s",
                       "{\"type\": \"function\", \"function\": {\"name\": ...}}");
    } else {
        json_t *fn = json_object_get(tc, "function");
        json_t *name = json_object_get(fn, "name");
        if (!json_is_object(tc) || !json_is_string(name))
            return bad(e, "tool_choice", "%s must be \"none\", \"auto\", \"required\" or %s",
                       "{\"type\": \"function\", \"function\": {\"name\": ...}}");
        r->tool_choice = TOOL_CHOICE_NAMED;
        r->tool_name = json_string_value(name);
        bool found = false;
        for (size_t k = 0; k < r->n_tools && !found; k++)
            found = !strcmp(r->tools[k].name, r->tool_name);
        if (!found)
            return oai_error_set(e, 400, "invalid_request_error", "tool_choice", "invalid_value",
                                 "tool_choice names '%.64s', which is not in tools", r->tool_name);
    }
    if (!r->n_tools)
        return oai_error_set(e, 400, "invalid_request_error", "tool_choice", "invalid_value",
                             "tool_choice asks for tool calls but tools is empty");
    return 0;
}

static int parse_tools(json_t *o, oai_request *r, oai_error *e) {
    json_t *tools = json_object_get(o, "tools");
    r->parallel_tool_calls = true;
    int rc;
    if (tools && !json_is_null(tools)) {
        if (!json_is_array(tools)) return bad(e, "tools", "%s must be an array of tools%s", "");
        if (json_array_size(tools) > TOOLS_MAX)
            return oai_error_set(e, 400, "invalid_request_error", "tools", "invalid_value",
                                 "tools has %zu entries; at most %d", json_array_size(tools),
                                 TOOLS_MAX);
        r->tools = calloc(json_array_size(tools) + 1, sizeof *r->tools);
        if (!r->tools) return oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t) {
            if ((rc = parse_tool(t, i, r, e))) return rc;
        }
    }
    if ((rc = get_bool(o, "parallel_tool_calls", &r->parallel_tool_calls, e)) < 0) return rc;
    return parse_tool_choice(o, r, e);
}

/* An assistant message's tool_calls: each {id, type: "function",
 * function: {name, arguments: string}}. */
static int check_tool_calls(json_t *calls, size_t i, oai_error *e) {
    char param[48];
    snprintf(param, sizeof param, "messages[%zu].tool_calls", i);
    if (!json_is_array(calls))
        return oai_error_set(e, 400, "invalid_request_error", param, "invalid_type",
                             "%s must be an array", param);
    size_t k;
    json_t *c;
    json_array_foreach(calls, k, c) {
        json_t *fn = json_object_get(c, "function");
        if (!json_is_object(c) || !json_is_object(fn) ||
            !json_is_string(json_object_get(fn, "name")) ||
            !json_is_string(json_object_get(fn, "arguments")))
            return oai_error_set(e, 400, "invalid_request_error", param, "invalid_value",
                                 "%s[%zu] must be {id, type: \"function\", function: {name, "
                                 "arguments (a JSON string)}}",
                                 param, k);
    }
    return 0;
}

static int parse_unsupported(json_t *o, oai_kind kind, oai_error *e) {
    json_int_t n;
    int rc;
    if ((rc = get_int(o, "best_of", &n, e)) < 0) return rc;
    if (rc == 0 && n != 1)
        return oai_error_set(e, 400, "invalid_request_error", "best_of", "unsupported_parameter",
                             "best_of is not supported yet (only best_of = 1)");
    json_t *v = json_object_get(o, "functions");
    if (v && !json_is_null(v) && !(json_is_array(v) && json_array_size(v) == 0))
        return oai_error_set(e, 400, "invalid_request_error", "functions", "unsupported_parameter",
                             "functions (the deprecated form) is not supported: use tools");
    if (kind == OAI_COMPLETION) /* tools are a chat feature */
        for (size_t i = 0; i < 3; i++) {
            static const char *const chat_only[] = {"tools", "tool_choice", "parallel_tool_calls"};
            json_t *t = json_object_get(o, chat_only[i]);
            if (t && !json_is_null(t) && !falsy(t) &&
                !(i == 1 && json_is_string(t) && !strcmp(json_string_value(t), "none")))
                return oai_error_set(
                    e, 400, "invalid_request_error", chat_only[i], "unsupported_parameter",
                    "%s is a chat feature: use /v1/chat/completions", chat_only[i]);
        }
    bool echo = false;
    if ((rc = get_bool(o, "echo", &echo, e)) < 0) return rc;
    if (echo)
        return oai_error_set(e, 400, "invalid_request_error", "echo", "unsupported_parameter",
                             "echo is not supported yet");
    return parse_refused(o, e);
}

/* The sampler prints the value it refuses with %g ("got 100" for
 * 100.0001): the message ends instead with the shortest decimal that reads
 * back as the request's number. */
static void exact_got(json_t *o, const char *field, char *msg, size_t cap) {
    json_t *v = field ? json_object_get(o, field) : NULL;
    char *got = strstr(msg, "; got ");
    char num[40];
    if (got && json_is_integer(v)) {
        snprintf(got, cap - (size_t)(got - msg), "; got %lld", (long long)json_integer_value(v));
        return;
    }
    if (!got || !json_is_real(v)) return;
    double d = json_real_value(v);
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(num, sizeof num, "%.*g", prec, d);
        if (strtod(num, NULL) == d) break;
    }
    snprintf(got, cap - (size_t)(got - msg), "; got %s", num);
}

static int parse_sampling(json_t *o, sampler_params *sp, oai_error *e) {
    int rc;
    if ((rc = get_float(o, "temperature", &sp->temperature, e)) < 0) return rc;
    if ((rc = get_float(o, "top_p", &sp->top_p, e)) < 0) return rc;
    if ((rc = get_float(o, "min_p", &sp->min_p, e)) < 0) return rc;
    if ((rc = get_float(o, "frequency_penalty", &sp->frequency_penalty, e)) < 0) return rc;
    if ((rc = get_float(o, "presence_penalty", &sp->presence_penalty, e)) < 0) return rc;
    /* Extensions: vLLM's name and llama.cpp's. */
    if ((rc = get_float(o, "repetition_penalty", &sp->repetition_penalty, e)) < 0) return rc;
    if ((rc = get_float(o, "repeat_penalty", &sp->repetition_penalty, e)) < 0) return rc;
    json_int_t k;
    if ((rc = get_int(o, "top_k", &k, e)) < 0) return rc;
    if (rc == 0) { /* -1 and 0 both mean off (vLLM / llama.cpp) */
        if (k < -1 || k > INT32_MAX) return bad(e, "top_k", "%s must be -1, 0 or positive%s", "");
        sp->top_k = k < 0 ? 0 : (int32_t)k;
    }
    if ((rc = get_int(o, "seed", &k, e)) < 0) return rc;
    if (rc == 0) sp->seed = (uint64_t)k;
    if ((rc = get_bool(o, "ignore_eos", &sp->ignore_eos, e)) < 0) return rc;
    const char *field = NULL;
    tps_err err = {{0}};
    if (sampler_params_validate(sp, &field, &err)) {
        exact_got(o, field, err.msg, sizeof err.msg);
        return oai_error_set(e, 400, "invalid_request_error", field, "invalid_value", "%s",
                             err.msg);
    }
    return 0;
}

static int parse_stop(json_t *o, oai_request *r, oai_error *e) {
    json_t *v = json_object_get(o, "stop");
    if (!v || json_is_null(v)) return 0;
    if (json_is_string(v)) {
        if (json_string_length(v) >= STOP_MAX_LEN)
            return oai_error_set(e, 400, "invalid_request_error", "stop", "invalid_value",
                                 "stop has %zu bytes; at most %d are allowed",
                                 json_string_length(v), STOP_MAX_LEN - 1);
        if (json_string_length(v)) r->stop[r->n_stop++] = json_string_value(v);
        return 0;
    }
    if (!json_is_array(v))
        return bad(e, "stop", "%s must be a string or an array of strings%s", "");
    if (json_array_size(v) > OAI_MAX_STOP)
        return oai_error_set(e, 400, "invalid_request_error", "stop", "invalid_value",
                             "stop has %zu strings; at most %d are allowed", json_array_size(v),
                             OAI_MAX_STOP);
    size_t i;
    json_t *s;
    json_array_foreach(v, i, s) {
        if (!json_is_string(s))
            return bad(e, "stop", "%s must be a string or an array of strings%s", "");
        if (json_string_length(s) >= STOP_MAX_LEN)
            return oai_error_set(e, 400, "invalid_request_error", "stop", "invalid_value",
                                 "stop[%zu] has %zu bytes; at most %d are allowed", i,
                                 json_string_length(s), STOP_MAX_LEN - 1);
        if (json_string_length(s)) r->stop[r->n_stop++] = json_string_value(s);
    }
    return 0;
}

static int parse_max_tokens(json_t *o, oai_request *r, oai_error *e) {
    static const char *const keys[] = {"max_completion_tokens", "max_tokens"};
    for (size_t i = 0; i < 2; i++) {
        json_int_t n;
        int rc = get_int(o, keys[i], &n, e);
        if (rc < 0) return rc;
        if (rc == 1) continue;
        if (n < 1)
            return oai_error_set(e, 400, "invalid_request_error", keys[i], "invalid_value",
                                 "%s must be at least 1; got %lld", keys[i], (long long)n);
        if (n > UINT32_MAX)
            return oai_error_set(e, 400, "invalid_request_error", keys[i], "invalid_value",
                                 "%s must be at most %u; got %lld", keys[i], UINT32_MAX,
                                 (long long)n);
        r->max_tokens = (uint32_t)n;
        return 0;
    }
    return 0;
}

/* ---------------------------------------------------------------------------
 * Prompt (completions) and messages (chat)
 * ------------------------------------------------------------------------- */

static int parse_ids(json_t *arr, oai_request *r, oai_error *e) {
    size_t n = json_array_size(arr);
    if (n > MAX_PROMPT_IDS)
        return oai_error_set(e, 400, "invalid_request_error", "prompt", "invalid_value",
                             "prompt has %zu token ids; at most %u are accepted", n,
                             MAX_PROMPT_IDS);
    r->prompt_ids = malloc((n ? n : 1) * sizeof *r->prompt_ids);
    if (!r->prompt_ids) return oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    size_t i;
    json_t *t;
    json_array_foreach(arr, i, t) {
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > INT32_MAX)
            return oai_error_set(e, 400, "invalid_request_error", "prompt", "invalid_value",
                                 "prompt[%zu] must be a non-negative token id", i);
        r->prompt_ids[i] = (int32_t)json_integer_value(t);
    }
    r->n_prompt_ids = n;
    r->prompt_is_ids = true;
    return 0;
}

static int parse_prompt(json_t *o, oai_request *r, oai_error *e) {
    json_t *p = json_object_get(o, "prompt");
    if (!p || json_is_null(p))
        return oai_error_set(e, 400, "invalid_request_error", "prompt",
                             "missing_required_parameter", "prompt is required");
    if (json_is_string(p)) {
        r->prompt = json_string_value(p);
        r->prompt_len = json_string_length(p);
        return 0;
    }
    if (!json_is_array(p))
        return bad(e, "prompt",
                   "%s must be a string, an array of token ids, or a one-element "
                   "array of either%s",
                   "");
    json_t *first = json_array_get(p, 0);
    if (first && (json_is_string(first) || json_is_array(first))) {
        if (json_array_size(p) != 1)
            return oai_error_set(e, 400, "invalid_request_error", "prompt", "unsupported_parameter",
                                 "batched prompts (%zu) are not supported yet: send one prompt "
                                 "per request",
                                 json_array_size(p));
        if (json_is_string(first)) {
            r->prompt = json_string_value(first);
            r->prompt_len = json_string_length(first);
            return 0;
        }
        return parse_ids(first, r, e);
    }
    return parse_ids(p, r, e);
}

/* content: a string, null, or an array of {"type": "text", "text": ...}
 * parts (joined). Returns the (offset, length) in r->parts via *off and *len
 * when joined, or the borrowed string in *s. */
static int parse_content(json_t *c, size_t i, sbuf *parts, const char **s, size_t *off, size_t *len,
                         oai_error *e) {
    char param[48];
    snprintf(param, sizeof param, "messages[%zu].content", i);
    *s = NULL;
    if (!c || json_is_null(c)) {
        *s = "";
        *len = 0;
        return 0;
    }
    if (json_is_string(c)) {
        *s = json_string_value(c);
        *len = json_string_length(c);
        return 0;
    }
    if (!json_is_array(c))
        return oai_error_set(e, 400, "invalid_request_error", param, "invalid_type",
                             "%s must be a string or an array of content parts", param);
    *off = parts->len;
    size_t k;
    json_t *part;
    json_array_foreach(c, k, part) {
        json_t *type = json_object_get(part, "type");
        json_t *text = json_object_get(part, "text");
        if (!json_is_object(part) || !json_is_string(type))
            return oai_error_set(e, 400, "invalid_request_error", param, "invalid_type",
                                 "%s[%zu] must be an object with a \"type\"", param, k);
        if (strcmp(json_string_value(type), "text") != 0)
            return oai_error_set(e, 400, "invalid_request_error", param, "unsupported_parameter",
                                 "%s[%zu]: content parts of type \"%s\" are not supported "
                                 "(only \"text\")",
                                 param, k, json_string_value(type));
        if (!json_is_string(text))
            return oai_error_set(e, 400, "invalid_request_error", param, "invalid_type",
                                 "%s[%zu].text must be a string", param, k);
        sbuf_add(parts, json_string_value(text), json_string_length(text));
    }
    *len = parts->len - *off;
    return 0;
}

static int parse_messages(json_t *o, oai_request *r, oai_error *e) {
    json_t *m = json_object_get(o, "messages");
    if (!m || json_is_null(m))
        return oai_error_set(e, 400, "invalid_request_error", "messages",
                             "missing_required_parameter", "messages is required");
    if (!json_is_array(m) || json_array_size(m) == 0)
        return oai_error_set(e, 400, "invalid_request_error", "messages", "invalid_value",
                             "messages must be a non-empty array");
    size_t n = json_array_size(m);
    r->msgs = calloc(n, sizeof *r->msgs);
    r->msg_tool_calls = calloc(n, sizeof *r->msg_tool_calls);
    size_t *offs = calloc(n, sizeof *offs);
    bool *joined = calloc(n, sizeof *joined);
    sbuf parts;
    sbuf_init(&parts);
    int rc = 0;
    if (!r->msgs || !r->msg_tool_calls || !offs || !joined) {
        rc = oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        goto done;
    }
    size_t i;
    json_t *msg;
    json_array_foreach(m, i, msg) {
        char param[48];
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(msg)) {
            rc = oai_error_set(e, 400, "invalid_request_error", param, "invalid_type",
                               "%s must be an object", param);
            goto done;
        }
        json_t *role = json_object_get(msg, "role");
        if (!json_is_string(role) || json_string_length(role) == 0 ||
            strlen(json_string_value(role)) != json_string_length(role)) {
            snprintf(param, sizeof param, "messages[%zu].role", i);
            rc = oai_error_set(e, 400, "invalid_request_error", param, "invalid_type",
                               "%s must be a non-empty string", param);
            goto done;
        }
        r->msgs[i].role = json_string_value(role);
        const char *s;
        if ((rc = parse_content(json_object_get(msg, "content"), i, &parts, &s, &offs[i],
                                &r->msgs[i].content_len, e)))
            goto done;
        r->msgs[i].content = s;
        joined[i] = s == NULL;
        json_t *calls = json_object_get(msg, "tool_calls");
        if (calls && !json_is_null(calls)) {
            if ((rc = check_tool_calls(calls, i, e))) goto done;
            r->msg_tool_calls[i] = calls;
        }
    }
    if (sbuf_failed(&parts)) {
        rc = oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        goto done;
    }
    r->n_msgs = n;
    r->parts = parts.p; /* the pointers below stay valid: no more appends */
    parts.p = NULL;
    for (i = 0; i < n; i++) /* no part at all (content []): parts stays NULL */
        if (joined[i]) r->msgs[i].content = r->parts ? r->parts + offs[i] : "";
done:
    sbuf_free(&parts);
    free(offs);
    free(joined);
    return rc;
}

/* ---------------------------------------------------------------------------
 * Entry point
 * ------------------------------------------------------------------------- */

void oai_request_free(oai_request *r) {
    if (!r) return;
    free(r->prompt_ids);
    free(r->logit_bias);
    free(r->grammar);
    free(r->msgs);
    free(r->msg_tool_calls);
    free(r->tools);
    free(r->parts);
    if (r->json) json_decref((json_t *)r->json);
    memset(r, 0, sizeof *r);
}

int oai_parse(oai_request *r, oai_kind kind, const char *body, size_t len, oai_error *e) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->n = 1;
    sampler_params_default(&r->sampling);
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_ALLOW_NUL, &jerr);
    if (!root)
        return oai_error_set(e, 400, "invalid_request_error", NULL, "invalid_json",
                             "invalid JSON in the request body at line %d, column %d: %s",
                             jerr.line, jerr.column, jerr.text);
    r->json = root;
    int rc;
    if (!json_is_object(root)) {
        rc = oai_error_set(e, 400, "invalid_request_error", NULL, "invalid_json",
                           "the request body must be a JSON object");
        goto fail;
    }
    json_t *model = json_object_get(root, "model");
    if (model && !json_is_null(model)) {
        if (!json_is_string(model)) {
            rc = bad(e, "model", "%s must be a string%s", "");
            goto fail;
        }
        r->model = json_string_value(model);
    }
    if ((rc = parse_unsupported(root, kind, e))) goto fail;
    if ((rc = parse_n(root, r, e))) goto fail;
    if ((rc = kind == OAI_CHAT ? parse_messages(root, r, e) : parse_prompt(root, r, e))) goto fail;
    if ((rc = parse_max_tokens(root, r, e))) goto fail;
    if ((rc = parse_sampling(root, &r->sampling, e))) goto fail;
    if ((rc = parse_logit_bias(root, r, e))) goto fail;
    if ((rc = parse_logprobs(root, r, e))) goto fail;
    if ((rc = parse_stop(root, r, e))) goto fail;
    if ((rc = parse_constraint(root, r, e))) goto fail;
    if (kind == OAI_CHAT && (rc = parse_tools(root, r, e))) goto fail;
    if (r->grammar &&
        (r->tool_choice == TOOL_CHOICE_REQUIRED || r->tool_choice == TOOL_CHOICE_NAMED)) {
        rc = oai_error_set(e, 400, "invalid_request_error", "tool_choice", "invalid_value",
                           "tool_choice \"required\" or a named function constrains the output "
                           "to tool calls; it cannot be combined with response_format, grammar "
                           "or regex");
        goto fail;
    }
    if ((rc = get_bool(root, "stream", &r->stream, e)) < 0) goto fail;
    json_t *so = json_object_get(root, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so)) {
            rc = bad(e, "stream_options", "%s must be an object%s", "");
            goto fail;
        }
        if ((rc = get_bool(so, "include_usage", &r->include_usage, e)) < 0) {
            snprintf(e->param, sizeof e->param, "stream_options.include_usage");
            goto fail;
        }
    }
    return 0;
fail:
    oai_request_free(r);
    r->kind = kind;
    return TPS_EINVAL;
}
