/* tps bench compare (src/bench/result/compare.h): two identical results differ by
 * nothing beyond the noise, by either noise method; two results whose TTFT
 * and throughput really differ are told apart, in the right direction; and
 * the command as a user runs it on two result files. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "bench/result/compare.h"
#include "bench/result/result.h"
#include "base/clock.h"
#include "support/bench_workload.h"
#include "support/test_support.h"

#define MS(x) ((uint64_t)(x)*TPS_NS_PER_MS)

/* n requests one after another: TTFT ttft + (i*37 mod 11) ms, 8 one-token
 * events gap ms apart (+ i mod 3), last byte 1 ms after the last. */
static void build(bench_result *res, size_t n, uint64_t ttft, uint64_t gap, bool per_request) {
    bench_record *r = calloc(n, sizeof *r);
    tps_err e = {{0}};
    uint64_t t = 1000;
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(timeline_init(&r[i].tl, 8, &e), 0);
        timeline_start(&r[i].tl, MS(t), MS(t));
        uint64_t at = t + ttft + (i * 37) % 11;
        for (int k = 0; k < 8; k++, at += gap + i % 3)
            cr_assert_eq(timeline_add(&r[i].tl, MS(at), 1, &e), 0);
        at -= gap + i % 3;
        timeline_finish(&r[i].tl, MS(at + 1), true);
        timeline_set_count_source(&r[i].tl, TL_COUNT_USAGE);
        r[i].err = BENCH_OK;
        t = at + 1;
    }
    result_opts o = {.origin_ns = MS(1000), .target_concurrency = 1, .per_request = per_request};
    test_result_build(res, r, n, &o);
    for (size_t i = 0; i < n; i++)
        bench_record_free(&r[i]);
    free(r);
}

static const compare_row *row(const compare_out *c, const char *name) {
    for (size_t i = 0; i < c->n; i++)
        if (strstr(c->rows[i].name, name)) return &c->rows[i];
    cr_assert_fail("no row %s", name);
    return NULL;
}

static void expect_identical(bool per_request) {
    bench_result a;
    build(&a, 150, 10, 5, per_request);
    compare_out c;
    tps_err e = {{0}};
    cr_assert_eq(compare_results(&c, &a, &a, &e), 0, "%s", e.msg);
    cr_expect_not(compare_steal_differs(&c), "the steal was not measured");
    cr_expect_eq(c.method, per_request ? COMPARE_BOOTSTRAP : COMPARE_HIST_BOUNDS);
    for (size_t i = 0; i < c.n; i++) {
        const compare_row *r = &c.rows[i];
        cr_expect_float_eq(r->ratio, 1.0, 1e-12, "%s", r->name);
        cr_expect(r->known, "%s: noise could not be formed", r->name);
        cr_expect(!r->exceeds_noise, "%s: %g-%g", r->name, r->lo, r->hi);
        cr_expect(r->lo <= 1 && r->hi >= 1, "%s: %g-%g", r->name, r->lo, r->hi);
    }
    result_free(&a);
}

Test(compare, identical_results_are_within_noise_by_bootstrap) {
    expect_identical(true);
}

Test(compare, identical_results_are_within_noise_by_histogram_bounds) {
    expect_identical(false);
}

static void expect_different(bool per_request) {
    bench_result a, b;
    build(&a, 150, 10, 5, per_request);
    build(&b, 150, 30, 3, per_request); /* slower first token, faster decode */
    /* B ran while the hypervisor took a fifth of its machine */
    a.host = (cpu_contention){.known = true, .steal = 0.01, .others = 0.5};
    b.host = (cpu_contention){.known = true, .steal = 0.20, .others = 0.5};
    compare_out c;
    tps_err e = {{0}};
    cr_assert_eq(compare_results(&c, &a, &b, &e), 0, "%s", e.msg);
    cr_expect(compare_steal_differs(&c), "1%% and 20%% stolen: the machines differed");
    const compare_row *ttft = row(&c, "TTFT p50"), *itl = row(&c, "ITL p50");
    cr_expect(ttft->ratio > 2, "%g", ttft->ratio);
    cr_expect(ttft->exceeds_noise && ttft->lo > 1, "TTFT %g-%g", ttft->lo, ttft->hi);
    cr_expect(itl->ratio < 1, "%g", itl->ratio);
    cr_expect(itl->exceeds_noise && itl->hi < 1, "ITL %g-%g", itl->lo, itl->hi);
    json_t *j = compare_json(&c, "a.json", "b.json");
    json_t *f = json_array_get(json_object_get(j, "figures"), 2); /* TTFT p50 */
    cr_expect_str_eq(json_string_value(json_object_get(f, "judgement")), "worse");
    cr_expect(json_is_true(json_object_get(j, "machines_differ")));
    cr_expect_float_eq(json_number_value(json_object_get(j, "steal_b")), 0.20, 1e-9);
    json_decref(j);
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    compare_print(mem, &c, "a", "b");
    fclose(mem);
    cr_expect(strstr(text, "stole 1.0% of A's machine's CPU time, 20.0% of B's: the machines "
                           "differed"),
              "%s", text);
    free(text);
    b.host.steal = 0.02; /* within the limit of each other */
    cr_assert_eq(compare_results(&c, &a, &b, &e), 0, "%s", e.msg);
    cr_expect_not(compare_steal_differs(&c));
    result_free(&a);
    result_free(&b);
}

Test(compare, a_real_difference_exceeds_the_noise_by_bootstrap) {
    expect_different(true);
}

Test(compare, a_real_difference_exceeds_the_noise_by_histogram_bounds) {
    expect_different(false);
}

Test(compare, the_command_on_two_files, .timeout = 60) {
    char dir[] = "/tmp/tps_compareXXXXXX";
    cr_assert(mkdtemp(dir));
    bench_result a, b;
    build(&a, 120, 10, 5, true);
    build(&b, 120, 30, 5, true);
    char pa[128], pb[128], args[512], *out;
    snprintf(pa, sizeof pa, "%s/a.json", dir);
    snprintf(pb, sizeof pb, "%s/b.json", dir);
    tps_err e = {{0}};
    cr_assert_eq(result_write_json(&a, pa, &e), 0);
    cr_assert_eq(result_write_json(&b, pb, &e), 0);
    snprintf(args, sizeof args, "bench compare %s %s --json %s/c.json", pa, pb, dir);
    cr_expect_eq(run_tps(args, true, &out), 0, "%s", out);
    cr_expect(strstr(out, "bootstrap over per-request records") != NULL, "%s", out);
    cr_expect(strstr(out, "worse") != NULL, "%s", out);
    free(out);
    snprintf(args, sizeof args, "bench compare %s", pa);
    cr_expect_eq(run_tps(args, true, &out), 2, "%s", out);
    cr_expect(strstr(out, "two result files") != NULL, "%s", out);
    free(out);
    result_free(&a);
    result_free(&b);
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    cr_expect_eq(system(args), 0);
}
