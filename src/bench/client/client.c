/* One event loop of the bench client (client_loop.h): one libcurl multi
 * handle driven through its socket API (curl_multi_socket_action on the
 * sockets epoll reports ready), a fixed pool of connection slots.
 *
 * Stamps come before any parse: the write callback only reads
 * CLOCK_MONOTONIC and appends the bytes and that stamp to the connection's
 * inbox; the SSE and JSON of every inbox are parsed once all the sockets
 * epoll reported in that pass were read. So parsing one connection's events
 * never delays another connection's stamp (curl's own reading of the other
 * ready sockets still comes between them: microseconds). The per-token
 * path allocates nothing once buffers are warm. Multi-turn bodies are built
 * when a turn is sent, never on receive.
 *
 * The kernel's receive stamp (SO_TIMESTAMPNS) is not used: curl reads the
 * socket with recv(), which drops the control message carrying it, and
 * TCP sockets do not keep a last-packet stamp for SIOCGSTAMPNS.
 * Not here: starting loops and merging them (client_pool.c), metrics over
 * requests (result.c), printing (report.c), which conversation goes next
 * (convo.c). */
#include "bench/client/bench.h"

#include "base/grow.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench/client/client_loop.h"
#include "bench/workload/convo.h"
#include "bench/client/sse_read.h"
#include "base/clock.h"

/* ---- error kinds --------------------------------------------------------------- */

static const char *const ERR_NAMES[BENCH_ERR_COUNT] = {
    [BENCH_OK] = "ok",
    [BENCH_ERR_CONNECT] = "connect",
    [BENCH_ERR_HTTP_4XX] = "http_4xx",
    [BENCH_ERR_HTTP_5XX] = "http_5xx",
    [BENCH_ERR_NO_RESPONSE] = "no_response",
    [BENCH_ERR_STALL] = "stall",
    [BENCH_ERR_TIMEOUT] = "timeout",
    [BENCH_ERR_RESET] = "reset",
    [BENCH_ERR_MALFORMED] = "malformed",
    [BENCH_ERR_STREAM_ERROR] = "stream_error",
    [BENCH_ERR_TRUNCATED] = "truncated",
    [BENCH_ERR_CANCELLED] = "cancelled",
    [BENCH_ERR_OTHER] = "other",
};

const char *bench_err_name(bench_errkind k) {
    return (unsigned)k < BENCH_ERR_COUNT ? ERR_NAMES[k] : "?";
}

bench_errkind bench_err_from_name(const char *s) {
    for (int k = 0; k < BENCH_ERR_COUNT; k++)
        if (!strcmp(s, ERR_NAMES[k])) return (bench_errkind)k;
    return BENCH_ERR_COUNT;
}

void bench_record_free(bench_record *r) {
    timeline_free(&r->tl);
    free(r->err_msg);
    r->err_msg = NULL;
}

/* ---- connection slots ----------------------------------------------------------- */

#define ERR_BODY_MAX  4096u
#define JSON_BODY_MAX (4u << 20)
#define SSE_EVENT_MAX (1u << 20)
#define INBOX_MAX     (JSON_BODY_MAX + SSE_EVENT_MAX) /* unparsed bytes one pass may hold */

typedef struct bench_loop run_state;

/* A chunk curl delivered: where it ends in the inbox and when it came. */
typedef struct chunk_mark {
    size_t end;
    uint64_t t_ns;
} chunk_mark;

typedef struct conn {
    run_state *run; /* borrowed */
    CURL *easy;
    sse_reader sse;
    size_t rec; /* index into run->recs of the request in flight */
    bool busy;
    bool queued;  /* on run->pending: its inbox holds bytes */
    bool checked; /* status and content type looked at */
    bool is_sse;  /* 200 with text/event-stream */
    bool done;    /* [DONE] seen */
    bool saw_ids; /* token ids came in the stream */
    /* arrivals of empty-text events (bench_chunk.empty_text), tokens only if
     * usage proves it at the end */
    uint64_t *held;
    size_t n_held, cap_held;
    bench_errkind err; /* set when a parse failed (the transfer is then ended) */
    uint64_t now;      /* arrival time of the chunk being parsed */
    uint64_t t_first_byte, t_last_byte;
    char *inbox; /* bytes received in this pass, not parsed yet */
    size_t inbox_len, inbox_cap;
    chunk_mark *marks; /* (n_marks,) the chunks in the inbox */
    size_t n_marks, cap_marks;
    char *body; /* non-SSE body (error text, or a non-streamed JSON response) */
    size_t body_len, body_cap;
    char *text; /* streamed text, when keep_text */
    size_t text_len, text_cap;
    char *reply; /* multi-turn: the reply's content (no reasoning), for the next turn */
    size_t reply_len, reply_cap;
    char *send_body;                 /* multi-turn: this turn's body, built at send time */
    struct curl_slist *session_hdrs; /* multi-turn: the headers plus X-Session-Id */
    char msg[256];
    char curl_err[CURL_ERROR_SIZE];
} conn;

