/* The bounded response store (response_store.h): a list oldest first
 * (entries are few: a scan per lookup is cheap beside a request's prefill),
 * one mutex, and a small ring of ids that left with why.
 *
 * Not here: the formats of what is stored, persistence. */
#include "server/write/response_store.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"

#define GONE_RING 256 /* ids that left, remembered for the 404's reason */

typedef struct entry {
    struct entry *next;
    char id[RESPONSE_STORE_ID_MAX];
    uint64_t born_ns;
    size_t nc, nr;
    char *conv, *resp; /* one allocation: conv, NUL, resp, NUL */
} entry;

typedef struct gone {
    char id[RESPONSE_STORE_ID_MAX];
    const char *why; /* static */
} gone;

struct response_store {
    pthread_mutex_t mu;
    response_store_limits lim;
    entry *head, *tail; /* oldest first */
    response_store_stats st;
    gone ring[GONE_RING];
    uint32_t ring_next;
};

void response_store_limits_default(response_store_limits *l) {
    l->max_entries = 1024;
    l->max_bytes = 64u << 20;
    l->max_age_s = 3600;
}

int response_store_create(response_store **out, const response_store_limits *l, tps_err *err) {
    response_store *s = calloc(1, sizeof *s);
    if (!s) return tps_fail(err, TPS_ENOMEM, "out of memory for the response store");
    if (pthread_mutex_init(&s->mu, NULL)) {
        free(s);
        return tps_fail(err, TPS_ENOMEM, "cannot create the response store's lock");
    }
    s->lim = *l;
    *out = s;
    return 0;
}

static void entry_free(entry *e) {
    if (e) free(e->conv);
    free(e);
}

void response_store_free(response_store *s) {
    if (!s) return;
    for (entry *e = s->head, *n; e; e = n) {
        n = e->next;
        entry_free(e);
    }
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static void remember(response_store *s, const char *id, const char *why) {
    gone *g = &s->ring[s->ring_next++ % GONE_RING];
    snprintf(g->id, sizeof g->id, "%s", id);
    g->why = why;
}

/* Unlinks e (prev is its predecessor or NULL) and frees it. */
static void unlink_entry(response_store *s, entry *prev, entry *e, const char *why) {
    if (prev)
        prev->next = e->next;
    else
        s->head = e->next;
    if (s->tail == e) s->tail = prev;
    s->st.entries--;
    s->st.bytes -= e->nc + e->nr;
    remember(s, e->id, why);
    entry_free(e);
}

static bool too_old(const response_store *s, const entry *e, uint64_t now_ns) {
    return s->lim.max_age_s && now_ns > e->born_ns &&
           now_ns - e->born_ns > (uint64_t)s->lim.max_age_s * TPS_NS_PER_SEC;
}

/* Expired entries go (oldest first: they are at the head). */
static void expire(response_store *s, uint64_t now_ns) {
    while (s->head && too_old(s, s->head, now_ns)) {
        s->st.expired_total++;
        unlink_entry(s, NULL, s->head,
                     "it expired (the store keeps an answer for at most "
                     "--response-store-age seconds)");
    }
}

static entry *find(response_store *s, const char *id, entry **prev) {
    entry *p = NULL;
    for (entry *e = s->head; e; p = e, e = e->next)
        if (!strcmp(e->id, id)) {
            if (prev) *prev = p;
            return e;
        }
    return NULL;
}

int response_store_put(response_store *s, const char *id, const char *conversation, size_t nc,
                       const char *response, size_t nr, uint64_t now_ns, tps_err *err) {
    if (strlen(id) >= RESPONSE_STORE_ID_MAX) return tps_fail(err, TPS_EINVAL, "id too long");
    if (!s->lim.max_entries || nc + nr > s->lim.max_bytes)
        return tps_fail(err, TPS_ERANGE,
                        "the answer (%zu bytes) is over what the response store holds (%zu "
                        "bytes, %u entries: --response-store-bytes, --response-store-entries)",
                        nc + nr, s->lim.max_bytes, s->lim.max_entries);
    entry *e = calloc(1, sizeof *e);
    char *mem = malloc(nc + nr + 2);
    if (!e || !mem) {
        free(e);
        free(mem);
        return tps_fail(err, TPS_ENOMEM, "out of memory storing a response");
    }
    snprintf(e->id, sizeof e->id, "%s", id);
    e->born_ns = now_ns;
    e->conv = mem;
    e->resp = mem + nc + 1;
    memcpy(e->conv, conversation, nc);
    e->conv[nc] = 0;
    memcpy(e->resp, response, nr);
    e->resp[nr] = 0;
    e->nc = nc;
    e->nr = nr;
    pthread_mutex_lock(&s->mu);
    expire(s, now_ns);
    entry *prev = NULL, *old = find(s, id, &prev);
    if (old) unlink_entry(s, prev, old, "it was replaced");
    while (s->head &&
           (s->st.entries + 1 > s->lim.max_entries || s->st.bytes + nc + nr > s->lim.max_bytes)) {
        s->st.evicted_total++;
        unlink_entry(s, NULL, s->head,
                     "it was evicted to make room (the store's limits: --response-store-entries, "
                     "--response-store-bytes)");
    }
    if (s->tail)
        s->tail->next = e;
    else
        s->head = e;
    s->tail = e;
    s->st.entries++;
    s->st.bytes += nc + nr;
    s->st.stored_total++;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* The reason id is not there (s->mu held). */
static int not_found(response_store *s, const char *id, tps_err *err) {
    for (uint32_t i = 0; i < GONE_RING; i++) {
        const gone *g = &s->ring[(s->ring_next - 1 - i) % GONE_RING];
        if (g->why && !strcmp(g->id, id))
            return tps_fail(err, TPS_ENOENT, "no stored response '%.96s': %s", id, g->why);
    }
    return tps_fail(err, TPS_ENOENT,
                    "no stored response '%.96s': none was stored under that id (sent with "
                    "store: false, made by another server, or before a restart)",
                    id);
}

int response_store_get(response_store *s, const char *id, response_part part, uint64_t now_ns,
                       char **out, size_t *n, tps_err *err) {
    pthread_mutex_lock(&s->mu);
    expire(s, now_ns);
    entry *e = find(s, id, NULL);
    int rc = 0;
    if (!e) {
        rc = not_found(s, id, err);
    } else {
        const char *p = part == RESPONSE_CONVERSATION ? e->conv : e->resp;
        *n = part == RESPONSE_CONVERSATION ? e->nc : e->nr;
        *out = malloc(*n + 1);
        if (*out)
            memcpy(*out, p, *n + 1);
        else
            rc = tps_fail(err, TPS_ENOMEM, "out of memory reading a stored response");
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int response_store_delete(response_store *s, const char *id, uint64_t now_ns, tps_err *err) {
    pthread_mutex_lock(&s->mu);
    expire(s, now_ns);
    entry *prev = NULL, *e = find(s, id, &prev);
    int rc = 0;
    if (e)
        unlink_entry(s, prev, e, "it was deleted (DELETE /v1/responses/{id})");
    else
        rc = not_found(s, id, err);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void response_store_get_stats(response_store *s, response_store_stats *st) {
    pthread_mutex_lock(&s->mu);
    *st = s->st;
    pthread_mutex_unlock(&s->mu);
}
