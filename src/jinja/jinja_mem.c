/* Memory of the Jinja engine: bump arenas (a compiled template's tree, a
 * render's values), the run object with its variables and limits, the
 * public value builders, and the arena text buffers renders write into.
 * Nothing here evaluates anything. */
#include "jinja/jinja_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    l->max_depth = 500;
}

jinja_run *jinja_run_new(const jinja_limits *limits) {
    jinja_run *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    if (limits)
        r->lim = *limits;
    else
        jinja_limits_default(&r->lim);
    r->arena.limit = r->lim.max_memory;
    return r;
}

void jinja_run_free(jinja_run *r) {
    if (!r) return;
    jarena_free(&r->arena);
    free(r->vars);
    free(r);
}

static void *run_alloc(jinja_run *r, size_t n) {
    void *p = r->nomem ? NULL : jarena_alloc(&r->arena, n);
    if (!p) r->nomem = true;
    return p;
}

jinja_val jinja_str(jinja_run *r, const char *s, size_t n) {
    char *p = n > UINT32_MAX ? NULL : run_alloc(r, n + 1);
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
    struct jinja_list *l = run_alloc(r, sizeof *l);
    if (!l) return (jinja_val){0};
    memset(l, 0, sizeof *l);
    return (jinja_val){.type = JINJA_LIST, .u.l = l};
}

/* Room for one more element in an arena array of elem-byte items. */
static bool grow(jinja_run *r, void **arr, uint32_t n, uint32_t *cap, size_t elem) {
    if (n < *cap) return true;
    uint32_t nc = *cap ? *cap * 2 : 4;
    void *p = run_alloc(r, (size_t)nc * elem);
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

jinja_val jinja_map_new(jinja_run *r) {
    struct jinja_map *m = run_alloc(r, sizeof *m);
    if (!m) return (jinja_val){0};
    memset(m, 0, sizeof *m);
    return (jinja_val){.type = JINJA_MAP, .u.m = m};
}

void jinja_map_set(jinja_run *r, jinja_val map, const char *key, size_t klen, jinja_val v) {
    if (map.type != JINJA_MAP || !map.u.m) return;
    struct jinja_map *m = map.u.m;
    for (uint32_t i = 0; i < m->n; i++)
        if (m->k[i].type == JINJA_STR && m->k[i].n == klen && !memcmp(m->k[i].u.s, key, klen)) {
            m->v[i] = v;
            return;
        }
    jinja_val k = jinja_str(r, key, klen);
    uint32_t kcap = m->cap;
    if (r->nomem || !grow(r, (void **)&m->k, m->n, &kcap, sizeof *m->k) ||
        !grow(r, (void **)&m->v, m->n, &m->cap, sizeof *m->v))
        return;
    m->k[m->n] = k;
    m->v[m->n++] = v;
}

void jinja_set(jinja_run *r, const char *name, jinja_val v) {
    size_t n = strlen(name);
    for (uint32_t i = 0; i < r->n_vars; i++)
        if (r->vars[i].n == n && !memcmp(r->vars[i].name, name, n)) {
            r->vars[i].v = v;
            return;
        }
    jinja_val copy = jinja_str(r, name, n);
    if (r->nomem) return;
    if (r->n_vars == r->cap_vars) {
        uint32_t cap = r->cap_vars ? r->cap_vars * 2 : 16;
        struct jvar *p = realloc(r->vars, cap * sizeof *p);
        if (!p) {
            r->nomem = true;
            return;
        }
        r->vars = p;
        r->cap_vars = cap;
    }
    r->vars[r->n_vars++] = (struct jvar){.name = copy.u.s, .n = (uint32_t)n, .v = v};
}

void jinja_set_time(jinja_run *r, time_t t) {
    r->now = t;
    r->have_now = true;
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
