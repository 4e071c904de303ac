/* Values as text, the way Python writes them: str() for {{ }} and the
 * string filter (None, True, 1.0, ['a', {'k': None}]), repr() inside
 * containers (Python's quoting and escapes), float repr (the shortest text
 * that reads back), and json.dumps for tojson with transformers' arguments
 * (ensure_ascii, indent, separators, sort_keys). */
#include "jinja/jinja_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------
 * Numbers
 * ------------------------------------------------------------------------- */

/* Python's repr(float): the shortest digits that read back, fixed
 * notation for decimal exponents -4..15 (with ".0" when integral), else
 * d.ddde+XX. */
int jv_float_repr(double f, char *buf, size_t cap) {
    if (isnan(f)) return snprintf(buf, cap, "nan");
    if (isinf(f)) return snprintf(buf, cap, f < 0 ? "-inf" : "inf");
    if (f == 0) return snprintf(buf, cap, signbit(f) ? "-0.0" : "0.0");
    char e[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, f);
        if (strtod(e, NULL) == f) break;
    }
    /* e: [-]d[.ddd]e[+-]XX */
    char digits[24] = {0};
    size_t nd = 0;
    const char *q = e;
    bool neg = *q == '-';
    if (neg) q++;
    for (; *q && *q != 'e'; q++)
        if (*q != '.') digits[nd++] = *q;
    int exp = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    char out[64];
    size_t o = 0;
    if (neg) out[o++] = '-';
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            out[o++] = '0';
            out[o++] = '.';
            for (int k = -1; k > exp; k--)
                out[o++] = '0';
            memcpy(out + o, digits, nd);
            o += nd;
        } else {
            for (int k = 0; k <= exp; k++)
                out[o++] = (size_t)k < nd ? digits[k] : '0';
            out[o++] = '.';
            if ((size_t)exp + 1 < nd) {
                memcpy(out + o, digits + exp + 1, nd - (size_t)exp - 1);
                o += nd - (size_t)exp - 1;
            } else {
                out[o++] = '0';
            }
        }
        out[o] = 0;
    } else {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            memcpy(out + o, digits + 1, nd - 1);
            o += nd - 1;
        }
        snprintf(out + o, sizeof out - o, "e%c%02d", exp < 0 ? '-' : '+', abs(exp));
    }
    return snprintf(buf, cap, "%s", out);
}

static void write_int(jctx *c, jbuf *b, int64_t i) {
    char t[24];
    int n = snprintf(t, sizeof t, "%lld", (long long)i);
    jb_add(c, b, t, (size_t)n);
}

static void write_float(jctx *c, jbuf *b, double f) {
    char t[40];
    int n = jv_float_repr(f, t, sizeof t);
    jb_add(c, b, t, (size_t)n);
}

static void json_float(jctx *c, jbuf *b, double f) {
    if (isnan(f))
        jb_adds(c, b, "NaN");
    else if (isinf(f))
        jb_adds(c, b, f < 0 ? "-Infinity" : "Infinity");
    else
        write_float(c, b, f);
}

/* None, booleans and numbers, which str() and json.dumps write alike but
 * for the spelling (None/null, True/true, nan/NaN). false, writing
 * nothing, when v is none of these. */
static bool write_scalar(jctx *c, jbuf *b, jinja_val v, bool json) {
    switch (v.type) {
    case JINJA_NONE:
        jb_adds(c, b, json ? "null" : "None");
        return true;
    case JINJA_BOOL:
        jb_adds(c, b, v.u.b ? (json ? "true" : "True") : (json ? "false" : "False"));
        return true;
    case JINJA_INT:
        write_int(c, b, v.u.i);
        return true;
    case JINJA_FLOAT:
        if (json)
            json_float(c, b, v.u.f);
        else
            write_float(c, b, v.u.f);
        return true;
    default:
        return false;
    }
}

/* ---------------------------------------------------------------------------
 * str() and repr()
 * ------------------------------------------------------------------------- */

/* How one code point is written: its escape into esc[0..cap) (the length
 * returned), or 0 to copy it as it is. arg: the writer's own. */
