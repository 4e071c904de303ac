/* The one clock every duration in tps is measured with: CLOCK_MONOTONIC in
 * unsigned 64-bit nanoseconds (584 years before it wraps). Wall-clock time is
 * for labels only and does not live here. */
#ifndef TPS_BASE_CLOCK_H
#define TPS_BASE_CLOCK_H

#include <stdint.h>
#include <time.h>

#define TPS_NS_PER_US  1000ull
#define TPS_NS_PER_MS  1000000ull
#define TPS_NS_PER_SEC 1000000000ull

/* Monotonic now in nanoseconds; not affected by wall-clock steps. One
 * clock_gettime (a vDSO call on Linux, no syscall). */
static inline uint64_t tps_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * TPS_NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

static inline double tps_ns_to_s(uint64_t ns) {
    return (double)ns / (double)TPS_NS_PER_SEC;
}

#endif
