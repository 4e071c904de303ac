/* Limits that cannot be stale: a read bandwidth below what this machine
 * was seen to read is no limit. A window of work too big for the last-level
 * cache that read faster than the cached figure replaces it (the cache
 * names the window); `tps machine` keeps the best of the cache and its own
 * rounds, lowering nothing without --redo; and the report reads a point too
 * big for the caches against what it read, never above 100%. Each test
 * plants its cache in a temporary $XDG_CACHE_HOME. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/report/report_set.h"
#include "kernels/machine.h"
#include "metrics/roofline.h"
#include "support/machine_plant.h"
#include "support/test_support.h"

#define MIB    ((size_t)1 << 20)
#define LLC_32 (32 * MIB) /* a 32 MiB last-level cache */

Test(machine_limits, a_window_that_read_faster_replaces_a_low_cached_figure_and_is_named) {
    char dir[] = "/tmp/tps-limits-saw-XXXXXX";
    machine_limits m = machine_plant_read(dir, 3, 2.3);
    tps_err err = {{0}};
    /* a 110M Q8_0 model's decode: 117 MB a step, far beyond 32 MiB */
    const char *win = "decode window of tps generate -m models/110M-q8_0.gguf";
    cr_expect_eq(machine_limits_saw(&m, 45.1, 117e6, LLC_32, win, &err), 1, "%s", err.msg);
    cr_expect_float_eq(m.read_gbs, 45.1, 1e-9);
    machine_limits got = machine_planted(3);
    cr_expect_float_eq(got.read_gbs, 45.1, 1e-3, "the cache still holds %.3f", got.read_gbs);
    cr_expect(strstr(got.read_from, win) != NULL, "read_from: %s", got.read_from);
    cr_expect(strstr(got.read_from, " at ") != NULL, "no time in: %s", got.read_from);
    cr_expect_float_eq(got.int8_gops, 1, 1e-9, "the other figures stay");
    /* a slower window says nothing; nor one whose bytes fit in the caches */
    cr_expect_eq(machine_limits_saw(&m, 30, 117e6, LLC_32, "slower", &err), 0);
    cr_expect_eq(machine_limits_saw(&m, 900, 16e6, LLC_32, "a 15M model", &err), 0);
    cr_expect_eq(machine_limits_saw(&m, 900, 117e6, 0, "unknown cache: 256 MiB", &err), 0);
    got = machine_planted(3);
    cr_expect_float_eq(got.read_gbs, 45.1, 1e-3);
    cr_expect(strstr(got.read_from, win) != NULL, "read_from: %s", got.read_from);
    machine_unplant(dir, 3);
}

Test(machine_limits, keep_best_raises_each_figure_and_never_lowers_one) {
    machine_limits a = {.read_gbs = 2.3, .int8_gops = 500, .fp32_gflops = 100, .busy = true};
    snprintf(a.read_from, sizeof a.read_from, "busy");
    machine_limits b = {.read_gbs = 40, .int8_gops = 400, .fp32_gflops = 120};
    snprintf(b.read_from, sizeof b.read_from, "quiet");
    cr_expect(machine_limits_keep_best(&a, &b));
    cr_expect_float_eq(a.read_gbs, 40, 1e-12);
    cr_expect_float_eq(a.int8_gops, 500, 1e-12, "a lower figure does not replace a higher");
    cr_expect_float_eq(a.fp32_gflops, 120, 1e-12);
    cr_expect_str_eq(a.read_from, "quiet");
    cr_expect(!a.busy, "the best is at least a quiet measurement's");
    cr_expect(!machine_limits_keep_best(&a, &b), "nothing rose");
}

static double json_read_gbs(const char *out) {
    const char *k = strstr(out, "\"read_gbs\":");
    cr_assert_not_null(k, "%s", out);
    return atof(k + strlen("\"read_gbs\":"));
}

