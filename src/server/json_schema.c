/* JSON schema -> GBNF (json_schema.h). A recursive walk over the schema
 * that turns every subschema into a GBNF rule, named after where it sits
 * ("root-address-city"), plus a fixed set of primitive rules (string,
 * number, value, ...) added when first used. $refs are memoized by their
 * text, so recursive schemas become recursive rules.
 *
 * Not here: parsing the GBNF (engine/grammar.c), validating instances. */
#include "server/json_schema.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

typedef struct jrule {
    char *name;
    char *body; /* NULL while reserved */
} jrule;

typedef struct jref {
    char *ref;
    const char *name; /* borrowed from rules */
} jref;

typedef struct gen {
    const json_t *root;
    jrule *rules;
    size_t n_rules, cap_rules;
    jref *refs;
    size_t n_refs, cap_refs;
    char path[512]; /* JSON pointer of the subschema being visited */
    size_t plen;
    int depth;
    tps_err *err;
} gen;

static int gfail(gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int gfail(gen *g, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tps_fail(g->err, TPS_EINVAL, "json_schema: %s: %s", g->plen ? g->path : "/", msg);
}

static int goom(gen *g) {
    return tps_fail(g->err, TPS_ENOMEM, "json_schema: out of memory");
}

/* Appends "/seg" (escaped as a JSON pointer) to the path; returns the old
 * length for path_pop. A path too long to hold ends in "...". */
static size_t path_push(gen *g, const char *seg) {
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

static void path_pop(gen *g, size_t old) {
    g->plen = old;
    g->path[old] = 0;
}

static jrule *rule_find(gen *g, const char *name) {
    for (size_t i = 0; i < g->n_rules; i++)
        if (!strcmp(g->rules[i].name, name)) return &g->rules[i];
    return NULL;
}

/* Adds a rule named after hint (characters outside [a-zA-Z0-9] become '-',
 * a "-N" suffix makes it unique) with body (copied; NULL reserves the name).
 * Returns the name, owned by g, or NULL when out of memory. */
static const char *rule_add(gen *g, const char *hint, const char *body) {
    char name[80];
    size_t k = 0;
    for (const char *s = hint; *s && k < 48; s++) {
        char c = *s;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!ok && k && name[k - 1] == '-') continue;
        name[k++] = ok ? c : '-';
    }
    if (!k) name[k++] = 'r';
    name[k] = 0;
    for (unsigned i = 1; rule_find(g, name); i++)
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
static int prim_use(gen *g, const char *name) {
    if (rule_find(g, name)) return 0;
    for (size_t i = 0; i < sizeof PRIMS / sizeof *PRIMS; i++) {
        if (strcmp(PRIMS[i].name, name)) continue;
        if (!rule_add(g, name, PRIMS[i].body)) return goom(g);
        for (int d = 0; d < 6 && PRIMS[i].deps[d]; d++) {
            int rc = prim_use(g, PRIMS[i].deps[d]);
            if (rc) return rc;
        }
        return 0;
    }
    return tps_fail(g->err, TPS_EINVAL, "json_schema: internal: no primitive '%s'", name);
}

/* A primitive as the result of a visit. */
static int prim_result(gen *g, const char *name, const char **out) {
    int rc = prim_use(g, name);
    if (!rc) *out = rule_find(g, name)->name;
    return rc;
}

/* Finishes a visit: adds body (built in b, freed here) as a rule named
 * after hint. */
static int body_result(gen *g, sbuf *b, const char *hint, const char **out) {
    int rc = 0;
    if (sbuf_failed(b) || !(*out = rule_add(g, hint, b->p ? b->p : ""))) rc = goom(g);
    sbuf_free(b);
    return rc;
}

/* ---------------------------------------------------------------------------
 * Keywords
 * ------------------------------------------------------------------------- */

enum { T_OBJ = 1, T_ARR = 2, T_STR = 4, T_INT = 8, T_NUM = 16, T_BOOL = 32, T_NULL = 64 };

static const char *const TYPE_NAMES[] = {"object", "array",   "string", "integer",
                                         "number", "boolean", "null"};

static const char *const ANNOTATIONS[] = {
    "$schema", "$id",        "$comment", "title",     "description", "examples",
    "default", "deprecated", "readOnly", "writeOnly", "$defs",       "definitions",
};

static const struct {
    const char *key;
    int types;
} TYPED[] = {
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

static int type_bit(const char *name) {
    for (int i = 0; i < 7; i++)
        if (!strcmp(name, TYPE_NAMES[i])) return 1 << i;
    return 0;
}

/* Every key of schema must be an annotation, in extra[0..n_extra), or a
 * typed keyword for one of the types in mask. */
static int check_keys(gen *g, const json_t *schema, int mask, const char *const *extra,
                      size_t n_extra) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)schema, key, v) {
        if (in_list(key, ANNOTATIONS, sizeof ANNOTATIONS / sizeof *ANNOTATIONS) ||
            in_list(key, extra, n_extra))
            continue;
        int types = 0;
        for (size_t i = 0; i < sizeof TYPED / sizeof *TYPED; i++)
            if (!strcmp(key, TYPED[i].key)) types = TYPED[i].types;
        if (types & mask) continue;
        if (!types || !mask) return gfail(g, "keyword '%s' is not supported", key);
        char have[128] = "", want[128] = "";
        for (int i = 0; i < 7; i++) {
            char *d = (mask & (1 << i)) ? have : (types & (1 << i)) ? want : NULL;
            if (!d) continue;
            size_t l = strlen(d);
            snprintf(d + l, sizeof have - l, "%s%s", l ? "/" : "", TYPE_NAMES[i]);
        }
        return gfail(g, "keyword '%s' is not supported for type '%s' (only for %s)", key, have,
                     want);
    }
    return 0;
}

