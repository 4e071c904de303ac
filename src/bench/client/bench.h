/* tps bench: drive an OpenAI-compatible streaming endpoint with a workload
 * and record every request's token timeline (the client, client.c).
 *
 * One or more event loops (--client-threads), each a thread with its own
 * libcurl multi handle on epoll and its share of the concurrent streams
 * (1,000 work). Each received chunk is time-stamped with CLOCK_MONOTONIC as
 * curl delivers it, and parsed only after every socket ready in that pass
 * was read; SSE events in that chunk carry that time. Closed loop
 * (--concurrency N: a finished request is replaced at once) or open loop
 * (--rate R: requests are due at scheduled times from an arrival process; a
 * late send keeps its scheduled time as the start of TTFT/E2E, and the
 * lateness is recorded). A timed workload (a trace, workload.timed) is an
 * open loop whose schedule is its items' send_at_s: each item is sent once,
 * at its time (--requests may cut it short), and --rate does not apply.
 *
 * A multi-turn workload (workload.turns > 0) is a closed loop of its own:
 * each conversation sends its next turn when its last reply is in and the
 * think time is over, at most --concurrency at a time (convo.h); the turn's
 * body, which carries the replies streamed so far, is built when it is sent,
 * and every request carries "X-Session-Id: <conversation id>".
 *
 * Every run is bounded: by --requests and/or --duration (new sends stop), a
 * multi-turn run also by its conversations x turns, each request by
 * --timeout (total) and --idle-timeout (no byte), and the whole run by
 * duration + timeout, after which what is in flight is cancelled. Not here:
 * metrics over many requests (result.h), printing (report.h), prompts
 * (workload.h). */
#ifndef TPS_BENCH_BENCH_H
#define TPS_BENCH_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench/workload/load.h"
#include "bench/client/chunk.h"
#include "bench/workload/workload.h"
#include "metrics/cpu_load.h"
#include "metrics/timeline.h"
#include "base/error.h"

/* Why a request failed. */
typedef enum bench_errkind {
    BENCH_OK = 0,
    BENCH_ERR_CONNECT,      /* could not connect / resolve */
    BENCH_ERR_HTTP_4XX,     /* status 400..499 */
    BENCH_ERR_HTTP_5XX,     /* status 500..599 */
    BENCH_ERR_NO_RESPONSE,  /* no byte of the response within --idle-timeout */
    BENCH_ERR_STALL,        /* the stream went silent for --idle-timeout */
    BENCH_ERR_TIMEOUT,      /* over --timeout in total */
    BENCH_ERR_RESET,        /* the connection was closed or reset mid-response */
    BENCH_ERR_MALFORMED,    /* not SSE / not JSON / not an object */
    BENCH_ERR_STREAM_ERROR, /* the server sent an error event */
    BENCH_ERR_TRUNCATED,    /* the stream ended cleanly but without [DONE] */
    BENCH_ERR_CANCELLED,    /* still running when the run's time was up (not an error) */
    BENCH_ERR_OTHER,        /* anything else libcurl reports */
    BENCH_ERR_HTTP_3XX,     /* status 300..399: a redirect the bench does not follow */
    BENCH_ERR_HTTP_OTHER,   /* any other status but 200 (1xx, 2xx but 200, 600 and up) */
    BENCH_ERR_NO_TOKENS,    /* a generation that ended cleanly without an output token */
    BENCH_ERR_COUNT
} bench_errkind;

const char *bench_err_name(bench_errkind k);
bench_errkind bench_err_from_name(const char *s); /* BENCH_ERR_COUNT if unknown */

/* One request: its timeline and everything the response said. */
typedef struct bench_record {
    timeline tl;           /* owned */
    uint64_t seq;          /* the request's number in the run (send order over all loops) */
    uint32_t item;         /* workload item sent */
    uint32_t conversation; /* multi-turn: which conversation */
    uint32_t turn;         /* multi-turn: 1 for the first turn, ...; 0 single-turn requests */
    uint32_t max_tokens;   /* asked for */
    uint32_t input_target;
    uint32_t input_client; /* prompt tokens as the client counted them; 0 unknown */
    int http_status;       /* 0 if none */
    bench_errkind err;
    char *err_msg; /* malloc'ed on failure, else NULL */
    bool has_usage;
    uint64_t usage_prompt, usage_completion;
    bool has_cached; /* the server said how many prompt tokens its prefix cache served */
    bool cached_from_usage;
    uint64_t cached_tokens;
    uint64_t stream_tokens; /* what the stream itself showed (ids or events) */
    uint64_t held_tokens;   /* of those, tokens of empty-text events (client.c) */
    /* Of the output tokens, thinking: usage's reasoning_tokens when the
     * server sent them (reasoning_from_usage), else the stream's thinking
     * events counted as output tokens are. */
    uint64_t reasoning_tokens;
    bool reasoning_from_usage;
    uint64_t unread_events; /* events with text in a field no dialect row reads */
    /* The first thing the server's usage said that cannot be (prompt tokens
     * far beyond the prompt sent, cached above the prompt, more output than
     * asked for): "" none. The verdict's plausible check names it. */
    char implausible[96];
    bool text_cut;   /* the kept text hit BENCH_TEXT_KEEP_MAX: re-tokenizing is off */
    char unread[48]; /* the first such field's name, "" none */
    bool has_timings;
    bench_timings timings;
} bench_record;

