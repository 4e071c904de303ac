/* The expression grammar, by jinja2's parser.py, loosest first:
 *   condexpr  a if b else c        (else optional: undefined)
 *   or, and, not
 *   compare   == != < <= > >= in, not in   (chained: a < b < c)
 *   math1     + -
 *   concat    ~
 *   math2     * / // %
 *   pow       **                   (left-associative, as jinja2's)
 *   unary     - +                  then postfix (.attr [key] (call)),
 *                                  then filters |f(...) and tests `is [not] t`
 *   primary   names, literals, (tuples), [lists], {dicts}
 * Unknown filter and test names are kept (a check after parsing decides,
 * as jinja2 does, whether they are an error now or when evaluated).
 * Not here: statements (jinja_parse_stmt.c). */
#include "jinja/jinja_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"

static const jtok EOF_TOK = {.type = TK_EOF};

const jtok *jp_peek(const jparser *p, size_t ahead) {
    return p->pos + ahead < p->n ? &p->tk[p->pos + ahead] : &EOF_TOK;
}

static const jtok *cur(const jparser *p) {
    return jp_peek(p, 0);
}

bool jp_is_name(const jtok *t, const char *name) {
    size_t n = strlen(name);
    return t->type == TK_NAME && t->n == n && !memcmp(t->s, name, n);
}

static bool is_op(const jtok *t, int op) {
    return t->type == TK_OP && t->op == op;
}

bool jp_fail(jparser *p, int rc, const char *fmt, ...) {
    if (p->rc) return false;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tps_fail(p->err, rc, "line %u: %s", cur(p)->line, msg);
    p->rc = rc;
    return false;
}

static const char *describe(const jtok *t, char *buf, size_t cap) {
    static const char *const names[] = {[TK_EOF] = "end of template",
                                        [TK_DATA] = "template data",
                                        [TK_VAR_BEGIN] = "begin of print statement",
                                        [TK_VAR_END] = "end of print statement",
                                        [TK_BLOCK_BEGIN] = "begin of statement block",
                                        [TK_BLOCK_END] = "end of statement block",
                                        [TK_STRING] = "string",
                                        [TK_INT] = "integer",
                                        [TK_FLOAT] = "float",
                                        [TK_OP] = "operator",
                                        [TK_NAME] = "name"};
    if (t->type == TK_NAME) {
        snprintf(buf, cap, "%.*s", (int)(t->n < 60 ? t->n : 60), t->s);
        return buf;
    }
    return names[t->type];
}

bool jp_expect_op(jparser *p, int op) {
    if (is_op(cur(p), op)) {
        p->pos++;
        return true;
    }
    static const char *const text[] = {
        [OP_RPAREN] = ")", [OP_RBRACKET] = "]", [OP_RBRACE] = "}", [OP_COLON] = ":",
        [OP_LPAREN] = "(", [OP_COMMA] = ",",    [OP_ASSIGN] = "=", [OP_LBRACKET] = "["};
    char buf[64];
    return jp_fail(p, TPS_EINVAL, "expected '%s', got '%s'", text[op] ? text[op] : "?",
                   describe(cur(p), buf, sizeof buf));
}

jnode *jp_node(jparser *p, int kind, uint32_t line) {
    jnode *n = jarena_alloc(&p->t->arena, sizeof *n);
    if (!n) {
        jp_fail(p, TPS_ENOMEM, "out of memory compiling the template");
        return NULL;
    }
    memset(n, 0, sizeof *n);
    n->kind = (uint8_t)kind;
    n->line = line;
    n->sym = -1;
    return n;
}

/* A string kept with the template (token text lives in a scratch arena). */
static jinja_val keep(jparser *p, const char *s, size_t n) {
    char *c = jarena_alloc(&p->t->arena, n + 1);
    if (!c) {
        jp_fail(p, TPS_ENOMEM, "out of memory compiling the template");
        return (jinja_val){0};
    }
    if (n) memcpy(c, s, n);
    c[n] = 0;
    return (jinja_val){.type = JINJA_STR, .n = (uint32_t)n, .u.s = c};
}

