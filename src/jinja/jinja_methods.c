/* Attributes and methods, as the immutable sandbox allows them: the str
 * methods chat templates call (strip, split, startswith, replace, format,
 * ...), dict.get/items/keys/values, list.count/index, the attributes of
 * `loop`, and the global functions (range, namespace, dict,
 * raise_exception, strftime_now). A method that would change a list or a
 * dict (append, pop, update, ...) is an "unsafe" undefined that raises
 * SecurityError when called, as in jinja2; any other unknown attribute is
 * undefined. Also the string helpers the filters share (strip, case,
 * replace, split). */
#include "jinja/jinja_internal.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------------------
 * String helpers (also used by the filters)
 * ------------------------------------------------------------------------- */

static bool in_chars(uint32_t cp, jinja_val chars) {
    for (size_t i = 0; i < chars.n;)
        if (utf8_next(chars.u.s, chars.n, &i) == cp) return true;
    return false;
}

/* which: 1 left, 2 right, 3 both; chars undefined/none: whitespace */
jinja_val js_strip(jctx *c, jinja_val s, jinja_val chars, int which) {
    bool ws = chars.type != JINJA_STR;
    size_t lo = 0, hi = s.n;
    while ((which & 1) && lo < hi) {
        size_t k = lo;
        uint32_t cp = utf8_next(s.u.s, s.n, &k);
        jx_work(c, ws ? 1 : 1 + 4 * (uint64_t)chars.n); /* chars decoded again */
        if (ws ? !cp_space(cp) : !in_chars(cp, chars)) break;
        lo = k;
    }
    while ((which & 2) && hi > lo) {
        size_t start = hi - 1;
        while (start > lo && ((unsigned char)s.u.s[start] & 0xC0) == 0x80)
            start--;
        size_t k = start;
        uint32_t cp = utf8_next(s.u.s, hi, &k);
        jx_work(c, ws ? 1 : 1 + 4 * (uint64_t)chars.n); /* chars decoded again */
        if (ws ? !cp_space(cp) : !in_chars(cp, chars)) break;
        hi = start;
    }
    return (jinja_val){
        .type = JINJA_STR, .sub = s.sub, .n = (uint32_t)(hi - lo), .u.s = s.u.s + lo};
}

/* mode: 'l' lower, 'u' upper, 't' title, 'c' capitalize, 's' swapcase */
jinja_val js_case(jctx *c, jinja_val s, char mode) {
    jbuf *b = jb_new(c, (size_t)s.n + 8);
    bool prev_cased = false, first = true;
    for (size_t i = 0; i < s.n;) {
        uint32_t cp = utf8_next(s.u.s, s.n, &i), out = cp;
        bool cased = cp_cased_lower(cp) || cp_cased_upper(cp);
        if (mode == 'l')
            out = cp_lower(cp);
        else if (mode == 'u')
            out = cp_upper(cp);
        else if (mode == 't')
            out = prev_cased ? cp_lower(cp) : cp_upper(cp);
        else if (mode == 'c')
            out = first ? cp_upper(cp) : cp_lower(cp);
        else
            out = cp_cased_lower(cp) ? cp_upper(cp) : cp_lower(cp);
        prev_cased = cased || (mode == 't' && cp_alpha(cp));
        first = false;
        char u[4];
        jb_add(c, b, u, utf8_put(out, u));
    }
    jinja_val r = jb_val(b);
    r.sub = s.sub;
    return r;
}

/* s with old replaced by new, at most count times (count < 0: all). An
 * empty old inserts new between every character, as Python does. */
