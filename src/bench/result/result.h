/* A bench result: every number tps bench reports, computed once from the
 * run's request records (metrics/ does the maths), written to and read back
 * from a versioned JSON file, merged exactly across runs, and flattened to
 * CSV. Printing for people is report.h.
 *
 * Times in a result are offsets from the run's origin (when the load loop
 * began; `t0_unix_ns` labels it on the wall clock). Distributions are
 * histograms (metrics/hist.h) stored as exported buckets, so a merge of
 * results from several load generators adds bucket counts exactly. Window
 * figures of merged runs add up tokens and rates (the generators ran at the
 * same time against one endpoint) and take the longest window's length.
 * Not here: sending, printing. */
#ifndef TPS_BENCH_RESULT_H
#define TPS_BENCH_RESULT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "bench/client/bench.h"
#include "metrics/hist.h"
#include "metrics/window.h"
#include "base/error.h"

#define BENCH_RESULT_SCHEMA  "tps.bench.result"
#define BENCH_RESULT_VERSION 1

/* The distributions a result keeps. */
typedef enum result_hist_id {
    RH_TTFT = 0,      /* from scheduled start, completed requests */
    RH_TTFT_SENT,     /* from actual send */
    RH_ITL,           /* every inter-token gap (zero gaps included) */
    RH_TPOT,          /* requests with >= 2 output tokens */
    RH_E2E,           /* from scheduled start */
    RH_E2E_SENT,      /* from actual send */
    RH_SEND_LAG,      /* actual send - scheduled send, every request (client queue) */
    RH_OUTPUT_TOKENS, /* output tokens per completed request */
    RH_INPUT_TOKENS,  /* input tokens per completed request */
    RH_SRV_QUEUE,     /* server timings.queue_ms */
    RH_SRV_PREFILL,   /* server timings.prefill_ms */
    RH_SRV_DECODE,    /* server timings.decode_ms */
    RH_SRV_TTFT,      /* server timings.ttft_ms */
    RH_ARRIVAL_GAP,   /* gaps between a stream's token arrivals (timeline_arrivals) */
    RH_TTFO,          /* first answer token (after the thinking), from scheduled start */
    RH_COUNT
} result_hist_id;

const char *result_hist_name(result_hist_id id);
bool result_hist_is_time(result_hist_id id); /* ns (else tokens) */

/* The share of the prompt a server's prefix cache served, over the requests
 * whose server said (usage.prompt_tokens_details.cached_tokens or
 * timings.cache_n). requests == 0: unknown, which is not zero. */
typedef struct result_cached {
    uint64_t requests; /* that reported it */
    uint64_t tokens;   /* cached prompt tokens they reported */
    uint64_t prompt;   /* their prompt tokens: the fraction's denominator */
} result_cached;

/* Multi-turn runs: the first turn against the later ones, whose prompts
 * carry the history (a prefix cache should keep their TTFT near turn 1's). */
typedef struct result_turn_group {
    uint64_t completed;
    uint64_t input_tokens; /* of the completed requests */
    result_cached cached;
    hist *ttft; /* from the start (conversations are a closed loop: start = send) */
} result_turn_group;

typedef struct result_turns {
    uint32_t turns;         /* the most turns any conversation sent; 0: not multi-turn */
    uint64_t conversations; /* that sent a turn */
    result_turn_group first, later;
} result_turns;

typedef struct result_window {
    bool valid;
    char why[256];  /* when not valid */
    window_tps tps; /* w: offsets from the origin, ns */
    window_goodput good;
} result_window;

typedef struct result_opts {
    uint64_t origin_ns;                  /* CLOCK_MONOTONIC of the run's start */
    int64_t origin_unix_ns;              /* the same instant on the wall clock */
    double warmup_s, cooldown_s;         /* trimmed steady window by time */
    uint64_t warmup_reqs, cooldown_reqs; /* ... or by completed requests; a request sent
                                            before the warm-up ended enters no distribution */
    uint32_t target_concurrency;         /* auto steady: closed-loop concurrency; 0 open loop */
    bool has_user;
    double user_t0_s, user_t1_s; /* --window, seconds from run.t0 */
    tl_slo slo;
    double bin_s;           /* time-series bin; 0 means 1 s */
    bool per_request;       /* keep per-request records (with every token arrival) */
    json_t *config;         /* echoed into the result (borrowed; the result takes a reference) */
    json_t *server_metrics; /* --scrape's series (borrowed; the result takes a reference) */
    double client_cpu_s;    /* the event loops' CPU in the run, start-up excluded */
    uint32_t client_loops;  /* event loops (threads); 0 means 1 */
    double client_loop_cpu_max_s; /* the busiest loop's CPU */
    bool has_runq;                /* client_runq_s is known (sched_stat.h) */
    double client_runq_s;         /* the bench thread's run-queue wait during the run */
    uint64_t bytes, events;
    cpu_contention host;        /* bench_run_out's */
    const cpu_tick *host_ticks; /* bench_run_out's readings (borrowed), for series_steal */
    size_t n_host_ticks;
} result_opts;

