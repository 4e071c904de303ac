/* Private to src/server/serve/: the request a body becomes (work_job,
 * prepared on a worker) and the request in flight (req_ctx, its choices),
 * and the functions the serve files call across each other. The server
 * struct, connections and whole replies are the room below's
 * (http/http.h). Everything here is touched only by the HTTP thread,
 * except the fields marked otherwise. */
#ifndef TPS_SERVER_SERVE_H
#define TPS_SERVER_SERVE_H

#include "server/api/openai.h"
#include "server/chat/chat_template.h"
#include "server/http/http.h"
#include "server/tools/harmony.h"
#include "server/write/api_write.h"
#include "server/write/prom_write.h"
#include "server/write/sse_write.h"

#define SERVER_POLL_BATCH      64   /* engine events taken per engine_poll */
#define SERVER_POLLS_PER_TURN  8    /* bounded work per loop turn: 512 events */
#define SERVER_SWEEP_MS        100  /* connection sweep period */
#define SERVER_STOP_MS         2000 /* a stop: how long cancelled requests may take to be answered */
#define SERVER_WORKERS         2    /* threads preparing request bodies (server_work.c) */
#define SERVER_WORK_QUEUE      32   /* large bodies waiting for a worker; more get 429 */
#define SERVER_ADMIN_PERIOD_MS 1000 /* /reset_prefix_cache: at most one per period (429) */

#define SERVER_SMALL_BODY                                                                          \
    (64u << 10) /* bodies up to this always queue (connections bound                               \
                   them); every body is prepared on a worker */

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

/* A choice's reasoning splitter: <think> blocks (engine/sample/think.h) or
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
struct req_ctx {
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
};

/* The files call one way, top to bottom (no file calls one above it),
 * and down into http/ (server_reply.c, server_conn.c, server_admit.c):
 *   server.c          lifecycle: create, start, load, drain, stop, free
 *   server_http.c     routes, browser checks, authentication
 *   server_work.c     the worker pool that prepares large bodies
 *   server_prepare.c  bodies: parse, render, tokenize; answer or submit
 *   server_stream.c   request contexts; engine events -> responses
 *   server_metrics.c  the /metrics page and the request histograms
 *   server_calib.c    --save-calibration: the step-cost model fitted while serving */

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

#endif
