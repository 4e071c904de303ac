/* JSON schema -> GBNF (json_schema.h), the generator's parts that call
 * nothing back: the primitive rules (llama.cpp's json-schema-to-grammar
 * vocabulary), the generator's rule table and JSON-pointer path, keyword
 * checks, GBNF literals, and exact digit patterns for integer ranges.
 *
 * Not here: the walk over the schema (json_schema.c, which calls these). */
#include "constrain/json_schema_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/name_table.h"

/* ---------------------------------------------------------------------------
 * Primitive rules (llama.cpp's json-schema-to-grammar vocabulary)
 * ------------------------------------------------------------------------- */

typedef struct prim {
    const char *name;
    const char *body;
    const char *deps[6];
} prim;

static const prim PRIMS[] = {
    {"space", "| \" \" | \"\\n\" [ \\t]{0,20}", {0}},
    {"boolean", "(\"true\" | \"false\") space", {"space"}},
    {"null", "\"null\" space", {"space"}},
    {"char", "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})", {0}},
    {"string", "\"\\\"\" char* \"\\\"\" space", {"char", "space"}},
    {"integral-part", "[0] | [1-9] [0-9]{0,15}", {0}},
    {"decimal-part", "[0-9]{1,16}", {0}},
    {"number",
     "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? [0-9]{1,16})? space",
     {"integral-part", "decimal-part", "space"}},
    {"integer", "(\"-\"? integral-part) space", {"integral-part", "space"}},
    {"value",
     "object | array | string | number | boolean | null",
     {"object", "array", "string", "number", "boolean", "null"}},
    {"object",
     "\"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\" "
     "space",
     {"string", "space", "value"}},
    {"array", "\"[\" space ( value (\",\" space value)* )? \"]\" space", {"value", "space"}},
    {"date",
     "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [1-2] [0-9] | \"3\" [0-1] "
     ")",
     {0}},
    {"time",
     "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{3} )? ( \"Z\" | "
     "( \"+\" | \"-\" ) ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )",
     {0}},
    {"date-time", "date \"T\" time", {"date", "time"}},
    {"uuid",
     "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
     "[0-9a-fA-F]{12}",
     {0}},
    {"date-string", "\"\\\"\" date \"\\\"\" space", {"date", "space"}},
    {"time-string", "\"\\\"\" time \"\\\"\" space", {"time", "space"}},
    {"date-time-string", "\"\\\"\" date-time \"\\\"\" space", {"date-time", "space"}},
    {"uuid-string", "\"\\\"\" uuid \"\\\"\" space", {"uuid", "space"}},
};

/* ---------------------------------------------------------------------------
 * Generator state
 * ------------------------------------------------------------------------- */

int js_gfail(gen *g, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tps_fail(g->err, TPS_EINVAL, "json_schema: %s: %s", g->plen ? g->path : "/", msg);
}

int js_goom(gen *g) {
    return tps_fail(g->err, TPS_ENOMEM, "json_schema: out of memory");
}

/* Appends "/seg" (escaped as a JSON pointer) to the path; returns the old
 * length for path_pop. A path too long to hold ends in "...". */
size_t js_path_push(gen *g, const char *seg) {
    size_t old = g->plen;
    char buf[sizeof g->path];
    size_t k = 0;
    buf[k++] = '/';
    for (const char *s = seg; *s && k + 3 < sizeof buf; s++) {
        if (*s == '~' || *s == '/') {
            buf[k++] = '~';
            buf[k++] = *s == '~' ? '0' : '1';
        } else {
            buf[k++] = *s;
        }
    }
    if (g->plen + k + 4 >= sizeof g->path) {
        if (g->plen + 4 < sizeof g->path) memcpy(g->path + g->plen, "...", 4), g->plen += 3;
        return old;
    }
    memcpy(g->path + g->plen, buf, k);
    g->plen += k;
    g->path[g->plen] = 0;
    return old;
}

void js_path_pop(gen *g, size_t old) {
    g->plen = old;
    g->path[old] = 0;
}

jrule *js_rule_find(gen *g, const char *name) {
    for (size_t i = 0; i < g->n_rules; i++)
        if (!strcmp(g->rules[i].name, name)) return &g->rules[i];
    return NULL;
}

/* Adds a rule named after hint (characters outside [a-zA-Z0-9] become '-',
 * a "-N" suffix makes it unique) with body (copied; NULL reserves the name).
 * Returns the name, owned by g, or NULL when out of memory. */
const char *js_rule_add(gen *g, const char *hint, const char *body) {
    char name[80], named[96];
    size_t k = 0;
    if (g->prefix) {
        snprintf(named, sizeof named, "%s-%s", g->prefix, hint);
        hint = named;
    }
    for (const char *s = hint; *s && k < 48; s++) {
        char c = *s;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!ok && k && name[k - 1] == '-') continue;
        name[k++] = ok ? c : '-';
    }
    if (!k) name[k++] = 'r';
    name[k] = 0;
    for (unsigned i = 1; js_rule_find(g, name); i++)
        snprintf(name + k, sizeof name - k, "-%u", i);
    if (g->n_rules == g->cap_rules) {
        size_t cap = g->cap_rules ? g->cap_rules * 2 : 32;
        jrule *r = realloc(g->rules, cap * sizeof *r);
        if (!r) return NULL;
        g->rules = r, g->cap_rules = cap;
    }
    jrule *r = &g->rules[g->n_rules];
    r->name = strdup(name);
    r->body = body ? strdup(body) : NULL;
    if (!r->name || (body && !r->body)) {
        free(r->name);
        free(r->body);
        return NULL;
    }
    g->n_rules++;
    return r->name;
}

