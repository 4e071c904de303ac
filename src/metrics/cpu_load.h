/* Whether the machine was busy while this process measured something: the
 * kernel's CPU counters (/proc/stat: every CPU's time by kind, and the
 * threads runnable now) and this process's own CPU time (/proc/self/stat),
 * sampled before and after, turned into the share of the CPUs other
 * processes used, the share a hypervisor stole, and the threads of other
 * processes waiting to run. A measurement of the machine's limits taken
 * while any of them is high measured the contention, not the machine.
 *
 * The parsers take text, so they are tested on fixed inputs; the sampler
 * reads /proc. Not here: what is measured (kernels/machine.c), what a
 * busy measurement means for the cache (metrics/roofline.h). */
#ifndef TPS_METRICS_CPU_LOAD_H
#define TPS_METRICS_CPU_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One reading of the counters, in clock ticks summed over every CPU. */
typedef struct cpu_sample {
    uint64_t total;   /* every kind of time */
    uint64_t busy;    /* user, nice, system, irq, softirq: running something */
    uint64_t steal;   /* taken by the hypervisor for other guests */
    uint64_t own;     /* this process's user + system time (all its threads) */
    uint32_t running; /* threads runnable at the reading (procs_running), this one included */
    bool ok;          /* /proc could be read */
} cpu_sample;

/* Fills s from the texts of /proc/stat and /proc/self/stat; false (s->ok
 * false) when either does not parse. */
bool cpu_sample_parse(cpu_sample *s, const char *proc_stat, const char *self_stat);
/* Reads /proc now; s->ok false where there is no /proc. */
void cpu_sample_take(cpu_sample *s);

/* Fewer clock ticks than this between two readings (1 s of one CPU's
 * time: they count in 10 ms steps) make a share too coarse to report. */
#define CPU_TICKS_MIN 100

/* What others did between two samples. */
typedef struct cpu_contention {
    bool known;        /* both samples read and time passed */
    double others;     /* share of all CPUs' time used by other processes, 0..1 */
    double steal;      /* share stolen by the hypervisor, 0..1 */
    uint32_t runnable; /* threads of others runnable at the idle reading (cpu_runnable_others) */
} cpu_contention;

cpu_contention cpu_contention_between(const cpu_sample *a, const cpu_sample *b);

/* One reading of the counters in time, for a share over any interval
 * between readings (a run's time series). */
typedef struct cpu_tick {
    uint64_t t_ns; /* CLOCK_MONOTONIC when read */
    uint64_t total, steal;
} cpu_tick;

/* The steal share over [a, b) from readings in time order, each counter
 * taken as linear between two readings (they are sums of 10 ms ticks over
 * every CPU); -1 when the readings do not cover [a, b) or it holds fewer
 * than CPU_TICKS_MIN ticks. */
double cpu_ticks_steal(const cpu_tick *t, size_t n, uint64_t a, uint64_t b);

/* Threads of other processes runnable now: the least of a few readings of
 * procs_running, less this thread, while this process runs nothing else. */
uint32_t cpu_runnable_others(void);

/* Busy when others used over 10% of the CPUs, the hypervisor stole over 3%,
 * or another process's thread was waiting to run with this one idle. Writes
 * why into why (cap bytes; "" when quiet). Unknown counters are quiet. */
bool cpu_contention_busy(const cpu_contention *c, char *why, size_t cap);

#endif
