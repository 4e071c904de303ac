/* Values as Python sees them: construction of lists in the run's arena,
 * truth, ordering (<, bounded in depth like == and charged
 * its work), the comparison operators (`in` too, one rule for expressions
 * and the eq/lt/... tests), len(), what a for loop iterates, and the
 * errors an undefined value raises when used. Not here: == and dicts
 * (jinja_dict.c), printing (jinja_print.c), the other operators
 * (jinja_eval.c). */
#include "jinja/jinja_internal.h"

#include <string.h>

jinja_val jv_list(jctx *c, uint32_t cap, int sub) {
    struct jinja_list *l = jx_alloc(c, sizeof *l);
    l->n = 0;
    l->cap = cap;
    l->consumed = false;
    l->v = cap ? jx_alloc(c, (size_t)cap * sizeof *l->v) : NULL;
    return (jinja_val){.type = JINJA_LIST, .sub = (uint8_t)sub, .u.l = l};
}

void jv_push(jctx *c, jinja_val list, jinja_val v) {
    struct jinja_list *l = list.u.l;
    if (l->n == l->cap) {
        uint32_t cap = l->cap ? l->cap * 2 : 4;
        l->v = jx_regrow(c, l->v, l->n, cap, sizeof *l->v);
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

jinja_val jv_undef(int sub, const char *s, size_t n, int aux) {
    return (jinja_val){.type = JINJA_UNDEFINED,
                       .sub = (uint8_t)sub,
                       .aux = (uint16_t)aux,
                       .n = (uint32_t)n,
                       .u.s = s};
}

bool jv_truthy(jinja_val v) {
    switch (v.type) {
    case JINJA_UNDEFINED:
    case JINJA_NONE:
        return false;
    case JINJA_BOOL:
        return v.u.b;
    case JINJA_INT:
        return v.u.i != 0;
    case JINJA_FLOAT:
        return v.u.f != 0.0;
    case JINJA_STR:
        return v.n > 0;
    case JINJA_LIST:
        return v.sub == JLIST_GEN || v.u.l->n > 0;
    case JINJA_MAP:
        return v.sub == JMAP_NAMESPACE || v.u.m->n > 0;
    default:
        return true;
    }
}

static int64_t as_int(jinja_val v) {
    return v.type == JINJA_INT ? v.u.i : (int64_t)v.u.b;
}

bool jv_str_eq(jinja_val v, const char *s) {
    size_t n = strlen(s);
    return v.type == JINJA_STR && v.n == n && !memcmp(v.u.s, s, n);
}

static bool is_tuple(jinja_val v) {
    return v.sub == JLIST_TUPLE;
}

_Noreturn void jv_undef_fail(jctx *c, jinja_val u) {
    jinja_val owner = {.type = (uint8_t)(u.aux & 0xFF), .sub = (uint8_t)(u.aux >> 8)};
    const char *tn = owner.type == JINJA_NONE ? "None" : jv_type_name(owner);
    switch (u.sub) {
    case JUNDEF_NAME:
        jx_fail(c, JINJA_ERROR, "'%.*s' is undefined", (int)u.n, u.u.s);
    case JUNDEF_ATTR:
        jx_fail(c, JINJA_ERROR, "'%s%s' has no attribute '%.*s'", tn,
                owner.type == JINJA_NONE ? "" : " object", (int)u.n, u.u.s);
    case JUNDEF_ITEM:
        jx_fail(c, JINJA_ERROR, "'%s%s' has no element %.*s", tn,
                owner.type == JINJA_NONE ? "" : " object", (int)u.n, u.u.s);
    case JUNDEF_UNSAFE:
        jx_fail(c, JINJA_ERROR, "access to attribute '%.*s' of '%s' object is unsafe.", (int)u.n,
                u.u.s, tn);
    default:
        jx_fail(c, JINJA_ERROR, "an undefined value was used");
    }
}

/* Python's list <: the first pair that differs (==) decides (<) */
static int cmp_list(jctx *c, jinja_val a, jinja_val b) {
    uint32_t n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
    jx_deeper(c, "values compared nested");
    int r = a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
    for (uint32_t i = 0; i < n; i++)
        if (!jv_eq(c, a.u.l->v[i], b.u.l->v[i])) {
            r = jv_cmp(c, a.u.l->v[i], b.u.l->v[i]);
            break;
        }
    c->depth--;
    return r;
}

int jv_cmp(jctx *c, jinja_val a, jinja_val b) {
    jx_work(c, JX_WORK_VALUE);
    if (a.type == JINJA_UNDEFINED) jv_undef_fail(c, a);
    if (b.type == JINJA_UNDEFINED) jv_undef_fail(c, b);
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a.type != JINJA_FLOAT && b.type != JINJA_FLOAT)
            return as_int(a) < as_int(b) ? -1 : as_int(a) > as_int(b);
        double x = jv_num(a), y = jv_num(b);
        return x < y ? -1 : x > y;
    }
    if (a.type == JINJA_STR && b.type == JINJA_STR) {
        jx_work(c, a.n < b.n ? a.n : b.n);
        int r = memcmp(a.u.s, b.u.s, a.n < b.n ? a.n : b.n);
        return r ? r : a.n < b.n ? -1 : a.n > b.n;
    }
    if (a.type == JINJA_LIST && b.type == JINJA_LIST && is_tuple(a) == is_tuple(b) &&
        a.sub != JLIST_GEN && b.sub != JLIST_GEN)
        return cmp_list(c, a, b);
    jx_fail(c, JINJA_ERROR, "'<' not supported between instances of '%s' and '%s'", jv_type_name(a),
            jv_type_name(b));
}