int32_t jp_sym(jparser *p, const char *s, size_t n) {
    jinja_tpl *t = p->t;
    for (uint32_t i = 0; i < t->n_syms; i++)
        if (t->syms[i].n == n && !memcmp(t->syms[i].u.s, s, n)) return (int32_t)i;
    size_t cap = t->cap_syms;
    if (TPS_GROW(t->syms, cap, (size_t)t->n_syms + 1, 64)) {
        jp_fail(p, TPS_ENOMEM, "out of memory compiling the template");
        return -1;
    }
    t->cap_syms = (uint32_t)cap;
    jinja_val name = keep(p, s, n);
    if (p->rc) return -1;
    t->syms[t->n_syms] = name;
    return (int32_t)t->n_syms++;
}

/* ---------------------------------------------------------------------------
 * Primary expressions
 * ------------------------------------------------------------------------- */

static jnode *unary(jparser *p, bool with_filter);
static jnode *trailers(jparser *p, jnode *n, bool filters);

static jnode *constant(jparser *p, uint32_t line, jinja_val v) {
    jnode *n = jp_node(p, N_CONST, line);
    if (n) n->v = v;
    return n;
}

static jnode *name_or_const(jparser *p, const jtok *t) {
    p->pos++;
    if (jp_is_name(t, "true") || jp_is_name(t, "True"))
        return constant(p, t->line, jinja_bool(true));
    if (jp_is_name(t, "false") || jp_is_name(t, "False"))
        return constant(p, t->line, jinja_bool(false));
    if (jp_is_name(t, "none") || jp_is_name(t, "None")) return constant(p, t->line, jinja_none());
    jnode *n = jp_node(p, N_NAME, t->line);
    if (!n) return NULL;
    n->sym = jp_sym(p, t->s, t->n);
    if (p->macro_flags) {
        if (jp_is_name(t, "varargs")) *p->macro_flags |= MACRO_VARARGS;
        if (jp_is_name(t, "kwargs")) *p->macro_flags |= MACRO_KWARGS;
        if (jp_is_name(t, "caller")) *p->macro_flags |= MACRO_CALLER;
    }
    return n->sym < 0 ? NULL : n;
}

/* Adjacent string literals are one string ("a" "b" == "ab"). */
static jnode *string_lit(jparser *p) {
    uint32_t line = cur(p)->line;
    size_t total = 0;
    for (size_t k = 0; jp_peek(p, k)->type == TK_STRING; k++)
        total += jp_peek(p, k)->n;
    char *buf = jarena_alloc(&p->t->arena, total + 1);
    if (!buf) return jp_fail(p, TPS_ENOMEM, "out of memory compiling the template"), NULL;
    size_t o = 0;
    while (cur(p)->type == TK_STRING) {
        memcpy(buf + o, cur(p)->s, cur(p)->n);
        o += cur(p)->n;
        p->pos++;
    }
    buf[o] = 0;
    return constant(p, line, (jinja_val){.type = JINJA_STR, .n = (uint32_t)o, .u.s = buf});
}

static bool add_kid(jparser *p, jnode *parent, jnode *kid, uint32_t *cap) {
    if (!kid) return false;
    if (parent->n == *cap) {
        uint32_t nc = *cap ? *cap * 2 : 4;
        jnode **k = jarena_alloc(&p->t->arena, nc * sizeof *k);
        if (!k) return jp_fail(p, TPS_ENOMEM, "out of memory compiling the template");
        if (parent->n) memcpy(k, parent->kids, parent->n * sizeof *k);
        parent->kids = k;
        *cap = nc;
    }
    parent->kids[parent->n++] = kid;
    return true;
}

/* [a, b, ...] and {k: v, ...} (a trailing comma allowed) */
static jnode *list_or_dict(jparser *p, bool dict) {
    jnode *n = jp_node(p, dict ? N_DICT : N_LIST, cur(p)->line);
    if (!n) return NULL;
    p->pos++;
    int close = dict ? OP_RBRACE : OP_RBRACKET;
    uint32_t cap = 0;
    while (!is_op(cur(p), close)) {
        if (n->n && !jp_expect_op(p, OP_COMMA)) return NULL;
        if (is_op(cur(p), close)) break;
        if (!add_kid(p, n, jp_expr(p), &cap)) return NULL;
        if (dict && (!jp_expect_op(p, OP_COLON) || !add_kid(p, n, jp_expr(p), &cap))) return NULL;
    }
    p->pos++;
    return n;
}

