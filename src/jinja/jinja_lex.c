/* The lexer: template source -> tokens, by jinja2's rules (lexer.py) with
 * transformers' settings, trim_blocks and lstrip_blocks:
 *   - newlines are normalised to \n and one trailing newline is dropped;
 *   - "{%-", "{{-", "{#-" strip all whitespace before the tag, "-%}",
 *     "-}}", "-#}" all whitespace after it;
 *   - trim_blocks: "%}" and "#}" eat the one newline that follows ("+%}"
 *     keeps it);
 *   - lstrip_blocks: spaces and tabs from the start of a line up to "{%"
 *     or "{#" are dropped ("{%+" keeps them; "{{" never strips);
 *   - inside a tag, "}}" / "%}" end it only when brackets are balanced;
 *   - string literals take Python's escapes (\n, \t, \xhh, \uXXXX, octal).
 * Not here: the grammar (jinja_parse.c). */
#include "jinja/jinja_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct lexer {
    jarena *a;
    char *s;
    size_t n, pos;
    uint32_t line;
    bool line_starting;
    jtok *t;
    size_t nt, cap;
    tps_err *err;
    int rc;
} lexer;

static bool fail(lexer *L, const char *fmt, const char *what) {
    if (!L->rc) {
        char msg[256];
        snprintf(msg, sizeof msg, fmt, what);
        tps_fail(L->err, TPS_EINVAL, "line %u: %s", L->line, msg);
        L->rc = TPS_EINVAL;
    }
    return false;
}

static jtok *emit(lexer *L, int type) {
    if (L->nt == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        jtok *p = jarena_alloc(L->a, cap * sizeof *p);
        if (!p) {
            tps_fail(L->err, TPS_ENOMEM, "out of memory lexing the template");
            L->rc = TPS_ENOMEM;
            return NULL;
        }
        if (L->nt) memcpy(p, L->t, L->nt * sizeof *p);
        L->t = p;
        L->cap = cap;
    }
    jtok *t = &L->t[L->nt++];
    memset(t, 0, sizeof *t);
    t->type = (uint8_t)type;
    t->line = L->line;
    return t;
}

/* Moves to `to`, counting the newlines passed. */
static void advance(lexer *L, size_t to) {
    for (size_t i = L->pos; i < to; i++)
        L->line += L->s[i] == '\n';
    L->pos = to;
}

/* Length of the Python-whitespace (\s) run at s[i..n). */
static size_t ws_run(const char *s, size_t n, size_t i) {
    size_t j = i;
    while (j < n) {
        size_t k = j;
        if (!cp_space(utf8_next(s, n, &k))) break;
        j = k;
    }
    return j - i;
}

/* Whether s[from..to) is non-empty and all whitespace. */
static bool all_ws(const char *s, size_t from, size_t to) {
    return to > from && ws_run(s, to, from) == to - from;
}

/* Where Python's str.rstrip() would cut s[0..n). */
static size_t rstrip_at(const char *s, size_t n) {
    size_t end = n;
    while (end > 0) {
        size_t start = end - 1;
        while (start > 0 && ((unsigned char)s[start] & 0xC0) == 0x80)
            start--;
        size_t k = start;
        if (!cp_space(utf8_next(s, end, &k)) || k != end) break;
        end = start;
    }
    return end;
}

/* The text before a tag, with the tag's whitespace control applied. */
static void emit_data(lexer *L, size_t from, size_t to, char sign, bool strippable) {
    size_t end = to;
    if (sign == '-') {
        end = from + rstrip_at(L->s + from, to - from);
    } else if (sign != '+' && strippable) {
        size_t l = to;
        while (l > from && L->s[l - 1] != '\n')
            l--;
        if ((l > from || L->line_starting) && all_ws(L->s, l, to)) end = l;
    }
    if (end > from) {
        jtok *t = emit(L, TK_DATA);
        if (t) {
            t->s = L->s + from;
            t->n = (uint32_t)(end - from);
        }
    }
    advance(L, to);
}

/* ---------------------------------------------------------------------------
 * Literals
 * ------------------------------------------------------------------------- */

static int hexval(char c) {
    return c >= '0' && c <= '9'                 ? c - '0'
           : (c | 32) >= 'a' && (c | 32) <= 'f' ? (c | 32) - 'a' + 10
                                                : -1;
}

/* Python's unicode-escape decoding of s[0..n) into out (room for n bytes:
 * no escape is shorter than what it writes). Returns the length, or -1. */