/* A non-negative integer keyword, at most max; *v untouched when absent. */
static int get_count(gen *g, const json_t *schema, const char *key, uint64_t max, uint64_t *v,
                     bool *present) {
    json_t *j = json_object_get(schema, key);
    if (present) *present = j != NULL;
    if (!j) return 0;
    double d = json_is_integer(j) ? (double)json_integer_value(j) : json_real_value(j);
    if (!json_is_number(j) || d < 0 || d != floor(d))
        return gfail(g, "'%s' must be a non-negative integer", key);
    if (d > (double)max)
        return gfail(g, "'%s' is %.0f; at most %llu is supported", key, d, (unsigned long long)max);
    *v = (uint64_t)d;
    return 0;
}

/* A GBNF string literal matching the bytes s[0..n) exactly. */
static void gbnf_lit(sbuf *b, const char *s, size_t n) {
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

/* ---------------------------------------------------------------------------
 * Visits: each turns one subschema into a rule and sets *out to its name
 * ------------------------------------------------------------------------- */

static int visit(gen *g, const json_t *schema, const char *hint, const char **out);

static int visit_child(gen *g, const json_t *schema, const char *seg, const char *hint,
                       const char **out) {
    size_t old = path_push(g, seg);
    int rc = visit(g, schema, hint, out);
    if (!rc) path_pop(g, old);
    return rc;
}

static bool value_has_type(const json_t *v, int mask) {
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return mask & T_OBJ;
    case JSON_ARRAY:
        return mask & T_ARR;
    case JSON_STRING:
        return mask & T_STR;
    case JSON_INTEGER:
        return mask & (T_INT | T_NUM);
    case JSON_REAL:
        return (mask & T_NUM) ||
               ((mask & T_INT) && json_real_value(v) == floor(json_real_value(v)));
    case JSON_TRUE:
    case JSON_FALSE:
        return mask & T_BOOL;
    case JSON_NULL:
        return mask & T_NULL;
    }
    return false;
}

/* "type" as a mask (0 when absent); an error for anything but a type name
 * or a list of them. */
