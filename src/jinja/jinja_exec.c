/* Statements and the render entry point: output, if, for (jinja2's loop
 * variable, else, an if filter, tuple unpacking, break and continue),
 * set (names, tuples, namespace attributes, captured blocks), macros and
 * call blocks, filter blocks, with. A render's failure of any kind
 * unwinds here through jx_fail's longjmp. Not here: expressions
 * (jinja_eval.c), variables (jinja_scope.c). */
#include "jinja/jinja_internal.h"

#include <stdlib.h>
#include <string.h>

/* Binds a value to a target: a name, or a tuple of targets unpacked. */
static void bind_target(jctx *c, const jnode *t, jinja_val v) {
    if (t->kind == N_NAME) {
        jx_bind(c, t->sym, v);
        return;
    }
    jinja_val items = jv_iter(c, v);
    if (items.u.l->n < t->n)
        jx_fail(c, JINJA_ERROR, "not enough values to unpack (expected %u, got %u)", t->n,
                items.u.l->n);
    if (items.u.l->n > t->n)
        jx_fail(c, JINJA_ERROR, "too many values to unpack (expected %u)", t->n);
    for (uint32_t i = 0; i < t->n; i++)
        bind_target(c, t->kids[i], items.u.l->v[i]);
}

static jinja_val capture(jctx *c, const jnode *body) {
    jbuf *saved = c->out;
    c->out = jb_new(c, 256);
    jx_exec(c, body);
    jinja_val s = jb_val(c->out);
    c->out = saved;
    return s;
}

/* ---------------------------------------------------------------------------
 * for
 * ------------------------------------------------------------------------- */

/* The items a loop visits: all of them, or those its if filter keeps
 * (evaluated with the target bound, in the loop's frame). */
static jinja_val loop_items(jctx *c, const jnode *n, jframe *f) {
    jinja_val seq = jv_iter(c, jx_eval(c, n->b));
    if (!n->c) return seq;
    jinja_val kept = jv_list(c, seq.u.l->n, JLIST_LIST);
    jframe *saved = c->frame;
    c->frame = f;
    for (uint32_t i = 0; i < seq.u.l->n; i++) {
        f->n = 0;
        bind_target(c, n->a, seq.u.l->v[i]);
        if (jv_truthy(jx_eval(c, n->c))) kept.u.l->v[kept.u.l->n++] = seq.u.l->v[i];
    }
    c->frame = saved;
    return kept;
}

static void exec_for(jctx *c, const jnode *n) {
    jframe *f = jx_frame(c, c->frame), *saved = c->frame;
    jinja_val items = loop_items(c, n, f);
    jloop *l = jx_alloc(c, sizeof *l);
    memset(l, 0, sizeof *l);
    l->items = items.u.l->v;
    l->n = items.u.l->n;
    c->frame = f;
    for (l->i = 0; l->i < l->n; l->i++) {
        jx_step(c);
        f->n = 0; /* each iteration starts from the outer scope */
        bind_target(c, n->a, l->items[l->i]);
        if (c->tpl->sym_loop >= 0)
            jx_bind(c, c->tpl->sym_loop, (jinja_val){.type = JINJA_LOOP, .u.p = l});
        jx_exec(c, n->d);
        int ctl = c->ctl;
        c->ctl = CTL_NONE;
        if (ctl == CTL_BREAK) break;
    }
    c->frame = saved;
    if (!l->n && n->e) jx_exec(c, n->e);
}

/* ---------------------------------------------------------------------------
 * Macros
 * ------------------------------------------------------------------------- */

static jinja_val macro_value(jctx *c, const jnode *n) {
    jmacro *m = jx_alloc(c, sizeof *m);
    m->node = n;
    m->closure = c->frame;
    m->caller = jv_undef(JUNDEF_PLAIN, "", 0, 0);
    return (jinja_val){.type = JINJA_FUNC, .sub = JFN_MACRO, .u.p = m};
}

static const char *macro_name(const jnode *n) {
    return n->kind == N_MACRO ? n->v.u.s : "caller";
}

/* The keyword arguments of a call bound to a macro's parameters; the rest
 * are its kwargs (or an error) and caller. */
static void macro_keywords(jctx *c, const jnode *n, const jargs *a, jinja_val *params,
                           jinja_val *kwargs, jinja_val *caller) {
    for (uint32_t k = 0; k < a->nkw; k++) {
        jinja_val name = a->kwn[k];
        if (jv_str_eq(name, "caller")) {
            *caller = a->kwv[k];
            continue;
        }
        uint32_t i = 0;
        while (i < n->n && !jv_eq(c, c->tpl->syms[n->kids[i]->sym], name))
            i++;
        if (i < n->n) {
            if (i < a->n)
                jx_fail(c, JINJA_ERROR, "macro '%s' got multiple values for argument '%.*s'",
                        macro_name(n), (int)name.n, name.u.s);
            params[i] = a->kwv[k];
        } else if (n->flags & MACRO_KWARGS) {
            if (kwargs->type != JINJA_MAP) *kwargs = jv_map(c, 4, JMAP_DICT);
            jv_map_put(c, *kwargs, name, a->kwv[k]);
        } else {
            jx_fail(c, JINJA_ERROR, "macro '%s' takes no keyword argument '%.*s'", macro_name(n),
                    (int)name.n, name.u.s);
        }
    }
}

