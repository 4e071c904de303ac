/* The calling thread's scheduler figures from /proc/thread-self/schedstat:
 * time on a CPU and time spent runnable but waiting for one (the run
 * queue). A bench thread that waits for a CPU while a response arrives
 * stamps it late, so the verdict (verdict.h) weighs this wait against the
 * run's length.
 *
 * Linux only; elsewhere, or when the kernel does not expose schedstat,
 * sched_stat_read says so (false) and the wait is unknown, never zero.
 * Not here: other threads of the process (each reads its own). */
#ifndef TPS_BENCH_SCHED_STAT_H
#define TPS_BENCH_SCHED_STAT_H

#include <stdbool.h>
#include <stdint.h>

typedef struct sched_stat {
    uint64_t on_cpu_ns;  /* time this thread ran */
    uint64_t runq_ns;    /* time it was runnable and waited for a CPU */
    uint64_t timeslices; /* times it was put on a CPU */
} sched_stat;

/* The calling thread's figures so far; false when unavailable. */
bool sched_stat_read(sched_stat *out);

#endif
