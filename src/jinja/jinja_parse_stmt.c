/* Statements and the compile entry point: {% for %} (with else, an if
 * filter and tuple targets), {% if %} / elif / else, {% set %} (names,
 * tuples, namespace attributes, blocks with filters), {% macro %},
 * {% call %}, {% filter %}, {% with %}, {% break %} / {% continue %}
 * (loopcontrols), {% print %} and transformers' {% generation %} (its
 * body renders as it is). {% include %}, {% import %}, {% extends %},
 * {% block %}, {% autoescape %} and recursive loops are refused naming
 * the tag and line. After parsing, a check finds unknown filters and tests
 * where jinja2 reports them at compile time (outside if blocks and
 * conditional expressions). */
#include "jinja/jinja_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct stmt_ctx {
    uint32_t loops; /* enclosing for loops (break/continue need one) */
} stmt_ctx;

static jnode *body(jparser *p, stmt_ctx *sc, const char *const *ends);

static const jtok *cur(const jparser *p) {
    return jp_peek(p, 0);
}

static bool expect_end(jparser *p) {
    if (cur(p)->type == TK_BLOCK_END) {
        p->pos++;
        return true;
    }
    return jp_fail(p, TPS_EINVAL, "expected the end of the statement block");
}

static bool expect_name(jparser *p, const char *name) {
    if (jp_is_name(cur(p), name)) {
        p->pos++;
        return true;
    }
    return jp_fail(p, TPS_EINVAL, "expected '%s'", name);
}

/* An assignment target: a name or a tuple of them. */
static bool assignable(const jnode *n) {
    if (!n) return false;
    if (n->kind == N_NAME) return true;
    if (n->kind != N_TUPLE) return false;
    for (uint32_t i = 0; i < n->n; i++)
        if (!assignable(n->kids[i])) return false;
    return true;
}

static jnode *target(jparser *p, const char *end_name) {
    jnode *t = jp_tuple(p, false, true, end_name);
    if (t && !assignable(t)) {
        jp_fail(p, TPS_EINVAL, "can't assign to this expression");
        return NULL;
    }
    return t;
}

/* The body up to one of ends (the end name is left current). */
static jnode *block_body(jparser *p, stmt_ctx *sc, const char *const *ends) {
    if (!expect_end(p)) return NULL;
    jnode *b = body(p, sc, ends);
    if (b && cur(p)->type == TK_EOF)
        return jp_fail(p, TPS_EINVAL, "unexpected end of template, expected '%s'", ends[0]), NULL;
    return b;
}

static jnode *parse_for(jparser *p, stmt_ctx *sc, uint32_t line) {
    jnode *n = jp_node(p, N_FOR, line);
    if (!n || !(n->a = target(p, "in")) || !expect_name(p, "in")) return NULL;
    if (!(n->b = jp_tuple(p, false, false, "recursive"))) return NULL;
    if (jp_is_name(cur(p), "if")) {
        p->pos++;
        if (!(n->c = jp_expr(p))) return NULL;
    }
    if (jp_is_name(cur(p), "recursive"))
        return jp_fail(p, TPS_EUNSUP, "recursive for loops are not supported"), NULL;
    static const char *const ends[] = {"endfor", "else", NULL};
    sc->loops++;
    n->d = block_body(p, sc, ends);
    sc->loops--;
    if (!n->d) return NULL;
    if (jp_is_name(cur(p), "else")) {
        static const char *const end[] = {"endfor", NULL};
        p->pos++;
        if (!(n->e = block_body(p, sc, end))) return NULL;
    }
    p->pos++; /* endfor */
    return n;
}

/* if / elif ... / else / endif: an elif is an N_IF in the else slot,
 * chained without recursion (a template may have many). */
static jnode *parse_if(jparser *p, stmt_ctx *sc, uint32_t line) {
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    jnode *first = NULL, **slot = &first;
    for (;;) {
        jnode *n = jp_node(p, N_IF, line);
        if (!n || !(n->a = jp_tuple(p, false, false, NULL)) || !(n->b = block_body(p, sc, ends)))
            return NULL;
        *slot = n;
        slot = &n->c;
        if (!jp_is_name(cur(p), "elif")) break;
        line = cur(p)->line;
        p->pos++;
    }
    if (jp_is_name(cur(p), "else")) {
        static const char *const end[] = {"endif", NULL};
        p->pos++;
        if (!(*slot = block_body(p, sc, end))) return NULL;
    }
    p->pos++; /* endif */
    return first;
}

