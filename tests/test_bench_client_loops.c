/* --client-threads: requests spread over several event loops are the
 * requests one loop sends (numbers, items, an open loop's schedule replayed
 * here from the seed), and merging the loops' records gives exactly the
 * one-loop result on the same timeline; per-loop results merged with
 * result_merge (as `tps bench merge` does) give the same histograms. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "bench/client/bench.h"
#include "bench/workload/load.h"
#include "bench/result/result.h"
#include "bench/client/run_merge.h"
#include "base/clock.h"
#include "support/bench_workload.h"
#include "test_bench_fake.h"

/* ---- live runs against the fake server ------------------------------------------------------ */

typedef struct live {
    fake_server srv;
    workload wl;
    bench_config cfg;
    bench_run_out out;
} live;

static void live_run(live *l, size_t items) {
    cr_assert_eq(fake_start(&l->srv), 0, "cannot start the fake server");
    l->cfg.base_url = l->srv.url;
    l->cfg.timeout_s = 20;
    l->cfg.idle_timeout_s = 10;
    l->cfg.connect_timeout_s = 5;
    test_workload(&l->wl, (uint32_t)l->srv.tokens, items);
    test_bench_run(&l->out, &l->cfg, &l->wl);
    fake_stop(&l->srv);
}

static void live_free(live *l) {
    bench_run_free(&l->out);
    workload_free(&l->wl);
}

Test(client_loops, closed_loop_over_three_loops_sends_what_one_loop_sends) {
    live l = {.srv = {.mode = FAKE_OK, .tokens = 6, .gap_ms = 1}};
    l.cfg.concurrency = 6;
    l.cfg.requests = 60;
    l.cfg.client_threads = 3;
    live_run(&l, 7);
    cr_assert_eq(l.out.n, 60);
    cr_expect_eq(l.out.client_loops, 3);
    cr_expect(l.out.client_loop_cpu_max_s <= l.out.client_cpu_s);
    uint64_t events = 0;
    for (size_t i = 0; i < l.out.n; i++) {
        const bench_record *r = &l.out.recs[i];
        cr_expect_eq(r->seq, i, "records in request order");
        cr_expect_eq(r->item, i % 7, "request k sends item k mod n, as one loop does");
        cr_expect_eq(r->err, BENCH_OK, "%s", r->err_msg ? r->err_msg : "");
        cr_expect_eq(r->tl.output_tokens, 6);
        events += r->tl.n_events;
    }
    cr_expect_geq(l.out.events_received, events, "every token event counted once");
    cr_expect_leq(atomic_load(&l.srv.max_conns), 6, "at most --concurrency in flight");
    live_free(&l);
}

Test(client_loops, open_loop_over_three_loops_keeps_the_one_schedule) {
    live l = {.srv = {.mode = FAKE_OK, .tokens = 3, .gap_ms = 1}};
    l.cfg.concurrency = 30;
    l.cfg.rate = 400;
    l.cfg.arrival = LOAD_ARRIVAL_POISSON;
    l.cfg.seed = 11;
    l.cfg.requests = 25;
    l.cfg.client_threads = 3;
    live_run(&l, 5);
    cr_assert_eq(l.out.n, 25);
    /* the schedule one loop follows: arrival 0 at the origin, then the seed's gaps */
    tps_rng rng;
    tps_rng_seed(&rng, 11);
    uint64_t t = l.out.t_start_ns;
    for (size_t k = 0; k < l.out.n; k++) {
        const bench_record *r = &l.out.recs[k];
        cr_expect_eq(r->seq, k);
        cr_expect_eq(r->tl.t_sched, t, "arrival %zu at its scheduled time", k);
        cr_expect_eq(r->err, BENCH_OK, "%s", r->err_msg ? r->err_msg : "");
        t += load_next_gap_ns(LOAD_ARRIVAL_POISSON, 400, 0, &rng);
    }
    live_free(&l);
}

Test(client_loops, more_loops_than_connections_or_with_turns_is_refused) {
    workload wl;
    test_workload(&wl, 4, 4);
    bench_config cfg = {
        .base_url = "http://127.0.0.1:9", .concurrency = 2, .requests = 4, .client_threads = 3};
    bench_run_out out;
    tps_err e = {{0}};
    cr_expect_eq(bench_run(&out, &cfg, &wl, &e), TPS_EINVAL);
    cr_expect(strstr(e.msg, "--client-threads 3") && strstr(e.msg, "--concurrency"), "%s", e.msg);
    wl.turns = 2;
    wl.conversations = 2;
    cfg.client_threads = 2;
    cr_expect_eq(bench_run(&out, &cfg, &wl, &e), TPS_EINVAL);
    cr_expect(strstr(e.msg, "--turns"), "%s", e.msg);
    wl.turns = 0;
    wl.conversations = 0;
    cfg.client_threads = 0;
    cr_expect_eq(bench_client_threads_auto(&cfg, &wl), 1, "64 streams per loop: 2 need one");
    cfg.concurrency = 1000;
    cr_expect_geq(bench_client_threads_auto(&cfg, &wl), 1);
    cr_expect_leq(bench_client_threads_auto(&cfg, &wl), 16);
    workload_free(&wl);
}

