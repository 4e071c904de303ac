/* Expressions: the tree's expression nodes evaluated to values, with
 * Python's operators (int and float arithmetic, floor division and modulo
 * by the divisor's sign, str/list concatenation and repetition, "%"
 * formatting, chained comparisons, `in`), jinja2's sandboxed attribute and
 * item lookup (getattr falls back to the item and getitem to the
 * attribute; lists and dicts only expose the methods that read them), and
 * slicing by code point. Not here: statements (jinja_exec.c), the filters,
 * tests and methods themselves. */
#include "jinja/jinja_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------------------
 * Arithmetic
 * ------------------------------------------------------------------------- */

static const char *op_text(int op) {
    switch (op) {
    case OP_ADD:
        return "+";
    case OP_SUB:
        return "-";
    case OP_MUL:
        return "*";
    case OP_DIV:
        return "/";
    case OP_FLOORDIV:
        return "//";
    case OP_MOD:
        return "%";
    default:
        return "**";
    }
}

_Noreturn static void bad_operands(jctx *c, int op, jinja_val a, jinja_val b) {
    jx_fail(c, JINJA_ERROR, "unsupported operand type(s) for %s: '%s' and '%s'", op_text(op),
            jv_type_name(a), jv_type_name(b));
}

static int64_t ival(jinja_val v) {
    return v.type == JINJA_INT ? v.u.i : (int64_t)v.u.b;
}

static jinja_val int_arith(jctx *c, int op, int64_t x, int64_t y) {
    int64_t r = 0;
    bool ovf = false;
    switch (op) {
    case OP_ADD:
        ovf = __builtin_add_overflow(x, y, &r);
        break;
    case OP_SUB:
        ovf = __builtin_sub_overflow(x, y, &r);
        break;
    case OP_MUL:
        ovf = __builtin_mul_overflow(x, y, &r);
        break;
    case OP_FLOORDIV:
    case OP_MOD:
        if (!y) jx_fail(c, JINJA_ERROR, "integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) {
            ovf = op == OP_FLOORDIV;
            break;
        }
        r = op == OP_FLOORDIV ? x / y : x % y;
        if ((x % y) && ((x % y < 0) != (y < 0))) r += op == OP_FLOORDIV ? -1 : y;
        break;
    case OP_DIV:
        if (!y) jx_fail(c, JINJA_ERROR, "division by zero");
        return jinja_float((double)x / (double)y);
    default: /* OP_POW */
        if (y < 0 && x == 0) jx_fail(c, JINJA_ERROR, "0.0 cannot be raised to a negative power");
        if (y < 0) return jinja_float(pow((double)x, (double)y));
        if (x == 0 || x == 1) return jinja_int(y ? x : 1);
        if (x == -1) return jinja_int(y % 2 ? -1 : 1);
        r = 1;
        for (int64_t k = 0; k < y && !ovf; k++) /* overflows within 64 rounds */
            ovf = __builtin_mul_overflow(r, x, &r);
        break;
    }
    if (ovf) jx_fail(c, JINJA_ERROR, "integer overflow (beyond 64 bits) in %s", op_text(op));
    return jinja_int(r);
}

static jinja_val float_arith(jctx *c, int op, double x, double y) {
    switch (op) {
    case OP_ADD:
        return jinja_float(x + y);
    case OP_SUB:
        return jinja_float(x - y);
    case OP_MUL:
        return jinja_float(x * y);
    case OP_DIV:
        if (y == 0) jx_fail(c, JINJA_ERROR, "float division by zero");
        return jinja_float(x / y);
    case OP_FLOORDIV:
    case OP_MOD: {
        if (y == 0)
            jx_fail(c, JINJA_ERROR, "float %s", op == OP_MOD ? "modulo" : "floor division by zero");
        double mod = fmod(x, y);
        double div = (x - mod) / y;
        if (mod && ((y < 0) != (mod < 0))) {
            mod += y;
            div -= 1.0;
        }
        if (op == OP_MOD) return jinja_float(mod ? mod : copysign(0.0, y));
        double fl = floor(div);
        if (div - fl > 0.5) fl += 1.0;
        return jinja_float(div ? fl : copysign(0.0, x / y));
    }
    default:
        if (x == 0 && y < 0) jx_fail(c, JINJA_ERROR, "0.0 cannot be raised to a negative power");
        return jinja_float(pow(x, y));
    }
}

