/* Equality and hashing of values, as Python's == and hash() (1 == 1.0 ==
 * True, and equal values hash alike; lists and dicts are unhashable), and
 * dicts: keys and values in insertion order with a hash index once they
 * outgrow a linear scan, so a request's 200k-key object becomes a dict,
 * and is looked up, in linear time. Strings hash with SipHash-1-3 under a
 * key random per run, so a client cannot choose keys that collide. The
 * caller's variables (jinja_set) are indexed the same way.
 *
 * Every walk into nested values (==, hash) is one level deeper per level
 * and charges its work, so a 200,000-deep list is a LIMIT error, never a
 * stack overflow, and a comparison of big values counts what it costs.
 * Not here: ordering (<, jinja_value.c), printing (jinja_print.c). */
#include "jinja/jinja_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------
 * SipHash-1-3 (Aumasson and Bernstein; Python's string hash since 3.11)
 * ------------------------------------------------------------------------- */

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = ROTL(v1, 13);                                                                         \
        v1 ^= v0;                                                                                  \
        v0 = ROTL(v0, 32);                                                                         \
        v2 += v3;                                                                                  \
        v3 = ROTL(v3, 16);                                                                         \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = ROTL(v3, 21);                                                                         \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = ROTL(v1, 17);                                                                         \
        v1 ^= v2;                                                                                  \
        v2 = ROTL(v2, 32);                                                                         \
    } while (0)

static uint64_t siphash13(const uint64_t key[2], const unsigned char *in, size_t n) {
    uint64_t v0 = 0x736f6d6570736575ULL ^ key[0], v1 = 0x646f72616e646f6dULL ^ key[1];
    uint64_t v2 = 0x6c7967656e657261ULL ^ key[0], v3 = 0x7465646279746573ULL ^ key[1];
    size_t whole = n - n % 8;
    for (size_t i = 0; i < whole; i += 8) {
        uint64_t m;
        memcpy(&m, in + i, 8); /* little-endian hosts; any order hashes consistently */
        v3 ^= m;
        SIPROUND;
        v0 ^= m;
    }
    uint64_t b = (uint64_t)n << 56;
    for (size_t i = whole; i < n; i++)
        b |= (uint64_t)in[i] << (8 * (i - whole));
    v3 ^= b;
    SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

uint32_t jv_hash_bytes(const jinja_run *r, const char *s, size_t n) {
    uint64_t h = siphash13(r->seed, (const unsigned char *)s, n);
    return (uint32_t)(h ^ (h >> 32));
}

/* a 64-bit value mixed under the run's key (splitmix64's finalizer) */
static uint32_t mix(const jinja_run *r, uint64_t x) {
    x ^= r->seed[0];
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return (uint32_t)(x ^ (x >> 32));
}

/* ---------------------------------------------------------------------------
 * ==
 * ------------------------------------------------------------------------- */

static int64_t as_int(jinja_val v) {
    return v.type == JINJA_INT ? v.u.i : (int64_t)v.u.b;
}

static bool seq_eq(jctx *c, jinja_val a, jinja_val b) {
    if (a.sub == JLIST_GEN || b.sub == JLIST_GEN) return a.u.l == b.u.l;
    if ((a.sub == JLIST_TUPLE) != (b.sub == JLIST_TUPLE) || a.u.l->n != b.u.l->n) return false;
    jx_deeper(c, "values compared nested");
    bool eq = true;
    for (uint32_t i = 0; i < a.u.l->n && eq; i++)
        eq = jv_eq(c, a.u.l->v[i], b.u.l->v[i]);
    c->depth--;
    return eq;
}

static bool map_eq(jctx *c, jinja_val a, jinja_val b) {
    if (a.sub != b.sub) return false;
    if (a.sub == JMAP_NAMESPACE) return a.u.m == b.u.m;
    if (a.u.m->n != b.u.m->n) return false;
    jx_deeper(c, "values compared nested");
    bool eq = true;
    for (uint32_t i = 0; i < a.u.m->n && eq; i++) {
        jinja_val w;
        eq = jv_map_get(c, b.u.m, a.u.m->k[i], &w) && jv_eq(c, a.u.m->v[i], w);
    }
    c->depth--;
    return eq;
}

bool jv_eq(jctx *c, jinja_val a, jinja_val b) {
    jx_work(c, JX_WORK_VALUE);
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a.type != JINJA_FLOAT && b.type != JINJA_FLOAT) return as_int(a) == as_int(b);
        return jv_num(a) == jv_num(b);
    }
    if (a.type != b.type) return false;
    switch (a.type) {
    case JINJA_UNDEFINED:
    case JINJA_NONE:
        return true;
    case JINJA_STR:
        if (a.n != b.n) return false;
        jx_work(c, a.n);
        return !memcmp(a.u.s, b.u.s, a.n);
    case JINJA_LIST:
        return seq_eq(c, a, b);
    case JINJA_MAP:
        return map_eq(c, a, b);
    default:
        return a.u.p == b.u.p && a.aux == b.aux && a.sub == b.sub;
    }
}

