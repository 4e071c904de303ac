/* The simulated tps bench client (client.c's sender, in simulated time):
 * a closed loop fills every free slot, an open loop follows the seed's
 * arrival schedule (bounded by the in-flight cap, a late send keeping its
 * scheduled time), a trace sends each item at its time, conversations send
 * their next turn when the reply is in and the think time is over. Each
 * send makes its record and the prompt's token ids, and queues the
 * request's arrival at the engine after the HTTP path's cost. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_internal.h"

static uint64_t trace_time(const sim *s, size_t i) {
    double at = s->wl->items[i].send_at_s;
    return SIM_ORIGIN + (at > 0 ? (uint64_t)(at * 1e9) : 0);
}

/* Open loop: on to the next arrival of the schedule, and whether sending
 * goes on. */
static void advance(sim *s) {
    const bench_config *cfg = s->cfg;
    s->k++;
    if (s->wl->timed)
        s->next_sched = s->k < s->wl->n ? trace_time(s, s->k) : UINT64_MAX;
    else
        s->next_sched += load_next_gap_ns(cfg->arrival, cfg->rate, cfg->burstiness, &s->rng);
    if (s->planned && s->k >= s->planned) s->sending = false;
    if (s->dur && s->next_sched - SIM_ORIGIN >= s->dur) s->sending = false;
}

/* The request's arrival at the engine (after the HTTP path's cost, or
 * replaying, when the real one arrived), and the client's check of it. */
static int launch(sim *s, size_t idx, uint64_t now, tps_err *e) {
    sim_req *q = &s->reqs[idx];
    const plan_cost *c = s->srv->cost;
    uint64_t at = now + (uint64_t)plan_cost_ingress_ns(c, q->n_ids, tps_rng_uniform(&s->http_rng));
    if (s->replay) at = now;
    s->in_flight++;
    uint64_t check = s->idle_ns && s->idle_ns < s->timeout_ns ? s->idle_ns : s->timeout_ns;
    if (sim_heap_push(&s->heap, at, EV_ARRIVE, idx) ||
        (check && sim_heap_push(&s->heap, now + check, EV_CHECK, idx)))
        return tps_fail(e, TPS_ENOMEM, "out of memory");
    return 0;
}

/* The ids of a body, or the server's refusal recorded (a 400 at once). */
static int body_ids(sim *s, size_t idx, const char *body, size_t len, uint64_t now, bool *refused,
                    tps_err *e) {
    tps_err pe = {{0}};
    sim_req *q = &s->reqs[idx];
    *refused = false;
    int rc = sim_prompt_ids(s->srv, s->wl->endpoint, body, len, &q->ids, &q->n_ids, &pe);
    if (rc == TPS_ENOMEM) return tps_fail(e, rc, "%s", pe.msg);
    if (!rc) return 0;
    *refused = true;
    s->in_flight++;
    s->st.rejected++;
    return sim_finish_record(s, idx, now + (uint64_t)s->srv->cost->ingress_ns, BENCH_ERR_HTTP_4XX,
                             pe.msg, e);
}

/* A single-turn request: item `item`'s prompt (tokenized once per item). */
static int send_item(sim *s, uint64_t num, uint64_t sched_ns, uint64_t now, tps_err *e) {
    const uint32_t item = (uint32_t)(num % s->wl->n);
    size_t idx;
    int rc = sim_new_record(s, &idx, num, item, e);
    if (rc) return rc;
    timeline_start(&s->recs[idx].tl, sched_ns, now);
    sim_req *q = &s->reqs[idx];
    if (!s->item_ids[item]) {
        const workload_item *it = &s->wl->items[item];
        bool refused;
        if ((rc = body_ids(s, idx, it->body, it->body_len, now, &refused, e)) || refused) return rc;
        s->item_ids[item] = q->ids;
        s->item_n[item] = q->n_ids;
        q->ids = NULL;
    }
    if (!(q->ids = malloc(((size_t)s->item_n[item] + 1) * sizeof *q->ids)))
        return tps_fail(e, TPS_ENOMEM, "out of memory");
    memcpy(q->ids, s->item_ids[item], s->item_n[item] * sizeof *q->ids);
    q->n_ids = s->item_n[item];
    return launch(s, idx, now, e);
}

