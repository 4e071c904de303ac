/* The http room's exports to the room above (serve/): the server struct,
 * one open connection (conn_slot), and the functions of the connection
 * table (server_conn.c), admission (server_admit.c) and whole replies
 * (server_reply.c). The struct is the whole server's, one object: each
 * part names the file that keeps it up to date, and the parts kept in
 * serve/ (the worker pool, requests in flight) are pointers to types
 * serve.h defines. Everything here is touched only by the HTTP thread,
 * except the fields marked otherwise.
 *
 * Not here: requests, their bodies and their answers (serve/serve.h). */
#ifndef TPS_SERVER_HTTP_H
#define TPS_SERVER_HTTP_H

#include <pthread.h>
#include <stdatomic.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <sys/socket.h>

#include "base/rng.h"
#include "base/sbuf.h"
#include "constrain/constrain.h"
#include "metrics/hist.h"
#include "metrics/roofline.h"
#include "model/llama_model.h"
#include "model/tokenizer.h"
#include "server/api/openai.h"
#include "server/chat/chat_prompt.h"
#include "server/http/http_frame.h"
#include "server/http/server.h"
#include "server/http/server_window.h"
#include "server/write/response_store.h"

#define SERVER_FLUSH_MAX_MS   2000 /* at exit, how long unsent output may take */
#define SERVER_RESERVED_CONNS 8    /* beyond --max-connections, for /health and /metrics only */
#define SERVER_FD_RESERVE     64   /* descriptors kept for all but connections (open-file limit) */
#define SERVER_FD_CLOSING     16   /* of the rest, kept for connections being closed */
#define SERVER_ROUTES_MAX     16   /* rows of the route table (serve/server_http.c) */

/* A connection's class, decided by its first request line
 * (server_admit.c): none yet, a general slot, or a reserved one. */
enum { CONN_NEW = 0, CONN_GENERAL = 1, CONN_PROBE = 2 };

/* One open connection (server_conn.c): tracked so the server can count
 * them, frame their bytes before evhttp does, bound how long a request may
 * take to arrive, decide its class, and release them. Allocated on its
 * own: the input buffer's callback holds its address. */
typedef struct conn_slot {
    server *s;
    struct bufferevent *bev;      /* we hold one reference */
    struct evbuffer_cb_entry *cb; /* on_input, on the input buffer */
    uint64_t deadline_ns;         /* a request must have arrived by then; 0: one is being served */
    uint64_t head_deadline_ns;    /* its header block must be whole by then; 0: none due */
    uint64_t close_ns;            /* refused: closed by then if the client has not */
    uint64_t born_ns;             /* accepted */
    uint64_t idle_ns;             /* its last answer went out */
    bool nodelay;                 /* TCP_NODELAY set on its socket */
    bool busy;                    /* a request on it is being answered */
    bool peer_known;              /* its peer address is read (server_admit_accepted) */
    bool spoke;                   /* a byte of it has arrived */
    int klass;                    /* CONN_NEW, CONN_GENERAL, CONN_PROBE */
    bool refused;                 /* answered with an error (or shed); input dropped; closing */
    bool probed;                  /* an EOF while answering was probed (server_check_gone) */
    struct sockaddr_storage peer; /* the client's address */
    http_frame frame;             /* our framing of its bytes */
} conn_slot;

/* Kept in serve/ (serve.h): the worker pool, a request in flight. */
typedef struct server_work server_work;
typedef struct req_ctx req_ctx;

/* Histograms recorded in the HTTP thread (ns), plus step histograms merged
 * from the engine at scrape time. */
typedef struct server_hists {
    hist *ttft, *itl, *e2e, *queue, *prefill, *decode;
    hist *step_ns, *step_tokens; /* scratch for engine_merge_step_hists */
} server_hists;

/* Grouped by the file that keeps each part up to date (server.c creates and
 * frees them all; the other files only read what is not theirs). */