/* ---------------------------------------------------------------------------
 * hash()
 * ------------------------------------------------------------------------- */

static bool tuple_hash(jctx *c, jinja_val v, uint32_t *h) {
    uint64_t acc = 0x27d4eb2f165667c5ULL ^ v.u.l->n;
    jx_deeper(c, "values hashed nested");
    for (uint32_t i = 0; i < v.u.l->n; i++) {
        uint32_t e;
        if (!jv_hash(c, v.u.l->v[i], &e)) return false; /* the caller fails or gives up */
        acc = (acc ^ e) * 0x100000001b3ULL;
    }
    c->depth--;
    *h = mix(c->run, acc);
    return true;
}

bool jv_hash(jctx *c, jinja_val v, uint32_t *h) {
    jx_work(c, JX_WORK_VALUE);
    const jinja_run *r = c->run;
    switch (v.type) {
    case JINJA_UNDEFINED:
    case JINJA_NONE:
        *h = mix(r, 0x9e3779b97f4a7c15ULL + v.type);
        return true;
    case JINJA_BOOL:
    case JINJA_INT:
        *h = mix(r, (uint64_t)as_int(v));
        return true;
    case JINJA_FLOAT: { /* integral floats hash as the int they equal */
        double f = v.u.f;
        if (f >= -9.2e18 && f <= 9.2e18 && f == (double)(int64_t)f) {
            *h = mix(r, (uint64_t)(int64_t)f);
        } else {
            uint64_t bits;
            memcpy(&bits, &f, sizeof bits);
            *h = mix(r, bits);
        }
        return true;
    }
    case JINJA_STR:
        jx_work(c, v.n);
        *h = jv_hash_bytes(r, v.u.s, v.n);
        return true;
    case JINJA_LIST:
        if (v.sub == JLIST_TUPLE) return tuple_hash(c, v, h);
        if (v.sub != JLIST_GEN) return false;
        *h = mix(r, (uint64_t)(uintptr_t)v.u.l);
        return true;
    case JINJA_MAP:
        if (v.sub != JMAP_NAMESPACE) return false;
        *h = mix(r, (uint64_t)(uintptr_t)v.u.m);
        return true;
    default:
        *h = mix(r, (uint64_t)(uintptr_t)v.u.p ^ ((uint64_t)v.aux << 48) ^ ((uint64_t)v.sub << 40));
        return true;
    }
}

/* the first unhashable value inside v, for the error (Python names it) */
static jinja_val unhashable_in(jinja_val v) {
    if (v.type == JINJA_LIST && v.sub == JLIST_TUPLE)
        for (uint32_t i = 0; i < v.u.l->n; i++) {
            jinja_val w = v.u.l->v[i];
            if ((w.type == JINJA_LIST && w.sub != JLIST_GEN) ||
                (w.type == JINJA_MAP && w.sub != JMAP_NAMESPACE))
                return unhashable_in(w);
        }
    return v;
}

uint32_t jv_hash_or_fail(jctx *c, jinja_val v) {
    uint32_t h, depth = c->depth;
    if (jv_hash(c, v, &h)) return h;
    c->depth = depth; /* tuple_hash gave up inside its levels */
    jx_fail(c, JINJA_ERROR, "unhashable type: '%s'", jv_type_name(unhashable_in(v)));
}

/* ---------------------------------------------------------------------------
 * Dicts
 * ------------------------------------------------------------------------- */

/* Allocation for the two callers: a render (c: a LIMIT or NOMEM error) or
 * a caller building variables (c NULL: NULL, r->nomem set). */
static void *alloc(jctx *c, jinja_run *r, size_t n) {
    return c ? jx_alloc(c, n) : jrun_alloc(r, n);
}

