/* The checks of verdict.h, from a bench result. Each fills its evidence
 * whether or not it trips, so a user can see how near a limit the run came.
 * Not here: computing the figures it weighs (result.c, metrics/). */
#include "bench/result/verdict.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const NAMES[VERDICT_COUNT] = {
    [VERDICT_CLIENT] = "client",
    [VERDICT_BATCHING] = "batching",
    [VERDICT_APPROXIMATE] = "approximate",
    [VERDICT_USAGE] = "usage",
    [VERDICT_REQUESTS] = "requests",
    [VERDICT_STEADY] = "steady",
    [VERDICT_STEAL] = "steal",
    [VERDICT_FIELDS] = "fields",
    [VERDICT_PLAUSIBLE] = "plausible",
};

static void set(verdict_check *c, bool known, bool tripped, double value, double limit) {
    c->known = known;
    c->tripped = known && tripped;
    c->value = value;
    c->limit = limit;
}

/* The check's evidence: what fmt makes, cut to fit. */
__attribute__((format(printf, 2, 3))) static void say(verdict_check *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->evidence, sizeof c->evidence, fmt, ap);
    va_end(ap);
}

/* The client's CPU time and run-queue wait against the time it ran (each
 * merged run's generator ran for the run window). */
static void check_client(verdict_check *c, const bench_result *r) {
    const double wall = r->run.valid ? r->run.tps.seconds * (r->runs ? r->runs : 1) : 0;
    if (!(wall > 0)) {
        set(c, false, false, 0, VERDICT_CPU_BUSY);
        say(c, "no run window to weigh the client's time");
        return;
    }
    /* with several event loops, each is one thread: the busiest one saturates first */
    const double cpu_s = r->client_loops > 1 && (r->runs ? r->runs : 1) == 1
                             ? r->client_loop_cpu_max_s
                             : r->client_cpu_s;
    const double cpu = cpu_s / wall, runq = r->client_runq_s / wall;
    const bool busy = cpu >= VERDICT_CPU_BUSY, waited = r->has_runq && runq >= VERDICT_RUNQ_SHARE;
    char lag[96] = "";
    if (json_number_value(json_object_get(r->config, "rate")) > 0 && hist_count(r->h[RH_SEND_LAG]))
        snprintf(lag, sizeof lag, "; send lag p99 %.2f ms",
                 (double)hist_percentile(r->h[RH_SEND_LAG], 99) / 1e6);
    char rq[96];
    if (r->has_runq)
        snprintf(rq, sizeof rq, "waited %.3f s for a CPU (%.1f%%, limit %.0f%%)", r->client_runq_s,
                 100 * runq, 100 * VERDICT_RUNQ_SHARE);
    else
        snprintf(rq, sizeof rq, "run-queue wait unknown (no schedstat)");
    /* known when the CPU share alone settles it, or the wait was measured */
    set(c, busy || r->has_runq, busy || waited, busy ? cpu : runq,
        busy ? VERDICT_CPU_BUSY : VERDICT_RUNQ_SHARE);
    say(c, "%s: busiest client loop used %.3f s CPU in a %.3f s run (%.1f%%, limit %.0f%%), %s%s",
        busy     ? "CPU-bound: arrival stamps lag"
        : waited ? "descheduled: arrivals during its waits were stamped late"
                 : "the client kept up",
        cpu_s, wall, 100 * cpu, 100 * VERDICT_CPU_BUSY, rq, lag);
}

static void check_batching(verdict_check *c, const bench_result *r) {
    const double share = result_multi_token_share(r);
    const bool tripped = share >= VERDICT_MULTI_SHARE;
    set(c, r->token_events > 0, tripped, share, VERDICT_MULTI_SHARE);
    if (!r->token_events)
        say(c, "no token events");
    else
        say(c,
            "%s%llu of %llu token events carried more than one token (%.1f%%, limit %.0f%%; "
            "%.2f tokens per event)",
            tripped ? "ITL measures the server's flushes, not its decoding: " : "",
            (unsigned long long)r->multi_token_events, (unsigned long long)r->token_events,
            100 * share, 100 * VERDICT_MULTI_SHARE,
            (double)r->output_tokens / (double)r->token_events);
}

