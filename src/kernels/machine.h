/* Measures this machine's limits (metrics/roofline.h) with the kernels'
 * thread pool: a read-only stream over a buffer far larger than the last-
 * level cache (the weight-stream pattern), and peak int8 multiply-add and
 * fp32 FMA rates in registers. In three rounds, each with the CPU counters
 * read around it (metrics/cpu_load.h): a shared machine only ever slows a
 * run down, so each figure is the best of the rounds nobody else ran in;
 * when none was quiet, the best of all, marked busy with why. About a
 * second for 256 MiB. Not here: the cache file (metrics/roofline.h). */
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

#endif