static jinja_val call_macro(jctx *c, jinja_val fn, const jargs *a) {
    const jmacro *m = fn.u.p;
    const jnode *n = m->node;
    if (a->n > n->n && !(n->flags & MACRO_VARARGS))
        jx_fail(c, JINJA_ERROR, "macro '%s' takes not more than %u argument(s)", macro_name(n),
                n->n);
    jinja_val *params = jx_alloc(c, (n->n ? n->n : 1) * sizeof *params);
    for (uint32_t i = 0; i < n->n; i++)
        params[i] = i < a->n ? a->v[i] : jv_undef(JUNDEF_MISSING, "", 0, 0);
    jinja_val kwargs = {0}, caller = m->caller;
    macro_keywords(c, n, a, params, &kwargs, &caller);
    jframe *saved = c->frame;
    jbuf *saved_out = c->out;
    c->frame = jx_frame(c, m->closure);
    for (uint32_t i = 0; i < n->n; i++) { /* defaults see the parameters before them */
        jinja_val v = params[i];
        if (!jx_given(v)) {
            jinja_val name = c->tpl->syms[n->kids[i]->sym];
            v = n->kids[i]->a ? jx_eval(c, n->kids[i]->a)
                              : jv_undef(JUNDEF_NAME, name.u.s, name.n, 0);
        }
        jx_bind(c, n->kids[i]->sym, v);
    }
    if (n->flags & MACRO_VARARGS) {
        jinja_val rest = jv_list(c, 4, JLIST_TUPLE);
        for (uint32_t i = n->n; i < a->n; i++)
            jv_push(c, rest, a->v[i]);
        jx_bind(c, c->tpl->sym_varargs, rest);
    }
    if (n->flags & MACRO_KWARGS)
        jx_bind(c, c->tpl->sym_kwargs, kwargs.type == JINJA_MAP ? kwargs : jv_map(c, 0, JMAP_DICT));
    if ((n->flags & MACRO_CALLER) && caller.type == JINJA_FUNC)
        jx_bind(c, c->tpl->sym_caller, caller);
    jx_deeper(c, "macros call each other");
    c->out = jb_new(c, 256);
    jx_exec(c, n->d);
    jinja_val s = jb_val(c->out);
    c->depth--;
    c->out = saved_out;
    c->frame = saved;
    return s;
}

/* {% call(params) m(args) %}body{% endcall %}: m called with caller=body */
static void exec_call_block(jctx *c, const jnode *n) {
    const jnode *call = n->a;
    jinja_val fn = jx_eval(c, call->a);
    uint32_t np = call->n - call->nkw;
    jinja_val *v = jx_alloc(c, (call->n + 1) * sizeof *v),
              *names = jx_alloc(c, (call->nkw + 1) * sizeof *names);
    for (uint32_t i = 0; i < call->n; i++)
        v[i] = jx_eval(c, call->kids[i]);
    for (uint32_t i = 0; i < call->nkw; i++)
        names[i] = call->kw[i];
    names[call->nkw] = jv_lit("caller");
    v[call->n] = macro_value(c, n);
    jargs a = {.n = np, .nkw = call->nkw + 1, .v = v, .kwn = names, .kwv = v + np};
    jv_write(c, c->out, jx_call(c, fn, &a));
}

/* ---------------------------------------------------------------------------
 * Statements
 * ------------------------------------------------------------------------- */

static void exec_set_ns(jctx *c, const jnode *n) {
    jinja_val ns = jx_lookup(c, n->sym);
    if (ns.type != JINJA_MAP || ns.sub != JMAP_NAMESPACE)
        jx_fail(c, JINJA_ERROR, "cannot assign attribute on non-namespace object");
    jv_map_put(c, ns, n->v, jx_eval(c, n->b));
}

static void exec_with(jctx *c, const jnode *n) {
    jframe *saved = c->frame, *f = jx_frame(c, c->frame);
    jinja_val *vals = jx_alloc(c, (n->n ? n->n : 1) * sizeof *vals);
    for (uint32_t i = 0; i < n->n; i++)
        vals[i] = jx_eval(c, n->kids[i]->b);
    c->frame = f;
    for (uint32_t i = 0; i < n->n; i++)
        bind_target(c, n->kids[i]->a, vals[i]);
    jx_exec(c, n->d);
    c->frame = saved;
}