static int type_mask(gen *g, const json_t *schema, int *mask) {
    json_t *t = json_object_get(schema, "type");
    *mask = 0;
    if (!t) return 0;
    if (json_is_string(t)) {
        if (!(*mask = type_bit(json_string_value(t))))
            return gfail(g, "type '%s' is not a JSON schema type", json_string_value(t));
        return 0;
    }
    size_t i;
    json_t *e;
    if (!json_is_array(t) || !json_array_size(t))
        return gfail(g, "'type' must be a type name or a list of them");
    json_array_foreach(t, i, e) {
        int bit = json_is_string(e) ? type_bit(json_string_value(e)) : 0;
        if (!bit) return gfail(g, "'type' entry %zu is not a JSON schema type", i);
        *mask |= bit;
    }
    return 0;
}

/* enum and const: the listed JSON values, in compact form, of the types
 * the schema allows. */
static int visit_values(gen *g, const json_t *schema, const char *hint, const char **out) {
    static const char *const extra[] = {"enum", "const", "type"};
    int mask, rc = type_mask(g, schema, &mask);
    if (rc || (rc = check_keys(g, schema, 0, extra, 3))) return rc;
    json_t *c = json_object_get(schema, "const"), *en = json_object_get(schema, "enum");
    if (c && en) return gfail(g, "'const' and 'enum' together are not supported");
    if (en && (!json_is_array(en) || !json_array_size(en)))
        return gfail(g, "'enum' must be a non-empty array");
    size_t n = c ? 1 : json_array_size(en), kept = 0;
    sbuf b;
    sbuf_init(&b);
    sbuf_adds(&b, "(");
    for (size_t i = 0; i < n; i++) {
        const json_t *v = c ? c : json_array_get(en, i);
        if (mask && !value_has_type(v, mask)) continue;
        char *txt = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(15));
        if (!txt) {
            sbuf_free(&b);
            return goom(g);
        }
        if (kept++) sbuf_adds(&b, " | ");
        gbnf_lit(&b, txt, strlen(txt));
        free(txt);
    }
    sbuf_adds(&b, ") space");
    if (!kept) {
        sbuf_free(&b);
        return gfail(g, "no '%s' value has the schema's 'type'", c ? "const" : "enum");
    }
    if ((rc = prim_use(g, "space"))) {
        sbuf_free(&b);
        return rc;
    }
    return body_result(g, &b, hint, out);
}

static int visit_alternatives(gen *g, const json_t *schema, const char *key, const char *hint,
                              const char **out) {
    const char *const extra[] = {key};
    int rc = check_keys(g, schema, 0, extra, 1);
    if (rc) return rc;
    const json_t *list = json_object_get(schema, key);
    if (!json_is_array(list) || !json_array_size(list))
        return gfail(g, "'%s' must be a non-empty array", key);
    size_t old = path_push(g, key);
    sbuf b;
    sbuf_init(&b);
    size_t i;
    json_t *sub;
    json_array_foreach(list, i, sub) {
        char seg[24], h[96];
        snprintf(seg, sizeof seg, "%zu", i);
        snprintf(h, sizeof h, "%.48s-%zu", hint, i);
        const char *name;
        if ((rc = visit_child(g, sub, seg, h, &name))) {
            sbuf_free(&b);
            return rc;
        }
        sbuf_printf(&b, "%s%s", i ? " | " : "", name);
    }
    path_pop(g, old);
    return body_result(g, &b, hint, out);
}

/* Resolves a local $ref ("#" or "#/a/b~1c"); NULL when it does not. */
static const json_t *resolve(const json_t *root, const char *ref) {
    if (ref[0] != '#') return NULL;
    const json_t *cur = root;
    const char *p = ref + 1;
    while (*p) {
        if (*p != '/') return NULL;
        p++;
        char seg[256];
        size_t k = 0;
        for (; *p && *p != '/'; p++) {
            char c = *p;
            if (c == '~' && (p[1] == '0' || p[1] == '1')) c = *++p == '0' ? '~' : '/';
            if (k + 1 >= sizeof seg) return NULL;
            seg[k++] = c;
        }
        seg[k] = 0;
        if (json_is_object(cur)) {
            cur = json_object_get(cur, seg);
        } else if (json_is_array(cur)) {
            char *end;
            unsigned long idx = strtoul(seg, &end, 10);
            cur = (*end || !k) ? NULL : json_array_get(cur, idx);
        } else {
            return NULL;
        }
        if (!cur) return NULL;
    }
    return cur;
}

