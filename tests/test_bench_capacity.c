/* Capacity under an SLO (bench/experiment/capacity.h): the verdict rules on hand-made
 * probes, and the search against a fake server with one FIFO worker
 * (test_bench_fake.h, serial_ms) whose capacity is known: 50 ms a request is
 * 20 requests/s, and TTFT grows without bound above it. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/experiment/capacity.h"
#include "base/clock.h"
#include "support/test_support.h"
#include "support/bench_workload.h"
#include "test_bench_fake.h"

static bench_config base_config(const char *url, uint32_t cap) {
    return (bench_config){.base_url = url,
                          .concurrency = cap,
                          .arrival = LOAD_ARRIVAL_CONSTANT,
                          .burstiness = 1,
                          .timeout_s = 1.0,
                          .idle_timeout_s = 1.0,
                          .connect_timeout_s = 1.0,
                          .seed = 7};
}

/* SLO: TTFT 150 ms against a 50 ms service time. */
static capacity_opts slo_opts(void) {
    capacity_opts o = capacity_opts_default();
    o.slo.ttft_ns = 150 * TPS_NS_PER_MS;
    o.slo.tpot_ns =
        200 * TPS_NS_PER_MS; /* the ITL limit (gaps are 1 ms; slack for a busy machine) */
    o.probe_s = 1.5;
    o.time_budget_s = 120;
    return o;
}

/* ---- the verdict ------------------------------------------------------------------------ */

static capacity_probe good_probe(void) {
    return (capacity_probe){.rate = 10,
                            .duration_s = 2,
                            .scheduled = 20,
                            .sent = 20,
                            .completed = 20,
                            .good = 20,
                            .ttft_p99_ms = 60,
                            .itl_p99_ms = 2,
                            .e2e_p99_ms = 80,
                            .send_lag_p99_ms = 1};
}

Test(capacity_judge, passes_within_the_slo_and_fails_on_goodput_or_p99) {
    capacity_opts o = slo_opts();
    capacity_probe p = good_probe();
    capacity_judge(&p, &o);
    cr_expect(p.pass, "%s", p.why);
    cr_expect(!p.client_limited);
    cr_expect_float_eq(p.achieved_rate, 10.0, 1e-9);
    cr_expect_float_eq(p.good_fraction, 1.0, 1e-9);

    p = good_probe();
    p.good = 18; /* 90% < 95% */
    capacity_judge(&p, &o);
    cr_expect(!p.pass);
    cr_expect(strstr(p.why, "goodput 90.0% < 95.0%") != NULL, "%s", p.why);

    p = good_probe();
    p.good = 19; /* exactly 95%: the target is met with >= */
    capacity_judge(&p, &o);
    cr_expect(p.pass, "%s", p.why);

    p = good_probe();
    p.ttft_p99_ms = 151; /* 19 of 20 good, but the p99 is over */
    p.good = 19;
    capacity_judge(&p, &o);
    cr_expect(!p.pass);
    cr_expect(strstr(p.why, "TTFT p99 151.0 ms > 150.0 ms") != NULL, "%s", p.why);
    o.check_p99 = false;
    capacity_judge(&p, &o);
    cr_expect(p.pass, "goodput alone: %s", p.why);

    p = good_probe();
    p.sent = 25; /* 5 failed or cancelled requests count against the goodput */
    capacity_judge(&p, &o);
    cr_expect(!p.pass);
    cr_expect_float_eq(p.good_fraction, 0.8, 1e-9);
}

Test(capacity_judge, flags_a_client_that_cannot_keep_the_schedule) {
    capacity_opts o = slo_opts();
    cr_expect_float_eq(capacity_lag_limit_ms(&o), 37.5, 1e-9, "a quarter of the TTFT limit");
    capacity_probe p = good_probe();
    p.scheduled = 40; /* sent 20 of 40 */
    capacity_judge(&p, &o);
    cr_expect(p.client_limited);
    cr_expect(!p.pass, "a client-limited probe does not count as a pass");
    cr_expect(strstr(p.why, "sent 20 of 40 scheduled") != NULL, "%s", p.why);

    p = good_probe();
    p.send_lag_p99_ms = 40;
    capacity_judge(&p, &o);
    cr_expect(p.client_limited);
    cr_expect(strstr(p.why, "send lag p99 40.0 ms > 37.5 ms") != NULL, "%s", p.why);
    o.max_send_lag_ms = 100;
    capacity_judge(&p, &o);
    cr_expect(!p.client_limited && p.pass, "%s", p.why);
}

Test(capacity_search, refuses_a_search_without_an_slo) {
    capacity_opts o = capacity_opts_default();
    bench_config c = base_config("http://127.0.0.1:9", 4);
    workload wl;
    test_workload(&wl, 4, 16);
    capacity_result r;
    tps_err e = {{0}};
    cr_expect_eq(capacity_search(&r, &o, &c, &wl, NULL, NULL, &e), TPS_EINVAL);
    cr_expect(strstr(e.msg, "needs an SLO") != NULL, "%s", e.msg);
    o.slo.ttft_ns = 1;
    o.min_rate = 8;
    o.start_rate = 4;
    cr_expect_eq(capacity_search(&r, &o, &c, &wl, NULL, NULL, &e), TPS_EINVAL);
    workload_free(&wl);
}