/* Conversation conv's next turn: its body carries the replies so far. */
static int send_turn(sim *s, size_t conv, uint64_t now, tps_err *e) {
    const convo *cv = &s->convos.c[conv];
    const uint32_t turn = cv->next;
    const uint32_t item = (uint32_t)(conv * s->wl->turns + turn);
    size_t idx;
    int rc = sim_new_record(s, &idx, s->n_recs, item, e);
    if (rc) return rc;
    bench_record *rec = &s->recs[idx];
    bench_record_turn(rec, cv, conv, turn);
    timeline_start(&rec->tl, now, now);
    char *body = NULL;
    size_t len = 0;
    rc = workload_turn_body(s->wl, conv, turn, (const char *const *)cv->replies, cv->reply_lens,
                            &body, &len, e);
    convo_sent(&s->convos, conv);
    bool refused = false;
    if (!rc) rc = body_ids(s, idx, body, len, now, &refused, e);
    free(body);
    if (rc || refused) return rc;
    return launch(s, idx, now, e);
}

/* One send if one is due now; *sent says whether it went. */
static int send_one(sim *s, uint64_t now, bool *sent, tps_err *e) {
    *sent = false;
    if (s->multi_turn) {
        size_t conv;
        if (s->planned && s->n_recs >= s->planned) return 0;
        if (!convo_next(&s->convos, now, &conv)) return 0;
        *sent = true;
        return send_turn(s, conv, now, e);
    }
    if (s->open_loop) {
        if (s->next_sched > now) return 0;
        uint64_t k = s->k, at = s->next_sched;
        advance(s);
        *sent = true;
        return send_item(s, k, at, now, e);
    }
    uint64_t num = s->next_seq++;
    if (s->planned && num >= s->planned) {
        s->sending = false;
        return 0;
    }
    *sent = true;
    return send_item(s, num, now, now, e);
}

int sim_client_send_due(sim *s, uint64_t now, tps_err *e) {
    if (s->sending && s->dur && now - SIM_ORIGIN >= s->dur) s->sending = false;
    while (s->sending && s->in_flight < s->cap) {
        bool sent;
        int rc = send_one(s, now, &sent, e);
        if (rc) return rc;
        if (!sent) break;
    }
    if (s->multi_turn && ((s->planned && s->n_recs >= s->planned) || convo_all_ended(&s->convos)))
        s->sending = false;
    if (!s->sending || s->in_flight >= s->cap) return 0;
    uint64_t due = s->multi_turn  ? convo_next_ready_ns(&s->convos)
                   : s->open_loop ? s->next_sched
                                  : UINT64_MAX;
    if (due == UINT64_MAX || due <= now || due >= s->send_ev_at) return 0;
    s->send_ev_at = due;
    return sim_heap_push(&s->heap, due, EV_SEND, 0) ? tps_fail(e, TPS_ENOMEM, "out of memory") : 0;
}

int sim_client_done(sim *s, size_t rec, uint64_t now, tps_err *e) {
    sim_req *q = &s->reqs[rec];
    bench_record *r = &s->recs[rec];
    s->in_flight--;
    if (s->multi_turn) {
        const workload_item *it = &s->wl->items[r->item];
        uint64_t turn_tokens = it->input_tokens ? it->input_tokens + r->tl.output_tokens : 0;
        convo_settled(&s->convos, r->conversation, r->err == BENCH_OK, q->reply, q->reply_len,
                      turn_tokens, now);
        free(q->reply);
        q->reply = NULL;
    }
    return sim_client_send_due(s, now, e);
}

