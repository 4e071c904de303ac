/* jinja2's filters over sequences and mappings (length, list, first, last,
 * join, reverse, sort, unique, min, max, sum, map, select, reject,
 * selectattr, rejectattr, dictsort, items, batch, groupby, attr), with
 * jinja2's attribute paths ("a.b", "a.0") and case-insensitive keys; and
 * the filter table every filter is found in. jinja2 returns generators
 * from map/select/...; here they are lists (chat templates pass them on
 * to list, join or a for loop). Not here: filters of single values
 * (jinja_filters.c), the filters' names (jinja_names.c). */
#include "jinja/jinja_internal.h"
#include "jinja/jinja_filters.h"

#include <stdlib.h>
#include <string.h>

/* The piece of s from *i to the next sep (or the end); *i moves past that
 * sep. Looped while *i <= s.n, "a,,b" gives "a", "" and "b". */
static jinja_val piece(jinja_val s, char sep, size_t *i) {
    size_t j = *i;
    while (j < s.n && s.u.s[j] != sep)
        j++;
    jinja_val out = {.type = JINJA_STR, .n = (uint32_t)(j - *i), .u.s = s.u.s + *i};
    *i = j + 1;
    return out;
}

/* jinja2's make_attrgetter: "a.b.0" -> getitem(getitem(getitem(v, "a"),
 * "b"), 0); a default (not None) replaces an undefined after each step */
static jinja_val attr_path(jctx *c, jinja_val v, jinja_val path, jinja_val dflt) {
    bool has_default = jx_given(dflt) && dflt.type != JINJA_NONE;
    if (path.type != JINJA_STR) {
        v = jx_getitem(c, v, path);
        return has_default && v.type == JINJA_UNDEFINED ? dflt : v;
    }
    for (size_t i = 0; i <= path.n;) {
        jinja_val part = piece(path, '.', &i);
        bool digits = part.n > 0;
        int64_t k = 0;
        for (size_t q = 0; q < part.n && digits; q++) {
            digits = part.u.s[q] >= '0' && part.u.s[q] <= '9';
            k = k * 10 + (part.u.s[q] - '0');
        }
        v = jx_getitem(c, v, digits ? jinja_int(k) : part);
        if (has_default && v.type == JINJA_UNDEFINED) v = dflt;
    }
    return v;
}

/* jinja2's ignore_case postprocess: a string lowered, anything else as it
 * is (a list's strings are not: sorting lists compares them as they are) */
static jinja_val fold(jctx *c, jinja_val v, bool case_sensitive) {
    return !case_sensitive && v.type == JINJA_STR ? js_case(c, v, 'l') : v;
}

/* make_multi_attrgetter (sort): "a,b" -> the list [a, b], each part folded */
static jinja_val multi_attr(jctx *c, jinja_val v, jinja_val attrs, bool cs) {
    if (attrs.type != JINJA_STR || !memchr(attrs.u.s, ',', attrs.n))
        return fold(c, attr_path(c, v, attrs, attrs), cs);
    jinja_val out = jv_list(c, 2, JLIST_LIST);
    for (size_t i = 0; i <= attrs.n;) {
        jinja_val one = piece(attrs, ',', &i);
        jv_push(c, out, fold(c, attr_path(c, v, one, jv_undef(JUNDEF_MISSING, "", 0, 0)), cs));
    }
    return out;
}

/* a generator of the given items (what jinja2's lazy filters return) */
static jinja_val gen(jinja_val list) {
    list.sub = JLIST_GEN;
    return list;
}

/* ---------------------------------------------------------------------------
 * Stable sorting by key
 * ------------------------------------------------------------------------- */

typedef struct keyed {
    jinja_val key, v;
} keyed;

