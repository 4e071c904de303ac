/* `tps machine`: this machine's physical limits (read bandwidth, peak int8
 * and fp32 rates), measured once and cached; `--redo` measures again. Every
 * "% of the roofline" tps prints (generate, /metrics, the report) is read
 * against these figures. A measurement taken while the machine was busy is
 * said to be so and not cached, unless --cache-busy asks (the cache then
 * carries the mark, and every figure read against it says so). */
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
    {"--redo", .kind = OPT_FLAG, .off = M(redo), .help = "measure again and replace the cache"},
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
             "figure the best of the rounds in which no other process ran (other processes'\n"
             "CPU time, steal time and their threads waiting to run, from /proc), and cached\n"
             "in $XDG_CACHE_HOME/tps or ~/.cache/tps; tps generate, tps serve's /metrics and\n"
             "the report read achieved figures against them. When every round was busy the\n"
             "figures are printed as busy and not cached: the next command measures again.\n"
             "\n",
    .rows = machine_rows,
};

/* Prints m (JSON or lines); cached: it came from the cache; saved: it went into it. */
static void machine_print(const machine_opts *o, const machine_limits *m, bool cached, bool saved,
                          const char *path) {
    if (o->json) {
        json_t *j =
            json_pack("{s:s, s:i, s:f, s:f, s:i, s:f, s:b, s:b, s:s, s:b, s:s}", "cpu", m->cpu,
                      "threads", m->threads, "read_gbs", m->read_gbs, "int8_gops", m->int8_gops,
                      "int8_bits", m->int8_bits, "fp32_gflops", m->fp32_gflops, "cached", cached,
                      "saved", saved, "cache", path, "busy", m->busy, "busy_why", m->busy_why);
        char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
        if (t) printf("%s\n", t);
        free(t);
        json_decref(j);
        return;
    }
    printf("cpu            %s\n"
           "threads        %d\n"
           "read bandwidth %.1f GB/s\n"
           "int8 mul-add   %.0f G/s (%d-bit vectors)\n"
           "fp32 FMA       %.0f GFLOP/s\n",
           m->cpu, m->threads, m->read_gbs, m->int8_gops, m->int8_bits, m->fp32_gflops);
    if (m->busy)
        printf("busy           measured while the machine was busy (%s): these are the "
               "contention's figures, below this machine's own\n",
               m->busy_why);
    if (cached)
        printf("cached in %s\n", path);
    else if (saved)
        printf("measured, cached in %s\n", path);
    else
        printf("measured, not cached: the next command measures again (run tps machine on a "
               "quiet machine, or --cache-busy to keep these)\n");
}

int cli_machine(int argc, char **argv) {
    machine_opts o = {.threads = (int)sysconf(_SC_NPROCESSORS_ONLN)};
    int prc = opt_main(&machine_cmd, &o, argc, argv);
    if (prc >= 0) return prc;
    machine_limits m;
    tps_err err = {{0}};
    int rc = 0;
    bool cached = false, saved = false;
    if (!o.redo) cached = machine_cache_load(&m, o.threads, machine_int8_bits(), &err) == 0;
    if (!cached) {
        err = (tps_err){{0}};
        rc = machine_measure(&m, o.threads, 512, &err);
        if (!rc && (!m.busy || o.cache_busy)) rc = machine_cache_save(&m, &err), saved = !rc;
    }
    if (rc) {
        fprintf(stderr, "tps machine: %s\n", err.msg);
        return 1;
    }
    char path[4200] = "";
    (void)machine_cache_path(path, sizeof path, o.threads, machine_int8_bits(), &err);
    machine_print(&o, &m, cached, saved, path);
    return 0;
}