static int visit_ref(gen *g, const json_t *schema, const char **out) {
    static const char *const extra[] = {"$ref"};
    int rc = check_keys(g, schema, 0, extra, 1);
    if (rc) return rc;
    const json_t *r = json_object_get(schema, "$ref");
    if (!json_is_string(r)) return gfail(g, "'$ref' must be a string");
    const char *ref = json_string_value(r);
    for (size_t i = 0; i < g->n_refs; i++)
        if (!strcmp(g->refs[i].ref, ref)) {
            *out = g->refs[i].name;
            return 0;
        }
    if (ref[0] != '#')
        return gfail(g, "$ref '%s': only local references ('#/...') are supported", ref);
    const json_t *target = resolve(g->root, ref);
    if (!target) return gfail(g, "$ref '%s' does not resolve", ref);
    /* reserve the rule first, so that a recursive schema finds it */
    const char *slash = strrchr(ref, '/');
    char hint[96];
    snprintf(hint, sizeof hint, "def-%s", slash && slash[1] ? slash + 1 : "root");
    const char *name = rule_add(g, hint, NULL);
    if (!name) return goom(g);
    if (g->n_refs == g->cap_refs) {
        size_t cap = g->cap_refs ? g->cap_refs * 2 : 8;
        jref *p = realloc(g->refs, cap * sizeof *p);
        if (!p) return goom(g);
        g->refs = p, g->cap_refs = cap;
    }
    if (!(g->refs[g->n_refs].ref = strdup(ref))) return goom(g);
    g->refs[g->n_refs++].name = name;
    /* errors inside the target name the target's own location */
    char saved[sizeof g->path];
    size_t saved_len = g->plen;
    memcpy(saved, g->path, sizeof saved);
    g->plen = 0;
    g->path[0] = 0;
    for (const char *p = ref + 1; *p && g->plen + 1 < sizeof g->path; p++)
        g->path[g->plen++] = *p;
    g->path[g->plen] = 0;
    char hint2[112];
    snprintf(hint2, sizeof hint2, "%.48s-body", name);
    const char *body;
    if ((rc = visit(g, target, hint2, &body))) return rc;
    memcpy(g->path, saved, sizeof saved);
    g->plen = saved_len;
    jrule *jr = rule_find(g, name);
    if (!(jr->body = strdup(body))) return goom(g);
    *out = name;
    return 0;
}