/* s * k or list * k */
static jinja_val repeat(jctx *c, jinja_val s, int64_t k) {
    if (k > 0 && (uint64_t)k > c->run->lim.max_memory)
        jx_fail(c, JINJA_LIMIT, "a sequence repeated %lld times is over the memory limit",
                (long long)k);
    if (k <= 0)
        return s.type == JINJA_STR ? (jinja_val){.type = JINJA_STR, .sub = s.sub, .u.s = ""}
                                   : jv_list(c, 0, s.sub);
    if (s.type == JINJA_STR) {
        if ((uint64_t)s.n * (uint64_t)k > c->run->lim.max_memory)
            jx_fail(c, JINJA_LIMIT, "a string repeated %lld times is over the memory limit",
                    (long long)k);
        jbuf *b = jb_new(c, (size_t)s.n * (size_t)k + 1);
        for (int64_t i = 0; i < k; i++)
            jb_add(c, b, s.u.s, s.n);
        jinja_val r = jb_val(b);
        r.sub = s.sub;
        return r;
    }
    uint64_t n = (uint64_t)s.u.l->n * (uint64_t)k;
    if (n * sizeof(jinja_val) > c->run->lim.max_memory)
        jx_fail(c, JINJA_LIMIT, "a list repeated %lld times is over the memory limit",
                (long long)k);
    jinja_val out = jv_list(c, (uint32_t)n, s.sub);
    for (int64_t i = 0; i < k; i++) {
        if (s.u.l->n) memcpy(out.u.l->v + out.u.l->n, s.u.l->v, s.u.l->n * sizeof *s.u.l->v);
        out.u.l->n += s.u.l->n;
    }
    return out;
}

static jinja_val join2(jctx *c, jinja_val a, jinja_val b) {
    if (a.type == JINJA_STR && (jv_is_markup(a) || jv_is_markup(b))) { /* Markup.__add__ */
        jinja_val x = jv_escape(c, a), y = jv_escape(c, b);
        x.sub = y.sub = JSTR_PLAIN;
        return jv_markup(join2(c, x, y));
    }
    if (a.type == JINJA_STR) {
        jbuf *o = jb_new(c, (size_t)a.n + b.n + 1);
        jb_add(c, o, a.u.s, a.n);
        jb_add(c, o, b.u.s, b.n);
        return jb_val(o);
    }
    jinja_val out = jv_list(c, a.u.l->n + b.u.l->n, a.sub);
    if (a.u.l->n) memcpy(out.u.l->v, a.u.l->v, a.u.l->n * sizeof *a.u.l->v);
    if (b.u.l->n) memcpy(out.u.l->v + a.u.l->n, b.u.l->v, b.u.l->n * sizeof *b.u.l->v);
    out.u.l->n = a.u.l->n + b.u.l->n;
    return out;
}

static jinja_val arith(jctx *c, int op, jinja_val a, jinja_val b) {
    if (op == OP_MOD && a.type == JINJA_STR) return jx_percent(c, a, b); /* str(undefined): "" */
    if (a.type == JINJA_UNDEFINED) jv_undef_fail(c, a);
    if (b.type == JINJA_UNDEFINED) jv_undef_fail(c, b);
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a.type == JINJA_FLOAT || b.type == JINJA_FLOAT)
            return float_arith(c, op, jv_num(a), jv_num(b));
        return int_arith(c, op, ival(a), ival(b));
    }
    if (op == OP_ADD && a.type == b.type &&
        (a.type == JINJA_STR ||
         (a.type == JINJA_LIST && (a.sub == JLIST_TUPLE) == (b.sub == JLIST_TUPLE) &&
          a.sub != JLIST_GEN && b.sub != JLIST_GEN)))
        return join2(c, a, b);
    if (op == OP_MUL && (a.type == JINJA_STR || (a.type == JINJA_LIST && a.sub != JLIST_GEN)) &&
        (b.type == JINJA_INT || b.type == JINJA_BOOL))
        return repeat(c, a, ival(b));
    if (op == OP_MUL && (b.type == JINJA_STR || (b.type == JINJA_LIST && b.sub != JLIST_GEN)) &&
        (a.type == JINJA_INT || a.type == JINJA_BOOL))
        return repeat(c, b, ival(a));
    if (op == OP_ADD && a.type == JINJA_STR)
        jx_fail(c, JINJA_ERROR, "can only concatenate str (not \"%s\") to str", jv_type_name(b));
    bad_operands(c, op, a, b);
}

/* ---------------------------------------------------------------------------
 * Comparisons
 * ------------------------------------------------------------------------- */

static jinja_val compare(jctx *c, const jnode *n) {
    jinja_val left = jx_eval(c, n->a);
    for (uint32_t i = 0; i < n->n; i++) {
        jinja_val right = jx_eval(c, n->kids[i]->a);
        if (!jv_compare(c, n->kids[i]->op, left, right)) return jinja_bool(false);
        left = right;
    }
    return jinja_bool(true);
}

/* ---------------------------------------------------------------------------
 * Indexing, slicing, attributes
 * ------------------------------------------------------------------------- */

/* Python's slice index normalisation for a sequence of len items. */
static int64_t slice_index(int64_t i, int64_t len, int64_t step, bool stop) {
    if (i < 0) {
        i += len;
        if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= len) {
        i = step < 0 ? len - 1 : len;
    }
    (void)stop;
    return i;
}

