/* tps serve's step windows read against the machine's limits: the engine's
 * totals (step seconds, weight and KV bytes read, steps) between one
 * reading and the next are a window of real work; one that holds enough
 * step time, reads a model too big for the last-level cache and read
 * faster than the cached read bandwidth shows that figure was no limit,
 * and machine_limits_saw (kernels/machine.h) raises it, in the server's
 * copy /metrics reports and in the cache file, naming the window. Read
 * when /metrics is scraped (server_metrics.c), on the HTTP thread: never
 * on the engine's step path.
 *
 * Not here: the measurement (kernels/machine.h), the /metrics page. */
#ifndef TPS_SERVER_WINDOW_H
#define TPS_SERVER_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "metrics/roofline.h"

/* A window needs this much step time: a shorter one is timer noise and a
 * step or two, and goes on until it has it. */
#define SERVER_WINDOW_MIN_S 1.0

/* The engine's totals at one reading (engine_stats). */
typedef struct server_window {
    double step_s; /* step_seconds_total */
    double bytes;  /* weight_bytes_read_total + kv_bytes_read_total */
    uint64_t steps;
} server_window;

/* The window from *start to now: when it holds SERVER_WINDOW_MIN_S of step
 * time, *start becomes now, and when its GB/s is above m's, that and its
 * bytes per step go to machine_limits_saw(m, ..., llc(), "step window of
 * tps serve -m MODEL") (llc: the last-level cache's size, asked only then:
 * machine_llc_bytes reads sysfs); else *start stays (the window goes on).
 * Returns machine_limits_saw's answer (1: m raised, -1: raised but not
 * cached, err says why), else 0. *gbs (may be NULL) gets the window's
 * figure when one was read. */
int server_window_saw(server_window *start, const server_window *now, machine_limits *m,
                      size_t (*llc)(void), const char *model, double *gbs, tps_err *err);

#endif