jinja_val js_replace(jctx *c, jinja_val s, jinja_val old, jinja_val rep, int64_t count) {
    jbuf *b = jb_new(c, (size_t)s.n + 16);
    size_t i = 0;
    int64_t done = 0;
    if (!old.n) {
        while (count < 0 || done < count) {
            jb_add(c, b, rep.u.s, rep.n);
            done++;
            if (i >= s.n) break;
            size_t at = i;
            utf8_next(s.u.s, s.n, &i);
            jb_add(c, b, s.u.s + at, i - at);
        }
        jb_add(c, b, s.u.s + i, s.n - i);
        return jb_val(b);
    }
    while (count < 0 || done < count) {
        const char *p = memmem(s.u.s + i, s.n - i, old.u.s, old.n);
        jx_work(c, (p ? (size_t)(p - s.u.s) - i : s.n - i) + old.n);
        if (!p) break;
        jb_add(c, b, s.u.s + i, (size_t)(p - s.u.s) - i);
        jb_add(c, b, rep.u.s, rep.n);
        i = (size_t)(p - s.u.s) + old.n;
        done++;
        jx_step(c);
    }
    jb_add(c, b, s.u.s + i, s.n - i);
    return jb_val(b);
}

/* The last sep in s[0..n), or NULL: from the end, a memcmp only where the
 * first byte matches, each charged (sep.n per memcmp, so "aaaa..." cannot
 * make one call quadratic unseen). */
static const char *last_of(jctx *c, const char *s, size_t n, jinja_val sep) {
    if (!sep.n) return s + n; /* "".rfind: at the end */
    if (sep.n > n) return NULL;
    for (size_t k = n - sep.n + 1; k-- > 0;) {
        jx_work(c, 1);
        if (s[k] != sep.u.s[0]) continue;
        jx_work(c, sep.n);
        if (!memcmp(s + k, sep.u.s, sep.n)) return s + k;
    }
    return NULL;
}

static jinja_val slice_of(jinja_val s, size_t from, size_t to) {
    return (jinja_val){.type = JINJA_STR, .n = (uint32_t)(to - from), .u.s = s.u.s + from};
}

/* str.split / str.rsplit: sep none -> runs of whitespace, no empty parts */
jinja_val js_split(jctx *c, jinja_val s, jinja_val sep, int64_t maxsplit, bool right) {
    jinja_val out = jv_list(c, 4, JLIST_LIST);
    bool ws = sep.type != JINJA_STR;
    if (!ws && !sep.n) jx_fail(c, JINJA_ERROR, "empty separator");
    jinja_val parts = jv_list(c, 4, JLIST_LIST); /* right: collected backwards */
    size_t lo = 0, hi = s.n;
    int64_t splits = 0;
    if (ws) {
        jinja_val t = js_strip(c, s, jinja_none(), right ? 2 : 1);
        lo = (size_t)(t.u.s - s.u.s);
        hi = lo + t.n;
        while (lo < hi && (maxsplit < 0 || splits < maxsplit)) {
            size_t a = right ? hi : lo, k;
            if (!right) {
                for (k = lo; k < hi;) {
                    size_t q = k;
                    if (cp_space(utf8_next(s.u.s, hi, &q))) break;
                    k = q;
                }
                if (k >= hi) break;
                jv_push(c, parts, slice_of(s, lo, k));
                jinja_val rest = js_strip(c, slice_of(s, k, hi), jinja_none(), 1);
                lo = (size_t)(rest.u.s - s.u.s);
            } else {
                for (k = hi; k > lo; k--)
                    if (cp_space((unsigned char)s.u.s[k - 1])) break;
                if (k <= lo) break;
                jv_push(c, parts, slice_of(s, k, a));
                jinja_val rest = js_strip(c, slice_of(s, lo, k), jinja_none(), 2);
                hi = lo + rest.n;
            }
            splits++;
        }
        if (lo < hi) jv_push(c, parts, slice_of(s, lo, hi));
    } else {
        while (maxsplit < 0 || splits < maxsplit) {
            const char *p = NULL;
            if (!right) {
                p = memmem(s.u.s + lo, hi - lo, sep.u.s, sep.n);
                jx_work(c, (p ? (size_t)(p - s.u.s) - lo : hi - lo) + sep.n);
            } else {
                p = last_of(c, s.u.s + lo, hi - lo, sep);
            }
            if (!p) break;
            size_t at = (size_t)(p - s.u.s);
            jv_push(c, parts, right ? slice_of(s, at + sep.n, hi) : slice_of(s, lo, at));
            if (right)
                hi = at;
            else
                lo = at + sep.n;
            splits++;
            jx_step(c);
        }
        jv_push(c, parts, slice_of(s, lo, hi));
    }
    for (uint32_t i = 0; i < parts.u.l->n; i++)
        jv_push(c, out, parts.u.l->v[right ? parts.u.l->n - 1 - i : i]);
    return out;
}