/* One thread and 512 MiB: a few seconds a run. */
Test(machine_limits, tps_machine_keeps_the_best_of_cache_and_rounds_and_lowers_only_with_redo,
     .timeout = 180) {
    char dir[] = "/tmp/tps-limits-cli-XXXXXX";
    machine_plant_read(dir, 1, 999.0); /* above anything this machine reads */
    char *out;
    cr_assert_eq(run_tps("machine --threads 1 --json", false, &out), 0, "%s", out);
    cr_expect_float_eq(json_read_gbs(out), 999.0, 1e-6, "%s", out);
    free(out);
    cr_expect_float_eq(machine_planted(1).read_gbs, 999.0, 1e-3, "tps machine lowered the cache");
    cr_assert_eq(run_tps("machine --threads 1 --redo --json", false, &out), 0, "%s", out);
    const double measured = json_read_gbs(out);
    free(out);
    cr_expect_lt(measured, 999.0, "--redo replaces the cache with this run's figures");
    machine_unplant(dir, 1);

    char low[] = "/tmp/tps-limits-cli-XXXXXX";
    machine_plant_read(low, 1, 0.001); /* below anything this machine reads */
    cr_assert_eq(run_tps("machine --threads 1", true, &out), 0, "%s", out);
    free(out);
    machine_limits got = machine_planted(1);
    cr_expect_gt(got.read_gbs, 0.001, "a low cached figure was kept over a faster round");
    cr_expect(strstr(got.read_from, "tps machine: a 512 MiB read stream") != NULL, "%s",
              got.read_from);
    machine_unplant(low, 1);
}

/* A point of the report: bytes_per_step a step over 100 steps at gbs,
 * read against a server whose tps machine said server_gbs. */
static rset_point point(const char *label, double bytes_per_step, double gbs, double server_gbs) {
    rset_point p = {.has_server = true,
                    .srv = {.steps = 100,
                            .generation_tokens = 400,
                            .weight_bytes = bytes_per_step * 100,
                            .step_seconds = bytes_per_step * 100 / (gbs * 1e9),
                            .machine_read_bps = server_gbs * 1e9}};
    snprintf(p.label, sizeof p.label, "%s", label);
    snprintf(p.source, sizeof p.source, "%s.json", label);
    return p;
}

Test(report_limit, a_point_too_big_for_the_caches_never_reads_above_100_percent) {
    rset s[2];
    rset_init(&s[0]);
    rset_init(&s[1]);
    rset_point big = point("110M-q8_0", 117e6, 45.1, 2.3), small = point("15M-q8_0", 16e6, 30, 2.3);
    rset_point elsewhere = point("another machine", 117e6, 10, 12);
    s[0].p = &big, s[0].n = 1;
    s[1].p = (rset_point[]){small, elsewhere}, s[1].n = 2;
    const rset_limit l = {.llc_bytes = LLC_32};
    rset_limit_apply(s, 2, &l);
    cr_expect_leq(rset_point_bw_fraction(&s[0].p[0]), 1.0 + 1e-12, "%.1f%% of the bandwidth",
                  100 * rset_point_bw_fraction(&s[0].p[0]));
    const char *why = rset_point_bw_flag(&s[0].p[0]);
    cr_assert_not_null(why, "a raised limit says so");
    cr_expect(strstr(why, RSET_LIMIT_RAISED) && strstr(why, "2.3 GB/s") && strstr(why, "45.1"),
              "%s", why);
    /* the same server's other points are read against what was seen, too */
    cr_expect_float_eq(rset_point_bw_fraction(&s[1].p[0]), 30 / 45.1, 1e-9);
    /* another machine's figure is its own */
    cr_expect_float_eq(rset_point_bw_fraction(&s[1].p[1]), 10.0 / 12, 1e-9);
    cr_expect_null(rset_point_bw_flag(&s[1].p[1]));
    char line[640];
    rset_limit_describe(line, sizeof line, s, 2, &l);
    cr_expect(strstr(line, "raised to 45.1 GB/s") != NULL, "%s", line);

    /* a given figure (the demo's fresh measurement) above what any point read */
    const rset_limit given = {
        .read_bps = 50e9, .from = "tps machine at 10:00", .llc_bytes = LLC_32};
    rset_limit_apply(s, 2, &given);
    cr_expect_float_eq(rset_point_bw_fraction(&s[0].p[0]), 45.1 / 50, 1e-9);
    cr_expect_null(rset_point_bw_flag(&s[0].p[0]));
    rset_limit_describe(line, sizeof line, s, 2, &given);
    cr_expect(strstr(line, "50.0 GB/s (tps machine at 10:00)") != NULL, "%s", line);

    /* a model that fits in the caches may read past DRAM's figure: flagged, not raised */
    s[0].p[0] = point("tiny", 1e6, 45.1, 2.3);
    rset_limit_apply(s, 1, &l);
    cr_expect_gt(rset_point_bw_fraction(&s[0].p[0]), 1.0);
    cr_expect(strstr(rset_point_bw_flag(&s[0].p[0]), "caches") != NULL);
}