typedef int escape_fn(uint32_t cp, char *esc, size_t cap, const void *arg);

/* s[0..n) into b with escape's escapes; the bytes between them, invalid
 * UTF-8 included, copied as they are, each run at once. */
static void write_escaped(jctx *c, jbuf *b, const char *s, size_t n, escape_fn *escape,
                          const void *arg) {
    size_t run = 0;
    for (size_t i = 0; i < n;) {
        size_t at = i;
        unsigned char ch = (unsigned char)s[i];
        uint32_t cp = ch < 0x80 ? (i++, ch) : utf8_next(s, n, &i);
        char esc[16];
        int k = escape(cp, esc, sizeof esc, arg);
        if (!k) {
            run += i - at;
            continue;
        }
        jb_add(c, b, s + at - run, run);
        run = 0;
        jb_add(c, b, esc, (size_t)k);
    }
    jb_add(c, b, s + n - run, run);
}

/* repr(): the quote (*arg) and backslash escaped, \n \r \t, and what
 * Python does not print as \xXX, \uXXXX or \UXXXXXXXX */
static int repr_escape(uint32_t cp, char *esc, size_t cap, const void *arg) {
    char quote = *(const char *)arg;
    if (cp == '\\' || cp == (uint32_t)quote) return snprintf(esc, cap, "\\%c", (char)cp);
    if (cp == '\n' || cp == '\r' || cp == '\t')
        return snprintf(esc, cap, "\\%c", cp == '\n' ? 'n' : cp == '\r' ? 'r' : 't');
    if (!cp_printable(cp))
        return snprintf(esc, cap,
                        cp < 0x100     ? "\\x%02x"
                        : cp < 0x10000 ? "\\u%04x"
                                       : "\\U%08x",
                        cp);
    return 0;
}

static void repr_str(jctx *c, jbuf *b, const char *s, size_t n) {
    bool sq = memchr(s, '\'', n) != NULL, dq = memchr(s, '"', n) != NULL;
    char quote = sq && !dq ? '"' : '\'';
    jb_addc(c, b, quote);
    write_escaped(c, b, s, n, repr_escape, &quote);
    jb_addc(c, b, quote);
}

static void write_seq(jctx *c, jbuf *b, jinja_val v) {
    if (v.sub == JLIST_GEN) { /* Python prints the object's address here */
        jb_adds(c, b, "<generator object>");
        return;
    }
    static const char *const open[] = {"[", "(", "dict_items([", "dict_keys([", "dict_values(["};
    static const char *const close[] = {"]", ")", "])", "])", "])"};
    int sub = v.sub < 5 ? v.sub : 0;
    jb_adds(c, b, open[sub]);
    for (uint32_t i = 0; i < v.u.l->n; i++) {
        if (i) jb_add(c, b, ", ", 2);
        jv_write_repr(c, b, v.u.l->v[i]);
    }
    if (sub == JLIST_TUPLE && v.u.l->n == 1) jb_addc(c, b, ',');
    jb_adds(c, b, close[sub]);
}

static void write_map(jctx *c, jbuf *b, jinja_val v) {
    if (v.sub == JMAP_NAMESPACE) jb_adds(c, b, "<Namespace ");
    jb_addc(c, b, '{');
    for (uint32_t i = 0; i < v.u.m->n; i++) {
        if (i) jb_add(c, b, ", ", 2);
        jv_write_repr(c, b, v.u.m->k[i]);
        jb_add(c, b, ": ", 2);
        jv_write_repr(c, b, v.u.m->v[i]);
    }
    jb_addc(c, b, '}');
    if (v.sub == JMAP_NAMESPACE) jb_addc(c, b, '>');
}

static void write_common(jctx *c, jbuf *b, jinja_val v) {
    jx_deeper(c, "values nested");
    switch (v.type) {
    case JINJA_LIST:
        write_seq(c, b, v);
        break;
    case JINJA_MAP:
        write_map(c, b, v);
        break;
    case JINJA_LOOP: {
        const jloop *l = v.u.p;
        char t[64];
        int n = snprintf(t, sizeof t, "<LoopContext %u/%u>", l->i + 1, l->n);
        jb_add(c, b, t, (size_t)n);
        break;
    }
    case JINJA_FUNC:
        jb_adds(c, b, v.sub == JFN_MACRO ? "<Macro>" : "<built-in function>");
        break;
    default:
        write_scalar(c, b, v, false);
        break;
    }
    c->depth--;
}

