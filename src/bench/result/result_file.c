/* Results to and from their JSON file, and as a CSV row (result.h): one
 * writer and one reader per section, so a file reads back as it was. */
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/file_write.h"
#include "bench/io/json_file.h"
#include "bench/result/result.h"
#include "bench/result/result_internal.h"
#include "bench/result/verdict.h"

/* ---- JSON out ---------------------------------------------------------------------------- */

static json_t *hist_json(const hist *h, bool is_time) {
    hist_summary s;
    hist_summarize(h, &s);
    size_t nb = hist_nonempty(h);
    uint32_t *idx = malloc((nb ? nb : 1) * sizeof *idx);
    uint64_t *cnt = malloc((nb ? nb : 1) * sizeof *cnt);
    json_t *o = json_object();
    json_object_set_new(o, "unit", json_string(is_time ? "ns" : "tokens"));
    json_object_set_new(o, "count", json_integer((json_int_t)s.count));
    json_object_set_new(o, "min", json_integer((json_int_t)s.min));
    json_object_set_new(o, "max", json_integer((json_int_t)s.max));
    json_object_set_new(o, "mean", json_real(hist_mean(h)));
    static const double P[] = {50, 90, 95, 99, 99.9};
    static const char *const PN[] = {"p50", "p90", "p95", "p99", "p99.9"};
    for (int i = 0; i < 5; i++)
        json_object_set_new(o, PN[i], json_integer((json_int_t)hist_percentile(h, P[i])));
    json_object_set_new(o, "sum",
                        json_integer((json_int_t)(s.sum > INT64_MAX ? INT64_MAX : s.sum)));
    json_object_set_new(o, "underflow", json_integer((json_int_t)s.underflow));
    json_object_set_new(o, "overflow", json_integer((json_int_t)s.overflow));
    json_object_set_new(o, "hist_version", json_integer(s.version));
    json_object_set_new(o, "lowest", json_integer((json_int_t)s.config.lowest));
    json_object_set_new(o, "highest", json_integer((json_int_t)s.config.highest));
    json_object_set_new(o, "sig_digits", json_integer(s.config.sig_digits));
    json_t *b = json_array();
    if (idx && cnt) {
        hist_export(h, idx, cnt, nb);
        for (size_t i = 0; i < nb; i++)
            json_array_append_new(b, json_pack("[I, I]", (json_int_t)idx[i], (json_int_t)cnt[i]));
    }
    json_object_set_new(o, "buckets", b); /* [bucket index, count] */
    free(idx);
    free(cnt);
    return o;
}

static json_t *window_json(const result_window *w) {
    if (!w->valid) return json_pack("{s:b, s:s}", "valid", 0, "why", w->why);
    const window_tps *t = &w->tps;
    return json_pack(
        "{s:b, s:f, s:f, s:f, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:{s:I, s:I, s:f, s:f}}", "valid",
        1, "t0_s", tps_ns_to_s(t->w.t0), "t1_s", tps_ns_to_s(t->w.t1), "seconds", t->seconds,
        "output_tokens", (json_int_t)t->output_tokens, "input_tokens", (json_int_t)t->input_tokens,
        "completed", (json_int_t)t->completed, "output_tps", t->output_tps, "input_tps",
        t->input_tps, "total_tps", t->total_tps, "request_rate", t->request_rate, "goodput", "good",
        (json_int_t)w->good.good, "completed", (json_int_t)w->good.completed, "per_s",
        w->good.goodput, "good_fraction", w->good.good_fraction);
}

/* The cached-input figures into o, under names starting with `key`:
 * unknown (null) when no request's server said. */