/* ---------------------------------------------------------------------------
 * Method calls
 * ------------------------------------------------------------------------- */

static jinja_val str_arg(jctx *c, jinja_val v, const char *method) {
    if (v.type != JINJA_STR)
        jx_fail(c, JINJA_ERROR, "%s() argument must be str, not %s", method, jv_type_name(v));
    return v;
}

static bool affix(jctx *c, jinja_val s, jinja_val x, bool end) {
    jx_work(c, JX_WORK_VALUE + x.n);
    return x.n <= s.n && !memcmp(s.u.s + (end ? s.n - x.n : 0), x.u.s, x.n);
}

static jinja_val starts_ends(jctx *c, jinja_val s, const jargs *a, bool end) {
    static const char *const names[] = {"prefix", "start", "end", NULL};
    jinja_val p[3];
    jx_args(c, a, end ? "endswith" : "startswith", names, p);
    if (jx_given(p[1]) || jx_given(p[2]))
        jx_fail(c, JINJA_ERROR, "startswith/endswith with start or end is not supported");
    if (p[0].type == JINJA_LIST && p[0].sub == JLIST_TUPLE) {
        for (uint32_t i = 0; i < p[0].u.l->n; i++)
            if (affix(c, s, str_arg(c, p[0].u.l->v[i], "startswith"), end)) return jinja_bool(true);
        return jinja_bool(false);
    }
    return jinja_bool(affix(c, s, str_arg(c, p[0], end ? "endswith" : "startswith"), end));
}

static jinja_val find(jctx *c, jinja_val s, const jargs *a, int id) {
    static const char *const names[] = {"sub", NULL};
    jinja_val p[1];
    jx_args(c, a, "find", names, p);
    jinja_val sub = str_arg(c, p[0], "find");
    if (id == M_COUNT) {
        int64_t k = 0;
        if (!sub.n) return jinja_int(jv_len(c, s) + 1);
        jx_work(c, s.n);
        for (const char *q = s.u.s; (q = memmem(q, s.n - (size_t)(q - s.u.s), sub.u.s, sub.n));
             q += sub.n) {
            jx_work(c, sub.n);
            k++;
        }
        return jinja_int(k);
    }
    const char *hit = NULL;
    if (id == M_FIND || id == M_INDEX) {
        jx_work(c, (uint64_t)s.n + sub.n);
        hit = memmem(s.u.s, s.n, sub.u.s, sub.n);
    } else {
        hit = last_of(c, s.u.s, s.n, sub);
    }
    if (hit) jx_work(c, (size_t)(hit - s.u.s)); /* the code points before it, counted */
    if (!hit) {
        if (id == M_INDEX || id == M_RINDEX) jx_fail(c, JINJA_ERROR, "substring not found");
        return jinja_int(-1);
    }
    return jinja_int((int64_t)utf8_count(s.u.s, (size_t)(hit - s.u.s)));
}