typedef struct bench_result {
    json_t *config; /* owned reference */
    uint32_t runs;  /* 1, or how many were merged */
    int64_t t0_unix_ns;
    uint64_t requests, completed, failed, cancelled;
    uint64_t errors[BENCH_ERR_COUNT];
    char *error_example[BENCH_ERR_COUNT]; /* one message per kind, owned */
    uint64_t by_source[4];                /* completed requests by tl_count_source */
    uint64_t token_events, multi_token_events;
    uint64_t token_arrivals, multi_token_arrivals; /* timeline_arrivals, every request */
    uint64_t held_tokens;                 /* tokens that came in empty-text events (bench_record) */
    uint64_t mismatch_requests;           /* usage differed from what the stream showed */
    int64_t mismatch_tokens;              /* sum of (usage - stream) */
    uint64_t output_tokens, input_tokens; /* every request, failed ones' delivered tokens too */
    uint64_t reasoning_tokens;            /* of output_tokens, thinking (bench_record) */
    uint64_t reasoning_from_usage;        /* completed requests whose server counted them */
    uint64_t unread_requests;             /* requests with text in a field no dialect row reads */
    char unread_field[48];                /* the first such field, "" none */
    uint64_t implausible_requests;        /* whose usage said what cannot be (bench_record) */
    char implausible_example[96];         /* the first one's, "" none */
    uint64_t with_usage, with_timings, server_preemptions;
    result_cached cached;
    result_turns turns;
    result_window run, steady, user;
    tl_slo slo;
    hist *h[RH_COUNT];
    double bin_s;
    size_t nbins;
    uint64_t *series_out, *series_in; /* (nbins,) over the run window */
    double *series_steal; /* (nbins,) the hypervisor's steal per bin, -1 unknown; NULL none */
    double peak_tps;
    size_t peak_bin;
    double client_cpu_s;
    uint32_t client_loops;
    double client_loop_cpu_max_s;
    bool has_runq;
    double client_runq_s;
    uint64_t bytes, events;
    cpu_contention host;      /* known false: not measured (a plan, an older result) */
    uint64_t warmup_excluded; /* requests sent during --warmup: in no distribution */
    json_t *per_request;      /* owned or NULL */
    json_t *server_metrics;   /* --scrape: scrape.h's object, owned; NULL none */
} bench_result;

/* Whether the run streamed (config.stream is not false, and the endpoint
 * is not embeddings): without a stream there is no TTFT, ITL or TPOT. */
bool result_streamed(const bench_result *r);

/* The run's own figures into *o, all in one place so no caller copies
 * them by hand: its start (origin_ns, origin_unix_ns), the client's CPU,
 * loops and run-queue wait, bytes and events received, the host's CPU
 * contention and its readings (borrowed from run: it must outlive the
 * result_build that reads o). The rest of *o is left as it was. */
void result_opts_take_run(result_opts *o, const bench_run_out *run);

/* Computes everything from n records (any n >= 1). */
int result_build(bench_result *r, const bench_record *recs, size_t n, const result_opts *o,
                 tps_err *e);
void result_free(bench_result *r);

/* failed / (completed + failed); cancelled requests are not errors. */
double result_error_rate(const bench_result *r);
/* Token events that carried more than one token, over all token events; 0
 * with none. Inline: the verdict (which result_to_json calls) reads it too. */
static inline double result_multi_token_share(const bench_result *r) {
    return r->token_events ? (double)r->multi_token_events / (double)r->token_events : 0;
}
/* Token arrivals that brought more than one token (several SSE events read
 * at once, or an event of several tokens), over all arrivals: each adds
 * zero gaps to the per-token ITL that no reader waited; 0 with none. */
static inline double result_multi_arrival_share(const bench_result *r) {
    return r->token_arrivals ? (double)r->multi_token_arrivals / (double)r->token_arrivals : 0;
}

/* ---- files ------------------------------------------------------------------------- */

struct verdict;
/* The result as JSON with its verdict (verdict.h) as judged by the caller,
 * or judged here (no error allowed) when v is NULL. */
json_t *result_to_json_judged(const bench_result *r, const struct verdict *v);
json_t *result_to_json(const bench_result *r);
int result_from_json(bench_result *r, const json_t *j, tps_err *e);
int result_write_json(const bench_result *r, const char *path, tps_err *e);
int result_write_json_judged(const bench_result *r, const struct verdict *v, const char *path,
                             tps_err *e);
int result_read_json(bench_result *r, const char *path, tps_err *e);
/* One header line and one value line (the headline figures). */
int result_write_csv(const bench_result *r, FILE *f, tps_err *e);
/* The same into the file at path (created or emptied): 0, or TPS_EIO with
 * "cannot write 'PATH'". */
int result_write_csv_file(const bench_result *r, const char *path, tps_err *e);

/* dst += src: histograms exactly, counts summed, window rates summed. */
int result_merge(bench_result *dst, const bench_result *src, tps_err *e);

#endif
