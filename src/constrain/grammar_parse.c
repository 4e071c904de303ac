/* The GBNF parser (grammar.h): a recursive descent over the text that
 * writes each rule's elements into a growable per-rule vector, rewriting
 * groups and repetitions into generated rules, then packs everything into
 * one allocation and has grammar.c check it (references, which rules
 * match empty, left recursion).
 *
 * Generated rules share one name per user rule ("base~"): a repetition
 * {0,10000} makes 10,000 of them, and a name each was an eighth of the
 * grammar's memory.
 *
 * Not here: the checks on the whole grammar and the reference recognizer
 * (grammar.c); anything about tokens or logits. */
#include "base/utf8.h"
#include "constrain/grammar_internal.h"

#include "base/clock.h"
#include "base/grow.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------
 * Parser state
 * ------------------------------------------------------------------------- */

typedef struct prule {
    char *name;       /* a user rule's; NULL for a generated one */
    uint32_t base;    /* a generated rule's user rule */
    grammar_elem *el; /* the rule's elements so far */
    size_t n, cap;
    bool defined;
    size_t ref_off; /* byte offset of the first reference; SIZE_MAX if none */
} prule;

typedef struct parser {
    const char *s;
    size_t n, pos;
    prule *rules;
    uint32_t n_rules, cap_rules;
    uint32_t *hash; /* user rule names -> index + 1; 0 = empty slot */
    size_t hash_cap;
    size_t total; /* elements over all rules */
    uint32_t n_gen;
    int depth;            /* nesting of ( ) */
    size_t max_bytes;     /* grammar_bytes' estimate may not pass it; 0: no limit */
    const char *label;    /* the limit's name in the refusal */
    uint64_t deadline_ns; /* 0: none */
    tps_err *err;
} parser;

/* The packed grammar's bytes as grammar_bytes counts them, before
 * packing: elements, and per rule its start, nullable flag and name. */
static size_t estimate_bytes(const parser *p) {
    return sizeof(grammar) + p->total * sizeof(grammar_elem) +
           (size_t)p->n_rules * (sizeof(char *) + sizeof(uint32_t) + 1);
}

#define MAX_DEPTH 256 /* ( ) nesting; deeper text is refused, not recursed into */

static size_t line_of(const parser *p, size_t off) {
    size_t line = 1;
    for (size_t i = 0; i < off && i < p->n; i++)
        line += p->s[i] == '\n';
    return line;
}

static int perr_at(parser *p, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int perr_at(parser *p, size_t off, const char *fmt, ...) {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < off && i < p->n; i++) {
        unsigned char c = (unsigned char)p->s[i];
        if (c == '\n') {
            line++, col = 1;
        } else if ((c & 0xC0) != 0x80) {
            col++;
        }
    }
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tps_fail(p->err, TPS_EINVAL, "grammar: line %zu, column %zu: %s", line, col, msg);
}

static int oom(parser *p) {
    return tps_fail(p->err, TPS_ENOMEM, "grammar: out of memory");
}

