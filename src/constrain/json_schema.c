/* JSON schema -> GBNF (json_schema.h). A recursive walk over the schema
 * that turns every subschema into a GBNF rule, named after where it sits
 * ("root-address-city"), plus a fixed set of primitive rules (string,
 * number, value, ...) added when first used. $refs are memoized by their
 * text, so recursive schemas become recursive rules.
 *
 * Not here: the rule table, keyword checks and digit patterns the walk
 * uses (json_schema_gen.c), parsing the GBNF (grammar_parse.c),
 * validating instances. */
#include "constrain/json_schema_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------
 * Visits: each turns one subschema into a rule and sets *out to its name
 * ------------------------------------------------------------------------- */

static int visit(gen *g, const json_t *schema, const char *hint, const char **out);

static int visit_child(gen *g, const json_t *schema, const char *seg, const char *hint,
                       const char **out) {
    size_t old = js_path_push(g, seg);
    int rc = visit(g, schema, hint, out);
    if (!rc) js_path_pop(g, old);
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
        if (!(*mask = js_type_bit(json_string_value(t))))
            return js_gfail(g, "type '%s' is not a JSON schema type", json_string_value(t));
        return 0;
    }
    size_t i;
    json_t *e;
    if (!json_is_array(t) || !json_array_size(t))
        return js_gfail(g, "'type' must be a type name or a list of them");
    json_array_foreach(t, i, e) {
        int bit = json_is_string(e) ? js_type_bit(json_string_value(e)) : 0;
        if (!bit) return js_gfail(g, "'type' entry %zu is not a JSON schema type", i);
        *mask |= bit;
    }
    return 0;
}

/* enum and const: the listed JSON values, in compact form, of the types
 * the schema allows. */
static int visit_values(gen *g, const json_t *schema, const char *hint, const char **out) {
    static const char *const extra[] = {"enum", "const", "type"};
    int mask, rc = type_mask(g, schema, &mask);
    if (rc || (rc = js_check_keys(g, schema, 0, extra, 3))) return rc;
    json_t *c = json_object_get(schema, "const"), *en = json_object_get(schema, "enum");
    if (c && en) return js_gfail(g, "'const' and 'enum' together are not supported");
    if (en && (!json_is_array(en) || !json_array_size(en)))
        return js_gfail(g, "'enum' must be a non-empty array");
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
            return js_goom(g);
        }
        if (kept++) sbuf_adds(&b, " | ");
        js_gbnf_lit(&b, txt, strlen(txt));
        free(txt);
    }
    sbuf_adds(&b, ") space");
    if (!kept) {
        sbuf_free(&b);
        return js_gfail(g, "no '%s' value has the schema's 'type'", c ? "const" : "enum");
    }
    if ((rc = js_prim_use(g, "space"))) {
        sbuf_free(&b);
        return rc;
    }
    return js_body_result(g, &b, hint, out);
}

static int visit_alternatives(gen *g, const json_t *schema, const char *key, const char *hint,
                              const char **out) {
    const char *const extra[] = {key};
    int rc = js_check_keys(g, schema, 0, extra, 1);
    if (rc) return rc;
    const json_t *list = json_object_get(schema, key);
    if (!json_is_array(list) || !json_array_size(list))
        return js_gfail(g, "'%s' must be a non-empty array", key);
    size_t old = js_path_push(g, key);
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
    js_path_pop(g, old);
    return js_body_result(g, &b, hint, out);
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
    int rc = js_check_keys(g, schema, 0, extra, 1);
    if (rc) return rc;
    const json_t *r = json_object_get(schema, "$ref");
    if (!json_is_string(r)) return js_gfail(g, "'$ref' must be a string");
    const char *ref = json_string_value(r);
    for (size_t i = 0; i < g->n_refs; i++)
        if (!strcmp(g->refs[i].ref, ref)) {
            *out = g->refs[i].name;
            return 0;
        }
    if (ref[0] != '#')
        return js_gfail(g, "$ref '%s': only local references ('#/...') are supported", ref);
    const json_t *target = resolve(g->root, ref);
    if (!target) return js_gfail(g, "$ref '%s' does not resolve", ref);
    /* reserve the rule first, so that a recursive schema finds it */
    const char *slash = strrchr(ref, '/');
    char hint[96];
    snprintf(hint, sizeof hint, "def-%s", slash && slash[1] ? slash + 1 : "root");
    const char *name = js_rule_add(g, hint, NULL);
    if (!name) return js_goom(g);
    if (g->n_refs == g->cap_refs) {
        size_t cap = g->cap_refs ? g->cap_refs * 2 : 8;
        jref *p = realloc(g->refs, cap * sizeof *p);
        if (!p) return js_goom(g);
        g->refs = p, g->cap_refs = cap;
    }
    if (!(g->refs[g->n_refs].ref = strdup(ref))) return js_goom(g);
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
    jrule *jr = js_rule_find(g, name);
    if (!(jr->body = strdup(body))) return js_goom(g);
    *out = name;
    return 0;
}

