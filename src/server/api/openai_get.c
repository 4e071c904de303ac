/* The bottom of the openai*.c files, which all call down to it: the
 * {"error": {...}} shape every failure is answered with, the request body
 * read as one JSON object (the same 400 for every endpoint when it is not),
 * and the typed getters every field is read through (they name the field in
 * the 400 when its type or value is wrong; null counts as absent, as in
 * OpenAI's API).
 *
 * Not here: which fields exist (openai_fields.c), what they mean. */
#include "server/api/openai_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------- */

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

json_t *oai_body_object(const char *body, size_t len, oai_error *e) {
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_ALLOW_NUL, &jerr);
    if (!root)
        oai_error_set(e, 400, "invalid_request_error", NULL, "invalid_json",
                      "invalid JSON in the request body at line %d, column %d: %s", jerr.line,
                      jerr.column, jerr.text);
    else if (!json_is_object(root)) {
        oai_error_set(e, 400, "invalid_request_error", NULL, "invalid_json",
                      "the request body must be a JSON object");
        json_decref(root);
        root = NULL;
    }
    return root;
}

void oai_error_json(const oai_error *e, sbuf *out) {
    sbuf_adds(out, "{\"error\":{\"message\":");
    sbuf_json_str(out, e->message, strlen(e->message));
    sbuf_adds(out, ",\"type\":");
    const char *type = e->type ? e->type : "invalid_request_error";
    sbuf_json_str(out, type, strlen(type));
    sbuf_adds(out, ",\"param\":");
    sbuf_json_str_or_null(out, e->param);
    sbuf_adds(out, ",\"code\":");
    sbuf_json_str_or_null(out, e->code);
    sbuf_adds(out, "}}");
}

int oai_bad(oai_error *e, const char *param, const char *fmt, const char *detail) {
    return oai_error_set(e, 400, "invalid_request_error", param, "invalid_value", fmt, param,
                         detail);
}

int oai_bad_type(oai_error *e, const char *param, const char *must_be) {
    return oai_error_set(e, 400, "invalid_request_error", param, "invalid_type", "%s must be %s",
                         param, must_be);
}

int oai_oom(oai_error *e) {
    return oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
}

/* ---------------------------------------------------------------------------
 * Typed getters
 * ------------------------------------------------------------------------- */

int oai_get_bool(json_t *o, const char *key, bool *out, oai_error *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 1;
    if (!json_is_boolean(v)) return oai_bad(e, key, "%s must be a boolean%s", "");
    *out = json_is_true(v);
    return 0;
}

int oai_get_num(json_t *o, const char *key, double *out, oai_error *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 1;
    if (!json_is_number(v)) return oai_bad(e, key, "%s must be a number%s", "");
    *out = json_number_value(v);
    if (!isfinite(*out)) return oai_bad(e, key, "%s must be finite%s", "");
    return 0;
}

int oai_get_int(json_t *o, const char *key, json_int_t *out, oai_error *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 1;
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d != floor(d) || fabs(d) > 9e15) return oai_bad(e, key, "%s must be an integer%s", "");
        *out = (json_int_t)d;
        return 0;
    }
    if (!json_is_integer(v)) return oai_bad(e, key, "%s must be an integer%s", "");
    *out = json_integer_value(v);
    return 0;
}

int oai_get_float(json_t *o, const char *key, float *out, oai_error *e) {
    double d = 0;
    int rc = oai_get_num(o, key, &d, e);
    if (rc == 0) *out = (float)d;
    return rc;
}

int oai_get_required(json_t *o, const char *key, json_t **out, oai_error *e) {
    *out = json_object_get(o, key);
    if (*out && !json_is_null(*out)) return 0;
    return oai_error_set(e, 400, "invalid_request_error", key, "missing_required_parameter",
                         "%s is required", key);
}

int oai_get_list(json_t *o, const char *key, bool object, const char *must_be, const char *units,
                 size_t max, json_t **out, oai_error *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 1;
    if (object ? !json_is_object(v) : !json_is_array(v))
        return oai_bad(e, key, "%s must be %s", must_be);
    size_t n = object ? json_object_size(v) : json_array_size(v);
    if (n > max)
        return oai_error_set(e, 400, "invalid_request_error", key, "invalid_value",
                             "%s has %zu %s; at most %zu", key, n, units, max);
    *out = v;
    return 0;
}

int oai_token_ids(json_t *arr, const char *param, const char *must_be, int32_t *out, oai_error *e) {
    size_t i;
    json_t *t;
    json_array_foreach(arr, i, t) {
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > INT32_MAX)
            return oai_error_set(e, 400, "invalid_request_error", param, "invalid_value",
                                 "%s[%zu] must be %s", param, i, must_be);
        out[i] = (int32_t)json_integer_value(t);
    }
    return 0;
}