static long unescape(const char *s, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        if (s[i] != '\\') {
            out[o++] = s[i++];
            continue;
        }
        if (++i == n) return -1;
        char e = s[i++];
        const char *simple = strchr("\\'\"abfnrtv", e);
        if (simple && e) {
            static const char map[] = "\\'\"\a\b\f\n\r\t\v";
            out[o++] = map[simple - "\\'\"abfnrtv"];
        } else if (e == '\n') {
            continue;
        } else if (e >= '0' && e <= '7') {
            uint32_t cp = (uint32_t)(e - '0');
            for (int k = 0; k < 2 && i < n && s[i] >= '0' && s[i] <= '7'; k++)
                cp = cp * 8 + (uint32_t)(s[i++] - '0');
            o += utf8_put(cp, out + o);
        } else if (e == 'x' || e == 'u' || e == 'U') {
            int len = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t cp = 0;
            for (int k = 0; k < len; k++) {
                int h = i < n ? hexval(s[i]) : -1;
                if (h < 0) return -1;
                cp = cp * 16 + (uint32_t)h;
                i++;
            }
            if (cp > 0x10FFFF) return -1;
            if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
            o += utf8_put(cp, out + o);
        } else {
            out[o++] = '\\';
            i--;
        }
    }
    return (long)o;
}

static bool lex_string(lexer *L) {
    char q = L->s[L->pos];
    size_t i = L->pos + 1;
    while (i < L->n && L->s[i] != q)
        i += L->s[i] == '\\' && i + 1 < L->n ? 2 : 1;
    if (i >= L->n) return fail(L, "unexpected char '%s'", q == '"' ? "\"" : "'");
    size_t len = i - L->pos - 1;
    char *buf = jarena_alloc(L->a, len + 1);
    jtok *t = emit(L, TK_STRING);
    if (!buf || !t) return false;
    long n = unescape(L->s + L->pos + 1, len, buf);
    if (n < 0) return fail(L, "%s", "invalid escape in a string literal");
    buf[n] = 0;
    t->s = buf;
    t->n = (uint32_t)n;
    advance(L, i + 1);
    return true;
}

/* digits with single underscores between them: \d+(_\d+)*; the length */
static size_t digits(const char *s, size_t n, size_t i) {
    size_t j = i;
    while (j < n && s[j] >= '0' && s[j] <= '9') {
        j++;
        if (j + 1 < n && s[j] == '_' && s[j + 1] >= '0' && s[j + 1] <= '9') j++;
    }
    return j - i;
}

static bool lex_number(lexer *L) {
    const char *s = L->s;
    size_t i = L->pos, n = L->n, d = digits(s, n, i), j = i + d;
    bool frac = false, exp = false;
    if (i == 0 || s[i - 1] != '.') {
        if (j + 1 < n && s[j] == '.' && digits(s, n, j + 1)) {
            j += 1 + digits(s, n, j + 1);
            frac = true;
        }
        if (j < n && (s[j] | 32) == 'e') {
            size_t k = j + 1 + (j + 1 < n && (s[j + 1] == '+' || s[j + 1] == '-'));
            if (digits(s, n, k)) {
                j = k + digits(s, n, k);
                exp = true;
            }
        }
    }
    char buf[128];
    size_t o = 0;
    if (frac || exp) {
        for (size_t k = i; k < j && o < sizeof buf - 1; k++)
            if (s[k] != '_') buf[o++] = s[k];
        buf[o] = 0;
        jtok *t = emit(L, TK_FLOAT);
        if (!t) return false;
        t->f = strtod(buf, NULL);
        advance(L, j);
        return true;
    }
    int base = 10;
    size_t start = i;
    if (s[i] == '0' && i + 1 < n && strchr("bBoOxX", s[i + 1]) && s[i + 1]) {
        base = (s[i + 1] | 32) == 'b' ? 2 : (s[i + 1] | 32) == 'o' ? 8 : 16;
        start = i + 2;
    }
    uint64_t v = 0;
    size_t k = start;
    for (; k < n; k++) {
        if (s[k] == '_' && k + 1 < n && hexval(s[k + 1]) >= 0 && hexval(s[k + 1]) < base) continue;
        int h = hexval(s[k]);
        if (h < 0 || h >= base) break;
        if (v > (UINT64_MAX - (uint64_t)h) / (uint64_t)base || v * base + (uint64_t)h > INT64_MAX)
            return fail(L, "%s", "integer literal too large");
        v = v * (uint64_t)base + (uint64_t)h;
        if (base == 10 && s[i] == '0' && h) break; /* 0(_?0)*: "012" is 0 then 12 */
    }
    if (k == start) return fail(L, "%s", "invalid integer literal");
    jtok *t = emit(L, TK_INT);
    if (!t) return false;
    t->i = (int64_t)v;
    advance(L, k);
    return true;
}

