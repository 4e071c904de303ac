/* What the files of the Jinja engine share (jinja.h is the public face).
 * The files call one way, top down:
 *   compiling: jinja_parse_stmt.c -> jinja_parse.c -> jinja_lex.c, jinja_names.c
 *   rendering: jinja_exec.c -> jinja_eval.c -> jinja_filters_seq.c ->
 *     jinja_filters.c, jinja_tests.c -> jinja_methods.c -> jinja_format.c ->
 *     jinja_access.c -> jinja_print.c -> jinja_scope.c, jinja_value.c ->
 *     jinja_dict.c -> jinja_utf8.c, jinja_mem.c
 * (a macro call from an expression goes back to jinja_exec.c through
 * jctx.call_macro, a pointer, not a call the linker sees).
 *
 * Errors during a render unwind with longjmp to jinja_render (jx_fail):
 * every value lives in the run's arena, so nothing leaks and no caller
 * checks a return code. Compile errors return normally (tps_err). */
#ifndef TPS_JINJA_INTERNAL_H
#define TPS_JINJA_INTERNAL_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jinja/jinja.h"

/* ---------------------------------------------------------------------------
 * Memory: bump arenas, freed whole (jinja_mem.c)
 * ------------------------------------------------------------------------- */

typedef struct jarena_chunk jarena_chunk;
typedef struct jarena {
    jarena_chunk *head;
    size_t used;  /* bytes handed out, all chunks */
    size_t limit; /* 0: none */
} jarena;

/* n bytes, 16-aligned, not zeroed; NULL over the limit or out of memory. */
void *jarena_alloc(jarena *a, size_t n);
void jarena_free(jarena *a);
/* n bytes of r's arena; NULL (and r->nomem set) when there is no room. */
void *jrun_alloc(jinja_run *r, size_t n);

/* ---------------------------------------------------------------------------
 * Values (jinja_value.c)
 * ------------------------------------------------------------------------- */

/* list sub; JLIST_GEN: what jinja2's map/select/... return, a generator:
 * iterable once, true, with no len(), no index, no JSON */
enum { JLIST_LIST = 0, JLIST_TUPLE, JLIST_ITEMS, JLIST_KEYS, JLIST_VALUES, JLIST_GEN };
enum { JMAP_DICT = 0, JMAP_NAMESPACE }; /* map sub */
/* string sub: JSTR_MARKUP is markupsafe's Markup (from |safe, |escape):
 * a plain string added to it, or formatted into it, is HTML-escaped */
enum { JSTR_PLAIN = 0, JSTR_MARKUP };
/* undefined sub: why it is undefined (the message of the error it raises
 * when used); u.s/n name the variable or attribute, aux the object type */
enum { JUNDEF_PLAIN = 0, JUNDEF_NAME, JUNDEF_ATTR, JUNDEF_ITEM, JUNDEF_UNSAFE, JUNDEF_MISSING };
enum { JFN_BUILTIN = 0, JFN_METHOD, JFN_MACRO, JFN_LOOP_CYCLE, JFN_LOOP_CHANGED }; /* func sub */

struct jinja_list {
    uint32_t n, cap;
    jinja_val *v;
    bool consumed; /* a generator iterated once */
};
/* A dict: keys and values in insertion order (as Python's), and once it
 * holds more than JMAP_LINEAR keys a hash index over them (jinja_dict.c):
 * open addressing, at most half full, each slot the key's hash and its
 * position + 1 (0: empty). Lookups and inserts are O(1), so a request's
 * 200k-key object becomes a dict in linear time. */
#define JMAP_LINEAR 8
typedef struct jslot {
    uint32_t hash, at;
} jslot;
struct jinja_map {
    uint32_t n, cap;
    jinja_val *k, *v;
    jslot *slots;  /* NULL while n <= JMAP_LINEAR */
    uint32_t mask; /* slots - 1 */
};

struct jinja_run {
    jarena arena; /* every value of the render */
    jinja_limits lim;
    bool nomem, used;
    time_t now;
    bool have_now;
    const atomic_bool *cancel; /* jinja_set_cancel's; NULL: none */
    uint64_t seed[2];          /* the hash key of this run's dicts (random: no chosen collisions) */
    /* the caller's variables (malloc'ed, not the arena's: the memory limit is
     * the template's), with a hash index as a dict's (vslots, vmask) */
    uint32_t n_vars, cap_vars, vmask;
    struct jvar {
        const char *name;
        uint32_t n;
        uint32_t hash;
        jinja_val v;
    } * vars;
    jslot *vslots;
};