static jinja_val str_join(jctx *c, jinja_val sep, const jargs *a) {
    static const char *const names[] = {"iterable", NULL};
    jinja_val p[1];
    jx_args(c, a, "join", names, p);
    jinja_val items = jv_iter(c, p[0]);
    jbuf *b = jb_new(c, 64);
    for (uint32_t i = 0; i < items.u.l->n; i++) {
        if (i) jb_add(c, b, sep.u.s, sep.n);
        jinja_val v = items.u.l->v[i];
        if (v.type != JINJA_STR)
            jx_fail(c, JINJA_ERROR, "sequence item %u: expected str instance, %s found", i,
                    jv_type_name(v));
        jb_add(c, b, v.u.s, v.n);
    }
    return jb_val(b);
}

static jinja_val is_class(jctx *c, jinja_val s, int id) {
    bool any = false, ok = s.n > 0, cased = false;
    jx_work(c, s.n);
    for (size_t i = 0; i < s.n && ok;) {
        uint32_t cp = utf8_next(s.u.s, s.n, &i);
        switch (id) {
        case M_ISALPHA:
            ok = cp_alpha(cp);
            break;
        case M_ISDIGIT:
            ok = cp_digit(cp);
            break;
        case M_ISALNUM:
            ok = cp_alpha(cp) || cp_digit(cp);
            break;
        case M_ISSPACE:
            ok = cp_space(cp);
            break;
        case M_ISLOWER:
            ok = !cp_cased_upper(cp);
            cased |= cp_cased_lower(cp);
            break;
        default:
            ok = !cp_cased_lower(cp);
            cased |= cp_cased_upper(cp);
            break;
        }
        any = true;
    }
    if (id == M_ISLOWER || id == M_ISUPPER) return jinja_bool(ok && cased);
    return jinja_bool(ok && any);
}

static jinja_val partition(jctx *c, jinja_val s, const jargs *a, bool right) {
    static const char *const names[] = {"sep", NULL};
    jinja_val p[1];
    jx_args(c, a, "partition", names, p);
    jinja_val sep = str_arg(c, p[0], "partition");
    if (!sep.n) jx_fail(c, JINJA_ERROR, "empty separator");
    jinja_val parts = js_split(c, s, sep, 1, right), out = jv_list(c, 3, JLIST_TUPLE);
    if (parts.u.l->n == 2) {
        jv_push(c, out, parts.u.l->v[0]);
        jv_push(c, out, sep);
        jv_push(c, out, parts.u.l->v[1]);
    } else {
        jv_push(c, out, right ? jv_lit("") : s);
        jv_push(c, out, jv_lit(""));
        jv_push(c, out, right ? s : jv_lit(""));
    }
    return out;
}

jinja_val js_splitlines(jctx *c, jinja_val s) {
    jinja_val out = jv_list(c, 4, JLIST_LIST);
    size_t start = 0;
    for (size_t i = 0; i < s.n;) {
        size_t at = i;
        uint32_t cp = utf8_next(s.u.s, s.n, &i);
        bool br = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C ||
                  cp == 0x1D || cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
        if (!br) continue;
        jv_push(c, out, slice_of(s, start, at));
        if (cp == '\r' && i < s.n && s.u.s[i] == '\n') i++;
        start = i;
    }
    if (start < s.n) jv_push(c, out, slice_of(s, start, s.n));
    return out;
}

/* center / ljust / rjust / zfill */
static jinja_val pad(jctx *c, jinja_val s, const jargs *a, int id) {
    static const char *const names[] = {"width", "fillchar", NULL};
    jinja_val p[2];
    jx_args(c, a, "pad", names, p);
    int64_t width = jx_int_arg(c, p[0], 0, "width"), len = jv_len(c, s);
    if (width > 1 << 20) jx_fail(c, JINJA_LIMIT, "a padding width of %lld", (long long)width);
    jinja_val fill =
        jx_given(p[1]) ? str_arg(c, p[1], "fillchar") : jv_lit(id == M_ZFILL ? "0" : " ");
    if (width <= len) return s;
    int64_t total = width - len, left = id == M_RJUST || id == M_ZFILL ? total
                                        : id == M_CENTER ? total / 2 + (total & width & 1)
                                                         : 0;
    jbuf *b = jb_new(c, (size_t)s.n + (size_t)total * fill.n);
    size_t body = 0;
    if (id == M_ZFILL && s.n && (s.u.s[0] == '-' || s.u.s[0] == '+')) {
        jb_add(c, b, s.u.s, 1);
        body = 1;
    }
    for (int64_t i = 0; i < left; i++)
        jb_add(c, b, fill.u.s, fill.n);
    jb_add(c, b, s.u.s + body, s.n - body);
    for (int64_t i = left; i < total; i++)
        jb_add(c, b, fill.u.s, fill.n);
    jinja_val r = jb_val(b);
    r.sub = s.sub;
    return r;
}