static void check_approximate(verdict_check *c, const bench_result *r) {
    const uint64_t approx = r->by_source[TL_COUNT_RETOKENIZED] + r->by_source[TL_COUNT_EVENTS];
    const char *in = json_string_value(json_object_get(r->config, "input_source"));
    const bool in_approx = in && strstr(in, "approximate");
    set(c, r->completed > 0, approx > 0 || in_approx, (double)approx, 0);
    say(c,
        "output counted by usage %llu, stream ids %llu, re-tokenized %llu, events %llu "
        "requests; prompts sized by %s",
        (unsigned long long)r->by_source[TL_COUNT_USAGE],
        (unsigned long long)r->by_source[TL_COUNT_STREAM_IDS],
        (unsigned long long)r->by_source[TL_COUNT_RETOKENIZED],
        (unsigned long long)r->by_source[TL_COUNT_EVENTS], in ? in : "?");
}

static void check_usage(verdict_check *c, const bench_result *r) {
    set(c, r->with_usage > 0, r->mismatch_requests > 0, (double)r->mismatch_requests, 0);
    if (!r->with_usage)
        say(c, "no response carried usage to check against");
    else
        say(c, "usage differed from the streamed count in %llu of %llu requests (%+lld tokens)",
            (unsigned long long)r->mismatch_requests, (unsigned long long)r->with_usage,
            (long long)r->mismatch_tokens);
}

/* Which value of n the nearest-rank p-th percentile is, from the top. */
static uint64_t rank_from_top(uint64_t n, double p) {
    uint64_t rank = (uint64_t)ceil(p / 100.0 * (double)n);
    if (rank < 1) rank = 1;
    return n - rank + 1;
}

static void check_requests(verdict_check *c, const bench_result *r) {
    const bool steady = r->steady.valid;
    const uint64_t n = steady ? r->steady.tps.completed : r->completed;
    set(c, true, n < VERDICT_MIN_REQUESTS, (double)n, VERDICT_MIN_REQUESTS);
    if (!n) {
        say(c, "no completed request%s", steady ? " in the steady window" : "");
        return;
    }
    say(c,
        "%llu completed requests %s (limit %d): p99 is value #%llu from the top, p99.9 "
        "#%llu, p90 #%llu",
        (unsigned long long)n, steady ? "in the steady window" : "in the run (no steady window)",
        VERDICT_MIN_REQUESTS, (unsigned long long)rank_from_top(n, 99),
        (unsigned long long)rank_from_top(n, 99.9), (unsigned long long)rank_from_top(n, 90));
}

static void check_steady(verdict_check *c, const bench_result *r) {
    const double share =
        r->steady.valid && r->run.tps.seconds > 0 ? r->steady.tps.seconds / r->run.tps.seconds : 0;
    set(c, true, !r->steady.valid, share, 0);
    if (r->steady.valid)
        say(c, "steady window %.2f-%.2f s, %.0f%% of the run", r->steady.tps.w.t0 / 1e9,
            r->steady.tps.w.t1 / 1e9, 100 * share);
    else
        say(c, "no steady window: %.250s", r->steady.why[0] ? r->steady.why : "not measured");
}

/* The client's machine: the server's too when it runs there (a loopback
 * URL), and then every figure is slowed by what the hypervisor took. */
static void check_steal(verdict_check *c, const bench_result *r) {
    const cpu_contention *h = &r->host;
    set(c, h->known, h->steal >= VERDICT_STEAL_SHARE, h->steal, VERDICT_STEAL_SHARE);
    if (!h->known)
        say(c, "this machine's CPU time was not measured");
    else
        say(c,
            "%sthe hypervisor stole %.1f%% of this machine's CPU time during the run "
            "(limit %.0f%%); other processes used %.1f%%",
            h->steal >= VERDICT_STEAL_SHARE
                ? "a shared VM, slowed by other guests (a server here ran slower with it): "
                : "",
            100 * h->steal, 100 * VERDICT_STEAL_SHARE, 100 * h->others);
}

/* Text the bench could not place: a server that streams its thinking (or
 * anything) in a field no dialect row reads is mismeasured, never quietly. */
static void check_fields(verdict_check *c, const bench_result *r) {
    set(c, r->requests > 0, r->unread_requests > 0, (double)r->unread_requests, 0);
    if (r->unread_requests)
        say(c,
            "%llu requests carried text in \"%s\", a field tps does not read for this "
            "endpoint: those tokens were not counted or timed (TTFT, ITL and tokens/s are "
            "wrong); docs/bench.md lists the fields of each dialect",
            (unsigned long long)r->unread_requests, r->unread_field);
    else
        say(c, "every field that carried text was read (%llu output tokens, %llu of them thinking)",
            (unsigned long long)r->output_tokens, (unsigned long long)r->reasoning_tokens);
}

