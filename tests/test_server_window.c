/* tps serve's step windows against a stale cached read bandwidth (issue 47):
 * a window of the engine's totals with enough step time, over a model too
 * big for the last-level cache, that read faster than the cache says
 * raises the figure, in the server's copy and in the cache file, naming
 * "step window of tps serve -m MODEL"; a short window goes on instead of
 * being read; a slower one, or one that fits in the caches, changes
 * nothing. The cache is planted in a temporary $XDG_CACHE_HOME. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/machine.h"
#include "metrics/roofline.h"
#include "server/http/server_window.h"
#include "support/machine_plant.h"

static size_t llc_32mib(void) {
    return (size_t)32 << 20;
}

static int llc_asked;
static size_t llc_counted(void) {
    llc_asked++;
    return llc_32mib();
}

Test(server_window, a_step_window_that_read_faster_raises_a_stale_cached_figure) {
    char dir[] = "/tmp/tps-server-window-XXXXXX";
    machine_limits m = machine_plant_read(dir, 5, 2.3); /* measured while the machine was busy */
    server_window start = {0};
    tps_err err = {{0}};
    double gbs = -1;
    /* 0.4 s of steps: too short to read; the window goes on */
    server_window now = {.step_s = 0.4, .bytes = 0.4 * 20e9, .steps = 40};
    cr_expect_eq(server_window_saw(&start, &now, &m, llc_counted, "m.gguf", &gbs, &err), 0);
    cr_expect_float_eq(start.step_s, 0.0, 1e-12, "a short window moved the start");
    cr_expect_float_eq(gbs, -1.0, 1e-12);
    /* 1.2 s and 120 steps of a 200 MB model at 20 GB/s: raised and cached */
    now = (server_window){.step_s = 1.2, .bytes = 1.2 * 20e9, .steps = 120};
    cr_expect_eq(server_window_saw(&start, &now, &m, llc_counted, "m.gguf", &gbs, &err), 1, "%s",
                 err.msg);
    cr_expect_float_eq(gbs, 20.0, 1e-9);
    cr_expect_float_eq(m.read_gbs, 20.0, 1e-9);
    cr_expect_float_eq(start.step_s, 1.2, 1e-12, "the next window starts here");
    machine_limits got = machine_planted(5);
    cr_expect_float_eq(got.read_gbs, 20.0, 1e-3, "the cache holds %.3f", got.read_gbs);
    cr_expect(strstr(got.read_from, "step window of tps serve -m m.gguf"), "%s", got.read_from);
    /* slower now (a prefill-heavy window): nothing changes, no sysfs read */
    llc_asked = 0;
    now = (server_window){.step_s = 3.2, .bytes = 1.2 * 20e9 + 2 * 15e9, .steps = 320};
    cr_expect_eq(server_window_saw(&start, &now, &m, llc_counted, "m.gguf", &gbs, &err), 0);
    cr_expect_float_eq(gbs, 15.0, 1e-9);
    cr_expect_eq(llc_asked, 0, "the cache size was asked for a slower window");
    cr_expect_float_eq(machine_planted(5).read_gbs, 20.0, 1e-3);
    machine_unplant(dir, 5);
}

Test(server_window, a_model_that_fits_in_the_caches_says_nothing_of_dram) {
    char dir[] = "/tmp/tps-server-window-XXXXXX";
    machine_limits m = machine_plant_read(dir, 5, 2.3);
    server_window start = {0};
    tps_err err = {{0}};
    /* 15 MB a step at 90 GB/s: the caches served it */
    server_window now = {.step_s = 2.0, .bytes = 2.0 * 90e9, .steps = 12000};
    cr_expect_eq(server_window_saw(&start, &now, &m, llc_32mib, "small.gguf", NULL, &err), 0);
    cr_expect_float_eq(m.read_gbs, 2.3, 1e-12);
    cr_expect_float_eq(machine_planted(5).read_gbs, 2.3, 1e-3);
    /* totals that went back (another engine): a new window, nothing read */
    now = (server_window){.step_s = 0.5, .bytes = 1e9, .steps = 10};
    cr_expect_eq(server_window_saw(&start, &now, &m, llc_32mib, "small.gguf", NULL, &err), 0);
    cr_expect_float_eq(start.step_s, 0.5, 1e-12);
    machine_unplant(dir, 5);
}
