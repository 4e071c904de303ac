/* The simulation's inside, shared by its files, which call one way from
 * the top down:
 *
 *   plan_sim.c     plan_run: the event loop
 *   plan_client.c  the simulated tps bench client: when each request is
 *                  sent (closed loop, open loop, trace, conversations)
 *   plan_engine.c  the simulated engine: arrivals into its queue, and
 *                  one step (plan, cost, commit, synthetic tokens)
 *   plan_record.c  the run's records and its event queue
 *   plan_prompt.c  a request body to token ids, as the server makes them
 *
 * Time is simulated, in ns on the run's clock (origin SIM_ORIGIN, never 0,
 * since the engine's timings take 0 for "not yet"). */
#ifndef TPS_PLAN_INTERNAL_H
#define TPS_PLAN_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench/workload/convo.h"
#include "engine/core/engine_setup.h"
#include "engine/schedule/planner.h"
#include "plan/plan.h"
#include "plan/plan_replay.h"
#include "base/rng.h"

#define SIM_ORIGIN 1000000000ull /* 1 s */

/* ---- events ---------------------------------------------------------------- */

typedef enum sim_ev_kind {
    EV_ARRIVE = 1, /* arg: a request reaches the engine's queue */
    EV_DONE = 2,   /* arg: a request's last byte reaches the client */
    EV_SEND = 3,   /* the client may have sends due */
    EV_CHECK = 4,  /* arg: the client checks a request against --timeout / --idle-timeout */
} sim_ev_kind;

typedef struct sim_ev {
    uint64_t t;
    uint64_t order; /* ties keep the order they were pushed in */
    uint32_t kind;
    size_t arg;
} sim_ev;

typedef struct sim_heap {
    sim_ev *v;
    size_t n, cap;
    uint64_t order;
} sim_heap;

/* plan_record.c */
int sim_heap_push(sim_heap *h, uint64_t t, uint32_t kind, size_t arg);
bool sim_heap_pop(sim_heap *h, sim_ev *out);
static inline uint64_t sim_heap_top(const sim_heap *h) {
    return h->n ? h->v[0].t : UINT64_MAX;
}

/* ---- the run ------------------------------------------------------------------ */

/* Beside each record: what the simulation needs of its request. */
typedef struct sim_req {
    int32_t *ids; /* the prompt's token ids, owned until its sequence copies them */
    uint32_t n_ids;
    seq *s;           /* in the engine (arrived, not finished); NULL otherwise */
    bool in_incoming; /* s is on the engine's arrivals, not yet its queue */
    bool done;
    char *reply; /* multi-turn: the reply's text for the next turn, owned until settled */
    size_t reply_len;
} sim_req;

typedef struct sim {
    plan_server *srv;
    const bench_config *cfg;
    const workload *wl;
    const plan_replay *replay;
    uint64_t deadline; /* the client gives up on what is in flight: duration + timeout */
    /* records, in send order */
    bench_record *recs;
    sim_req *reqs;
    size_t n_recs, cap_recs;
    sim_heap heap;
    /* the engine */
    engine_params ep; /* resolved */
    uint32_t n_ctx;
    kv_cache *kv;
    sched sc;
    seq_list incoming;  /* arrived, not yet taken by a step */
    uint64_t eng_free;  /* when the engine may start its next step */
    size_t replay_step; /* replay: the next recorded step */
    tps_rng tok_rng;    /* synthetic output tokens, drawn from out_ids */
    tps_rng spread_rng; /* each step's spread about its cost (plan_cost_spread_ns) */
    int32_t *out_ids;
    uint32_t n_out_ids;
    /* the client */
    bool sending, open_loop, multi_turn;
    uint64_t planned; /* requests at most; 0: bounded by time */
    uint64_t dur;     /* --duration in ns; 0 none */
    uint32_t cap, in_flight;
    uint64_t next_seq;            /* closed loop: the next request's number */
    uint64_t k, next_sched;       /* open loop: the next arrival and when it is due */
    uint64_t send_ev_at;          /* the EV_SEND queued (UINT64_MAX: none) */
    uint64_t timeout_ns, idle_ns; /* --timeout, --idle-timeout */
    tps_rng rng;                  /* the arrival schedule */
    tps_rng http_rng;             /* each request's way into the queue (plan_cost_ingress_ns) */
    convo_set convos;             /* multi-turn */
    int32_t **item_ids;           /* (wl->n,) each item's prompt ids, made on first send */
    uint32_t *item_n;
    plan_stats st;
} sim;

/* plan_client.c: sends what is due at now (closed loop: fills free slots;
 * open loop: the schedule; conversations: those ready) and schedules the
 * next EV_SEND; a request's DONE frees its slot first (sim_client_done). */
int sim_client_start(sim *s, tps_err *e);
/* Replaying: every request of the trace sent as it reached the real
 * engine (request k is workload item k mod n), and the first step's time. */
int sim_client_replay(sim *s, tps_err *e);
int sim_client_send_due(sim *s, uint64_t now, tps_err *e);
int sim_client_done(sim *s, size_t rec, uint64_t now, tps_err *e);
/* EV_CHECK: fails the request when it is past --timeout or silent past
 * --idle-timeout (cancelling it in the engine), else checks again later. */
int sim_client_check(sim *s, size_t rec, uint64_t now, tps_err *e);
void sim_client_free(sim *s);

/* plan_engine.c */
int sim_engine_init(sim *s, tps_err *e);
void sim_engine_free(sim *s);
/* Request rec reaches the engine at now: queued, or refused (recorded and
 * finished at now) as engine_submit would refuse it. */
int sim_engine_arrive(sim *s, size_t rec, uint64_t now, tps_err *e);
/* The request leaves the engine (the client gave up on it): its blocks
 * are released; no more tokens. */
void sim_engine_cancel(sim *s, size_t rec);
/* True while the engine holds requests (queued or running). */
bool sim_engine_busy(const sim *s);
/* One step at s->eng_free; *ran false when nothing could run (no rows). */
int sim_engine_step(sim *s, bool *ran, tps_err *e);

/* plan_prompt.c: the token ids the server would make of a body. On a body
 * the server would refuse, TPS_EINVAL with its message. */
int sim_prompt_ids(const plan_server *srv, bench_endpoint ep, const char *body, size_t len,
                   int32_t **ids, uint32_t *n, tps_err *e);

/* plan_record.c: a new record for workload item `item`, request number num. */
int sim_new_record(sim *s, size_t *idx, uint64_t num, uint32_t item, tps_err *e);
/* Ends record rec at now (ok or with kind and message) and queues its DONE. */
int sim_finish_record(sim *s, size_t rec, uint64_t now, bench_errkind kind, const char *msg,
                      tps_err *e);
void sim_records_free(sim *s);

#endif
