/* Capacity under an SLO: the highest open-loop request rate an endpoint
 * serves within a service-level objective (docs/bench.md, "Capacity under an
 * SLO").
 *
 * A search is a sequence of probes. Each probe is one bounded open-loop run
 * (bench_run at a fixed --rate for a fixed duration) whose records become a
 * bench_result (result.h); the probe passes or fails by capacity_judge. The
 * search brackets (start rate, doubled while probes pass, halved while they
 * fail) and then bisects between the highest passing and the lowest failing
 * rate until they are within a relative precision. It always stops: after
 * max_probes probes, when the next probe would overrun the time budget, at
 * the rate limits, or when converged; each probe is itself bounded by its
 * duration + the request timeout (bench.h).
 *
 * A probe whose client could not keep to the schedule (too few requests sent,
 * or sends late: the send lag) is marked client_limited and counts as a
 * failure: it did not measure the server at that rate. When the failure that
 * bounds the answer from above was client-limited, the answer is marked so:
 * it is a lower bound set by the load generator, not the server.
 *
 * Not here: option parsing (src/cli), sending (bench.h), the metric maths
 * (result.h, metrics/). Not thread-safe; one search at a time per result. */
#ifndef TPS_BENCH_CAPACITY_H
#define TPS_BENCH_CAPACITY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bench/client/bench.h"
#include "bench/result/result.h"
#include "metrics/timeline.h"
#include "base/error.h"

#define CAPACITY_SCHEMA  "tps.bench.capacity"
#define CAPACITY_VERSION 1

typedef struct capacity_opts {
    /* Per-request limits, 0 = not set (at least one must be): ttft_ns from
     * the scheduled send, tpot_ns is the ITL limit judged per request on its
     * mean gap (TPOT, as AIPerf's per-request inter_token_latency), e2e_ns. */
    tl_slo slo;
    double goodput_target; /* (0, 1]: good / sent a probe needs; default 0.95 */
    /* Also require each limited metric's p99 over the probe within its limit
     * (TTFT, ITL over every gap, E2E: vLLM serve_sla style). Default true. */
    bool check_p99;
    double start_rate;    /* requests/s of the first probe; default 1 */
    double min_rate;      /* lowest rate probed when bracketing down; default start / 16 */
    double max_rate;      /* highest rate probed; default 1024 */
    double precision;     /* stop bisecting when (fail - pass) <= precision * pass; default 0.05 */
    uint32_t max_probes;  /* default 12 */
    double time_budget_s; /* wall time for the whole search; default 600 */
    double probe_s;       /* each probe's --duration; 0: base->duration_s, else 10 */
    double min_sent_frac; /* client-limited below this share of scheduled sends; default 0.9 */
    double max_send_lag_ms; /* client-limited above this send-lag p99; 0: auto (see .c) */
    json_t *config;         /* echoed into every probe's result (borrowed; may be NULL) */
    /* Builds probe k's (from 0) workload into *wl (the search frees it) and
     * its config into *cfg, for rate and dur, from a seed of its own: no
     * probe then sends another's prompts, and a prefix cache serves none of
     * them from an earlier probe. NULL: every probe sends the search's wl. */
    int (*prepare)(workload *wl, bench_config *cfg, size_t k, double rate, double dur, void *arg,
                   tps_err *e);
    void *prepare_arg;
    bench_run_fn run; /* runs each probe in bench_run's place (NULL: bench_run) */
    void *run_arg;
} capacity_opts;

/* The defaults above, with no SLO set. */
capacity_opts capacity_opts_default(void);

