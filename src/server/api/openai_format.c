/* Constrained output: response_format (OpenAI's text / json_object /
 * json_schema, and llama-server's json_object with a schema), grammar,
 * regex and json_schema (llama-server's names), vLLM's structured_outputs
 * {json, regex, choice, grammar, json_object} and its older guided_json /
 * guided_regex / guided_choice / guided_grammar. Each is turned into GBNF
 * here; the server parses and compiles it off the HTTP thread (its grammar
 * cache), and a malformed one is a 400 naming the field it came from. One
 * constraint per request.
 *
 * Not here: JSON schema and regex translation (json_schema.c,
 * regex_gbnf.c), applying the grammar (constrain/constraint.h). */
#include "server/api/openai_internal.h"

#include "constrain/json_schema.h"
#include "constrain/regex_gbnf.h"

#include <stdio.h>
#include <string.h>

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
    if (sbuf_failed(g)) return oai_oom(e);
    sbuf_adds(g, ""); /* a buffer even for an empty grammar (refused when compiled) */
    if (sbuf_failed(g)) return oai_oom(e);
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
        return oai_bad(e, "response_format", "%s must be an object with a \"type\"%s", "");
    json_t *type = json_object_get(rf, "type");
    if (!json_is_string(type))
        return oai_bad(e, "response_format.type", "%s must be %s",
                       "\"text\", \"json_object\" or \"json_schema\"");
    const char *t = json_string_value(type);
    if (!strcmp(t, "text")) return 0;
    json_t *schema = json_object_get(rf, "schema");
    if (!strcmp(t, "json_object") && schema && !json_is_null(schema)) { /* llama-server's form */
        if (!json_is_object(schema))
            return oai_bad(e, "response_format.schema", "%s must be %s", "a JSON schema object");
        return schema_grammar(r, schema, "response_format.schema", e);
    }
    if (!strcmp(t, "json_object")) {
        json_t *any = json_pack("{s:s}", "type", "object");
        int rc = any ? schema_grammar(r, any, "response_format", e) : oai_oom(e);
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
        return oai_bad(e, "response_format.json_schema", "%s must be %s",
                       "an object {name, schema, strict}");
    json_t *name = json_object_get(js, "name"), *strict = json_object_get(js, "strict");
    if (name && !json_is_null(name) && !json_is_string(name))
        return oai_bad_type(e, "response_format.json_schema.name", "a string");
    if (strict && !json_is_null(strict) && !json_is_boolean(strict))
        return oai_bad_type(e, "response_format.json_schema.strict", "a boolean");
    schema = json_object_get(js, "schema");
    if (!json_is_object(schema))
        return oai_bad(e, "response_format.json_schema.schema", "%s must be %s",
                       "a JSON schema object");
    /* strict or not, the output is held to the schema: there is no weaker mode */
    return schema_grammar(r, schema, "response_format.json_schema.schema", e);
}

/* A JSON schema given as an object or as a JSON string holding one (vLLM
 * accepts both). */
static int json_grammar(json_t *v, const char *param, oai_request *r, oai_error *e) {
    json_t *schema = v, *parsed = NULL;
    if (json_is_string(v)) {
        json_error_t je;
        parsed = json_loads(json_string_value(v), 0, &je);
        if (!parsed)
            return oai_error_set(e, 400, "invalid_request_error", param, "invalid_value",
                                 "%s: invalid JSON at line %d, column %d: %s", param, je.line,
                                 je.column, je.text);
        schema = parsed;
    }
    int rc = json_is_object(schema) ? schema_grammar(r, schema, param, e)
                                    : oai_bad(e, param, "%s must be a JSON schema object%s", "");
    json_decref(parsed);
    return rc;
}

/* GBNF for "one of these strings": root ::= "a" | "b" | ... */
static int choice_grammar(json_t *v, const char *param, oai_request *r, oai_error *e) {
    if (!json_is_array(v) || json_array_size(v) == 0)
        return oai_bad(e, param, "%s must be %s", "a non-empty array of strings");
    sbuf g;
    sbuf_init(&g);
    sbuf_adds(&g, "root ::=");
    size_t i;
    json_t *c;
    json_array_foreach(v, i, c) {
        if (!json_is_string(c) || json_string_length(c) == 0) {
            sbuf_free(&g);
            return oai_error_set(e, 400, "invalid_request_error", param, "invalid_value",
                                 "%s[%zu] must be a non-empty string", param, i);
        }
        sbuf_adds(&g, i ? " | \"" : " \"");
        const unsigned char *p = (const unsigned char *)json_string_value(c);
        for (size_t k = 0; k < json_string_length(c); k++) {
            if (p[k] == '"' || p[k] == '\\')
                sbuf_printf(&g, "\\%c", p[k]);
            else if (p[k] < 0x20 || p[k] == 0x7f)
                sbuf_printf(&g, "\\x%02x", p[k]);
            else
                sbuf_add(&g, (const char *)p + k, 1);
        }
        sbuf_adds(&g, "\"");
    }
    int rc = take_grammar(r, &g, param, e);
    sbuf_free(&g);
    return rc;
}

/* A regex (compiled to GBNF) or a GBNF grammar given as a string. */
static int text_grammar(json_t *v, bool regex, const char *param, oai_request *r, oai_error *e) {
    if (!json_is_string(v)) return oai_bad(e, param, "%s must be a string%s", "");
    sbuf g;
    sbuf_init(&g);
    int rc = 0;
    if (regex) {
        tps_err err = {{0}};
        rc = regex_to_gbnf(json_string_value(v), json_string_length(v), &g, &err);
        if (rc) rc = oai_constraint_error(e, rc, param, err.msg);
    } else {
        sbuf_add(&g, json_string_value(v), json_string_length(v));
    }
    if (!rc) rc = take_grammar(r, &g, param, e);
    sbuf_free(&g);
    return rc;
}

