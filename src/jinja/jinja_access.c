/* Attribute and item lookup, as jinja2's sandboxed environment does it:
 * getattr falls back to the item and getitem to the attribute; strings,
 * dicts and lists expose only the methods that read them (a bound method
 * value, called in jinja_methods.c), the methods that would change a list
 * or dict are "unsafe" undefineds that raise SecurityError when called,
 * names starting with "_" are unsafe, anything else missing is undefined
 * (an error only when used); `loop`'s attributes. Not here: calling
 * methods (jinja_methods.c), slicing (jinja_eval.c). */
#include "jinja/jinja_internal.h"

#include <string.h>

static int64_t ival(jinja_val v) {
    return v.type == JINJA_INT ? v.u.i : (int64_t)v.u.b;
}

/* Byte offsets of code points start..end of a string (ASCII: themselves). */
size_t jv_cp_offset(jinja_val s, int64_t k) {
    size_t i = 0;
    for (int64_t j = 0; j < k && i < s.n; j++)
        utf8_next(s.u.s, s.n, &i);
    return i;
}

static const struct method {
    uint8_t type;
    const char *name;
    int id;
} METHODS[] = {
    {JINJA_STR, "startswith", M_STARTSWITH},
    {JINJA_STR, "endswith", M_ENDSWITH},
    {JINJA_STR, "strip", M_STRIP},
    {JINJA_STR, "lstrip", M_LSTRIP},
    {JINJA_STR, "rstrip", M_RSTRIP},
    {JINJA_STR, "split", M_SPLIT},
    {JINJA_STR, "rsplit", M_RSPLIT},
    {JINJA_STR, "lower", M_LOWER},
    {JINJA_STR, "upper", M_UPPER},
    {JINJA_STR, "title", M_TITLE},
    {JINJA_STR, "capitalize", M_CAPITALIZE},
    {JINJA_STR, "swapcase", M_SWAPCASE},
    {JINJA_STR, "replace", M_REPLACE},
    {JINJA_STR, "find", M_FIND},
    {JINJA_STR, "rfind", M_RFIND},
    {JINJA_STR, "index", M_INDEX},
    {JINJA_STR, "rindex", M_RINDEX},
    {JINJA_STR, "count", M_COUNT},
    {JINJA_STR, "join", M_JOIN},
    {JINJA_STR, "format", M_FORMAT},
    {JINJA_STR, "isalpha", M_ISALPHA},
    {JINJA_STR, "isdigit", M_ISDIGIT},
    {JINJA_STR, "isalnum", M_ISALNUM},
    {JINJA_STR, "isspace", M_ISSPACE},
    {JINJA_STR, "islower", M_ISLOWER},
    {JINJA_STR, "isupper", M_ISUPPER},
    {JINJA_STR, "splitlines", M_SPLITLINES},
    {JINJA_STR, "partition", M_PARTITION},
    {JINJA_STR, "rpartition", M_RPARTITION},
    {JINJA_STR, "center", M_CENTER},
    {JINJA_STR, "ljust", M_LJUST},
    {JINJA_STR, "rjust", M_RJUST},
    {JINJA_STR, "zfill", M_ZFILL},
    {JINJA_STR, "removeprefix", M_REMOVEPREFIX},
    {JINJA_STR, "removesuffix", M_REMOVESUFFIX},
    {JINJA_MAP, "get", M_GET},
    {JINJA_MAP, "items", M_ITEMS},
    {JINJA_MAP, "keys", M_KEYS},
    {JINJA_MAP, "values", M_VALUES},
    {JINJA_MAP, "copy", M_COPY},
    {JINJA_LIST, "count", M_LCOUNT},
    {JINJA_LIST, "index", M_LINDEX},
};

/* Methods that change their object: the immutable sandbox refuses them. */
static bool mutating(jinja_val obj, jinja_val name) {
    static const char *const list_m[] = {"append",  "extend", "insert", "pop",         "remove",
                                         "reverse", "sort",   "clear",  "__setitem__", NULL};
    static const char *const dict_m[] = {"clear", "pop", "popitem", "setdefault", "update", NULL};
    const char *const *m = obj.type == JINJA_LIST ? list_m : obj.type == JINJA_MAP ? dict_m : NULL;
    for (size_t i = 0; m && m[i]; i++)
        if (jv_str_eq(name, m[i])) return true;
    return false;
}

static jinja_val bound(jctx *c, jinja_val self, int id) {
    jinja_val *p = jx_alloc(c, sizeof *p);
    *p = self;
    return (jinja_val){.type = JINJA_FUNC, .sub = JFN_METHOD, .aux = (uint16_t)id, .u.p = p};
}