static jnode *parse_set(jparser *p, stmt_ctx *sc, uint32_t line) {
    const jtok *t = cur(p);
    if (t->type == TK_NAME && jp_peek(p, 1)->type == TK_OP && jp_peek(p, 1)->op == OP_DOT) {
        const jtok *attr = jp_peek(p, 2);
        if (attr->type != TK_NAME) return jp_fail(p, TPS_EINVAL, "expected a name"), NULL;
        jnode *n = jp_node(p, N_SET_NS, line);
        if (!n) return NULL;
        n->sym = jp_sym(p, t->s, t->n);
        char *a = jarena_alloc(&p->t->arena, attr->n + 1);
        if (!a) return jp_fail(p, TPS_ENOMEM, "out of memory"), NULL;
        memcpy(a, attr->s, attr->n);
        a[attr->n] = 0;
        n->v = (jinja_val){.type = JINJA_STR, .n = attr->n, .u.s = a};
        p->pos += 3;
        if (!jp_expect_op(p, OP_ASSIGN) || !(n->b = jp_tuple(p, true, false, NULL))) return NULL;
        return n;
    }
    jnode *tg = target(p, NULL);
    if (!tg) return NULL;
    if (cur(p)->type == TK_OP && cur(p)->op == OP_ASSIGN) {
        p->pos++;
        jnode *n = jp_node(p, N_SET, line);
        if (!n || !(n->b = jp_tuple(p, true, false, NULL))) return NULL;
        n->a = tg;
        return n;
    }
    jnode *n = jp_node(p, N_SET_BLOCK, line);
    if (!n) return NULL;
    n->a = tg;
    if (cur(p)->type == TK_OP && cur(p)->op == OP_PIPE) {
        if (!(n->c = jp_filter_chain(p, NULL, false))) return NULL;
    }
    static const char *const ends[] = {"endset", NULL};
    stmt_ctx inner = {0};
    if (!(n->d = block_body(p, &inner, ends))) return NULL;
    p->pos++;
    return n;
}

/* ( name [= default], ... ) into n's kids. */
static bool signature(jparser *p, jnode *n) {
    if (!jp_expect_op(p, OP_LPAREN)) return false;
    jnode *params[64];
    uint32_t np = 0;
    bool defaults = false;
    while (!(cur(p)->type == TK_OP && cur(p)->op == OP_RPAREN)) {
        if (np && !jp_expect_op(p, OP_COMMA)) return false;
        if (cur(p)->type != TK_NAME) return jp_fail(p, TPS_EINVAL, "expected a parameter name");
        if (np == 64) return jp_fail(p, TPS_EINVAL, "too many parameters");
        jnode *prm = jp_node(p, N_NAME, cur(p)->line);
        if (!prm) return false;
        prm->sym = jp_sym(p, cur(p)->s, cur(p)->n);
        p->pos++;
        if (cur(p)->type == TK_OP && cur(p)->op == OP_ASSIGN) {
            p->pos++;
            if (!(prm->a = jp_expr(p))) return false;
            defaults = true;
        } else if (defaults) {
            return jp_fail(p, TPS_EINVAL, "non-default argument follows default argument");
        }
        params[np++] = prm;
    }
    p->pos++;
    n->kids = jarena_alloc(&p->t->arena, (np ? np : 1) * sizeof *n->kids);
    if (!n->kids) return jp_fail(p, TPS_ENOMEM, "out of memory");
    memcpy(n->kids, params, np * sizeof *params);
    n->n = np;
    return true;
}

/* The body of a macro or call block: its own scope, its own flags. */
static jnode *macro_body(jparser *p, jnode *n, const char *end) {
    const char *ends[] = {end, NULL};
    uint16_t *saved = p->macro_flags;
    p->macro_flags = &n->flags;
    stmt_ctx inner = {0};
    n->d = block_body(p, &inner, ends);
    p->macro_flags = saved;
    if (!n->d) return NULL;
    p->pos++;
    return n;
}

