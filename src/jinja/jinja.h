/* A Jinja2 template engine for chat templates: source text -> a compiled
 * template (lexer -> parser -> tree), rendered by a tree-walking evaluator
 * over one value type. It renders as Hugging Face transformers'
 * apply_chat_template does: jinja2's ImmutableSandboxedEnvironment with
 * trim_blocks, lstrip_blocks and the loopcontrols extension, plus
 * transformers' tojson (ensure_ascii false; indent, separators, sort_keys),
 * raise_exception and strftime_now. Values print as Python's str() prints
 * them (None, True, 1.0, ['a', 1], {'k': 'v'}).
 *
 * Sandboxed for templates from untrusted files: no attribute outside the
 * documented methods, no mutation of lists or dicts (append, pop, update
 * raise as jinja2's immutable sandbox does; only namespace() objects
 * change), and every render is bounded (jinja_limits): evaluation steps
 * (loop iterations and expressions), work (bytes scanned, compared and
 * copied, values compared: what one step may do a lot of), nesting depth
 * (of evaluation, and of every walk into nested values: comparing,
 * hashing, printing), output bytes and memory. Exceeding one ends the
 * render with JINJA_LIMIT and a message naming the bound.
 *
 * Threads: a compiled template is immutable and may be rendered by any
 * number of threads at once, each with its own jinja_run.
 *
 *   jinja_tpl *t; jinja_compile(&t, src, len, &err);      once
 *   jinja_run *r = jinja_run_new(&limits);                  per render
 *   jinja_set(r, "messages", list); ...                     the variables
 *   jinja_render(r, t, &out, &e);  jinja_run_free(r);
 *
 * Not here: JSON (the server turns requests into values), template files
 * or loaders ({% include %}, {% import %}, {% extends %} are refused at
 * compile time), autoescaping (chat templates render text), the filters
 * and tests chat templates never use (wordwrap, urlize, xmlattr, random,
 * filesizeformat, pprint, ...: a compile error naming the filter). */
#ifndef TPS_JINJA_JINJA_H
#define TPS_JINJA_JINJA_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "base/error.h"
#include "base/sbuf.h"

typedef struct jinja_tpl jinja_tpl; /* a compiled template */
typedef struct jinja_run jinja_run; /* one render: its values, limits and variables */

typedef enum jinja_type {
    JINJA_UNDEFINED = 0, /* jinja2's Undefined: prints "", false, iterates as empty */
    JINJA_NONE,
    JINJA_BOOL,
    JINJA_INT,
    JINJA_FLOAT,
    JINJA_STR,  /* UTF-8 bytes, not NUL-terminated */
    JINJA_LIST, /* also tuples and dict views (sub says which, for printing) */
    JINJA_MAP,  /* insertion-ordered, as Python's dict; also namespace() */
    JINJA_FUNC, /* macros, global functions, bound methods */
    JINJA_LOOP, /* the `loop` variable of a for loop */
} jinja_type;

struct jinja_list;
struct jinja_map;

/* A value: 16 bytes, passed by value. Strings, lists and maps point into
 * the run's memory (or, for strings, memory the caller keeps alive). */
typedef struct jinja_val {
    uint8_t type; /* jinja_type */
    uint8_t sub;  /* per type (jinja_internal.h) */
    uint16_t aux;
    uint32_t n; /* string length in bytes */
    union {
        bool b;
        int64_t i;
        double f;
        const char *s;
        struct jinja_list *l;
        struct jinja_map *m;
        const void *p;
    } u;
} jinja_val;

typedef struct jinja_limits {
    size_t max_output;  /* bytes of rendered text */
    size_t max_memory;  /* bytes the render may allocate (values, strings, captures) */
    uint64_t max_steps; /* expressions evaluated + loop iterations */
    /* work units: a byte scanned, compared, hashed or copied is one, a value
     * compared or hashed 16; 0: the default's */
    uint64_t max_work;
    uint32_t max_depth; /* nesting of evaluation (expressions, statements, macro
                           calls) and of values walked (==, sort, hash, print) */
} jinja_limits;