void jv_write(jctx *c, jbuf *b, jinja_val v) {
    if (v.type == JINJA_STR)
        jb_add(c, b, v.u.s, v.n);
    else if (v.type != JINJA_UNDEFINED)
        write_common(c, b, v);
}

void jv_write_repr(jctx *c, jbuf *b, jinja_val v) {
    if (v.type == JINJA_STR)
        repr_str(c, b, v.u.s, v.n);
    else if (v.type == JINJA_UNDEFINED)
        jb_adds(c, b, "Undefined");
    else
        write_common(c, b, v);
}

jinja_val jv_to_str(jctx *c, jinja_val v) {
    if (v.type == JINJA_STR) return v;
    if (v.type == JINJA_UNDEFINED) return jv_lit("");
    if (v.type == JINJA_NONE) return jv_lit("None");
    if (v.type == JINJA_BOOL) return jv_lit(v.u.b ? "True" : "False");
    jbuf *b = jb_new(c, 32);
    jv_write(c, b, v);
    return jb_val(b);
}

/* HTML: & < > " ' as entities */
static int html_escape(uint32_t cp, char *esc, size_t cap, const void *arg) {
    const char *e = cp == '&'    ? "&amp;"
                    : cp == '<'  ? "&lt;"
                    : cp == '>'  ? "&gt;"
                    : cp == '"'  ? "&#34;"
                    : cp == '\'' ? "&#39;"
                                 : NULL;
    return e ? snprintf(esc, cap, "%s", e) : 0;
}

jinja_val jv_escape(jctx *c, jinja_val v) {
    if (jv_is_markup(v)) return v;
    jinja_val s = jv_to_str(c, v);
    jbuf *b = jb_new(c, (size_t)s.n + 16);
    write_escaped(c, b, s.u.s, s.n, html_escape, NULL);
    return jv_markup(jb_val(b));
}

/* ---------------------------------------------------------------------------
 * json.dumps
 * ------------------------------------------------------------------------- */

/* json.dumps: " and backslash, \n \r \t \b \f, other controls as \uXXXX,
 * and with ensure_ascii (*arg) everything past ASCII, as surrogate pairs
 * beyond the BMP */
static int json_escape(uint32_t cp, char *esc, size_t cap, const void *arg) {
    bool ascii = *(const bool *)arg;
    if (cp == '"' || cp == '\\') return snprintf(esc, cap, "\\%c", (char)cp);
    if (cp == '\n' || cp == '\r' || cp == '\t' || cp == '\b' || cp == '\f')
        return snprintf(esc, cap, "\\%c",
                        cp == '\n'   ? 'n'
                        : cp == '\r' ? 'r'
                        : cp == '\t' ? 't'
                        : cp == '\b' ? 'b'
                                     : 'f');
    if (cp < 0x20 || (ascii && cp >= 0x7F && cp < 0x10000))
        return snprintf(esc, cap, "\\u%04x", cp);
    if (ascii && cp >= 0x10000)
        return snprintf(esc, cap, "\\u%04x\\u%04x", 0xD800 + ((cp - 0x10000) >> 10),
                        0xDC00 + ((cp - 0x10000) & 0x3FF));
    return 0;
}

static void json_str(jctx *c, jbuf *b, const char *s, size_t n, bool ascii) {
    jb_addc(c, b, '"');
    write_escaped(c, b, s, n, json_escape, &ascii);
    jb_addc(c, b, '"');
}

static void json_newline(jctx *c, jbuf *b, const jjson_opts *o, uint32_t level) {
    jb_addc(c, b, '\n');
    for (uint32_t i = 0; i < level; i++)
        jb_add(c, b, o->indent, o->indent_len);
}