struct bench_loop {
    const bench_config *cfg;
    const workload *wl;
    bench_shared *sh;
    uint32_t index; /* this loop's number among sh->n_loops */
    bench_loop_progress *prog;
    CURLM *multi;
    int epfd;
    struct epoll_event *evs; /* (n_conns + 1,) what one epoll_wait returns */
    uint64_t timer_ns;       /* when curl wants its timeout action; UINT64_MAX none */
    struct curl_slist *hdrs;
    char *url;
    conn *conns; /* (n_conns,) */
    size_t n_conns;
    size_t *free_list, n_free;
    conn **pending; /* (n_conns,) connections whose inbox holds bytes */
    size_t n_pending;
    bench_record *recs;
    size_t n_recs, cap_recs;
    uint64_t planned; /* requests the run will send at most; 0: bounded by time only */
    bool multi_turn;
    convo_set convos; /* multi-turn only */
    uint64_t bytes, events;
    uint64_t completed, failed, out_tokens;
    bool hit_deadline;
    uint64_t t_stop;
    double cpu_s; /* this loop's thread, while it ran */
};

static void append(char **b, size_t *len, size_t *cap, const char *p, size_t n) {
    if (tps_grow(b, cap, *len + n + 1, 1, 256) == 0) {
        memcpy(*b + *len, p, n);
        *len += n;
    }
}

/* A chunk's text: all of it for re-tokenizing the output count; the
 * reply's content (not its reasoning) for a conversation's next turn. */
static void keep_text(conn *c, const bench_chunk *ch) {
    if (!ch->text) return;
    if (c->run->cfg->keep_text)
        append(&c->text, &c->text_len, &c->text_cap, ch->text, ch->text_len);
    if (c->run->multi_turn && !ch->reasoning)
        append(&c->reply, &c->reply_len, &c->reply_cap, ch->text, ch->text_len);
}

/* What the server said about the request as a whole: usage, the share of
 * the prompt its prefix cache served, its timings. */
static void take_usage(bench_record *rec, const bench_chunk *ch) {
    if (ch->has_usage) {
        rec->has_usage = true;
        rec->usage_prompt = ch->prompt_tokens;
        rec->usage_completion = ch->completion_tokens;
    }
    if (ch->has_cached && (ch->cached_from_usage || !rec->cached_from_usage)) {
        rec->has_cached = true;
        rec->cached_from_usage = ch->cached_from_usage;
        rec->cached_tokens = ch->cached_tokens;
    }
    if (ch->has_timings) {
        rec->has_timings = true;
        rec->timings = ch->timings;
    }
}

/* Records why the request failed (the first reason wins): prefix + detail,
 * truncated to fit. */
static void set_err(conn *c, bench_errkind k, const char *prefix, const char *detail) {
    if (c->err != BENCH_OK) return;
    c->err = k;
    size_t a = strlen(prefix), b = strlen(detail), cap = sizeof c->msg - 1;
    if (a > cap) a = cap;
    if (b > cap - a) b = cap - a;
    memcpy(c->msg, prefix, a);
    memcpy(c->msg + a, detail, b);
    c->msg[a + b] = 0;
}

/* ---- receive path: stamp now, parse after the pass ----------------------------------- */

/* curl's write callback: the arrival time first, then the bytes into the
 * inbox. Nothing here parses, so no connection's stamp waits for another's
 * parse. */
static size_t on_data(char *p, size_t sz, size_t nm, void *ud) {
    const uint64_t now = tps_now_ns(); /* first thing: the arrival time */
    conn *c = ud;
    run_state *r = c->run;
    const size_t n = sz * nm;
    r->bytes += n;
    if (!c->t_first_byte) c->t_first_byte = now;
    c->t_last_byte = now;
    if (c->inbox_len + n > INBOX_MAX) {
        set_err(c, BENCH_ERR_MALFORMED, "more than 5 MiB arrived in one read pass", "");
        return 0; /* 0 aborts the transfer (CURLE_WRITE_ERROR) */
    }
    if (TPS_GROW(c->inbox, c->inbox_cap, c->inbox_len + n, 256) != 0 ||
        TPS_GROW(c->marks, c->cap_marks, c->n_marks + 1, 16) != 0) {
        set_err(c, BENCH_ERR_OTHER, "out of memory for received bytes", "");
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
    if (bench_chunk_parse(&ch, ev->data, ev->data_len, ev->event, &e) != 0) {
        set_err(c, BENCH_ERR_MALFORMED, "", e.msg);
        return 1;
    }
    if (ch.done) {
        c->done = true;
        return 0;
    }
    int stop = 0;
    if (ch.error) {
        set_err(c, BENCH_ERR_STREAM_ERROR, "server error event: ", ch.error_msg);
        stop = 1;
    }
    if (ch.tokens && !stop) {
        if (timeline_add(&rec->tl, c->now, ch.tokens, &e) != 0) {
            set_err(c, BENCH_ERR_OTHER, "", e.msg);
            stop = 1;
        }
        rec->stream_tokens += ch.tokens;
        r->out_tokens += ch.tokens;
        c->saw_ids |= ch.from_ids;
    }
    if (ch.empty_text && !stop) {
        if (TPS_GROW(c->held, c->cap_held, c->n_held + 1, 64)) {
            set_err(c, BENCH_ERR_OTHER, "out of memory for empty-text events", "");
            stop = 1;
        } else {
            c->held[c->n_held++] = c->now;
        }
    }
    keep_text(c, &ch);
    take_usage(rec, &ch);
    bench_chunk_release(&ch);
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
            set_err(c, BENCH_ERR_MALFORMED, "a non-streamed response over 4 MiB", "");
            return 1;
        }
        return 0;
    }
    c->now = t_ns;
    tps_err e;
    int rc = sse_reader_feed(&c->sse, p, n, on_event, c, &e);
    if (rc < 0) set_err(c, BENCH_ERR_MALFORMED, "", e.msg);
    return rc;
}