/* Adds primitive rule name and what it uses, once. Returns 0 or ENOMEM. */
int js_prim_use(gen *g, const char *name) {
    if (js_rule_find(g, name)) return 0;
    for (size_t i = 0; i < sizeof PRIMS / sizeof *PRIMS; i++) {
        if (strcmp(PRIMS[i].name, name)) continue;
        const char *prefix = g->prefix; /* primitives keep their names: the same text everywhere */
        g->prefix = NULL;
        const char *added = js_rule_add(g, name, PRIMS[i].body);
        g->prefix = prefix;
        if (!added) return js_goom(g);
        for (int d = 0; d < 6 && PRIMS[i].deps[d]; d++) {
            int rc = js_prim_use(g, PRIMS[i].deps[d]);
            if (rc) return rc;
        }
        return 0;
    }
    return tps_fail(g->err, TPS_EINVAL, "json_schema: internal: no primitive '%s'", name);
}

/* A primitive as the result of a visit. */
int js_prim_result(gen *g, const char *name, const char **out) {
    int rc = js_prim_use(g, name);
    if (!rc) *out = js_rule_find(g, name)->name;
    return rc;
}

/* Finishes a visit: adds body (built in b, freed here) as a rule named
 * after hint. */
int js_body_result(gen *g, sbuf *b, const char *hint, const char **out) {
    int rc = 0;
    if (sbuf_failed(b) || !(*out = js_rule_add(g, hint, b->p ? b->p : ""))) rc = js_goom(g);
    sbuf_free(b);
    return rc;
}

/* ---------------------------------------------------------------------------
 * Keywords
 * ------------------------------------------------------------------------- */

const char *const js_type_names[7] = {"object", "array",   "string", "integer",
                                      "number", "boolean", "null"};

static const char *const ANNOTATIONS[] = {
    "$schema", "$id",        "$comment", "title",     "description", "examples",
    "default", "deprecated", "readOnly", "writeOnly", "$defs",       "definitions",
};

/* keyword -> the types (T_* bits) it applies to */
static const tps_name_id TYPED[] = {
    {"properties", T_OBJ},
    {"required", T_OBJ},
    {"additionalProperties", T_OBJ},
    {"items", T_ARR},
    {"minItems", T_ARR},
    {"maxItems", T_ARR},
    {"minLength", T_STR},
    {"maxLength", T_STR},
    {"pattern", T_STR},
    {"format", T_STR},
    {"minimum", T_INT},
    {"maximum", T_INT},
    {"exclusiveMinimum", T_INT},
    {"exclusiveMaximum", T_INT},
};

static bool in_list(const char *key, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (list[i] && !strcmp(key, list[i])) return true;
    return false;
}

int js_type_bit(const char *name) {
    for (int i = 0; i < 7; i++)
        if (!strcmp(name, js_type_names[i])) return 1 << i;
    return 0;
}

/* Every key of schema must be an annotation, in extra[0..n_extra), or a
 * typed keyword for one of the types in mask. */
int js_check_keys(gen *g, const json_t *schema, int mask, const char *const *extra,
                  size_t n_extra) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)schema, key, v) {
        if (in_list(key, ANNOTATIONS, sizeof ANNOTATIONS / sizeof *ANNOTATIONS) ||
            in_list(key, extra, n_extra))
            continue;
        int types = TPS_NAME_FIND(TYPED, key, strlen(key), 0);
        if (types & mask) continue;
        if (!types || !mask) return js_gfail(g, "keyword '%s' is not supported", key);
        char have[128] = "", want[128] = "";
        for (int i = 0; i < 7; i++) {
            char *d = (mask & (1 << i)) ? have : (types & (1 << i)) ? want : NULL;
            if (!d) continue;
            size_t l = strlen(d);
            snprintf(d + l, sizeof have - l, "%s%s", l ? "/" : "", js_type_names[i]);
        }
        return js_gfail(g, "keyword '%s' is not supported for type '%s' (only for %s)", key, have,
                        want);
    }
    return 0;
}

/* A non-negative integer keyword, at most max; *v untouched when absent. */
int js_get_count(gen *g, const json_t *schema, const char *key, uint64_t max, uint64_t *v,
                 bool *present) {
    json_t *j = json_object_get(schema, key);
    if (present) *present = j != NULL;
    if (!j) return 0;
    double d = json_is_integer(j) ? (double)json_integer_value(j) : json_real_value(j);
    if (!json_is_number(j) || d < 0 || d != floor(d))
        return js_gfail(g, "'%s' must be a non-negative integer", key);
    if (d > (double)max)
        return js_gfail(g, "'%s' is %.0f; at most %llu is supported", key, d,
                        (unsigned long long)max);
    *v = (uint64_t)d;
    return 0;
}