/* The code points of a string as one-character strings. */
static jinja_val chars(jctx *c, jinja_val s) {
    jx_work(c, s.n);
    jinja_val out = jv_list(c, s.n, JLIST_LIST);
    for (size_t i = 0; i < s.n;) {
        size_t at = i;
        utf8_next(s.u.s, s.n, &i);
        out.u.l->v[out.u.l->n++] =
            (jinja_val){.type = JINJA_STR, .n = (uint32_t)(i - at), .u.s = s.u.s + at};
    }
    return out;
}

jinja_val jv_iter(jctx *c, jinja_val v) {
    switch (v.type) {
    case JINJA_LIST:
        if (v.sub == JLIST_GEN) { /* once: a second pass finds it empty */
            jinja_val once = jv_list(c, 0, JLIST_LIST);
            if (!v.u.l->consumed) *once.u.l = *v.u.l;
            once.u.l->consumed = false;
            v.u.l->consumed = true;
            return once;
        }
        return v;
    case JINJA_UNDEFINED:
        return jv_list(c, 0, JLIST_LIST);
    case JINJA_STR:
        return chars(c, v);
    case JINJA_MAP: {
        if (v.sub == JMAP_NAMESPACE) break;
        jinja_val keys = jv_list(c, v.u.m->n, JLIST_LIST);
        if (v.u.m->n) memcpy(keys.u.l->v, v.u.m->k, v.u.m->n * sizeof *v.u.m->k);
        keys.u.l->n = v.u.m->n;
        return keys;
    }
    default:
        break;
    }
    jx_fail(c, JINJA_ERROR, "'%s' object is not iterable", jv_type_name(v));
}

static bool contains(jctx *c, jinja_val item, jinja_val in) {
    switch (in.type) {
    case JINJA_UNDEFINED:
        return false;
    case JINJA_STR:
        if (item.type != JINJA_STR)
            jx_fail(c, JINJA_ERROR, "'in <string>' requires string as left operand, not %s",
                    jv_type_name(item));
        jx_work(c, (uint64_t)in.n + item.n); /* memmem is linear (two-way) */
        return item.n == 0 || memmem(in.u.s, in.n, item.u.s, item.n) != NULL;
    case JINJA_LIST: {
        jinja_val items = jv_iter(c, in);
        for (uint32_t i = 0; i < items.u.l->n; i++)
            if (jv_eq(c, item, items.u.l->v[i])) return true;
        return false;
    }
    case JINJA_MAP: {
        jinja_val v;
        if (in.sub == JMAP_NAMESPACE) break;
        jv_hash_or_fail(c, item); /* `[1] in d`: TypeError, as Python's */
        return jv_map_get(c, in.u.m, item, &v);
    }
    default:
        break;
    }
    jx_fail(c, JINJA_ERROR, "argument of type '%s' is not iterable", jv_type_name(in));
}

