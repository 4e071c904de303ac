/* Any server's own metrics beside the client's view: while a run goes, a
 * thread of its own GETs a Prometheus endpoint (--scrape URL; by default
 * the target's /metrics when it answers) every interval and records the
 * time series of the gauges and counters named tps: / tps_ (tps serve,
 * either spelling), vllm:, llamacpp: and sglang:. Counters become rates
 * between consecutive scrapes; histograms and summaries are left out (their
 * buckets are many series; the client measures those latencies itself).
 *
 * The scrape is bounded: one GET per interval, each with a 2 s limit, from
 * scrape_start to scrape_stop (which takes one last sample), at most
 * SCRAPE_MAX_SERIES series and SCRAPE_MAX_SAMPLES samples each. A failed
 * scrape is counted with its message, never fatal to the run. Times are
 * CLOCK_MONOTONIC ns until scrape_json makes them offsets from the run's
 * origin. Not here: the text format (metrics/prom_read.h), printing
 * (scrape_print), the run (bench_spec.c starts and stops it). */
#ifndef TPS_BENCH_SCRAPE_H
#define TPS_BENCH_SCRAPE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"
#include "bench/io/http_call.h"

#define SCRAPE_MAX_SERIES  256
#define SCRAPE_MAX_SAMPLES 100000

typedef struct scraper scraper;

/* Whether name is one the scrape keeps (tps:, tps_, vllm:, llamacpp:, sglang:). */
bool scrape_wanted(const char *name, size_t len);

/* One GET of url: 0 when it answers 200 with Prometheus text holding at
 * least one wanted gauge or counter, else an error saying what it did. */
int scrape_probe(const char *url, const http_auth *auth, tps_err *e);

/* Takes the first sample (before it returns), then starts the sampling
 * thread, one sample per interval_s. auth: the run's key, --header lines
 * and --insecure (NULL: none). */
int scrape_start(scraper **out, const char *url, const http_auth *auth, double interval_s,
                 tps_err *e);
/* Takes a last sample, stops the thread and returns what it recorded as
 * the result's `server_metrics` object (new reference; times from
 * origin_ns), then frees the scraper. */
json_t *scrape_stop(scraper *s, uint64_t origin_ns);

/* The report's block: each series' mean and max over the run, then a
 * table of the client's output t/s per bin (series_out, bin_s, the first
 * bin starting run_t0_s after the origin) beside the server's running /
 * waiting requests, KV cache use and generation rate where it has them,
 * each as its last sample by the bin's end. m is a `server_metrics`
 * object; nothing when NULL. */
void scrape_print(FILE *f, const json_t *m, const uint64_t *series_out, size_t nbins, double bin_s,
                  double run_t0_s);

#endif
