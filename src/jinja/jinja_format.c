/* String formatting as Python does it: "fmt" % args (printf-style: s r d
 * i f e g x o c %, flags, width, precision, %(name)s with a dict) and
 * str.format ({} {0} {name} {name.attr} {name[0]}, !r / !s, and the
 * format spec [[fill]align][sign][0][width][,][.precision][type]). Both
 * are sandboxed like the rest: attribute access in fields goes through
 * jx_getattr. Not here: printing values (jinja_print.c). */
#include "jinja/jinja_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* %x %X %o of a negative number as Python writes it: the sign, then the
 * magnitude's digits (C's printf would write the two's complement) */
static int negative_radix(char *out, size_t cap, const char *flags, int width, int prec, char type,
                          uint64_t mag) {
    char f[16] = "%", spec[48], digits[160];
    size_t o = 1;
    bool zero = strchr(flags, '0') && !strchr(flags, '-'), left = strchr(flags, '-');
    if (strchr(flags, '#')) f[o++] = '#';
    if (zero) f[o++] = '0';
    /* zero padding goes between the sign and the digits: one column less;
     * a precision turns it off, as in C */
    int w = zero && width > 0 ? width - 1 : 0;
    snprintf(spec, sizeof spec, "%s*%sll%c", f, prec >= 0 ? ".*" : "", type);
    if (prec >= 0)
        snprintf(digits, sizeof digits, spec, w, prec, mag);
    else
        snprintf(digits, sizeof digits, spec, w, mag);
    int n = (int)strlen(digits) + 1;
    int pad = !zero && width > n ? width - n : 0;
    return snprintf(out, cap, "%*s-%s%*s", left ? 0 : pad, "", digits, left ? pad : 0, "");
}

/* One conversion with C's printf, which writes these types as Python
 * (negative %x %o aside: negative_radix). */
static void c_format(jctx *c, jbuf *b, const char *flags, int width, int prec, char type,
                     jinja_val v) {
    char spec[48], out[512];
    int n;
    if (strchr("diouxX", type)) {
        int64_t i = v.type == JINJA_FLOAT ? (int64_t)v.u.f : v.type == JINJA_INT ? v.u.i : v.u.b;
        if (type == 'i' || type == 'u') type = 'd';
        if (i < 0 && type != 'd') {
            uint64_t mag = (uint64_t)0 - (uint64_t)i;
            n = negative_radix(out, sizeof out, flags, width, prec, type, mag);
            if (n < 0 || (size_t)n >= sizeof out)
                jx_fail(c, JINJA_LIMIT, "a formatted number is too wide");
            jb_add(c, b, out, (size_t)n);
            return;
        }
        snprintf(spec, sizeof spec, "%%%s%s%s%s%c", flags, width >= 0 ? "*" : "",
                 prec >= 0 ? ".*" : "", "ll", type);
        if (width >= 0 && prec >= 0)
            n = snprintf(out, sizeof out, spec, width, prec, (long long)i);
        else if (width >= 0)
            n = snprintf(out, sizeof out, spec, width, (long long)i);
        else if (prec >= 0)
            n = snprintf(out, sizeof out, spec, prec, (long long)i);
        else
            n = snprintf(out, sizeof out, spec, (long long)i);
    } else {
        double f = jv_num(v);
        snprintf(spec, sizeof spec, "%%%s*.*%c", flags, type);
        n = snprintf(out, sizeof out, spec, width < 0 ? 0 : width, prec < 0 ? 6 : prec, f);
    }
    if (n < 0 || (size_t)n >= sizeof out) jx_fail(c, JINJA_LIMIT, "a formatted number is too wide");
    jb_add(c, b, out, (size_t)n);
}

/* Pads text to width code points (left-aligned with '-'). */
static void padded(jctx *c, jbuf *b, jinja_val s, int width, bool left) {
    int64_t len = (int64_t)utf8_count(s.u.s, s.n);
    if (!left)
        for (int64_t i = len; i < width; i++)
            jb_addc(c, b, ' ');
    jb_add(c, b, s.u.s, s.n);
    if (left)
        for (int64_t i = len; i < width; i++)
            jb_addc(c, b, ' ');
}

