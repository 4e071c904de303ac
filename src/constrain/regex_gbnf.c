/* Regex -> GBNF (regex_gbnf.h): a recursive descent over the pattern that
 * writes the GBNF expression as it goes, one element per regex atom (so a
 * quantifier applies to that atom alone, as in the regex), every character
 * escaped as \uHHHH / \UHHHHHHHH unless it is a letter or a digit. */
#include "constrain/regex_gbnf.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/utf8.h"
#include "constrain/grammar.h"

typedef struct rx {
    const unsigned char *s;
    size_t n, pos;
    int depth;
    sbuf *out;
    tps_err *err;
} rx;

static int rx_fail(rx *r, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int rx_fail(rx *r, size_t at, const char *fmt, ...) {
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tps_fail(r->err, TPS_EINVAL, "regex: column %zu: %s", at + 1, msg);
}

static int peek(const rx *r) {
    return r->pos < r->n ? r->s[r->pos] : -1;
}

/* One UTF-8 code point at pos; 0 when invalid. */
static size_t decode(const rx *r, uint32_t *cp) {
    return utf8_decode(r->s + r->pos, r->n - r->pos, cp);
}

/* A code point as GBNF writes it inside "..." or [...]. */
static void put_cp(sbuf *o, uint32_t cp) {
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9'))
        sbuf_printf(o, "%c", (char)cp);
    else if (cp <= 0xFFFF)
        sbuf_printf(o, "\\u%04X", cp);
    else
        sbuf_printf(o, "\\U%08X", cp);
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The ranges of a shorthand class (\d \w \s) into o as class text. */
static void put_shorthand(sbuf *o, int c) {
    switch (c) {
    case 'd':
        sbuf_adds(o, "0-9");
        break;
    case 'w':
        sbuf_adds(o, "a-zA-Z0-9_");
        break;
    default: /* s */
        sbuf_adds(o, " \\t\\n\\r\\u000C\\u000B");
        break;
    }
}

/* \xHH or \uHHHH (pos after the letter c; at: the backslash). Returns 1
 * with *cp set, <0 on error. */
static int hex_escape(rx *r, int c, size_t at, uint32_t *cp) {
    int digits = c == 'x' ? 2 : 4;
    uint32_t v = 0;
    for (int i = 0; i < digits; i++) {
        int h = hexval(peek(r));
        if (h < 0) return rx_fail(r, at, "'\\%c' needs %d hex digits", c, digits);
        v = v * 16 + (uint32_t)h;
        r->pos++;
    }
    if (v >= 0xD800 && v <= 0xDFFF)
        return rx_fail(r, at, "'\\u%04X' is a surrogate, not a character", v);
    *cp = v;
    return 1;
}

/* An escape after '\' (pos at the letter). in_class: inside [...].
 * Returns 1 with *cp set for a single character, 2 when it wrote a
 * shorthand class itself (class or element), <0 on error. */
static int escape(rx *r, bool in_class, uint32_t *cp) {
    size_t at = r->pos - 1;
    int c = peek(r);
    if (c < 0) return rx_fail(r, at, "the pattern ends with a lone backslash");
    r->pos++;
    switch (c) {
    case 'n':
        *cp = '\n';
        return 1;
    case 't':
        *cp = '\t';
        return 1;
    case 'r':
        *cp = '\r';
        return 1;
    case 'f':
        *cp = '\f';
        return 1;
    case 'v':
        *cp = '\v';
        return 1;
    case '0':
        *cp = 0;
        return 1;
    case 'x':
    case 'u':
        return hex_escape(r, c, at, cp);
    case 'd':
    case 'w':
    case 's':
        if (in_class) {
            put_shorthand(r->out, c);
        } else {
            sbuf_adds(r->out, "[");
            put_shorthand(r->out, c);
            sbuf_adds(r->out, "]");
        }
        return 2;
    case 'D':
    case 'W':
    case 'S':
        if (in_class)
            return rx_fail(r, at, "negated shorthand '\\%c' inside a class is not supported", c);
        sbuf_adds(r->out, "[^");
        put_shorthand(r->out, c + ('a' - 'A'));
        sbuf_adds(r->out, "]");
        return 2;
    case 'b':
    case 'B':
        return rx_fail(r, at, "word boundaries (\\%c) are not supported", c);
    case 'A':
    case 'Z':
    case 'z':
    case 'G':
        return rx_fail(r, at, "anchors (\\%c) are not supported", c);
    case 'p':
    case 'P':
        return rx_fail(r, at, "Unicode property classes (\\%c{...}) are not supported", c);
    case 'k':
        return rx_fail(r, at, "backreferences (\\k) are not supported");
    default:
        if (c >= '1' && c <= '9')
            return rx_fail(r, at, "backreferences (\\%c) are not supported", c);
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
            return rx_fail(r, at, "unknown escape '\\%c'", c);
        *cp = (uint32_t)c; /* escaped punctuation: itself */
        return 1;
    }
}

static int parse_class(rx *r) {
    size_t at = r->pos - 1;
    sbuf_adds(r->out, "[");
    if (peek(r) == '^') {
        sbuf_adds(r->out, "^");
        r->pos++;
    }
    bool first = true;
    for (;;) {
        int c = peek(r);
        if (c < 0) return rx_fail(r, at, "'[' is never closed");
        if (c == ']' && !first) {
            r->pos++;
            break;
        }
        first = false;
        uint32_t lo;
        if (c == '\\') {
            r->pos++;
            int k = escape(r, true, &lo);
            if (k < 0) return k;
            if (k == 2) continue;
        } else {
            size_t len = decode(r, &lo);
            if (!len) return rx_fail(r, r->pos, "invalid UTF-8");
            r->pos += len;
        }
        put_cp(r->out, lo);
        if (peek(r) == '-' && r->pos + 1 < r->n && r->s[r->pos + 1] != ']') {
            size_t dash = r->pos;
            r->pos++;
            uint32_t hi;
            if (peek(r) == '\\') {
                r->pos++;
                int k = escape(r, true, &hi);
                if (k < 0) return k;
                if (k == 2) return rx_fail(r, dash, "a range cannot end with a class shorthand");
            } else {
                size_t len = decode(r, &hi);
                if (!len) return rx_fail(r, r->pos, "invalid UTF-8");
                r->pos += len;
            }
            if (hi < lo) return rx_fail(r, dash, "range out of order");
            sbuf_adds(r->out, "-");
            put_cp(r->out, hi);
        }
    }
    sbuf_adds(r->out, "]");
    return 0;
}

static int parse_alt(rx *r);

static int parse_group(rx *r) {
    size_t at = r->pos - 1;
    if (peek(r) == '?') {
        r->pos++;
        int c = peek(r);
        if (c == ':') {
            r->pos++;
        } else if (c == '<' || c == 'P') {
            if (c == 'P') r->pos++;
            if (peek(r) != '<') return rx_fail(r, at, "unsupported group syntax");
            r->pos++;
            if (peek(r) == '=' || peek(r) == '!')
                return rx_fail(r, at, "lookbehind is not supported");
            while (peek(r) >= 0 && peek(r) != '>')
                r->pos++;
            if (peek(r) != '>') return rx_fail(r, at, "unclosed group name");
            r->pos++;
        } else if (c == '=' || c == '!') {
            return rx_fail(r, at, "lookahead is not supported");
        } else {
            return rx_fail(r, at, "inline flags and special groups '(?%c' are not supported",
                           c < 0 ? ' ' : c);
        }
    }
    if (++r->depth > REGEX_MAX_DEPTH)
        return rx_fail(r, at, "groups nested deeper than %d", REGEX_MAX_DEPTH);
    sbuf_adds(r->out, "(");
    int rc = parse_alt(r);
    if (rc) return rc;
    if (peek(r) != ')') return rx_fail(r, at, "'(' is never closed");
    r->pos++;
    r->depth--;
    sbuf_adds(r->out, ")");
    return 0;
}

static int parse_uint(rx *r, uint32_t *v) {
    if (peek(r) < '0' || peek(r) > '9') return -1;
    uint64_t x = 0;
    while (peek(r) >= '0' && peek(r) <= '9') {
        x = x * 10 + (uint64_t)(peek(r) - '0');
        if (x > GRAMMAR_MAX_REPEAT) x = GRAMMAR_MAX_REPEAT + 1;
        r->pos++;
    }
    *v = (uint32_t)x;
    return 0;
}

/* A quantifier after an atom, if any. */
static int parse_quant(rx *r, bool had_atom) {
    int c = peek(r);
    size_t at = r->pos;
    if (c != '*' && c != '+' && c != '?' && c != '{') return 0;
    if (!had_atom) return rx_fail(r, at, "'%c' has nothing to repeat", c);
    if (c == '{') {
        size_t save = r->pos;
        r->pos++;
        uint32_t m, n = 0;
        bool open = false, comma = false;
        if (parse_uint(r, &m)) { /* not a quantifier: a literal '{' (as most engines) */
            r->pos = save;
            return 0;
        }
        if (peek(r) == ',') {
            comma = true;
            r->pos++;
            if (peek(r) == '}')
                open = true;
            else if (parse_uint(r, &n))
                return rx_fail(r, at, "malformed {m,n}");
        }
        if (peek(r) != '}') return rx_fail(r, at, "malformed {m,n}");
        r->pos++;
        if (m > GRAMMAR_MAX_REPEAT || n > GRAMMAR_MAX_REPEAT)
            return rx_fail(r, at, "repetition counts above %u are not supported",
                           GRAMMAR_MAX_REPEAT);
        if (comma && !open && n < m) return rx_fail(r, at, "{%u,%u}: max below min", m, n);
        if (!comma)
            sbuf_printf(r->out, "{%u}", m);
        else if (open)
            sbuf_printf(r->out, "{%u,}", m);
        else
            sbuf_printf(r->out, "{%u,%u}", m, n);
    } else {
        r->pos++;
        sbuf_printf(r->out, "%c", c);
    }
    if (peek(r) == '?') { /* lazy: the same language */
        r->pos++;
    } else if (peek(r) == '+') {
        return rx_fail(r, r->pos, "possessive quantifiers are not supported");
    }
    int next = peek(r);
    if (next == '*' || next == '+' || next == '?')
        return rx_fail(r, r->pos, "a quantifier cannot follow a quantifier");
    return 0;
}

static int parse_seq(rx *r) {
    bool any = false;
    for (;;) {
        int c = peek(r);
        if (c < 0 || c == '|' || c == ')') break;
        size_t at = r->pos;
        bool atom = true;
        int rc = 0;
        if (any) sbuf_adds(r->out, " ");
        if (c == '(') {
            r->pos++;
            rc = parse_group(r);
        } else if (c == '[') {
            r->pos++;
            rc = parse_class(r);
        } else if (c == '.') {
            r->pos++;
            sbuf_adds(r->out, "[^\\n]");
        } else if (c == '^' || c == '$') {
            bool at_edge = c == '^' ? r->pos == 0 : r->pos + 1 == r->n;
            if (!at_edge)
                return rx_fail(r, at, "the anchor '%c' is supported only at the %s of the pattern",
                               c, c == '^' ? "start" : "end");
            r->pos++;
            atom = false;
            sbuf_adds(r->out, "\"\"");
        } else if (c == '*' || c == '+' || c == '?') {
            return rx_fail(r, at, "'%c' has nothing to repeat", c);
        } else {
            uint32_t cp;
            if (c == '\\') {
                r->pos++;
                int k = escape(r, false, &cp);
                if (k < 0) return k;
                if (k == 1) {
                    sbuf_adds(r->out, "[");
                    put_cp(r->out, cp);
                    sbuf_adds(r->out, "]");
                }
            } else {
                size_t len = decode(r, &cp);
                if (!len) return rx_fail(r, at, "invalid UTF-8");
                r->pos += len;
                sbuf_adds(r->out, "[");
                put_cp(r->out, cp);
                sbuf_adds(r->out, "]");
            }
        }
        if (rc) return rc;
        if ((rc = parse_quant(r, atom))) return rc;
        any = true;
    }
    if (!any) sbuf_adds(r->out, "\"\"");
    return 0;
}

static int parse_alt(rx *r) {
    for (;;) {
        int rc = parse_seq(r);
        if (rc) return rc;
        if (peek(r) != '|') return 0;
        r->pos++;
        sbuf_adds(r->out, " | ");
    }
}

int regex_to_gbnf(const char *re, size_t n, sbuf *out, tps_err *err) {
    rx r = {.s = (const unsigned char *)re, .n = n, .out = out, .err = err};
    sbuf_adds(out, "root ::= ");
    int rc = parse_alt(&r);
    if (rc) return rc;
    if (r.pos < r.n) return rx_fail(&r, r.pos, "unmatched ')'");
    sbuf_adds(out, "\n");
    if (sbuf_failed(out)) return tps_fail(err, TPS_ENOMEM, "regex: out of memory");
    return 0;
}
