/* jinja2's filters on single values, with its signatures and defaults:
 * text (trim, lower, upper, title, capitalize, replace, indent, center,
 * truncate, wordcount, escape, string, safe, format), numbers (int, float,
 * abs, round), default, and transformers' tojson (json.dumps with
 * ensure_ascii=False and the indent, separators and sort_keys arguments).
 * Not here: filters over sequences and the filter table
 * (jinja_filters_seq.c). */
#include "jinja/jinja_internal.h"
#include "jinja/jinja_filters.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static jinja_val text(jctx *c, jinja_val v) {
    return jv_to_str(c, v);
}

jinja_val jf_trim(jctx *c, jinja_val in, const jargs *a) {
    static const char *const n[] = {"chars", NULL};
    jinja_val p[1];
    jx_args(c, a, "trim", n, p);
    jinja_val chars = jx_given(p[0]) && p[0].type == JINJA_STR ? p[0] : jinja_none();
    return js_strip(c, text(c, in), chars, 3);
}

static jinja_val f_case(jctx *c, jinja_val in, const jargs *a, char mode) {
    jx_no_args(c, a, "case");
    return js_case(c, text(c, in), mode);
}

jinja_val jf_lower(jctx *c, jinja_val in, const jargs *a) {
    return f_case(c, in, a, 'l');
}
jinja_val jf_upper(jctx *c, jinja_val in, const jargs *a) {
    return f_case(c, in, a, 'u');
}
jinja_val jf_title(jctx *c, jinja_val in, const jargs *a) {
    return f_case(c, in, a, 't');
}
jinja_val jf_capitalize(jctx *c, jinja_val in, const jargs *a) {
    return f_case(c, in, a, 'c');
}

jinja_val jf_replace(jctx *c, jinja_val in, const jargs *a) {
    static const char *const n[] = {"old", "new", "count", NULL};
    jinja_val p[3];
    jx_args(c, a, "replace", n, p);
    int64_t count = p[2].type == JINJA_NONE ? -1 : jx_int_arg(c, p[2], -1, "replace");
    return js_replace(c, text(c, in), text(c, p[0]), text(c, p[1]), count);
}

/* indent(width=4, first=False, blank=False), as jinja2's: the lines of
 * s + "\n" (str.splitlines) joined with "\n" and the indent, empty lines
 * indented only when blank, the first line only when first. */
jinja_val jf_indent(jctx *c, jinja_val in, const jargs *a) {
    static const char *const n[] = {"width", "first", "blank", NULL};
    jinja_val p[3];
    jx_args(c, a, "indent", n, p);
    jinja_val pre = p[0];
    if (p[0].type != JINJA_STR) {
        int64_t w = jx_int_arg(c, p[0], 4, "indent");
        if (w > 4096) jx_fail(c, JINJA_LIMIT, "an indent of %lld is over 4096", (long long)w);
        if (w < 0) w = 0; /* " " * -2 is "" */
        jbuf *sp = jb_new(c, (size_t)w + 1);
        for (int64_t i = 0; i < w; i++)
            jb_addc(c, sp, ' ');
        pre = jb_val(sp);
    }
    bool blank = jv_truthy(p[2]);
    jinja_val s = text(c, in);
    jbuf *t = jb_new(c, (size_t)s.n + 2);
    jb_add(c, t, s.u.s, s.n);
    jb_addc(c, t, '\n');
    jinja_val lines = js_splitlines(c, jb_val(t));
    jbuf *b = jb_new(c, (size_t)s.n + 64);
    if (jv_truthy(p[1])) jb_add(c, b, pre.u.s, pre.n);
    for (uint32_t i = 0; i < lines.u.l->n; i++) {
        jinja_val line = lines.u.l->v[i];
        if (i) {
            jb_addc(c, b, '\n');
            if (blank || line.n) jb_add(c, b, pre.u.s, pre.n);
        }
        jb_add(c, b, line.u.s, line.n);
    }
    return jb_val(b);
}

jinja_val jf_center(jctx *c, jinja_val in, const jargs *a) {
    static const char *const n[] = {"width", NULL};
    jinja_val p[1];
    jx_args(c, a, "center", n, p);
    jinja_val s = text(c, in);
    int64_t w = jx_int_arg(c, p[0], 80, "center"), len = jv_len(c, s);
    if (w > 1 << 20) jx_fail(c, JINJA_LIMIT, "a center width of %lld", (long long)w);
    if (w <= len) return s;
    int64_t total = w - len, left = total / 2 + (total & w & 1);
    jbuf *b = jb_new(c, (size_t)(s.n + total));
    for (int64_t i = 0; i < left; i++)
        jb_addc(c, b, ' ');
    jb_add(c, b, s.u.s, s.n);
    for (int64_t i = left; i < total; i++)
        jb_addc(c, b, ' ');
    return jb_val(b);
}

