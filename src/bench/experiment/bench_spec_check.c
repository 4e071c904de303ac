/* Every rule a bench spec must meet (bench_spec_check, bench_spec.h), and
 * the values that follow from its flags (the in-flight default, the
 * conversations of a multi-turn run). The rules go in the order a user
 * meets them: the workload options alone (--extra-body, and workload.h's
 * rule, which workload_build applies too), the flags that only go with a
 * workload kind, what a capacity search needs, the endpoint's limits.
 * Each refusal names the flag and what to change; tps bench, tps plan and
 * tps sweep print it after their name. Not here: parsing one flag's value
 * (the CLI's option table), anything that needs the dataset parsed
 * (workload_dataset.c checks a file's content as it reads it). */
#include "bench/experiment/bench_spec.h"

#include <string.h>

uint32_t bench_spec_concurrency(const bench_spec *s) {
    return s->cfg.concurrency ? s->cfg.concurrency : s->cfg.rate > 0 ? 1000 : 1;
}

uint64_t bench_spec_conversations(const bench_spec *s) {
    return s->conversations ? s->conversations : bench_spec_concurrency(s);
}

/* --turns over a --dataset whose first bytes are not ShareGPT's: why not. */
static const char *turns_dataset_rule(const workload_opts *wo) {
    const char *fmt = workload_dataset_format(wo->dataset);
    if (!fmt || !strcmp(fmt, "sharegpt")) return NULL; /* unreadable: the build says so */
    return !strcmp(fmt, "trace") ? "--turns with a trace dataset: a trace's requests are single "
                                   "prompts sent at their timestamps; only a ShareGPT file holds "
                                   "whole conversations; drop --turns"
                                 : "--turns with a JSONL dataset: its lines are single prompts; "
                                   "only a ShareGPT file holds whole conversations (give one, or "
                                   "drop --turns)";
}

/* The shape flags that only go with one kind of workload: NULL, or why not. */
static const char *kind_rule(const bench_spec *s) {
    const workload_opts *wo = &s->wo;
    const bool turns = workload_kind_turns(s->kind);
    if ((s->given_prefixes || s->prefix_dist) && !wo->prefix_len)
        return "--prefixes and --prefix-dist need --prefix-len P (the prefix length in tokens)";
    const char *why = s->kind == WL_KIND_DATASET_TURNS ? turns_dataset_rule(wo) : NULL;
    if (why) return why;
    if ((s->given_think || s->conversations) && !turns)
        return "--conversations and --think-time need --turns T";
    if (turns && s->cfg.rate > 0)
        return "--turns with --rate: a conversation sends its next turn when its reply is in and "
               "its think time is over (a closed loop); drop --rate, use --concurrency and "
               "--think-time";
    if (turns && s->cfg.requests)
        return "--turns with --requests: a multi-turn run sends --conversations x --turns "
               "requests; give --conversations instead";
    if (turns && s->prompts)
        return "--turns with --prompts: the user messages are --conversations x --turns; drop "
               "--prompts";
    return NULL;
}

/* What a capacity search needs, and the flags that only it takes. */
static const char *search_rule(const bench_spec *s, const bench_ask *ask) {
    const bool search = ask && ask->find_max_rate;
    const tl_slo *slo = &s->ro.slo;
    if (search && (!(s->cfg.duration_s > 0) || s->wo.turns || s->cfg.requests ||
                   !(slo->ttft_ns || slo->tpot_ns || slo->e2e_ns)))
        return "--find-max-rate needs --slo (the limits), --duration S (each probe's length), "
               "and neither --requests nor --turns";
    if (ask && ask->goodput_target && !search)
        return "--goodput-target is the capacity search's pass mark: add --find-max-rate or drop "
               "it (a plain run reports goodput under --slo)";
    if (s->wo.trace_speed > 0 && !s->wo.dataset)
        return "--trace-speed scales a trace --dataset's send times; give one or drop it";
    if ((s->kind == WL_KIND_SYNTHETIC || s->kind == WL_KIND_PREFIX) && !s->cfg.requests &&
        !(s->cfg.duration_s > 0)) /* a dataset without either is one pass over its entries */
        return "give --requests N and/or --duration S (a run must end)";
    return NULL;
}

/* What the endpoint has no place for is refused, never dropped. */
static int endpoint_rule(const bench_spec *s, tps_err *e) {
    const bench_endpoint ep = s->cfg.endpoint;
    if (ep == BENCH_EP_EMBEDDINGS) {
        const char *bad = s->wo.turns              ? "--turns"
                          : s->wo.temperature >= 0 ? "--temperature"
                          : s->wo.ignore_eos == 1  ? "--ignore-eos"
                          : s->wo.prefix_len       ? "--prefix-len"
                                                   : NULL;
        if (bad) return tps_fail(e, TPS_EINVAL, "--endpoint embeddings does not take %s", bad);
    }
    if ((ep == BENCH_EP_EMBEDDINGS || s->cfg.no_stream) && (s->ro.slo.ttft_ns || s->ro.slo.tpot_ns))
        return tps_fail(e, TPS_EINVAL,
                        "--slo ttft/tpot need a stream to be judged (%s): give e2e only",
                        ep == BENCH_EP_EMBEDDINGS ? "embeddings are one body" : "--no-stream");
    if (ep != BENCH_EP_EMBEDDINGS && s->wo.batch_size > 1)
        return tps_fail(e, TPS_EINVAL,
                        "--batch-size is for --endpoint embeddings (a generation request sends "
                        "one prompt)");
    return TPS_OK;
}

int bench_spec_check(bench_spec *s, const bench_ask *ask, tps_err *e) {
    s->kind = workload_kind_of(&s->wo);
    const char *bad = s->wo.extra_body ? workload_extra_body_check(s->wo.extra_body) : NULL;
    if (bad)
        return tps_fail(e, TPS_EINVAL,
                        "--extra-body %s; give an object of other fields, e.g. '{\"top_k\": 1}'",
                        bad);
    int rc = workload_opts_check(&s->wo, e);
    if (rc) return rc;
    const char *why = kind_rule(s);
    if (!why) why = search_rule(s, ask);
    if (why) return tps_fail(e, TPS_EINVAL, "%s", why);
    if ((rc = endpoint_rule(s, e))) return rc;
    const uint64_t conv = bench_spec_conversations(s);
    if (s->wo.turns && conv * s->wo.turns > 10000000)
        return tps_fail(e, TPS_EINVAL,
                        "--conversations %llu x --turns %u is over 10,000,000 requests; give "
                        "fewer",
                        (unsigned long long)conv, s->wo.turns);
    if (ask && ask->find_max_rate && !s->cfg.concurrency) s->cfg.concurrency = 1000; /* probes' */
    return TPS_OK;
}