static jnode *primary(jparser *p) {
    const jtok *t = cur(p);
    char buf[64];
    switch (t->type) {
    case TK_NAME:
        return name_or_const(p, t);
    case TK_STRING:
        return string_lit(p);
    case TK_INT:
        p->pos++;
        return constant(p, t->line, jinja_int(t->i));
    case TK_FLOAT:
        p->pos++;
        return constant(p, t->line, jinja_float(t->f));
    case TK_OP:
        if (t->op == OP_LPAREN) {
            p->pos++;
            jnode *n = jp_tuple(p, true, false, NULL);
            if (n && n->kind == N_TUPLE) n->flags = 1; /* written with parentheses */
            return n && jp_expect_op(p, OP_RPAREN) ? n : NULL;
        }
        if (t->op == OP_LBRACKET || t->op == OP_LBRACE) return list_or_dict(p, t->op == OP_LBRACE);
        break;
    default:
        break;
    }
    jp_fail(p, TPS_EINVAL, "unexpected '%s'", describe(t, buf, sizeof buf));
    return NULL;
}

static bool tuple_end(const jparser *p, const char *end_name) {
    const jtok *t = cur(p);
    return t->type == TK_VAR_END || t->type == TK_BLOCK_END || is_op(t, OP_RPAREN) ||
           (end_name && jp_is_name(t, end_name));
}

jnode *jp_tuple(jparser *p, bool condexpr, bool simplified, const char *end_name) {
    uint32_t line = cur(p)->line, cap = 0;
    jnode *tuple = jp_node(p, N_TUPLE, line);
    bool is_tuple = false;
    if (!tuple) return NULL;
    for (;;) {
        if (tuple->n && !jp_expect_op(p, OP_COMMA)) return NULL;
        if (tuple_end(p, end_name)) break;
        jnode *e = simplified ? primary(p) : condexpr ? jp_expr(p) : jp_or(p);
        if (!add_kid(p, tuple, e, &cap)) return NULL;
        if (!is_op(cur(p), OP_COMMA)) break;
        is_tuple = true;
    }
    if (!is_tuple) {
        if (tuple->n) return tuple->kids[0];
        if (!is_op(cur(p), OP_RPAREN)) {
            char buf[64];
            jp_fail(p, TPS_EINVAL, "Expected an expression, got '%s'",
                    describe(cur(p), buf, sizeof buf));
            return NULL;
        }
    }
    return tuple;
}

/* ---------------------------------------------------------------------------
 * Postfix: attributes, subscripts, calls
 * ------------------------------------------------------------------------- */

/* One part of a subscript: an expression or a slice a:b:c. */
static jnode *subscribed(jparser *p) {
    uint32_t line = cur(p)->line;
    jnode *first = NULL;
    if (!is_op(cur(p), OP_COLON)) {
        first = jp_expr(p);
        if (!first || !is_op(cur(p), OP_COLON)) return first;
    }
    p->pos++; /* the colon */
    jnode *s = jp_node(p, N_SLICE, line);
    if (!s) return NULL;
    s->a = first;
    if (!is_op(cur(p), OP_COLON) && !is_op(cur(p), OP_RBRACKET) && !is_op(cur(p), OP_COMMA))
        if (!(s->b = jp_expr(p))) return NULL;
    if (is_op(cur(p), OP_COLON)) {
        p->pos++;
        if (!is_op(cur(p), OP_RBRACKET) && !is_op(cur(p), OP_COMMA))
            if (!(s->c = jp_expr(p))) return NULL;
    }
    return s;
}