/* truncate(length=255, killwords=False, end='...', leeway=5), as jinja2's:
 * length >= len(end) and leeway >= 0 asserted (an error, as there), and
 * no sum that can overflow (length + leeway compared as len - length). */
jinja_val jf_truncate(jctx *c, jinja_val in, const jargs *a) {
    static const char *const n[] = {"length", "killwords", "end", "leeway", NULL};
    jinja_val p[4];
    jx_args(c, a, "truncate", n, p);
    jinja_val s = text(c, in), end = jx_given(p[2]) ? text(c, p[2]) : jv_lit("...");
    int64_t length = jx_int_arg(c, p[0], 255, "truncate"),
            leeway = p[3].type == JINJA_NONE ? 5 : jx_int_arg(c, p[3], 5, "truncate");
    int64_t len = jv_len(c, s), elen = jv_len(c, end);
    if (length < elen)
        jx_fail(c, JINJA_ERROR, "expected length >= %lld, got %lld", (long long)elen,
                (long long)length);
    if (leeway < 0) jx_fail(c, JINJA_ERROR, "expected leeway >= 0, got %lld", (long long)leeway);
    if (len <= length || len - length <= leeway) return s;
    size_t cut = 0; /* length - elen < len code points: inside s */
    for (int64_t i = 0; i < length - elen; i++)
        utf8_next(s.u.s, s.n, &cut);
    if (!jv_truthy(p[1])) { /* s[:cut].rsplit(" ", 1)[0]: before the last space, if any */
        const char *sp = cut ? memrchr(s.u.s, ' ', cut) : NULL;
        if (sp) cut = (size_t)(sp - s.u.s);
    }
    jbuf *b = jb_new(c, cut + end.n + 1);
    jb_add(c, b, s.u.s, cut);
    jb_add(c, b, end.u.s, end.n);
    return jb_val(b);
}

jinja_val jf_wordcount(jctx *c, jinja_val in, const jargs *a) {
    jx_no_args(c, a, "wordcount");
    jinja_val s = text(c, in);
    jx_work(c, s.n);
    int64_t words = 0;
    bool in_word = false;
    for (size_t i = 0; i < s.n;) {
        uint32_t cp = utf8_next(s.u.s, s.n, &i);
        bool w = cp_alpha(cp) || cp_digit(cp) || cp == '_';
        words += w && !in_word;
        in_word = w;
    }
    return jinja_int(words);
}

/* escape / e: Markup as it is, anything else escaped; forceescape:
 * escaped whatever it is */
jinja_val jf_escape(jctx *c, jinja_val in, const jargs *a) {
    jx_no_args(c, a, "escape");
    return jv_escape(c, in);
}

jinja_val jf_forceescape(jctx *c, jinja_val in, const jargs *a) {
    jx_no_args(c, a, "forceescape");
    jinja_val s = jv_to_str(c, in);
    s.sub = JSTR_PLAIN;
    return jv_escape(c, s);
}

jinja_val jf_string(jctx *c, jinja_val in, const jargs *a) {
    jx_no_args(c, a, "string");
    return text(c, in);
}

jinja_val jf_format(jctx *c, jinja_val in, const jargs *a) {
    if (a->n && a->nkw)
        jx_fail(c, JINJA_ERROR, "can't handle positional and keyword arguments at the same time");
    if (a->nkw) {
        jinja_val m = jv_map(c, a->nkw, JMAP_DICT);
        for (uint32_t i = 0; i < a->nkw; i++)
            jv_map_put(c, m, a->kwn[i], a->kwv[i]);
        return jx_percent(c, text(c, in), m);
    }
    jinja_val t = jv_list(c, a->n, JLIST_TUPLE);
    for (uint32_t i = 0; i < a->n; i++)
        jv_push(c, t, a->v[i]);
    return jx_percent(c, text(c, in), t);
}

/* ---------------------------------------------------------------------------
 * Numbers
 * ------------------------------------------------------------------------- */

/* Python's int(str, base) for base 10 (and 0/2/8/16 prefixes): optional
 * whitespace and sign, digits with single underscores. */