/* What a server says of its own work is data from outside: a figure that
 * cannot be is named, and the bench used its own count instead. */
static void check_plausible(verdict_check *c, const bench_result *r) {
    set(c, r->with_usage > 0, r->implausible_requests > 0, (double)r->implausible_requests, 0);
    if (!r->with_usage)
        say(c, "no response carried usage to weigh");
    else if (r->implausible_requests)
        say(c,
            "%llu requests' usage said what cannot be, e.g. %s: that figure was not used "
            "(the client's own count was)",
            (unsigned long long)r->implausible_requests, r->implausible_example);
    else
        say(c, "every usage figure fits the prompt sent and the tokens asked for (%llu requests)",
            (unsigned long long)r->with_usage);
}

/* Passed, or failed with why: too many errors, or nothing completed. */
static void judge_outcome(verdict *v, const bench_result *r, double max_error_rate) {
    const double er = result_error_rate(r);
    if (er > max_error_rate) {
        v->outcome = VERDICT_ERRORS;
        snprintf(v->why, sizeof v->why,
                 "error rate %.2f%% (%llu of %llu) is above --max-error-rate %.2f%%", 100 * er,
                 (unsigned long long)r->failed, (unsigned long long)(r->completed + r->failed),
                 100 * max_error_rate);
    } else if (r->completed == 0) {
        v->outcome = VERDICT_NONE_COMPLETED;
        snprintf(v->why, sizeof v->why, "no request completed");
    }
}

void verdict_judge(verdict *v, const bench_result *r) {
    verdict_judge_run(v, r, 0);
}

void verdict_judge_run(verdict *v, const bench_result *r, double max_error_rate) {
    memset(v, 0, sizeof *v);
    for (int i = 0; i < VERDICT_COUNT; i++)
        v->check[i].name = NAMES[i];
    check_client(&v->check[VERDICT_CLIENT], r);
    check_batching(&v->check[VERDICT_BATCHING], r);
    check_approximate(&v->check[VERDICT_APPROXIMATE], r);
    check_usage(&v->check[VERDICT_USAGE], r);
    check_requests(&v->check[VERDICT_REQUESTS], r);
    check_steady(&v->check[VERDICT_STEADY], r);
    check_steal(&v->check[VERDICT_STEAL], r);
    check_fields(&v->check[VERDICT_FIELDS], r);
    check_plausible(&v->check[VERDICT_PLAUSIBLE], r);
    for (int i = 0; i < VERDICT_COUNT; i++)
        v->tripped += v->check[i].tripped;
    judge_outcome(v, r, max_error_rate);
}

json_t *verdict_json(const verdict *v) {
    json_t *checks = json_object(), *tripped = json_array();
    for (int i = 0; i < VERDICT_COUNT; i++) {
        const verdict_check *c = &v->check[i];
        json_object_set_new(checks, c->name,
                            json_pack("{s:o, s:f, s:f, s:s}", "ok",
                                      c->known ? json_boolean(!c->tripped) : json_null(), "value",
                                      c->value, "limit", c->limit, "evidence", c->evidence));
        if (c->tripped) json_array_append_new(tripped, json_string(c->name));
    }
    return json_pack("{s:b, s:o, s:o}", "trusted", v->tripped == 0, "tripped", tripped, "checks",
                     checks);
}

void verdict_print(FILE *f, const verdict *v) {
    int unknown = 0;
    for (int i = 0; i < VERDICT_COUNT; i++)
        unknown += !v->check[i].known;
    if (!v->tripped)
        fprintf(f, "\nverdict   trusted: every check passed%s\n",
                unknown ? " (some could not be judged)" : "");
    else
        fprintf(f, "\nverdict   %d check%s tripped: read the figures they guard with care\n",
                v->tripped, v->tripped == 1 ? "" : "s");
    for (int i = 0; i < VERDICT_COUNT; i++) {
        const verdict_check *c = &v->check[i];
        fprintf(f, "  %-4s %-12s %s\n",
                !c->known    ? "?"
                : c->tripped ? "FAIL"
                             : "ok",
                c->name, c->evidence);
    }
}