static bool key_eq(jctx *c, jinja_val a, jinja_val b) {
    if (a.type == JINJA_STR && b.type == JINJA_STR) {
        if (a.n != b.n) return false;
        if (c) jx_work(c, a.n);
        return !memcmp(a.u.s, b.u.s, a.n);
    }
    if (a.type == JINJA_STR || b.type == JINJA_STR) return false;
    return jv_eq(c, a, b); /* c is not NULL: callers without one use string keys */
}

/* a key's hash; strings need no c (the callers building variables) */
static uint32_t key_hash(jctx *c, const jinja_run *r, jinja_val k) {
    if (k.type != JINJA_STR) return jv_hash_or_fail(c, k);
    if (c) jx_work(c, JX_WORK_VALUE + k.n);
    return jv_hash_bytes(r, k.u.s, k.n);
}

/* the position of key, or -1; h its hash (unused while the dict is small) */
static int64_t find(jctx *c, const struct jinja_map *m, jinja_val key, uint32_t h) {
    if (!m->slots) {
        for (uint32_t i = 0; i < m->n; i++)
            if (key_eq(c, m->k[i], key)) return i;
        return -1;
    }
    for (uint32_t j = h & m->mask;; j = (j + 1) & m->mask) {
        jslot s = m->slots[j];
        if (!s.at) return -1;
        if (s.hash == h && key_eq(c, m->k[s.at - 1], key)) return s.at - 1;
    }
}

static void slot_put(jslot *slots, uint32_t mask, uint32_t hash, uint32_t at) {
    uint32_t j = hash & mask;
    while (slots[j].at)
        j = (j + 1) & mask;
    slots[j] = (jslot){hash, at};
}

/* Room in the index for entry m->n (the one being added), built from the
 * keys the first time, regrown from the stored hashes after. */
static bool index_room(jctx *c, jinja_run *r, struct jinja_map *m) {
    uint32_t want = m->n + 1;
    if (want <= JMAP_LINEAR || (m->slots && (uint64_t)want * 2 <= (uint64_t)m->mask + 1))
        return true;
    uint32_t size = 16;
    while (size < (uint64_t)want * 2)
        size *= 2;
    jslot *slots = alloc(c, r, (size_t)size * sizeof *slots);
    if (!slots) return false;
    memset(slots, 0, (size_t)size * sizeof *slots);
    if (m->slots) {
        for (uint32_t j = 0; j <= m->mask; j++)
            if (m->slots[j].at) slot_put(slots, size - 1, m->slots[j].hash, m->slots[j].at);
    } else {
        for (uint32_t i = 0; i < m->n; i++)
            slot_put(slots, size - 1, key_hash(c, r, m->k[i]), i + 1);
    }
    m->slots = slots;
    m->mask = size - 1;
    return true;
}

static bool pairs_room(jctx *c, jinja_run *r, struct jinja_map *m) {
    if (m->n < m->cap) return true;
    if (m->cap >= UINT32_MAX / 2) return false;
    uint32_t cap = m->cap ? m->cap * 2 : 4;
    jinja_val *k = alloc(c, r, (size_t)cap * sizeof *k),
              *v = k ? alloc(c, r, cap * sizeof *v) : NULL;
    if (!v) return false;
    if (m->n) {
        memcpy(k, m->k, m->n * sizeof *k);
        memcpy(v, m->v, m->n * sizeof *v);
    }
    m->k = k;
    m->v = v;
    m->cap = cap;
    return true;
}

/* Sets key to v; a new key is copied into the arena when copy_key. false
 * out of memory (c NULL only: a render fails instead). */
static bool put(jctx *c, jinja_run *r, struct jinja_map *m, jinja_val key, jinja_val v,
                bool copy_key) {
    uint32_t h = m->slots || m->n >= JMAP_LINEAR || key.type != JINJA_STR ? key_hash(c, r, key) : 0;
    int64_t at = find(c, m, key, h);
    if (at >= 0) {
        m->v[at] = v;
        return true;
    }
    if (copy_key) key = c ? jv_str(c, key.u.s, key.n) : jinja_str(r, key.u.s, key.n);
    if ((!c && r->nomem) || !pairs_room(c, r, m) || !index_room(c, r, m)) return false;
    if (m->slots) slot_put(m->slots, m->mask, h, m->n + 1);
    m->k[m->n] = key;
    m->v[m->n++] = v;
    return true;
}