static jinja_val next_arg(jctx *c, jinja_val args, uint32_t *k) {
    bool tuple = args.type == JINJA_LIST && args.sub == JLIST_TUPLE;
    uint32_t n = tuple ? args.u.l->n : 1;
    if (*k >= n) jx_fail(c, JINJA_ERROR, "not enough arguments for format string");
    return tuple ? args.u.l->v[(*k)++] : ((*k)++, args);
}

/* The decimal number at s[*i], saturated at 10^6 (then refused as too
 * wide), *i past it; -1 when there is none. */
static int number_at(const char *s, size_t n, size_t *i) {
    int v = -1;
    for (; *i < n && s[*i] >= '0' && s[*i] <= '9'; (*i)++)
        v = v < 0 ? s[*i] - '0' : v >= 1000000 ? v : v * 10 + (s[*i] - '0');
    return v;
}

/* %c: one code point, given as an int or a one-character string */
static jinja_val percent_c(jctx *c, jinja_val v) {
    char u[4];
    if (v.type == JINJA_STR) {
        if (utf8_count(v.u.s, v.n) != 1) jx_fail(c, JINJA_ERROR, "%%c requires int or char");
        return v;
    }
    if (v.type != JINJA_INT && v.type != JINJA_BOOL)
        jx_fail(c, JINJA_ERROR, "%%c requires int or char");
    int64_t cp = jx_int_arg(c, v, 0, "%c");
    if (cp < 0 || cp > 0x10FFFF) jx_fail(c, JINJA_ERROR, "%%c arg not in range(0x110000)");
    size_t n = utf8_put((uint32_t)cp, u);
    return jv_str(c, u, n);
}

/* One %-spec at fmt[*i] (after the '%'). */
static void percent_one(jctx *c, jbuf *b, jinja_val fmt, size_t *i, jinja_val args, uint32_t *k) {
    const char *s = fmt.u.s;
    size_t n = fmt.n;
    jinja_val v = {0};
    bool have = false;
    if (*i < n && s[*i] == '(') {
        const char *close = memchr(s + *i, ')', n - *i);
        size_t at = close ? (size_t)(close - s) : n; /* the ')' */
        if (!close || args.type != JINJA_MAP) jx_fail(c, JINJA_ERROR, "format requires a mapping");
        jinja_val key = {.type = JINJA_STR, .n = (uint32_t)(at - *i - 1), .u.s = s + *i + 1};
        if (!jv_map_get(c, args.u.m, key, &v))
            jx_fail(c, JINJA_ERROR, "KeyError: '%.*s'", (int)key.n, key.u.s);
        have = true;
        *i = at + 1;
    }
    char flags[8] = "";
    size_t nf = 0;
    while (*i < n && strchr("-+ #0", s[*i]) && nf < 6)
        flags[nf++] = s[(*i)++];
    int width = -1, prec = -1;
    if (*i < n && s[*i] == '*') {
        int64_t w = jx_int_arg(c, next_arg(c, args, k), 0, "width");
        width = w < 0 ? 0 : w > 1000000 ? 1000000 : (int)w;
        (*i)++;
    } else {
        width = number_at(s, n, i);
    }
    if (*i < n && s[*i] == '.') {
        (*i)++;
        prec = number_at(s, n, i);
        if (prec < 0) prec = 0;
    }
    while (*i < n && strchr("hlL", s[*i]))
        (*i)++;
    if (*i >= n) jx_fail(c, JINJA_ERROR, "incomplete format");
    char type = s[(*i)++];
    if (type == '%') {
        jb_addc(c, b, '%');
        return;
    }
    if (width > 4096 || prec > 4096) jx_fail(c, JINJA_LIMIT, "a format width over 4096");
    if (!have) v = next_arg(c, args, k);
    bool left = strchr(flags, '-') != NULL;
    if (type == 's' || type == 'r' || type == 'a') {
        jbuf *t = jb_new(c, 32);
        if (type == 's')
            jv_write(c, t, v);
        else
            jv_write_repr(c, t, v);
        jinja_val text = jb_val(t);
        if (jv_is_markup(fmt) && !jv_is_markup(v)) text = jv_escape(c, text); /* Markup % */
        if (prec >= 0 && (int64_t)utf8_count(text.u.s, text.n) > prec) {
            size_t at = 0;
            for (int q = 0; q < prec; q++)
                utf8_next(text.u.s, text.n, &at);
            text.n = (uint32_t)at;
        }
        padded(c, b, text, width, left);
    } else if (type == 'c') {
        padded(c, b, percent_c(c, v), width, left);
    } else if (strchr("diouxXeEfFgG", type)) {
        if (v.type == JINJA_UNDEFINED) jv_undef_fail(c, v);
        if (!jv_is_num(v) || (v.type == JINJA_FLOAT && strchr("oxX", type)))
            jx_fail(c, JINJA_ERROR, "%%%c format: a number is required, not %s", type,
                    jv_type_name(v));
        c_format(c, b, flags, width, prec, type, v);
    } else {
        jx_fail(c, JINJA_ERROR, "unsupported format character '%c'", type);
    }
}

