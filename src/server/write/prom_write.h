/* Prometheus text exposition format 0.0.4 writer: # HELP / # TYPE lines,
 * counter and gauge samples, and histograms rendered from the shared
 * log-linear histogram (metrics/hist.h) as cumulative `le` buckets at fixed
 * bounds plus exact _sum and _count.
 *
 * Not here: what the metrics are (server_metrics.c), HTTP. */
#ifndef TPS_SERVER_PROM_WRITE_H
#define TPS_SERVER_PROM_WRITE_H

#include <stddef.h>

#include "metrics/hist.h"
#include "base/sbuf.h"

#define PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Bucket bounds: seconds for latencies, counts for tokens per step. */
extern const double prom_latency_bounds[];
extern const size_t prom_n_latency_bounds;
extern const double prom_count_bounds[];
extern const size_t prom_n_count_bounds;

/* # HELP and # TYPE lines; type is "counter", "gauge" or "histogram". */
void prom_family(sbuf *b, const char *name, const char *type, const char *help);
/* One sample: `name{labels} value`; labels may be NULL (already escaped,
 * e.g. `finish_reason="stop"`). */
void prom_sample(sbuf *b, const char *name, const char *labels, double v);
/* A whole histogram family. Recorded values are multiplied by scale
 * (1e-9: ns -> s). A bucket of h counts toward `le` when all of it is at or
 * below le; values above the histogram's range count only in +Inf. */
void prom_histogram(sbuf *b, const char *name, const char *help, const hist *h, double scale,
                    const double *bounds, size_t n_bounds);

#endif