static void finish(run_state *r, conn *c, CURLcode cc, bench_errkind forced, uint64_t now);

/* After a pass: every inbox parsed, chunk by chunk with its stamp. A
 * request whose stream broke ends here. */
static void parse_pending(run_state *r) {
    for (size_t i = 0; i < r->n_pending; i++) {
        conn *c = r->pending[i];
        c->queued = false;
        size_t at = 0;
        int stop = 0;
        for (size_t m = 0; m < c->n_marks && !stop && c->err == BENCH_OK; m++) {
            stop = parse_chunk(c, c->inbox + at, c->marks[m].end - at, c->marks[m].t_ns);
            at = c->marks[m].end;
        }
        c->inbox_len = c->n_marks = 0;
        if ((stop || c->err != BENCH_OK) && c->busy)
            finish(r, c, CURLE_WRITE_ERROR, BENCH_OK, tps_now_ns());
    }
    r->n_pending = 0;
}

/* ---- sending ------------------------------------------------------------------------ */

/* A record for request number seq (over every loop of the run), sending
 * workload item `item`. */
static int new_record(run_state *r, size_t *idx, uint64_t seq, uint32_t item, tps_err *e) {
    if (TPS_GROW(r->recs, r->cap_recs, r->n_recs + 1, 256))
        return tps_fail(e, TPS_ENOMEM, "cannot allocate %zu request records", r->n_recs + 1);
    bench_record *rec = &r->recs[r->n_recs];
    memset(rec, 0, sizeof *rec);
    const workload_item *it = &r->wl->items[item];
    size_t cap_ev = it->max_tokens + 2u < 65536u ? it->max_tokens + 2u : 65536u;
    int rc = timeline_init(&rec->tl, cap_ev, e);
    if (rc) return rc;
    rec->item = item;
    rec->seq = seq;
    rec->max_tokens = it->max_tokens;
    rec->input_target = it->input_target;
    rec->input_client = it->input_tokens;
    *idx = r->n_recs++;
    return TPS_OK;
}

/* Puts the request recs[idx] on a free connection with its body (borrowed
 * until the transfer ends) and headers. sched_ns: the scheduled time (open
 * loop), or UINT64_MAX for "now" (closed). */
