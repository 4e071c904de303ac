/* jinja2's tests (`x is defined`, `x is string`, `x is divisibleby 3`, ...)
 * with Python's type rules: bool is a number and an int only for `number`,
 * a dict is a sequence, an undefined value is iterable and a sequence.
 * Not here: the parser's handling of `is not` (a not around the test). */
#include "jinja/jinja_internal.h"

#include <math.h>
#include <string.h>

static jinja_val one_arg(jctx *c, const jargs *a, const char *test) {
    static const char *const n[] = {"other", NULL};
    jinja_val p[1];
    jx_args(c, a, test, n, p);
    if (!jx_given(p[0])) jx_fail(c, JINJA_ERROR, "the %s test needs an argument", test);
    return p[0];
}

static bool int_parity(jctx *c, jinja_val v, int64_t mod, int64_t *rem) {
    if (v.type == JINJA_FLOAT) {
        *rem = (int64_t)fmod(v.u.f, (double)mod);
        return true;
    }
    if (v.type != JINJA_INT && v.type != JINJA_BOOL)
        jx_fail(c, JINJA_ERROR, "unsupported operand type(s) for %%: '%s' and 'int'",
                jv_type_name(v));
    int64_t x = v.type == JINJA_INT ? v.u.i : v.u.b;
    *rem = ((x % mod) + mod) % mod;
    return true;
}

static bool same(jctx *c, jinja_val a, jinja_val b) {
    if (a.type != b.type) return false;
    if (a.type == JINJA_STR || a.type == JINJA_LIST || a.type == JINJA_MAP || a.type == JINJA_FUNC)
        return a.u.p == b.u.p && a.n == b.n;
    return jv_eq(c, a, b);
}

/* eq, ne, lt, le, gt, ge (T_EQ ... T_GE): the comparison operators. */
static bool compare_test(jctx *c, int id, jinja_val v, const jargs *a) {
    static const int OPS[] = {[T_EQ - T_EQ] = OP_EQ, [T_NE - T_EQ] = OP_NE,
                              [T_LT - T_EQ] = OP_LT, [T_LE - T_EQ] = OP_LTEQ,
                              [T_GT - T_EQ] = OP_GT, [T_GE - T_EQ] = OP_GTEQ};
    jinja_val o = one_arg(c, a, "compare");
    return jv_compare(c, OPS[id - T_EQ], v, o);
}

static bool case_test(jctx *c, jinja_val v, bool lower) {
    jinja_val s = jv_to_str(c, v);
    bool cased = false;
    for (size_t i = 0; i < s.n;) {
        uint32_t cp = utf8_next(s.u.s, s.n, &i);
        if (lower ? cp_cased_upper(cp) : cp_cased_lower(cp)) return false;
        cased |= lower ? cp_cased_lower(cp) : cp_cased_upper(cp);
    }
    return cased;
}

static bool type_test(int id, jinja_val v) {
    switch (id) {
    case T_DEFINED:
        return v.type != JINJA_UNDEFINED;
    case T_UNDEFINED:
        return v.type == JINJA_UNDEFINED;
    case T_NONE:
        return v.type == JINJA_NONE;
    case T_BOOLEAN:
        return v.type == JINJA_BOOL;
    case T_FALSE:
        return v.type == JINJA_BOOL && !v.u.b;
    case T_TRUE:
        return v.type == JINJA_BOOL && v.u.b;
    case T_INTEGER:
        return v.type == JINJA_INT;
    case T_FLOAT:
        return v.type == JINJA_FLOAT;
    case T_NUMBER:
        return jv_is_num(v);
    case T_STRING:
        return v.type == JINJA_STR;
    case T_MAPPING:
        return v.type == JINJA_MAP && v.sub == JMAP_DICT;
    case T_ITERABLE:
        return v.type == JINJA_UNDEFINED || v.type == JINJA_STR || v.type == JINJA_LIST ||
               (v.type == JINJA_MAP && v.sub == JMAP_DICT);
    case T_SEQUENCE:
        return v.type == JINJA_UNDEFINED || v.type == JINJA_STR ||
               (v.type == JINJA_LIST && v.sub != JLIST_GEN) ||
               (v.type == JINJA_MAP && v.sub == JMAP_DICT);
    case T_CALLABLE:
        return v.type == JINJA_FUNC;
    default: /* escaped: only markup strings, which this engine never makes */
        return false;
    }
}

bool jx_test(jctx *c, int id, jinja_val v, const jargs *a) {
    jx_step(c);
    int64_t rem;
    switch (id) {
    case T_EQ:
    case T_NE:
    case T_LT:
    case T_LE:
    case T_GT:
    case T_GE:
        return compare_test(c, id, v, a);
    case T_IN: {
        jinja_val seq = one_arg(c, a, "in");
        return jv_compare(c, OP_IN, v, seq);
    }
    case T_ODD:
    case T_EVEN:
        jx_no_args(c, a, id == T_ODD ? "odd" : "even");
        int_parity(c, v, 2, &rem);
        return id == T_ODD ? rem != 0 : rem == 0;
    case T_DIVISIBLEBY: {
        int64_t d = jx_int_arg(c, one_arg(c, a, "divisibleby"), 1, "divisibleby");
        if (!d) jx_fail(c, JINJA_ERROR, "integer division or modulo by zero");
        int_parity(c, v, d < 0 ? -d : d, &rem);
        return rem == 0;
    }
    case T_SAMEAS:
        return same(c, v, one_arg(c, a, "sameas"));
    case T_LOWER:
    case T_UPPER:
        jx_no_args(c, a, "lower");
        return case_test(c, v, id == T_LOWER);
    case T_FILTER:
    case T_TEST:
        jx_no_args(c, a, "filter");
        if (v.type != JINJA_STR) return false;
        return id == T_FILTER ? jinja_filter_find(v.u.s, v.n) >= 0
                              : jinja_test_find(v.u.s, v.n) >= 0;
    default:
        jx_no_args(c, a, "test");
        return type_test(id, v);
    }
}