/* ---- merging on one timeline --------------------------------------------------------------- */

#define N_REQ   240
#define N_LOOPS 3

/* Request k of a synthetic run, the same every call: sent on an open-loop
 * schedule, 1-40 tokens at random gaps (some events carry two), one in
 * nine failing mid-stream. */
static void synth(bench_record *r, uint64_t k) {
    tps_rng g;
    tps_rng_seed(&g, 1000 + k);
    tps_err e = {{0}};
    memset(r, 0, sizeof *r);
    cr_assert_eq(timeline_init(&r->tl, 8, &e), 0);
    const uint64_t sched = TPS_NS_PER_MS * (1000 + 7 * k);
    const uint64_t sent = sched + load_rng_below(&g, 3 * TPS_NS_PER_MS);
    timeline_start(&r->tl, sched, sent);
    uint64_t t = sent + TPS_NS_PER_MS * (20 + load_rng_below(&g, 200));
    const uint32_t n = 1 + (uint32_t)load_rng_below(&g, 40);
    const bool fails = k % 9 == 4;
    for (uint32_t i = 0; i < n; i++) {
        cr_assert_eq(timeline_add(&r->tl, t, 1 + (load_rng_below(&g, 6) == 0), &e), 0);
        t += load_rng_below(&g, 30 * TPS_NS_PER_MS);
    }
    timeline_finish(&r->tl, t, !fails);
    timeline_set_prompt_tokens(&r->tl, 16 + load_rng_below(&g, 100));
    timeline_set_count_source(&r->tl, TL_COUNT_STREAM_IDS);
    r->seq = k;
    r->item = (uint32_t)(k % 17);
    r->err = fails ? BENCH_ERR_RESET : BENCH_OK;
    if (fails) r->err_msg = strdup("connection reset");
    r->stream_tokens = r->tl.output_tokens;
}

static result_opts merge_opts(void) {
    return (result_opts){.origin_ns = TPS_NS_PER_MS * 1000,
                         .origin_unix_ns = 1700000000000000000ll,
                         .slo = {.ttft_ns = 150 * TPS_NS_PER_MS},
                         .client_cpu_s = 0.5,
                         .bytes = 1000,
                         .events = 500};
}

/* One loop's records: k = 0..N_REQ-1. */
static void one_loop(bench_run_out *o) {
    memset(o, 0, sizeof *o);
    o->recs = calloc(N_REQ, sizeof *o->recs);
    for (uint64_t k = 0; k < N_REQ; k++)
        synth(&o->recs[k], k);
    o->n = N_REQ;
}

/* The same requests over N_LOOPS loops: arrival k in loop k mod N_LOOPS,
 * each loop's records in its own send order. */
static void loops(bench_run_out parts[N_LOOPS]) {
    for (int i = 0; i < N_LOOPS; i++) {
        memset(&parts[i], 0, sizeof parts[i]);
        parts[i].recs = calloc(N_REQ, sizeof *parts[i].recs);
        parts[i].client_loops = 1;
        parts[i].t_start_ns = TPS_NS_PER_MS * 1000;
        parts[i].client_cpu_s = 0.1 * (i + 1);
        parts[i].client_loop_cpu_max_s = 0.1 * (i + 1);
    }
    for (uint64_t k = 0; k < N_REQ; k++) {
        bench_run_out *p = &parts[k % N_LOOPS];
        synth(&p->recs[p->n++], k);
    }
}

static void expect_same_hist(const hist *a, const hist *b, const char *name) {
    cr_expect_eq(hist_count(a), hist_count(b), "%s: count", name);
    cr_expect_eq(hist_sum(a), hist_sum(b), "%s: sum", name);
    cr_expect_eq(hist_min(a), hist_min(b), "%s: min", name);
    cr_expect_eq(hist_max(a), hist_max(b), "%s: max", name);
    size_t na = hist_nonempty(a), nb = hist_nonempty(b);
    cr_assert_eq(na, nb, "%s: buckets", name);
    uint32_t *ia = calloc(na + 1, sizeof *ia), *ib = calloc(na + 1, sizeof *ib);
    uint64_t *ca = calloc(na + 1, sizeof *ca), *cb = calloc(na + 1, sizeof *cb);
    hist_export(a, ia, ca, na);
    hist_export(b, ib, cb, na);
    cr_expect_arr_eq(ia, ib, na * sizeof *ia, "%s: bucket indices", name);
    cr_expect_arr_eq(ca, cb, na * sizeof *ca, "%s: bucket counts", name);
    free(ia), free(ib), free(ca), free(cb);
}