static void exec_node(jctx *c, const jnode *n) {
    switch (n->kind) {
    case N_BODY:
        for (uint32_t i = 0; i < n->n && !c->ctl; i++)
            jx_exec(c, n->kids[i]);
        break;
    case N_DATA:
        jb_add(c, c->out, n->v.u.s, n->v.n);
        break;
    case N_OUTPUT:
        jv_write(c, c->out, jx_eval(c, n->a));
        break;
    case N_IF: /* the elif chain in a loop, not a recursion */
        while (n && n->kind == N_IF && !jv_truthy(jx_eval(c, n->a)))
            n = n->c;
        if (n) jx_exec(c, n->kind == N_IF ? n->b : n);
        break;
    case N_FOR:
        exec_for(c, n);
        break;
    case N_SET:
        bind_target(c, n->a, jx_eval(c, n->b));
        break;
    case N_SET_NS:
        exec_set_ns(c, n);
        break;
    case N_SET_BLOCK: {
        jinja_val s = capture(c, n->d);
        bind_target(c, n->a, n->c ? jx_filter_chain(c, n->c, s) : s);
        break;
    }
    case N_MACRO:
        jx_bind(c, n->sym, macro_value(c, n));
        break;
    case N_CALL_BLOCK:
        exec_call_block(c, n);
        break;
    case N_FILTER_BLOCK:
        jv_write(c, c->out, jx_filter_chain(c, n->c, capture(c, n->d)));
        break;
    case N_WITH:
        exec_with(c, n);
        break;
    case N_BREAK:
        c->ctl = CTL_BREAK;
        break;
    case N_CONTINUE:
        c->ctl = CTL_CONTINUE;
        break;
    default:
        jx_fail(c, JINJA_ERROR, "internal error: node %d is not a statement", n->kind);
    }
}

void jx_exec(jctx *c, const jnode *n) {
    jx_enter(c, n);
    exec_node(c, n);
    c->depth--;
}

/* ---------------------------------------------------------------------------
 * Rendering
 * ------------------------------------------------------------------------- */

static int32_t find_sym(const jinja_tpl *t, const char *name, size_t n) {
    for (uint32_t i = 0; i < t->n_syms; i++)
        if (t->syms[i].n == n && !memcmp(t->syms[i].u.s, name, n)) return (int32_t)i;
    return -1;
}

bool jinja_tpl_reads(const jinja_tpl *t, const char *name) {
    int32_t s = find_sym(t, name, strlen(name));
    return s >= 0 && t->sym_read[s];
}

/* The variables and output buffer of a render (may fail: after setjmp). */
static void start(jctx *c) {
    const jinja_tpl *t = c->tpl;
    jinja_run *r = c->run;
    uint32_t ns = t->n_syms ? t->n_syms : 1;
    c->root = jx_alloc(c, ns * sizeof *c->root);
    c->root_set = jx_alloc(c, ns);
    memset(c->root, 0, ns * sizeof *c->root);
    memset(c->root_set, 0, ns);
    for (uint32_t s = 0; s < t->n_syms; s++) /* by name: linear in the template, not the vars */
        c->root_set[s] = jinja_run_var(r, t->syms[s].u.s, t->syms[s].n, &c->root[s]);
    c->top = c->out = jb_new(c, 4096);
    c->out_top_max = r->lim.max_output;
}

int jinja_render(jinja_run *r, const jinja_tpl *t, sbuf *out, jinja_error *e) {
    memset(e, 0, sizeof *e);
    if (r->used || r->nomem) {
        e->kind = r->used ? JINJA_ERROR : JINJA_NOMEM;
        snprintf(e->msg, sizeof e->msg, "%s",
                 r->used ? "a jinja_run renders once" : "out of memory building the variables");
        return r->used ? TPS_EINVAL : TPS_ENOMEM;
    }
    r->used = true;
    jctx *c = calloc(1, sizeof *c);
    if (!c) {
        e->kind = JINJA_NOMEM;
        snprintf(e->msg, sizeof e->msg, "out of memory");
        return TPS_ENOMEM;
    }
    c->run = r;
    c->tpl = t;
    c->err = e;
    c->call_macro = call_macro;
    c->max_work = r->lim.max_work;
    if (setjmp(c->jb)) {
        free(c);
        return e->kind == JINJA_NOMEM ? TPS_ENOMEM : TPS_EINVAL;
    }
    start(c);
    jx_exec(c, t->root);
    sbuf_add(out, c->top->p, c->top->n);
    free(c);
    if (sbuf_failed(out)) {
        e->kind = JINJA_NOMEM;
        snprintf(e->msg, sizeof e->msg, "out of memory");
        return TPS_ENOMEM;
    }
    return 0;
}