static bool lex_operator(lexer *L, char *stack, size_t *depth) {
    static const struct {
        const char *s;
        int op;
    } ops[] = {{"//", OP_FLOORDIV}, {"**", OP_POW},     {"==", OP_EQ},    {"!=", OP_NE},
               {">=", OP_GTEQ},     {"<=", OP_LTEQ},    {"+", OP_ADD},    {"-", OP_SUB},
               {"/", OP_DIV},       {"*", OP_MUL},      {"%", OP_MOD},    {"~", OP_TILDE},
               {"[", OP_LBRACKET},  {"]", OP_RBRACKET}, {"(", OP_LPAREN}, {")", OP_RPAREN},
               {"{", OP_LBRACE},    {"}", OP_RBRACE},   {">", OP_GT},     {"<", OP_LT},
               {"=", OP_ASSIGN},    {".", OP_DOT},      {":", OP_COLON},  {"|", OP_PIPE},
               {",", OP_COMMA},     {";", OP_SEMICOLON}};
    const char *s = L->s + L->pos;
    size_t left = L->n - L->pos;
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        size_t len = strlen(ops[k].s);
        if (len > left || memcmp(s, ops[k].s, len)) continue;
        char ch = s[0];
        if (len == 1 && strchr("([{", ch)) {
            if (*depth >= 128) return fail(L, "%s", "brackets nested too deeply");
            stack[(*depth)++] = ch == '(' ? ')' : ch == '[' ? ']' : '}';
        } else if (len == 1 && strchr(")]}", ch)) {
            char want[2] = {ch, 0};
            if (!*depth) return fail(L, "unexpected '%s'", want);
            if (stack[--*depth] != ch) return fail(L, "unexpected '%s'", want);
        }
        jtok *t = emit(L, TK_OP);
        if (!t) return false;
        t->op = (uint8_t)ops[k].op;
        advance(L, L->pos + len);
        return true;
    }
    char bad[8] = {0};
    memcpy(bad, s, (unsigned char)*s < 0x80 ? 1 : 0);
    return fail(L, "unexpected char '%s'", bad[0] ? bad : "(non-ASCII)");
}

/* ---------------------------------------------------------------------------
 * Tags
 * ------------------------------------------------------------------------- */

/* The end of the tag at pos, when there is one: its length (whitespace
 * control included). */
static size_t tag_end(lexer *L, bool block) {
    const char *s = L->s + L->pos;
    size_t left = L->n - L->pos;
    const char *close = block ? "%}" : "}}";
    if (left >= 3 && s[0] == '-' && !memcmp(s + 1, close, 2))
        return 3 + ws_run(L->s, L->n, L->pos + 3);
    if (block && left >= 3 && s[0] == '+' && !memcmp(s + 1, close, 2)) return 3;
    if (left >= 2 && !memcmp(s, close, 2)) return 2 + (block && left > 2 && s[2] == '\n');
    return 0;
}

static bool lex_tag(lexer *L, bool block) {
    char stack[128];
    size_t depth = 0;
    for (;;) {
        size_t end = depth ? 0 : tag_end(L, block);
        if (end) {
            if (!emit(L, block ? TK_BLOCK_END : TK_VAR_END)) return false;
            L->line_starting = L->s[L->pos + end - 1] == '\n';
            advance(L, L->pos + end);
            return true;
        }
        if (L->pos >= L->n)
            return fail(L, "unexpected end of template, expected '%s'",
                        block ? "end of statement block" : "end of print statement");
        char ch = L->s[L->pos];
        size_t ws = ws_run(L->s, L->n, L->pos);
        bool ok = true;
        if (ws)
            advance(L, L->pos + ws);
        else if (ch >= '0' && ch <= '9')
            ok = lex_number(L);
        else if (ch == '_' || ((ch | 32) >= 'a' && (ch | 32) <= 'z')) {
            size_t j = L->pos;
            while (j < L->n &&
                   (L->s[j] == '_' || ((L->s[j] | 32) >= 'a' && (L->s[j] | 32) <= 'z') ||
                    (L->s[j] >= '0' && L->s[j] <= '9')))
                j++;
            jtok *t = emit(L, TK_NAME);
            if (!t) return false;
            t->s = L->s + L->pos;
            t->n = (uint32_t)(j - L->pos);
            advance(L, j);
        } else if (ch == '\'' || ch == '"')
            ok = lex_string(L);
        else
            ok = lex_operator(L, stack, &depth);
        if (!ok) return false;
    }
}