int sim_client_check(sim *s, size_t rec, uint64_t now, tps_err *e) {
    sim_req *q = &s->reqs[rec];
    bench_record *r = &s->recs[rec];
    if (q->done) return 0;
    const timeline *tl = &r->tl;
    uint64_t last = tl->n_events ? tl->events[tl->n_events - 1].t_ns : tl->t_sent;
    bench_errkind k = BENCH_OK;
    char msg[96] = "";
    if (s->timeout_ns && now - tl->t_sent >= s->timeout_ns) {
        k = BENCH_ERR_TIMEOUT;
        snprintf(msg, sizeof msg, "over --timeout %.3g s", (double)s->timeout_ns / 1e9);
    } else if (s->idle_ns && now - last >= s->idle_ns) {
        k = tl->n_events ? BENCH_ERR_STALL : BENCH_ERR_NO_RESPONSE;
        snprintf(msg, sizeof msg, "%s for --idle-timeout %.3g s",
                 tl->n_events ? "the stream went silent" : "no response byte",
                 (double)s->idle_ns / 1e9);
    }
    if (k != BENCH_OK) {
        sim_engine_cancel(s, rec);
        return sim_finish_record(s, rec, now, k, msg, e);
    }
    uint64_t next = s->timeout_ns ? tl->t_sent + s->timeout_ns : UINT64_MAX;
    if (s->idle_ns && last + s->idle_ns < next) next = last + s->idle_ns;
    if (next <= now) next = now + 1;
    return sim_heap_push(&s->heap, next, EV_CHECK, rec) ? tps_fail(e, TPS_ENOMEM, "out of memory")
                                                        : 0;
}

int sim_client_start(sim *s, tps_err *e) {
    const bench_config *cfg = s->cfg;
    const workload *wl = s->wl;
    s->open_loop = cfg->rate > 0 || wl->timed;
    s->multi_turn = wl->turns > 0;
    s->sending = true;
    s->cap = cfg->concurrency ? cfg->concurrency : 1;
    s->planned = cfg->requests;
    if (wl->timed && (!s->planned || s->planned > wl->n)) s->planned = wl->n;
    s->dur = cfg->duration_s > 0 ? (uint64_t)(cfg->duration_s * 1e9) : 0;
    s->timeout_ns = (uint64_t)((cfg->timeout_s > 0 ? cfg->timeout_s : 600) * 1e9);
    s->idle_ns = cfg->idle_timeout_s > 0 ? (uint64_t)(cfg->idle_timeout_s * 1e9) : 0;
    s->send_ev_at = UINT64_MAX;
    tps_rng_seed(&s->rng, cfg->seed);
    tps_rng_seed(&s->http_rng, cfg->seed ^ 0x1a7e0c1a7e0c1a7eull);
    s->next_sched = wl->timed ? trace_time(s, 0) : SIM_ORIGIN;
    s->item_ids = calloc(wl->n ? wl->n : 1, sizeof *s->item_ids);
    s->item_n = calloc(wl->n ? wl->n : 1, sizeof *s->item_n);
    if (!s->item_ids || !s->item_n) return tps_fail(e, TPS_ENOMEM, "out of memory");
    if (s->multi_turn) {
        int rc =
            convo_set_init(&s->convos, wl->conversations, wl->turns, cfg->think_time_s, "plan", e);
        if (rc) return rc;
        s->planned = 0;
        for (size_t i = 0; i < wl->conversations; i++) {
            convo_set_turns(&s->convos, i, workload_conv_turns(wl, i));
            s->planned += s->convos.c[i].turns;
        }
        if (cfg->requests && cfg->requests < s->planned) s->planned = cfg->requests;
    }
    return sim_client_send_due(s, SIM_ORIGIN, e);
}

int sim_client_replay(sim *s, tps_err *e) {
    const plan_replay *rp = s->replay;
    s->cap = UINT32_MAX;
    s->timeout_ns = (uint64_t)((s->cfg->timeout_s > 0 ? s->cfg->timeout_s : 600) * 1e9);
    s->item_ids = calloc(s->wl->n ? s->wl->n : 1, sizeof *s->item_ids);
    s->item_n = calloc(s->wl->n ? s->wl->n : 1, sizeof *s->item_n);
    if (!s->item_ids || !s->item_n) return tps_fail(e, TPS_ENOMEM, "out of memory");
    for (size_t k = 0; k < rp->n_arrivals; k++) {
        uint64_t at = SIM_ORIGIN + rp->arrivals[k];
        int rc = send_item(s, k, at, at, e);
        if (rc) return rc;
    }
    s->eng_free = rp->n_steps ? SIM_ORIGIN + rp->steps[0].t0 : UINT64_MAX;
    return 0;
}

void sim_client_free(sim *s) {
    for (size_t i = 0; s->item_ids && i < s->wl->n; i++)
        free(s->item_ids[i]);
    free(s->item_ids);
    free(s->item_n);
    s->item_ids = NULL;
    s->item_n = NULL;
    if (s->multi_turn) convo_set_free(&s->convos);
}