static jinja_val str_method(jctx *c, int id, jinja_val s, const jargs *a) {
    static const char *const strip_n[] = {"chars", NULL},
                             *const split_n[] = {"sep", "maxsplit", NULL},
                             *const repl_n[] = {"old", "new", "count", NULL},
                             *const none_n[] = {NULL}, *const affix_n[] = {"prefix", NULL};
    jinja_val p[3];
    switch (id) {
    case M_STARTSWITH:
    case M_ENDSWITH:
        return starts_ends(c, s, a, id == M_ENDSWITH);
    case M_STRIP:
    case M_LSTRIP:
    case M_RSTRIP:
        jx_args(c, a, "strip", strip_n, p);
        if (jx_given(p[0]) && p[0].type != JINJA_NONE) str_arg(c, p[0], "strip");
        return js_strip(c, s, p[0], id == M_STRIP ? 3 : id == M_LSTRIP ? 1 : 2);
    case M_SPLIT:
    case M_RSPLIT:
        jx_args(c, a, "split", split_n, p);
        if (jx_given(p[0]) && p[0].type != JINJA_NONE) str_arg(c, p[0], "split");
        return js_split(c, s, p[0], jx_int_arg(c, p[1], -1, "maxsplit"), id == M_RSPLIT);
    case M_REPLACE: {
        jx_args(c, a, "replace", repl_n, p);
        jinja_val old = str_arg(c, p[0], "replace"), rep = str_arg(c, p[1], "replace");
        if (jv_is_markup(s)) { /* Markup.replace escapes its arguments */
            jinja_val r = js_replace(c, s, jv_escape(c, old), jv_escape(c, rep),
                                     jx_int_arg(c, p[2], -1, "count"));
            return jv_markup(r);
        }
        return js_replace(c, s, old, rep, jx_int_arg(c, p[2], -1, "count"));
    }
    case M_FIND:
    case M_RFIND:
    case M_INDEX:
    case M_RINDEX:
    case M_COUNT:
        return find(c, s, a, id);
    case M_JOIN:
        return str_join(c, s, a);
    case M_FORMAT:
        return jx_str_format(c, s, a);
    case M_SPLITLINES:
        jx_args(c, a, "splitlines", none_n, p);
        return js_splitlines(c, s);
    case M_PARTITION:
    case M_RPARTITION:
        return partition(c, s, a, id == M_RPARTITION);
    case M_CENTER:
    case M_LJUST:
    case M_RJUST:
    case M_ZFILL:
        return pad(c, s, a, id);
    case M_REMOVEPREFIX:
    case M_REMOVESUFFIX:
        jx_args(c, a, "removeprefix", affix_n, p);
        if (!affix(c, s, str_arg(c, p[0], "removeprefix"), id == M_REMOVESUFFIX)) return s;
        return id == M_REMOVEPREFIX ? slice_of(s, p[0].n, s.n) : slice_of(s, 0, s.n - p[0].n);
    default:
        jx_args(c, a, "str method", none_n, p);
        if (id >= M_ISALPHA && id <= M_ISUPPER) return is_class(c, s, id);
        return js_case(c, s,
                       id == M_LOWER        ? 'l'
                       : id == M_UPPER      ? 'u'
                       : id == M_TITLE      ? 't'
                       : id == M_CAPITALIZE ? 'c'
                                            : 's');
    }
}