static void cached_json(json_t *o, const char *key, const result_cached *c) {
    char k[96];
    const bool known = c->requests > 0;
    json_object_set_new(o, key, known ? json_integer((json_int_t)c->tokens) : json_null());
    snprintf(k, sizeof k, "%s_requests", key);
    json_object_set_new(o, k, json_integer((json_int_t)c->requests));
    snprintf(k, sizeof k, "%s_prompt_tokens", key);
    json_object_set_new(o, k, json_integer((json_int_t)c->prompt));
    snprintf(k, sizeof k, "%s_fraction", key);
    json_object_set_new(
        o, k, known && c->prompt ? json_real((double)c->tokens / (double)c->prompt) : json_null());
}

static json_t *turn_group_json(const result_turn_group *g, const char *label) {
    json_t *o = json_pack("{s:s, s:I, s:I}", "label", label, "completed", (json_int_t)g->completed,
                          "input_tokens", (json_int_t)g->input_tokens);
    cached_json(o, "cached_input", &g->cached);
    json_object_set_new(o, "ttft", hist_json(g->ttft, true));
    return o;
}

static json_t *turns_json(const result_turns *t) {
    char later[64];
    snprintf(later, sizeof later, "turns 2..%u", t->turns);
    return json_pack("{s:I, s:I, s:o, s:o}", "turns", (json_int_t)t->turns, "conversations",
                     (json_int_t)t->conversations, "first", turn_group_json(&t->first, "turn 1"),
                     "later", turn_group_json(&t->later, later));
}

static json_t *u64_array(const uint64_t *v, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer((json_int_t)v[i]));
    return a;
}

/* The "tokens" section: counts, how they were counted, arrivals, cached input. */
static json_t *tokens_json(const bench_result *r) {
    json_t *src = json_object();
    for (int k = 0; k < 4; k++)
        json_object_set_new(src, result_source_names[k], json_integer((json_int_t)r->by_source[k]));
    json_t *t = json_pack(
        "{s:I, s:I, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "output",
        (json_int_t)r->output_tokens, "input", (json_int_t)r->input_tokens, "count_source", src,
        "token_events", (json_int_t)r->token_events, "multi_token_events",
        (json_int_t)r->multi_token_events, "requests_with_usage", (json_int_t)r->with_usage,
        "usage_mismatch_requests", (json_int_t)r->mismatch_requests, "usage_mismatch_tokens",
        (json_int_t)r->mismatch_tokens, "empty_text_tokens", (json_int_t)r->held_tokens,
        "token_arrivals", (json_int_t)r->token_arrivals, "multi_token_arrivals",
        (json_int_t)r->multi_token_arrivals);
    cached_json(t, "cached_input", &r->cached);
    json_object_set_new(t, "reasoning", json_integer((json_int_t)r->reasoning_tokens));
    json_object_set_new(t, "reasoning_from_usage",
                        json_integer((json_int_t)r->reasoning_from_usage));
    json_object_set_new(t, "unread_requests", json_integer((json_int_t)r->unread_requests));
    if (r->unread_field[0]) json_object_set_new(t, "unread_field", json_string(r->unread_field));
    json_object_set_new(t, "implausible_requests",
                        json_integer((json_int_t)r->implausible_requests));
    if (r->implausible_example[0])
        json_object_set_new(t, "implausible_example", json_string(r->implausible_example));
    return t;
}

json_t *result_to_json(const bench_result *r) {
    return result_to_json_judged(r, NULL);
}