static bool parse_int(jinja_val s, int base, int64_t *out) {
    char buf[80];
    size_t o = 0;
    for (size_t i = 0; i < s.n && o < sizeof buf - 1; i++)
        if (s.u.s[i] != '_' || (i && i + 1 < s.n)) buf[o++] = s.u.s[i];
    if (o >= sizeof buf - 1 || memchr(s.u.s, 0, s.n)) return false;
    buf[o] = 0;
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, base);
    while (*end == ' ' || (*end >= '\t' && *end <= '\r'))
        end++;
    if (errno || end == buf || *end) return false;
    *out = v;
    return true;
}

static bool parse_float(jinja_val s, double *out) {
    char buf[128];
    if (s.n >= sizeof buf || memchr(s.u.s, 0, s.n)) return false;
    memcpy(buf, s.u.s, s.n);
    buf[s.n] = 0;
    char *end;
    *out = strtod(buf, &end);
    while (*end == ' ' || (*end >= '\t' && *end <= '\r'))
        end++;
    return end != buf && !*end && !strchr(buf, 'x') && !strchr(buf, 'X');
}

jinja_val jf_int(jctx *c, jinja_val in, const jargs *a) {
    static const char *const n[] = {"default", "base", NULL};
    jinja_val p[2];
    jx_args(c, a, "int", n, p);
    jinja_val dflt = jx_given(p[0]) ? p[0] : jinja_int(0);
    int64_t base = jx_int_arg(c, p[1], 10, "int"), i;
    double f;
    if (in.type == JINJA_INT || in.type == JINJA_BOOL)
        return jinja_int(in.type == JINJA_INT ? in.u.i : in.u.b);
    if (in.type == JINJA_FLOAT && isfinite(in.u.f) && fabs(in.u.f) < 9.2e18)
        return jinja_int((int64_t)in.u.f);
    if (in.type == JINJA_STR) {
        bool base_ok = base == 0 || (base >= 2 && base <= 36); /* else Python's ValueError */
        if (base_ok && parse_int(in, (int)base, &i)) return jinja_int(i);
        if (parse_float(in, &f) && isfinite(f) && fabs(f) < 9.2e18) return jinja_int((int64_t)f);
    }
    return dflt;
}

jinja_val jf_float(jctx *c, jinja_val in, const jargs *a) {
    static const char *const n[] = {"default", NULL};
    jinja_val p[1];
    jx_args(c, a, "float", n, p);
    double f;
    if (jv_is_num(in)) return jinja_float(jv_num(in));
    if (in.type == JINJA_STR && parse_float(in, &f)) return jinja_float(f);
    return jx_given(p[0]) ? p[0] : jinja_float(0.0);
}

jinja_val jf_abs(jctx *c, jinja_val in, const jargs *a) {
    jx_no_args(c, a, "abs");
    if (in.type == JINJA_FLOAT) return jinja_float(fabs(in.u.f));
    if (in.type == JINJA_INT || in.type == JINJA_BOOL) {
        int64_t i = in.type == JINJA_INT ? in.u.i : in.u.b;
        if (i == INT64_MIN) jx_fail(c, JINJA_ERROR, "integer overflow in abs");
        return jinja_int(i < 0 ? -i : i);
    }
    jx_fail(c, JINJA_ERROR, "bad operand type for abs(): '%s'", jv_type_name(in));
}

/* round(x, -k) of an int, as Python's: an int, halves to even */
static jinja_val round_int(jctx *c, int64_t x, int64_t prec) {
    if (prec >= 0) return jinja_int(x);
    if (prec < -18) return jinja_int(0);
    __int128 m = 1, ax = x < 0 ? -(__int128)x : x;
    for (int64_t k = 0; k < -prec; k++)
        m *= 10;
    __int128 q = ax / m, r = ax % m;
    if (2 * r > m || (2 * r == m && (q & 1))) q++;
    __int128 out = (x < 0 ? -q : q) * m;
    if (out > INT64_MAX || out < INT64_MIN)
        jx_fail(c, JINJA_ERROR, "integer overflow (beyond 64 bits) in round");
    return jinja_int((int64_t)out);
}

/* floor or ceil of x * 10**prec, over 10**prec, with Python's errors */
static jinja_val round_toward(jctx *c, double x, int64_t prec, bool up) {
    if (prec > 308) jx_fail(c, JINJA_ERROR, "int too large to convert to float");
    double m = pow(10.0, (double)(prec < -400 ? -400 : prec)), y = x * m;
    if (m == 0) jx_fail(c, JINJA_ERROR, "float division by zero");
    if (isinf(y)) jx_fail(c, JINJA_ERROR, "cannot convert float infinity to integer");
    if (isnan(y)) jx_fail(c, JINJA_ERROR, "cannot convert float NaN to integer");
    return jinja_float((up ? ceil(y) : floor(y)) / m);
}