static jnode *subscript(jparser *p, jnode *obj) {
    const jtok *t = cur(p);
    p->pos++;
    if (t->op == OP_DOT) {
        const jtok *a = cur(p);
        p->pos++;
        if (a->type == TK_NAME) {
            jnode *n = jp_node(p, N_GETATTR, t->line);
            if (!n) return NULL;
            n->a = obj;
            n->v = keep(p, a->s, a->n);
            return n;
        }
        if (a->type != TK_INT) return jp_fail(p, TPS_EINVAL, "expected name or number"), NULL;
        jnode *n = jp_node(p, N_GETITEM, t->line);
        if (!n || !(n->b = constant(p, a->line, jinja_int(a->i)))) return NULL;
        n->a = obj;
        return n;
    }
    jnode *n = jp_node(p, N_GETITEM, t->line), *parts[16];
    uint32_t np = 0;
    if (!n) return NULL;
    n->a = obj;
    while (!is_op(cur(p), OP_RBRACKET)) {
        if (np && !jp_expect_op(p, OP_COMMA)) return NULL;
        if (np == 16) return jp_fail(p, TPS_EINVAL, "too many subscripts"), NULL;
        if (!(parts[np++] = subscribed(p))) return NULL;
    }
    p->pos++;
    if (!np) return jp_fail(p, TPS_EINVAL, "expected subscript expression"), NULL;
    if (np == 1) {
        n->b = parts[0];
        return n;
    }
    jnode *tuple = jp_node(p, N_TUPLE, t->line);
    uint32_t cap = 0;
    for (uint32_t i = 0; tuple && i < np; i++)
        if (!add_kid(p, tuple, parts[i], &cap)) return NULL;
    n->b = tuple;
    return tuple ? n : NULL;
}

/* ( args ) into call's kids, keyword arguments last (names in kw). */
int jp_args(jparser *p, jnode *call) {
    if (!jp_expect_op(p, OP_LPAREN)) return -1;
    uint32_t cap = 0;
    jnode *kw[64];
    jinja_val names[64];
    uint32_t nkw = 0;
    while (!is_op(cur(p), OP_RPAREN)) {
        if ((call->n || nkw) && !jp_expect_op(p, OP_COMMA)) return -1;
        if (is_op(cur(p), OP_RPAREN)) break;
        if (is_op(cur(p), OP_MUL) || is_op(cur(p), OP_POW))
            return jp_fail(p, TPS_EUNSUP, "*args and **kwargs in a call are not supported"), -1;
        if (cur(p)->type == TK_NAME && is_op(jp_peek(p, 1), OP_ASSIGN)) {
            if (nkw == 64) return jp_fail(p, TPS_EINVAL, "too many keyword arguments"), -1;
            names[nkw] = keep(p, cur(p)->s, cur(p)->n);
            p->pos += 2;
            if (!(kw[nkw++] = jp_expr(p))) return -1;
            continue;
        }
        if (nkw) return jp_fail(p, TPS_EINVAL, "invalid syntax for function call expression"), -1;
        if (!add_kid(p, call, jp_expr(p), &cap)) return -1;
    }
    p->pos++;
    for (uint32_t i = 0; i < nkw; i++)
        if (!add_kid(p, call, kw[i], &cap)) return -1;
    if (nkw) {
        jinja_val *k = jarena_alloc(&p->t->arena, nkw * sizeof *k);
        if (!k) return jp_fail(p, TPS_ENOMEM, "out of memory"), -1;
        memcpy(k, names, nkw * sizeof *k);
        call->kw = k;
        call->nkw = nkw;
    }
    return 0;
}

static jnode *call(jparser *p, jnode *fn) {
    jnode *n = jp_node(p, N_CALL, cur(p)->line);
    if (!n) return NULL;
    n->a = fn;
    return jp_args(p, n) ? NULL : n;
}

static jnode *test(jparser *p, jnode *input);

/* The operators that may follow an expression, applied while they come:
 * .attr, [key] and (args) after a primary (jinja2's parse_postfix), or with
 * filters |filter, "is" test and (args) after a unary (parse_filter_expr). */
static jnode *trailers(jparser *p, jnode *n, bool filters) {
    while (n) {
        const jtok *t = cur(p);
        if (is_op(t, OP_LPAREN))
            n = call(p, n);
        else if (!filters && (is_op(t, OP_DOT) || is_op(t, OP_LBRACKET)))
            n = subscript(p, n);
        else if (filters && is_op(t, OP_PIPE))
            n = jp_filter_chain(p, n, false);
        else if (filters && jp_is_name(t, "is"))
            n = test(p, n);
        else
            break;
    }
    return n;
}

/* ---------------------------------------------------------------------------
 * Filters and tests
 * ------------------------------------------------------------------------- */

