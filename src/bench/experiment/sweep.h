/* tps sweep: run `tps bench` over a grid (concurrency, rate, input length,
 * output length, model) against one endpoint and keep every point's full
 * bench result in one JSON document (schema tps.sweep.result v1).
 *
 * A point is one bench run, a library call (bench_spec_run): the caller
 * parses the bench options once into a base spec (the CLI with the `tps
 * bench` option table, so every bench option means exactly what it means
 * there); each point runs a copy of it with the point's axis values set
 * (concurrency, rate, input and output length, the URL, and the served
 * model as the tokenizer unless the spec names one), and its result comes
 * back in memory. No argv, no files. With models to serve, the sweep starts a
 * local `tps serve` per model on 127.0.0.1 (a free port), waits for /health,
 * and stops it with SIGTERM after that model's points. When the endpoint is
 * a tps server, /metrics is read before and after each point and the deltas
 * (engine steps, prompt and generated tokens) are kept beside the result.
 * Not here: option parsing (src/cli/cli_sweep.c), printing and plots
 * (report_set.h). */
#ifndef TPS_BENCH_SWEEP_H
#define TPS_BENCH_SWEEP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "bench/experiment/bench_spec.h"
#include "base/error.h"

#define SWEEP_SCHEMA     "tps.sweep.result"
#define SWEEP_VERSION    1
#define SWEEP_MAX_VALUES 64   /* values per axis */
#define SWEEP_MAX_POINTS 1000 /* points per sweep */
#define SWEEP_MAX_ARGS   256  /* `tps serve` arguments passed through */

/* The grid's axes, in the order the grid nests them (model outermost). */
typedef enum sweep_axis {
    SWEEP_MODEL = 0,
    SWEEP_CONCURRENCY,
    SWEEP_RATE,
    SWEEP_INPUT_LEN,
    SWEEP_OUTPUT_LEN,
    SWEEP_AXES
} sweep_axis;

const char *sweep_axis_name(sweep_axis a);  /* "model", "concurrency", ... */
const char *sweep_axis_label(sweep_axis a); /* a point label's "model", "c", "rate", ... */

/* Values of one axis: a comma-separated list split in place (borrowed
 * pointers into buf). */
typedef struct sweep_list {
    char buf[4096];
    const char *v[SWEEP_MAX_VALUES];
    size_t n;
} sweep_list;

/* Splits "1,2,4" (no empty items, at most SWEEP_MAX_VALUES). */
int sweep_list_parse(sweep_list *l, const char *s, tps_err *e);

typedef struct sweep_opts {
    sweep_list axis[SWEEP_AXES];   /* n == 0: not swept (bench's own default or option) */
    const char *url;               /* endpoint when no model is served */
    const char *exe;               /* the tps binary for `tps serve` ("/proc/self/exe") */
    const char *const *serve_args; /* extra `tps serve` arguments (borrowed) */
    size_t n_serve_args;
    const bench_spec *base;        /* every point's run, before its axis values (borrowed) */
    const char *const *bench_args; /* the options base was parsed from: recorded in the
                                      document only (borrowed; may be NULL) */
    size_t n_bench_args;
    double serve_wait_s; /* how long to wait for /health (default 120) */
    FILE *log;           /* progress lines and the bench's notes; NULL for none */
} sweep_opts;

/* Points in the grid (product of the non-empty axes, models included). */
size_t sweep_npoints(const sweep_opts *o);
/* How many axes have more than one value. */
size_t sweep_naxes(const sweep_opts *o);

/* Sets one point's axis values on a spec: val[a] is the value of axis a as
 * the list gave it, or NULL (not swept: the spec's own). The model axis is
 * not the spec's (the sweep serves it). TPS_EINVAL naming the option when a
 * value is not one bench takes ("--concurrency: '0' ..."). */
int sweep_apply_axes(bench_spec *s, const char *const val[SWEEP_AXES], tps_err *e);

/* Runs every point; *doc gets the sweep document (owned by the caller) even
 * when some points failed (*n_failed counts those with a non-zero exit
 * status: 1 the run failed or its error rate is above --max-error-rate, 2
 * the point's options were refused; each point keeps its exit status, and
 * "result": null when it produced none). Fails only when nothing can run:
 * an axis value bench does not take, a point's options refused (exit status
 * 2), a server that does not start. */
int sweep_run(json_t **doc, size_t *n_failed, const sweep_opts *o, tps_err *e);

/* ---- a local `tps serve` -------------------------------------------------------------- */

typedef struct sweep_server {
    pid_t pid;
    int port;
    char url[64];
    char log_path[512]; /* its stdout and stderr */
} sweep_server;

/* Starts `exe serve -m model --host 127.0.0.1 --port P extra...` on a free
 * port, with its output in log_path, and waits up to wait_s for /health to
 * answer 200. */
int sweep_server_start(sweep_server *s, const char *exe, const char *model,
                       const char *const *extra, size_t n_extra, const char *log_path,
                       double wait_s, tps_err *e);
/* SIGTERM (the server drains), then waits up to wait_s; SIGKILL after that.
 * Returns the server's exit status (or -1). */
int sweep_server_stop(sweep_server *s, double wait_s);

/* ---- /metrics --------------------------------------------------------------------------- */

/* The engine counters of a tps server's /metrics. */
typedef struct sweep_counters {
    double steps, prompt_tokens, generation_tokens, preemptions;
    double weight_bytes, kv_bytes, step_seconds; /* what the steps read, and their time */
    double machine_read_bps; /* gauge: the measured read bandwidth (0: unknown) */
    double experts;          /* mixture of experts: experts the steps ran, summed over layers */
    double model_experts, model_layers; /* gauges: experts a layer (0: dense), layers */
    double machine_busy; /* gauge: 1 when it was measured while the machine was busy */
} sweep_counters;

/* GET base_url/metrics (a trailing /v1 is dropped); TPS_ENOENT when the
 * endpoint has no tps /metrics. */
int sweep_scrape(sweep_counters *c, const char *base_url, tps_err *e);
/* Parses Prometheus text (the tps: counters); TPS_ENOENT when steps_total is absent. */
int sweep_parse_metrics(sweep_counters *c, const char *text, tps_err *e);
/* Every field from a point's server_metrics object as the sweep wrote it
 * (an absent key: 0). */
void sweep_counters_read(sweep_counters *c, const json_t *m);

#endif
