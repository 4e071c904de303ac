/* Compiled grammars by content and the constrained requests' memory budget
 * (grammar_cache.h): an LRU list of entries (the GBNF text, its hash, the
 * compiled grammar), found by a scan that compares hashes first (the list
 * holds at most max_entries, tens to hundreds), and a count of live bytes
 * that every compiled grammar adds to when made and takes back when freed.
 *
 * Not here: compiling (constraint_prog.c). */
#include "constrain/grammar_cache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/dlist.h"

typedef struct gc_entry {
    struct gc_entry *prev, *next; /* most recently used first */
    uint64_t hash;
    size_t len;
    constraint_prog *prog; /* one reference: the cache's */
    char text[];           /* the GBNF, len bytes */
} gc_entry;

struct grammar_cache {
    grammar_cache_config cfg;
    pthread_mutex_t mu;
    gc_entry *head, *tail;
    uint32_t n;
    _Atomic size_t live; /* bytes of compiled grammars alive (constraint_prog_set_account) */
    size_t reserved;     /* under mu */
    grammar_cache_stats st;
};

static uint64_t hash_text(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

int grammar_cache_create(grammar_cache **out, const grammar_cache_config *c, tps_err *err) {
    grammar_cache *gc = calloc(1, sizeof *gc);
    if (!gc) return tps_fail(err, TPS_ENOMEM, "grammar cache: out of memory");
    gc->cfg = *c;
    pthread_mutex_init(&gc->mu, NULL);
    atomic_init(&gc->live, 0);
    *out = gc;
    return 0;
}

static void unlink_entry(grammar_cache *gc, gc_entry *e) {
    TPS_DLIST_REMOVE(gc, e);
}

static void push_front(grammar_cache *gc, gc_entry *e) {
    TPS_DLIST_PUSH_FRONT(gc, e);
}

/* Drops an entry (its compiled grammar lives on with whoever holds it). */
static void drop_entry(grammar_cache *gc, gc_entry *e) {
    unlink_entry(gc, e);
    constraint_prog_unref(e->prog);
    free(e);
    gc->st.evictions++;
}

void grammar_cache_free(grammar_cache *gc) {
    if (!gc) return;
    while (gc->head)
        drop_entry(gc, gc->head);
    pthread_mutex_destroy(&gc->mu);
    free(gc);
}

static gc_entry *find(grammar_cache *gc, uint64_t h, const char *text, size_t len) {
    for (gc_entry *e = gc->head; e; e = e->next)
        if (e->hash == h && e->len == len && !memcmp(e->text, text, len)) return e;
    return NULL;
}

/* Bytes in use, with `more` reserved on top. Under mu. */
static size_t in_use(grammar_cache *gc, size_t more) {
    return atomic_load(&gc->live) + gc->reserved + more;
}

/* Evicts unused cached grammars, least recently used first, until `more`
 * fits the budget (never keep). True when it fits. Under mu. */
static bool make_room(grammar_cache *gc, size_t more, const constraint_prog *keep) {
    size_t budget = gc->cfg.budget_bytes;
    if (!budget) return true;
    for (gc_entry *e = gc->tail; e && in_use(gc, more) > budget;) {
        gc_entry *prev = e->prev;
        if (e->prog != keep && !constraint_prog_shared(e->prog)) drop_entry(gc, e);
        e = prev;
    }
    return in_use(gc, more) <= budget;
}

/* The refusal when the budget has no room for reserve (the grammar's own
 * bytes already count as live). Under mu. */
static int refuse(grammar_cache *gc, size_t grammar_bytes, size_t reserve, tps_err *err) {
    gc->st.refused++;
    size_t budget = gc->cfg.budget_bytes;
    const char *label = gc->cfg.budget_label ? gc->cfg.budget_label : "";
    if (grammar_bytes + reserve > budget)
        return tps_fail(err, TPS_ERANGE,
                        "grammar: it needs %.1f MiB (compiled %.1f MiB, its choices' recognizers "
                        "%.1f MiB), more than the %.1f MiB all constrained requests may hold %s",
                        (double)(grammar_bytes + reserve) / 1048576.0,
                        (double)grammar_bytes / 1048576.0, (double)reserve / 1048576.0,
                        (double)budget / 1048576.0, label);
    return tps_fail(err, TPS_EFULL,
                    "constrained requests hold %.1f MiB of the %.1f MiB they may take %s, and "
                    "this one needs %.1f MiB more; retry when some have finished",
                    (double)(in_use(gc, 0) - grammar_bytes) / 1048576.0, (double)budget / 1048576.0,
                    label, (double)(grammar_bytes + reserve) / 1048576.0);
}

int grammar_cache_lookup(grammar_cache *gc, const char *gbnf, size_t len, size_t reserve,
                         constraint_prog **out, tps_err *err) {
    *out = NULL;
    uint64_t h = hash_text(gbnf, len);
    pthread_mutex_lock(&gc->mu);
    gc_entry *e = find(gc, h, gbnf, len);
    if (!e) {
        pthread_mutex_unlock(&gc->mu);
        return 0;
    }
    unlink_entry(gc, e);
    push_front(gc, e);
    gc->st.hits++;
    if (!make_room(gc, reserve, e->prog)) {
        int rc = refuse(gc, 0, reserve, err);
        pthread_mutex_unlock(&gc->mu);
        return rc;
    }
    gc->reserved += reserve;
    *out = constraint_prog_ref(e->prog);
    pthread_mutex_unlock(&gc->mu);
    return 1;
}

/* p, just compiled (the caller's reference), into the cache unless an
 * equal one got there first (then that one is the caller's instead).
 * Under mu; returns the grammar the caller holds. */
static constraint_prog *insert(grammar_cache *gc, uint64_t h, const char *text, size_t len,
                               constraint_prog *p) {
    gc_entry *e = find(gc, h, text, len);
    if (e) { /* compiled beside us: share the cached one */
        constraint_prog_unref(p);
        unlink_entry(gc, e);
        push_front(gc, e);
        return constraint_prog_ref(e->prog);
    }
    if (!gc->cfg.max_entries) return p;
    e = malloc(sizeof *e + len);
    if (!e) return p; /* not cached: the request goes on without it */
    e->hash = h;
    e->len = len;
    memcpy(e->text, text, len);
    e->prog = constraint_prog_ref(p);
    push_front(gc, e);
    while (gc->n > gc->cfg.max_entries)
        drop_entry(gc, gc->tail);
    return p;
}

int grammar_cache_acquire(grammar_cache *gc, const char *gbnf, size_t len, size_t reserve,
                          constraint_prog **out, bool *hit, tps_err *err) {
    *hit = false;
    int rc = grammar_cache_lookup(gc, gbnf, len, reserve, out, err);
    if (rc) {
        *hit = rc == 1;
        return rc == 1 ? 0 : rc;
    }
    constraint_prog *p = NULL;
    rc = constraint_prog_compile(&p, gbnf, len, &gc->cfg.limits, err);
    pthread_mutex_lock(&gc->mu);
    gc->st.misses++;
    if (rc) {
        gc->st.compile_fails++;
        pthread_mutex_unlock(&gc->mu);
        return rc;
    }
    constraint_prog_set_account(p, &gc->live);
    size_t budget = gc->cfg.budget_bytes, bytes = constraint_prog_bytes(p);
    if (budget && bytes + reserve > budget) { /* it can never run here: not kept either */
        rc = refuse(gc, bytes, reserve, err);
        pthread_mutex_unlock(&gc->mu);
        constraint_prog_unref(p);
        return rc;
    }
    p = insert(gc, hash_text(gbnf, len), gbnf, len, p);
    if (!make_room(gc, reserve, p)) { /* kept: the retry finds it compiled */
        rc = refuse(gc, constraint_prog_bytes(p), reserve, err);
        pthread_mutex_unlock(&gc->mu);
        constraint_prog_unref(p);
        return rc;
    }
    gc->reserved += reserve;
    pthread_mutex_unlock(&gc->mu);
    *out = p;
    return 0;
}

void grammar_cache_release(grammar_cache *gc, constraint_prog *p, size_t reserve) {
    pthread_mutex_lock(&gc->mu);
    gc->reserved -= reserve < gc->reserved ? reserve : gc->reserved;
    pthread_mutex_unlock(&gc->mu);
    constraint_prog_unref(p);
}

void grammar_cache_get_stats(grammar_cache *gc, grammar_cache_stats *out) {
    pthread_mutex_lock(&gc->mu);
    *out = gc->st;
    out->entries = gc->n;
    out->bytes = in_use(gc, 0);
    out->budget_bytes = gc->cfg.budget_bytes;
    pthread_mutex_unlock(&gc->mu);
}