/* name(.name)* of a filter or test; the id through find, -1 when unknown. */
static jnode *named(jparser *p, int kind, jnode *input) {
    const jtok *t = cur(p);
    if (t->type != TK_NAME) return jp_fail(p, TPS_EINVAL, "expected a filter or test name"), NULL;
    jnode *n = jp_node(p, kind, t->line);
    if (!n) return NULL;
    n->a = input;
    size_t len = t->n;
    p->pos++;
    while (is_op(cur(p), OP_DOT) && jp_peek(p, 1)->type == TK_NAME) {
        len = (size_t)(jp_peek(p, 1)->s + jp_peek(p, 1)->n - t->s);
        p->pos += 2;
    }
    n->v = keep(p, t->s, len);
    int id = kind == N_FILTER ? jinja_filter_find(t->s, len) : jinja_test_find(t->s, len);
    n->op = (uint8_t)(id < 0 ? 255 : id);
    n->flags = id == -2; /* jinja2 has it; this engine does not */
    return n;
}

jnode *jp_filter_chain(jparser *p, jnode *input, bool start_inline) {
    while (is_op(cur(p), OP_PIPE) || start_inline) {
        if (!start_inline) p->pos++;
        start_inline = false;
        jnode *f = named(p, N_FILTER, input);
        if (!f) return NULL;
        if (is_op(cur(p), OP_LPAREN) && jp_args(p, f)) return NULL;
        input = f;
    }
    return input;
}

static jnode *test(jparser *p, jnode *input) {
    uint32_t line = cur(p)->line;
    p->pos++; /* is */
    bool negated = jp_is_name(cur(p), "not");
    if (negated) p->pos++;
    jnode *t = named(p, N_TEST, input);
    if (!t) return NULL;
    const jtok *c = cur(p);
    if (is_op(c, OP_LPAREN)) {
        if (jp_args(p, t)) return NULL;
    } else if ((c->type == TK_NAME || c->type == TK_STRING || c->type == TK_INT ||
                c->type == TK_FLOAT || is_op(c, OP_LPAREN) || is_op(c, OP_LBRACKET) ||
                is_op(c, OP_LBRACE)) &&
               !jp_is_name(c, "else") && !jp_is_name(c, "or") && !jp_is_name(c, "and")) {
        if (jp_is_name(c, "is"))
            return jp_fail(p, TPS_EINVAL, "You cannot chain multiple tests with is"), NULL;
        jnode *arg = trailers(p, primary(p), false);
        uint32_t cap = 0;
        if (!add_kid(p, t, arg, &cap)) return NULL;
    }
    if (!negated) return t;
    jnode *n = jp_node(p, N_UNARY, line);
    if (!n) return NULL;
    n->op = OP_NOT;
    n->a = t;
    return n;
}

/* ---------------------------------------------------------------------------
 * Operators
 * ------------------------------------------------------------------------- */

static jnode *unary(jparser *p, bool with_filter) {
    const jtok *t = cur(p);
    jnode *n;
    if (++p->depth > JP_MAX_NESTING)
        return jp_fail(p, TPS_EINVAL, "expressions nested deeper than %d", JP_MAX_NESTING), NULL;
    if (is_op(t, OP_SUB) || is_op(t, OP_ADD)) {
        p->pos++;
        n = jp_node(p, N_UNARY, t->line);
        if (!n || !(n->a = unary(p, false))) return NULL;
        n->op = t->op == OP_SUB ? OP_NEG : OP_POS;
    } else {
        n = primary(p);
    }
    n = trailers(p, n, false);
    if (with_filter) n = trailers(p, n, true);
    p->depth--;
    return n;
}

static jnode *binary(jparser *p, int kind, int op, jnode *a, jnode *b) {
    if (!a || !b) return NULL;
    jnode *n = jp_node(p, kind, a->line);
    if (!n) return NULL;
    n->op = (uint8_t)op;
    n->a = a;
    n->b = b;
    return n;
}

static jnode *pow_expr(jparser *p) {
    jnode *l = unary(p, true);
    while (l && is_op(cur(p), OP_POW)) {
        p->pos++;
        l = binary(p, N_BINARY, OP_POW, l, unary(p, true));
    }
    return l;
}