/* ---------------------------------------------------------------------------
 * Tokens (jinja_lex.c)
 * ------------------------------------------------------------------------- */

enum jtok_type {
    TK_EOF = 0,
    TK_DATA,
    TK_VAR_BEGIN,
    TK_VAR_END,
    TK_BLOCK_BEGIN,
    TK_BLOCK_END,
    TK_NAME,
    TK_STRING,
    TK_INT,
    TK_FLOAT,
    TK_OP,
};

enum jop {
    OP_ADD = 1,
    OP_SUB,
    OP_DIV,
    OP_FLOORDIV,
    OP_MUL,
    OP_MOD,
    OP_POW,
    OP_TILDE,
    OP_LBRACKET,
    OP_RBRACKET,
    OP_LPAREN,
    OP_RPAREN,
    OP_LBRACE,
    OP_RBRACE,
    OP_EQ,
    OP_NE,
    OP_GT,
    OP_GTEQ,
    OP_LT,
    OP_LTEQ,
    OP_ASSIGN,
    OP_DOT,
    OP_COLON,
    OP_PIPE,
    OP_COMMA,
    OP_SEMICOLON,
    /* the parser's own */
    OP_IN,
    OP_NOTIN,
    OP_NEG,
    OP_POS,
    OP_NOT,
};

typedef struct jtok {
    uint8_t type, op;
    uint32_t line;
    uint32_t n;    /* DATA, NAME, STRING: bytes */
    const char *s; /* DATA, NAME, STRING (decoded) */
    int64_t i;
    double f;
} jtok;

/* src -> tokens (allocated in a), ending with TK_EOF. TPS_EINVAL with
 * "line N: ..." in err. */
int jinja_lex(jarena *a, const char *src, size_t len, jtok **toks, size_t *n, tps_err *err);

/* ---------------------------------------------------------------------------
 * The tree (jinja_parse.c, jinja_parse_stmt.c)
 * ------------------------------------------------------------------------- */

enum jnode_kind {
    /* expressions */
    N_CONST = 1, /* v */
    N_NAME,      /* sym */
    N_LIST,      /* kids */
    N_TUPLE,     /* kids */
    N_DICT,      /* kids: key, value, key, value ... */
    N_GETATTR,   /* a . v (a string) */
    N_GETITEM,   /* a [ b ] */
    N_SLICE,     /* a : b : c, each may be NULL */
    N_CALL,      /* a ( kids ); the last nkw kids are keyword arguments named kw[] */
    N_FILTER,    /* a | op ( kids ); a NULL in a filter block; v the name */
    N_TEST,      /* a is op ( kids ); v the name */
    N_UNARY,     /* op a: OP_NEG, OP_POS, OP_NOT */
    N_BINARY,    /* a op b: arithmetic */
    N_AND,       /* a and b */
    N_OR,        /* a or b */
    N_COMPARE,   /* a, then kids N_OPERAND (op, a) */
    N_OPERAND,
    N_COND,   /* b if a else c (c may be NULL) */
    N_CONCAT, /* kids joined with ~ */
    /* statements */
    N_BODY,         /* kids */
    N_DATA,         /* v */
    N_OUTPUT,       /* a */
    N_IF,           /* if a: b else c (c: N_BODY or N_IF for elif, or NULL) */
    N_FOR,          /* for a in b if c: d else e */
    N_SET,          /* a (N_NAME or N_TUPLE of names) = b */
    N_SET_NS,       /* sym . v = b */
    N_SET_BLOCK,    /* a = captured d, through filter chain c (may be NULL) */
    N_MACRO,        /* sym ( kids: N_NAME params, default in param->a ): d */
    N_CALL_BLOCK,   /* call(kids params) a: d */
    N_FILTER_BLOCK, /* filter chain c over captured d */
    N_WITH,         /* kids: N_SET assignments, then d */
    N_BREAK,
    N_CONTINUE,
};

