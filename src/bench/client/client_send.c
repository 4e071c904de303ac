/* Sending (client_internal.h): a request's record, its transfer put on a
 * free connection with its body (borrowed from the workload, or built at
 * send time for a conversation's next turn, with its X-Session-Id). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/grow.h"
#include "bench/client/client_internal.h"
#include "bench/workload/convo.h"

int bench_record_init(bench_record *rec, const workload *wl, uint32_t item, uint64_t seq,
                      tps_err *e) {
    memset(rec, 0, sizeof *rec);
    const workload_item *it = &wl->items[item];
    size_t cap_ev = it->max_tokens + 2u < 65536u ? it->max_tokens + 2u : 65536u;
    int rc = timeline_init(&rec->tl, cap_ev, e);
    if (rc) return rc;
    rec->item = item;
    rec->seq = seq;
    rec->max_tokens = it->max_tokens;
    rec->input_target = it->input_target;
    rec->input_client = it->input_tokens;
    return TPS_OK;
}

void bench_record_turn(bench_record *rec, const convo *cv, size_t conv, uint32_t turn) {
    rec->conversation = (uint32_t)conv;
    rec->turn = turn + 1;
    rec->input_client = rec->input_client && (cv->history_tokens || turn == 0)
                            ? (uint32_t)(cv->history_tokens + rec->input_client)
                            : 0;
}

/* A record for request number seq (over every loop of the run), sending
 * workload item `item`. */
int client_new_record(run_state *r, size_t *idx, uint64_t seq, uint32_t item, tps_err *e) {
    if (TPS_GROW(r->recs, r->cap_recs, r->n_recs + 1, 256))
        return tps_fail(e, TPS_ENOMEM, "cannot allocate %zu request records", r->n_recs + 1);
    int rc = bench_record_init(&r->recs[r->n_recs], r->wl, item, seq, e);
    if (rc) return rc;
    *idx = r->n_recs++;
    return TPS_OK;
}

/* Puts the request recs[idx] on a free connection with its body (borrowed
 * until the transfer ends) and headers. sched_ns: the scheduled time (open
 * loop), or UINT64_MAX for "now" (closed). */
int client_start(run_state *r, conn *c, size_t idx, const char *body, size_t len,
                 struct curl_slist *hdrs, uint64_t sched_ns, tps_err *e) {
    c->rec = idx;
    c->busy = true;
    c->checked = c->is_sse = c->done = c->saw_ids = c->has_reasoning_usage = false;
    c->reasoning_stream = c->reasoning_usage = 0;
    c->err = BENCH_OK;
    c->t_first_byte = c->t_last_byte = 0;
    c->inbox_len = c->n_marks = c->n_held = 0;
    c->body_len = c->text_len = c->reply_len = 0;
    c->msg[0] = c->curl_err[0] = 0;
    sse_reader_reset(&c->sse);
    curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c->easy, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    uint64_t sent = tps_now_ns();
    timeline_start(&r->recs[idx].tl, sched_ns < sent ? sched_ns : sent, sent);
    CURLMcode mc = curl_multi_add_handle(r->multi, c->easy);
    if (mc != CURLM_OK)
        return tps_fail(e, TPS_EIO, "curl_multi_add_handle: %s", curl_multi_strerror(mc));
    return TPS_OK;
}

/* Request number seq, single-turn: the workload's items in order, cycling. */
int client_launch(run_state *r, uint64_t seq, uint64_t sched_ns, tps_err *e) {
    uint32_t item = (uint32_t)(seq % r->wl->n);
    size_t idx = 0;
    int rc = client_new_record(r, &idx, seq, item, e);
    if (rc) return rc;
    conn *c = &r->conns[r->free_list[--r->n_free]];
    const workload_item *it = &r->wl->items[item];
    return client_start(r, c, idx, it->body, it->body_len, r->hdrs, sched_ns, e);
}

/* The base headers plus this conversation's X-Session-Id, on conn c. */
static int session_headers(run_state *r, conn *c, size_t conv, tps_err *e) {
    curl_slist_free_all(c->session_hdrs);
    c->session_hdrs = NULL;
    char h[96];
    convo_session_header(&r->convos, conv, h, sizeof h);
    for (const struct curl_slist *p = r->hdrs; p; p = p->next) {
        struct curl_slist *n = curl_slist_append(c->session_hdrs, p->data);
        if (!n) return tps_fail(e, TPS_ENOMEM, "out of memory");
        c->session_hdrs = n;
    }
    struct curl_slist *n = curl_slist_append(c->session_hdrs, h);
    if (!n) return tps_fail(e, TPS_ENOMEM, "out of memory");
    c->session_hdrs = n;
    return TPS_OK;
}

/* Conversation conv's next turn: its body, with the replies so far, is
 * built now (closed loop: it is sent at once). */
int client_launch_turn(run_state *r, size_t conv, tps_err *e) {
    const convo *cv = &r->convos.c[conv];
    const uint32_t turn = cv->next;
    const uint32_t item = (uint32_t)(conv * r->wl->turns + turn);
    size_t idx = 0;
    int rc = client_new_record(r, &idx, r->n_recs, item, e);
    if (rc) return rc;
    bench_record *rec = &r->recs[idx];
    bench_record_turn(rec, cv, conv, turn);
    conn *c = &r->conns[r->free_list[--r->n_free]];
    free(c->send_body);
    c->send_body = NULL;
    size_t len = 0;
    rc = workload_turn_body(r->wl, conv, turn, (const char *const *)cv->replies, cv->reply_lens,
                            &c->send_body, &len, e);
    if (!rc) rc = session_headers(r, c, conv, e);
    if (rc) {
        r->free_list[r->n_free++] = (size_t)(c - r->conns);
        return rc;
    }
    convo_sent(&r->convos, conv);
    return client_start(r, c, idx, c->send_body, len, c->session_hdrs, UINT64_MAX, e);
}