#define JINJA_DEFAULT_WORK (1ull << 28)

/* 4 MiB output, 64 MiB memory, 5 million steps, 2^28 work units (0.1 to
 * 0.5 s of scanning on a shared VM), depth 500: a real chat template
 * renders a long conversation in a few thousand steps and a few times its
 * text in work (the 56 templates of tests/data/templates: under 2^20). */
void jinja_limits_default(jinja_limits *l);

typedef enum jinja_fail {
    JINJA_OK = 0,
    JINJA_RAISED, /* the template called raise_exception(message) */
    JINJA_ERROR,  /* a runtime error jinja2 would raise (TypeError, UndefinedError, ...) */
    JINJA_LIMIT,  /* a limit of jinja_limits */
    JINJA_NOMEM,
} jinja_fail;

typedef struct jinja_error {
    jinja_fail kind;
    uint32_t line; /* the template line being evaluated; 0 when none */
    char msg[512]; /* RAISED: exactly the template's message */
} jinja_error;

/* Compiles src[0..len). TPS_EINVAL with "line N: ..." in err for a syntax
 * error (jinja2's would be a TemplateSyntaxError), TPS_EUNSUP naming the
 * construct and its line for valid Jinja this engine does not run
 * ({% include %}, a filter it lacks), TPS_ENOMEM. */
int jinja_compile(jinja_tpl **out, const char *src, size_t len, tps_err *err);
void jinja_tpl_free(jinja_tpl *t);
/* Whether the template reads the variable `name` anywhere (e.g. "tools"). */
bool jinja_tpl_reads(const jinja_tpl *t, const char *name);

/* NULL when out of memory. limits NULL: jinja_limits_default. */
jinja_run *jinja_run_new(const jinja_limits *limits);
void jinja_run_free(jinja_run *r);

/* Values for the variables. Strings are copied (jinja_str) or borrowed
 * (jinja_str_ref: the caller keeps them alive until jinja_run_free). Out
 * of memory is sticky: the builders return undefined and jinja_render
 * fails with JINJA_NOMEM. */
static inline jinja_val jinja_none(void) {
    return (jinja_val){.type = JINJA_NONE};
}
static inline jinja_val jinja_bool(bool b) {
    return (jinja_val){.type = JINJA_BOOL, .u.b = b};
}
static inline jinja_val jinja_int(int64_t i) {
    return (jinja_val){.type = JINJA_INT, .u.i = i};
}
static inline jinja_val jinja_float(double f) {
    return (jinja_val){.type = JINJA_FLOAT, .u.f = f};
}
jinja_val jinja_str(jinja_run *r, const char *s, size_t n);
jinja_val jinja_str_ref(const char *s, size_t n);
jinja_val jinja_list_new(jinja_run *r);
void jinja_list_push(jinja_run *r, jinja_val list, jinja_val v);
jinja_val jinja_map_new(jinja_run *r);
/* Sets key (copied) to v; a key already there is replaced in place. */
void jinja_map_set(jinja_run *r, jinja_val map, const char *key, size_t klen, jinja_val v);

/* A template variable (messages, tools, bos_token, ...); name is copied. */
void jinja_set(jinja_run *r, const char *name, jinja_val v);
/* The time strftime_now formats (local time); by default the time of the
 * render. */
void jinja_set_time(jinja_run *r, time_t t);

/* A flag another thread sets to abandon the render (its client left, the
 * server stops): checked every few hundred steps, it ends the render with
 * JINJA_LIMIT "cancelled". Borrowed: it outlives the run. */
void jinja_set_cancel(jinja_run *r, const atomic_bool *flag);

/* Renders t with r's variables, appending the text to out (nothing is
 * appended on failure). 0, or TPS_EINVAL / TPS_ENOMEM with e filled. A run
 * renders once. */
int jinja_render(jinja_run *r, const jinja_tpl *t, sbuf *out, jinja_error *e);

#endif
