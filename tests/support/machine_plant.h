/* A machine-limits cache planted for a test (tests only): a fresh
 * $XDG_CACHE_HOME holding the figures the test chooses, read back, then
 * removed. Asserts (Criterion) on any failure. Not a measurement: nothing
 * here runs `tps machine`. */
#ifndef TPS_TESTS_MACHINE_PLANT_H
#define TPS_TESTS_MACHINE_PLANT_H

#include "kernels/machine.h"

/* Points XDG_CACHE_HOME at a fresh folder (dir: a mkdtemp template,
 * rewritten) and saves *m there, its cpu named as this machine's and its
 * int8_bits this build's (both written into *m). */
void machine_plant(char *dir, machine_limits *m);
/* machine_plant of a build-time measurement for threads: read_gbs, 1 for
 * the compute figures, read_from "tps machine while a build ran". */
machine_limits machine_plant_read(char *dir, int threads, double read_gbs);
/* The cached limits for threads (this build's vector width), asserting
 * they load. */
machine_limits machine_planted(int threads);
/* Removes the cache file for threads, dir and its tps folder; unsets
 * XDG_CACHE_HOME. */
void machine_unplant(const char *dir, int threads);

#endif