static void merge_sort(jctx *c, keyed *a, keyed *tmp, uint32_t n, bool reverse) {
    if (n < 2) return;
    uint32_t h = n / 2;
    merge_sort(c, a, tmp, h, reverse);
    merge_sort(c, a + h, tmp, n - h, reverse);
    uint32_t i = 0, j = h, o = 0;
    while (i < h && j < n) {
        int r = jv_cmp(c, a[j].key, a[i].key);
        bool take_right = reverse ? r > 0 : r < 0;
        tmp[o++] = take_right ? a[j++] : a[i++];
    }
    while (i < h)
        tmp[o++] = a[i++];
    while (j < n)
        tmp[o++] = a[j++];
    memcpy(a, tmp, n * sizeof *a);
}

/* items of seq with their keys (attribute path, case folding) */
static keyed *keyed_items(jctx *c, jinja_val seq, jinja_val attribute, bool cs) {
    uint32_t n = seq.u.l->n;
    keyed *k = jx_alloc(c, (n ? n : 1) * sizeof *k);
    for (uint32_t i = 0; i < n; i++) {
        jinja_val v = seq.u.l->v[i];
        bool attr = jx_given(attribute) && attribute.type != JINJA_NONE;
        k[i] = (keyed){attr ? multi_attr(c, v, attribute, cs) : fold(c, v, cs), v};
    }
    return k;
}

static jinja_val sorted(jctx *c, jinja_val in, jinja_val attribute, bool cs, bool reverse) {
    jinja_val seq = jv_iter(c, in);
    uint32_t n = seq.u.l->n;
    keyed *k = keyed_items(c, seq, attribute, cs), *tmp = jx_alloc(c, (n ? n : 1) * sizeof *tmp);
    merge_sort(c, k, tmp, n, reverse);
    jinja_val out = jv_list(c, n, JLIST_LIST);
    for (uint32_t i = 0; i < n; i++)
        out.u.l->v[out.u.l->n++] = k[i].v;
    return out;
}

static jinja_val f_sort(jctx *c, jinja_val in, const jargs *a) {
    static const char *const n[] = {"reverse", "case_sensitive", "attribute", NULL};
    jinja_val p[3];
    jx_args(c, a, "sort", n, p);
    return sorted(c, in, p[2], jv_truthy(p[1]), jv_truthy(p[0]));
}

static jinja_val f_dictsort(jctx *c, jinja_val in, const jargs *a) {
    static const char *const n[] = {"case_sensitive", "by", "reverse", NULL};
    jinja_val p[3];
    jx_args(c, a, "dictsort", n, p);
    if (in.type != JINJA_MAP) jx_fail(c, JINJA_ERROR, "dictsort needs a mapping");
    bool by_value = jv_str_eq(p[1], "value");
    if (jx_given(p[1]) && !by_value && !jv_str_eq(p[1], "key"))
        jx_fail(c, JINJA_ERROR, "You can only sort by either \"key\" or \"value\"");
    uint32_t cnt = in.u.m->n;
    jinja_val items = jv_list(c, cnt, JLIST_LIST);
    for (uint32_t i = 0; i < cnt; i++) {
        jinja_val t = jv_list(c, 2, JLIST_TUPLE);
        jv_push(c, t, in.u.m->k[i]);
        jv_push(c, t, in.u.m->v[i]);
        items.u.l->v[items.u.l->n++] = t;
    }
    return sorted(c, items, jinja_int(by_value), jv_truthy(p[0]), jv_truthy(p[2]));
}

/* unique: jinja2's set of seen keys (so a list key is unhashable, as
 * there), here a hash table of positions: linear, not quadratic */
static jinja_val f_unique(jctx *c, jinja_val in, const jargs *a) {
    static const char *const n[] = {"case_sensitive", "attribute", NULL};
    jinja_val p[2];
    jx_args(c, a, "unique", n, p);
    jinja_val seq = jv_iter(c, in), out = jv_list(c, 4, JLIST_LIST);
    keyed *k = keyed_items(c, seq, p[1], jv_truthy(p[0]));
    uint32_t size = 16;
    while (size < (uint64_t)seq.u.l->n * 2)
        size *= 2;
    jslot *seen = jx_alloc(c, (size_t)size * sizeof *seen);
    memset(seen, 0, (size_t)size * sizeof *seen);
    for (uint32_t i = 0; i < seq.u.l->n; i++) {
        uint32_t h = jv_hash_or_fail(c, k[i].key), j = h & (size - 1);
        bool dup = false;
        for (; seen[j].at && !dup; j = (j + 1) & (size - 1))
            dup = seen[j].hash == h && jv_eq(c, k[seen[j].at - 1].key, k[i].key);
        if (dup) continue;
        seen[j] = (jslot){h, i + 1};
        jv_push(c, out, k[i].v);
    }
    return gen(out);
}