jinja_val jx_percent(jctx *c, jinja_val fmt, jinja_val args) {
    jbuf *b = jb_new(c, (size_t)fmt.n + 16);
    uint32_t k = 0;
    size_t i = 0, run = 0;
    while (i < fmt.n) {
        if (fmt.u.s[i] != '%') {
            i++;
            run++;
            continue;
        }
        jb_add(c, b, fmt.u.s + i - run, run);
        run = 0;
        i++;
        percent_one(c, b, fmt, &i, args, &k);
    }
    jb_add(c, b, fmt.u.s + i - run, run);
    bool tuple = args.type == JINJA_LIST && args.sub == JLIST_TUPLE;
    if (args.type != JINJA_MAP && k < (tuple ? args.u.l->n : 1))
        jx_fail(c, JINJA_ERROR, "not all arguments converted during string formatting");
    jinja_val r = jb_val(b);
    r.sub = fmt.sub;
    return r;
}

/* ---------------------------------------------------------------------------
 * str.format
 * ------------------------------------------------------------------------- */

typedef struct fspec {
    char fill, align, sign, type;
    bool zero, comma;
    int width, prec;
} fspec;

static void parse_spec(jctx *c, const char *s, size_t n, fspec *f) {
    size_t i = 0;
    *f = (fspec){.fill = ' ', .width = -1, .prec = -1};
    if (n >= 2 && strchr("<>^=", s[1])) {
        f->fill = s[0];
        f->align = s[1];
        i = 2;
    } else if (n >= 1 && strchr("<>^=", s[0])) {
        f->align = s[0];
        i = 1;
    }
    if (i < n && strchr("+- ", s[i])) f->sign = s[i++];
    if (i < n && s[i] == '0') {
        f->zero = true;
        i++;
    }
    f->width = number_at(s, n, &i);
    if (i < n && s[i] == ',') {
        f->comma = true;
        i++;
    }
    if (i < n && s[i] == '.') {
        i++;
        f->prec = number_at(s, n, &i);
        if (f->prec < 0) f->prec = 0;
    }
    if (i < n) f->type = s[i++];
    if (i != n || f->width > 4096 || f->prec > 4096 || f->comma)
        jx_fail(c, JINJA_ERROR, "Invalid format specifier '%.*s'", (int)n, s);
}

static void format_value(jctx *c, jbuf *b, jinja_val v, const fspec *f) {
    jbuf *t = jb_new(c, 32);
    char type = f->type;
    bool num = jv_is_num(v) && v.type != JINJA_BOOL;
    if (num && (type || f->prec >= 0) && type != 's') {
        char flags[4] = "";
        if (f->sign == '+' || f->sign == ' ') flags[0] = f->sign;
        if (!type) type = v.type == JINJA_FLOAT ? 'g' : 'd';
        if (type == '%') {
            c_format(c, t, flags, -1, f->prec < 0 ? 6 : f->prec, 'f', jinja_float(jv_num(v) * 100));
            jb_addc(c, t, '%');
        } else if (strchr("dxXo", type)) {
            if (v.type == JINJA_FLOAT)
                jx_fail(c, JINJA_ERROR, "Unknown format code '%c' for float", type);
            c_format(c, t, flags, -1, -1, type, v);
        } else {
            c_format(c, t, flags, -1, f->prec, type, v);
        }
    } else {
        if (type && type != 's')
            jx_fail(c, JINJA_ERROR, "Unknown format code '%c' for %s", type, jv_type_name(v));
        jv_write(c, t, v);
        if (f->prec >= 0 && t->n) {
            size_t at = 0;
            for (int q = 0; q < f->prec && at < t->n; q++)
                utf8_next(t->p, t->n, &at);
            t->n = at;
        }
    }
    int64_t len = (int64_t)utf8_count(t->p, t->n), pad = f->width > len ? f->width - len : 0;
    char align = f->align ? f->align : f->zero && num ? '=' : num ? '>' : '<';
    char fill = f->zero && !f->align ? '0' : f->fill;
    int64_t left = align == '>' || align == '=' ? pad : align == '^' ? pad / 2 : 0;
    size_t sign = align == '=' && t->n && (t->p[0] == '-' || t->p[0] == '+' || t->p[0] == ' ');
    jb_add(c, b, t->p, sign);
    for (int64_t i = 0; i < left; i++)
        jb_addc(c, b, fill);
    jb_add(c, b, t->p + sign, t->n - sign);
    for (int64_t i = left; i < pad; i++)
        jb_addc(c, b, fill);
}

