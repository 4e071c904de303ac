/* The receive path of a loop (client_internal.h): curl's write callback
 * stamps a chunk's arrival and appends its bytes to the connection's inbox;
 * after the pass every inbox is parsed, chunk by chunk with its own stamp,
 * SSE event by event into the request's timeline. Allocates nothing per
 * token once buffers are warm. */
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/grow.h"
#include "bench/client/client_internal.h"

static int parse_inbox(conn *c);

/* curl's write callback: the arrival time first, then the bytes into the
 * inbox. Nothing here parses, so no connection's stamp waits for another's
 * parse -- unless one pass brings more than INBOX_MAX for one connection
 * (a flood of large events): its inbox is parsed then, so memory stays
 * bounded, at the cost of a late stamp for the sockets read after it. */
size_t client_on_data(char *p, size_t sz, size_t nm, void *ud) {
    const uint64_t now = tps_now_ns(); /* first thing: the arrival time */
    conn *c = ud;
    run_state *r = c->run;
    const size_t n = sz * nm;
    r->bytes += n;
    if (!c->t_first_byte) c->t_first_byte = now;
    c->t_last_byte = now;
    if (c->inbox_len + n > INBOX_MAX && parse_inbox(c))
        return 0; /* 0 aborts the transfer (CURLE_WRITE_ERROR); c->err says why */
    if (TPS_GROW(c->inbox, c->inbox_cap, c->inbox_len + n, 256) != 0 ||
        TPS_GROW(c->marks, c->cap_marks, c->n_marks + 1, 16) != 0) {
        client_set_err(c, BENCH_ERR_OTHER, "out of memory for received bytes", "");
        return 0;
    }
    memcpy(c->inbox + c->inbox_len, p, n);
    c->inbox_len += n;
    c->marks[c->n_marks++] = (chunk_mark){.end = c->inbox_len, .t_ns = now};
    if (!c->queued) {
        c->queued = true;
        r->pending[r->n_pending++] = c;
    }
    return n;
}

static int on_event(void *ud, const sse_read_event *ev) {
    conn *c = ud;
    run_state *r = c->run;
    bench_record *rec = &r->recs[c->rec];
    bench_chunk ch;
    tps_err e;
    r->events++;
    if (bench_chunk_parse(&ch, r->dialect, ev->data, ev->data_len, ev->event, &e) != 0) {
        client_set_err(c, BENCH_ERR_MALFORMED, "", e.msg);
        return 1;
    }
    if (ch.done && !ch.has_usage && !ch.has_prompt) { /* [DONE], message_stop */
        bench_chunk_release(&ch);                     /* message_stop's JSON */
        c->done = true;
        return 0;
    }
    int stop = 0;
    if (ch.error) {
        client_set_err(c, BENCH_ERR_STREAM_ERROR, "server error event: ", ch.error_msg);
        stop = 1;
    }
    if (ch.tokens && !stop) {
        if (timeline_add(&rec->tl, c->now, ch.tokens, &e) != 0) {
            client_set_err(c, BENCH_ERR_OTHER, "", e.msg);
            stop = 1;
        }
        rec->stream_tokens += ch.tokens;
        r->out_tokens += ch.tokens;
        c->saw_ids |= ch.from_ids;
        if (ch.reasoning)
            c->reasoning_stream += ch.tokens;
        else
            timeline_mark_answer(&rec->tl, c->now);
    }
    if (ch.empty_text && !stop) {
        if (TPS_GROW(c->held, c->cap_held, c->n_held + 1, 64)) {
            client_set_err(c, BENCH_ERR_OTHER, "out of memory for empty-text events", "");
            stop = 1;
        } else {
            c->held[c->n_held++] = c->now;
        }
    }
    client_keep_text(c, &ch);
    client_take_usage(c, rec, &ch);
    bench_chunk_release(&ch);
    if (ch.done && !stop) c->done = true; /* response.completed, message_stop */
    return stop;
}

/* One chunk, parsed with its own arrival time. Returns non-zero when the
 * request must end (c->err says why). */
static int parse_chunk(conn *c, const char *p, size_t n, uint64_t t_ns) {
    run_state *r = c->run;
    bench_record *rec = &r->recs[c->rec];
    if (!c->checked) {
        long status = 0;
        const char *ctype = NULL;
        curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_getinfo(c->easy, CURLINFO_CONTENT_TYPE, &ctype);
        rec->http_status = (int)status;
        c->is_sse = status == 200 && (!ctype || strstr(ctype, "event-stream"));
        c->checked = true;
    }
    if (!c->is_sse) {
        size_t max = rec->http_status == 200 ? JSON_BODY_MAX : ERR_BODY_MAX;
        size_t k = c->body_len + n > max ? max - c->body_len : n;
        if (k && TPS_GROW(c->body, c->body_cap, c->body_len + k + 1, 256) == 0) {
            memcpy(c->body + c->body_len, p, k);
            c->body_len += k;
            c->body[c->body_len] = 0;
        }
        if (k < n && rec->http_status == 200) {
            client_set_err(c, BENCH_ERR_MALFORMED, "a non-streamed response over 4 MiB", "");
            return 1;
        }
        return 0;
    }
    c->now = t_ns;
    tps_err e;
    int rc = sse_reader_feed(&c->sse, p, n, on_event, c, &e);
    if (rc < 0) client_set_err(c, BENCH_ERR_MALFORMED, "", e.msg);
    return rc;
}

/* c's inbox parsed, chunk by chunk with its stamp, and emptied; non-zero
 * when the request must end. */
static int parse_inbox(conn *c) {
    size_t at = 0;
    int stop = 0;
    for (size_t m = 0; m < c->n_marks && !stop && c->err == BENCH_OK; m++) {
        stop = parse_chunk(c, c->inbox + at, c->marks[m].end - at, c->marks[m].t_ns);
        at = c->marks[m].end;
    }
    c->inbox_len = c->n_marks = 0;
    return stop || c->err != BENCH_OK;
}

/* After a pass: every inbox parsed, chunk by chunk with its stamp. A
 * request whose stream broke ends here. */
void client_parse_pending(run_state *r) {
    for (size_t i = 0; i < r->n_pending; i++) {
        conn *c = r->pending[i];
        c->queued = false;
        int stop = parse_inbox(c);
        if (stop && c->busy) client_finish(r, c, CURLE_WRITE_ERROR, BENCH_OK, tps_now_ns());
    }
    r->n_pending = 0;
}
