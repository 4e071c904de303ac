/* Measures this machine's limits (metrics/roofline.h) with the kernels'
 * thread pool: a read-only stream over a buffer far larger than the last-
 * level cache (the weight-stream pattern), and peak int8 multiply-add and
 * fp32 FMA rates in registers. In three rounds, each with the CPU counters
 * read around it (metrics/cpu_load.h): a shared machine only ever slows a
 * run down, so each figure is the best of all rounds, marked busy (with
 * why) when none was quiet. About a second for 256 MiB. A limit below what
 * the machine was seen to do is no limit: machine_limits_saw raises the
 * read bandwidth to a window of real work that read faster. Not here: the
 * cache file's format (metrics/roofline.h). */
#ifndef TPS_KERNELS_MACHINE_H
#define TPS_KERNELS_MACHINE_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels/pool.h"
#include "metrics/roofline.h"

int machine_measure(machine_limits *out, int n_threads, size_t mib, tps_err *err);

/* The int8 vector width this build measures (and multiplies) with: 512,
 * 256 or 32 bits; the key of its cache file. */
int machine_int8_bits(void);

/* The cached limits for n_threads and this build's int8 width, measured
 * when there are none or they are for another CPU, and cached only when
 * the machine was quiet: a busy measurement (out->busy) serves this call
 * alone, and the next call measures again. */
int machine_limits_get(machine_limits *out, int n_threads, tps_err *err);

/* A window of real work (window: what it was, in words, "decode window of
 * tps generate -m M") read read_gbs GB/s, bytes_per_step bytes a step.
 * When that work cannot sit in a last-level cache of llc_bytes
 * (roofline_dram_sized; machine_llc_bytes() for this machine) and read
 * faster than m->read_gbs, m's figure was no limit: it becomes read_gbs,
 * read_from names the window and the time, and the cache file takes it
 * (never lowered: merged with what the file holds now; a busy measurement
 * that was never cached stays uncached). Returns 1 when m was raised, 0
 * when not (m unknown, the work slower, or small enough for the caches),
 * -1 when raised but the cache could not be written (err says why). */
int machine_limits_saw(machine_limits *m, double read_gbs, double bytes_per_step, size_t llc_bytes,
                       const char *window, tps_err *err);

#endif