struct server {
    /* server.c: configuration, the loop, the model, drain and stop */
    server_config cfg; /* strings below point into owned copies */
    char *host, *api_key, *chat_template_name, *chat_template_file, *model_path, *model_id;
    char **cors_origins, **allowed_hosts; /* NULL-ended copies */
    bool loopback;                        /* bound to a loopback address: Host is checked */
    FILE *log;

    struct event_base *base;
    struct evhttp *http;
    struct evhttp_bound_socket *bound;
    struct evconnlistener *listener; /* borrowed from bound */
    int port;
    struct event *ev_engine, *ev_signal, *ev_sweep, *ev_wake, *ev_drain_deadline, *ev_flush;
    struct event *ev_classify; /* activated at each accept: server_conns_on_accept */
    pthread_t thread;
    bool thread_started;
    int loop_rc;

    /* Set by server_load (another thread) before `ready` is released. */
    llama_model *model;
    tokenizer *tok;
    engine *eng;
    chat_prompt prompt;       /* the chat template(s), compiled; read-only once ready */
    int32_t tmpl_eot_id;      /* the template's end-of-turn as one non-EOG token; -1: none */
    bool tmpl_eot_as_stop;    /* the end-of-turn is no single token: a stop string */
    chat_reasoning reasoning; /* how chat answers' thinking is split out: <think> blocks
                                 (engine/sample/think.h) or harmony channels (harmony.h) */
    int32_t think_open_id, think_close_id; /* "<think>", "</think>" as one token; -1: none */
    machine_limits machine;                /* this machine's limits (tps machine); zeros: unknown */
    server_window bw_window; /* the step window /metrics reads machine against (server_window.h) */
    grammar_cache *grammars; /* compiled grammars and their memory budget (any thread) */
    size_t cursor_bytes;     /* one constrained choice's recognizer (reserved per choice) */
    char *calibration_out;   /* --save-calibration (server_calib.c) */
    struct server_calib *calib; /* its running fit and sample (server_calib.c), written by
                                   the engine thread */
    atomic_bool ready;
    uint64_t admin_last_ns; /* server_http.c: the last /reset_prefix_cache served */

    /* Requests from other threads: drain / stop. */
    atomic_int want; /* 0 none, 1 drain, 2 stop */
    bool draining, stopping;

    /* server_conn.c: the connection table and the final flush */
    conn_slot **conns;
    size_t n_conns, cap_conns;
    bool accept_paused;
    /* server_admit.c: the open-file limit, accept() failures, shedding */
    uint32_t fd_limit, fd_cap; /* RLIMIT_NOFILE's soft limit; the table's most connections */
    bool accept_backoff;       /* accept() failed: paused until ev_accept_retry */
    bool accept_logged;        /* this episode of failures is in the log */
    uint64_t accept_pause_ms, accept_errors;
    struct event *ev_accept_retry;
    uint64_t conns_shed; /* connections closed to make room */
    bool flushing;
    uint64_t flush_deadline_ns;

    /* server_work.c: the worker pool */
    server_work *work;
    uint32_t n_jobs; /* bodies with the workers */

    /* server_stream.c: requests in flight, engine events, the request
     * histograms (server_metrics.c creates them, and fills the step ones at
     * each scrape) */
    req_ctx *inflight; /* list head */
    uint32_t n_inflight;
    server_hists h;
    engine_event *events;  /* SERVER_POLL_BATCH */
    struct evbuffer *wbuf; /* staging for chunk writes (emptied by each write) */
    uint64_t next_id;
    tps_rng seed_rng; /* seeds for requests that name none; seeded from the OS at create */

    /* server_http.c: requests by route (SERVER_ROUTES_MAX rows, the route
     * table's order; it writes them into /metrics); server_prepare.c: fields dropped under
     * --unknown-fields ignore, and the requests that had any */
    uint64_t route_requests[SERVER_ROUTES_MAX];
    uint64_t ignored_fields, ignored_requests;
    /* server_stream.c: complete tool calls answered, and those whose
     * arguments failed their tool's schema (tools.h's tool_event.valid) */
    uint64_t tool_calls, tool_calls_invalid;
    response_store *store; /* server.c: the Responses API's store (thread-safe) */
};