static int64_t slice_arg(jctx *c, jinja_val v, int64_t dflt) {
    if (v.type == JINJA_NONE || v.type == JINJA_UNDEFINED) return dflt;
    if (v.type != JINJA_INT && v.type != JINJA_BOOL)
        jx_fail(c, JINJA_ERROR, "slice indices must be integers or None");
    return ival(v);
}

static jinja_val slice(jctx *c, jinja_val obj, const jnode *s) {
    jinja_val a = s->a ? jx_eval(c, s->a) : jinja_none(),
              b = s->b ? jx_eval(c, s->b) : jinja_none(),
              st = s->c ? jx_eval(c, s->c) : jinja_none();
    if (obj.type == JINJA_UNDEFINED) jv_undef_fail(c, obj);
    if ((obj.type != JINJA_STR && obj.type != JINJA_LIST) || obj.sub == JLIST_GEN)
        return jv_undef(JUNDEF_PLAIN, "", 0, 0);
    int64_t step = slice_arg(c, st, 1);
    if (!step) jx_fail(c, JINJA_ERROR, "slice step cannot be zero");
    if (obj.type == JINJA_STR) jx_work(c, obj.n); /* scanned for its code points */
    bool ascii = obj.type == JINJA_STR && utf8_ascii(obj.u.s, obj.n);
    int64_t len = obj.type == JINJA_LIST ? obj.u.l->n : ascii ? obj.n : jv_len(c, obj);
    int64_t lo = slice_index(slice_arg(c, a, step < 0 ? len - 1 : 0), len, step, false);
    int64_t hi = s->b && b.type != JINJA_NONE ? slice_index(slice_arg(c, b, 0), len, step, true)
                                              : (step < 0 ? -1 : len);
    if (obj.type == JINJA_LIST) {
        jinja_val out = jv_list(c, 0, obj.sub == JLIST_TUPLE ? JLIST_TUPLE : JLIST_LIST);
        for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step)
            jv_push(c, out, obj.u.l->v[i]);
        return out;
    }
    if (step == 1) {
        if (hi <= lo) return jv_lit("");
        size_t x = ascii ? (size_t)lo : jv_cp_offset(obj, lo),
               y = ascii ? (size_t)hi : jv_cp_offset(obj, hi);
        return (jinja_val){.type = JINJA_STR, .n = (uint32_t)(y - x), .u.s = obj.u.s + x};
    }
    jinja_val chars = jv_iter(c, obj);
    jbuf *o = jb_new(c, obj.n + 1);
    for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step)
        jb_add(c, o, chars.u.l->v[i].u.s, chars.u.l->v[i].n);
    return jb_val(o);
}

static jinja_val eval_getitem(jctx *c, const jnode *n) {
    jinja_val obj = jx_eval(c, n->a);
    if (n->b->kind == N_SLICE) return slice(c, obj, n->b);
    return jx_getitem(c, obj, jx_eval(c, n->b));
}

/* ---------------------------------------------------------------------------
 * Collections, calls, filters
 * ------------------------------------------------------------------------- */

static jinja_val eval_seq(jctx *c, const jnode *n, int sub) {
    jinja_val l = jv_list(c, n->n, sub);
    for (uint32_t i = 0; i < n->n; i++)
        l.u.l->v[l.u.l->n++] = jx_eval(c, n->kids[i]);
    return l;
}

static jinja_val eval_dict(jctx *c, const jnode *n) {
    jinja_val m = jv_map(c, n->n / 2, JMAP_DICT);
    for (uint32_t i = 0; i + 1 < n->n; i += 2) {
        jinja_val k = jx_eval(c, n->kids[i]);
        if (k.type == JINJA_LIST && k.sub != JLIST_TUPLE)
            jx_fail(c, JINJA_ERROR, "unhashable type: 'list'");
        if (k.type == JINJA_MAP) jx_fail(c, JINJA_ERROR, "unhashable type: 'dict'");
        jv_map_put(c, m, k, jx_eval(c, n->kids[i + 1]));
    }
    return m;
}

/* The arguments of a call, filter or test node (input excluded). */
static jargs eval_args(jctx *c, const jnode *n) {
    uint32_t np = n->n - n->nkw;
    jinja_val *v = n->n ? jx_alloc(c, n->n * sizeof *v) : NULL;
    for (uint32_t i = 0; i < n->n; i++)
        v[i] = jx_eval(c, n->kids[i]);
    return (jargs){.n = np, .nkw = n->nkw, .v = v, .kwn = n->kw, .kwv = v ? v + np : NULL};
}