json_t *result_to_json_judged(const bench_result *r, const verdict *v) {
    verdict own;
    if (!v) { /* judged here from the result alone, as it is when read back */
        verdict_judge(&own, r);
        v = &own;
    }
    json_t *o = json_object();
    json_object_set_new(o, "schema", json_string(BENCH_RESULT_SCHEMA));
    json_object_set_new(o, "version", json_integer(BENCH_RESULT_VERSION));
    char when[64] = "";
    time_t sec = (time_t)(r->t0_unix_ns / 1000000000);
    struct tm tmv;
    if (gmtime_r(&sec, &tmv)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    json_object_set_new(o, "started_at", json_string(when));
    json_object_set_new(o, "t0_unix_ns", json_integer((json_int_t)r->t0_unix_ns));
    json_object_set_new(o, "runs", json_integer(r->runs));
    json_object_set_new(o, "config", json_incref(r->config));
    json_object_set_new(o, "requests",
                        json_pack("{s:I, s:I, s:I, s:I, s:f, s:I}", "sent", (json_int_t)r->requests,
                                  "completed", (json_int_t)r->completed, "failed",
                                  (json_int_t)r->failed, "cancelled", (json_int_t)r->cancelled,
                                  "error_rate", result_error_rate(r), "warmup_excluded",
                                  (json_int_t)r->warmup_excluded));
    json_t *errs = json_object();
    for (int k = 1; k < BENCH_ERR_COUNT; k++) {
        if (!r->errors[k]) continue;
        json_t *x = json_pack("{s:I}", "count", (json_int_t)r->errors[k]);
        if (r->error_example[k])
            json_object_set_new(x, "example", json_string(r->error_example[k]));
        json_object_set_new(errs, bench_err_name((bench_errkind)k), x);
    }
    json_object_set_new(o, "errors", errs);
    json_object_set_new(o, "tokens", tokens_json(r));
    json_object_set_new(o, "windows",
                        json_pack("{s:o, s:o, s:o}", "run", window_json(&r->run), "steady",
                                  window_json(&r->steady), "user", window_json(&r->user)));
    json_object_set_new(o, "slo_ns",
                        json_pack("{s:I, s:I, s:I}", "ttft", (json_int_t)r->slo.ttft_ns, "tpot",
                                  (json_int_t)r->slo.tpot_ns, "e2e", (json_int_t)r->slo.e2e_ns));
    json_t *hs = json_object();
    for (int i = 0; i < RH_COUNT; i++)
        json_object_set_new(hs, result_hist_name(i), hist_json(r->h[i], result_hist_is_time(i)));
    json_object_set_new(o, "histograms", hs);
    json_t *series = json_pack("{s:s, s:f, s:o, s:o, s:f, s:I}", "window", "run", "bin_s", r->bin_s,
                               "output_tokens", u64_array(r->series_out, r->nbins), "input_tokens",
                               u64_array(r->series_in, r->nbins), "peak_output_tps", r->peak_tps,
                               "peak_bin", (json_int_t)r->peak_bin);
    if (r->series_steal) { /* each bin's steal share; null where the readings did not cover it */
        json_t *a = json_array();
        for (size_t k = 0; k < r->nbins; k++)
            json_array_append_new(a, r->series_steal[k] >= 0 ? json_real(r->series_steal[k])
                                                             : json_null());
        json_object_set_new(series, "steal", a);
    }
    json_object_set_new(o, "series", series);
    json_object_set_new(o, "server",
                        json_pack("{s:I, s:I}", "requests_with_timings",
                                  (json_int_t)r->with_timings, "preemptions",
                                  (json_int_t)r->server_preemptions));
    json_object_set_new(
        o, "client",
        json_pack("{s:f, s:o, s:I, s:I, s:i, s:f, s:f, s:f}", "cpu_s", r->client_cpu_s,
                  "runq_wait_s", r->has_runq ? json_real(r->client_runq_s) : json_null(), "bytes",
                  (json_int_t)r->bytes, "events", (json_int_t)r->events, "loops",
                  (int)r->client_loops, "loop_cpu_max_s", r->client_loop_cpu_max_s,
                  "cpu_us_per_token",
                  r->output_tokens ? 1e6 * r->client_cpu_s / (double)r->output_tokens : 0.0,
                  "cpu_us_per_event", r->events ? 1e6 * r->client_cpu_s / (double)r->events : 0.0));
    /* this machine's CPUs over the run: what the hypervisor stole, what
     * other processes (a local server among them) used */
    json_object_set_new(o, "host",
                        r->host.known ? json_pack("{s:f, s:f}", "steal", r->host.steal,
                                                  "others_cpu", r->host.others)
                                      : json_null());
    if (r->turns.turns) json_object_set_new(o, "turns", turns_json(&r->turns));
    json_object_set_new(o, "verdict", verdict_json(v));
    if (r->server_metrics) json_object_set_new(o, "server_metrics", json_incref(r->server_metrics));
    if (r->per_request) json_object_set_new(o, "per_request", json_incref(r->per_request));
    return o;
}

/* Both writers go through file_out (base/file_write.h): /dev/stdout and
 * fifos are written in place, a regular file replaced whole, and a failed
 * write (a full disk, /dev/full) is an error naming the path and the
 * reason (issue 48). */
int result_write_json(const bench_result *r, const char *path, tps_err *e) {
    return result_write_json_judged(r, NULL, path, e);
}

int result_write_json_judged(const bench_result *r, const verdict *v, const char *path,
                             tps_err *e) {
    json_t *o = result_to_json_judged(r, v);
    int rc = json_file_write(o, path, JSON_INDENT(1) | JSON_REAL_PRECISION(10), e);
    json_decref(o);
    return rc;
}

/* ---- JSON in ------------------------------------------------------------------------------ */

static uint64_t ju(const json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
}

static double jd(const json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : 0.0;
}

static int hist_from_json(hist **out, const json_t *o, const char *name, tps_err *e) {
    if (!json_is_object(o)) return tps_fail(e, TPS_EINVAL, "histogram '%s' is missing", name);
    hist_summary s = {.version = (uint32_t)ju(o, "hist_version"),
                      .config = {.lowest = ju(o, "lowest"),
                                 .highest = ju(o, "highest"),
                                 .sig_digits = (int)ju(o, "sig_digits")},
                      .count = ju(o, "count"),
                      .underflow = ju(o, "underflow"),
                      .overflow = ju(o, "overflow"),
                      .min = ju(o, "min"),
                      .max = ju(o, "max"),
                      .sum = ju(o, "sum")};
    json_t *b = json_object_get(o, "buckets");
    size_t n = json_array_size(b);
    uint32_t *idx = malloc((n ? n : 1) * sizeof *idx);
    uint64_t *cnt = malloc((n ? n : 1) * sizeof *cnt);
    int rc = TPS_OK;
    if (!idx || !cnt) rc = tps_fail(e, TPS_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) {
        json_t *p = json_array_get(b, i);
        json_t *a = json_array_get(p, 0), *c = json_array_get(p, 1);
        if (!json_is_integer(a) || !json_is_integer(c) || json_integer_value(a) < 0 ||
            json_integer_value(a) > UINT32_MAX || json_integer_value(c) < 0)
            rc = tps_fail(e, TPS_EINVAL, "histogram '%s': bucket %zu is not [index, count]", name,
                          i);
        else
            idx[i] = (uint32_t)json_integer_value(a), cnt[i] = (uint64_t)json_integer_value(c);
    }
    if (!rc) {
        rc = hist_import(out, &s, idx, cnt, n, e);
        if (rc) {
            char m[sizeof e->msg];
            snprintf(m, sizeof m, "%s", e->msg);
            tps_fail(e, rc, "histogram '%s': %s", name, m);
        }
    }
    free(idx);
    free(cnt);
    return rc;
}

static void cached_from_json(result_cached *c, const json_t *o, const char *key) {
    char k[96];
    memset(c, 0, sizeof *c);
    if (!json_is_integer(json_object_get(o, key))) return; /* null or absent: unknown */
    c->tokens = ju(o, key);
    snprintf(k, sizeof k, "%s_requests", key);
    c->requests = ju(o, k) ? ju(o, k) : 1;
    snprintf(k, sizeof k, "%s_prompt_tokens", key);
    c->prompt = ju(o, k);
}

static int turn_group_from_json(result_turn_group *g, const json_t *o, const char *name,
                                tps_err *e) {
    g->completed = ju(o, "completed");
    g->input_tokens = ju(o, "input_tokens");
    cached_from_json(&g->cached, o, "cached_input");
    return hist_from_json(&g->ttft, json_object_get(o, "ttft"), name, e);
}

/* The optional "turns" section (multi-turn runs only). */
static int turns_from_json(result_turns *t, const json_t *o, tps_err *e) {
    memset(t, 0, sizeof *t);
    if (!json_is_object(o)) return TPS_OK;
    t->turns = (uint32_t)ju(o, "turns");
    t->conversations = ju(o, "conversations");
    int rc = turn_group_from_json(&t->first, json_object_get(o, "first"), "turns.first.ttft", e);
    return rc ? rc
              : turn_group_from_json(&t->later, json_object_get(o, "later"), "turns.later.ttft", e);
}

static void window_from_json(result_window *w, const json_t *o) {
    memset(w, 0, sizeof *w);
    w->valid = json_is_true(json_object_get(o, "valid"));
    if (!w->valid) {
        const char *why = json_string_value(json_object_get(o, "why"));
        snprintf(w->why, sizeof w->why, "%s", why ? why : "");
        return;
    }
#define T(f) offsetof(window_tps, f)
    static const json_field TPS[] = {
        {"t0_s", JF_S_TO_NS, T(w.t0)},
        {"t1_s", JF_S_TO_NS, T(w.t1)},
        {"seconds", JF_F64, T(seconds)},
        {"output_tokens", JF_U64, T(output_tokens)},
        {"input_tokens", JF_U64, T(input_tokens)},
        {"completed", JF_U64, T(completed)},
        {"output_tps", JF_F64, T(output_tps)},
        {"input_tps", JF_F64, T(input_tps)},
        {"total_tps", JF_F64, T(total_tps)},
        {"request_rate", JF_F64, T(request_rate)},
    };
#undef T
#define G(f) offsetof(window_goodput, f)
    static const json_field GOOD[] = {
        {"good", JF_U64, G(good)},
        {"completed", JF_U64, G(completed)},
        {"per_s", JF_F64, G(goodput)},
        {"good_fraction", JF_F64, G(good_fraction)},
    };
#undef G
    json_fields_read(&w->tps, o, TPS, sizeof TPS / sizeof TPS[0]);
    json_fields_read(&w->good, json_object_get(o, "goodput"), GOOD, sizeof GOOD / sizeof GOOD[0]);
    w->good.seconds = w->tps.seconds;
}

static int u64_array_from_json(uint64_t **out, size_t n, const json_t *a) {
    *out = calloc(n ? n : 1, sizeof **out);
    if (!*out) return TPS_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(a, i);
        (*out)[i] =
            json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
    }
    return TPS_OK;
}