/* Comment: up to "+#}", "-#}" (then whitespace) or "#}" (then one newline). */
static bool lex_comment(lexer *L) {
    const char *p = memmem(L->s + L->pos, L->n - L->pos, "#}", 2);
    if (!p) return fail(L, "%s", "Missing end of comment tag");
    size_t q = (size_t)(p - L->s), end = q + 2;
    if (q > L->pos && L->s[q - 1] == '-')
        end += ws_run(L->s, L->n, end);
    else if ((q == L->pos || L->s[q - 1] != '+') && end < L->n && L->s[end] == '\n')
        end++;
    L->line_starting = L->s[end - 1] == '\n';
    advance(L, end);
    return true;
}

/* {% raw %} ... {% endraw %}: the text between, as data. at: the "{%". */
static bool lex_raw(lexer *L, size_t body) {
    for (size_t i = body; i + 1 < L->n; i++) {
        const char *p = memmem(L->s + i, L->n - i, "{%", 2);
        if (!p) break;
        i = (size_t)(p - L->s);
        size_t j = i + 2;
        char sign = j < L->n && (L->s[j] == '-' || L->s[j] == '+') ? L->s[j++] : 0;
        j += ws_run(L->s, L->n, j);
        if (L->n - j < 6 || memcmp(L->s + j, "endraw", 6)) continue;
        j += 6;
        j += ws_run(L->s, L->n, j);
        size_t save = L->pos;
        L->pos = j;
        size_t end = tag_end(L, true);
        L->pos = save;
        if (!end) continue;
        advance(L, body);
        emit_data(L, body, i, sign, true);
        L->line_starting = L->s[j + end - 1] == '\n';
        advance(L, j + end);
        return true;
    }
    return fail(L, "%s", "Missing end of raw directive");
}

/* "{%" sign? \s* "raw" \s* ("-%}" \s* | "%}") at `at`: the body's start. */
static size_t raw_begin(lexer *L, size_t at) {
    size_t j = at + 2;
    if (j < L->n && (L->s[j] == '-' || L->s[j] == '+')) j++;
    j += ws_run(L->s, L->n, j);
    if (L->n - j < 3 || memcmp(L->s + j, "raw", 3)) return 0;
    j += 3;
    j += ws_run(L->s, L->n, j);
    if (L->n - j >= 3 && !memcmp(L->s + j, "-%}", 3)) return j + 3 + ws_run(L->s, L->n, j + 3);
    if (L->n - j >= 2 && !memcmp(L->s + j, "%}", 2)) return j + 2;
    return 0;
}

static bool lex_root(lexer *L) {
    while (L->pos < L->n) {
        size_t at = L->pos;
        char kind = 0;
        for (; at + 1 < L->n; at++)
            if (L->s[at] == '{' &&
                (L->s[at + 1] == '%' || L->s[at + 1] == '{' || L->s[at + 1] == '#')) {
                kind = L->s[at + 1];
                break;
            }
        if (!kind) {
            emit_data(L, L->pos, L->n, 0, false);
            break;
        }
        char sign =
            at + 2 < L->n && (L->s[at + 2] == '-' || L->s[at + 2] == '+') ? L->s[at + 2] : 0;
        size_t raw = kind == '%' ? raw_begin(L, at) : 0;
        emit_data(L, L->pos, at, sign, kind != '{');
        L->line_starting = false;
        if (raw) {
            L->line_starting = L->s[raw - 1] == '\n';
            if (!lex_raw(L, raw)) return false;
            continue;
        }
        advance(L, at + 2 + (sign != 0));
        bool ok;
        if (kind == '#') {
            ok = lex_comment(L);
        } else {
            jtok *t = emit(L, kind == '%' ? TK_BLOCK_BEGIN : TK_VAR_BEGIN);
            ok = t && lex_tag(L, kind == '%');
        }
        if (!ok) return false;
    }
    return emit(L, TK_EOF) != NULL;
}

int jinja_lex(jarena *a, const char *src, size_t len, jtok **toks, size_t *n, tps_err *err) {
    lexer L = {.a = a, .line = 1, .line_starting = true, .err = err};
    L.s = jarena_alloc(a, len + 1);
    if (!L.s) return tps_fail(err, TPS_ENOMEM, "out of memory lexing the template");
    for (size_t i = 0; i < len; i++) { /* \r\n and \r -> \n */
        if (src[i] == '\r') {
            L.s[L.n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            L.s[L.n++] = src[i];
        }
    }
    if (L.n && L.s[L.n - 1] == '\n') L.n--; /* keep_trailing_newline is off */
    L.s[L.n] = 0;
    if (!lex_root(&L)) return L.rc ? L.rc : TPS_ENOMEM;
    *toks = L.t;
    *n = L.nt;
    return 0;
}