/* One probe: a run at one scheduled rate and its verdict. */
typedef struct capacity_probe {
    double rate;          /* scheduled, requests/s */
    double duration_s;    /* the probe's send window */
    uint64_t scheduled;   /* sends the arrival schedule had in the window */
    uint64_t sent;        /* requests actually sent */
    uint64_t completed;   /* of those, completed */
    uint64_t good;        /* completed and met every per-request limit */
    double achieved_rate; /* sent / duration_s */
    double good_fraction; /* good / sent (failed and cancelled are not good); 0 if none sent */
    /* p99s in ms (completed requests; 0 when none): TTFT from the scheduled
     * send, ITL over every gap, E2E from the scheduled send, send lag over
     * every request. */
    double ttft_p99_ms, itl_p99_ms, e2e_p99_ms, send_lag_p99_ms;
    /* prompt tokens the server's prefix cache served, over the prompts of
     * the requests that said (result.h's cached input); < 0: unknown */
    double cached_fraction;
    /* the share of the CPU time the hypervisor stole during the probe
     * (its result's host.steal); < 0: unknown (a plan, a short probe) */
    double steal;
    bool pass;
    bool client_limited;
    char why[192];       /* the verdict in words: what failed, or "ok" */
    double wall_s;       /* how long the probe took */
    bench_result result; /* the full result, owned */
} capacity_probe;

typedef enum capacity_stop {
    CAP_STOP_CONVERGED = 0, /* pass and fail rates within the precision */
    CAP_STOP_MAX_RATE,      /* the max rate passed: capacity is at least that */
    CAP_STOP_MIN_RATE,      /* the min rate failed: no rate passes */
    CAP_STOP_PROBES,        /* max_probes were run */
    CAP_STOP_TIME,          /* the next probe would overrun the time budget */
} capacity_stop;

const char *capacity_stop_name(capacity_stop s);

typedef struct capacity_result {
    capacity_probe *probes; /* (n,), owned, in the order run */
    size_t n;
    double max_rate;     /* highest passing rate; 0 if none passed */
    double fail_rate;    /* lowest failing rate above it; 0 if none failed */
    bool client_limited; /* the probe at fail_rate was client-limited */
    capacity_stop stop;
    double wall_s;
} capacity_result;

/* Called after each probe (for progress); p is borrowed for the call. */
typedef void (*capacity_probe_cb)(const capacity_probe *p, size_t i, void *arg);

/* Runs the search. base gives the endpoint, timeouts, in-flight cap
 * (concurrency), arrival process and seed; its rate, requests and duration
 * are replaced per probe (and all of it by o->prepare when set, wl then
 * unused and may be NULL). cb may be NULL. Fails on bad options or a setup
 * error of bench_run or o->prepare (out is then empty); request failures are
 * data. */
int capacity_search(capacity_result *out, const capacity_opts *o, const bench_config *base,
                    const workload *wl, capacity_probe_cb cb, void *cb_arg, tps_err *e);
void capacity_result_free(capacity_result *r);

/* Fills p->pass, p->client_limited and p->why from p's summary fields (rate,
 * duration_s, scheduled, sent, completed, good, p99s). Used by the search;
 * public so the rules can be tested without a server. */
void capacity_judge(capacity_probe *p, const capacity_opts *o);

/* The send-lag p99 above which a probe is client-limited, in ms. */
double capacity_lag_limit_ms(const capacity_opts *o);

/* ---- output ------------------------------------------------------------------------- */

/* {"schema", "version", "slo_ns", "goodput_target", "check_p99", "probes": [{rate, ...,
 * "result": <tps.bench.result>}], "max_rate", "fail_rate", "client_limited", "stop",
 * "wall_s"}. New reference. */
json_t *capacity_to_json(const capacity_result *r, const capacity_opts *o);
int capacity_write_json(const capacity_result *r, const capacity_opts *o, const char *path,
                        tps_err *e);
/* The search back from capacity_to_json's document (magic and version
 * checked): every probe's summary and verdict, the answer, and in *o the
 * SLO, goodput target and check_p99 (o->config NULL). The probes' full
 * results are not read (their result.runs is 0); a reader that wants them
 * takes "probes"[i]."result" itself (result_from_json). */
int capacity_from_json(capacity_result *r, capacity_opts *o, const json_t *j, tps_err *e);

/* The table's header, one line per probe, the answer. */
void capacity_print_header(FILE *f);
void capacity_print_probe(FILE *f, const capacity_probe *p, size_t i);
/* The answer lines only (after capacity_print_probe for each probe); on a
 * shared VM (a probe stole VERDICT_STEAL_SHARE or more) a note of the
 * steal at the answer's two edges: the answer is the machine's at that
 * steal, and another search at another steal finds another. */
void capacity_print_answer(FILE *f, const capacity_result *r);
void capacity_print(FILE *f, const capacity_result *r);

#endif