static int check_schema(const json_t *j, tps_err *e) {
    const char *schema = json_string_value(json_object_get(j, "schema"));
    if (!schema || strcmp(schema, BENCH_RESULT_SCHEMA))
        return tps_fail(e, TPS_EINVAL, "not a tps bench result (schema is not \"%s\")",
                        BENCH_RESULT_SCHEMA);
    uint64_t v = ju(j, "version");
    if (v != BENCH_RESULT_VERSION)
        return tps_fail(e, TPS_EUNSUP, "result version %llu; this tps reads version %d",
                        (unsigned long long)v, BENCH_RESULT_VERSION);
    return TPS_OK;
}

/* The "requests" and "errors" sections. */
static void requests_from_json(bench_result *r, const json_t *j) {
#define R(f) offsetof(bench_result, f)
    static const json_field REQ[] = {
        {"sent", JF_U64, R(requests)},
        {"completed", JF_U64, R(completed)},
        {"failed", JF_U64, R(failed)},
        {"cancelled", JF_U64, R(cancelled)},
        {"warmup_excluded", JF_U64, R(warmup_excluded)},
    };
#undef R
    json_fields_read(r, json_object_get(j, "requests"), REQ, sizeof REQ / sizeof REQ[0]);
    json_t *errs = json_object_get(j, "errors");
    const char *key;
    json_t *val;
    json_object_foreach(errs, key, val) {
        bench_errkind k = bench_err_from_name(key);
        if (k == BENCH_ERR_COUNT || k == BENCH_OK) continue;
        r->errors[k] = ju(val, "count");
        const char *ex = json_string_value(json_object_get(val, "example"));
        if (ex) r->error_example[k] = strdup(ex);
    }
    r->errors[BENCH_OK] = r->completed;
}