static jinja_val min_max(jctx *c, jinja_val in, const jargs *a, bool max) {
    static const char *const n[] = {"case_sensitive", "attribute", NULL};
    jinja_val p[2];
    jx_args(c, a, max ? "max" : "min", n, p);
    jinja_val seq = jv_iter(c, in);
    if (!seq.u.l->n)
        return jv_undef(JUNDEF_PLAIN, "No aggregated item, sequence was empty.", 39, 0);
    keyed *k = keyed_items(c, seq, p[1], jv_truthy(p[0]));
    uint32_t best = 0;
    for (uint32_t i = 1; i < seq.u.l->n; i++) {
        int r = jv_cmp(c, k[i].key, k[best].key);
        if (max ? r > 0 : r < 0) best = i;
    }
    return k[best].v;
}

static jinja_val f_max(jctx *c, jinja_val in, const jargs *a) {
    return min_max(c, in, a, true);
}
static jinja_val f_min(jctx *c, jinja_val in, const jargs *a) {
    return min_max(c, in, a, false);
}

/* ---------------------------------------------------------------------------
 * Simple sequence filters
 * ------------------------------------------------------------------------- */

static jinja_val f_length(jctx *c, jinja_val in, const jargs *a) {
    jx_no_args(c, a, "length");
    return jinja_int(jv_len(c, in));
}

static jinja_val f_list(jctx *c, jinja_val in, const jargs *a) {
    jx_no_args(c, a, "list");
    jinja_val seq = jv_iter(c, in), out = jv_list(c, seq.u.l->n, JLIST_LIST);
    if (seq.u.l->n) memcpy(out.u.l->v, seq.u.l->v, seq.u.l->n * sizeof *out.u.l->v);
    out.u.l->n = seq.u.l->n;
    return out;
}

static jinja_val first_last(jctx *c, jinja_val in, const jargs *a, bool last) {
    jx_no_args(c, a, last ? "last" : "first");
    if (last && in.type == JINJA_LIST && in.sub == JLIST_GEN)
        jx_fail(c, JINJA_ERROR, "'generator' object is not reversible");
    jinja_val seq = jv_iter(c, in);
    if (!seq.u.l->n)
        return last ? jv_undef(JUNDEF_PLAIN, "No last item, sequence was empty.", 33, 0)
                    : jv_undef(JUNDEF_PLAIN, "No first item, sequence was empty.", 34, 0);
    return seq.u.l->v[last ? seq.u.l->n - 1 : 0];
}

static jinja_val f_first(jctx *c, jinja_val in, const jargs *a) {
    return first_last(c, in, a, false);
}
static jinja_val f_last(jctx *c, jinja_val in, const jargs *a) {
    return first_last(c, in, a, true);
}

static jinja_val f_join(jctx *c, jinja_val in, const jargs *a) {
    static const char *const n[] = {"d", "attribute", NULL};
    jinja_val p[2];
    jx_args(c, a, "join", n, p);
    jinja_val sep = jx_given(p[0]) ? jv_to_str(c, p[0]) : jv_lit(""), seq = jv_iter(c, in);
    jbuf *b = jb_new(c, 64);
    for (uint32_t i = 0; i < seq.u.l->n; i++) {
        if (i) jb_add(c, b, sep.u.s, sep.n);
        jinja_val v = seq.u.l->v[i];
        if (jx_given(p[1]) && p[1].type != JINJA_NONE) v = attr_path(c, v, p[1], p[1]);
        jv_write(c, b, v);
    }
    return jb_val(b);
}

