/* A JSON value checked against a JSON schema (json_schema_check.h): one
 * recursive walk over the schema's keywords, each applying only to the
 * instance types it names (minLength says nothing of a number), the JSON
 * pointer of the value kept as it goes for the reason of a failure.
 * Alternatives (anyOf, oneOf) are tried quietly: only the failure of the
 * whole names a reason.
 * Not here: grammars, parsing JSON text (jansson's). */
#include "server/tools/json_schema_check.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "constrain/json_schema.h" /* JSON_SCHEMA_MAX_DEPTH */

#define CHECK_MAX_WORK 100000 /* subschema visits in one check */

typedef struct ck {
    const json_t *root;
    size_t work;
    int quiet; /* inside an alternative: no reason written */
    bool undecided;
    char *why;
    size_t cap;
    char path[256]; /* the value's JSON pointer */
} ck;

static bool check(ck *c, const json_t *s, const json_t *v, int depth);

static bool fail(ck *c, const char *fmt, ...) {
    if (c->quiet || !c->why || !c->cap || c->why[0]) return false;
    int n = snprintf(c->why, c->cap, "%s: ", c->path[0] ? c->path : "/");
    if (n < 0 || (size_t)n >= c->cap) return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why + n, c->cap - (size_t)n, fmt, ap);
    va_end(ap);
    return false;
}

/* ---- values ------------------------------------------------------------- */

static bool is_integral(const json_t *v) {
    if (json_is_integer(v)) return true;
    double d = json_is_real(v) ? json_real_value(v) : NAN;
    return isfinite(d) && d == floor(d);
}

static bool type_is(const char *t, const json_t *v) {
    if (!strcmp(t, "object")) return json_is_object(v);
    if (!strcmp(t, "array")) return json_is_array(v);
    if (!strcmp(t, "string")) return json_is_string(v);
    if (!strcmp(t, "boolean")) return json_is_boolean(v);
    if (!strcmp(t, "null")) return json_is_null(v);
    if (!strcmp(t, "number")) return json_is_number(v);
    if (!strcmp(t, "integer")) return is_integral(v);
    return true; /* an unknown type name is not this check's to refuse */
}

/* JSON equality with 1 == 1.0, as JSON Schema compares numbers. */
static bool same(const json_t *a, const json_t *b) {
    if (json_is_number(a) && json_is_number(b)) return json_number_value(a) == json_number_value(b);
    return json_equal(a, b);
}

static size_t code_points(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

/* ---- $ref --------------------------------------------------------------- */

/* "#" or "#/a/b~1c" within the root; NULL when it names nothing. */
static const json_t *resolve(const ck *c, const char *ref) {
    if (ref[0] != '#') return NULL;
    const json_t *at = c->root;
    for (const char *p = ref + 1; *p == '/' && at;) {
        char key[256];
        size_t k = 0;
        for (p++; *p && *p != '/' && k + 1 < sizeof key; p++)
            key[k++] =
                p[0] == '~' && (p[1] == '0' || p[1] == '1') ? (++p, *p == '0' ? '~' : '/') : *p;
        key[k] = 0;
        if (json_is_array(at)) {
            char *end;
            unsigned long i = strtoul(key, &end, 10);
            at = *end || !k ? NULL : json_array_get(at, i);
        } else {
            at = json_object_get(at, key);
        }
    }
    return at;
}

/* ---- keywords by instance type ------------------------------------------ */

/* Descends into key (an object's) or index (an array's) for the pointer. */
static bool check_at(ck *c, const json_t *s, const json_t *v, const char *key, size_t index,
                     int depth) {
    size_t len = strlen(c->path);
    if (key)
        snprintf(c->path + len, sizeof c->path - len, "/%s", key);
    else
        snprintf(c->path + len, sizeof c->path - len, "/%zu", index);
    bool ok = check(c, s, v, depth + 1);
    c->path[len] = 0;
    return ok;
}

static bool check_object(ck *c, const json_t *s, const json_t *v, int depth) {
    const json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    const json_t *extra = json_object_get(s, "additionalProperties"), *x;
    size_t i;
    json_array_foreach(req, i, x) {
        if (json_is_string(x) && !json_object_get(v, json_string_value(x)))
            return fail(c, "required property '%s' is missing", json_string_value(x));
    }
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val) {
        const json_t *p = json_object_get(props, key);
        if (p) {
            if (!check_at(c, p, val, key, 0, depth)) return false;
        } else if (json_is_false(extra)) {
            return fail(c, "additional property '%s' is not allowed", key);
        } else if (json_is_object(extra) && !check_at(c, extra, val, key, 0, depth)) {
            return false;
        }
    }
    return true;
}

static bool check_array(ck *c, const json_t *s, const json_t *v, int depth) {
    const json_t *items = json_object_get(s, "items"), *mn = json_object_get(s, "minItems"),
                 *mx = json_object_get(s, "maxItems"), *x;
    size_t n = json_array_size(v), i;
    if (json_is_integer(mn) && (json_int_t)n < json_integer_value(mn))
        return fail(c, "minItems %" JSON_INTEGER_FORMAT, json_integer_value(mn));
    if (json_is_integer(mx) && (json_int_t)n > json_integer_value(mx))
        return fail(c, "maxItems %" JSON_INTEGER_FORMAT, json_integer_value(mx));
    if (json_is_object(items) || json_is_boolean(items)) {
        json_array_foreach(v, i, x) {
            if (!check_at(c, items, x, NULL, i, depth)) return false;
        }
    }
    return true;
}