/* round(precision=0, method='common'): Python's round (halves to even on
 * the binary value; an int stays an int), floor or ceil (a float), as
 * jinja2's; the method is checked first, as there. */
jinja_val jf_round(jctx *c, jinja_val in, const jargs *a) {
    static const char *const n[] = {"precision", "method", NULL};
    jinja_val p[2];
    jx_args(c, a, "round", n, p);
    int64_t prec = jx_int_arg(c, p[0], 0, "round");
    jinja_val method = jx_given(p[1]) ? p[1] : jv_lit("common");
    bool common = jv_str_eq(method, "common");
    if (!common && !jv_str_eq(method, "floor") && !jv_str_eq(method, "ceil"))
        jx_fail(c, JINJA_ERROR, "method must be common, ceil or floor");
    if (!jv_is_num(in))
        jx_fail(c, JINJA_ERROR, "type %s doesn't define __round__ method", jv_type_name(in));
    if (!common) return round_toward(c, jv_num(in), prec, jv_str_eq(method, "ceil"));
    if (in.type != JINJA_FLOAT) return round_int(c, in.type == JINJA_INT ? in.u.i : in.u.b, prec);
    double x = in.u.f;
    if (!isfinite(x) || prec > 30) return jinja_float(x); /* every digit kept */
    if (prec < -308) return jinja_float(copysign(0.0, x));
    char buf[64];
    snprintf(buf, sizeof buf, "%.*f", prec < 0 ? 0 : (int)prec, x);
    double m = pow(10.0, (double)prec);
    return jinja_float(prec >= 0 ? strtod(buf, NULL) : nearbyint(x * m) / m);
}

/* ---------------------------------------------------------------------------
 * default, safe, tojson
 * ------------------------------------------------------------------------- */

jinja_val jf_default(jctx *c, jinja_val in, const jargs *a) {
    static const char *const n[] = {"default_value", "boolean", NULL};
    jinja_val p[2];
    jx_args(c, a, "default", n, p);
    bool use = in.type == JINJA_UNDEFINED || (jv_truthy(p[1]) && !jv_truthy(in));
    if (!use) return in;
    return jx_given(p[0]) ? p[0] : jv_lit("");
}

jinja_val jf_safe(jctx *c, jinja_val in, const jargs *a) {
    return jv_markup(jf_string(c, in, a));
}

/* transformers: json.dumps(x, ensure_ascii=False, indent=None,
 * separators=None, sort_keys=False) */
jinja_val jf_tojson(jctx *c, jinja_val in, const jargs *a) {
    static const char *const n[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
    jinja_val p[4];
    jx_args(c, a, "tojson", n, p);
    jjson_opts o = {.ensure_ascii = jv_truthy(p[0]), .sort_keys = jv_truthy(p[3])};
    if (p[1].type == JINJA_STR) {
        o.indent = p[1].u.s;
        o.indent_len = p[1].n;
    } else if (jx_given(p[1]) && p[1].type != JINJA_NONE) {
        int64_t w = jx_int_arg(c, p[1], 0, "tojson indent");
        if (w > 64) jx_fail(c, JINJA_LIMIT, "a tojson indent of %lld", (long long)w);
        static const char spaces[] =
            "                                                                ";
        o.indent = spaces;
        o.indent_len = w < 0 ? 0 : (size_t)w;
    }
    o.item_sep = o.indent ? "," : ", ";
    o.key_sep = ": ";
    if (jx_given(p[2]) && p[2].type != JINJA_NONE) {
        jinja_val s = p[2];
        if (s.type != JINJA_LIST || s.u.l->n != 2 || s.u.l->v[0].type != JINJA_STR ||
            s.u.l->v[1].type != JINJA_STR)
            jx_fail(c, JINJA_ERROR, "tojson separators must be (item_separator, key_separator)");
        o.item_sep = jv_str(c, s.u.l->v[0].u.s, s.u.l->v[0].n).u.s;
        o.key_sep = jv_str(c, s.u.l->v[1].u.s, s.u.l->v[1].n).u.s;
    }
    jbuf *b = jb_new(c, 256);
    jv_write_json(c, b, in, &o, 0);
    return jb_val(b);
}