/* A GBNF string literal matching the bytes s[0..n) exactly. */
void js_gbnf_lit(sbuf *b, const char *s, size_t n) {
    sbuf_add(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            sbuf_add(b, e, 2);
        } else if (c < 0x20 || c == 0x7F) {
            sbuf_printf(b, "\\x%02X", c);
        } else {
            sbuf_add(b, &s[i], 1);
        }
    }
    sbuf_add(b, "\"", 1);
}

/* ---- integer ranges: exact digit patterns ---- */

static uint64_t pow10u(unsigned k) {
    uint64_t v = 1;
    while (k--)
        v *= 10;
    return v;
}

static unsigned ndigits(uint64_t v) {
    unsigned k = 1;
    while (v >= 10)
        v /= 10, k++;
    return k;
}

/* Decimal strings x..y of the same length d (x <= y, no sign). */
static void digits_range(sbuf *b, const char *x, const char *y, size_t d) {
    if (x[0] == y[0]) {
        sbuf_printf(b, "[%c]", x[0]);
        if (d > 1) {
            sbuf_adds(b, " ");
            digits_range(b, x + 1, y + 1, d - 1);
        }
        return;
    }
    bool xlow = strspn(x + 1, "0") == d - 1, yhigh = strspn(y + 1, "9") == d - 1;
    if (xlow && yhigh) {
        sbuf_printf(b, "[%c-%c]", x[0], y[0]);
        if (d > 1) sbuf_printf(b, " [0-9]{%zu}", d - 1);
        return;
    }
    char nines[24], zeros[24];
    memset(nines, '9', d - 1), nines[d - 1] = 0;
    memset(zeros, '0', d - 1), zeros[d - 1] = 0;
    int alts = 0;
    char lo = x[0], hi = y[0];
    sbuf_adds(b, "(");
    if (!xlow) {
        sbuf_printf(b, "[%c] ", x[0]);
        digits_range(b, x + 1, nines, d - 1);
        lo++, alts++;
    }
    if (!yhigh) hi--;
    if (lo <= hi) {
        sbuf_printf(b, "%s[%c-%c] [0-9]{%zu}", alts++ ? " | " : "", lo, hi, d - 1);
    }
    if (!yhigh) {
        sbuf_printf(b, "%s[%c] ", alts++ ? " | " : "", y[0]);
        digits_range(b, zeros, y + 1, d - 1);
    }
    sbuf_adds(b, ")");
}

/* Unsigned decimal numbers lo..hi without leading zeros, as a group. */
void js_uint_range(sbuf *b, uint64_t lo, uint64_t hi) {
    sbuf_adds(b, "(");
    for (unsigned d = ndigits(lo); d <= ndigits(hi); d++) {
        uint64_t a = d == ndigits(lo) ? lo : pow10u(d - 1);
        uint64_t z = d == ndigits(hi) ? hi : pow10u(d) - 1;
        char xs[24], ys[24];
        snprintf(xs, sizeof xs, "%llu", (unsigned long long)a);
        snprintf(ys, sizeof ys, "%llu", (unsigned long long)z);
        if (d != ndigits(lo)) sbuf_adds(b, " | ");
        digits_range(b, xs, ys, d);
    }
    sbuf_adds(b, ")");
}

/* Unsigned numbers >= lo with at most 16 digits (integral-part's limit). */
void js_uint_at_least(sbuf *b, uint64_t lo) {
    unsigned d = ndigits(lo);
    sbuf_adds(b, "(");
    js_uint_range(b, lo, pow10u(d) - 1);
    if (d < 16) sbuf_printf(b, " | [1-9] [0-9]{%u,15}", d);
    sbuf_adds(b, ")");
}

/* An integer bound: minimum/maximum (inclusive) or exclusive*; *v set. */
int js_get_bound(gen *g, const json_t *schema, bool upper, int64_t *v, bool *present) {
    const char *inc = upper ? "maximum" : "minimum";
    const char *exc = upper ? "exclusiveMaximum" : "exclusiveMinimum";
    json_t *a = json_object_get(schema, inc), *b = json_object_get(schema, exc);
    *present = a || b;
    if (a && b) return js_gfail(g, "'%s' and '%s' together are not supported", inc, exc);
    json_t *j = a ? a : b;
    if (!j) return 0;
    const char *key = a ? inc : exc;
    if (!json_is_number(j)) return js_gfail(g, "'%s' must be a number", key);
    double d = json_number_value(j);
    if (!(fabs(d) <= (double)JSON_SCHEMA_MAX_INT))
        return js_gfail(g, "'%s' must be within -10^15..10^15", key);
    if (upper)
        d = b ? ceil(d) - 1 : floor(d);
    else
        d = b ? floor(d) + 1 : ceil(d);
    *v = (int64_t)d;
    return 0;
}