/* A dict key as json.dumps writes it: strings as they are; numbers, bools
 * and None as their JSON text. */
static jinja_val json_key(jctx *c, jinja_val k) {
    if (k.type == JINJA_STR) return k;
    if (k.type == JINJA_BOOL) return jv_lit(k.u.b ? "true" : "false");
    if (k.type == JINJA_NONE) return jv_lit("null");
    if (k.type == JINJA_INT || k.type == JINJA_FLOAT) {
        jbuf *t = jb_new(c, 32);
        if (k.type == JINJA_INT)
            write_int(c, t, k.u.i);
        else
            json_float(c, t, k.u.f);
        return jb_val(t);
    }
    jx_fail(c, JINJA_ERROR, "keys must be str, int, float, bool or None, not %s", jv_type_name(k));
}

static int cmp_keys(const void *a, const void *b) {
    const jinja_val *x = a, *y = b;
    int r = memcmp(x->u.s, y->u.s, x->n < y->n ? x->n : y->n);
    return r ? r : x->n < y->n ? -1 : x->n > y->n;
}

static void json_map(jctx *c, jbuf *b, jinja_val v, const jjson_opts *o, uint32_t level) {
    uint32_t n = v.u.m->n;
    if (!n) {
        jb_add(c, b, "{}", 2);
        return;
    }
    /* pairs: converted key, then the index of its value */
    jinja_val *keys = jx_alloc(c, (size_t)n * 2 * sizeof *keys);
    for (uint32_t i = 0; i < n; i++) {
        if (o->sort_keys && v.u.m->k[i].type != JINJA_STR)
            jx_fail(c, JINJA_ERROR, "'<' not supported between instances of '%s' and 'str'",
                    jv_type_name(v.u.m->k[i]));
        keys[2 * i] = json_key(c, v.u.m->k[i]);
        keys[2 * i + 1] = jinja_int(i);
    }
    if (o->sort_keys) { /* n log n comparisons, each a value's worth */
        uint64_t lg = 1;
        while ((1ull << lg) < n)
            lg++;
        jx_work(c, (uint64_t)n * lg * JX_WORK_VALUE);
        qsort(keys, n, 2 * sizeof *keys, cmp_keys);
    }
    jb_addc(c, b, '{');
    for (uint32_t i = 0; i < n; i++) {
        if (i) jb_adds(c, b, o->item_sep);
        if (o->indent) json_newline(c, b, o, level + 1);
        json_str(c, b, keys[2 * i].u.s, keys[2 * i].n, o->ensure_ascii);
        jb_adds(c, b, o->key_sep);
        jv_write_json(c, b, v.u.m->v[keys[2 * i + 1].u.i], o, level + 1);
    }
    if (o->indent) json_newline(c, b, o, level);
    jb_addc(c, b, '}');
}

void jv_write_json(jctx *c, jbuf *b, jinja_val v, const jjson_opts *o, uint32_t level) {
    jx_deeper(c, "values nested");
    switch (v.type) {
    case JINJA_STR:
        json_str(c, b, v.u.s, v.n, o->ensure_ascii);
        break;
    case JINJA_LIST:
        if (v.sub == JLIST_GEN)
            jx_fail(c, JINJA_ERROR, "Object of type generator is not JSON serializable");
        if (!v.u.l->n) {
            jb_add(c, b, "[]", 2);
            break;
        }
        jb_addc(c, b, '[');
        for (uint32_t i = 0; i < v.u.l->n; i++) {
            if (i) jb_adds(c, b, o->item_sep);
            if (o->indent) json_newline(c, b, o, level + 1);
            jv_write_json(c, b, v.u.l->v[i], o, level + 1);
        }
        if (o->indent) json_newline(c, b, o, level);
        jb_addc(c, b, ']');
        break;
    case JINJA_MAP:
        if (v.sub != JMAP_NAMESPACE) {
            json_map(c, b, v, o, level);
            break;
        }
        /* fall through */
    default:
        if (!write_scalar(c, b, v, true))
            jx_fail(c, JINJA_ERROR, "Object of type %s is not JSON serializable", jv_type_name(v));
    }
    c->depth--;
}