static bool check_string(ck *c, const json_t *s, const json_t *v) {
    const json_t *mn = json_object_get(s, "minLength"), *mx = json_object_get(s, "maxLength");
    size_t n = code_points(json_string_value(v), json_string_length(v));
    if (json_is_integer(mn) && (json_int_t)n < json_integer_value(mn))
        return fail(c, "minLength %" JSON_INTEGER_FORMAT, json_integer_value(mn));
    if (json_is_integer(mx) && (json_int_t)n > json_integer_value(mx))
        return fail(c, "maxLength %" JSON_INTEGER_FORMAT, json_integer_value(mx));
    return true;
}

static bool check_number(ck *c, const json_t *s, const json_t *v) {
    const double d = json_number_value(v);
    const json_t *mn = json_object_get(s, "minimum"), *mx = json_object_get(s, "maximum");
    const json_t *emn = json_object_get(s, "exclusiveMinimum");
    const json_t *emx = json_object_get(s, "exclusiveMaximum");
    /* draft 4: exclusiveMinimum true makes minimum exclusive */
    if (json_is_number(mn) &&
        (json_is_true(emn) ? d <= json_number_value(mn) : d < json_number_value(mn)))
        return fail(c, "minimum %g", json_number_value(mn));
    if (json_is_number(mx) &&
        (json_is_true(emx) ? d >= json_number_value(mx) : d > json_number_value(mx)))
        return fail(c, "maximum %g", json_number_value(mx));
    if (json_is_number(emn) && d <= json_number_value(emn))
        return fail(c, "exclusiveMinimum %g", json_number_value(emn));
    if (json_is_number(emx) && d >= json_number_value(emx))
        return fail(c, "exclusiveMaximum %g", json_number_value(emx));
    return true;
}

/* ---- the walk ----------------------------------------------------------- */

/* How many of the alternatives in list v matches (quietly). */
static size_t matches(ck *c, const json_t *list, const json_t *v, int depth) {
    size_t k = 0, i;
    const json_t *alt;
    c->quiet++;
    json_array_foreach(list, i, alt) k += check(c, alt, v, depth + 1);
    c->quiet--;
    return k;
}

static bool check_type_enum(ck *c, const json_t *s, const json_t *v) {
    const json_t *type = json_object_get(s, "type"), *x;
    size_t i;
    bool ok = !type;
    if (json_is_string(type)) ok = type_is(json_string_value(type), v);
    json_array_foreach(type, i, x) ok |= json_is_string(x) && type_is(json_string_value(x), v);
    if (!ok)
        return fail(c, "not of type %s",
                    json_is_string(type) ? json_string_value(type) : "any listed");
    const json_t *en = json_object_get(s, "enum"), *cn = json_object_get(s, "const");
    if (cn && !same(cn, v)) return fail(c, "not the const value");
    if (!json_is_array(en)) return true;
    json_array_foreach(en, i, x) {
        if (same(x, v)) return true;
    }
    return fail(c, "not one of the enum values");
}

static bool check(ck *c, const json_t *s, const json_t *v, int depth) {
    if (json_is_true(s) || !s) return true;
    if (json_is_false(s)) return fail(c, "no value is allowed");
    if (!json_is_object(s)) return true;
    if (depth > JSON_SCHEMA_MAX_DEPTH || ++c->work > CHECK_MAX_WORK) {
        c->undecided = true;
        return false;
    }
    const json_t *ref = json_object_get(s, "$ref");
    if (json_is_string(ref)) {
        const json_t *to = resolve(c, json_string_value(ref));
        if (!to) {
            c->undecided = true;
            return false;
        }
        if (!check(c, to, v, depth + 1)) return false;
    }
    if (!check_type_enum(c, s, v)) return false;
    const json_t *any = json_object_get(s, "anyOf"), *one = json_object_get(s, "oneOf");
    if (json_is_array(any) && !matches(c, any, v, depth)) return fail(c, "matches no anyOf");
    if (json_is_array(one) && matches(c, one, v, depth) != 1)
        return fail(c, "matches not exactly one of oneOf");
    if (json_is_object(v)) return check_object(c, s, v, depth);
    if (json_is_array(v)) return check_array(c, s, v, depth);
    if (json_is_string(v)) return check_string(c, s, v);
    if (json_is_number(v)) return check_number(c, s, v);
    return true;
}

json_check json_schema_check(const json_t *schema, const json_t *value, char *why, size_t cap) {
    ck c = {.root = schema, .why = why, .cap = cap};
    if (why && cap) why[0] = 0;
    bool ok = check(&c, schema, value, 0);
    if (c.undecided) return JSON_CHECK_UNDECIDED;
    return ok ? JSON_CHECK_VALID : JSON_CHECK_INVALID;
}