static jinja_val f_reverse(jctx *c, jinja_val in, const jargs *a) {
    jx_no_args(c, a, "reverse");
    jinja_val seq = jv_iter(c, in);
    uint32_t n = seq.u.l->n;
    if (in.type == JINJA_STR) {
        jbuf *b = jb_new(c, (size_t)in.n + 1);
        for (uint32_t i = n; i-- > 0;)
            jb_add(c, b, seq.u.l->v[i].u.s, seq.u.l->v[i].n);
        return jb_val(b);
    }
    jinja_val out = jv_list(c, n, JLIST_LIST);
    for (uint32_t i = n; i-- > 0;)
        out.u.l->v[out.u.l->n++] = seq.u.l->v[i];
    /* reversed(list) is an iterator; a generator is made a list first */
    return in.type == JINJA_LIST && in.sub == JLIST_GEN ? out : gen(out);
}

static jinja_val f_sum(jctx *c, jinja_val in, const jargs *a) {
    static const char *const n[] = {"attribute", "start", NULL};
    jinja_val p[2];
    jx_args(c, a, "sum", n, p);
    jinja_val seq = jv_iter(c, in), acc = jx_given(p[1]) ? p[1] : jinja_int(0);
    for (uint32_t i = 0; i < seq.u.l->n; i++) {
        jinja_val v = seq.u.l->v[i];
        if (jx_given(p[0]) && p[0].type != JINJA_NONE) v = attr_path(c, v, p[0], p[0]);
        if (!jv_is_num(v) || !jv_is_num(acc))
            jx_fail(c, JINJA_ERROR, "unsupported operand type(s) for +: '%s' and '%s'",
                    jv_type_name(acc), jv_type_name(v));
        if (acc.type == JINJA_FLOAT || v.type == JINJA_FLOAT) {
            acc = jinja_float(jv_num(acc) + jv_num(v));
        } else {
            int64_t r, x = acc.type == JINJA_INT ? acc.u.i : acc.u.b,
                       y = v.type == JINJA_INT ? v.u.i : v.u.b;
            if (__builtin_add_overflow(x, y, &r))
                jx_fail(c, JINJA_ERROR, "integer overflow in sum");
            acc = jinja_int(r);
        }
    }
    return acc;
}

static jinja_val f_items(jctx *c, jinja_val in, const jargs *a) {
    jx_no_args(c, a, "items");
    if (in.type == JINJA_UNDEFINED) return gen(jv_list(c, 0, JLIST_LIST));
    if (in.type != JINJA_MAP || in.sub == JMAP_NAMESPACE)
        jx_fail(c, JINJA_ERROR, "Can only get item pairs from a mapping.");
    jinja_val out = jv_list(c, in.u.m->n, JLIST_LIST);
    for (uint32_t i = 0; i < in.u.m->n; i++) {
        jinja_val t = jv_list(c, 2, JLIST_TUPLE);
        jv_push(c, t, in.u.m->k[i]);
        jv_push(c, t, in.u.m->v[i]);
        out.u.l->v[out.u.l->n++] = t;
    }
    return gen(out);
}

static jinja_val f_attr(jctx *c, jinja_val in, const jargs *a) {
    static const char *const n[] = {"name", NULL};
    jinja_val p[1];
    jx_args(c, a, "attr", n, p);
    if (p[0].type != JINJA_STR) jx_fail(c, JINJA_ERROR, "attribute name must be a string");
    return jx_getattr(c, in, p[0]);
}

