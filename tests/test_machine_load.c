/* The machine's limits cache (one measurement per vector width) and how a
 * busy machine is told apart: other processes' CPU time, the hypervisor's
 * steal over any interval, a roofline share above the limit or of a busy
 * limit, and a measurement under a busy loop flagged and never cached. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "kernels/machine.h"
#include "metrics/cpu_load.h"

/* ---- the machine-limits cache --------------------------------------------- */

Test(machine_cache, round_trips_and_keeps_one_measurement_per_vector_width) {
    char dir[] = "/tmp/tps-machine-cache-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    cr_assert_eq(setenv("XDG_CACHE_HOME", dir, 1), 0);
    tps_err err = {{0}};
    machine_limits m = {.threads = 3, .read_gbs = 40.5, .int8_gops = 600, .fp32_gflops = 200};
    machine_cpu_name(m.cpu, sizeof m.cpu);
    m.int8_bits = 512;
    cr_assert_eq(machine_cache_save(&m, &err), 0, "%s", err.msg);
    machine_limits got;
    cr_assert_eq(machine_cache_load(&got, 3, 512, &err), 0, "%s", err.msg);
    cr_assert_eq(got.int8_bits, 512);
    cr_assert_float_eq(got.int8_gops, 600, 1e-9);
    /* an AVX2 build on the same machine measures with 256-bit vectors: its
     * peak is another figure, kept beside the other, not over it */
    cr_assert_eq(machine_cache_load(&got, 3, 256, &err), TPS_ENOENT);
    m.int8_bits = 256;
    m.int8_gops = 230;
    cr_assert_eq(machine_cache_save(&m, &err), 0, "%s", err.msg);
    cr_assert_eq(machine_cache_load(&got, 3, 256, &err), 0, "%s", err.msg);
    cr_assert_float_eq(got.int8_gops, 230, 1e-9);
    cr_assert_eq(machine_cache_load(&got, 3, 512, &err), 0, "%s", err.msg);
    cr_assert_float_eq(got.int8_gops, 600, 1e-9);
    cr_assert(!got.busy);
    /* a busy measurement kept on purpose (tps machine --cache-busy) reads back busy */
    m.busy = true;
    snprintf(m.busy_why, sizeof m.busy_why, "other processes used 50%% of the CPUs");
    cr_assert_eq(machine_cache_save(&m, &err), 0, "%s", err.msg);
    cr_assert_eq(machine_cache_load(&got, 3, 256, &err), 0, "%s", err.msg);
    cr_assert(got.busy);
    cr_assert_str_eq(got.busy_why, m.busy_why);
    m.busy = false;
    /* this build's own width is what machine_limits_get keys its cache by */
    machine_limits mine;
    cr_assert_eq(machine_measure(&mine, 1, 8, &err), 0, "%s", err.msg);
    cr_assert_eq(mine.int8_bits, machine_int8_bits());
    /* a file whose width is not its name's, or from before the width was
     * recorded, does not load */
    char path[4200];
    cr_assert_eq(machine_cache_path(path, sizeof path, 3, 512, &err), 0);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f,
            "cpu %s\nthreads 3\nread_gbs 40\nint8_gops 300\nint8_bits 256\nfp32_gflops 200\n"
            "measured_s 1\n",
            m.cpu);
    fclose(f);
    cr_assert_eq(machine_cache_load(&got, 3, 512, &err), TPS_EINVAL);
    f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f, "cpu %s\nthreads 3\nread_gbs 40\nint8_gops 300\nfp32_gflops 200\nmeasured_s 1\n",
            m.cpu);
    fclose(f);
    cr_assert_neq(machine_cache_load(&got, 3, 512, &err), 0);
    unlink(path);
    cr_assert_eq(machine_cache_path(path, sizeof path, 3, 256, &err), 0);
    unlink(path);
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/tps", dir);
    rmdir(sub);
    rmdir(dir);
}

/* ---- a busy machine ---------------------------------------------------------- */

Test(cpu_load, others_are_the_busy_time_this_process_did_not_use) {
    const char *stat0 = "cpu  100 0 50 800 10 0 0 40 0 0\ncpu0 50 0 25 400 5 0 0 20 0 0\n"
                        "intr 1\nprocs_running 3\nprocs_blocked 0\n";
    const char *stat1 = "cpu  400 0 150 1000 10 0 0 40 0 0\ncpu0 200 0 75 500 5 0 0 20 0 0\n"
                        "procs_running 1\n";
    /* pid (comm with ) and spaces) state ppid ... utime stime at fields 14, 15 */
    const char *self0 = "42 (a b) c) R 1 1 1 0 -1 0 0 0 0 0 100 20 0 0 20 0 1";
    const char *self1 = "42 (a b) c) R 1 1 1 0 -1 0 0 0 0 0 200 120 0 0 20 0 1";
    cpu_sample a, b;
    cr_assert(cpu_sample_parse(&a, stat0, self0));
    cr_assert(cpu_sample_parse(&b, stat1, self1));
    cr_expect_eq(a.total, 1000);
    cr_expect_eq(a.busy, 150);
    cr_expect_eq(a.steal, 40);
    cr_expect_eq(a.own, 120);
    cr_expect_eq(a.running, 3);
    /* 600 ticks passed; 400 were busy, 200 of them this process's */
    cpu_contention c = cpu_contention_between(&a, &b);
    cr_assert(c.known);
    cr_expect_float_eq(c.others, 200.0 / 600.0, 1e-12);
    cr_expect_float_eq(c.steal, 0, 1e-12);
    char why[160];
    cr_expect(cpu_contention_busy(&c, why, sizeof why));
    cr_expect(strstr(why, "other processes used 33% of the CPUs") != NULL, "%s", why);
    c.others = 0.02;
    cr_expect(!cpu_contention_busy(&c, why, sizeof why), "%s", why);
    c.runnable = 2;
    cr_expect(cpu_contention_busy(&c, why, sizeof why));
    cr_expect(strstr(why, "2 threads of other processes waiting to run") != NULL, "%s", why);
    cr_expect(!cpu_sample_parse(&a, "intr 1\n", self0), "no cpu line");
    cr_expect(!cpu_sample_parse(&a, stat0, "42 (x"), "no utime");
}