static uint64_t hash_name(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

/* Appends a rule called name[0..len); returns its index or -1 (no memory). */
static int64_t rule_add(parser *p, const char *name, size_t len) {
    if (p->n_rules == p->cap_rules) {
        uint32_t cap = p->cap_rules ? p->cap_rules * 2 : 16;
        prule *r = realloc(p->rules, cap * sizeof *r);
        if (!r) return -1;
        p->rules = r, p->cap_rules = cap;
    }
    char *nm = malloc(len + 1);
    if (!nm) return -1;
    memcpy(nm, name, len);
    nm[len] = 0;
    p->rules[p->n_rules] = (prule){.name = nm, .ref_off = SIZE_MAX};
    return p->n_rules++;
}

/* The index of user rule name[0..len), added (undefined) when new; -1 when
 * out of memory. */
static int64_t rule_get(parser *p, const char *name, size_t len) {
    if ((p->n_rules + 1) * 2 > p->hash_cap) {
        size_t cap = p->hash_cap ? p->hash_cap * 2 : 64;
        uint32_t *h = calloc(cap, sizeof *h);
        if (!h) return -1;
        for (size_t i = 0; i < p->hash_cap; i++) {
            if (!p->hash[i]) continue;
            const char *nm = p->rules[p->hash[i] - 1].name;
            size_t j = hash_name(nm, strlen(nm)) & (cap - 1);
            while (h[j])
                j = (j + 1) & (cap - 1);
            h[j] = p->hash[i];
        }
        free(p->hash);
        p->hash = h, p->hash_cap = cap;
    }
    size_t j = hash_name(name, len) & (p->hash_cap - 1);
    for (; p->hash[j]; j = (j + 1) & (p->hash_cap - 1)) {
        const char *nm = p->rules[p->hash[j] - 1].name;
        if (strlen(nm) == len && !memcmp(nm, name, len)) return p->hash[j] - 1;
    }
    int64_t id = rule_add(p, name, len);
    if (id >= 0) p->hash[j] = (uint32_t)id + 1;
    return id;
}

/* A generated rule for a group or repetition inside rule parent: named
 * "base~" when packed, base being the user rule it came from. */
static int64_t rule_gen(parser *p, uint32_t parent) {
    if (p->n_rules == p->cap_rules) {
        uint32_t cap = p->cap_rules ? p->cap_rules * 2 : 16;
        prule *r = realloc(p->rules, cap * sizeof *r);
        if (!r) return -1;
        p->rules = r, p->cap_rules = cap;
    }
    uint32_t base = p->rules[parent].name ? parent : p->rules[parent].base;
    p->rules[p->n_rules] = (prule){.base = base, .defined = true, .ref_off = SIZE_MAX};
    p->n_gen++;
    return p->n_rules++;
}

static int push(parser *p, uint32_t rid, uint32_t op, uint32_t lo, uint32_t hi) {
    if (p->total >= GRAMMAR_MAX_ELEMS)
        return perr_at(p, p->pos, "the grammar is too large (more than %u elements)",
                       GRAMMAR_MAX_ELEMS);
    if (p->deadline_ns && (p->total & 4095) == 0 && tps_now_ns() > p->deadline_ns)
        return tps_fail(p->err, TPS_ERANGE, "grammar: parsing stopped at its deadline (line %zu)",
                        line_of(p, p->pos));
    if (p->max_bytes && estimate_bytes(p) > p->max_bytes)
        return tps_fail(p->err, TPS_ERANGE,
                        "grammar: compiled, it would take more than %.1f MiB, the limit per "
                        "request%s%s (%zu elements and %u rules by line %zu)",
                        (double)p->max_bytes / 1048576.0, p->label ? " " : "",
                        p->label ? p->label : "", p->total, p->n_rules, line_of(p, p->pos));
    prule *r = &p->rules[rid];
    if (TPS_GROW(r->el, r->cap, r->n + 1, 8)) return oom(p);
    r->el[r->n++] = (grammar_elem){op, lo, hi};
    p->total++;
    return 0;
}

/* ---------------------------------------------------------------------------
 * Lexing
 * ------------------------------------------------------------------------- */

static int peek(const parser *p) {
    return p->pos < p->n ? (unsigned char)p->s[p->pos] : -1;
}

static bool is_word(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

/* Skips blanks and comments; newlines too when newline_ok. */
static void skip_space(parser *p, bool newline_ok) {
    while (p->pos < p->n) {
        char c = p->s[p->pos];
        if (c == ' ' || c == '\t' || c == '\r') {
            p->pos++;
        } else if (c == '#') {
            while (p->pos < p->n && p->s[p->pos] != '\n')
                p->pos++;
        } else if (c == '\n' && newline_ok) {
            p->pos++;
        } else {
            break;
        }
    }
}

static size_t word_len(const parser *p) {
    size_t i = p->pos;
    while (i < p->n && is_word((unsigned char)p->s[i]))
        i++;
    return i - p->pos;
}

/* Whether "::=" follows at pos (after blanks on the same line). */
static bool at_define(parser *p) {
    size_t save = p->pos;
    skip_space(p, false);
    bool yes = p->n - p->pos >= 3 && !memcmp(p->s + p->pos, "::=", 3);
    p->pos = save;
    return yes;
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One character of a literal or class: an escape or a UTF-8 code point. */
static int parse_char(parser *p, uint32_t *cp) {
    size_t at = p->pos;
    if (p->s[p->pos] != '\\') {
        size_t k = utf8_decode((const unsigned char *)p->s + p->pos, p->n - p->pos, cp);
        if (!k) return perr_at(p, at, "invalid UTF-8");
        p->pos += k;
        return 0;
    }
    if (p->pos + 1 >= p->n) return perr_at(p, at, "unfinished escape");
    char c = p->s[p->pos + 1];
    p->pos += 2;
    int digits = 0;
    switch (c) {
    case 'n':
        *cp = '\n';
        return 0;
    case 't':
        *cp = '\t';
        return 0;
    case 'r':
        *cp = '\r';
        return 0;
    case '\\':
    case '"':
    case '\'':
    case '[':
    case ']':
    case '-':
    case '/':
    case '^':
        *cp = (uint32_t)c;
        return 0;
    case 'x':
        digits = 2;
        break;
    case 'u':
        digits = 4;
        break;
    case 'U':
        digits = 8;
        break;
    default:
        return perr_at(p, at, "unknown escape '\\%c'", c);
    }
    uint64_t v = 0;
    for (int i = 0; i < digits; i++) {
        int h = p->pos < p->n ? hexval((unsigned char)p->s[p->pos]) : -1;
        if (h < 0) return perr_at(p, at, "'\\%c' needs %d hex digits", c, digits);
        v = v * 16 + (uint64_t)h;
        p->pos++;
    }
    if (v > GRAMMAR_MAX_CP)
        return perr_at(p, at, "code point 0x%llx is beyond U+10FFFF", (unsigned long long)v);
    *cp = (uint32_t)v;
    return 0;
}

/* ---------------------------------------------------------------------------
 * Grammar: rules, alternatives, sequences, repetition
 * ------------------------------------------------------------------------- */

static int parse_alternates(parser *p, uint32_t rid, bool nested);

/* Rewrites the symbol el[start..n) of rule rid, just parsed, into min
 * copies followed by up to max - min optional ones (max = UINT32_MAX:
 * unbounded), through generated rules. */
static int repeat(parser *p, uint32_t rid, size_t start, uint32_t min, uint32_t max) {
    size_t len = p->rules[rid].n - start;
    grammar_elem *x = malloc((len ? len : 1) * sizeof *x);
    if (!x) return oom(p);
    if (len) memcpy(x, p->rules[rid].el + start, len * sizeof *x);
    p->rules[rid].n = start;
    p->total -= len;
    int rc = 0;
    for (uint32_t k = 0; k < min && !rc; k++)
        for (size_t i = 0; i < len && !rc; i++)
            rc = push(p, rid, x[i].op, x[i].lo, x[i].hi);
    if (!rc && max == UINT32_MAX) { /* R ::= X R | (empty) */
        int64_t r = rule_gen(p, rid);
        if (r < 0) rc = oom(p);
        for (size_t i = 0; i < len && !rc; i++)
            rc = push(p, (uint32_t)r, x[i].op, x[i].lo, x[i].hi);
        if (!rc) rc = push(p, (uint32_t)r, GRAMMAR_REF, (uint32_t)r, 0);
        if (!rc) rc = push(p, (uint32_t)r, GRAMMAR_ALT, 0, 0);
        if (!rc) rc = push(p, (uint32_t)r, GRAMMAR_END, 0, 0);
        if (!rc) rc = push(p, rid, GRAMMAR_REF, (uint32_t)r, 0);
    } else if (!rc && max > min) { /* R1 ::= X | ; Rk ::= X R(k-1) | */
        int64_t prev = -1;
        for (uint32_t k = 0; k < max - min && !rc; k++) {
            int64_t r = rule_gen(p, rid);
            if (r < 0) {
                rc = oom(p);
                break;
            }
            for (size_t i = 0; i < len && !rc; i++)
                rc = push(p, (uint32_t)r, x[i].op, x[i].lo, x[i].hi);
            if (!rc && prev >= 0) rc = push(p, (uint32_t)r, GRAMMAR_REF, (uint32_t)prev, 0);
            if (!rc) rc = push(p, (uint32_t)r, GRAMMAR_ALT, 0, 0);
            if (!rc) rc = push(p, (uint32_t)r, GRAMMAR_END, 0, 0);
            prev = r;
        }
        if (!rc) rc = push(p, rid, GRAMMAR_REF, (uint32_t)prev, 0);
    }
    free(x);
    return rc;
}

static int parse_count(parser *p, uint32_t *v) {
    size_t at = p->pos;
    uint64_t x = 0;
    size_t i = p->pos;
    while (i < p->n && p->s[i] >= '0' && p->s[i] <= '9') {
        x = x * 10 + (uint64_t)(p->s[i] - '0');
        if (x > GRAMMAR_MAX_REPEAT)
            return perr_at(p, at, "repetition count is larger than %u", GRAMMAR_MAX_REPEAT);
        i++;
    }
    if (i == p->pos) return perr_at(p, at, "expected a number");
    p->pos = i;
    *v = (uint32_t)x;
    return 0;
}

/* {m} {m,} {m,n}, with pos on '{'. */
static int parse_braces(parser *p, uint32_t *min, uint32_t *max) {
    size_t at = p->pos;
    p->pos++;
    skip_space(p, true);
    int rc = parse_count(p, min);
    if (rc) return rc;
    skip_space(p, true);
    *max = *min;
    if (peek(p) == ',') {
        p->pos++;
        skip_space(p, true);
        *max = UINT32_MAX;
        if (peek(p) >= '0' && peek(p) <= '9') {
            if ((rc = parse_count(p, max))) return rc;
            skip_space(p, true);
        }
    }
    if (peek(p) != '}') return perr_at(p, p->pos, "expected '}'");
    p->pos++;
    if (*max < *min)
        return perr_at(p, at, "repetition {%u,%u} has its minimum above its maximum", *min, *max);
    return 0;
}

static int parse_literal(parser *p, uint32_t rid) {
    size_t at = p->pos++;
    while (p->pos < p->n && p->s[p->pos] != '"') {
        uint32_t cp;
        int rc = parse_char(p, &cp);
        if (!rc) rc = push(p, rid, GRAMMAR_CHAR, cp, cp);
        if (rc) return rc;
    }
    if (p->pos >= p->n) return perr_at(p, at, "unterminated string literal");
    p->pos++;
    return 0;
}

static int parse_class(parser *p, uint32_t rid) {
    size_t at = p->pos++;
    bool neg = peek(p) == '^';
    if (neg) p->pos++;
    size_t hdr = p->rules[rid].n;
    int rc = push(p, rid, neg ? GRAMMAR_SET_NOT : GRAMMAR_SET, 0, 0);
    uint32_t count = 0;
    while (!rc && p->pos < p->n && p->s[p->pos] != ']') {
        size_t item = p->pos;
        uint32_t lo, hi;
        if ((rc = parse_char(p, &lo))) break;
        hi = lo;
        if (p->pos + 1 < p->n && p->s[p->pos] == '-' && p->s[p->pos + 1] != ']') {
            p->pos++;
            if ((rc = parse_char(p, &hi))) break;
            if (hi < lo) {
                rc = perr_at(p, item, "character range is reversed (U+%04X above U+%04X)", lo, hi);
                break;
            }
        }
        rc = push(p, rid, GRAMMAR_RANGE, lo, hi);
        count++;
    }
    if (rc) return rc;
    if (p->pos >= p->n) return perr_at(p, at, "unterminated character class");
    p->pos++;
    p->rules[rid].el[hdr].lo = count;
    return 0;
}

/* Elements until something that cannot start one. Newlines end the
 * sequence unless nested inside ( ). */
static int parse_sequence(parser *p, uint32_t rid, bool nested) {
    for (bool first = true;; first = false) {
        size_t before = p->pos;
        skip_space(p, nested || first); /* "a ::=" or "|" may end a line */
        int c = peek(p);
        size_t start = p->rules[rid].n;
        size_t at = p->pos;
        int rc = 0;
        if (c == '"') {
            rc = parse_literal(p, rid);
        } else if (c == '[') {
            rc = parse_class(p, rid);
        } else if (c == '.') {
            p->pos++;
            rc = push(p, rid, GRAMMAR_ANY, 0, 0);
        } else if (is_word(c)) {
            size_t len = word_len(p);
            p->pos += len;
            if (at_define(p)) {
                /* the next rule, after an empty last alternative ("a ::= x |\n") */
                if (memchr(p->s + before, '\n', at - before)) {
                    p->pos = before;
                    return 0;
                }
                return perr_at(p, at, "expected a newline before the rule '%.*s'", (int)len,
                               p->s + at);
            }
            int64_t ref = rule_get(p, p->s + at, len);
            if (ref < 0) return oom(p);
            if (p->rules[ref].ref_off == SIZE_MAX) p->rules[ref].ref_off = at;
            rc = push(p, rid, GRAMMAR_REF, (uint32_t)ref, 0);
        } else if (c == '(') {
            if (p->depth >= MAX_DEPTH)
                return perr_at(p, at, "groups nested deeper than %d", MAX_DEPTH);
            p->pos++;
            int64_t g = rule_gen(p, rid);
            if (g < 0) return oom(p);
            p->depth++;
            rc = parse_alternates(p, (uint32_t)g, true);
            p->depth--;
            if (rc) return rc;
            skip_space(p, true);
            if (peek(p) != ')') return perr_at(p, p->pos, "expected ')'");
            p->pos++;
            rc = push(p, rid, GRAMMAR_REF, (uint32_t)g, 0);
        } else {
            return 0;
        }
        if (rc) return rc;
        for (;;) {
            skip_space(p, nested);
            c = peek(p);
            uint32_t min, max;
            if (c == '*') {
                min = 0, max = UINT32_MAX, p->pos++;
            } else if (c == '+') {
                min = 1, max = UINT32_MAX, p->pos++;
            } else if (c == '?') {
                min = 0, max = 1, p->pos++;
            } else if (c == '{') {
                if ((rc = parse_braces(p, &min, &max))) return rc;
            } else {
                break;
            }
            if ((rc = repeat(p, rid, start, min, max))) return rc;
        }
    }
}

static int parse_alternates(parser *p, uint32_t rid, bool nested) {
    for (;;) {
        int rc = parse_sequence(p, rid, nested);
        if (rc) return rc;
        size_t save = p->pos;
        skip_space(p, true);
        if (peek(p) == '|') {
            p->pos++;
            if ((rc = push(p, rid, GRAMMAR_ALT, 0, 0))) return rc;
            continue;
        }
        if (!nested) p->pos = save;
        return push(p, rid, GRAMMAR_END, 0, 0);
    }
}

static int parse_rule(parser *p) {
    size_t at = p->pos;
    size_t len = word_len(p);
    if (!len) return perr_at(p, at, "expected a rule name");
    p->pos += len;
    skip_space(p, false);
    if (p->n - p->pos < 3 || memcmp(p->s + p->pos, "::=", 3))
        return perr_at(p, p->pos, "expected '::='");
    p->pos += 3;
    int64_t rid = rule_get(p, p->s + at, len);
    if (rid < 0) return oom(p);
    if (p->rules[rid].defined)
        return perr_at(p, at, "rule '%.*s' is defined twice", (int)len, p->s + at);
    p->rules[rid].defined = true;
    int rc = parse_alternates(p, (uint32_t)rid, false);
    if (rc) return rc;
    skip_space(p, false);
    if (p->pos < p->n && p->s[p->pos] != '\n') {
        if (p->s[p->pos] == ')') return perr_at(p, p->pos, "unexpected ')'");
        return perr_at(p, p->pos, "unexpected '%c'", p->s[p->pos]);
    }
    return 0;
}

/* ---------------------------------------------------------------------------
 * grammar_parse / grammar_free
 * ------------------------------------------------------------------------- */

static void parser_free(parser *p) {
    for (uint32_t i = 0; i < p->n_rules; i++) {
        free(p->rules[i].name);
        free(p->rules[i].el);
    }
    free(p->rules);
    free(p->hash);
}

/* Packs the parsed rules into one allocation: a user rule's name is
 * copied, and each user rule that has generated rules gets one "base~"
 * string they all point to. NULL when out of memory. */
static grammar *pack(const parser *p) {
    size_t n = p->n_rules, chars = 0;
    size_t *gen_name = calloc(n ? n : 1, sizeof *gen_name); /* user rule -> its "base~" + 1 */
    if (!gen_name) return NULL;
    for (size_t i = 0; i < n; i++) {
        const prule *r = &p->rules[i];
        if (r->name)
            chars += strlen(r->name) + 1;
        else if (!gen_name[r->base]++)
            chars += strlen(p->rules[r->base].name) + 2;
    }
    size_t off_names = sizeof(grammar);
    size_t off_elems = off_names + n * sizeof(char *);
    size_t off_start = off_elems + p->total * sizeof(grammar_elem);
    size_t off_null = off_start + n * sizeof(uint32_t);
    size_t off_chars = off_null + n;
    char *mem = calloc(1, off_chars + chars);
    if (!mem) {
        free(gen_name);
        return NULL;
    }
    grammar *g = (grammar *)mem;
    const char **names = (const char **)(mem + off_names);
    grammar_elem *elems = (grammar_elem *)(mem + off_elems);
    uint32_t *start = (uint32_t *)(mem + off_start);
    char *c = mem + off_chars;
    for (size_t i = 0; i < n; i++) { /* user names, then the "base~" strings */
        const prule *r = &p->rules[i];
        if (!r->name) continue;
        size_t len = strlen(r->name);
        memcpy(c, r->name, len + 1);
        names[i] = c;
        c += len + 1;
        if (!gen_name[i]) continue;
        memcpy(c, r->name, len);
        memcpy(c + len, "~", 2);
        gen_name[i] = (size_t)(c - mem) + 1;
        c += len + 2;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const prule *r = &p->rules[i];
        start[i] = (uint32_t)k;
        memcpy(elems + k, r->el, r->n * sizeof *elems);
        k += r->n;
        if (!r->name) names[i] = mem + gen_name[r->base] - 1;
    }
    free(gen_name);
    g->n_rules = (uint32_t)n;
    g->n_elems = k;
    g->bytes = off_chars + chars;
    g->rule_start = start;
    g->nullable = (const uint8_t *)(mem + off_null);
    g->names = names;
    g->elems = elems;
    return g;
}

int grammar_parse(grammar **out, const char *text, size_t n, tps_err *err) {
    return grammar_parse_limited(out, text, n, NULL, err);
}

int grammar_parse_limited(grammar **out, const char *text, size_t n, const grammar_limits *lim,
                          tps_err *err) {
    *out = NULL;
    parser p = {.s = text, .n = n, .err = err};
    if (lim) {
        p.max_bytes = lim->max_bytes;
        p.label = lim->bytes_label;
        p.deadline_ns = lim->deadline_ns;
    }
    int rc = 0;
    skip_space(&p, true);
    while (!rc && p.pos < p.n) {
        rc = parse_rule(&p);
        skip_space(&p, true);
    }
    for (uint32_t i = 0; !rc && i < p.n_rules; i++)
        if (!p.rules[i].defined)
            rc = perr_at(&p, p.rules[i].ref_off, "rule '%s' is not defined", p.rules[i].name);
    int64_t root = -1;
    for (uint32_t i = 0; !rc && i < p.n_rules && root < 0; i++)
        if (p.rules[i].name && !strcmp(p.rules[i].name, "root")) root = i;
    if (!rc && root < 0) rc = tps_fail(err, TPS_EINVAL, "grammar: there is no rule 'root'");
    grammar *g = NULL;
    if (!rc && !(g = pack(&p))) rc = oom(&p);
    parser_free(&p);
    if (rc) return rc;
    g->root = (uint32_t)root;
    grammar_compute_nullable(g, (uint8_t *)g->nullable);
    if ((rc = grammar_check_left_recursion(g, err))) {
        grammar_free(g);
        return rc;
    }
    *out = g;
    return 0;
}