static jnode *math2(jparser *p) {
    jnode *l = pow_expr(p);
    while (l && cur(p)->type == TK_OP &&
           (cur(p)->op == OP_MUL || cur(p)->op == OP_DIV || cur(p)->op == OP_FLOORDIV ||
            cur(p)->op == OP_MOD)) {
        int op = cur(p)->op;
        p->pos++;
        l = binary(p, N_BINARY, op, l, pow_expr(p));
    }
    return l;
}

static jnode *concat(jparser *p) {
    jnode *first = math2(p);
    if (!first || !is_op(cur(p), OP_TILDE)) return first;
    jnode *n = jp_node(p, N_CONCAT, first->line);
    uint32_t cap = 0;
    if (!add_kid(p, n, first, &cap)) return NULL;
    while (is_op(cur(p), OP_TILDE)) {
        p->pos++;
        if (!add_kid(p, n, math2(p), &cap)) return NULL;
    }
    return n;
}

static jnode *math1(jparser *p) {
    jnode *l = concat(p);
    while (l && (is_op(cur(p), OP_ADD) || is_op(cur(p), OP_SUB))) {
        int op = cur(p)->op;
        p->pos++;
        l = binary(p, N_BINARY, op, l, concat(p));
    }
    return l;
}

static int compare_op(const jparser *p, size_t *skip) {
    const jtok *t = cur(p);
    *skip = 1;
    if (t->type == TK_OP && (t->op == OP_EQ || t->op == OP_NE || t->op == OP_LT ||
                             t->op == OP_LTEQ || t->op == OP_GT || t->op == OP_GTEQ))
        return t->op;
    if (jp_is_name(t, "in")) return OP_IN;
    if (jp_is_name(t, "not") && jp_is_name(jp_peek(p, 1), "in")) {
        *skip = 2;
        return OP_NOTIN;
    }
    return 0;
}

static jnode *compare(jparser *p) {
    jnode *first = math1(p);
    size_t skip;
    if (!first || !compare_op(p, &skip)) return first;
    jnode *n = jp_node(p, N_COMPARE, first->line);
    if (!n) return NULL;
    n->a = first;
    uint32_t cap = 0;
    int op;
    while ((op = compare_op(p, &skip))) {
        p->pos += skip;
        jnode *o = jp_node(p, N_OPERAND, cur(p)->line);
        if (!o || !(o->a = math1(p)) || !add_kid(p, n, o, &cap)) return NULL;
        o->op = (uint8_t)op;
    }
    return n;
}

static jnode *not_expr(jparser *p) {
    if (!jp_is_name(cur(p), "not")) return compare(p);
    jnode *n = jp_node(p, N_UNARY, cur(p)->line);
    p->pos++;
    if (++p->depth > JP_MAX_NESTING)
        return jp_fail(p, TPS_EINVAL, "expressions nested deeper than %d", JP_MAX_NESTING), NULL;
    if (!n || !(n->a = not_expr(p))) return NULL;
    p->depth--;
    n->op = OP_NOT;
    return n;
}

/* operand (word operand)*, left-associative: "and" over not_expr, "or"
 * over and_expr. */
static jnode *word_chain(jparser *p, const char *word, int kind, jnode *(*operand)(jparser *)) {
    jnode *l = operand(p);
    while (l && jp_is_name(cur(p), word)) {
        p->pos++;
        l = binary(p, kind, 0, l, operand(p));
    }
    return l;
}

static jnode *and_expr(jparser *p) {
    return word_chain(p, "and", N_AND, not_expr);
}

jnode *jp_or(jparser *p) {
    return word_chain(p, "or", N_OR, and_expr);
}

jnode *jp_expr(jparser *p) {
    if (++p->depth > JP_MAX_NESTING)
        return jp_fail(p, TPS_EINVAL, "expressions nested deeper than %d", JP_MAX_NESTING), NULL;
    jnode *e1 = jp_or(p);
    while (e1 && jp_is_name(cur(p), "if")) {
        p->pos++;
        jnode *n = jp_node(p, N_COND, e1->line);
        if (!n || !(n->a = jp_or(p))) return NULL;
        n->b = e1;
        if (jp_is_name(cur(p), "else")) {
            p->pos++;
            if (!(n->c = jp_expr(p))) return NULL;
        }
        e1 = n;
    }
    p->depth--;
    return e1;
}
