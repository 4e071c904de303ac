/* A machine-limits cache planted for a test (machine_plant.h). */
#include "support/machine_plant.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void machine_plant(char *dir, machine_limits *m) {
    cr_assert_not_null(mkdtemp(dir));
    cr_assert_eq(setenv("XDG_CACHE_HOME", dir, 1), 0);
    m->int8_bits = machine_int8_bits();
    machine_cpu_name(m->cpu, sizeof m->cpu);
    tps_err err = {{0}};
    cr_assert_eq(machine_cache_save(m, &err), 0, "%s", err.msg);
}

machine_limits machine_plant_read(char *dir, int threads, double read_gbs) {
    machine_limits m = {.threads = threads, .read_gbs = read_gbs, .int8_gops = 1, .fp32_gflops = 1};
    snprintf(m.read_from, sizeof m.read_from, "tps machine while a build ran");
    machine_plant(dir, &m);
    return m;
}

machine_limits machine_planted(int threads) {
    machine_limits m;
    tps_err err = {{0}};
    cr_assert_eq(machine_cache_load(&m, threads, machine_int8_bits(), &err), 0, "%s", err.msg);
    return m;
}

void machine_unplant(const char *dir, int threads) {
    char path[4200];
    tps_err err = {{0}};
    cr_assert_eq(machine_cache_path(path, sizeof path, threads, machine_int8_bits(), &err), 0);
    unlink(path);
    snprintf(path, sizeof path, "%s/tps", dir);
    rmdir(path);
    rmdir(dir);
    unsetenv("XDG_CACHE_HOME");
}
