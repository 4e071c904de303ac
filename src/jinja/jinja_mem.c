/* Memory of the Jinja engine: bump arenas (a compiled template's tree, a
 * render's values), the run object with its limits and hash key, the
 * public builders of strings and lists, the arena text buffers renders
 * write into, the counters that end a render at a limit (steps, work,
 * depth), and what every file asks of a value (jv_str, jv_type_name,
 * jv_num). Nothing here evaluates anything; dicts and the variables are
 * jinja_dict.c's. */
#include "jinja/jinja_internal.h"

#include <stdarg.h>
#include <sys/random.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/free_all.h"

struct jarena_chunk {
    jarena_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

#define CHUNK_MIN (16u << 10)

void *jarena_alloc(jarena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (!n) n = 16;
    if (a->limit && (n > a->limit || a->used > a->limit - n)) return NULL;
    jarena_chunk *h = a->head;
    if (!h || h->cap - h->used < n) {
        size_t cap = h ? h->cap * 2 : CHUNK_MIN;
        if (cap > (4u << 20)) cap = 4u << 20;
        if (cap < n) cap = n;
        jarena_chunk *c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->next = h;
        c->used = 0;
        c->cap = cap;
        a->head = h = c;
    }
    void *p = h->data + h->used;
    h->used += n;
    a->used += n;
    return p;
}

void jarena_free(jarena *a) {
    jarena_chunk *c = a->head;
    while (c) {
        jarena_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
    a->used = 0;
}

/* ---------------------------------------------------------------------------
 * Runs and the public value builders
 * ------------------------------------------------------------------------- */

void jinja_limits_default(jinja_limits *l) {
    l->max_output = 4u << 20;
    l->max_memory = 64u << 20;
    l->max_steps = 5000000;
    l->max_work = JINJA_DEFAULT_WORK;
    l->max_depth = 500;
}

/* The run's hash key: random, so that a client cannot send keys chosen to
 * collide; the clock and an address when the kernel has no entropy. */
static void seed(jinja_run *r) {
    if (getrandom(r->seed, sizeof r->seed, GRND_NONBLOCK) == (ssize_t)sizeof r->seed) return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    r->seed[0] = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ULL ^ (uint64_t)(uintptr_t)r;
    r->seed[1] = (uint64_t)ts.tv_sec * 0xc2b2ae3d27d4eb4fULL ^ (uint64_t)(uintptr_t)&ts;
}

jinja_run *jinja_run_new(const jinja_limits *limits) {
    jinja_run *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    if (limits)
        r->lim = *limits;
    else
        jinja_limits_default(&r->lim);
    if (!r->lim.max_work) r->lim.max_work = JINJA_DEFAULT_WORK;
    r->arena.limit = r->lim.max_memory;
    seed(r);
    return r;
}

void jinja_run_free(jinja_run *r) {
    if (!r) return;
    jarena_free(&r->arena);
    TPS_FREE_ALL(r->vars, r->vslots, r);
}

void *jrun_alloc(jinja_run *r, size_t n) {
    void *p = r->nomem ? NULL : jarena_alloc(&r->arena, n);
    if (!p) r->nomem = true;
    return p;
}

jinja_val jinja_str(jinja_run *r, const char *s, size_t n) {
    char *p = n > UINT32_MAX ? NULL : jrun_alloc(r, n + 1);
    if (!p) {
        r->nomem = true;
        return (jinja_val){0};
    }
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return (jinja_val){.type = JINJA_STR, .n = (uint32_t)n, .u.s = p};
}

jinja_val jinja_str_ref(const char *s, size_t n) {
    return (jinja_val){.type = JINJA_STR, .n = (uint32_t)n, .u.s = s ? s : ""};
}

jinja_val jinja_list_new(jinja_run *r) {
    struct jinja_list *l = jrun_alloc(r, sizeof *l);
    if (!l) return (jinja_val){0};
    memset(l, 0, sizeof *l);
    return (jinja_val){.type = JINJA_LIST, .u.l = l};
}

/* Room for one more element in an arena array of elem-byte items. */
static bool grow(jinja_run *r, void **arr, uint32_t n, uint32_t *cap, size_t elem) {
    if (n < *cap) return true;
    uint32_t nc = *cap ? *cap * 2 : 4;
    void *p = jrun_alloc(r, (size_t)nc * elem);
    if (!p) return false;
    if (n) memcpy(p, *arr, (size_t)n * elem);
    *arr = p;
    *cap = nc;
    return true;
}

void jinja_list_push(jinja_run *r, jinja_val list, jinja_val v) {
    if (list.type != JINJA_LIST || !list.u.l) return;
    struct jinja_list *l = list.u.l;
    if (!grow(r, (void **)&l->v, l->n, &l->cap, sizeof *l->v)) return;
    l->v[l->n++] = v;
}

void jinja_set_time(jinja_run *r, time_t t) {
    r->now = t;
    r->have_now = true;
}

/* ---------------------------------------------------------------------------
 * What every file asks of a value: a copied string, its type's name, its
 * number
 * ------------------------------------------------------------------------- */

jinja_val jv_str(jctx *c, const char *s, size_t n) {
    if (n >= UINT32_MAX) jx_fail(c, JINJA_LIMIT, "a string of %zu bytes is too long", n);
    char *p = jx_alloc(c, n + 1);
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return (jinja_val){.type = JINJA_STR, .n = (uint32_t)n, .u.s = p};
}

jinja_val jv_lit(const char *s) {
    return (jinja_val){.type = JINJA_STR, .n = (uint32_t)strlen(s), .u.s = s};
}

bool jv_is_num(jinja_val v) {
    return v.type == JINJA_BOOL || v.type == JINJA_INT || v.type == JINJA_FLOAT;
}

double jv_num(jinja_val v) {
    return v.type == JINJA_FLOAT ? v.u.f : v.type == JINJA_INT ? (double)v.u.i : (double)v.u.b;
}

const char *jv_type_name(jinja_val v) {
    switch (v.type) {
    case JINJA_UNDEFINED:
        return "Undefined";
    case JINJA_NONE:
        return "NoneType";
    case JINJA_BOOL:
        return "bool";
    case JINJA_INT:
        return "int";
    case JINJA_FLOAT:
        return "float";
    case JINJA_STR:
        return "str";
    case JINJA_LIST: {
        static const char *const names[] = {"list",      "tuple",       "dict_items",
                                            "dict_keys", "dict_values", "generator"};
        return names[v.sub < 6 ? v.sub : 0];
    }
    case JINJA_MAP:
        return v.sub == JMAP_NAMESPACE ? "Namespace" : "dict";
    case JINJA_LOOP:
        return "LoopContext";
    default:
        return v.sub == JFN_MACRO ? "Macro" : "builtin_function_or_method";
    }
}

/* ---------------------------------------------------------------------------
 * Render-time allocation and text buffers
 * ------------------------------------------------------------------------- */

void *jx_alloc(jctx *c, size_t n) {
    void *p = jarena_alloc(&c->run->arena, n);
    if (!p) {
        if (c->run->arena.used + n > c->run->lim.max_memory)
            jx_fail(c, JINJA_LIMIT, "the template used more than %zu bytes of memory",
                    c->run->lim.max_memory);
        jx_fail(c, JINJA_NOMEM, "out of memory rendering the template");
    }
    return p;
}

void *jx_regrow(jctx *c, const void *old, size_t n, size_t cap, size_t size) {
    void *p = jx_alloc(c, cap * size);
    if (n) memcpy(p, old, n * size);
    return p;
}

/* jx_regrow on the array whose address is arrp (a T ** passed as void *),
 * without aliasing the caller's T * as a void *. */
static void regrow_at(jctx *c, void *arrp, uint32_t n, uint32_t cap, size_t size) {
    void *old;
    memcpy(&old, arrp, sizeof old);
    void *p = jx_regrow(c, old, n, cap, size);
    memcpy(arrp, &p, sizeof p);
}

void jx_pairs_room(jctx *c, void *kp, size_t ksize, void *vp, size_t vsize, uint32_t n,
                   uint32_t *cap) {
    if (n < *cap) return;
    uint32_t grown = *cap ? *cap * 2 : 4;
    regrow_at(c, kp, n, grown, ksize);
    regrow_at(c, vp, n, grown, vsize);
    *cap = grown;
}

jbuf *jb_new(jctx *c, size_t cap) {
    jbuf *b = jx_alloc(c, sizeof *b);
    b->cap = cap < 16 ? 16 : cap;
    b->p = jx_alloc(c, b->cap);
    b->n = 0;
    return b;
}

void jb_add(jctx *c, jbuf *b, const char *s, size_t n) {
    if (!n) return;
    jx_work(c, n);
    if (b == c->top && b->n + n > c->out_top_max)
        jx_fail(c, JINJA_LIMIT, "the rendered text is over %zu bytes", c->out_top_max);
    if (b->n + n > b->cap) {
        size_t cap = b->cap * 2;
        while (cap < b->n + n)
            cap *= 2;
        char *p = jx_alloc(c, cap);
        memcpy(p, b->p, b->n);
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

void jb_addc(jctx *c, jbuf *b, char ch) {
    if (b->n < b->cap && b != c->top) {
        jx_work(c, 1);
        b->p[b->n++] = ch;
        return;
    }
    jb_add(c, b, &ch, 1);
}

jinja_val jb_val(const jbuf *b) {
    return (jinja_val){.type = JINJA_STR, .n = (uint32_t)b->n, .u.s = b->p};
}

/* ---------------------------------------------------------------------------
 * Failing a render, counting its steps
 * ------------------------------------------------------------------------- */

_Noreturn void jx_fail(jctx *c, jinja_fail kind, const char *fmt, ...) {
    jinja_error *e = c->err;
    e->kind = kind;
    e->line = c->line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    longjmp(c->jb, 1);
}

void jx_deeper(jctx *c, const char *what) {
    if (++c->depth > c->run->lim.max_depth)
        jx_fail(c, JINJA_LIMIT, "%s deeper than %u", what, c->run->lim.max_depth);
}

_Noreturn void jx_over_work(jctx *c) {
    jx_fail(c, JINJA_LIMIT,
            "the template did more than %llu units of work (bytes scanned, compared or copied; "
            "values compared)",
            (unsigned long long)c->max_work);
}

void jx_step(jctx *c) {
    if (++c->steps > c->run->lim.max_steps)
        jx_fail(c, JINJA_LIMIT, "the template took more than %llu steps",
                (unsigned long long)c->run->lim.max_steps);
    if (!(c->steps & 255) && c->run->cancel &&
        atomic_load_explicit(c->run->cancel, memory_order_relaxed))
        jx_fail(c, JINJA_LIMIT, "the render was cancelled");
}

void jinja_set_cancel(jinja_run *r, const atomic_bool *flag) {
    r->cancel = flag;
}

void jx_enter(jctx *c, const jnode *n) {
    jx_step(c);
    jx_deeper(c, "the template nests");
    c->line = n->line;
}