static jinja_val f_batch(jctx *c, jinja_val in, const jargs *a) {
    static const char *const n[] = {"linecount", "fill_with", NULL};
    jinja_val p[2];
    jx_args(c, a, "batch", n, p);
    int64_t k = jx_int_arg(c, p[0], 1, "batch");
    if (k < 1) jx_fail(c, JINJA_ERROR, "batch size must be positive");
    jinja_val seq = jv_iter(c, in), out = jv_list(c, 4, JLIST_LIST), cur = {0};
    for (uint32_t i = 0; i < seq.u.l->n; i++) {
        if (i % k == 0) {
            cur = jv_list(c, (uint32_t)(k < 64 ? k : 64), JLIST_LIST);
            jv_push(c, out, cur);
        }
        jv_push(c, cur, seq.u.l->v[i]);
    }
    if (cur.type && jx_given(p[1]) && p[1].type != JINJA_NONE)
        while (cur.u.l->n < k)
            jv_push(c, cur, p[1]);
    return gen(out);
}

static jinja_val f_groupby(jctx *c, jinja_val in, const jargs *a) {
    static const char *const n[] = {"attribute", "default", "case_sensitive", NULL};
    jinja_val p[3];
    jx_args(c, a, "groupby", n, p);
    bool cs = jv_truthy(p[2]);
    jinja_val seq = sorted(c, in, p[0], cs, false), out = jv_list(c, 4, JLIST_LIST);
    jinja_val group = {0}, last_key = {0};
    for (uint32_t i = 0; i < seq.u.l->n; i++) {
        jinja_val v = seq.u.l->v[i], key = attr_path(c, v, p[0], p[1]), folded = fold(c, key, cs);
        if (!group.type || !jv_eq(c, folded, last_key)) {
            group = jv_list(c, 4, JLIST_LIST);
            jinja_val t = jv_list(c, 2, JLIST_TUPLE);
            jv_push(c, t, key);
            jv_push(c, t, group);
            jv_push(c, out, t);
            last_key = folded;
        }
        jv_push(c, group, v);
    }
    return out;
}

/* ---------------------------------------------------------------------------
 * map, select, reject, selectattr, rejectattr
 * ------------------------------------------------------------------------- */

static jinja_val f_map(jctx *c, jinja_val in, const jargs *a) {
    if (!jv_truthy(in)) return gen(jv_list(c, 0, JLIST_LIST)); /* jinja2: `if value:` */
    jinja_val seq = jv_iter(c, in), out = gen(jv_list(c, seq.u.l->n, JLIST_LIST));
    bool by_attr = false; /* jinja2: `not args and "attribute" in kwargs` */
    for (uint32_t i = 0; i < a->nkw; i++)
        by_attr |= jv_str_eq(a->kwn[i], "attribute");
    if (a->n || !by_attr) {
        if (!a->n) jx_fail(c, JINJA_ERROR, "map requires a filter argument");
        if (a->v[0].type != JINJA_STR)
            jx_fail(c, JINJA_ERROR, "map: the filter name must be a string");
        int id = jinja_filter_find(a->v[0].u.s, a->v[0].n);
        if (id < 0) jx_fail(c, JINJA_ERROR, "No filter named '%.*s'.", (int)a->v[0].n, a->v[0].u.s);
        jargs rest = {.n = a->n - 1, .nkw = a->nkw, .v = a->v + 1, .kwn = a->kwn, .kwv = a->kwv};
        for (uint32_t i = 0; i < seq.u.l->n; i++)
            out.u.l->v[out.u.l->n++] = jx_filter(c, id, seq.u.l->v[i], &rest);
        return out;
    }
    static const char *const n[] = {"attribute", "default", NULL};
    jinja_val p[2];
    jx_args(c, a, "map", n, p);
    for (uint32_t i = 0; i < seq.u.l->n; i++)
        out.u.l->v[out.u.l->n++] = attr_path(c, seq.u.l->v[i], p[0], p[1]);
    return out;
}