static int visit_string(gen *g, const json_t *schema, const char *hint, const char **out) {
    uint64_t min = 0, max = 0;
    bool has_min, has_max;
    int rc = js_get_count(g, schema, "minLength", GRAMMAR_MAX_REPEAT, &min, &has_min);
    if (!rc) rc = js_get_count(g, schema, "maxLength", GRAMMAR_MAX_REPEAT, &max, &has_max);
    if (rc) return rc;
    json_t *pat = json_object_get(schema, "pattern");
    if (pat) {
        const char *s = json_is_string(pat) ? json_string_value(pat) : NULL;
        if (!s || (strcmp(s, "") && strcmp(s, ".*") && strcmp(s, "^.*") && strcmp(s, ".*$") &&
                   strcmp(s, "^.*$")))
            return js_gfail(g,
                            "keyword 'pattern' is supported only when it matches everything "
                            "('.*'); got '%.80s'",
                            s ? s : "(not a string)");
    }
    json_t *fmt = json_object_get(schema, "format");
    if (fmt) {
        const char *f = json_is_string(fmt) ? json_string_value(fmt) : "";
        if (strcmp(f, "date") && strcmp(f, "time") && strcmp(f, "date-time") && strcmp(f, "uuid"))
            return js_gfail(g, "format '%.80s' is not supported (date, time, date-time, uuid are)",
                            f);
        if (has_min || has_max)
            return js_gfail(g, "'format' together with 'minLength'/'maxLength' is not supported");
        char name[32];
        snprintf(name, sizeof name, "%s-string", f);
        return js_prim_result(g, name, out);
    }
    if (!has_min && !has_max) return js_prim_result(g, "string", out);
    if (has_max && max < min) return js_gfail(g, "'minLength' is larger than 'maxLength'");
    if ((rc = js_prim_use(g, "char")) || (rc = js_prim_use(g, "space"))) return rc;
    sbuf b;
    sbuf_init(&b);
    if (has_max)
        sbuf_printf(&b, "\"\\\"\" char{%llu,%llu} \"\\\"\" space", (unsigned long long)min,
                    (unsigned long long)max);
    else
        sbuf_printf(&b, "\"\\\"\" char{%llu,} \"\\\"\" space", (unsigned long long)min);
    return js_body_result(g, &b, hint, out);
}