static jnode *parse_macro(jparser *p, uint32_t line) {
    jnode *n = jp_node(p, N_MACRO, line);
    if (!n) return NULL;
    if (cur(p)->type != TK_NAME) return jp_fail(p, TPS_EINVAL, "expected a macro name"), NULL;
    n->sym = jp_sym(p, cur(p)->s, cur(p)->n);
    n->v = p->t->syms[n->sym];
    p->pos++;
    if (!signature(p, n)) return NULL;
    return macro_body(p, n, "endmacro");
}

static jnode *parse_call_block(jparser *p, uint32_t line) {
    jnode *n = jp_node(p, N_CALL_BLOCK, line);
    if (!n) return NULL;
    if (cur(p)->type == TK_OP && cur(p)->op == OP_LPAREN && !signature(p, n)) return NULL;
    if (!(n->a = jp_expr(p))) return NULL;
    if (n->a->kind != N_CALL) return jp_fail(p, TPS_EINVAL, "expected call"), NULL;
    return macro_body(p, n, "endcall");
}

static jnode *parse_filter_block(jparser *p, uint32_t line) {
    jnode *n = jp_node(p, N_FILTER_BLOCK, line);
    static const char *const ends[] = {"endfilter", NULL};
    stmt_ctx inner = {0};
    if (!n || !(n->c = jp_filter_chain(p, NULL, true)) || !(n->d = block_body(p, &inner, ends)))
        return NULL;
    p->pos++;
    return n;
}

static jnode *parse_with(jparser *p, stmt_ctx *sc, uint32_t line) {
    jnode *n = jp_node(p, N_WITH, line), *sets[32];
    uint32_t ns = 0;
    if (!n) return NULL;
    while (cur(p)->type != TK_BLOCK_END) {
        if (ns && !jp_expect_op(p, OP_COMMA)) return NULL;
        if (ns == 32) return jp_fail(p, TPS_EINVAL, "too many with targets"), NULL;
        jnode *s = jp_node(p, N_SET, cur(p)->line);
        if (!s || !(s->a = target(p, NULL)) || !jp_expect_op(p, OP_ASSIGN) || !(s->b = jp_expr(p)))
            return NULL;
        sets[ns++] = s;
    }
    n->kids = jarena_alloc(&p->t->arena, (ns ? ns : 1) * sizeof *n->kids);
    if (!n->kids) return jp_fail(p, TPS_ENOMEM, "out of memory"), NULL;
    memcpy(n->kids, sets, ns * sizeof *sets);
    n->n = ns;
    static const char *const ends[] = {"endwith", NULL};
    if (!(n->d = block_body(p, sc, ends))) return NULL;
    p->pos++;
    return n;
}

/* {% generation %} ... {% endgeneration %} (transformers' assistant
 * masks) and {% print x %}. */
static jnode *parse_simple(jparser *p, stmt_ctx *sc, const jtok *t) {
    if (jp_is_name(t, "generation")) {
        static const char *const ends[] = {"endgeneration", NULL};
        jnode *b = block_body(p, sc, ends);
        if (b) p->pos++;
        return b;
    }
    jnode *n = jp_node(p, N_OUTPUT, t->line);
    if (!n || !(n->a = jp_tuple(p, true, false, NULL))) return NULL;
    return n;
}

static jnode *statement(jparser *p, stmt_ctx *sc) {
    const jtok *t = cur(p);
    uint32_t line = t->line;
    if (t->type != TK_NAME) return jp_fail(p, TPS_EINVAL, "tag name expected"), NULL;
    p->pos++;
    if (jp_is_name(t, "for")) return parse_for(p, sc, line);
    if (jp_is_name(t, "if")) return parse_if(p, sc, line);
    if (jp_is_name(t, "set")) return parse_set(p, sc, line);
    if (jp_is_name(t, "macro")) return parse_macro(p, line);
    if (jp_is_name(t, "call")) return parse_call_block(p, line);
    if (jp_is_name(t, "filter")) return parse_filter_block(p, line);
    if (jp_is_name(t, "with")) return parse_with(p, sc, line);
    if (jp_is_name(t, "generation") || jp_is_name(t, "print")) return parse_simple(p, sc, t);
    if (jp_is_name(t, "break") || jp_is_name(t, "continue")) {
        if (!sc->loops)
            return jp_fail(p, TPS_EINVAL, "'%s' outside of a for loop",
                           jp_is_name(t, "break") ? "break" : "continue"),
                   NULL;
        return jp_node(p, jp_is_name(t, "break") ? N_BREAK : N_CONTINUE, line);
    }
    static const char *const refused[] = {"include", "import",     "from", "extends",
                                          "block",   "autoescape", NULL};
    for (size_t i = 0; refused[i]; i++)
        if (jp_is_name(t, refused[i]))
            return jp_fail(p, TPS_EUNSUP,
                           "{%% %s %%} is not supported: chat templates are one file", refused[i]),
                   NULL;
    jp_fail(p, TPS_EINVAL, "Encountered unknown tag '%.*s'.", (int)(t->n < 60 ? t->n : 60), t->s);
    return NULL;
}

