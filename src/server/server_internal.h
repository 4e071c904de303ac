/* Private to src/server/server*.c: the server struct, the per-request
 * context, and the functions the server files call across each other.
 * Everything here is touched only by the HTTP thread, except the fields
 * marked otherwise. */
#ifndef TPS_SERVER_INTERNAL_H
#define TPS_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>

#include "base/rng.h"
#include "constrain/constrain.h"
#include "metrics/hist.h"
#include "metrics/roofline.h"
#include "model/llama_model.h"
#include "model/tokenizer.h"
#include <sys/socket.h>

#include "server/chat_prompt.h"
#include "server/chat_template.h"
#include "server/harmony.h"
#include "server/http_frame.h"
#include "server/openai.h"
#include "server/prom_write.h"
#include "base/sbuf.h"
#include "server/server.h"
#include "server/server_window.h"
#include "server/sse_write.h"
#include "server/api_write.h"
#include "server/response_store.h"

#define SERVER_POLL_BATCH      64   /* engine events taken per engine_poll */
#define SERVER_POLLS_PER_TURN  8    /* bounded work per loop turn: 512 events */
#define SERVER_SWEEP_MS        100  /* connection sweep period */
#define SERVER_FLUSH_MAX_MS    2000 /* at exit, how long unsent output may take */
#define SERVER_STOP_MS         2000 /* a stop: how long cancelled requests may take to be answered */
#define SERVER_RESERVED_CONNS  8    /* beyond --max-connections, for /health and /metrics only */
#define SERVER_FD_RESERVE      64   /* descriptors kept for all but connections (open-file limit) */
#define SERVER_FD_CLOSING      16   /* of the rest, kept for connections being closed */
#define SERVER_WORKERS         2    /* threads preparing request bodies (server_work.c) */
#define SERVER_WORK_QUEUE      32   /* large bodies waiting for a worker; more get 429 */
#define SERVER_ADMIN_PERIOD_MS 1000 /* /reset_prefix_cache: at most one per period (429) */
#define SERVER_ROUTES_MAX      16   /* rows of the route table (server_http.c) */
#define SERVER_SMALL_BODY                                                                          \
    (64u << 10) /* bodies up to this always queue (connections bound                               \
                   them); every body is prepared on a worker */

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

/* What a body is prepared for. */
typedef enum work_kind {
    WORK_COMPLETION,
    WORK_CHAT,
    WORK_TOKENIZE,
    WORK_DETOKENIZE,
    WORK_APPLY_TEMPLATE, /* POST /apply-template: the rendered prompt, nothing run */
    WORK_RESPONSES,      /* POST /v1/responses (api_responses.h) */
    WORK_MESSAGES,       /* POST /v1/messages (api_messages.h) */
    WORK_COUNT_TOKENS,   /* POST /v1/messages/count_tokens: the rendered prompt's tokens */
} work_kind;

/* One request body's preparation: parsed, rendered and tokenized by
 * server_work_prepare on a worker (never on the HTTP thread: a template
 * can be slow), then answered or submitted by server_work_finish on the
 * HTTP thread. */
typedef struct work_job {
    struct work_job *next;
    struct work_job *hprev, *hnext; /* HTTP thread: the jobs with the workers */
    atomic_bool cancel;             /* set by the HTTP thread (the client left, a drain or
                                       stop): the worker abandons the job */
    server *s;
    work_kind kind;
    struct evhttp_request *req;     /* HTTP thread only; NULL once the client is gone */
    struct evhttp_connection *conn; /* HTTP thread only */
    struct evbuffer *body;          /* owned: the body, moved out of evhttp's buffer */
    bool large;                     /* the body is over SERVER_SMALL_BODY */
    /* results (written by prepare) */
    bool failed; /* e is the answer */
    oai_error e;
    oai_request r; /* completions: parsed */
    bool parsed;
    int32_t *ids; /* completions: the prompt's tokens (owned) */
    size_t n_ids;
    think_state think_text; /* chat: where the prompt's text leaves a <think> block */
    sbuf reply;             /* /tokenize, /detokenize: the 200 body */
    bool prepared;          /* the body is done (parsed, rendered, tokenized) */
    /* a constrained completion: its compiled grammar and the bytes reserved
     * for its choices' recognizers (grammar_cache_release gives both back),
     * handed to the req_ctx once submitted */
    constraint_prog *prog;
    size_t prog_reserve;
} work_job;

typedef struct server_work server_work;

/* A choice's reasoning splitter: <think> blocks (engine/think.h) or
 * harmony channels (harmony.h). */
typedef struct reason_split {
    bool harmony;
    think_split think;
    harmony_split h;
} reason_split;

/* One choice of a request (n of them, allocated with the req_ctx). */
typedef struct req_choice {
    sbuf text;            /* non-stream: the whole text */
    uint32_t n_tokens;    /* output tokens so far */
    uint64_t t_last_ns;   /* its previous token (ITL is per choice: one stream each) */
    engine_finish finish; /* valid once done */
    bool sent_role;       /* chat stream: its role chunk went out */
    bool done;            /* its DONE event came */
    uint32_t text_offset; /* bytes of text sent or kept so far (logprobs' text_offset) */
    sse_lp *lp;           /* non-stream with logprobs: one per token, owned */
    tool_stream *tstream; /* with tools: the answer's calls as they come (owned) */
    size_t n_lp, cap_lp;
    /* reasoning (chat, a model that thinks): where the text is, the
     * thinking kept for a non-streamed body, its tokens */
    reason_split split;
    sbuf reasoning;
    uint32_t n_reasoning; /* tokens of the thinking block, markers included */
    bool thought;         /* a thinking block opened */
} req_choice;