bool jv_compare(jctx *c, int op, jinja_val a, jinja_val b) {
    switch (op) {
    case OP_EQ:
        return jv_eq(c, a, b);
    case OP_NE:
        return !jv_eq(c, a, b);
    case OP_IN:
        return contains(c, a, b);
    case OP_NOTIN:
        return !contains(c, a, b);
    case OP_LT:
        return jv_cmp(c, a, b) < 0;
    case OP_LTEQ:
        return jv_cmp(c, a, b) <= 0;
    case OP_GT:
        return jv_cmp(c, a, b) > 0;
    default:
        return jv_cmp(c, a, b) >= 0;
    }
}

int64_t jv_len(jctx *c, jinja_val v) {
    switch (v.type) {
    case JINJA_STR:
        jx_work(c, v.n);
        return (int64_t)utf8_count(v.u.s, v.n);
    case JINJA_LIST:
        if (v.sub == JLIST_GEN) break;
        return v.u.l->n;
    case JINJA_MAP:
        if (v.sub == JMAP_NAMESPACE) break;
        return v.u.m->n;
    case JINJA_UNDEFINED:
        return 0;
    case JINJA_LOOP:
        return ((const jloop *)v.u.p)->n;
    default:
        break;
    }
    jx_fail(c, JINJA_ERROR, "object of type '%s' has no len()", jv_type_name(v));
}

/* ---------------------------------------------------------------------------
 * Arguments of builtins
 * ------------------------------------------------------------------------- */

bool jx_given(jinja_val v) {
    return !(v.type == JINJA_UNDEFINED && v.sub == JUNDEF_MISSING);
}

void jx_args(jctx *c, const jargs *a, const char *fn, const char *const *names, jinja_val *out) {
    size_t n = 0;
    while (names[n])
        n++;
    for (size_t i = 0; i < n; i++)
        out[i] = jv_undef(JUNDEF_MISSING, "", 0, 0);
    if (a->n > n)
        jx_fail(c, JINJA_ERROR, "%s() takes at most %zu argument(s) (%u given)", fn, n, a->n);
    for (uint32_t i = 0; i < a->n; i++)
        out[i] = a->v[i];
    for (uint32_t k = 0; k < a->nkw; k++) {
        size_t i = 0;
        while (i < n && !jv_str_eq(a->kwn[k], names[i]))
            i++;
        if (i == n)
            jx_fail(c, JINJA_ERROR, "%s() got an unexpected keyword argument '%.*s'", fn,
                    (int)a->kwn[k].n, a->kwn[k].u.s);
        if (jx_given(out[i]))
            jx_fail(c, JINJA_ERROR, "%s() got multiple values for argument '%s'", fn, names[i]);
        out[i] = a->kwv[k];
    }
}

void jx_no_args(jctx *c, const jargs *a, const char *fn) {
    static const char *const none[] = {NULL};
    jinja_val unused[1];
    jx_args(c, a, fn, none, unused);
}

int64_t jx_int_arg(jctx *c, jinja_val v, int64_t dflt, const char *what) {
    if (!jx_given(v)) return dflt;
    if (v.type == JINJA_INT) return v.u.i;
    if (v.type == JINJA_BOOL) return v.u.b;
    if (v.type == JINJA_UNDEFINED) jv_undef_fail(c, v);
    jx_fail(c, JINJA_ERROR, "%s: '%s' object cannot be interpreted as an integer", what,
            jv_type_name(v));
}