/* What a constraint is, whatever its field's name. */
typedef enum how { HOW_FORMAT, HOW_JSON, HOW_REGEX, HOW_GRAMMAR, HOW_CHOICE, HOW_JSON_OBJECT } how;

static int compile(how h, json_t *v, const char *param, oai_request *r, oai_error *e) {
    switch (h) {
    case HOW_FORMAT:
        return parse_response_format(v, r, e);
    case HOW_JSON:
        return json_grammar(v, param, r, e);
    case HOW_REGEX:
    case HOW_GRAMMAR:
        return text_grammar(v, h == HOW_REGEX, param, r, e);
    case HOW_CHOICE:
        return choice_grammar(v, param, r, e);
    default: { /* json_object: true asks for any JSON object */
        if (!json_is_boolean(v)) return oai_bad(e, param, "%s must be a boolean%s", "");
        if (json_is_false(v)) return 0;
        json_t *any = json_pack("{s:s}", "type", "object");
        int rc = any ? schema_grammar(r, any, param, e) : oai_oom(e);
        json_decref(any);
        return rc;
    }
    }
}

/* structured_outputs' keys: the constraints, and the options it may carry
 * when they ask for nothing tps lacks. */
static const struct {
    const char *key, *param;
    how h;
} SO_KEYS[] = {{"json", "structured_outputs.json", HOW_JSON},
               {"regex", "structured_outputs.regex", HOW_REGEX},
               {"choice", "structured_outputs.choice", HOW_CHOICE},
               {"grammar", "structured_outputs.grammar", HOW_GRAMMAR},
               {"json_object", "structured_outputs.json_object", HOW_JSON_OBJECT}};

static int check_so_option(const char *key, json_t *v, oai_error *e) {
    char param[96];
    snprintf(param, sizeof param, "structured_outputs.%.64s", key);
    if (!strcmp(key, "disable_fallback")) return 0; /* one backend: nothing to fall back to */
    bool neutral = json_is_null(v) || json_is_false(v);
    if (neutral &&
        (!strcmp(key, "disable_any_whitespace") || !strcmp(key, "disable_additional_properties")))
        return 0;
    if (json_is_null(v) && (!strcmp(key, "whitespace_pattern") || !strcmp(key, "structural_tag")))
        return 0;
    return oai_error_set(e, 400, "invalid_request_error", param, "unsupported_parameter",
                         "%s is not supported: structured_outputs takes json, regex, choice, "
                         "grammar or json_object",
                         param);
}

/* One constraint per request: every field (and structured_outputs key)
 * that asks for one is collected, and a second is a 400 naming it. */
typedef struct pick {
    const char *param;
    json_t *v;
    how h;
} pick;

static int pick_one(pick *p, const char *param, json_t *v, how h, oai_error *e) {
    if (p->param)
        return oai_error_set(e, 400, "invalid_request_error", param, "invalid_value",
                             "%s and %s both constrain the output: give one", p->param, param);
    *p = (pick){param, v, h};
    return 0;
}

static int pick_structured(json_t *so, pick *p, oai_error *e) {
    if (!json_is_object(so))
        return oai_bad(e, "structured_outputs", "%s must be %s",
                       "an object {json | regex | choice | grammar | json_object}");
    const char *key;
    json_t *v;
    json_object_foreach(so, key, v) {
        size_t k = 0;
        while (k < sizeof SO_KEYS / sizeof SO_KEYS[0] && strcmp(SO_KEYS[k].key, key))
            k++;
        int rc;
        if (k == sizeof SO_KEYS / sizeof SO_KEYS[0]) {
            if ((rc = check_so_option(key, v, e))) return rc;
            continue;
        }
        if (json_is_null(v) || (SO_KEYS[k].h == HOW_JSON_OBJECT && json_is_false(v))) continue;
        if ((rc = pick_one(p, SO_KEYS[k].param, v, SO_KEYS[k].h, e))) return rc;
    }
    return 0;
}

int oai_parse_constraint(json_t *o, oai_request *r, oai_error *e) {
    static const struct {
        const char *key;
        how h;
    } keys[] = {{"response_format", HOW_FORMAT}, {"json_schema", HOW_JSON},
                {"guided_json", HOW_JSON},       {"grammar", HOW_GRAMMAR},
                {"guided_grammar", HOW_GRAMMAR}, {"regex", HOW_REGEX},
                {"guided_regex", HOW_REGEX},     {"guided_choice", HOW_CHOICE}};
    pick p = {0};
    int rc;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *v = json_object_get(o, keys[i].key);
        if (!v || json_is_null(v)) continue;
        if (i == 0 && json_is_object(v) && json_is_string(json_object_get(v, "type")) &&
            !strcmp(json_string_value(json_object_get(v, "type")), "text"))
            continue;
        if ((rc = pick_one(&p, keys[i].key, v, keys[i].h, e))) return rc;
    }
    json_t *so = json_object_get(o, "structured_outputs");
    if (so && !json_is_null(so) && (rc = pick_structured(so, &p, e))) return rc;
    return p.param ? compile(p.h, p.v, p.param, r, e) : 0;
}