/* One request from its parse to its last byte (or the client's going). It
 * lives until the DONE event of its last choice, even when the client left
 * first: the engine holds its pointer (engine_request.user) until then. */
typedef struct req_ctx {
    struct req_ctx *prev, *next; /* the server's in-flight list */
    server *s;
    struct evhttp_request *req;     /* NULL once the client is gone */
    struct evhttp_connection *conn; /* NULL once the client is gone */
    conn_slot *slot;                /* conn's slot (NULL: untracked); valid while conn is set */
    uint64_t engine_id;
    sse_meta meta;
    char id[48];
    bool stream, include_usage;
    bool logprobs; /* each token's logprobs go out with it */
    /* tools offered (tool_choice not none): each choice's answer is parsed
     * for calls (in tfmt) when it is done; streamed, its text is held until
     * then */
    bool tools;
    tool_format tfmt;
    tool_set *tset; /* the request's functions, typing their parameters (owned) */
    /* reasoning: each choice's text is split by think.h (think != OFF) or
     * harmony.h (harmony) and returned as `reasoning` says */
    think_state think;
    bool harmony;
    oai_reasoning reasoning;
    uint64_t seed; /* the request's (choice i samples with seed + i) */
    bool client_gone;
    bool failed;        /* a choice ended cancelled or in error: the answer is an error */
    engine_finish fail; /* the first such finish */
    char fail_msg[256]; /* its engine message */
    uint32_t n_prompt;
    uint32_t n_tokens;  /* output tokens of all choices */
    uint32_t n_choices; /* n */
    uint32_t n_done;    /* choices whose DONE came */
    uint64_t t_start_ns;
    engine_timings timings; /* the request's: choices' timings merged as they finish */
    constraint_prog *prog;  /* its compiled grammar (a reference), released with it */
    size_t prog_reserve;    /* bytes reserved in s->grammars for its recognizers */
    /* A Responses or Messages request (NULL: chat or completions): its
     * events' writer state (owned), and Responses' store: the conversation
     * before the answer (a json_t array, owned) kept with it when store. */
    api_stream *api;
    void *history;
    bool store;
    sbuf out;            /* staging for each event */
    req_choice choice[]; /* n_choices */
} req_ctx;

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
                                 (engine/think.h) or harmony channels (harmony.h) */
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

/* The files call one way, top to bottom (no file calls one above it):
 *   server.c          lifecycle: create, start, load, drain, stop, free
 *   server_http.c     routes, browser checks, authentication
 *   server_work.c     the worker pool that prepares large bodies
 *   server_prepare.c  bodies: parse, render, tokenize; answer or submit
 *   server_stream.c   request contexts; engine events -> responses
 *   server_metrics.c  the /metrics page and the request histograms
 *   server_calib.c    --save-calibration: the step-cost model fitted while serving
 *   server_reply.c    whole answers and errors
 *   server_conn.c     the connection table and the final flush
 *   server_admit.c    admission: classes, limits, shedding, refusals */

/* server_http.c: the routes */
void server_http_route(struct evhttp_request *req, void *arg);

/* server_work.c: the worker pool */
int server_work_create(server *s, tps_err *err);
bool server_work_submit(server *s, work_job *j); /* false: the queue is full */
/* Detaches a job from its connection; before server_work_finish. */
void server_work_detach(work_job *j);
/* Every job with the workers is abandoned (a drain or stop: each would be
 * answered 503); the workers stop rendering them within a few hundred
 * template steps. */
void server_work_cancel_all(server *s);
/* Polls the sockets of jobs with the workers for a client that left (as
 * server_check_gone does for requests in flight) and abandons their jobs. */
void server_work_check_gone(server *s);
void server_work_free(server *s);

/* server_prepare.c: preparing bodies (a worker) and answering them (the
 * HTTP thread). server_work_prepare checks j->cancel between its phases
 * and the template render checks it every few hundred steps: a cancelled
 * job ends as a 503. */
void server_work_prepare(work_job *j);
void server_work_finish(work_job *j);
void server_work_job_free(work_job *j);

/* server_stream.c: request contexts, engine events -> responses */
void server_on_engine(evutil_socket_t fd, short what, void *arg);
req_ctx *req_ctx_new(server *s, struct evhttp_request *req, oai_kind kind, uint32_t n_choices);
void req_ctx_free(req_ctx *c);
void req_ctx_start(req_ctx *c);
void server_cancel_all(server *s, const char *why);
void server_check_gone(server *s);
/* A choice's splitter, set up for its request. */
void reason_split_init(reason_split *r, think_state think, bool harmony);

/* server_metrics.c: the /metrics page */
int server_hists_create(server_hists *h, tps_err *err);
void server_hists_free(server_hists *h);
void server_metrics_render(server *s, sbuf *out);

/* server_calib.c: --save-calibration. Before engine_create, the step
 * observer that fits every step; after engine_destroy, the file. */
int server_calib_begin(server *s, engine_params *ep, tps_err *err);
void server_calib_end(server *s);
/* After engine_create: the engine's warm-up into the fit, so that a plan
 * from the file primes its planner as this server's was. */
void server_calib_warmup(server *s);

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
/* Answers status (0: none, just close) with msg and closes c. */
void server_conn_refuse(conn_slot *c, int status, const char *msg);
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
