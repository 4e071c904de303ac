/* One whole bench run as a library call: a spec (what `tps bench` parses)
 * in, a bench_result out. The spec holds the client configuration
 * (bench.h), the workload options (workload.h) and the result options
 * (result.h) as given; what follows from them together is worked out per
 * run: the in-flight default (1 closed loop, 1000 open loop), the number of
 * prompts to prepare, the conversations of a multi-turn run, the /tokenize
 * URL, and the config the result echoes. So a caller may change one field
 * of a copy (sweep sets the concurrency, rate, lengths, URL per point) and
 * run it again without parsing anything.
 *
 * A spec is plain data: it may be copied by value; its strings are borrowed
 * (argv, the caller's buffers) and must outlive every run of it.
 * Not here: option parsing and printing (src/cli/cli_bench.c), the
 * capacity search (capacity.h, which runs on bench_spec_prepare's pieces),
 * grids of runs (sweep.h). */
#ifndef TPS_BENCH_BENCH_SPEC_H
#define TPS_BENCH_BENCH_SPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "bench/client/bench.h"
#include "bench/result/result.h"
#include "bench/workload/workload.h"
#include "base/error.h"

#define BENCH_SPEC_MAX_HEADERS 64

typedef struct bench_spec {
    bench_config cfg; /* concurrency 0: the default (rate > 0 ? 1000 : 1); headers: see below */
    workload_opts wo; /* n_items, seed, endpoint, tokenize_url, api_key: set per run */
    result_opts ro;   /* warmup/cooldown, --window, slo, bin_s, per_request; the rest per run */
    const char *headers[BENCH_SPEC_MAX_HEADERS]; /* "Name: value", borrowed */
    size_t n_headers;
    const char *prefix_dist; /* as given ("zipf:1.1"), for the result's config; NULL round-robin */
    uint64_t prompts;        /* prompts to prepare; 0: from requests, rate x duration, or 2000 */
    uint64_t conversations;  /* multi-turn: conversations; 0: the concurrency */
    double max_error_rate;   /* the verdict's pass mark (verdict_judge_run): a run whose
                                failed/(completed+failed) is above it fails */
    const char *scrape;      /* Prometheus endpoint to sample during the run (scrape.h); NULL:
                                the target's /metrics if it answers; "off": none */
    /* cfg.seed was asked for (--seed): the run repeats the one that used it.
     * Otherwise every run draws its own (bench_spec_fresh_seed), so no run
     * sends the prompts of another and a server's prefix cache serves only
     * what --prefix-len shares; the result's config.seed says which. */
    bool seed_given;
    /* Runs the load in bench_run's place (NULL: bench_run, against the URL);
     * no endpoint is scraped then. */
    bench_run_fn run;
    void *run_arg;
    json_t *config_extra; /* fields the result's config also carries (borrowed); NULL none */
    bool given_prefixes, given_think; /* as parsed: --prefixes, --think-time given (checks) */
    /* the workload's kind, named from wo by bench_spec_check (every run
     * checks its spec first, so a field changed after parsing is seen) */
    workload_kind kind;
} bench_spec;

/* What a command asks of a spec besides one run (tps bench, tps plan). */
typedef struct bench_ask {
    bool find_max_rate;  /* a capacity search (tps plan's --replicas-for runs one too) */
    bool goodput_target; /* --goodput-target was given */
} bench_ask;

/* A seed no earlier run is likely to have used (the kernel's random bytes,
 * else the clock and the process id), below 2^48 so it reads back exactly
 * from JSON and is short to type. */
uint64_t bench_spec_fresh_seed(void);

/* The defaults of `tps bench` (url http://127.0.0.1:8080, poisson arrivals,
 * timeouts 300/60/10 s, a fresh seed per run, input and output length 128,
 * usage asked). */
void bench_spec_init(bench_spec *s);

/* Every rule a spec must meet, in one place (bench_spec_check.c): flags
 * that do not go together (--prefixes without --prefix-len, --turns with
 * --rate, a JSONL dataset with --turns...), what a capacity search needs
 * (ask: NULL for one run), what the endpoint cannot take, that a run must
 * end. TPS_EINVAL with a message naming the flag and what to change; the
 * CLI prints it after its name. Settles what follows from the flags:
 * s->kind, and a search's in-flight cap (1000) when none was given. Runs
 * again on every bench_spec_prepare, so a field changed after parsing
 * (sweep's axes) is checked too. */
int bench_spec_check(bench_spec *s, const bench_ask *ask, tps_err *e);

/* The most requests in flight: as given, else 1000 open loop (--rate), 1
 * closed loop. */
uint32_t bench_spec_concurrency(const bench_spec *s);
/* A multi-turn run's conversations: as given, else the concurrency. */
uint64_t bench_spec_conversations(const bench_spec *s);

/* The pieces of a run: *cfg resolved from s (defaults filled, the seed
 * drawn unless s->seed_given, headers pointing into s), *wl built (owned by the caller:
 * workload_free). Notes for the user (approximate prompt lengths, skipped dataset entries) go to
 * log as "PROG: note: ..." lines; log may be NULL. */
int bench_spec_prepare(workload *wl, bench_config *cfg, const bench_spec *s, FILE *log,
                       const char *prog, tps_err *e);

/* The run's configuration as the result echoes it ({"url", "endpoint",
 * "concurrency", "rate", "input_len", ...}). New reference. */
json_t *bench_spec_config_json(const bench_spec *s, const bench_config *cfg, const workload *wl);

/* prepare, bench_run, result_build: *out is the run's result (the caller
 * frees it with result_free). Fails when the spec is refused (TPS_EINVAL,
 * bench_spec_check) or nothing could run (a workload or client setup
 * error); failed requests are data in the result, judged by
 * verdict_judge_run against s->max_error_rate. */
int bench_spec_run(bench_result *out, const bench_spec *s, FILE *log, const char *prog, tps_err *e);

#endif