static bool is_end(const jtok *t, const char *const *ends) {
    for (size_t i = 0; ends && ends[i]; i++)
        if (jp_is_name(t, ends[i])) return true;
    return false;
}

static jnode *body(jparser *p, stmt_ctx *sc, const char *const *ends) {
    jnode *b = jp_node(p, N_BODY, cur(p)->line), *kids[64] = {0}, **heap = NULL;
    uint32_t n = 0, cap = 64;
    if (!b) return NULL;
    if (++p->depth > JP_MAX_NESTING)
        return jp_fail(p, TPS_EINVAL, "blocks and expressions nested deeper than %d",
                       JP_MAX_NESTING),
               NULL;
    for (;;) {
        const jtok *t = cur(p);
        jnode *s = NULL;
        if (t->type == TK_EOF) break;
        if (t->type == TK_DATA) {
            s = jp_node(p, N_DATA, t->line);
            if (s) {
                char *c = jarena_alloc(&p->t->arena, t->n + 1);
                if (!c) {
                    jp_fail(p, TPS_ENOMEM, "out of memory");
                    break;
                }
                memcpy(c, t->s, t->n);
                s->v = (jinja_val){.type = JINJA_STR, .n = t->n, .u.s = c};
            }
            p->pos++;
        } else if (t->type == TK_VAR_BEGIN) {
            p->pos++;
            s = jp_node(p, N_OUTPUT, t->line);
            if (s && (!(s->a = jp_tuple(p, true, false, NULL)) || cur(p)->type != TK_VAR_END)) {
                if (s->a) jp_fail(p, TPS_EINVAL, "expected the end of the print statement");
                s = NULL;
            }
            p->pos++;
        } else if (t->type == TK_BLOCK_BEGIN) {
            p->pos++;
            if (is_end(cur(p), ends)) break;
            s = statement(p, sc);
            if (s && !expect_end(p)) s = NULL;
        } else {
            jp_fail(p, TPS_EINVAL, "unexpected token");
        }
        if (!s) break;
        if (n == cap) {
            jnode **h = realloc(heap, 2 * cap * sizeof *h);
            if (!h) {
                jp_fail(p, TPS_ENOMEM, "out of memory");
                break;
            }
            if (!heap) memcpy(h, kids, n * sizeof *h);
            heap = h;
            cap *= 2;
        }
        (heap ? heap : kids)[n++] = s;
    }
    if (!p->rc) {
        b->kids = jarena_alloc(&p->t->arena, (n ? n : 1) * sizeof *b->kids);
        if (b->kids)
            memcpy(b->kids, heap ? heap : kids, n * sizeof *b->kids);
        else
            jp_fail(p, TPS_ENOMEM, "out of memory");
        b->n = n;
    }
    free(heap);
    p->depth--;
    return p->rc ? NULL : b;
}

/* ---------------------------------------------------------------------------
 * After parsing: unknown filters and tests, the variables read
 * ------------------------------------------------------------------------- */

/* The tree may be deeper than the parser's recursion (a or b or c ...,
 * x|f|f|f, a chain of elifs): the walk is bounded on its own. */
#define CHECK_MAX_DEPTH 2000