void bench_record_free(bench_record *r);

/* The most text kept per request (to re-tokenize the output when the
 * server sends no usage, and a conversation's reply): a stream may go on
 * for as long as it likes without the bench's memory growing. */
#define BENCH_TEXT_KEEP_MAX (1u << 20)

/* How ep's responses are read (chunk.h). */
bench_dialect bench_endpoint_dialect(bench_endpoint ep);

typedef struct bench_config {
    const char *base_url; /* "http://127.0.0.1:8080" (a trailing /v1 is fine) */
    bench_endpoint endpoint;
    const char *api_key;        /* "Authorization: Bearer KEY"; NULL none */
    const char *const *headers; /* extra "Name: value" lines */
    size_t n_headers;
    uint32_t concurrency; /* closed loop: in flight; open loop: cap on in flight */
    double rate;          /* > 0: open loop, requests/s */
    load_arrival arrival;
    double burstiness;
    uint64_t requests; /* stop sending after this many (0: no limit) */
    double duration_s; /* stop sending after this long (0: no limit) */
    double timeout_s;  /* per request, total */
    double idle_timeout_s;
    double connect_timeout_s;
    double think_time_s; /* multi-turn: between a reply and the conversation's next turn */
    uint64_t seed;
    bool insecure;           /* HTTPS without certificate checks */
    bool keep_text;          /* keep streamed text to re-tokenize when there is no usage */
    bool no_stream;          /* the bodies ask for a whole response ("stream": false) */
    bool progress;           /* draw a progress bar on stderr */
    uint32_t client_threads; /* event loops, one thread each; 0: bench_client_threads_auto */
    int verbose;
} bench_config;

/* What a run produced. */
typedef struct bench_run_out {
    bench_record *recs; /* (n,), owned, in send order */
    size_t n;
    uint64_t t_start_ns;          /* CLOCK_MONOTONIC when the run began */
    int64_t t_start_unix_ns;      /* wall clock at the same instant (a label) */
    uint64_t t_stop_ns;           /* when the last loop ended */
    double client_cpu_s;          /* the event loops' CPU time during the run (start-up excluded) */
    uint32_t client_loops;        /* event loops (threads) that ran it */
    double client_loop_cpu_max_s; /* the busiest loop's CPU time (near wall: CPU-bound) */
    bool has_runq;                /* client_runq_s is known (sched_stat.h) */
    double client_runq_s;         /* the longest run-queue wait of a loop thread */
    uint64_t bytes_received;
    uint64_t events_received;
    bool hit_deadline; /* in-flight requests were cancelled at duration + timeout */
    /* this machine's CPUs over the run (/proc/stat): the hypervisor's steal
     * and other processes' use (a server on this machine among them) */
    cpu_contention host;
    /* ... and its counters read every HOST_TICK_MS through the run, for
     * the time series (owned; none where /proc cannot be read) */
    cpu_tick *host_ticks;
    size_t n_host_ticks;
} bench_run_out;

#define HOST_TICK_MS 200

/* The event loops a run gets when cfg->client_threads is 0: one per 64
 * streams the load may hold in flight (the concurrency, or its cap with
 * --rate), at most the cores this process may use, at most the concurrency;
 * 1 for a multi-turn workload. */
uint32_t bench_client_threads_auto(const bench_config *cfg, const workload *wl);

/* Runs the load. The workload's items are sent in order, cycling; over
 * several loops as one loop would send them (client_loop.h), the records in
 * request order. A multi-turn workload takes one loop (TPS_EINVAL if
 * cfg->client_threads asks for more). Fails only on setup errors; request
 * failures are recorded. */
int bench_run(bench_run_out *out, const bench_config *cfg, const workload *wl, tps_err *e);
void bench_run_free(bench_run_out *out);

/* Something that runs a load and records it as bench_run does: the spec's
 * runs and the capacity search call it in bench_run's place when given
 * (tps plan's simulated server answers with predicted records). */
typedef int (*bench_run_fn)(bench_run_out *out, const bench_config *cfg, const workload *wl,
                            void *arg, tps_err *e);
/* A new record (zeroed, its timeline allocated) for request number seq of
 * the run, sending workload item `item`: what bench_run and a
 * bench_run_fn start each request's record with. */
int bench_record_init(bench_record *rec, const workload *wl, uint32_t item, uint64_t seq,
                      tps_err *e);
struct convo;
/* Marks rec as turn `turn` (from 0) of conversation conv, whose history so
 * far cv holds: what the client can say of the prompt is that history and
 * this message (0: unknown). */
void bench_record_turn(bench_record *rec, const struct convo *cv, size_t conv, uint32_t turn);

#endif