static int visit_integer(gen *g, const json_t *schema, const char *hint, const char **out) {
    int64_t lo = 0, hi = 0;
    bool has_lo, has_hi;
    int rc = js_get_bound(g, schema, false, &lo, &has_lo);
    if (!rc) rc = js_get_bound(g, schema, true, &hi, &has_hi);
    if (rc) return rc;
    if (!has_lo && !has_hi) return js_prim_result(g, "integer", out);
    if (has_lo && has_hi && lo > hi) return js_gfail(g, "the minimum is larger than the maximum");
    if ((rc = js_prim_use(g, "space"))) return rc;
    sbuf b;
    sbuf_init(&b);
    sbuf_adds(&b, "(");
    if (has_lo && has_hi) {
        if (lo < 0) {
            sbuf_adds(&b, "\"-\" ");
            js_uint_range(&b, hi >= 0 ? 1 : (uint64_t)-hi, (uint64_t)-lo);
        }
        if (hi >= 0) {
            if (lo < 0) sbuf_adds(&b, " | ");
            js_uint_range(&b, lo > 0 ? (uint64_t)lo : 0, (uint64_t)hi);
        }
    } else if (has_lo) {
        if (lo >= 0) {
            js_uint_at_least(&b, (uint64_t)lo);
        } else {
            sbuf_adds(&b, "\"-\" ");
            js_uint_range(&b, 1, (uint64_t)-lo);
            sbuf_adds(&b, " | integral-part");
            if ((rc = js_prim_use(g, "integral-part"))) goto fail;
        }
    } else {
        if (hi >= 0) {
            sbuf_adds(&b, "\"-\" [1-9] [0-9]{0,15} | ");
            js_uint_range(&b, 0, (uint64_t)hi);
        } else {
            sbuf_adds(&b, "\"-\" ");
            js_uint_at_least(&b, (uint64_t)-hi);
        }
    }
    sbuf_adds(&b, ") space");
    return js_body_result(g, &b, hint, out);
fail:
    sbuf_free(&b);
    return rc;
}

static int visit_array(gen *g, const json_t *schema, const char *hint, const char **out) {
    uint64_t min = 0, max = 0;
    bool has_max;
    int rc = js_get_count(g, schema, "minItems", GRAMMAR_MAX_REPEAT, &min, NULL);
    if (!rc) rc = js_get_count(g, schema, "maxItems", GRAMMAR_MAX_REPEAT, &max, &has_max);
    if (rc) return rc;
    if (has_max && max < min) return js_gfail(g, "'minItems' is larger than 'maxItems'");
    const char *item;
    json_t *items = json_object_get(schema, "items");
    char h[96];
    snprintf(h, sizeof h, "%.48s-item", hint);
    if (items)
        rc = visit_child(g, items, "items", h, &item);
    else
        rc = js_prim_result(g, "value", &item);
    if (rc || (rc = js_prim_use(g, "space"))) return rc;
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
    return js_body_result(g, &b, hint, out);
}

/* The shapes of properties, required and additionalProperties; every
 * required name must be a property. */
static int check_object_keywords(gen *g, const json_t *props, const json_t *req,
                                 const json_t *addl) {
    if (props && !json_is_object(props)) return js_gfail(g, "'properties' must be an object");
    if (req && !json_is_array(req)) return js_gfail(g, "'required' must be an array");
    if (addl && !json_is_boolean(addl) && !json_is_object(addl))
        return js_gfail(g, "'additionalProperties' must be a boolean or a schema");
    size_t i;
    json_t *r;
    json_array_foreach(req, i, r) {
        if (!json_is_string(r)) return js_gfail(g, "'required' entry %zu is not a string", i);
        if (!props || !json_object_get(props, json_string_value(r)))
            return js_gfail(g, "required property '%s' is not in 'properties'",
                            json_string_value(r));
    }
    return 0;
}

/* An object without properties: any object, the empty object, or a map of
 * string keys to values of the additionalProperties schema. */
static int visit_map(gen *g, const json_t *props, const json_t *addl, const char *hint,
                     const char **out) {
    if ((!props && !addl) || json_is_true(addl)) return js_prim_result(g, "object", out);
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
            (rc = js_prim_use(g, "string"))) {
            sbuf_free(&b);
            return rc;
        }
        sbuf_printf(&b,
                    "\"{\" space ( string \":\" space %s (\",\" space string \":\" space %s)* "
                    ")? \"}\" space",
                    val, val);
    }
    return js_body_result(g, &b, hint, out);
}

/* kv[i]: the rule for property i's key and value; reqd[i]: whether it is
 * required. */