static void tokens_from_json(bench_result *r, const json_t *tk) {
#define R(f) offsetof(bench_result, f)
    static const json_field TOK[] = {
        {"output", JF_U64, R(output_tokens)},
        {"input", JF_U64, R(input_tokens)},
        {"token_events", JF_U64, R(token_events)},
        {"multi_token_events", JF_U64, R(multi_token_events)},
        {"token_arrivals", JF_U64, R(token_arrivals)},
        {"multi_token_arrivals", JF_U64, R(multi_token_arrivals)},
        {"empty_text_tokens", JF_U64, R(held_tokens)},
        {"requests_with_usage", JF_U64, R(with_usage)},
        {"usage_mismatch_requests", JF_U64, R(mismatch_requests)},
        {"reasoning", JF_U64, R(reasoning_tokens)},
        {"reasoning_from_usage", JF_U64, R(reasoning_from_usage)},
        {"unread_requests", JF_U64, R(unread_requests)},
        {"implausible_requests", JF_U64, R(implausible_requests)},
    };
#undef R
    json_fields_read(r, tk, TOK, sizeof TOK / sizeof TOK[0]);
    const char *uf = json_string_value(json_object_get(tk, "unread_field"));
    if (uf) snprintf(r->unread_field, sizeof r->unread_field, "%s", uf);
    const char *ie = json_string_value(json_object_get(tk, "implausible_example"));
    if (ie) snprintf(r->implausible_example, sizeof r->implausible_example, "%s", ie);
    json_t *src = json_object_get(tk, "count_source");
    for (int k = 0; k < 4; k++)
        r->by_source[k] = ju(src, result_source_names[k]);
    json_t *mt = json_object_get(tk, "usage_mismatch_tokens");
    r->mismatch_tokens = json_is_integer(mt) ? json_integer_value(mt) : 0;
    cached_from_json(&r->cached, tk, "cached_input");
}