/* The value a field name names: an argument, then .attr / [key] parts. */
static jinja_val field_value(jctx *c, const char *s, size_t n, const jargs *a, uint32_t *autonum) {
    size_t i = 0;
    while (i < n && s[i] != '.' && s[i] != '[')
        i++;
    jinja_val v;
    if (i == 0) {
        if (*autonum >= a->n)
            jx_fail(c, JINJA_ERROR, "Replacement index %u out of range", *autonum);
        v = a->v[(*autonum)++];
    } else if (s[0] >= '0' && s[0] <= '9') {
        uint32_t k = (uint32_t)strtoul(s, NULL, 10);
        if (k >= a->n) jx_fail(c, JINJA_ERROR, "Replacement index %u out of range", k);
        v = a->v[k];
    } else {
        uint32_t k = 0;
        while (k < a->nkw && !(a->kwn[k].n == i && !memcmp(a->kwn[k].u.s, s, i)))
            k++;
        if (k == a->nkw) jx_fail(c, JINJA_ERROR, "KeyError: '%.*s'", (int)i, s);
        v = a->kwv[k];
    }
    while (i < n) {
        size_t j = i + 1;
        char close = s[i] == '[' ? ']' : 0;
        while (j < n && (close ? s[j] != ']' : s[j] != '.' && s[j] != '['))
            j++;
        jinja_val key = {.type = JINJA_STR, .n = (uint32_t)(j - i - 1), .u.s = s + i + 1};
        if (close && key.n && key.u.s[0] >= '0' && key.u.s[0] <= '9')
            key = jinja_int(strtoll(key.u.s, NULL, 10));
        v = close ? jx_getitem(c, v, key) : jx_getattr(c, v, key);
        i = close ? j + 1 : j;
    }
    return v;
}

jinja_val jx_str_format(jctx *c, jinja_val fmt, const jargs *a) {
    jbuf *b = jb_new(c, (size_t)fmt.n + 16);
    const char *s = fmt.u.s;
    size_t n = fmt.n;
    uint32_t autonum = 0;
    for (size_t i = 0; i < n; i++) {
        if ((s[i] == '{' || s[i] == '}') && i + 1 < n && s[i + 1] == s[i]) {
            jb_addc(c, b, s[i++]);
            continue;
        }
        if (s[i] == '}') jx_fail(c, JINJA_ERROR, "Single '}' encountered in format string");
        if (s[i] != '{') {
            jb_addc(c, b, s[i]);
            continue;
        }
        const char *end = memchr(s + i, '}', n - i);
        size_t fe = end ? (size_t)(end - s) : n, name_end = i + 1;
        if (!end) jx_fail(c, JINJA_ERROR, "Single '{' encountered in format string");
        while (name_end < fe && s[name_end] != '!' && s[name_end] != ':')
            name_end++;
        jinja_val v = field_value(c, s + i + 1, name_end - i - 1, a, &autonum);
        size_t spec_at = name_end;
        if (spec_at < fe && s[spec_at] == '!') {
            if (spec_at + 1 < fe && s[spec_at + 1] == 'r') {
                jbuf *t = jb_new(c, 32);
                jv_write_repr(c, t, v);
                v = jb_val(t);
            } else {
                v = jv_to_str(c, v);
            }
            spec_at += 2;
        }
        fspec f;
        bool has = spec_at < fe && s[spec_at] == ':';
        parse_spec(c, s + spec_at + has, has ? fe - spec_at - 1 : 0, &f);
        format_value(c, b, v, &f);
        i = fe;
    }
    return jb_val(b);
}