static jinja_val map_method(jctx *c, int id, jinja_val m, const jargs *a) {
    static const char *const get_n[] = {"key", "default", NULL}, *const none_n[] = {NULL};
    jinja_val p[2];
    if (id == M_GET) {
        jx_args(c, a, "get", get_n, p);
        jinja_val v;
        jv_hash_or_fail(c, p[0]); /* d.get([1]): TypeError, as Python's */
        if (jv_map_get(c, m.u.m, p[0], &v)) return v;
        return jx_given(p[1]) ? p[1] : jinja_none();
    }
    jx_args(c, a, "dict method", none_n, p);
    uint32_t n = m.u.m->n;
    if (id == M_COPY) {
        jinja_val out = jv_map(c, n, JMAP_DICT);
        for (uint32_t i = 0; i < n; i++)
            jv_map_put(c, out, m.u.m->k[i], m.u.m->v[i]);
        return out;
    }
    jinja_val out = jv_list(c, n,
                            id == M_ITEMS  ? JLIST_ITEMS
                            : id == M_KEYS ? JLIST_KEYS
                                           : JLIST_VALUES);
    for (uint32_t i = 0; i < n; i++) {
        jinja_val item = id == M_KEYS ? m.u.m->k[i] : m.u.m->v[i];
        if (id == M_ITEMS) {
            item = jv_list(c, 2, JLIST_TUPLE);
            jv_push(c, item, m.u.m->k[i]);
            jv_push(c, item, m.u.m->v[i]);
        }
        out.u.l->v[out.u.l->n++] = item;
    }
    return out;
}

static jinja_val list_method(jctx *c, int id, jinja_val l, const jargs *a) {
    static const char *const names[] = {"value", NULL};
    jinja_val p[1];
    jx_args(c, a, id == M_LCOUNT ? "count" : "index", names, p);
    int64_t k = 0;
    for (uint32_t i = 0; i < l.u.l->n; i++)
        if (jv_eq(c, l.u.l->v[i], p[0])) {
            if (id == M_LINDEX) return jinja_int(i);
            k++;
        }
    if (id == M_LINDEX) jx_fail(c, JINJA_ERROR, "value is not in list");
    return jinja_int(k);
}

/* ---------------------------------------------------------------------------
 * Global functions and calls of builtins
 * ------------------------------------------------------------------------- */

