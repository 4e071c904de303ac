/* How far a figure is from the machine's physical limit: the measured
 * limits (read bandwidth, peak int8 and fp32 rates: kernels/machine.c
 * measures them), their cache file, and the arithmetic that turns a
 * step's bytes and multiply-adds into achieved GB/s and a fraction of the
 * roofline. Pure data and file I/O; nothing here measures. */
#ifndef TPS_METRICS_ROOFLINE_H
#define TPS_METRICS_ROOFLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef struct machine_limits {
    char cpu[96];        /* /proc/cpuinfo model name */
    int threads;         /* threads the rates were measured with */
    double read_gbs;     /* read-only stream over arrays far beyond the LLC, GB/s */
    double int8_gops;    /* int8 multiply-adds per second, 1e9 */
    int int8_bits;       /* vector width of the instruction int8_gops was measured with */
    double fp32_gflops;  /* fp32 FMA flops per second, 1e9 */
    uint64_t measured_s; /* wall-clock time of the measurement (label only) */
    /* Every round of the measurement ran while the machine was busy
     * (metrics/cpu_load.h says how that is told): the figures are the
     * contention's, below the machine's own. Never cached unless asked
     * (tps machine --cache-busy), and every figure read against them says so. */
    bool busy;
    char busy_why[160]; /* the least busy round's contention, in words; "" when quiet */
    /* What read read_gbs, in words: "tps machine (best of 3 rounds) at
     * 2026-12-05 10:00 UTC", or a window of real work that read faster than
     * the measurement ("decode window of tps generate -m M at T"); "" for a
     * cache written before this was kept. */
    char read_from[200];
} machine_limits;

/* Whether the machine's own limits can only be above m's: each figure is
 * the most any measurement or window was seen to do (contention only ever
 * slows a run down, so a higher figure is never wrong and a lower one says
 * nothing). Raises into's figures to m's where m's are higher (read_from
 * follows read_gbs) and clears busy when either side was quiet; true when
 * any figure rose. Both must be of one CPU, thread count and width. */
bool machine_limits_keep_best(machine_limits *into, const machine_limits *m);

/* The last-level cache's size in bytes (the largest cache of cpu0 in
 * /sys/devices/system/cpu/cpu0/cache, else sysconf); 0 when it cannot be told. */
size_t machine_llc_bytes(void);
/* Below this a model of unknown cache size may sit in the caches. */
#define ROOFLINE_DRAM_UNKNOWN_LLC ((size_t)256 << 20)
/* Whether work that reads bytes_per_step a step cannot sit in a last-level
 * cache of llc_bytes (0: unknown, then ROOFLINE_DRAM_UNKNOWN_LLC): its reads
 * come from DRAM, so no reading of it can honestly exceed the machine's read
 * bandwidth, and one that does shows the limit was too low. */
bool roofline_dram_sized(double bytes_per_step, size_t llc_bytes);

/* The cache file: $XDG_CACHE_HOME/tps/machine-T-B.txt, else
 * $HOME/.cache/tps/machine-T-B.txt (T: threads, B: the int8 vector width
 * a build measures with, so that builds of two kernel tiers on one machine
 * keep a measurement each instead of redoing the other's); into buf. */
int machine_cache_path(char *buf, size_t cap, int threads, int int8_bits, tps_err *err);
/* Reads the cache for threads and int8_bits; TPS_ENOENT when absent,
 * TPS_EINVAL when it is for another CPU or does not parse (measure again
 * then). A measurement cached with --cache-busy comes back with busy set. */
int machine_cache_load(machine_limits *m, int threads, int int8_bits, tps_err *err);
/* Writes the cache atomically (a temporary file renamed over it), busy
 * flag and why included: whether a busy measurement is cached at all is
 * the caller's decision (kernels/machine.h). */
int machine_cache_save(const machine_limits *m, tps_err *err);
/* This CPU's model name into buf ("unknown" when /proc says nothing). */
void machine_cpu_name(char *buf, size_t cap);

/* The work of some steps: bytes read (weights and KV) and multiply-adds. */
typedef struct roofline_work {
    double weight_bytes, kv_bytes, macs, seconds;
} roofline_work;

/* The least time the work could take on m (bytes at read bandwidth, or
 * multiply-adds at the int8 rate, whichever is longer) over the time it
 * took: 1.0 is at the roofline. 0 when m or w is empty. */
double roofline_fraction(const roofline_work *w, const machine_limits *m);

/* Why a reading of `fraction` of m's limit needs a word, or NULL when it
 * needs none. Above 1 (100%) a reading is not the machine's own speed: the
 * data sat in the CPU's caches (a model that fits in the last-level cache
 * reads faster than DRAM), or the limit was measured while the machine was
 * busy or is stale; read against limits measured while busy (m->busy), any
 * share is too high. Every place that prints such a share prints this. `bytes` says whether the
 * reading is of bandwidth (where data in the caches can exceed DRAM's) or of multiply-adds (where
 * nothing can). */
const char *roofline_flag(double fraction, const machine_limits *m, bool bytes);

#endif
