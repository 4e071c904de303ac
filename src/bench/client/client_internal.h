/* What the files of one event loop share (client_loop.h is what the pool
 * sees): a loop's state, its connection slots, and the calls between
 *   client.c         the loop: curl's socket API on epoll, when to send, setup
 *   client_send.c    a request's record and transfer started
 *   client_recv.c    chunks stamped on arrival, parsed after the pass
 *   client_finish.c  a request settled: error kind, token counts, timeouts
 *   client_conn.c    a connection's request as it is read (text, usage, error)
 *   client_record.c  records and error names (bench.h)
 * Calls go one way: client.c -> send, recv -> finish -> conn. One thread
 * per loop: nothing here is shared between loops. */
#ifndef TPS_BENCH_CLIENT_INTERNAL_H
#define TPS_BENCH_CLIENT_INTERNAL_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>

#include "bench/client/bench.h"
#include "bench/client/chunk.h"
#include "bench/client/client_loop.h"
#include "bench/client/sse_read.h"
#include "bench/workload/convo.h"

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
    bool queued;               /* on run->pending: its inbox holds bytes */
    bool checked;              /* status and content type looked at */
    bool is_sse;               /* 200 with text/event-stream */
    bool done;                 /* [DONE] seen */
    bool saw_ids;              /* token ids came in the stream */
    uint64_t reasoning_stream; /* thinking tokens the stream showed */
    bool has_reasoning_usage;  /* the server counted them (usage) */
    uint64_t reasoning_usage;
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
    bench_dialect dialect; /* how the endpoint's responses are read */
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

/* ---- a connection's request (client_conn.c) --------------------------------------------- */

/* Appends n bytes at p to the growable *b (len, cap); drops them when out of memory. */
void client_append(char **b, size_t *len, size_t *cap, const char *p, size_t n);
/* A chunk's text: all of it for re-tokenizing the output count, the reply's
 * content for a conversation's next turn. */
void client_keep_text(conn *c, const bench_chunk *ch);
/* What the server said about the request as a whole (usage, cached share, timings). */
void client_take_usage(conn *c, bench_record *rec, const bench_chunk *ch);
/* Records why the request failed (the first reason wins): prefix + detail. */
void client_set_err(conn *c, bench_errkind k, const char *prefix, const char *detail);

/* ---- receiving (client_recv.c) ---------------------------------------------------------- */

/* curl's write callback (ud: the conn): stamps, then queues the bytes. */
size_t client_on_data(char *p, size_t sz, size_t nm, void *ud);
/* After a pass: every inbox parsed, chunk by chunk with its stamp. */
void client_parse_pending(run_state *r);

/* ---- finishing (client_finish.c) -------------------------------------------------------- */

/* Settles the request on conn c (curl's code cc, or a forced end). */
void client_finish(run_state *r, conn *c, CURLcode cc, bench_errkind forced, uint64_t now);
/* Ends requests over --timeout or silent for --idle-timeout. */
void client_check_timeouts(run_state *r, uint64_t now);
/* The loop's counters, for the progress line another thread prints. */
void client_publish_progress(run_state *r);

/* ---- sending (client_send.c) ------------------------------------------------------------- */

int client_new_record(run_state *r, size_t *idx, uint64_t seq, uint32_t item, tps_err *e);
/* Puts request recs[idx] on free connection c with its body (borrowed). */
int client_start(run_state *r, conn *c, size_t idx, const char *body, size_t len,
                 struct curl_slist *hdrs, uint64_t sched_ns, tps_err *e);
/* Request number seq, single-turn: the workload's items in order, cycling. */
int client_launch(run_state *r, uint64_t seq, uint64_t sched_ns, tps_err *e);
/* Conversation conv's next turn, its body built now. */
int client_launch_turn(run_state *r, size_t conv, tps_err *e);

#endif