static jinja_val eval_filter(jctx *c, const jnode *n, jinja_val in) {
    jargs a = eval_args(c, n);
    c->line = n->line;
    if (n->op == 255)
        jx_fail(c, JINJA_ERROR, "No filter named '%.*s'%s.", (int)n->v.n, n->v.u.s,
                n->flags ? " in this engine" : "");
    return jx_filter(c, n->op, in, &a);
}

/* A filter chain over a value (filter blocks, {% set x | f %}): the
 * innermost filter of the chain has no input node. */
jinja_val jx_filter_chain(jctx *c, const jnode *n, jinja_val in) {
    if (n->a) in = jx_filter_chain(c, n->a, in);
    return eval_filter(c, n, in);
}

static jinja_val eval_test(jctx *c, const jnode *n) {
    jinja_val v = jx_eval(c, n->a);
    jargs a = eval_args(c, n);
    c->line = n->line;
    if (n->op == 255)
        jx_fail(c, JINJA_ERROR, "No test named '%.*s'%s.", (int)n->v.n, n->v.u.s,
                n->flags ? " in this engine" : "");
    return jinja_bool(jx_test(c, n->op, v, &a));
}

static jinja_val eval_call(jctx *c, const jnode *n) {
    jinja_val fn = jx_eval(c, n->a);
    jargs a = eval_args(c, n);
    c->line = n->line;
    return jx_call(c, fn, &a);
}

static jinja_val eval_concat(jctx *c, const jnode *n) {
    jbuf *b = jb_new(c, 64);
    for (uint32_t i = 0; i < n->n; i++)
        jv_write(c, b, jx_eval(c, n->kids[i]));
    return jb_val(b);
}

static jinja_val eval_unary(jctx *c, const jnode *n) {
    jinja_val v = jx_eval(c, n->a);
    if (n->op == OP_NOT) return jinja_bool(!jv_truthy(v));
    if (v.type == JINJA_UNDEFINED) jv_undef_fail(c, v);
    if (!jv_is_num(v))
        jx_fail(c, JINJA_ERROR, "bad operand type for unary %s: '%s'", n->op == OP_NEG ? "-" : "+",
                jv_type_name(v));
    if (n->op == OP_POS) return v.type == JINJA_BOOL ? jinja_int(v.u.b) : v;
    if (v.type == JINJA_FLOAT) return jinja_float(-v.u.f);
    if (ival(v) == INT64_MIN) jx_fail(c, JINJA_ERROR, "integer overflow in unary -");
    return jinja_int(-ival(v));
}

static jinja_val eval_node(jctx *c, const jnode *n) {
    switch (n->kind) {
    case N_CONST:
        return n->v;
    case N_NAME:
        return jx_lookup(c, n->sym);
    case N_LIST:
        return eval_seq(c, n, JLIST_LIST);
    case N_TUPLE:
        return eval_seq(c, n, JLIST_TUPLE);
    case N_DICT:
        return eval_dict(c, n);
    case N_GETATTR:
        return jx_getattr(c, jx_eval(c, n->a), n->v);
    case N_GETITEM:
        return eval_getitem(c, n);
    case N_CALL:
        return eval_call(c, n);
    case N_FILTER:
        return eval_filter(c, n, jx_eval(c, n->a));
    case N_TEST:
        return eval_test(c, n);
    case N_UNARY:
        return eval_unary(c, n);
    case N_BINARY: {
        jinja_val a = jx_eval(c, n->a);
        return arith(c, n->op, a, jx_eval(c, n->b));
    }
    case N_AND: {
        jinja_val a = jx_eval(c, n->a);
        return jv_truthy(a) ? jx_eval(c, n->b) : a;
    }
    case N_OR: {
        jinja_val a = jx_eval(c, n->a);
        return jv_truthy(a) ? a : jx_eval(c, n->b);
    }
    case N_COMPARE:
        return compare(c, n);
    case N_COND:
        if (jv_truthy(jx_eval(c, n->a))) return jx_eval(c, n->b);
        return n->c ? jx_eval(c, n->c) : jv_undef(JUNDEF_PLAIN, "", 0, 0);
    case N_CONCAT:
        return eval_concat(c, n);
    default:
        jx_fail(c, JINJA_ERROR, "internal error: node %d is not an expression", n->kind);
    }
}

jinja_val jx_eval(jctx *c, const jnode *n) {
    jx_enter(c, n);
    jinja_val v = eval_node(c, n);
    c->depth--;
    return v;
}

jinja_val jx_call(jctx *c, jinja_val fn, const jargs *a) {
    if (fn.type == JINJA_FUNC) {
        if (fn.sub == JFN_MACRO) return c->call_macro(c, fn, a);
        return jx_call_builtin(c, fn, a);
    }
    if (fn.type == JINJA_UNDEFINED) jv_undef_fail(c, fn);
    jx_fail(c, JINJA_ERROR, "'%s' object is not callable", jv_type_name(fn));
}