/* server_reply.c: whole answers; the request is finished (and may be
 * freed) after each */
void server_reply(server *s, struct evhttp_request *req, int status, const char *ctype,
                  const char *body, size_t len);
void server_reply_json(server *s, struct evhttp_request *req, int status, const sbuf *b);
void server_reply_error(server *s, struct evhttp_request *req, const oai_error *e);
void server_reply_err(server *s, struct evhttp_request *req, int status, const char *type,
                      const char *param, const char *code, const char *msg);
/* 503 while loading; true when the request was answered (what /v1/models
 * and /metrics check: a draining server still answers them). */
bool server_reply_loading(server *s, struct evhttp_request *req);
/* 503 while loading or draining; true when the request was answered. */
bool server_reply_unavailable(server *s, struct evhttp_request *req);

/* server_conn.c: the connection table */
struct bufferevent *server_conn_new_bev(struct event_base *base, void *arg);
void server_conns_on_accept(evutil_socket_t fd, short what, void *arg);
/* Marks req's connection busy (no arrival deadline) or idle again; its slot. */
conn_slot *server_conn_busy(server *s, struct evhttp_request *req, bool busy);
/* The slot of req's connection; NULL when untracked or gone. */
conn_slot *server_conn_of(server *s, struct evhttp_request *req);
/* After each write evhttp is asked for on c: the socket is not read while
 * the answer is written, so that a client's half-close (an EOF) does not
 * make evhttp drop the connection; NULL is ignored. */
void server_conn_guard(conn_slot *c);
/* evhttp has freed c's connection (its callbacks are gone): only our slot's
 * reference keeps the socket open. */
bool server_conn_released(const conn_slot *c);
/* Drops freed connections' slots (all: every slot) and enforces the
 * header, request and close deadlines of the rest. */
void server_conns_sweep(server *s, bool all);
bool server_conns_output_pending(server *s);
uint32_t server_conns_open(server *s);
/* server_admit.c: admission */
uint32_t server_conns_per_client(const server *s);
/* The socket of conn, peeked (evhttp reads nothing while it answers): 1
 * its client may be there, 0 an EOF (a half-close, or it left: ask
 * server_conn_probe_eof), -1 it is gone; *fd its socket. */
int server_conn_peek(struct evhttp_connection *conn, evutil_socket_t *fd);
/* After an EOF on c's socket fd while nothing of its answer is out: true
 * while its client may still be there. The first call writes a "100
 * Continue" (which a client that left answers with a reset), a later one
 * reads whether that reset came. */
bool server_conn_probe_eof(conn_slot *c, evutil_socket_t fd);
/* Frees a slot (our reference on its bufferevent with it). */
void server_conn_slot_free(conn_slot *c);
/* Answers status (0: none, just close) with the message fmt makes and
 * closes c. */
void server_conn_refuse(conn_slot *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* c was accepted and has its socket: room is made for it, or it is refused. */
void server_admit_accepted(server *s, conn_slot *c);
/* c's request has begun (its first byte): false when its address already
 * has its share of requests under way (refused 429). */
bool server_admit_start(conn_slot *c);
/* c's request line is known (c->frame at HEAD): its class; false when refused. */
bool server_admit_request(conn_slot *c);
/* Pauses or resumes the listener; just_accepted: a connection was added. */
void server_update_accept(server *s, bool just_accepted);
/* The open-file limit: fd_cap, --max-connections lowered to fit; logged. */
void server_admit_limits(server *s);
void server_on_accept_error(struct evconnlistener *l, void *arg);
void server_on_accept_retry(evutil_socket_t fd, short what, void *arg);
/* Keeps ev_accept_retry pending (server_on_accept_error finds the server by it). */
void server_arm_accept_retry(server *s);
/* server_conn.c: the end of a drain (flush, then the loop exits) */
void server_maybe_finish_drain(server *s);
void server_conns_on_flush(evutil_socket_t fd, short what, void *arg);

#endif
