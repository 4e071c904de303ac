/* /proc/thread-self/schedstat: "on-cpu-ns run-queue-wait-ns timeslices"
 * (Documentation/scheduler/sched-stats.rst, the per-task file). */
#include "bench/client/sched_stat.h"

#include <inttypes.h>
#include <stdio.h>

bool sched_stat_read(sched_stat *out) {
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    if (!f) return false;
    uint64_t a, b, c;
    int n = fscanf(f, "%" SCNu64 " %" SCNu64 " %" SCNu64, &a, &b, &c);
    fclose(f);
    if (n != 3) return false;
    *out = (sched_stat){.on_cpu_ns = a, .runq_ns = b, .timeslices = c};
    return true;
}