Test(client_loops, merged_loop_records_give_the_one_loop_result) {
    bench_run_out one, parts[N_LOOPS], merged;
    one_loop(&one);
    loops(parts);
    tps_err e = {{0}};
    cr_assert_eq(bench_run_merge(&merged, parts, N_LOOPS, &e), 0, "%s", e.msg);
    cr_expect_eq(merged.n, N_REQ);
    cr_expect_eq(merged.client_loops, N_LOOPS);
    cr_expect_float_eq(merged.client_cpu_s, 0.6, 1e-9);
    cr_expect_float_eq(merged.client_loop_cpu_max_s, 0.3, 1e-9);
    for (int i = 0; i < N_LOOPS; i++)
        cr_expect_eq(parts[i].n, 0, "the records moved");

    bench_result a, b;
    result_opts o = merge_opts();
    test_result_build(&a, one.recs, one.n, &o);
    test_result_build(&b, merged.recs, merged.n, &o);
    for (int h = 0; h < RH_COUNT; h++)
        expect_same_hist(a.h[h], b.h[h], result_hist_name((result_hist_id)h));
    json_t *ja = result_to_json(&a), *jb = result_to_json(&b);
    char *sa = json_dumps(ja, JSON_SORT_KEYS), *sb = json_dumps(jb, JSON_SORT_KEYS);
    cr_expect_str_eq(sa, sb, "the whole result: windows, series, counts, histograms");
    free(sa), free(sb);
    json_decref(ja), json_decref(jb);
    result_free(&a);
    result_free(&b);
    bench_run_free(&one);
    bench_run_free(&merged);
}

Test(client_loops, per_loop_results_merged_give_the_one_loop_histograms) {
    bench_run_out one, parts[N_LOOPS];
    one_loop(&one);
    loops(parts);
    tps_err e = {{0}};
    result_opts o = merge_opts();
    bench_result whole, acc, part;
    test_result_build(&whole, one.recs, one.n, &o);
    test_result_build(&acc, parts[0].recs, parts[0].n, &o);
    for (int i = 1; i < N_LOOPS; i++) {
        test_result_build(&part, parts[i].recs, parts[i].n, &o);
        cr_assert_eq(result_merge(&acc, &part, &e), 0, "%s", e.msg);
        result_free(&part);
    }
    for (int h = 0; h < RH_COUNT; h++)
        expect_same_hist(whole.h[h], acc.h[h], result_hist_name((result_hist_id)h));
    cr_expect_eq(acc.output_tokens, whole.output_tokens);
    cr_expect_eq(acc.completed, whole.completed);
    cr_expect_eq(acc.failed, whole.failed);
    result_free(&whole);
    result_free(&acc);
    bench_run_free(&one);
    for (int i = 0; i < N_LOOPS; i++)
        bench_run_free(&parts[i]);
}

Test(client_loops, the_result_keeps_the_loops_and_the_cost_per_token_and_event) {
    bench_run_out one;
    one_loop(&one);
    result_opts o = merge_opts();
    o.client_loops = 3;
    o.client_loop_cpu_max_s = 0.25;
    bench_result a, b;
    tps_err e = {{0}};
    test_result_build(&a, one.recs, one.n, &o);
    json_t *j = result_to_json(&a), *cl = json_object_get(j, "client");
    cr_expect_eq(json_integer_value(json_object_get(cl, "loops")), 3);
    cr_expect_float_eq(json_real_value(json_object_get(cl, "loop_cpu_max_s")), 0.25, 1e-12);
    cr_expect_float_eq(json_real_value(json_object_get(cl, "cpu_us_per_token")),
                       0.5e6 / (double)a.output_tokens, 1e-9);
    cr_expect_float_eq(json_real_value(json_object_get(cl, "cpu_us_per_event")), 0.5e6 / 500, 1e-9);
    cr_assert_eq(result_from_json(&b, j, &e), 0, "%s", e.msg);
    cr_expect_eq(b.client_loops, 3);
    cr_expect_float_eq(b.client_loop_cpu_max_s, 0.25, 1e-12);
    json_decref(j);
    result_free(&a);
    result_free(&b);
    bench_run_free(&one);
}