static int property_rules(gen *g, const json_t *props, const json_t *req, const char *hint,
                          const char **kv, bool *reqd) {
    size_t old = js_path_push(g, "properties");
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
        js_gbnf_lit(&t, b.p, b.len);
        sbuf_printf(&t, " space \":\" space %s", val);
        sbuf_free(&b);
        snprintf(h, sizeof h, "%.48s-%.48s-kv", hint, key);
        if ((rc = js_body_result(g, &t, h, &kv[i]))) return rc;
        i++;
    }
    js_path_pop(g, old);
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
        if ((rc = js_body_result(g, &b, h, first))) return rc;
        /* rest_j */
        sbuf_init(&b);
        sbuf_printf(&b, "%s\",\" space %s%s %s", reqd[j] ? "" : "(", kv[j], reqd[j] ? "" : ")?",
                    rest ? rest : "");
        snprintf(h, sizeof h, "%.48s-rest-%zu", hint, j);
        if ((rc = js_body_result(g, &b, h, &rest))) return rc;
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
    if ((rc = js_prim_use(g, "space"))) return rc;
    if (!n) return visit_map(g, props, addl, hint, out);
    if (addl && !json_is_false(addl))
        return js_gfail(g, "keyword 'additionalProperties' is supported only as false when "
                           "'properties' is given");
    const char **kv = calloc(n, sizeof *kv);
    bool *reqd = calloc(n, sizeof *reqd);
    if (!kv || !reqd) {
        free(kv);
        free(reqd);
        return js_goom(g);
    }
    const char *first;
    if (!(rc = property_rules(g, props, req, hint, kv, reqd)) &&
        !(rc = chain_properties(g, kv, reqd, n, hint, &first))) {
        sbuf b;
        sbuf_init(&b);
        sbuf_printf(&b, "\"{\" space %s \"}\" space", first);
        rc = js_body_result(g, &b, hint, out);
    }
    free(kv);
    free(reqd);
    return rc;
}

/* The rule for schema as type t (the bit 1 << t): object, array, string
 * and integer with their keywords; number, boolean and null the primitive
 * of that name. */
static int visit_type(gen *g, const json_t *schema, int t, const char *hint, const char **out) {
    static int (*const VISIT[7])(gen *, const json_t *, const char *, const char **) = {
        visit_object, visit_array, visit_string, visit_integer};
    return VISIT[t] ? VISIT[t](g, schema, hint, out) : js_prim_result(g, js_type_names[t], out);
}

static int visit(gen *g, const json_t *schema, const char *hint, const char **out) {
    if (json_is_true(schema) || (json_is_object(schema) && !json_object_size(schema)))
        return js_prim_result(g, "value", out);
    if (json_is_false(schema)) return js_gfail(g, "schema 'false' matches nothing");
    if (!json_is_object(schema)) return js_gfail(g, "a schema must be an object or a boolean");
    if (g->depth >= JSON_SCHEMA_MAX_DEPTH)
        return js_gfail(g, "subschemas nested deeper than %d", JSON_SCHEMA_MAX_DEPTH);
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
        if (!(rc = js_check_keys(g, schema, mask, extra, 1))) {
            if (!mask) {
                rc = js_prim_result(g, "value", out);
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
                             mask & (mask - 1) ? js_type_names[t] : "");
                    rc = visit_type(g, schema, t, h, &last);
                    if (!rc) sbuf_printf(&b, "%s%s", n++ ? " | " : "", last);
                }
                if (!rc && n == 1)
                    *out = last, sbuf_free(&b);
                else if (!rc)
                    rc = js_body_result(g, &b, hint, out);
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
    return json_schema_to_gbnf_named(schema, NULL, out, err);
}

int json_schema_to_gbnf_named(const json_t *schema, const char *name, sbuf *out, tps_err *err) {
    gen g = {.root = schema, .err = err};
    int rc = 0;
    const char *top = NULL;
    if (!schema) {
        rc = tps_fail(err, TPS_EINVAL, "json_schema: no schema");
        goto done;
    }
    if (!js_rule_add(&g, name ? name : "root", NULL)) {
        rc = js_goom(&g);
        goto done;
    }
    g.prefix = name;
    if ((rc = visit(&g, schema, name ? "value" : "root-value", &top))) goto done;
    if (!(g.rules[0].body = strdup(top))) {
        rc = js_goom(&g);
        goto done;
    }
    for (size_t i = 0; i < g.n_rules; i++)
        sbuf_printf(out, "%s ::= %s\n", g.rules[i].name, g.rules[i].body ? g.rules[i].body : "");
    if (sbuf_failed(out)) rc = js_goom(&g);
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