static bool check(jparser *p, const jnode *n, bool soft, uint32_t depth) {
    if (!n) return true;
    if (depth > CHECK_MAX_DEPTH) {
        tps_fail(p->err, TPS_EINVAL, "line %u: the template nests deeper than %d", n->line,
                 CHECK_MAX_DEPTH);
        p->rc = TPS_EINVAL;
        return false;
    }
    if ((n->kind == N_FILTER || n->kind == N_TEST) && n->op == 255 && !soft) {
        tps_fail(p->err, n->flags ? TPS_EUNSUP : TPS_EINVAL,
                 n->flags ? "line %u: the %s '%.*s' is not supported"
                          : "line %u: No %s named '%.*s'.",
                 n->line, n->kind == N_FILTER ? "filter" : "test", (int)n->v.n, n->v.u.s);
        p->rc = n->flags ? TPS_EUNSUP : TPS_EINVAL;
        return false;
    }
    if (n->kind == N_NAME && n->sym >= 0) p->t->sym_read[n->sym] = 1;
    bool inner = soft;
    if (n->kind == N_IF || n->kind == N_COND) inner = true;
    if (n->kind == N_FOR || n->kind == N_MACRO || n->kind == N_CALL_BLOCK ||
        n->kind == N_FILTER_BLOCK || n->kind == N_SET_BLOCK || n->kind == N_WITH)
        inner = false;
    const jnode *parts[] = {n->a, n->b, n->c, n->d, n->e};
    for (size_t i = 0; i < 5; i++)
        if (!check(p, parts[i], n->kind == N_FOR && i < 2 ? soft : inner, depth + 1)) return false;
    for (uint32_t i = 0; i < n->n; i++)
        if (!check(p, n->kids[i], inner, depth + 1)) return false;
    return true;
}

int jinja_parse(jinja_tpl *t, const jtok *toks, size_t n, tps_err *err) {
    jparser p = {.t = t, .tk = toks, .n = n, .err = err};
    stmt_ctx sc = {0};
    t->root = body(&p, &sc, NULL);
    if (!p.rc && cur(&p)->type != TK_EOF) {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(cur(&p)->n < 60 ? cur(&p)->n : 60),
                 cur(&p)->s ? cur(&p)->s : "");
        jp_fail(&p, TPS_EINVAL, "Encountered unknown tag '%s'.", name);
    }
    if (p.rc) return p.rc;
    t->sym_global = calloc(t->n_syms ? t->n_syms : 1, 1);
    t->sym_read = calloc(t->n_syms ? t->n_syms : 1, 1);
    if (!t->sym_global || !t->sym_read) return tps_fail(err, TPS_ENOMEM, "out of memory");
    if (!check(&p, t->root, false, 0)) return p.rc;
    for (uint32_t i = 0; i < t->n_syms; i++)
        t->sym_global[i] = (int8_t)jinja_global_find(t->syms[i].u.s, t->syms[i].n);
    return 0;
}

/* ---------------------------------------------------------------------------
 * Compiling
 * ------------------------------------------------------------------------- */

static int32_t sym_of(const jinja_tpl *t, const char *name) {
    size_t n = strlen(name);
    for (uint32_t i = 0; i < t->n_syms; i++)
        if (t->syms[i].n == n && !memcmp(t->syms[i].u.s, name, n)) return (int32_t)i;
    return -1;
}

int jinja_compile(jinja_tpl **out, const char *src, size_t len, tps_err *err) {
    *out = NULL;
    jinja_tpl *t = calloc(1, sizeof *t);
    if (!t) return tps_fail(err, TPS_ENOMEM, "out of memory compiling the template");
    jarena scratch = {0};
    jtok *toks = NULL;
    size_t n = 0;
    int rc = jinja_lex(&scratch, src ? src : "", src ? len : 0, &toks, &n, err);
    if (!rc) rc = jinja_parse(t, toks, n, err);
    jarena_free(&scratch);
    if (rc) {
        jinja_tpl_free(t);
        return rc;
    }
    t->sym_loop = sym_of(t, "loop");
    t->sym_varargs = sym_of(t, "varargs");
    t->sym_kwargs = sym_of(t, "kwargs");
    t->sym_caller = sym_of(t, "caller");
    *out = t;
    return 0;
}

void jinja_tpl_free(jinja_tpl *t) {
    if (!t) return;
    jarena_free(&t->arena);
    free(t->syms);
    free(t->sym_global);
    free(t->sym_read);
    free(t);
}