/* The "histograms" and optional "turns" sections. */
static int hists_from_json(bench_result *r, const json_t *j, tps_err *e) {
    json_t *hs = json_object_get(j, "histograms");
    int rc = TPS_OK;
    for (int i = 0; i < RH_COUNT && !rc; i++) {
        const json_t *h = json_object_get(hs, result_hist_name(i));
        if ((i == RH_ARRIVAL_GAP || i == RH_TTFO) && !h) { /* from before it was kept: empty */
            const hist_config cfg = HIST_CONFIG_LATENCY_NS;
            rc = hist_create(&r->h[i], &cfg, e);
            continue;
        }
        rc = hist_from_json(&r->h[i], h, result_hist_name(i), e);
    }
    return rc ? rc : turns_from_json(&r->turns, json_object_get(j, "turns"), e);
}

static int series_from_json(bench_result *r, const json_t *se, tps_err *e) {
    r->bin_s = jd(se, "bin_s");
    json_t *so = json_object_get(se, "output_tokens"), *si = json_object_get(se, "input_tokens");
    r->nbins = json_array_size(so);
    if (json_array_size(si) != r->nbins)
        return tps_fail(e, TPS_EINVAL, "series: output and input arrays differ in length");
    if (u64_array_from_json(&r->series_out, r->nbins, so) ||
        u64_array_from_json(&r->series_in, r->nbins, si))
        return tps_fail(e, TPS_ENOMEM, "out of memory");
    r->peak_tps = jd(se, "peak_output_tps");
    r->peak_bin = (size_t)ju(se, "peak_bin");
    json_t *st = json_object_get(se, "steal");
    if (r->nbins && json_array_size(st) == r->nbins) {
        if (!(r->series_steal = malloc(r->nbins * sizeof *r->series_steal)))
            return tps_fail(e, TPS_ENOMEM, "out of memory");
        for (size_t k = 0; k < r->nbins; k++) {
            json_t *v = json_array_get(st, k);
            double x = json_is_number(v) ? json_number_value(v) : -1;
            r->series_steal[k] = x >= 0 && x <= 1 ? x : -1;
        }
    }
    return TPS_OK;
}

