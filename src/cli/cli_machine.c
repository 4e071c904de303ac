/* `tps machine`: this machine's physical limits (read bandwidth, peak int8
 * and fp32 rates), measured once and cached; `--redo` measures again. Every
 * "% of the roofline" tps prints (generate, /metrics, the report) is read
 * against these figures. */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/opt.h"
#include "kernels/machine.h"

typedef struct machine_opts {
    int threads;
    bool redo, json;
} machine_opts;

#define M(field) offsetof(machine_opts, field)
static const opt_row machine_rows[] = {
    {"--threads", .kind = OPT_INT, .off = M(threads), .min = 1, .max = 4096,
     .help = "threads to measure with (default: all cores, as tps serve)"},
    {"--redo", .kind = OPT_FLAG, .off = M(redo), .help = "measure again and replace the cache"},
    {"--json", .kind = OPT_FLAG, .off = M(json), .help = "print JSON"},
    {0},
};

static const opt_cmd machine_cmd = {
    .prog = "tps machine",
    .usage = "usage: tps machine [--threads N] [--redo] [--json]\n"
             "\n"
             "This machine's limits: read bandwidth (a read-only stream far larger than the\n"
             "caches: the weight-stream pattern), peak int8 multiply-adds and fp32 FMA flops\n"
             "per second on N threads. Measured once (about a second) and cached in\n"
             "$XDG_CACHE_HOME/tps or ~/.cache/tps; tps generate, tps serve's /metrics and the\n"
             "report read achieved figures against them.\n"
             "\n",
    .rows = machine_rows,
};

int cli_machine(int argc, char **argv) {
    machine_opts o = {.threads = (int)sysconf(_SC_NPROCESSORS_ONLN)};
    int prc = opt_main(&machine_cmd, &o, argc, argv);
    if (prc >= 0) return prc;
    machine_limits m;
    tps_err err = {{0}};
    int rc = 0;
    bool cached = false;
    if (!o.redo) cached = machine_cache_load(&m, o.threads, machine_int8_bits(), &err) == 0;
    if (!cached) {
        err = (tps_err){{0}};
        if ((rc = machine_measure(&m, o.threads, 512, &err)) == 0)
            rc = machine_cache_save(&m, &err);
    }
    if (rc) {
        fprintf(stderr, "tps machine: %s\n", err.msg);
        return 1;
    }
    char path[4200] = "";
    (void)machine_cache_path(path, sizeof path, o.threads, machine_int8_bits(), &err);
    if (o.json) {
        printf("{\"cpu\":\"%s\",\"threads\":%d,\"read_gbs\":%.2f,\"int8_gops\":%.1f,"
               "\"int8_bits\":%d,\"fp32_gflops\":%.1f,\"cached\":%s,\"cache\":\"%s\"}\n",
               m.cpu, m.threads, m.read_gbs, m.int8_gops, m.int8_bits, m.fp32_gflops,
               cached ? "true" : "false", path);
        return 0;
    }
    printf("cpu            %s\n"
           "threads        %d\n"
           "read bandwidth %.1f GB/s\n"
           "int8 mul-add   %.0f G/s (%d-bit vectors)\n"
           "fp32 FMA       %.0f GFLOP/s\n"
           "%s %s\n",
           m.cpu, m.threads, m.read_gbs, m.int8_gops, m.int8_bits, m.fp32_gflops,
           cached ? "cached in" : "measured, cached in", path);
    return 0;
}