static jinja_val loop_attr(jctx *c, jinja_val obj, jinja_val name) {
    const jloop *l = obj.u.p;
    int64_t i = l->i, n = l->n;
    if (jv_str_eq(name, "index")) return jinja_int(i + 1);
    if (jv_str_eq(name, "index0")) return jinja_int(i);
    if (jv_str_eq(name, "revindex")) return jinja_int(n - i);
    if (jv_str_eq(name, "revindex0")) return jinja_int(n - i - 1);
    if (jv_str_eq(name, "first")) return jinja_bool(i == 0);
    if (jv_str_eq(name, "last")) return jinja_bool(i == n - 1);
    if (jv_str_eq(name, "length")) return jinja_int(n);
    if (jv_str_eq(name, "depth")) return jinja_int(l->depth0 + 1);
    if (jv_str_eq(name, "depth0")) return jinja_int(l->depth0);
    if (jv_str_eq(name, "previtem"))
        return i > 0 ? l->items[i - 1] : jv_undef(JUNDEF_PLAIN, "there is no previous item", 25, 0);
    if (jv_str_eq(name, "nextitem"))
        return i + 1 < n ? l->items[i + 1] : jv_undef(JUNDEF_PLAIN, "there is no next item", 21, 0);
    if (jv_str_eq(name, "cycle") || jv_str_eq(name, "changed"))
        return (jinja_val){.type = JINJA_FUNC,
                           .sub = jv_str_eq(name, "cycle") ? JFN_LOOP_CYCLE : JFN_LOOP_CHANGED,
                           .u.p = l};
    return jv_undef(JUNDEF_ATTR, name.u.s, name.n, obj.type);
}

jinja_val jx_getattr(jctx *c, jinja_val obj, jinja_val name) {
    if (obj.type == JINJA_UNDEFINED) jv_undef_fail(c, obj);
    int owner = obj.type | obj.sub << 8;
    if (obj.type == JINJA_LOOP) return loop_attr(c, obj, name);
    if (name.n && name.u.s[0] == '_') return jv_undef(JUNDEF_UNSAFE, name.u.s, name.n, owner);
    if (obj.type == JINJA_MAP && obj.sub == JMAP_NAMESPACE) {
        jinja_val v;
        return jv_map_get(c, obj.u.m, name, &v) ? v
                                                : jv_undef(JUNDEF_ATTR, name.u.s, name.n, owner);
    }
    int type = obj.type;
    for (size_t i = 0; i < sizeof METHODS / sizeof METHODS[0]; i++)
        if (METHODS[i].type == type && jv_str_eq(name, METHODS[i].name))
            return bound(c, obj, METHODS[i].id);
    if (mutating(obj, name)) return jv_undef(JUNDEF_UNSAFE, name.u.s, name.n, owner);
    jinja_val v;
    if (obj.type == JINJA_MAP && jv_map_get(c, obj.u.m, name, &v)) return v;
    return jv_undef(JUNDEF_ATTR, name.u.s, name.n, owner);
}

/* The undefined a missing attribute or item is: "'dict object' has no
 * attribute 'x'" for names, "has no element 5" for other keys. */
static jinja_val owner_undef(jctx *c, jinja_val obj, jinja_val name) {
    jinja_val key = name.type == JINJA_STR ? name : jv_to_str(c, name);
    return jv_undef(name.type == JINJA_STR ? JUNDEF_ATTR : JUNDEF_ITEM, key.u.s, key.n,
                    obj.type | obj.sub << 8);
}

jinja_val jx_getitem(jctx *c, jinja_val obj, jinja_val key) {
    if (obj.type == JINJA_UNDEFINED) jv_undef_fail(c, obj);
    if ((obj.type == JINJA_STR || (obj.type == JINJA_LIST && obj.sub != JLIST_GEN)) &&
        (key.type == JINJA_INT || key.type == JINJA_BOOL)) {
        if (obj.type == JINJA_STR) jx_work(c, obj.n); /* scanned for its code points */
        bool ascii = obj.type == JINJA_STR && utf8_ascii(obj.u.s, obj.n);
        int64_t len = obj.type == JINJA_LIST ? obj.u.l->n : ascii ? obj.n : jv_len(c, obj);
        int64_t i = ival(key);
        if (i < 0) i += len;
        if (i < 0 || i >= len) return owner_undef(c, obj, key);
        if (obj.type == JINJA_LIST) return obj.u.l->v[i];
        size_t x = ascii ? (size_t)i : jv_cp_offset(obj, i), y = x;
        utf8_next(obj.u.s, obj.n, &y);
        return (jinja_val){.type = JINJA_STR, .n = (uint32_t)(y - x), .u.s = obj.u.s + x};
    }
    jinja_val v;
    if (obj.type == JINJA_MAP && obj.sub != JMAP_NAMESPACE && jv_map_get(c, obj.u.m, key, &v))
        return v;
    if (key.type == JINJA_STR) {
        v = jx_getattr(c, obj, key);
        if (v.type != JINJA_UNDEFINED || v.sub == JUNDEF_UNSAFE) return v;
    }
    return owner_undef(c, obj, key);
}
