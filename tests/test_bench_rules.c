/* Bench's rules across flags live in one library function
 * (bench_spec_check): each case here is a flag combination refused by the
 * library called directly and by `tps bench` (and `tps plan`) with the
 * very same message, then the rule's input changed and both accept it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/experiment/bench_spec.h"
#include "support/test_support.h"

typedef struct rule_case {
    const char *flags; /* refused */
    const char *fixed; /* the rule's input changed: accepted */
    void (*set)(bench_spec *s, bool fixed);
} rule_case;

static void prefixes(bench_spec *s, bool fixed) {
    s->cfg.requests = 2;
    s->wo.n_prefixes = 3;
    s->given_prefixes = true;
    if (fixed) s->wo.prefix_len = 8;
}

static void turns_rate(bench_spec *s, bool fixed) {
    s->wo.turns = 2;
    if (fixed)
        s->cfg.concurrency = 3;
    else
        s->cfg.rate = 3;
}

static void turns_requests(bench_spec *s, bool fixed) {
    s->wo.turns = 2;
    if (fixed)
        s->conversations = 2;
    else
        s->cfg.requests = 4;
}

static void think_time(bench_spec *s, bool fixed) {
    s->cfg.think_time_s = 1;
    s->given_think = true;
    if (fixed)
        s->wo.turns = 2;
    else
        s->cfg.requests = 2;
}

static void embeddings_temperature(bench_spec *s, bool fixed) {
    s->cfg.endpoint = BENCH_EP_EMBEDDINGS;
    s->cfg.requests = 1;
    if (!fixed) s->wo.temperature = 0.5;
}

static void slo_without_stream(bench_spec *s, bool fixed) {
    s->cfg.endpoint = BENCH_EP_CHAT;
    s->cfg.no_stream = true;
    s->cfg.requests = 1;
    if (fixed)
        s->ro.slo.e2e_ns = 100000000;
    else
        s->ro.slo.ttft_ns = 100000000;
}

static void trace_speed(bench_spec *s, bool fixed) {
    s->cfg.requests = 1;
    if (!fixed) s->wo.trace_speed = 2;
}

static void goodput_target(bench_spec *s, bool fixed) {
    (void)fixed; /* the ask says it (library) */
    s->cfg.requests = 1;
}

static void run_must_end(bench_spec *s, bool fixed) {
    if (fixed) s->cfg.requests = 1;
}

static void extra_body(bench_spec *s, bool fixed) {
    s->cfg.requests = 1;
    s->wo.extra_body = fixed ? "{\"top_k\": 1}" : "[1]";
}

static const rule_case CASES[] = {
    {"--requests 2 --prefixes 3", "--requests 2 --prefixes 3 --prefix-len 8", prefixes},
    {"--turns 2 --rate 3", "--turns 2 --concurrency 3", turns_rate},
    {"--turns 2 --requests 4", "--turns 2 --conversations 2", turns_requests},
    {"--requests 2 --think-time 1", "--turns 2 --think-time 1", think_time},
    {"--endpoint embeddings --requests 1 --temperature 0.5", "--endpoint embeddings --requests 1",
     embeddings_temperature},
    {"--endpoint chat --no-stream --requests 1 --slo ttft=100",
     "--endpoint chat --no-stream --requests 1 --slo e2e=100", slo_without_stream},
    {"--requests 1 --trace-speed 2", "--requests 1", trace_speed},
    {"--requests 1 --goodput-target 0.9", NULL, goodput_target},
    {"--input-len 8", "--input-len 8 --requests 1", run_must_end},
    {"--requests 1 --extra-body '[1]'", "--requests 1 --extra-body '{\"top_k\": 1}'", extra_body},
};

/* The library's answer for case c (fixed: with its input changed). */
static int library(const rule_case *c, bool fixed, tps_err *e) {
    bench_spec s;
    bench_spec_init(&s);
    c->set(&s, fixed);
    /* what the command asks besides one run, as its flags say */
    const bench_ask ask = {.goodput_target = strstr(c->flags, "--goodput-target") != NULL};
    return bench_spec_check(&s, fixed ? NULL : &ask, e);
}

Test(bench_rules, the_library_and_the_cli_refuse_with_the_same_message) {
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const rule_case *c = &CASES[i];
        tps_err e = {{0}};
        cr_expect_eq(library(c, false, &e), TPS_EINVAL, "%s: accepted", c->flags);
        char args[512], want[sizeof e.msg + 32], *out = NULL;
        snprintf(args, sizeof args, "bench %s", c->flags);
        snprintf(want, sizeof want, "tps bench: %s\n", e.msg);
        cr_expect_eq(run_tps(args, true, &out), 2, "%s", args);
        cr_expect_str_eq(out, want, "%s", args);
        free(out);
    }
}

/* tps plan takes bench's rows and asks the same function. */
Test(bench_rules, tps_plan_refuses_as_tps_bench_does) {
    tps_err e = {{0}};
    cr_assert_eq(library(&CASES[1], false, &e), TPS_EINVAL);
    char want[sizeof e.msg + 32], *out = NULL;
    snprintf(want, sizeof want, "tps plan: %s\n", e.msg);
    cr_expect_eq(run_tps("plan -m /nonexistent.gguf --turns 2 --rate 3", true, &out), 2);
    cr_expect_str_eq(out, want);
    free(out);
}

/* The rule's input changed: the library passes it, and tps bench goes on
 * to run (against a closed port: its requests fail, exit 1, never 2). */
Test(bench_rules, the_rules_input_changed_both_accept) {
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const rule_case *c = &CASES[i];
        if (!c->fixed) continue;
        tps_err e = {{0}};
        cr_expect_eq(library(c, true, &e), TPS_OK, "%s: %s", c->fixed, e.msg);
        char args[512], *out = NULL;
        snprintf(args, sizeof args,
                 "bench --url http://127.0.0.1:9 --scrape off --quiet --no-progress "
                 "--timeout 5 %s",
                 c->fixed);
        cr_expect_eq(run_tps(args, true, &out), 1, "%s: %s", args, out);
        free(out);
    }
}

/* The kind is named once from the flags, and the run's config says it. */
Test(bench_rules, the_workload_kind_is_named_from_the_flags) {
    static const struct {
        void (*set)(bench_spec *s, bool fixed);
        bool fixed;
        workload_kind kind;
        const char *name;
    } k[] = {
        {run_must_end, true, WL_KIND_SYNTHETIC, "synthetic"},
        {prefixes, true, WL_KIND_PREFIX, "shared-prefix"},
        {turns_rate, true, WL_KIND_TURNS, "multi-turn"},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        bench_spec s;
        bench_spec_init(&s);
        k[i].set(&s, k[i].fixed);
        tps_err e = {{0}};
        cr_assert_eq(bench_spec_check(&s, NULL, &e), TPS_OK, "%s", e.msg);
        cr_expect_eq(s.kind, k[i].kind, "%s", k[i].name);
        cr_expect_str_eq(workload_kind_name(s.kind), k[i].name);
    }
    bench_spec s;
    bench_spec_init(&s);
    s.wo.dataset = "d.jsonl";
    s.wo.prefix_len = 8; /* a dataset's kind, and the rule that refuses a prefix on it */
    tps_err e = {{0}};
    cr_expect_eq(bench_spec_check(&s, NULL, &e), TPS_EINVAL);
    cr_expect_eq(s.kind, WL_KIND_DATASET);
    cr_expect(strstr(e.msg, "--prefix-len with --dataset") != NULL, "%s", e.msg);
}