static int start(run_state *r, conn *c, size_t idx, const char *body, size_t len,
                 struct curl_slist *hdrs, uint64_t sched_ns, tps_err *e) {
    c->rec = idx;
    c->busy = true;
    c->checked = c->is_sse = c->done = c->saw_ids = false;
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
static int launch(run_state *r, uint64_t seq, uint64_t sched_ns, tps_err *e) {
    uint32_t item = (uint32_t)(seq % r->wl->n);
    size_t idx = 0;
    int rc = new_record(r, &idx, seq, item, e);
    if (rc) return rc;
    conn *c = &r->conns[r->free_list[--r->n_free]];
    const workload_item *it = &r->wl->items[item];
    return start(r, c, idx, it->body, it->body_len, r->hdrs, sched_ns, e);
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
static int launch_turn(run_state *r, size_t conv, tps_err *e) {
    const convo *cv = &r->convos.c[conv];
    const uint32_t turn = cv->next;
    const uint32_t item = (uint32_t)(conv * r->wl->turns + turn);
    size_t idx = 0;
    int rc = new_record(r, &idx, r->n_recs, item, e);
    if (rc) return rc;
    bench_record *rec = &r->recs[idx];
    rec->conversation = (uint32_t)conv;
    rec->turn = turn + 1;
    /* what the client can say of the prompt: the history so far and this message */
    rec->input_client = rec->input_client && (cv->history_tokens || turn == 0)
                            ? (uint32_t)(cv->history_tokens + rec->input_client)
                            : 0;
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
    return start(r, c, idx, c->send_body, len, c->session_hdrs, UINT64_MAX, e);
}

/* ---- finishing ------------------------------------------------------------------------ */

static bench_errkind map_curl(CURLcode cc) {
    switch (cc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_SSL_CONNECT_ERROR:
        return BENCH_ERR_CONNECT;
    case CURLE_OPERATION_TIMEDOUT:
        return BENCH_ERR_TIMEOUT;
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
        return BENCH_ERR_RESET;
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_BAD_CONTENT_ENCODING:
        return BENCH_ERR_MALFORMED;
    default:
        return BENCH_ERR_OTHER;
    }
}

/* The error message of a non-200 body: error.message if JSON, else the text. */
static void http_error_msg(conn *c, int status) {
    json_t *j = c->body_len ? json_loadb(c->body, c->body_len, 0, NULL) : NULL;
    json_t *er = json_object_get(j, "error");
    const char *m = json_is_object(er)   ? json_string_value(json_object_get(er, "message"))
                    : json_is_string(er) ? json_string_value(er)
                                         : NULL;
    snprintf(c->msg, sizeof c->msg, "HTTP %d: %.200s", status, m ? m : c->body_len ? c->body : "");
    json_decref(j);
}

/* A non-streamed 200 body: one JSON response. */
static void finish_json_body(conn *c, bench_record *rec) {
    bench_chunk ch;
    tps_err e;
    if (bench_chunk_parse(&ch, c->body ? c->body : "", c->body_len, "", &e) != 0) {
        set_err(c, BENCH_ERR_MALFORMED, "", e.msg);
        return;
    }
    if (ch.error) set_err(c, BENCH_ERR_STREAM_ERROR, "server error: ", ch.error_msg);
    take_usage(rec, &ch);
    keep_text(c, &ch);
    c->done = true;
    bench_chunk_release(&ch);
}

/* The request's error kind: the first of a forced end (timeout, stall), a
 * parse error, the transfer's, the HTTP status's, the JSON body's, a stream
 * without [DONE]; c->msg says what happened. */
static bench_errkind settle_error(conn *c, bench_record *rec, CURLcode cc, bench_errkind forced) {
    if (!c->checked) {
        long status = 0;
        curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
        rec->http_status = (int)status;
    }
    bench_errkind k = forced != BENCH_OK ? forced : c->err;
    if (forced != BENCH_OK && c->err == BENCH_OK) c->err = forced;
    if (k == BENCH_OK && cc != CURLE_OK) {
        k = map_curl(cc);
        if (rec->http_status && rec->http_status != 200 && k == BENCH_ERR_RESET) k = BENCH_OK;
        if (k != BENCH_OK)
            snprintf(c->msg, sizeof c->msg, "%.100s%s%.140s", curl_easy_strerror(cc),
                     c->curl_err[0] ? ": " : "", c->curl_err);
    }
    if (k == BENCH_OK && rec->http_status != 200) {
        k = rec->http_status >= 400 && rec->http_status < 500 ? BENCH_ERR_HTTP_4XX
                                                              : BENCH_ERR_HTTP_5XX;
        http_error_msg(c, rec->http_status);
    }
    if (k == BENCH_OK && !c->is_sse) {
        finish_json_body(c, rec);
        k = c->err;
    }
    if (k == BENCH_OK && !c->done) {
        k = BENCH_ERR_TRUNCATED;
        snprintf(c->msg, sizeof c->msg, "the stream ended without [DONE]%s",
                 sse_reader_pending(&c->sse) ? " (in the middle of an event)" : "");
    }
    return k;
}

/* The request's output and prompt token counts, from the best source it has. */
static void count_tokens(run_state *r, conn *c, bench_record *rec, bool ok) {
    /* One token per event, empty-text ones included, when usage says
     * exactly that: llama.cpp's server streams a token whose bytes are not
     * yet UTF-8 as an event with empty text, and those arrivals are its ITL. */
    tps_err e;
    if (rec->has_usage && ok && !c->saw_ids && c->n_held &&
        rec->usage_completion == rec->stream_tokens + c->n_held &&
        timeline_insert_tokens(&rec->tl, c->held, c->n_held, &e) == TPS_OK) {
        rec->stream_tokens += c->n_held;
        rec->held_tokens = c->n_held;
        r->out_tokens += c->n_held;
    }
    /* the count: usage > ids in the stream > re-tokenized text > events */
    if (rec->has_usage && ok) {
        timeline_set_output_tokens(&rec->tl, rec->usage_completion, TL_COUNT_USAGE, &e);
    } else if (c->saw_ids) {
        timeline_set_count_source(&rec->tl, TL_COUNT_STREAM_IDS);
    } else {
        int64_t n = c->text_len ? workload_count_tokens(r->wl, c->text, c->text_len) : -1;
        if (n >= 0 && ok)
            timeline_set_output_tokens(&rec->tl, (uint64_t)n, TL_COUNT_RETOKENIZED, &e);
        else
            timeline_set_count_source(&rec->tl, TL_COUNT_EVENTS);
    }
    uint64_t prompt = rec->has_usage ? rec->usage_prompt
                      : rec->has_timings && rec->timings.prompt_tokens > 0
                          ? (uint64_t)rec->timings.prompt_tokens
                          : rec->input_client;
    timeline_set_prompt_tokens(&rec->tl, prompt);
}

/* The loop's counters, for the progress line another thread prints. */
static void publish_progress(run_state *r) {
    atomic_store_explicit(&r->prog->completed, r->completed, memory_order_relaxed);
    atomic_store_explicit(&r->prog->failed, r->failed, memory_order_relaxed);
    atomic_store_explicit(&r->prog->out_tokens, r->out_tokens, memory_order_relaxed);
    atomic_store_explicit(&r->prog->in_flight, r->n_conns - r->n_free, memory_order_relaxed);
}

/* Settles the request on conn c: its error kind, end time and token count. */
static void finish(run_state *r, conn *c, CURLcode cc, bench_errkind forced, uint64_t now) {
    bench_record *rec = &r->recs[c->rec];
    curl_multi_remove_handle(r->multi, c->easy);
    const bench_errkind k = settle_error(c, rec, cc, forced);
    rec->err = k;
    if (k != BENCH_OK) rec->err_msg = strdup(c->msg[0] ? c->msg : bench_err_name(k));
    uint64_t end = c->t_last_byte ? c->t_last_byte : now;
    timeline_finish(&rec->tl, end, k == BENCH_OK);
    count_tokens(r, c, rec, k == BENCH_OK);
    if (r->multi_turn) {
        const workload_item *it = &r->wl->items[rec->item];
        uint64_t turn_tokens = it->input_tokens ? it->input_tokens + rec->tl.output_tokens : 0;
        convo_settled(&r->convos, rec->conversation, k == BENCH_OK, c->reply, c->reply_len,
                      turn_tokens, now);
    }
    if (k == BENCH_OK)
        r->completed++;
    else if (k != BENCH_ERR_CANCELLED)
        r->failed++;
    if (r->cfg->verbose && k != BENCH_OK)
        fprintf(stderr, "tps bench: request %llu: %s: %s\n", (unsigned long long)rec->seq,
                bench_err_name(k), rec->err_msg);
    c->busy = false;
    r->free_list[r->n_free++] = (size_t)(c - r->conns);
    publish_progress(r);
}

/* Requests over --timeout or silent for --idle-timeout. */
static void check_timeouts(run_state *r, uint64_t now) {
    const uint64_t tmo = (uint64_t)(r->cfg->timeout_s * 1e9);
    const uint64_t idle = (uint64_t)(r->cfg->idle_timeout_s * 1e9);
    for (size_t i = 0; i < r->n_conns; i++) {
        conn *c = &r->conns[i];
        if (!c->busy) continue;
        uint64_t sent = r->recs[c->rec].tl.t_sent;
        uint64_t last = c->t_last_byte ? c->t_last_byte : sent;
        if (tmo && now - sent > tmo) {
            snprintf(c->msg, sizeof c->msg, "no complete response within --timeout %.3g s",
                     r->cfg->timeout_s);
            finish(r, c, CURLE_OK, BENCH_ERR_TIMEOUT, now);
        } else if (idle && now - last > idle) {
            bool none = !c->t_first_byte;
            snprintf(c->msg, sizeof c->msg, "%s for --idle-timeout %.3g s",
                     none ? "no response byte" : "the stream went silent", r->cfg->idle_timeout_s);
            finish(r, c, CURLE_OK, none ? BENCH_ERR_NO_RESPONSE : BENCH_ERR_STALL, now);
        }
    }
}

/* ---- curl's socket API on epoll -------------------------------------------------------- */

/* curl says which events it wants on a socket; epoll watches them. */
static int on_socket(CURL *easy, curl_socket_t s, int what, void *ud, void *sockp) {
    (void)easy;
    run_state *r = ud;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(r->epfd, EPOLL_CTL_DEL, s, NULL);
        curl_multi_assign(r->multi, s, NULL);
        return 0;
    }
    struct epoll_event ev = {.events = (what & CURL_POLL_IN ? EPOLLIN : 0u) |
                                       (what & CURL_POLL_OUT ? EPOLLOUT : 0u),
                             .data.fd = s};
    if (sockp || epoll_ctl(r->epfd, EPOLL_CTL_ADD, s, &ev) != 0)
        epoll_ctl(r->epfd, EPOLL_CTL_MOD, s, &ev);
    if (!sockp) curl_multi_assign(r->multi, s, r);
    return 0;
}

/* curl's one timer: when it next wants curl_multi_socket_action(TIMEOUT). */
static int on_timer(CURLM *m, long ms, void *ud) {
    (void)m;
    run_state *r = ud;
    r->timer_ns = ms < 0 ? UINT64_MAX : tps_now_ns() + (uint64_t)ms * TPS_NS_PER_MS;
    return 0;
}

static void curl_timeout_action(run_state *r, uint64_t now) {
    if (r->timer_ns > now) return;
    r->timer_ns = UINT64_MAX;
    int running = 0;
    curl_multi_socket_action(r->multi, CURL_SOCKET_TIMEOUT, 0, &running);
}

/* One pass: wait up to ms for sockets, let curl read every ready one (each
 * chunk stamped as it is delivered), then parse what came. */
static void socket_pass(run_state *r, int ms) {
    int n = epoll_wait(r->epfd, r->evs, (int)r->n_conns + 1, ms);
    for (int i = 0; i < n; i++) {
        uint32_t ev = r->evs[i].events;
        int mask = (ev & (EPOLLIN | EPOLLHUP | EPOLLRDHUP) ? CURL_CSELECT_IN : 0) |
                   (ev & EPOLLOUT ? CURL_CSELECT_OUT : 0) | (ev & EPOLLERR ? CURL_CSELECT_ERR : 0);
        int running = 0;
        curl_multi_socket_action(r->multi, r->evs[i].data.fd, mask, &running);
    }
    parse_pending(r);
}

/* ---- the loop ------------------------------------------------------------------------------ */

static double thread_cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static int setup(run_state *r, tps_err *e) {
    const bench_config *cfg = r->cfg;
    size_t blen = strlen(cfg->base_url);
    while (blen && cfg->base_url[blen - 1] == '/')
        blen--;
    if (blen >= 3 && !strncmp(cfg->base_url + blen - 3, "/v1", 3)) blen -= 3;
    const char *path = bench_endpoint_path(cfg->endpoint);
    r->url = malloc(blen + strlen(path) + 1);
    if (!r->url) return tps_fail(e, TPS_ENOMEM, "out of memory");
    memcpy(r->url, cfg->base_url, blen);
    strcpy(r->url + blen, path);

    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    h = curl_slist_append(h, "Accept: text/event-stream");
    h = curl_slist_append(h, "Expect:"); /* no 100-continue round trip */
    if (cfg->api_key) {
        char a[1024];
        snprintf(a, sizeof a, "Authorization: Bearer %s", cfg->api_key);
        h = curl_slist_append(h, a);
    }
    for (size_t i = 0; i < cfg->n_headers; i++)
        h = curl_slist_append(h, cfg->headers[i]);
    r->hdrs = h;
    if (!h) return tps_fail(e, TPS_ENOMEM, "out of memory");

    r->timer_ns = UINT64_MAX;
    r->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (r->epfd < 0) return tps_fail(e, TPS_EIO, "epoll_create1 failed");
    r->multi = curl_multi_init();
    if (!r->multi) return tps_fail(e, TPS_EIO, "curl_multi_init failed");
    curl_multi_setopt(r->multi, CURLMOPT_MAXCONNECTS, (long)r->n_conns);
    curl_multi_setopt(r->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_NOTHING);
    curl_multi_setopt(r->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(r->multi, CURLMOPT_SOCKETDATA, r);
    curl_multi_setopt(r->multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(r->multi, CURLMOPT_TIMERDATA, r);

    r->conns = calloc(r->n_conns, sizeof *r->conns);
    r->free_list = malloc(r->n_conns * sizeof *r->free_list);
    r->pending = malloc(r->n_conns * sizeof *r->pending);
    r->evs = malloc((r->n_conns + 1) * sizeof *r->evs);
    if (!r->conns || !r->free_list || !r->pending || !r->evs)
        return tps_fail(e, TPS_ENOMEM, "cannot allocate connections");
    for (size_t i = 0; i < r->n_conns; i++) {
        conn *c = &r->conns[i];
        c->run = r;
        int rc = sse_reader_init(&c->sse, SSE_EVENT_MAX, e);
        if (rc) return rc;
        c->easy = curl_easy_init();
        if (!c->easy) return tps_fail(e, TPS_EIO, "curl_easy_init failed");
        CURL *x = c->easy;
        curl_easy_setopt(x, CURLOPT_URL, r->url);
        curl_easy_setopt(x, CURLOPT_HTTPHEADER, r->hdrs);
        curl_easy_setopt(x, CURLOPT_POST, 1L);
        curl_easy_setopt(x, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(x, CURLOPT_WRITEDATA, c);
        curl_easy_setopt(x, CURLOPT_PRIVATE, c);
        curl_easy_setopt(x, CURLOPT_ERRORBUFFER, c->curl_err);
        curl_easy_setopt(x, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(x, CURLOPT_TCP_NODELAY, 1L);
        curl_easy_setopt(x, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
        curl_easy_setopt(x, CURLOPT_CONNECTTIMEOUT_MS, (long)(cfg->connect_timeout_s * 1000));
        curl_easy_setopt(x, CURLOPT_BUFFERSIZE, 64L * 1024);
        if (cfg->insecure) {
            curl_easy_setopt(x, CURLOPT_SSL_VERIFYPEER, 0L);
            curl_easy_setopt(x, CURLOPT_SSL_VERIFYHOST, 0L);
        }
        r->free_list[r->n_free++] = r->n_conns - 1 - i;
    }
    return TPS_OK;
}

static void teardown(run_state *r) {
    for (size_t i = 0; r->conns && i < r->n_conns; i++) {
        conn *c = &r->conns[i];
        if (c->easy) {
            if (c->busy) curl_multi_remove_handle(r->multi, c->easy);
            curl_easy_cleanup(c->easy);
        }
        sse_reader_free(&c->sse);
        free(c->inbox);
        free(c->marks);
        free(c->held);
        free(c->body);
        free(c->text);
        free(c->reply);
        free(c->send_body);
        curl_slist_free_all(c->session_hdrs);
    }
    free(r->conns);
    free(r->free_list);
    free(r->pending);
    free(r->evs);
    if (r->multi) curl_multi_cleanup(r->multi);
    if (r->epfd > 0) close(r->epfd);
    curl_slist_free_all(r->hdrs);
    free(r->url);
    convo_set_free(&r->convos);
}

/* When and what to send next. */
typedef struct sender {
    bool sending; /* false once nothing more will be sent */
    bool open_loop;
    uint64_t t0, dur; /* the run's start; --duration in ns (0: none) */
    uint64_t k;       /* open loop: the number of this loop's next arrival */
    uint64_t next_sched;
    tps_rng rng;
} sender;

/* When item i of a timed workload (a trace) is due. */
static uint64_t trace_time_ns(const sender *s, const workload *wl, size_t i) {
    double at = wl->items[i].send_at_s;
    return s->t0 + (at > 0 ? (uint64_t)(at * 1e9) : 0);
}

/* Open loop: on by `steps` arrivals of the run's one schedule (a loop owns
 * every n_loops-th), then whether sending goes on. */
static void advance_arrivals(const run_state *r, sender *s, uint64_t steps) {
    const bench_config *cfg = r->cfg;
    for (uint64_t i = 0; i < steps; i++) {
        s->k++;
        if (r->wl->timed) /* a trace: each item once, at its own time */
            s->next_sched = s->k < r->wl->n ? trace_time_ns(s, r->wl, s->k) : UINT64_MAX;
        else
            s->next_sched += load_next_gap_ns(cfg->arrival, cfg->rate, cfg->burstiness, &s->rng);
    }
    if (r->planned && s->k >= r->planned) s->sending = false;
    if (s->dur && s->next_sched - s->t0 >= s->dur) s->sending = false;
}

/* Sends what is due at now: a closed loop fills every free slot, an open
 * loop follows its schedule, a multi-turn run sends the next turn of each
 * conversation that may go. */
static int send_due(run_state *r, sender *s, uint64_t now, tps_err *e) {
    if (s->sending && s->dur && now - s->t0 >= s->dur) s->sending = false;
    if (atomic_load_explicit(&r->sh->stop, memory_order_relaxed)) s->sending = false;
    while (s->sending && r->n_free > 0) {
        int rc;
        if (r->multi_turn) {
            size_t conv;
            if (r->planned && r->n_recs >= r->planned) break;
            if (!convo_next(&r->convos, now, &conv)) break;
            rc = launch_turn(r, conv, e);
        } else if (s->open_loop) {
            if (s->next_sched > now) break;
            rc = launch(r, s->k, s->next_sched, e);
            advance_arrivals(r, s, r->sh->n_loops);
        } else {
            uint64_t seq = atomic_fetch_add_explicit(&r->sh->next_seq, 1, memory_order_relaxed);
            if (r->planned && seq >= r->planned) {
                s->sending = false;
                break;
            }
            rc = launch(r, seq, UINT64_MAX, e);
        }
        if (rc) return rc;
    }
    if (r->multi_turn && ((r->planned && r->n_recs >= r->planned) || convo_all_ended(&r->convos)))
        s->sending = false;
    return TPS_OK;
}

/* How long the loop may wait for sockets: until the next scheduled send,
 * the next conversation's end of thinking or curl's timer, at most 20 ms;
 * 0 when a closed loop has a free slot to fill. */
static int wait_ms(const run_state *r, const sender *s, uint64_t now) {
    uint64_t next = now + 20 * TPS_NS_PER_MS;
    if (s->sending && r->n_free > 0) {
        uint64_t due = r->multi_turn  ? convo_next_ready_ns(&r->convos)
                       : s->open_loop ? s->next_sched
                                      : now;
        if (due < next) next = due;
    }
    if (r->timer_ns < next) next = r->timer_ns;
    if (next <= now) return 0;
    return (int)((next - now + TPS_NS_PER_MS - 1) / TPS_NS_PER_MS);
}

/* A multi-turn run: its conversations, and requests = the sum of their
 * turns, conversations x turns for a synthetic workload (or fewer with
 * --requests). Session ids start with a tag of this run, so
 * load generators running at once do not share sessions. */
static int setup_turns(run_state *r, int64_t unix_ns, tps_err *e) {
    const workload *wl = r->wl;
    r->multi_turn = true;
    char tag[32];
    snprintf(tag, sizeof tag, "tps-%08llx",
             (unsigned long long)(((uint64_t)unix_ns ^ ((uint64_t)getpid() << 20)) & 0xffffffffu));
    int rc = convo_set_init(&r->convos, wl->conversations, wl->turns, r->cfg->think_time_s, tag, e);
    r->planned = 0; /* a dataset's conversations may have fewer turns */
    for (size_t i = 0; rc == TPS_OK && i < wl->conversations; i++) {
        convo_set_turns(&r->convos, i, workload_conv_turns(wl, i));
        r->planned += r->convos.c[i].turns;
    }
    if (r->cfg->requests && r->cfg->requests < r->planned) r->planned = r->cfg->requests;
    return rc;
}

/* Requests that ended: settle each. */
static void reap(run_state *r, uint64_t now) {
    CURLMsg *m;
    int q;
    while ((m = curl_multi_info_read(r->multi, &q))) {
        if (m->msg != CURLMSG_DONE) continue;
        conn *c = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&c);
        finish(r, c, m->data.result, BENCH_OK, now);
    }
}

int bench_loop_new(bench_loop **out, bench_shared *sh, uint32_t index, uint32_t conns,
                   bench_loop_progress *prog, tps_err *e) {
    *out = NULL;
    run_state *r = calloc(1, sizeof *r);
    if (!r) return tps_fail(e, TPS_ENOMEM, "out of memory");
    *r = (run_state){.cfg = sh->cfg,
                     .wl = sh->wl,
                     .sh = sh,
                     .index = index,
                     .prog = prog,
                     .epfd = -1,
                     .n_conns = conns,
                     .planned = sh->planned};
    int rc = setup(r, e);
    if (!rc && sh->wl->turns) rc = setup_turns(r, sh->t0_unix_ns, e);
    if (rc) {
        bench_loop_free(r);
        return rc;
    }
    *out = r;
    return TPS_OK;
}

int bench_loop_run(bench_loop *lp, tps_err *e) {
    run_state *r = lp;
    const bench_config *cfg = r->cfg;
    const workload *wl = r->wl;
    const double cpu0 = thread_cpu_s();
    const uint64_t t0 = r->sh->t0;
    sender s = {.sending = true, .open_loop = cfg->rate > 0 || wl->timed, .t0 = t0};
    tps_rng_seed(&s.rng, cfg->seed);
    s.dur = cfg->duration_s > 0 ? (uint64_t)(cfg->duration_s * 1e9) : 0;
    s.next_sched = wl->timed ? trace_time_ns(&s, wl, 0) : t0;
    if (s.open_loop) advance_arrivals(r, &s, r->index); /* this loop's first arrival */
    const uint64_t tmo = (uint64_t)((cfg->timeout_s > 0 ? cfg->timeout_s : 600) * 1e9);
    /* requests alone bound the run by requests x timeout; duration by duration + timeout */
    uint64_t last_check = t0;
    int rc = TPS_OK;

    for (;;) {
        uint64_t now = tps_now_ns();
        if ((rc = send_due(r, &s, now, e))) break;
        curl_timeout_action(r, now);
        parse_pending(r);
        now = tps_now_ns();
        reap(r, now);
        if (now - last_check >= 10 * TPS_NS_PER_MS) {
            check_timeouts(r, now);
            last_check = now;
            publish_progress(r);
        }
        if (!s.sending && r->n_free == r->n_conns) break;
        if (s.dur && now - t0 >= s.dur + tmo) { /* safety net: the run ends on time */
            for (size_t i = 0; i < r->n_conns; i++)
                if (r->conns[i].busy) {
                    snprintf(r->conns[i].msg, sizeof r->conns[i].msg,
                             "still running at duration + timeout");
                    finish(r, &r->conns[i], CURLE_OK, BENCH_ERR_CANCELLED, now);
                }
            r->hit_deadline = true;
            break;
        }
        socket_pass(r, wait_ms(r, &s, now));
        reap(r, tps_now_ns());
    }
    if (rc) atomic_store(&r->sh->stop, true);
    r->t_stop = tps_now_ns();
    r->cpu_s = thread_cpu_s() - cpu0;
    return rc;
}

void bench_loop_take(bench_loop *lp, bench_run_out *out) {
    run_state *r = lp;
    memset(out, 0, sizeof *out);
    out->recs = r->recs;
    out->n = r->n_recs;
    r->recs = NULL;
    r->n_recs = r->cap_recs = 0;
    out->t_start_ns = r->sh->t0;
    out->t_start_unix_ns = r->sh->t0_unix_ns;
    out->t_stop_ns = r->t_stop;
    out->client_cpu_s = r->cpu_s;
    out->client_loops = 1;
    out->client_loop_cpu_max_s = r->cpu_s;
    out->bytes_received = r->bytes;
    out->events_received = r->events;
    out->hit_deadline = r->hit_deadline;
}

void bench_loop_free(bench_loop *lp) {
    run_state *r = lp;
    if (!r) return;
    teardown(r);
    for (size_t i = 0; i < r->n_recs; i++)
        bench_record_free(&r->recs[i]);
    free(r->recs);
    free(r);
}