jinja_val jv_map(jctx *c, uint32_t cap, int sub) {
    struct jinja_map *m = jx_alloc(c, sizeof *m);
    memset(m, 0, sizeof *m);
    m->cap = cap;
    m->k = cap ? jx_alloc(c, (size_t)cap * sizeof *m->k) : NULL;
    m->v = cap ? jx_alloc(c, (size_t)cap * sizeof *m->v) : NULL;
    return (jinja_val){.type = JINJA_MAP, .sub = (uint8_t)sub, .u.m = m};
}

void jv_map_put(jctx *c, jinja_val map, jinja_val key, jinja_val v) {
    if (!put(c, c->run, map.u.m, key, v, false))
        jx_fail(c, JINJA_NOMEM, "out of memory rendering the template");
}

bool jv_map_get(jctx *c, const struct jinja_map *m, jinja_val key, jinja_val *out) {
    uint32_t h = 0;
    if (m->slots) {
        uint32_t depth = c->depth;
        if (key.type == JINJA_STR)
            h = key_hash(c, c->run, key);
        else if (!jv_hash(c, key, &h)) {
            c->depth = depth;
            return false; /* unhashable: no key of a dict equals it */
        }
    }
    int64_t at = find(c, m, key, h);
    if (at < 0) return false;
    *out = m->v[at];
    return true;
}

/* ---------------------------------------------------------------------------
 * The public builders: dicts and variables from the caller
 * ------------------------------------------------------------------------- */

jinja_val jinja_map_new(jinja_run *r) {
    struct jinja_map *m = jrun_alloc(r, sizeof *m);
    if (!m) return (jinja_val){0};
    memset(m, 0, sizeof *m);
    return (jinja_val){.type = JINJA_MAP, .u.m = m};
}

void jinja_map_set(jinja_run *r, jinja_val map, const char *key, size_t klen, jinja_val v) {
    if (map.type != JINJA_MAP || !map.u.m || r->nomem) return;
    if (klen >= UINT32_MAX) {
        r->nomem = true;
        return;
    }
    put(NULL, r, map.u.m, jinja_str_ref(key, klen), v, true);
}

static int64_t var_find(const jinja_run *r, const char *name, size_t n, uint32_t h) {
    if (!r->vslots) return -1;
    for (uint32_t j = h & r->vmask;; j = (j + 1) & r->vmask) {
        jslot s = r->vslots[j];
        if (!s.at) return -1;
        const struct jvar *v = &r->vars[s.at - 1];
        if (s.hash == h && v->n == n && !memcmp(v->name, name, n)) return s.at - 1;
    }
}

/* room for one more variable: the array and its index, at most half full */
static bool vars_room(jinja_run *r) {
    if (r->n_vars == r->cap_vars) {
        uint32_t cap = r->cap_vars ? r->cap_vars * 2 : 16;
        struct jvar *p = realloc(r->vars, cap * sizeof *p);
        if (!p) return false;
        r->vars = p;
        r->cap_vars = cap;
    }
    if (r->vslots && (uint64_t)(r->n_vars + 1) * 2 <= (uint64_t)r->vmask + 1) return true;
    uint32_t size = r->vslots ? (r->vmask + 1) * 2 : 32;
    jslot *slots = calloc(size, sizeof *slots);
    if (!slots) return false;
    for (uint32_t i = 0; i < r->n_vars; i++)
        slot_put(slots, size - 1, r->vars[i].hash, i + 1);
    free(r->vslots);
    r->vslots = slots;
    r->vmask = size - 1;
    return true;
}

void jinja_set(jinja_run *r, const char *name, jinja_val v) {
    size_t n = strlen(name);
    if (r->nomem) return;
    uint32_t h = jv_hash_bytes(r, name, n);
    int64_t at = var_find(r, name, n, h);
    if (at >= 0) {
        r->vars[at].v = v;
        return;
    }
    jinja_val copy = jinja_str(r, name, n);
    if (r->nomem) return;
    if (!vars_room(r)) {
        r->nomem = true;
        return;
    }
    slot_put(r->vslots, r->vmask, h, r->n_vars + 1);
    r->vars[r->n_vars++] = (struct jvar){.name = copy.u.s, .n = (uint32_t)n, .hash = h, .v = v};
}

bool jinja_run_var(const jinja_run *r, const char *name, size_t n, jinja_val *out) {
    int64_t at = var_find(r, name, n, jv_hash_bytes(r, name, n));
    if (at < 0) return false;
    *out = r->vars[at].v;
    return true;
}