static void client_from_json(bench_result *r, const json_t *cl) {
#define R(f) offsetof(bench_result, f)
    static const json_field CL[] = {
        {"cpu_s", JF_F64, R(client_cpu_s)},
        {"loop_cpu_max_s", JF_F64, R(client_loop_cpu_max_s)},
        {"runq_wait_s", JF_F64, R(client_runq_s)},
        {"bytes", JF_U64, R(bytes)},
        {"events", JF_U64, R(events)},
    };
#undef R
    json_fields_read(r, cl, CL, sizeof CL / sizeof CL[0]);
    r->client_loops = (uint32_t)ju(cl, "loops");
    if (!r->client_loops) r->client_loops = 1; /* results from before --client-threads */
    r->has_runq = json_is_number(json_object_get(cl, "runq_wait_s"));
}

/* null or absent (a plan, a result from before it was measured): unknown */
static void host_from_json(bench_result *r, const json_t *h) {
    const json_t *s = json_object_get(h, "steal"), *o = json_object_get(h, "others_cpu");
    if (!json_is_number(s) || !json_is_number(o)) return;
    r->host = (cpu_contention){
        .known = true, .steal = json_number_value(s), .others = json_number_value(o)};
}

int result_from_json(bench_result *r, const json_t *j, tps_err *e) {
    memset(r, 0, sizeof *r);
    int rc = check_schema(j, e);
    if (rc) return rc;
    r->runs = (uint32_t)ju(j, "runs");
    if (!r->runs) r->runs = 1;
    json_t *t0 = json_object_get(j, "t0_unix_ns");
    r->t0_unix_ns = json_is_integer(t0) ? json_integer_value(t0) : 0;
    json_t *cfg = json_object_get(j, "config");
    r->config = cfg ? json_incref(cfg) : json_object();
    requests_from_json(r, j);
    tokens_from_json(r, json_object_get(j, "tokens"));
    json_t *ws = json_object_get(j, "windows");
    window_from_json(&r->run, json_object_get(ws, "run"));
    window_from_json(&r->steady, json_object_get(ws, "steady"));
    window_from_json(&r->user, json_object_get(ws, "user"));
    json_t *slo = json_object_get(j, "slo_ns");
    r->slo = (tl_slo){ju(slo, "ttft"), ju(slo, "tpot"), ju(slo, "e2e")};
    if ((rc = hists_from_json(r, j, e))) goto fail;
    if ((rc = series_from_json(r, json_object_get(j, "series"), e))) goto fail;
    json_t *sv = json_object_get(j, "server");
    r->with_timings = ju(sv, "requests_with_timings");
    r->server_preemptions = ju(sv, "preemptions");
    client_from_json(r, json_object_get(j, "client"));
    host_from_json(r, json_object_get(j, "host"));
    json_t *pr = json_object_get(j, "per_request");
    if (json_is_array(pr)) r->per_request = json_incref(pr);
    json_t *sm = json_object_get(j, "server_metrics");
    if (json_is_object(sm)) r->server_metrics = json_incref(sm);
    return TPS_OK;
fail:
    result_free(r);
    return rc;
}

int result_read_json(bench_result *r, const char *path, tps_err *e) {
    json_t *j = json_file_load(path, e);
    if (!j) return TPS_EINVAL;
    int rc = result_from_json(r, j, e);
    json_decref(j);
    if (rc) {
        char m[sizeof e->msg];
        snprintf(m, sizeof m, "%s", e->msg);
        tps_fail(e, rc, "%s: %s", path, m);
    }
    return rc;
}