/* N_MACRO flags: what its body reads (extra arguments are an error unless) */
enum { MACRO_VARARGS = 1, MACRO_KWARGS = 2, MACRO_CALLER = 4 };

typedef struct jnode jnode;
struct jnode {
    uint8_t kind, op;
    uint16_t flags;
    uint32_t line;
    int32_t sym; /* N_NAME, N_SET_NS, N_MACRO; -1 none */
    uint32_t n, nkw;
    jnode **kids;
    const jinja_val *kw; /* names of the keyword kids */
    jnode *a, *b, *c, *d, *e;
    jinja_val v;
};

/* The tests, by id (names: jinja_names.c). */
enum jtest_id {
    T_DEFINED,
    T_UNDEFINED,
    T_NONE,
    T_BOOLEAN,
    T_FALSE,
    T_TRUE,
    T_INTEGER,
    T_FLOAT,
    T_NUMBER,
    T_STRING,
    T_MAPPING,
    T_ITERABLE,
    T_SEQUENCE,
    T_CALLABLE,
    T_EQ,
    T_NE,
    T_LT,
    T_LE,
    T_GT,
    T_GE,
    T_IN,
    T_ODD,
    T_EVEN,
    T_DIVISIBLEBY,
    T_SAMEAS,
    T_LOWER,
    T_UPPER,
    T_ESCAPED,
    T_FILTER,
    T_TEST,
};

/* Builtin global functions (range, namespace, ...), by id. */
enum jglobal { G_NONE = -1, G_RANGE = 0, G_NAMESPACE, G_DICT, G_RAISE, G_STRFTIME, G_COUNT };

struct jinja_tpl {
    jarena arena; /* the tree, its strings, the symbol names */
    jnode *root;  /* N_BODY */
    uint32_t n_syms, cap_syms;
    jinja_val *syms; /* malloc'ed */ /* name of each symbol */
    int8_t *sym_global;              /* enum jglobal of each symbol */
    uint8_t *sym_read;               /* read as a variable somewhere */
    int32_t sym_loop, sym_varargs, sym_kwargs, sym_caller;
};

/* Nesting of expressions and blocks together the parser follows (its
 * recursion, so the stack, is bounded by it). */
#define JP_MAX_NESTING 200

/* The parser's state, shared by the two parser files. */
typedef struct jparser {
    jinja_tpl *t;
    const jtok *tk;
    size_t pos, n;
    uint32_t depth; /* nesting, bounded so hostile input cannot exhaust the stack */
    uint32_t soft;  /* inside if / conditional expressions: unknown filters fail at run time */
    uint16_t *macro_flags; /* the macro being parsed: what its body reads */
    tps_err *err;
    int rc;
} jparser;