/* ---- against a server whose latency grows with the rate --------------------------------- */

static void count_probe(const capacity_probe *p, size_t i, void *arg) {
    (void)p;
    *(size_t *)arg = i + 1;
}

/* A search against a fake server whose requests take 50 ms one at a time
 * (capacity 20 requests/s), 16 four-token requests, the client holding at
 * most max_inflight: asserted to run; printed. */
static void search_serial(capacity_result *r, const capacity_opts *o, uint32_t max_inflight,
                          capacity_probe_cb cb, void *arg) {
    fake_server s = {.mode = FAKE_OK, .tokens = 4, .gap_ms = 1, .serial_ms = 50};
    cr_assert_eq(fake_start(&s), 0);
    bench_config c = base_config(s.url, max_inflight);
    workload wl;
    test_workload(&wl, 4, 16);
    tps_err e = {{0}};
    cr_assert_eq(capacity_search(r, o, &c, &wl, cb, arg, &e), 0, "%s", e.msg);
    fake_stop(&s);
    capacity_print(stderr, r);
    workload_free(&wl);
}

/* Capacity 20 requests/s. Below it TTFT is ~50 ms; at rate R above it the
 * queue grows by (R/20 - 1) s each second, so over a 1.5 s probe more than 5%
 * of requests wait over the 100 ms of slack when R > ~21.4: the known answer
 * lies in [20, 21.4]. Start 10: 10, 20 pass; 40, 30, 25, 22.5 fail; then
 * 21.25 either way, and the bracket is within 10%. */
Test(capacity_search, finds_the_known_capacity_within_one_step, .timeout = 90) {
    capacity_opts o = slo_opts();
    o.start_rate = 10;
    o.max_rate = 160;
    o.precision = 0.1;
    o.max_probes = 10;
    o.check_p99 = false; /* goodput alone: one scheduling hiccup on a busy machine is 1 of 30 */
    capacity_result r;
    size_t seen = 0;
    uint64_t t0 = tps_now_ns();
    search_serial(&r, &o, 256, count_probe, &seen);
    double secs = tps_ns_to_s(tps_now_ns() - t0);
    cr_expect_eq(seen, r.n, "the callback saw every probe");
    cr_expect(r.n <= o.max_probes);
    cr_expect_eq(r.stop, CAP_STOP_CONVERGED, "stopped: %s", capacity_stop_name(r.stop));
    const double step = r.fail_rate - r.max_rate;
    cr_expect(step > 0 && step <= o.precision * r.max_rate + 1e-9, "step %.3f", step);
    cr_expect(r.max_rate >= 20 - step - 1e-9 && r.max_rate <= 21.4 + step,
              "max rate %.2f, step %.2f: the known answer is 20..21.4", r.max_rate, step);
    cr_expect(!r.client_limited);
    cr_expect(secs < 60, "took %.1f s", secs);

    json_t *j = capacity_to_json(&r, &o);
    cr_assert_not_null(j);
    cr_expect_str_eq(json_string_value(json_object_get(j, "schema")), CAPACITY_SCHEMA);
    cr_expect_float_eq(json_real_value(json_object_get(j, "max_rate")), r.max_rate, 1e-9);
    json_t *probes = json_object_get(j, "probes");
    cr_expect_eq(json_array_size(probes), r.n);
    json_t *p0 = json_array_get(probes, 0);
    cr_expect(json_is_true(json_object_get(p0, "pass")));
    json_t *res = json_object_get(p0, "result");
    cr_expect_str_eq(json_string_value(json_object_get(res, "schema")), BENCH_RESULT_SCHEMA);
    /* each probe read the hypervisor's steal on this machine (/proc/stat),
     * and says it as its result does */
    const json_t *st = json_object_get(res, "host");
    cr_expect(json_is_object(st) && r.probes[0].steal >= 0 && r.probes[0].steal <= 1 &&
                  json_number_value(json_object_get(p0, "steal")) == r.probes[0].steal &&
                  json_number_value(json_object_get(st, "steal")) == r.probes[0].steal,
              "probe 1's steal %.4f", r.probes[0].steal);
    cr_expect_float_eq(json_number_value(json_object_get(json_object_get(res, "config"), "rate")),
                       10.0, 1e-9);
    json_decref(j);
    capacity_result_free(&r);
}

/* On a shared VM the answer says what the hypervisor stole: the range
 * over the probes and the steal at the answer's two edges, from 3% (the
 * verdict's limit); the probe table has a steal column ("-" where not
 * read); the JSON keeps each probe's steal through a round trip. A quiet
 * machine, or probes that did not read it (a plan's), get no note. */
