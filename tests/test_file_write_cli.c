/* Every output file a command is given, written safely (issue 48 item 4),
 * seen from the command line: a write that fails (/dev/full) exits non-zero
 * naming the path and the reason, and /dev/stdout is written in place (the
 * page, the JSON or the rows come out on stdout) for tps plan --json and
 * --steps, a capacity search's --json, tps report --html, tps bench
 * compare --json, tps sweep --json, and the engine's Chrome trace. No server: tps plan writes
 * results in tps bench's shape from a model file, and the sweep's points fail against a port
 * nothing listens on, which still writes its document. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/core/trace.h"
#include "support/test_support.h"

#define MODEL "models/stories260K.gguf"

static char dir[64];

static void rm_dir(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}

/* `tps <args>` exits 1 naming /dev/full (and why, when reason); the device
 * stays one. */
static void expect_full(const char *args, bool reason) {
    char *out = NULL;
    int rc = run_tps(args, true, &out);
    cr_expect_eq(rc, 1, "tps %s: exit %d: %s", args, rc, out);
    cr_expect(out && strstr(out, "'/dev/full'"), "tps %s: the path is missing: %s", args, out);
    if (reason)
        cr_expect(out && strstr(out, "No space left on device"), "tps %s: no reason in: %s", args,
                  out);
    free(out);
    struct stat st;
    cr_assert_eq(stat("/dev/full", &st), 0);
    cr_assert(S_ISCHR(st.st_mode), "/dev/full is no longer a device");
}

/* `tps <args>` exits 0 and its stdout (stderr dropped) holds says. */
static void expect_stdout(const char *args, const char *says) {
    char *out = NULL;
    int rc = run_tps(args, false, &out);
    cr_expect_eq(rc, 0, "tps %s: exit %d: %s", args, rc, out);
    cr_expect(out && strstr(out, says), "tps %s: no \"%s\" on stdout: %.400s", args, says, out);
    free(out);
}

Test(file_write_cli, plan_report_and_compare_name_a_failed_path_and_write_to_stdout,
     .timeout = 120) {
    REQUIRE_SHARED(MODEL);
    char *model = shared_path(MODEL);
    snprintf(dir, sizeof dir, "/tmp/tps-fw-cli-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    char load[768], args[2048];
    snprintf(load, sizeof load,
             "plan -m '%s' --concurrency 1 --requests 3 --input-len 16 --output-len 8 --quiet",
             model);
    snprintf(args, sizeof args, "%s --json %s/a.json", load, dir);
    assert_tps_ok(args);
    snprintf(args, sizeof args, "%s --json %s/b.json --seed 7", load, dir);
    assert_tps_ok(args);
    /* the result's writer (result_write_json) names the path and why */
    snprintf(args, sizeof args, "%s --json /dev/full", load);
    expect_full(args, true);
    /* a capacity search's document (capacity_write_json) */
    snprintf(args, sizeof args,
             "plan -m '%s' --find-max-rate --slo ttft=500 --duration 2 --input-len 16 "
             "--output-len 8 --quiet --json /dev/full",
             model);
    expect_full(args, true);
    memcpy(strstr(args, "/dev/full"), "/dev/stdout", sizeof "/dev/stdout");
    expect_stdout(args, "\"schema\": \"tps.bench.capacity\"");
    snprintf(args, sizeof args, "%s --steps /dev/full", load);
    expect_full(args, true);
    snprintf(args, sizeof args, "%s --steps /dev/stdout", load);
    expect_stdout(args, "t0,t1,t2,rows,prefill,decode");

    snprintf(args, sizeof args, "report %s/a.json --html /dev/full --svg %s/svg", dir, dir);
    expect_full(args, true);
    snprintf(args, sizeof args, "report %s/a.json --html /dev/stdout --svg %s/svg --quiet", dir,
             dir);
    expect_stdout(args, "<!doctype html>");

    snprintf(args, sizeof args, "bench compare %s/a.json %s/b.json --json /dev/full", dir, dir);
    expect_full(args, true);
    snprintf(args, sizeof args, "bench compare %s/a.json %s/b.json --json /dev/stdout", dir, dir);
    expect_stdout(args, "\"figures\"");
    rm_dir();
    free(model);
}

Test(file_write_cli, a_sweep_names_a_failed_path, .timeout = 60) {
    /* nothing listens on port 9: every point fails, the document is still
     * written (and the exit is 1 either way: the path must be named) */
    expect_full("sweep --url http://127.0.0.1:9 --concurrency 1 --requests 1 --output-len 2 "
                "--input-len 4 --json /dev/full --quiet",
                true);
}

Test(file_write_cli, the_engine_trace_names_a_failed_path_and_writes_to_a_fifo_in_place) {
    trace t;
    trace_init(&t, 0);
    trace_step s = {.t0 = 1000, .t1 = 5000, .decode_tokens = 1};
    trace_step_add(&t, &s);
    tps_err err = {{0}};
    cr_expect_eq(trace_write(&t, "/dev/full", &err), TPS_EIO);
    cr_expect(strstr(err.msg, "'/dev/full'") && strstr(err.msg, "No space left"), "%s", err.msg);
    cr_expect_eq(trace_write(&t, "/dev/null", &err), 0, "%s", err.msg);
    struct stat st;
    cr_assert_eq(stat("/dev/null", &st), 0);
    cr_assert(S_ISCHR(st.st_mode), "/dev/null is no longer a device");
    trace_free(&t);
}