jnode *jp_node(jparser *p, int kind, uint32_t line);
jnode *jp_expr(jparser *p); /* a full expression (with if-else) */
jnode *jp_or(jparser *p);   /* without the conditional */
jnode *jp_tuple(jparser *p, bool condexpr, bool simplified, const char *end_name);
jnode *jp_filter_chain(jparser *p, jnode *input, bool start_inline);
int32_t jp_sym(jparser *p, const char *s, size_t n);
bool jp_fail(jparser *p, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
const jtok *jp_peek(const jparser *p, size_t ahead);
bool jp_is_name(const jtok *t, const char *name);
bool jp_expect_op(jparser *p, int op);
int jp_args(jparser *p, jnode *call);
int jinja_parse(jinja_tpl *t, const jtok *toks, size_t n, tps_err *err);

/* ---------------------------------------------------------------------------
 * Rendering (jinja_exec.c, jinja_eval.c)
 * ------------------------------------------------------------------------- */

typedef struct jframe jframe;
struct jframe {
    jframe *parent; /* NULL: the root variables come next */
    uint32_t n, cap;
    int32_t *sym;
    jinja_val *val;
};

typedef struct jbuf {
    char *p;
    size_t n, cap;
} jbuf;

typedef struct jloop {
    const jinja_val *items;
    uint32_t n, i, depth0;
    jinja_val changed_last;
    bool changed_set;
} jloop;

typedef struct jmacro {
    const jnode *node; /* N_MACRO, or N_CALL_BLOCK for caller() */
    jframe *closure;
    jinja_val caller; /* undefined, or the caller() a call block passes */
} jmacro;

enum { CTL_NONE = 0, CTL_BREAK, CTL_CONTINUE };

struct jargs;
typedef struct jctx {
    jinja_run *run;
    const jinja_tpl *tpl;
    jinja_val *root; /* by symbol */
    jframe *frame;   /* innermost; NULL at the top level */
    jbuf *out;
    size_t out_top_max; /* the top-level buffer's limit */
    jbuf *top;
    uint64_t steps;
    uint64_t work, max_work; /* work units done (jx_work) and the run's budget */
    uint32_t depth, line;
    int ctl;
    uint8_t *root_set; /* by symbol: set by the caller or a top-level {% set %} */
    /* calls a macro (jinja_exec.c), reached through here so that the
     * expression evaluator needs no call back into the statement one */
    jinja_val (*call_macro)(struct jctx *c, jinja_val fn, const struct jargs *a);
    jmp_buf jb;
    jinja_error *err;
} jctx;

/* Arguments of a call: positional v[0..n), then keyword kwv[0..nkw) named
 * kwn[] (strings). */
typedef struct jargs {
    uint32_t n, nkw;
    const jinja_val *v;
    const jinja_val *kwn, *kwv;
} jargs;

_Noreturn void jx_fail(jctx *c, jinja_fail kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void *jx_alloc(jctx *c, size_t n);
/* A new arena block of cap elements of size bytes holding old's first n:
 * how the engine's arrays grow (the old block stays in the arena). */
void *jx_regrow(jctx *c, const void *old, size_t n, size_t cap, size_t size);
/* Room for one more pair in two parallel arrays (a frame's names and
 * values, a dict's keys and values) holding n of *cap: kp and vp are the
 * arrays' addresses (T ** passed as void *), ksize and vsize their element
 * sizes; both grow together, doubling from 4. */
void jx_pairs_room(jctx *c, void *kp, size_t ksize, void *vp, size_t vsize, uint32_t n,
                   uint32_t *cap);
#define JX_PAIRS_ROOM(c, k, v, n, cap)                                                             \
    jx_pairs_room((c), &(k), sizeof *(k), &(v), sizeof *(v), (n), &(cap))
void jx_step(jctx *c);
/* Work units, what bounds a render's time beside its steps: one per byte
 * an operation scans, compares, hashes or copies, JX_WORK_VALUE per value
 * it compares or hashes. A LIMIT error naming the budget past
 * jinja_limits.max_work. */
#define JX_WORK_VALUE 16
_Noreturn void jx_over_work(jctx *c);
static inline void jx_work(jctx *c, uint64_t units) {
    c->work += units;
    if (c->work > c->max_work) jx_over_work(c);
}
/* One level deeper (c->depth; the caller steps back): a LIMIT error
 * "<what> deeper than N" past jinja_limits.max_depth. */
void jx_deeper(jctx *c, const char *what);
/* Into node n (jx_eval, jx_exec): one step counted, one level deeper (the
 * caller steps back), n's line the one an error names. */
void jx_enter(jctx *c, const jnode *n);

/* values (jinja_value.c; jv_str, jv_lit, jv_type_name, jv_is_num and jv_num
 * are jinja_mem.c's: every file, jinja_dict.c too, asks them) */
jinja_val jv_str(jctx *c, const char *s, size_t n); /* copied */
jinja_val jv_lit(const char *s);                    /* a static string */
jinja_val jv_list(jctx *c, uint32_t cap, int sub);
void jv_push(jctx *c, jinja_val list, jinja_val v);
jinja_val jv_undef(int sub, const char *s, size_t n, int aux);
bool jv_truthy(jinja_val v);
int jv_cmp(jctx *c, jinja_val a, jinja_val b); /* <0, 0, >0; TypeError when unordered */
const char *jv_type_name(jinja_val v);         /* Python's: "str", "int", "NoneType" ... */
bool jv_is_num(jinja_val v);                   /* bool, int or float */
double jv_num(jinja_val v);
bool jv_str_eq(jinja_val v, const char *s);
/* a op b for a comparison operator (OP_EQ ... OP_LTEQ, OP_IN, OP_NOTIN): the
 * expressions' and the eq/lt/... tests' one rule. */
bool jv_compare(jctx *c, int op, jinja_val a, jinja_val b);
jinja_val jv_iter(jctx *c, jinja_val v); /* a list of what `for` visits (map: keys) */
int64_t jv_len(jctx *c, jinja_val v);
_Noreturn void jv_undef_fail(jctx *c, jinja_val u);

/* equality, hashing and dicts (jinja_dict.c). Every walk into nested
 * values is one level deeper per level (jx_deeper: "values nested deeper
 * than N") and charges its work (jx_work). */
bool jv_eq(jctx *c, jinja_val a, jinja_val b); /* Python's == */
/* Python's hash(), equal for values jv_eq finds equal (1, 1.0, True);
 * false when v is unhashable (a list, a dict, a tuple holding one) */
bool jv_hash(jctx *c, jinja_val v, uint32_t *h);
/* jv_hash, a TypeError "unhashable type: 'list'" when v is unhashable */
uint32_t jv_hash_or_fail(jctx *c, jinja_val v);
jinja_val jv_map(jctx *c, uint32_t cap, int sub);
/* key set to v (replaced in place when there); unhashable key: TypeError */
void jv_map_put(jctx *c, jinja_val map, jinja_val key, jinja_val v);
/* false when key is not there (or unhashable, so cannot be) */
bool jv_map_get(jctx *c, const struct jinja_map *m, jinja_val key, jinja_val *out);
/* the string-keyed lookup of the caller's variables (jinja_set's) */
bool jinja_run_var(const jinja_run *r, const char *name, size_t n, jinja_val *out);
/* SipHash-1-3 of s[0..n) under r's key */
uint32_t jv_hash_bytes(const jinja_run *r, const char *s, size_t n);

/* text buffers in the arena */
jbuf *jb_new(jctx *c, size_t cap);
void jb_add(jctx *c, jbuf *b, const char *s, size_t n);
static inline void jb_adds(jctx *c, jbuf *b, const char *s);
void jb_addc(jctx *c, jbuf *b, char ch);
jinja_val jb_val(const jbuf *b);

/* printing (jinja_print.c) */
void jv_write(jctx *c, jbuf *b, jinja_val v); /* str(v) */
void jv_write_repr(jctx *c, jbuf *b, jinja_val v);
jinja_val jv_to_str(jctx *c, jinja_val v); /* str(v) as a value (strings as they are) */
/* markupsafe.escape: & < > " ' as entities, as Markup; Markup unchanged */
jinja_val jv_escape(jctx *c, jinja_val v);
static inline jinja_val jv_markup(jinja_val s) {
    s.sub = JSTR_MARKUP;
    return s;
}
static inline bool jv_is_markup(jinja_val v) {
    return v.type == JINJA_STR && v.sub == JSTR_MARKUP;
}
int jv_float_repr(double f, char *buf, size_t cap);
typedef struct jjson_opts {
    const char *indent; /* NULL: none */
    size_t indent_len;
    const char *item_sep, *key_sep;
    bool sort_keys, ensure_ascii;
} jjson_opts;
void jv_write_json(jctx *c, jbuf *b, jinja_val v, const jjson_opts *o, uint32_t level);

/* formatting (jinja_format.c): "fmt" % args, "fmt".format(...) */
jinja_val jx_percent(jctx *c, jinja_val fmt, jinja_val args);
jinja_val jx_str_format(jctx *c, jinja_val fmt, const jargs *a);

/* filters, tests, methods, globals */
typedef jinja_val (*jfilter_fn)(jctx *c, jinja_val in, const jargs *a);
typedef bool (*jtest_fn)(jctx *c, jinja_val v, const jargs *a);
int jinja_filter_find(const char *name, size_t n); /* id, -1 unknown, -2 jinja2's but not here */
int jinja_test_find(const char *name, size_t n);
jinja_val jx_filter(jctx *c, int id, jinja_val in, const jargs *a);
bool jx_test(jctx *c, int id, jinja_val v, const jargs *a);
int jinja_global_find(const char *name, size_t n);
/* the methods of str, dict and list (jinja_access.c binds them,
 * jinja_methods.c runs them) */
enum jmethod {
    M_STARTSWITH = 1,
    M_ENDSWITH,
    M_STRIP,
    M_LSTRIP,
    M_RSTRIP,
    M_SPLIT,
    M_RSPLIT,
    M_LOWER,
    M_UPPER,
    M_TITLE,
    M_CAPITALIZE,
    M_SWAPCASE,
    M_REPLACE,
    M_FIND,
    M_RFIND,
    M_INDEX,
    M_RINDEX,
    M_COUNT,
    M_JOIN,
    M_FORMAT,
    M_ISALPHA,
    M_ISDIGIT,
    M_ISALNUM,
    M_ISSPACE,
    M_ISLOWER,
    M_ISUPPER,
    M_SPLITLINES,
    M_PARTITION,
    M_RPARTITION,
    M_CENTER,
    M_LJUST,
    M_RJUST,
    M_ZFILL,
    M_REMOVEPREFIX,
    M_REMOVESUFFIX,
    M_GET,
    M_ITEMS,
    M_KEYS,
    M_VALUES,
    M_COPY,
    M_LCOUNT,
    M_LINDEX,
};
jinja_val jx_getattr(jctx *c, jinja_val obj, jinja_val name);
size_t jv_cp_offset(jinja_val s, int64_t k); /* byte offset of code point k */
jinja_val jx_getitem(jctx *c, jinja_val obj, jinja_val key);
jinja_val jx_call_builtin(jctx *c, jinja_val fn, const jargs *a);
jinja_val jx_call(jctx *c, jinja_val fn, const jargs *a); /* macros through c->call_macro */
jinja_val jx_eval(jctx *c, const jnode *n);
jinja_val jx_filter_chain(jctx *c, const jnode *chain, jinja_val in);
void jx_exec(jctx *c, const jnode *n);
/* variables (jinja_scope.c): the innermost frame first, then the root
 * variables, then the global functions; a set binds in the innermost */
jinja_val jx_lookup(jctx *c, int32_t sym);
void jx_bind(jctx *c, int32_t sym, jinja_val v);
jframe *jx_frame(jctx *c, jframe *parent);
/* binds a call's arguments to the names a function takes: out[i] is the
 * i-th parameter (undefined when not given); TypeError naming fn on an
 * unknown keyword or too many positional arguments */
void jx_args(jctx *c, const jargs *a, const char *fn, const char *const *names, jinja_val *out);
/* jx_args for fn that takes no arguments: any given fails as jx_args says. */
void jx_no_args(jctx *c, const jargs *a, const char *fn);
bool jx_given(jinja_val v);
int64_t jx_int_arg(jctx *c, jinja_val v, int64_t dflt, const char *what);

/* string helpers (jinja_methods.c): which 1 left, 2 right, 3 both;
 * chars not a string: whitespace; mode 'l' 'u' 't' 'c' 's' */
jinja_val js_strip(jctx *c, jinja_val s, jinja_val chars, int which);
jinja_val js_case(jctx *c, jinja_val s, char mode);
jinja_val js_replace(jctx *c, jinja_val s, jinja_val old, jinja_val rep, int64_t count);
jinja_val js_split(jctx *c, jinja_val s, jinja_val sep, int64_t maxsplit, bool right);
jinja_val js_splitlines(jctx *c, jinja_val s);

/* UTF-8 (jinja_utf8.c) */
uint32_t utf8_next(const char *s, size_t n, size_t *i); /* U+FFFD for a bad byte */
size_t utf8_put(uint32_t cp, char *out);                /* 1..4 bytes */
size_t utf8_count(const char *s, size_t n);
bool utf8_ascii(const char *s, size_t n);
bool cp_space(uint32_t cp); /* Python's str.isspace */
bool cp_printable(uint32_t cp);
uint32_t cp_lower(uint32_t cp);
uint32_t cp_upper(uint32_t cp);
bool cp_alpha(uint32_t cp);
bool cp_digit(uint32_t cp);
bool cp_cased_lower(uint32_t cp);
bool cp_cased_upper(uint32_t cp);

static inline void jb_adds(jctx *c, jbuf *b, const char *s) {
    size_t n = 0;
    while (s[n])
        n++;
    jb_add(c, b, s, n);
}

#endif