static jinja_val range(jctx *c, const jargs *a) {
    if (a->nkw || a->n < 1 || a->n > 3)
        jx_fail(c, JINJA_ERROR, "range expected 1 to 3 positional arguments");
    int64_t x[3] = {0};
    for (uint32_t i = 0; i < a->n; i++)
        x[i] = jx_int_arg(c, a->v[i], 0, "range");
    int64_t start = a->n == 1 ? 0 : x[0], stop = a->n == 1 ? x[0] : x[1],
            step = a->n == 3 ? x[2] : 1;
    if (!step) jx_fail(c, JINJA_ERROR, "range() arg 3 must not be zero");
    /* in 128 bits: stop - start may not fit in 64 */
    __int128 span = step > 0 ? (__int128)stop - start : (__int128)start - stop;
    __int128 per = step > 0 ? step : -(__int128)step;
    int64_t n =
        span > 0 ? (int64_t)((span + per - 1) / per > 100001 ? 100001 : (span + per - 1) / per) : 0;
    if (n > 100000)
        jx_fail(c, JINJA_ERROR,
                "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    jinja_val out = jv_list(c, (uint32_t)n, JLIST_LIST);
    for (int64_t i = 0; i < n; i++)
        out.u.l->v[out.u.l->n++] = jinja_int((int64_t)(start + (__int128)i * step));
    return out;
}

/* namespace(mapping?, **kw) and dict(mapping?, **kw) */
static jinja_val make_map(jctx *c, const jargs *a, int sub) {
    if (a->n > 1)
        jx_fail(c, JINJA_ERROR, "%s expected at most 1 argument", sub ? "namespace" : "dict");
    jinja_val m = jv_map(c, 4, sub);
    if (a->n) {
        jinja_val src = a->v[0];
        if (src.type != JINJA_MAP)
            jx_fail(c, JINJA_ERROR, "cannot convert %s to a dict", jv_type_name(src));
        for (uint32_t i = 0; i < src.u.m->n; i++)
            jv_map_put(c, m, src.u.m->k[i], src.u.m->v[i]);
    }
    for (uint32_t i = 0; i < a->nkw; i++)
        jv_map_put(c, m, a->kwn[i], a->kwv[i]);
    return m;
}

static jinja_val strftime_now(jctx *c, const jargs *a) {
    static const char *const names[] = {"format", NULL};
    jinja_val p[1];
    jx_args(c, a, "strftime_now", names, p);
    jinja_val fmt = str_arg(c, p[0], "strftime_now");
    time_t now = c->run->have_now ? c->run->now : time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    char f[256], out[512];
    snprintf(f, sizeof f, "%.*s", (int)fmt.n, fmt.u.s);
    size_t n = strftime(out, sizeof out, f, &tm);
    return jv_str(c, out, n);
}

static jinja_val call_global(jctx *c, int id, const jargs *a) {
    switch (id) {
    case G_RANGE:
        return range(c, a);
    case G_NAMESPACE:
        return make_map(c, a, JMAP_NAMESPACE);
    case G_DICT:
        return make_map(c, a, JMAP_DICT);
    case G_RAISE: {
        /* every failure carries a message (the server returns it): Python's
         * TypeError without an argument, a word for an empty one */
        if (!a->n)
            jx_fail(c, JINJA_RAISED,
                    "raise_exception() missing 1 required positional argument: 'message'");
        jinja_val m = jv_to_str(c, a->v[0]);
        if (!m.n) jx_fail(c, JINJA_RAISED, "raise_exception() with an empty message");
        jx_fail(c, JINJA_RAISED, "%.*s", (int)m.n, m.u.s);
    }
    default:
        return strftime_now(c, a);
    }
}

static jinja_val loop_fn(jctx *c, jinja_val fn, const jargs *a) {
    jloop *l = (jloop *)fn.u.p;
    if (fn.sub == JFN_LOOP_CYCLE) {
        if (!a->n) jx_fail(c, JINJA_ERROR, "no items for cycling given");
        /* cppcheck-suppress zerodivcond ; jx_fail does not return */
        return a->v[l->i % a->n];
    }
    jinja_val now = a->n == 1 ? a->v[0] : jv_list(c, 0, JLIST_TUPLE);
    if (a->n > 1) {
        now = jv_list(c, a->n, JLIST_TUPLE);
        for (uint32_t i = 0; i < a->n; i++)
            jv_push(c, now, a->v[i]);
    }
    bool changed = !l->changed_set || !jv_eq(c, now, l->changed_last);
    l->changed_set = true;
    l->changed_last = now;
    return jinja_bool(changed);
}

jinja_val jx_call_builtin(jctx *c, jinja_val fn, const jargs *a) {
    if (fn.sub == JFN_BUILTIN) return call_global(c, fn.aux, a);
    if (fn.sub == JFN_LOOP_CYCLE || fn.sub == JFN_LOOP_CHANGED) return loop_fn(c, fn, a);
    jinja_val self = *(const jinja_val *)fn.u.p;
    if (self.type == JINJA_STR) return str_method(c, fn.aux, self, a);
    if (self.type == JINJA_MAP) return map_method(c, fn.aux, self, a);
    return list_method(c, fn.aux, self, a);
}