/* select / reject (attr false) and selectattr / rejectattr (attr true) */
static jinja_val select_common(jctx *c, jinja_val in, const jargs *a, bool attr, bool keep) {
    if (!jv_truthy(in)) return gen(jv_list(c, 0, JLIST_LIST)); /* jinja2: `if value:` */
    uint32_t first = attr ? 1 : 0;
    if (attr && !a->n) jx_fail(c, JINJA_ERROR, "Missing parameter for attribute name");
    int id = -1;
    if (a->n > first) {
        if (a->v[first].type != JINJA_STR)
            jx_fail(c, JINJA_ERROR, "the test name must be a string");
        id = jinja_test_find(a->v[first].u.s, a->v[first].n);
        if (id < 0)
            jx_fail(c, JINJA_ERROR, "No test named '%.*s'.", (int)a->v[first].n, a->v[first].u.s);
    }
    uint32_t skip = a->n > first ? first + 1 : a->n;
    jargs rest = {.n = a->n - skip,
                  .nkw = a->nkw,
                  .v = a->v ? a->v + skip : NULL,
                  .kwn = a->kwn,
                  .kwv = a->kwv};
    jinja_val seq = jv_iter(c, in), out = gen(jv_list(c, 4, JLIST_LIST));
    for (uint32_t i = 0; i < seq.u.l->n; i++) {
        jinja_val v = seq.u.l->v[i];
        jinja_val t = attr ? attr_path(c, v, a->v[0], jv_undef(JUNDEF_MISSING, "", 0, 0)) : v;
        bool ok = id >= 0 ? jx_test(c, id, t, &rest) : jv_truthy(t);
        if (ok == keep) jv_push(c, out, v);
    }
    return out;
}

static jinja_val f_select(jctx *c, jinja_val in, const jargs *a) {
    return select_common(c, in, a, false, true);
}
static jinja_val f_reject(jctx *c, jinja_val in, const jargs *a) {
    return select_common(c, in, a, false, false);
}
static jinja_val f_selectattr(jctx *c, jinja_val in, const jargs *a) {
    return select_common(c, in, a, true, true);
}
static jinja_val f_rejectattr(jctx *c, jinja_val in, const jargs *a) {
    return select_common(c, in, a, true, false);
}

/* ---------------------------------------------------------------------------
 * The table, by id (names: jinja_names.c)
 * ------------------------------------------------------------------------- */

static const jfilter_fn FILTERS[JF_COUNT] = {
    [JF_TRIM] = jf_trim,
    [JF_LOWER] = jf_lower,
    [JF_UPPER] = jf_upper,
    [JF_TITLE] = jf_title,
    [JF_CAPITALIZE] = jf_capitalize,
    [JF_REPLACE] = jf_replace,
    [JF_INDENT] = jf_indent,
    [JF_CENTER] = jf_center,
    [JF_TRUNCATE] = jf_truncate,
    [JF_WORDCOUNT] = jf_wordcount,
    [JF_ESCAPE] = jf_escape,
    [JF_FORCEESCAPE] = jf_forceescape,
    [JF_STRING] = jf_string,
    [JF_SAFE] = jf_safe,
    [JF_FORMAT] = jf_format,
    [JF_INT] = jf_int,
    [JF_FLOAT] = jf_float,
    [JF_ABS] = jf_abs,
    [JF_ROUND] = jf_round,
    [JF_DEFAULT] = jf_default,
    [JF_TOJSON] = jf_tojson,
    [JF_LENGTH] = f_length,
    [JF_LIST] = f_list,
    [JF_FIRST] = f_first,
    [JF_LAST] = f_last,
    [JF_JOIN] = f_join,
    [JF_REVERSE] = f_reverse,
    [JF_SORT] = f_sort,
    [JF_UNIQUE] = f_unique,
    [JF_MIN] = f_min,
    [JF_MAX] = f_max,
    [JF_SUM] = f_sum,
    [JF_MAP] = f_map,
    [JF_SELECT] = f_select,
    [JF_REJECT] = f_reject,
    [JF_SELECTATTR] = f_selectattr,
    [JF_REJECTATTR] = f_rejectattr,
    [JF_DICTSORT] = f_dictsort,
    [JF_ITEMS] = f_items,
    [JF_BATCH] = f_batch,
    [JF_GROUPBY] = f_groupby,
    [JF_ATTR] = f_attr,
};

jinja_val jx_filter(jctx *c, int id, jinja_val in, const jargs *a) {
    jx_step(c);
    return FILTERS[id](c, in, a);
}