static int visit_string(gen *g, const json_t *schema, const char *hint, const char **out) {
    uint64_t min = 0, max = 0;
    bool has_min, has_max;
    int rc = get_count(g, schema, "minLength", GRAMMAR_MAX_REPEAT, &min, &has_min);
    if (!rc) rc = get_count(g, schema, "maxLength", GRAMMAR_MAX_REPEAT, &max, &has_max);
    if (rc) return rc;
    json_t *pat = json_object_get(schema, "pattern");
    if (pat) {
        const char *s = json_is_string(pat) ? json_string_value(pat) : NULL;
        if (!s || (strcmp(s, "") && strcmp(s, ".*") && strcmp(s, "^.*") && strcmp(s, ".*$") &&
                   strcmp(s, "^.*$")))
            return gfail(g,
                         "keyword 'pattern' is supported only when it matches everything "
                         "('.*'); got '%.80s'",
                         s ? s : "(not a string)");
    }
    json_t *fmt = json_object_get(schema, "format");
    if (fmt) {
        const char *f = json_is_string(fmt) ? json_string_value(fmt) : "";
        if (strcmp(f, "date") && strcmp(f, "time") && strcmp(f, "date-time") && strcmp(f, "uuid"))
            return gfail(g, "format '%.80s' is not supported (date, time, date-time, uuid are)", f);
        if (has_min || has_max)
            return gfail(g, "'format' together with 'minLength'/'maxLength' is not supported");
        char name[32];
        snprintf(name, sizeof name, "%s-string", f);
        return prim_result(g, name, out);
    }
    if (!has_min && !has_max) return prim_result(g, "string", out);
    if (has_max && max < min) return gfail(g, "'minLength' is larger than 'maxLength'");
    if ((rc = prim_use(g, "char")) || (rc = prim_use(g, "space"))) return rc;
    sbuf b;
    sbuf_init(&b);
    if (has_max)
        sbuf_printf(&b, "\"\\\"\" char{%llu,%llu} \"\\\"\" space", (unsigned long long)min,
                    (unsigned long long)max);
    else
        sbuf_printf(&b, "\"\\\"\" char{%llu,} \"\\\"\" space", (unsigned long long)min);
    return body_result(g, &b, hint, out);
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
static void uint_range(sbuf *b, uint64_t lo, uint64_t hi) {
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
static void uint_at_least(sbuf *b, uint64_t lo) {
    unsigned d = ndigits(lo);
    sbuf_adds(b, "(");
    uint_range(b, lo, pow10u(d) - 1);
    if (d < 16) sbuf_printf(b, " | [1-9] [0-9]{%u,15}", d);
    sbuf_adds(b, ")");
}

/* An integer bound: minimum/maximum (inclusive) or exclusive*; *v set. */
static int get_bound(gen *g, const json_t *schema, bool upper, int64_t *v, bool *present) {
    const char *inc = upper ? "maximum" : "minimum";
    const char *exc = upper ? "exclusiveMaximum" : "exclusiveMinimum";
    json_t *a = json_object_get(schema, inc), *b = json_object_get(schema, exc);
    *present = a || b;
    if (a && b) return gfail(g, "'%s' and '%s' together are not supported", inc, exc);
    json_t *j = a ? a : b;
    if (!j) return 0;
    const char *key = a ? inc : exc;
    if (!json_is_number(j)) return gfail(g, "'%s' must be a number", key);
    double d = json_number_value(j);
    if (!(fabs(d) <= (double)JSON_SCHEMA_MAX_INT))
        return gfail(g, "'%s' must be within -10^15..10^15", key);
    if (upper)
        d = b ? ceil(d) - 1 : floor(d);
    else
        d = b ? floor(d) + 1 : ceil(d);
    *v = (int64_t)d;
    return 0;
}

static int visit_integer(gen *g, const json_t *schema, const char *hint, const char **out) {
    int64_t lo = 0, hi = 0;
    bool has_lo, has_hi;
    int rc = get_bound(g, schema, false, &lo, &has_lo);
    if (!rc) rc = get_bound(g, schema, true, &hi, &has_hi);
    if (rc) return rc;
    if (!has_lo && !has_hi) return prim_result(g, "integer", out);
    if (has_lo && has_hi && lo > hi) return gfail(g, "the minimum is larger than the maximum");
    if ((rc = prim_use(g, "space"))) return rc;
    sbuf b;
    sbuf_init(&b);
    sbuf_adds(&b, "(");
    if (has_lo && has_hi) {
        if (lo < 0) {
            sbuf_adds(&b, "\"-\" ");
            uint_range(&b, hi >= 0 ? 1 : (uint64_t)-hi, (uint64_t)-lo);
        }
        if (hi >= 0) {
            if (lo < 0) sbuf_adds(&b, " | ");
            uint_range(&b, lo > 0 ? (uint64_t)lo : 0, (uint64_t)hi);
        }
    } else if (has_lo) {
        if (lo >= 0) {
            uint_at_least(&b, (uint64_t)lo);
        } else {
            sbuf_adds(&b, "\"-\" ");
            uint_range(&b, 1, (uint64_t)-lo);
            sbuf_adds(&b, " | integral-part");
            if ((rc = prim_use(g, "integral-part"))) goto fail;
        }
    } else {
        if (hi >= 0) {
            sbuf_adds(&b, "\"-\" [1-9] [0-9]{0,15} | ");
            uint_range(&b, 0, (uint64_t)hi);
        } else {
            sbuf_adds(&b, "\"-\" ");
            uint_at_least(&b, (uint64_t)-hi);
        }
    }
    sbuf_adds(&b, ") space");
    return body_result(g, &b, hint, out);
fail:
    sbuf_free(&b);
    return rc;
}

static int visit_array(gen *g, const json_t *schema, const char *hint, const char **out) {
    uint64_t min = 0, max = 0;
    bool has_max;
    int rc = get_count(g, schema, "minItems", GRAMMAR_MAX_REPEAT, &min, NULL);
    if (!rc) rc = get_count(g, schema, "maxItems", GRAMMAR_MAX_REPEAT, &max, &has_max);
    if (rc) return rc;
    if (has_max && max < min) return gfail(g, "'minItems' is larger than 'maxItems'");
    const char *item;
    json_t *items = json_object_get(schema, "items");
    char h[96];
    snprintf(h, sizeof h, "%.48s-item", hint);
    if (items)
        rc = visit_child(g, items, "items", h, &item);
    else
        rc = prim_result(g, "value", &item);
    if (rc || (rc = prim_use(g, "space"))) return rc;
    sbuf b;
    sbuf_init(&b);
    sbuf_adds(&b, "\"[\" space ");
    if (!has_max || max > 0) {
        if (!min) sbuf_adds(&b, "(");
        sbuf_printf(&b, "%s (\",\" space %s)", item, item);
        uint64_t rmin = min ? min - 1 : 0;
        if (has_max)
            sbuf_printf(&b, "{%llu,%llu}", (unsigned long long)rmin, (unsigned long long)(max - 1));
        else
            sbuf_printf(&b, "{%llu,}", (unsigned long long)rmin);
        if (!min) sbuf_adds(&b, ")?");
        sbuf_adds(&b, " ");
    }
    sbuf_adds(&b, "\"]\" space");
    return body_result(g, &b, hint, out);
}

/* The shapes of properties, required and additionalProperties; every
 * required name must be a property. */
static int check_object_keywords(gen *g, const json_t *props, const json_t *req,
                                 const json_t *addl) {
    if (props && !json_is_object(props)) return gfail(g, "'properties' must be an object");
    if (req && !json_is_array(req)) return gfail(g, "'required' must be an array");
    if (addl && !json_is_boolean(addl) && !json_is_object(addl))
        return gfail(g, "'additionalProperties' must be a boolean or a schema");
    size_t i;
    json_t *r;
    json_array_foreach(req, i, r) {
        if (!json_is_string(r)) return gfail(g, "'required' entry %zu is not a string", i);
        if (!props || !json_object_get(props, json_string_value(r)))
            return gfail(g, "required property '%s' is not in 'properties'", json_string_value(r));
    }
    return 0;
}

/* An object without properties: any object, the empty object, or a map of
 * string keys to values of the additionalProperties schema. */
static int visit_map(gen *g, const json_t *props, const json_t *addl, const char *hint,
                     const char **out) {
    if ((!props && !addl) || json_is_true(addl)) return prim_result(g, "object", out);
    sbuf b;
    sbuf_init(&b);
    if (json_is_false(addl) || !addl) {
        sbuf_adds(&b, "\"{\" space \"}\" space");
    } else { /* a map: string keys, values of the schema */
        const char *val;
        char h[96];
        snprintf(h, sizeof h, "%.48s-value", hint);
        int rc;
        if ((rc = visit_child(g, addl, "additionalProperties", h, &val)) ||
            (rc = prim_use(g, "string"))) {
            sbuf_free(&b);
            return rc;
        }
        sbuf_printf(&b,
                    "\"{\" space ( string \":\" space %s (\",\" space string \":\" space %s)* "
                    ")? \"}\" space",
                    val, val);
    }
    return body_result(g, &b, hint, out);
}

/* kv[i]: the rule for property i's key and value; reqd[i]: whether it is
 * required. */
static int property_rules(gen *g, const json_t *props, const json_t *req, const char *hint,
                          const char **kv, bool *reqd) {
    size_t old = path_push(g, "properties");
    const char *key;
    json_t *sub, *r;
    size_t i = 0;
    int rc;
    json_object_foreach((json_t *)props, key, sub) {
        size_t k;
        json_array_foreach(req, k, r) reqd[i] |= !strcmp(json_string_value(r), key);
        char h[160];
        snprintf(h, sizeof h, "%.48s-%.48s", hint, key);
        const char *val;
        if ((rc = visit_child(g, sub, key, h, &val))) return rc;
        sbuf b;
        sbuf_init(&b);
        sbuf_json_str(&b, key, strlen(key));
        sbuf t;
        sbuf_init(&t);
        gbnf_lit(&t, b.p, b.len);
        sbuf_printf(&t, " space \":\" space %s", val);
        sbuf_free(&b);
        snprintf(h, sizeof h, "%.48s-%.48s-kv", hint, key);
        if ((rc = body_result(g, &t, h, &kv[i]))) return rc;
        i++;
    }
    path_pop(g, old);
    return 0;
}

/* The n properties in declared order; optional ones may be left out.
 * rest_i: keys i.. after something was written (each preceded by ",");
 * first_i: keys i.. when nothing was written yet. *first = first_0. */
static int chain_properties(gen *g, const char **kv, const bool *reqd, size_t n, const char *hint,
                            const char **first) {
    const char *rest = NULL;
    *first = NULL;
    int rc;
    for (size_t j = n; j-- > 0;) {
        char h[120];
        sbuf b;
        sbuf_init(&b);
        /* first_j */
        sbuf_printf(&b, "%s%s%s", kv[j], rest ? " " : "", rest ? rest : "");
        if (!reqd[j]) sbuf_printf(&b, " | %s", *first ? *first : "");
        snprintf(h, sizeof h, "%.48s-first-%zu", hint, j);
        if ((rc = body_result(g, &b, h, first))) return rc;
        /* rest_j */
        sbuf_init(&b);
        sbuf_printf(&b, "%s\",\" space %s%s %s", reqd[j] ? "" : "(", kv[j], reqd[j] ? "" : ")?",
                    rest ? rest : "");
        snprintf(h, sizeof h, "%.48s-rest-%zu", hint, j);
        if ((rc = body_result(g, &b, h, &rest))) return rc;
    }
    return 0;
}

static int visit_object(gen *g, const json_t *schema, const char *hint, const char **out) {
    const json_t *props = json_object_get(schema, "properties");
    const json_t *req = json_object_get(schema, "required");
    const json_t *addl = json_object_get(schema, "additionalProperties");
    int rc = check_object_keywords(g, props, req, addl);
    if (rc) return rc;
    size_t n = props ? json_object_size(props) : 0;
    if ((rc = prim_use(g, "space"))) return rc;
    if (!n) return visit_map(g, props, addl, hint, out);
    if (addl && !json_is_false(addl))
        return gfail(g, "keyword 'additionalProperties' is supported only as false when "
                        "'properties' is given");
    const char **kv = calloc(n, sizeof *kv);
    bool *reqd = calloc(n, sizeof *reqd);
    if (!kv || !reqd) {
        free(kv);
        free(reqd);
        return goom(g);
    }
    const char *first;
    if (!(rc = property_rules(g, props, req, hint, kv, reqd)) &&
        !(rc = chain_properties(g, kv, reqd, n, hint, &first))) {
        sbuf b;
        sbuf_init(&b);
        sbuf_printf(&b, "\"{\" space %s \"}\" space", first);
        rc = body_result(g, &b, hint, out);
    }
    free(kv);
    free(reqd);
    return rc;
}

static int visit(gen *g, const json_t *schema, const char *hint, const char **out) {
    if (json_is_true(schema) || (json_is_object(schema) && !json_object_size(schema)))
        return prim_result(g, "value", out);
    if (json_is_false(schema)) return gfail(g, "schema 'false' matches nothing");
    if (!json_is_object(schema)) return gfail(g, "a schema must be an object or a boolean");
    if (g->depth >= JSON_SCHEMA_MAX_DEPTH)
        return gfail(g, "subschemas nested deeper than %d", JSON_SCHEMA_MAX_DEPTH);
    g->depth++;
    int rc, mask;
    if (json_object_get(schema, "$ref")) {
        rc = visit_ref(g, schema, out);
    } else if (json_object_get(schema, "enum") || json_object_get(schema, "const")) {
        rc = visit_values(g, schema, hint, out);
    } else if (json_object_get(schema, "anyOf")) {
        rc = visit_alternatives(g, schema, "anyOf", hint, out);
    } else if (json_object_get(schema, "oneOf")) {
        rc = visit_alternatives(g, schema, "oneOf", hint, out);
    } else if ((rc = type_mask(g, schema, &mask)) == 0) {
        if (!mask) { /* no type: inferred from the keywords, else any value */
            if (json_object_get(schema, "properties") ||
                json_object_get(schema, "additionalProperties") ||
                json_object_get(schema, "required"))
                mask = T_OBJ;
            else if (json_object_get(schema, "items") || json_object_get(schema, "minItems") ||
                     json_object_get(schema, "maxItems"))
                mask = T_ARR;
        }
        static const char *const extra[] = {"type"};
        if (!(rc = check_keys(g, schema, mask, extra, 1))) {
            if (!mask) {
                rc = prim_result(g, "value", out);
            } else {
                /* one alternative per type; the keywords of each apply to it */
                sbuf b;
                sbuf_init(&b);
                int n = 0;
                const char *last = NULL;
                for (int t = 0; t < 7 && !rc; t++) {
                    if (!(mask & (1 << t))) continue;
                    char h[96];
                    snprintf(h, sizeof h, "%.48s%s%s", hint, mask & (mask - 1) ? "-" : "",
                             mask & (mask - 1) ? TYPE_NAMES[t] : "");
                    switch (1 << t) {
                    case T_OBJ:
                        rc = visit_object(g, schema, h, &last);
                        break;
                    case T_ARR:
                        rc = visit_array(g, schema, h, &last);
                        break;
                    case T_STR:
                        rc = visit_string(g, schema, h, &last);
                        break;
                    case T_INT:
                        rc = visit_integer(g, schema, h, &last);
                        break;
                    case T_NUM:
                        rc = prim_result(g, "number", &last);
                        break;
                    case T_BOOL:
                        rc = prim_result(g, "boolean", &last);
                        break;
                    default:
                        rc = prim_result(g, "null", &last);
                        break;
                    }
                    if (!rc) sbuf_printf(&b, "%s%s", n++ ? " | " : "", last);
                }
                if (!rc && n == 1)
                    *out = last, sbuf_free(&b);
                else if (!rc)
                    rc = body_result(g, &b, hint, out);
                else
                    sbuf_free(&b);
            }
        }
    }
    g->depth--;
    return rc;
}

/* ---------------------------------------------------------------------------
 * Entry points
 * ------------------------------------------------------------------------- */

int json_schema_to_gbnf(const json_t *schema, sbuf *out, tps_err *err) {
    gen g = {.root = schema, .err = err};
    int rc = 0;
    const char *name = NULL;
    if (!schema) {
        rc = tps_fail(err, TPS_EINVAL, "json_schema: no schema");
        goto done;
    }
    if (!rule_add(&g, "root", NULL)) {
        rc = goom(&g);
        goto done;
    }
    if ((rc = visit(&g, schema, "root-value", &name))) goto done;
    if (!(g.rules[0].body = strdup(name))) {
        rc = goom(&g);
        goto done;
    }
    for (size_t i = 0; i < g.n_rules; i++)
        sbuf_printf(out, "%s ::= %s\n", g.rules[i].name, g.rules[i].body ? g.rules[i].body : "");
    if (sbuf_failed(out)) rc = goom(&g);
done:
    for (size_t i = 0; i < g.n_rules; i++) {
        free(g.rules[i].name);
        free(g.rules[i].body);
    }
    for (size_t i = 0; i < g.n_refs; i++)
        free(g.refs[i].ref);
    free(g.rules);
    free(g.refs);
    return rc;
}

int json_schema_compile(grammar **out, const json_t *schema, tps_err *err) {
    *out = NULL;
    sbuf b;
    sbuf_init(&b);
    int rc = json_schema_to_gbnf(schema, &b, err);
    if (!rc) {
        tps_err e2 = {{0}};
        rc = grammar_parse(out, b.p, b.len, &e2);
        if (rc) tps_fail(err, rc, "json_schema: the schema's grammar is refused: %s", e2.msg);
    }
    sbuf_free(&b);
    return rc;
}
