/* plan_run (plan.h): the simulation's event loop. The engine steps
 * whenever it holds requests and is free before the next event; otherwise
 * the next event (an arrival, a response's last byte, a due send, a
 * client's timeout check) happens. The run ends when nothing is left, or
 * at --duration + --timeout, where the client cancels what is in flight. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plan/plan_internal.h"
#include "base/clock.h"

static int handle(sim *s, const sim_ev *ev, tps_err *e) {
    switch (ev->kind) {
    case EV_ARRIVE:
        return sim_engine_arrive(s, ev->arg, ev->t, e);
    case EV_DONE:
        return sim_client_done(s, ev->arg, ev->t, e);
    case EV_SEND:
        if (ev->t == s->send_ev_at) s->send_ev_at = UINT64_MAX;
        return sim_client_send_due(s, ev->t, e);
    case EV_CHECK:
        return sim_client_check(s, ev->arg, ev->t, e);
    }
    return 0;
}

/* Runs until nothing is left or the deadline; *t_end: the last event. */
static int loop(sim *s, uint64_t *t_end, tps_err *e) {
    for (;;) {
        const uint64_t tev = sim_heap_top(&s->heap);
        if (sim_engine_busy(s) && s->eng_free != UINT64_MAX && s->eng_free <= tev) {
            if (s->eng_free > s->deadline) return 0;
            bool ran;
            int rc = sim_engine_step(s, &ran, e);
            if (rc) return rc;
            if (ran) *t_end = s->eng_free > *t_end ? s->eng_free : *t_end;
            if (!ran && !s->replay) { /* nothing could run: wait for news */
                if (tev == UINT64_MAX) return 0;
                s->eng_free = tev;
            }
            continue;
        }
        sim_ev ev;
        if (tev > s->deadline || !sim_heap_pop(&s->heap, &ev)) return 0;
        if (ev.t > *t_end) *t_end = ev.t;
        int rc = handle(s, &ev, e);
        if (rc) return rc;
    }
}

static int64_t wall_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The records still open at the end were cancelled by the client. */
static int close_open(sim *s, uint64_t t_end, tps_err *e) {
    for (size_t i = 0; i < s->n_recs; i++) {
        if (s->reqs[i].done) continue;
        sim_engine_cancel(s, i);
        int rc = sim_finish_record(s, i, t_end, BENCH_ERR_CANCELLED,
                                   "still running at duration + timeout", e);
        if (rc) return rc;
    }
    return 0;
}

static void fill_out(bench_run_out *out, sim *s, uint64_t t_end) {
    out->recs = s->recs;
    out->n = s->n_recs;
    s->recs = NULL;
    s->n_recs = 0;
    out->t_start_ns = SIM_ORIGIN;
    out->t_start_unix_ns = wall_ns();
    out->t_stop_ns = t_end;
    out->client_loops = 1;
    for (size_t i = 0; i < out->n; i++)
        out->events_received += out->recs[i].tl.n_events + 1;
}

int plan_run(bench_run_out *out, const bench_config *cfg, const workload *wl, void *srv_arg,
             tps_err *e) {
    memset(out, 0, sizeof *out);
    plan_server *srv = srv_arg;
    if (!wl->n) return tps_fail(e, TPS_EINVAL, "plan: the workload has no requests");
    const uint64_t wall0 = tps_now_ns();
    sim *s = calloc(1, sizeof *s);
    if (!s) return tps_fail(e, TPS_ENOMEM, "out of memory");
    *s = (sim){.srv = srv, .cfg = cfg, .wl = wl, .replay = srv->replay};
    const double tmo = cfg->timeout_s > 0 ? cfg->timeout_s : 600;
    s->deadline =
        cfg->duration_s > 0 ? SIM_ORIGIN + (uint64_t)((cfg->duration_s + tmo) * 1e9) : UINT64_MAX;
    uint64_t t_end = SIM_ORIGIN;
    int rc = sim_engine_init(s, e);
    if (!rc) rc = s->replay ? sim_client_replay(s, e) : sim_client_start(s, e);
    if (!rc) rc = loop(s, &t_end, e);
    if (!rc) rc = close_open(s, t_end, e);
    s->st.wall_s = tps_ns_to_s(tps_now_ns() - wall0);
    srv->stats = s->st;
    if (!rc) fill_out(out, s, t_end);
    for (size_t i = 0; i < s->n_recs; i++)
        bench_record_free(&s->recs[i]);
    free(s->recs);
    sim_client_free(s);
    sim_engine_free(s);
    sim_records_free(s);
    free(s);
    return rc;
}
