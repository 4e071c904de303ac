/* The simulation's records (one per request, as tps bench's client keeps
 * them) and its event queue, a binary min-heap on (time, push order). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_internal.h"
#include "base/grow.h"
#include "base/heap.h"

static bool ev_less(const void *pa, const void *pb) {
    const sim_ev *a = pa, *b = pb;
    return a->t < b->t || (a->t == b->t && a->order < b->order);
}

int sim_heap_push(sim_heap *h, uint64_t t, uint32_t kind, size_t arg) {
    if (TPS_GROW(h->v, h->cap, h->n + 1, 256)) return TPS_ENOMEM;
    sim_ev ev = {.t = t, .order = h->order++, .kind = kind, .arg = arg};
    tps_heap_push(h->v, h->n++, &ev, sizeof ev, ev_less);
    return 0;
}

bool sim_heap_pop(sim_heap *h, sim_ev *out) {
    if (!h->n) return false;
    tps_heap_pop(h->v, h->n--, sizeof *out, ev_less, out);
    return true;
}

int sim_new_record(sim *s, size_t *idx, uint64_t num, uint32_t item, tps_err *e) {
    if (s->n_recs == s->cap_recs) {
        size_t cap = s->cap_recs ? 2 * s->cap_recs : 1024;
        bench_record *r = realloc(s->recs, cap * sizeof *r);
        if (r) s->recs = r;
        sim_req *q = r ? realloc(s->reqs, cap * sizeof *q) : NULL;
        if (q) s->reqs = q;
        if (!r || !q)
            return tps_fail(e, TPS_ENOMEM, "cannot allocate %zu request records", s->n_recs + 1);
        s->cap_recs = cap;
    }
    memset(&s->reqs[s->n_recs], 0, sizeof s->reqs[0]);
    int rc = bench_record_init(&s->recs[s->n_recs], s->wl, item, num, e);
    if (rc) return rc;
    *idx = s->n_recs++;
    return 0;
}

int sim_finish_record(sim *s, size_t rec, uint64_t now, bench_errkind kind, const char *msg,
                      tps_err *e) {
    bench_record *r = &s->recs[rec];
    sim_req *q = &s->reqs[rec];
    if (q->done) return 0;
    q->done = true;
    free(q->ids);
    q->ids = NULL;
    r->err = kind;
    r->http_status = kind == BENCH_OK ? 200 : kind == BENCH_ERR_HTTP_4XX ? 400 : 0;
    if (msg && !(r->err_msg = strdup(msg))) return tps_fail(e, TPS_ENOMEM, "out of memory");
    timeline_finish(&r->tl, now, kind == BENCH_OK);
    return sim_heap_push(&s->heap, now, EV_DONE, rec) ? tps_fail(e, TPS_ENOMEM, "out of memory")
                                                      : 0;
}

void sim_records_free(sim *s) {
    for (size_t i = 0; i < s->n_recs; i++)
        free(s->reqs[i].ids);
    free(s->reqs);
    s->reqs = NULL;
    free(s->heap.v);
    s->heap.v = NULL;
}