Test(capacity_answer, notes_the_steal_at_its_edges_on_a_shared_vm) {
    capacity_probe pr[3] = {{.rate = 1.0, .steal = 0.21, .pass = false},
                            {.rate = 0.5, .steal = 0.15, .pass = true},
                            {.rate = 0.75, .steal = 0.07, .pass = true}};
    for (size_t i = 0; i < 3; i++)
        snprintf(pr[i].why, sizeof pr[i].why, "test");
    capacity_result r = {.probes = pr, .n = 3, .max_rate = 0.75, .fail_rate = 1.0};
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    capacity_print(f, &r);
    fclose(f);
    cr_expect(strstr(text, "steal") && strstr(text, "21%  FAIL"), "%s", text);
    cr_expect(strstr(text, "stole 7-21% of the CPU time during the probes; the passing probe at "
                           "0.75: 7%; the failing one at 1.00: 21%"),
              "%s", text);
    free(text);

    capacity_opts o = capacity_opts_default();
    o.slo.ttft_ns = 1000000;
    json_t *j = capacity_to_json(&r, &o);
    capacity_result back;
    capacity_opts ob;
    tps_err e = {{0}};
    cr_assert_eq(capacity_from_json(&back, &ob, j, &e), 0, "%s", e.msg);
    cr_expect_eq(back.n, 3);
    for (size_t i = 0; i < 3 && i < back.n; i++)
        cr_expect_float_eq(back.probes[i].steal, pr[i].steal, 1e-12);
    capacity_result_free(&back);
    json_decref(j);

    for (size_t i = 0; i < 3; i++)
        pr[i].steal = i ? 0.02 : -1;
    f = open_memstream(&text, &len);
    capacity_print(f, &r);
    fclose(f);
    cr_expect(!strstr(text, "hypervisor") && strstr(text, "-  FAIL"), "a quiet machine: %s", text);
    free(text);
}

/* The in-flight cap of 1 holds sends back: at 40 requests/s against 50 ms
 * requests the client sends ~20/s and late, so the failure is the client's. */
Test(capacity_search, marks_an_answer_limited_by_the_client_and_stops_at_the_probe_bound,
     .timeout = 60) {
    capacity_opts o = slo_opts();
    o.start_rate = 40;
    o.probe_s = 1.0;
    o.max_probes = 1;
    capacity_result r;
    search_serial(&r, &o, 1, NULL, NULL);
    cr_assert_eq(r.n, 1);
    cr_expect_eq(r.stop, CAP_STOP_PROBES);
    cr_expect(!r.probes[0].pass);
    cr_expect(r.probes[0].client_limited, "%s", r.probes[0].why);
    cr_expect(r.probes[0].achieved_rate < 30, "%.1f", r.probes[0].achieved_rate);
    cr_expect(r.client_limited);
    cr_expect_eq(r.max_rate, 0);
    cr_expect_float_eq(r.fail_rate, 40, 1e-9);
    capacity_result_free(&r);
}

/* The CLI refuses a search it cannot run, saying what is missing, and runs
 * one against the fake server: one line per probe, then the answer. */
Test(capacity, cli_find_max_rate_needs_an_slo_and_a_duration_and_prints_each_probe, .timeout = 60) {
    char *out = NULL;
    int rc = run_tps("bench --find-max-rate --duration 1", true, &out);
    cr_expect_eq(rc, 2, "%s", out);
    cr_expect(out && strstr(out, "--find-max-rate needs --slo"), "%s", out);
    free(out);
    rc = run_tps("bench --find-max-rate --slo ttft_p99=100 --requests 5", true, &out);
    cr_expect_eq(rc, 2, "%s", out);
    free(out);
    rc = run_tps("bench --goodput-target 0.9 --slo ttft=100 --requests 5", true, &out);
    cr_expect_eq(rc, 2, "%s", out);
    cr_expect(out && strstr(out, "--goodput-target"), "%s", out);
    free(out);
    rc = run_tps("bench --trace-speed 2 --requests 5", true, &out);
    cr_expect_eq(rc, 2, "%s", out);
    cr_expect(out && strstr(out, "--trace-speed"), "%s", out);
    free(out);
    rc = run_tps("bench --slo ttft_p99=x --requests 5", true, &out);
    cr_expect_eq(rc, 2, "%s", out);
    cr_expect(out && strstr(out, "itl_p99"), "%s", out);
    free(out);
    fake_server s = {.mode = FAKE_OK, .tokens = 4, .gap_ms = 1, .serial_ms = 20};
    cr_assert_eq(fake_start(&s), 0);
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "bench --url http://127.0.0.1:%d --find-max-rate --slo ttft_p99=150 --duration 1 "
             "--rate 10 --input-len 8 --output-len 4 --no-progress",
             s.port);
    rc = run_tps(cmd, true, &out);
    fake_stop(&s);
    cr_expect_eq(rc, 0, "%s", out);
    cr_expect(out && strstr(out, "probe") && strstr(out, "max rate within the SLO"), "%s", out);
    free(out);
}