Test(roofline_flag, a_share_above_the_limit_or_of_a_busy_limit_says_why) {
    machine_limits quiet = {.read_gbs = 10}, busy = {.read_gbs = 10, .busy = true};
    cr_expect_null(roofline_flag(0.8, &quiet, true));
    cr_expect_null(roofline_flag(1.0, &quiet, true), "100%% is at the limit, not above it");
    cr_expect(strstr(roofline_flag(1.3, &quiet, true), "caches") != NULL);
    cr_expect(strstr(roofline_flag(1.3, &quiet, false), "no computation can be") != NULL);
    cr_expect(strstr(roofline_flag(0.5, &busy, true), "busy") != NULL);
}

/* Spins for at most seconds (a bounded busy loop in a child process). */
static pid_t spin_child(double seconds) {
    pid_t pid = fork();
    if (pid == 0) {
        const uint64_t end = tps_now_ns() + (uint64_t)(seconds * 1e9);
        volatile uint64_t x = 0;
        while (tps_now_ns() < end)
            for (int k = 0; k < 100000; k++)
                x += (uint64_t)k;
        (void)x;
        _exit(0);
    }
    return pid;
}

/* Under a busy loop on every core, the limits measured are the contention's:
 * flagged busy, with why, and not cached, so the next caller measures again. */
Test(machine_limits, a_measurement_under_a_busy_loop_is_flagged_and_not_cached, .timeout = 120) {
    char dir[] = "/tmp/tps-machine-busy-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    cr_assert_eq(setenv("XDG_CACHE_HOME", dir, 1), 0);
    const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    pid_t kids[64];
    long nk = 0;
    for (; nk < ncpu + 1 && nk < 64; nk++)
        cr_assert_gt(kids[nk] = spin_child(60), 0);
    machine_limits m;
    tps_err err = {{0}};
    int rc = machine_limits_get(&m, 1, &err);
    for (long k = 0; k < nk; k++) {
        kill(kids[k], SIGKILL);
        waitpid(kids[k], NULL, 0);
    }
    cr_assert_eq(rc, 0, "%s", err.msg);
    cr_expect(m.busy, "measured beside %ld busy loops, yet quiet", nk);
    cr_expect(m.busy_why[0] != 0);
    machine_limits got;
    cr_expect_eq(machine_cache_load(&got, 1, machine_int8_bits(), &err), TPS_ENOENT,
                 "a busy measurement was cached");
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/tps", dir);
    rmdir(sub);
    rmdir(dir);
    unsetenv("XDG_CACHE_HOME");
}

/* A run's steal per bin from readings every so often: each counter linear
 * between two readings, so a bin between them takes its share of both. */
Test(cpu_load, steal_over_any_interval_between_readings) {
    const uint64_t S = 1000000000ull;
    /* 200 ticks a second (2 CPUs); none stolen in the first second, half
     * of the second, a quarter of the third */
    const cpu_tick t[] = {
        {1 * S, 1000, 10}, {2 * S, 1200, 10}, {3 * S, 1400, 110}, {4 * S, 1600, 160}};
    cr_expect_float_eq(cpu_ticks_steal(t, 4, 1 * S, 2 * S), 0.0, 1e-12);
    cr_expect_float_eq(cpu_ticks_steal(t, 4, 2 * S, 3 * S), 0.5, 1e-12);
    cr_expect_float_eq(cpu_ticks_steal(t, 4, 1 * S, 4 * S), 150.0 / 600.0, 1e-12);
    /* half a second of none, half of half */
    cr_expect_float_eq(cpu_ticks_steal(t, 4, 1 * S + S / 2, 2 * S + S / 2), 0.25, 1e-12);
    cr_expect_float_eq(cpu_ticks_steal(t, 4, 3 * S + S / 2, 4 * S), 0.25, 1e-12);
    cr_expect_eq(cpu_ticks_steal(t, 4, S / 2, 2 * S), -1, "before the first reading");
    cr_expect_eq(cpu_ticks_steal(t, 4, 3 * S, 5 * S), -1, "after the last");
    cr_expect_eq(cpu_ticks_steal(t, 1, 1 * S, 1 * S), -1, "one reading covers nothing");
    cr_expect_eq(cpu_ticks_steal(t, 4, 2 * S, 2 * S), -1, "no time");
    cr_expect_eq(cpu_ticks_steal(t, 4, 2 * S, 2 * S + S / 4), -1, "50 ticks: too coarse");
}