/* ---- CSV ------------------------------------------------------------------------------------- */

/* The prefix-cache and multi-turn columns; empty where unknown. */
static void csv_cache_and_turns(const bench_result *r, FILE *f) {
    const result_cached *c = &r->cached;
    if (c->requests)
        fprintf(f, ",%llu,%.6f", (unsigned long long)c->tokens,
                c->prompt ? (double)c->tokens / (double)c->prompt : 0.0);
    else
        fprintf(f, ",,");
    const hist *g[2] = {r->turns.first.ttft, r->turns.later.ttft};
    for (int k = 0; k < 2; k++)
        if (r->turns.turns && hist_count(g[k]))
            fprintf(f, ",%.4f,%.4f", (double)hist_percentile(g[k], 50) / 1e6,
                    (double)hist_percentile(g[k], 99) / 1e6);
        else
            fprintf(f, ",,");
}

int result_write_csv(const bench_result *r, FILE *f, tps_err *e) {
    static const result_hist_id H[] = {RH_TTFT, RH_TTFT_SENT, RH_ITL, RH_TPOT, RH_E2E, RH_E2E_SENT};
    static const double P[] = {50, 90, 99};
    fprintf(f, "requests,completed,failed,cancelled,error_rate,output_tokens,input_tokens,"
               "run_s,run_output_tps,run_input_tps,run_total_tps,run_request_rate,run_goodput,"
               "steady_s,steady_output_tps,steady_total_tps,steady_request_rate,peak_output_tps");
    for (size_t i = 0; i < sizeof H / sizeof H[0]; i++) {
        fprintf(f, ",%s_mean_ms", result_hist_name(H[i]));
        for (size_t p = 0; p < 3; p++)
            fprintf(f, ",%s_p%g_ms", result_hist_name(H[i]), P[p]);
    }
    fprintf(f, ",cached_input,cached_input_fraction,ttft_turn1_p50_ms,ttft_turn1_p99_ms,"
               "ttft_later_turns_p50_ms,ttft_later_turns_p99_ms");
    fprintf(f, "\n%llu,%llu,%llu,%llu,%.6f,%llu,%llu,%.6f,%.3f,%.3f,%.3f,%.4f,%.4f,",
            (unsigned long long)r->requests, (unsigned long long)r->completed,
            (unsigned long long)r->failed, (unsigned long long)r->cancelled, result_error_rate(r),
            (unsigned long long)r->output_tokens, (unsigned long long)r->input_tokens,
            r->run.tps.seconds, r->run.tps.output_tps, r->run.tps.input_tps, r->run.tps.total_tps,
            r->run.tps.request_rate, r->run.good.goodput);
    if (r->steady.valid)
        fprintf(f, "%.6f,%.3f,%.3f,%.4f,", r->steady.tps.seconds, r->steady.tps.output_tps,
                r->steady.tps.total_tps, r->steady.tps.request_rate);
    else
        fprintf(f, ",,,,");
    fprintf(f, "%.3f", r->peak_tps);
    for (size_t i = 0; i < sizeof H / sizeof H[0]; i++) {
        const hist *h = r->h[H[i]];
        fprintf(f, ",%.4f", hist_mean(h) / 1e6);
        for (size_t p = 0; p < 3; p++)
            fprintf(f, ",%.4f", (double)hist_percentile(h, P[p]) / 1e6);
    }
    csv_cache_and_turns(r, f);
    fprintf(f, "\n");
    return ferror(f) ? tps_fail(e, TPS_EIO, "cannot write the CSV") : TPS_OK;
}

int result_write_csv_file(const bench_result *r, const char *path, tps_err *e) {
    file_out out;
    int rc = file_out_open(&out, path, e);
    if (rc) return rc;
    result_write_csv(r, out.f, e); /* a failed write shows at the close, which names the path */
    return file_out_close(&out, e);
}
