/* `tps machine`: this machine's physical limits (read bandwidth, peak int8
 * and fp32 rates), measured and cached. Every run measures; a cached figure
 * is only ever raised by it (a busy machine only slows a measurement down,
 * so the best seen is the truest), and `--redo` replaces the cache with this
 * run's. Every "% of the roofline" tps prints (generate, /metrics, the
 * report) is read against these figures. A first measurement taken while
 * the machine was busy is said to be so and not cached, unless --cache-busy
 * asks (the cache then carries the mark, and every figure read against it
 * says so). Not here: measuring (kernels/machine.h). */
#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/opt.h"
#include "kernels/machine.h"

typedef struct machine_opts {
    int threads;
    bool redo, json, cache_busy;
} machine_opts;

#define M(field) offsetof(machine_opts, field)
static const opt_row machine_rows[] = {
    {"--threads", .kind = OPT_INT, .off = M(threads), .min = 1, .max = 4096,
     .help = "threads to measure with (default: all cores, as tps serve)"},
    {"--redo", .kind = OPT_FLAG, .off = M(redo),
     .help = "replace the cache with this run's figures, even lower ones\n(without it a cached "
             "figure is only ever raised)"},
    {"--cache-busy", .kind = OPT_FLAG, .off = M(cache_busy),
     .help = "cache the figures even when the machine was busy\n(marked so: every reading against "
             "them says it)"},
    {"--json", .kind = OPT_FLAG, .off = M(json), .help = "print JSON"},
    {0},
};

static const opt_cmd machine_cmd = {
    .prog = "tps machine",
    .usage = "usage: tps machine [--threads N] [--redo] [--cache-busy] [--json]\n"
             "\n"
             "This machine's limits: read bandwidth (a read-only stream far larger than the\n"
             "caches: the weight-stream pattern), peak int8 multiply-adds and fp32 FMA flops\n"
             "per second on N threads. Measured in three rounds (about a second in all), each\n"
             "figure the best of the rounds: another process can only slow a round down. A\n"
             "round is busy when other processes ran (their CPU time, steal time and threads\n"
             "waiting to run, from /proc); that check can miss contention (a build's memory\n"
             "traffic), so nothing depends on it catching it. Cached in $XDG_CACHE_HOME/tps\n"
             "or ~/.cache/tps; tps generate, tps serve's /metrics and the report read achieved\n"
             "figures against them. Each run keeps the best of the cache and its own rounds:\n"
             "a cached figure is never lowered without --redo. A decode window of tps generate\n"
             "that reads a model too big for the last-level cache faster than the cached read\n"
             "bandwidth replaces it (the cache names the window). When every round of a first\n"
             "measurement was busy the figures are printed as busy and not cached.\n"
             "\n",
    .rows = machine_rows,
};

/* Prints m (JSON or lines); run: this run's own measurement; cached: a
 * cache was there (m is the best of it and run); saved: m went into it. */
static void machine_print_json(const machine_limits *m, const machine_limits *run, bool cached,
                               bool saved, const char *path) {
    json_t *j = json_pack(
        "{s:s, s:i, s:f, s:s, s:f, s:i, s:f, s:b, s:b, s:s, s:b, s:s, s:{s:f, s:f, s:f, s:b}}",
        "cpu", m->cpu, "threads", m->threads, "read_gbs", m->read_gbs, "read_from", m->read_from,
        "int8_gops", m->int8_gops, "int8_bits", m->int8_bits, "fp32_gflops", m->fp32_gflops,
        "cached", cached, "saved", saved, "cache", path, "busy", m->busy, "busy_why", m->busy_why,
        "this_run", "read_gbs", run->read_gbs, "int8_gops", run->int8_gops, "fp32_gflops",
        run->fp32_gflops, "busy", run->busy);
    char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (t) printf("%s\n", t);
    free(t);
    json_decref(j);
}

static void machine_print(const machine_opts *o, const machine_limits *m, const machine_limits *run,
                          bool cached, bool saved, const char *path) {
    if (o->json) {
        machine_print_json(m, run, cached, saved, path);
        return;
    }
    printf("cpu            %s\n"
           "threads        %d\n"
           "read bandwidth %.1f GB/s (%s)\n"
           "int8 mul-add   %.0f G/s (%d-bit vectors)\n"
           "fp32 FMA       %.0f GFLOP/s\n",
           m->cpu, m->threads, m->read_gbs, m->read_from[0] ? m->read_from : "tps machine",
           m->int8_gops, m->int8_bits, m->fp32_gflops);
    if (m->busy)
        printf("busy           measured while the machine was busy (%s): these are the "
               "contention's figures, below this machine's own\n",
               m->busy_why);
    if (cached)
        printf("this run       read %.1f GB/s, int8 %.0f G/s, fp32 %.0f GFLOP/s%s\n"
               "%s %s: each figure the best of the cache and this run (a cached figure is "
               "never lowered; --redo replaces them)\n",
               run->read_gbs, run->int8_gops, run->fp32_gflops, run->busy ? " (busy)" : "",
               saved ? "raised in" : "kept in", path);
    else if (saved)
        printf("measured, cached in %s\n", path);
    else
        printf("measured, not cached: the next command measures again (run tps machine on a "
               "quiet machine, or --cache-busy to keep these)\n");
}

/* Into m: this run's measurement (into run too), merged into the cache
 * unless redo. *cached: there was one; *saved: m went into it. */
static int machine_update(const machine_opts *o, machine_limits *m, machine_limits *run,
                          bool *cached, bool *saved, tps_err *err) {
    machine_limits cache;
    tps_err ignored = {{0}};
    *cached =
        !o->redo && machine_cache_load(&cache, o->threads, machine_int8_bits(), &ignored) == 0;
    int rc = machine_measure(run, o->threads, 512, err);
    if (rc) return rc;
    *m = *run;
    if (*cached) {
        *m = cache;
        if (!machine_limits_keep_best(m, run)) return 0;
    } else if (run->busy && !o->cache_busy) {
        return 0;
    }
    rc = machine_cache_save(m, err);
    *saved = !rc;
    return rc;
}

int cli_machine(int argc, char **argv) {
    machine_opts o = {.threads = (int)sysconf(_SC_NPROCESSORS_ONLN)};
    int prc = opt_main(&machine_cmd, &o, argc, argv);
    if (prc >= 0) return prc;
    machine_limits m, run;
    tps_err err = {{0}};
    bool cached = false, saved = false;
    if (machine_update(&o, &m, &run, &cached, &saved, &err)) {
        fprintf(stderr, "tps machine: %s\n", err.msg);
        return 1;
    }
    char path[4200] = "";
    (void)machine_cache_path(path, sizeof path, o.threads, machine_int8_bits(), &err);
    machine_print(&o, &m, &run, cached, saved, path);
    return 0;
}
