/* Building bench results (result.h): the records counted, the windows
 * measured, the series binned. All the maths is metrics/'s; this file
 * decides which requests and tokens go where. Files and merging: result_file.c,
 * result_merge.c. */
#include "bench/result/result.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "bench/result/result_internal.h"

static const char *const HIST_NAMES[RH_COUNT] = {
    [RH_TTFT] = "ttft",
    [RH_TTFT_SENT] = "ttft_sent",
    [RH_ITL] = "itl",
    [RH_TPOT] = "tpot",
    [RH_E2E] = "e2e",
    [RH_E2E_SENT] = "e2e_sent",
    [RH_SEND_LAG] = "send_lag",
    [RH_OUTPUT_TOKENS] = "output_tokens",
    [RH_INPUT_TOKENS] = "input_tokens",
    [RH_SRV_QUEUE] = "server_queue",
    [RH_SRV_PREFILL] = "server_prefill",
    [RH_SRV_DECODE] = "server_decode",
    [RH_SRV_TTFT] = "server_ttft",
    [RH_ARRIVAL_GAP] = "arrival_gap",
    [RH_TTFO] = "ttfo",
};

const char *const result_source_names[4] = {"usage", "stream_ids", "retokenized", "events"};

const char *result_hist_name(result_hist_id id) {
    return (unsigned)id < RH_COUNT ? HIST_NAMES[id] : "?";
}

bool result_hist_is_time(result_hist_id id) {
    return id != RH_OUTPUT_TOKENS && id != RH_INPUT_TOKENS;
}

bool result_streamed(const bench_result *r) {
    const char *ep = json_string_value(json_object_get(r->config, "endpoint"));
    return !json_is_false(json_object_get(r->config, "stream")) &&
           !(ep && !strcmp(ep, "embeddings"));
}

double result_error_rate(const bench_result *r) {
    uint64_t d = r->completed + r->failed;
    return d ? (double)r->failed / (double)d : 0.0;
}

void result_free(bench_result *r) {
    json_decref(r->config);
    json_decref(r->per_request);
    json_decref(r->server_metrics);
    for (int i = 0; i < RH_COUNT; i++)
        hist_free(r->h[i]);
    hist_free(r->turns.first.ttft);
    hist_free(r->turns.later.ttft);
    for (int i = 0; i < BENCH_ERR_COUNT; i++)
        free(r->error_example[i]);
    free(r->series_out);
    free(r->series_steal);
    free(r->series_in);
    memset(r, 0, sizeof *r);
}

static int alloc_hists(bench_result *r, tps_err *e) {
    const hist_config cfg = HIST_CONFIG_LATENCY_NS;
    for (int i = 0; i < RH_COUNT; i++) {
        int rc = hist_create(&r->h[i], &cfg, e);
        if (rc) return rc;
    }
    return TPS_OK;
}

/* ---- build ---------------------------------------------------------------------------- */

static uint64_t ms_to_ns(double ms) {
    return ms <= 0 ? 0 : (uint64_t)llround(ms * 1e6);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void measure(result_window *rw, window w, const timeline *const *tls, size_t n,
                    const tl_slo *slo, uint64_t origin) {
    window_measure(&rw->tps, w, tls, n);
    window_goodput_measure(&rw->good, w, slo, TL_FROM_SCHEDULED, tls, n);
    rw->tps.w.t0 = w.t0 - origin;
    rw->tps.w.t1 = w.t1 - origin;
    rw->valid = true;
}

/* The last-byte times of the requests that ended, sorted, in a new array
 * (the caller frees it) of *m; NULL when out of memory. */
static uint64_t *sorted_ends(const timeline *const *tls, size_t n, size_t *m) {
    uint64_t *ends = malloc((n ? n : 1) * sizeof *ends);
    *m = 0;
    if (!ends) return NULL;
    for (size_t i = 0; i < n; i++)
        if (tls[i]->t_end != TL_NONE) ends[(*m)++] = tls[i]->t_end;
    qsort(ends, *m, sizeof *ends, cmp_u64);
    return ends;
}

/* Trimmed by requests: (W-th last byte, (M-D)-th last byte] of the M that ended. */
static int steady_by_requests(window *w, const window *run, const result_opts *o,
                              const timeline *const *tls, size_t n, tps_err *e) {
    size_t m;
    uint64_t *ends = sorted_ends(tls, n, &m);
    if (!ends) return tps_fail(e, TPS_ENOMEM, "out of memory");
    int rc = TPS_OK;
    if (o->warmup_reqs + o->cooldown_reqs >= m) {
        rc = tps_fail(e, TPS_ERANGE,
                      "--warmup/--cooldown trim %llu+%llu requests but only %zu ended",
                      (unsigned long long)o->warmup_reqs, (unsigned long long)o->cooldown_reqs, m);
    } else {
        w->t0 = o->warmup_reqs ? ends[o->warmup_reqs - 1] : run->t0;
        w->t1 = o->cooldown_reqs ? ends[m - o->cooldown_reqs - 1] : run->t1;
        if (w->t1 <= w->t0) rc = tps_fail(e, TPS_ERANGE, "the trimmed steady window is empty");
    }
    free(ends);
    return rc;
}

/* When --warmup ended: the run's start + X seconds, or the last byte of the
 * X-th request to end. Requests sent before then are warm-up: they count in
 * the rates of the windows that hold their tokens but in no distribution. */
static bool warmup_end(uint64_t *end, const window *run, const result_opts *o,
                       const timeline *const *tls, size_t n) {
    if (o->warmup_s > 0) {
        *end = run->t0 + (uint64_t)(o->warmup_s * 1e9);
        return true;
    }
    if (!o->warmup_reqs) return false;
    size_t m;
    uint64_t *ends = sorted_ends(tls, n, &m);
    if (!ends) return false; /* out of memory: the steady window reports it */
    /* fewer ended than the warm-up: every request was sent during it */
    *end = o->warmup_reqs <= m ? ends[o->warmup_reqs - 1] : UINT64_MAX;
    free(ends);
    return true;
}

/* The run, steady and user windows' rates; one that cannot be had says why. */
static void measure_windows(bench_result *r, const window *run, const result_opts *o,
                            const timeline *const *tls, size_t n) {
    window w;
    measure(&r->run, *run, tls, n, &r->slo, o->origin_ns);
    tps_err we = {{0}};
    int wrc;
    if (o->warmup_reqs || o->cooldown_reqs) {
        wrc = steady_by_requests(&w, run, o, tls, n, &we);
    } else {
        steady_opts so = {.warmup_ns = (uint64_t)(o->warmup_s * 1e9),
                          .cooldown_ns = (uint64_t)(o->cooldown_s * 1e9),
                          .target_concurrency = o->target_concurrency};
        wrc = window_steady(&w, &so, tls, n, &we);
    }
    if (wrc == TPS_OK)
        measure(&r->steady, w, tls, n, &r->slo, o->origin_ns);
    else
        snprintf(r->steady.why, sizeof r->steady.why, "%.250s", we.msg);
    if (o->has_user) {
        uint64_t a = (uint64_t)(o->user_t0_s * 1e9), b = (uint64_t)(o->user_t1_s * 1e9);
        if (window_user(&w, run, a, b, &we) == TPS_OK)
            measure(&r->user, w, tls, n, &r->slo, o->origin_ns);
        else
            snprintf(r->user.why, sizeof r->user.why, "%.250s", we.msg);
    }
}

/* The per-bin token counts over the run, and their peak. */
static int measure_series(bench_result *r, const window *run, const result_opts *o,
                          const timeline *const *tls, size_t n, tps_err *e) {
    r->bin_s = o->bin_s > 0 ? o->bin_s : 1.0;
    const uint64_t bin_ns = (uint64_t)(r->bin_s * 1e9);
    r->nbins = window_nbins(*run, bin_ns);
    if (!r->nbins) return TPS_OK;
    r->series_out = calloc(r->nbins, sizeof *r->series_out);
    r->series_in = calloc(r->nbins, sizeof *r->series_in);
    if (!r->series_out || !r->series_in) return tps_fail(e, TPS_ENOMEM, "out of memory");
    int rc = window_series(r->series_out, r->series_in, r->nbins, *run, bin_ns, tls, n, e);
    if (rc) return rc;
    r->peak_tps = window_peak(r->series_out, r->nbins, *run, bin_ns, &r->peak_bin);
    if (o->n_host_ticks >= 2) { /* a bin's tokens beside what the machine had of its CPUs */
        if (!(r->series_steal = malloc(r->nbins * sizeof *r->series_steal)))
            return tps_fail(e, TPS_ENOMEM, "out of memory");
        for (size_t k = 0; k < r->nbins; k++) {
            uint64_t a = run->t0 + k * bin_ns, b = a + bin_ns;
            if (b > run->t1) b = run->t1;
            r->series_steal[k] = cpu_ticks_steal(o->host_ticks, o->n_host_ticks, a, b);
        }
    }
    return TPS_OK;
}

/* ---- prefix cache and turns ------------------------------------------------------------ */

static void add_cached(result_cached *c, const bench_record *rec) {
    if (!rec->has_cached) return;
    c->requests++;
    c->tokens += rec->cached_tokens;
    c->prompt += rec->tl.prompt_tokens;
}

int result_turns_alloc(result_turns *t, tps_err *e) {
    if (t->first.ttft) return TPS_OK;
    const hist_config cfg = HIST_CONFIG_LATENCY_NS;
    int rc = hist_create(&t->first.ttft, &cfg, e);
    return rc ? rc : hist_create(&t->later.ttft, &cfg, e);
}

/* A multi-turn request into its group: turn 1, or turns 2..T. */
static int add_turn(result_turns *t, const bench_record *rec, bool warm, tps_err *e) {
    int rc = result_turns_alloc(t, e);
    if (rc) return rc;
    if (rec->turn > t->turns) t->turns = rec->turn;
    if (rec->turn == 1) t->conversations++;
    result_turn_group *g = rec->turn == 1 ? &t->first : &t->later;
    if (rec->err != BENCH_OK) return TPS_OK;
    g->completed++;
    g->input_tokens += rec->tl.prompt_tokens;
    add_cached(&g->cached, rec);
    if (!warm) timeline_record(&rec->tl, &(timeline_hists){.ttft = g->ttft});
    return TPS_OK;
}

static void set_example(bench_result *r, bench_errkind k, const char *msg) {
    if (!r->error_example[k] && msg) r->error_example[k] = strdup(msg);
}

static json_t *record_json(const bench_record *rec, size_t i, bool warm, uint64_t origin) {
    const timeline *t = &rec->tl;
    json_t *o = json_object();
    json_object_set_new(o, "i", json_integer((json_int_t)i));
    json_object_set_new(o, "item", json_integer(rec->item));
    json_object_set_new(o, "status", json_string(bench_err_name(rec->err)));
    if (warm) json_object_set_new(o, "warmup", json_true());
    if (rec->err_msg) json_object_set_new(o, "error", json_string(rec->err_msg));
    json_object_set_new(o, "http_status", json_integer(rec->http_status));
    json_object_set_new(o, "sched_ns", json_integer((json_int_t)(t->t_sched - origin)));
    json_object_set_new(o, "sent_ns", json_integer((json_int_t)(t->t_sent - origin)));
    json_object_set_new(o, "end_ns",
                        t->t_end == TL_NONE ? json_null()
                                            : json_integer((json_int_t)(t->t_end - origin)));
    json_object_set_new(o, "input_tokens", json_integer((json_int_t)t->prompt_tokens));
    json_object_set_new(o, "output_tokens", json_integer((json_int_t)t->output_tokens));
    json_object_set_new(o, "max_tokens", json_integer(rec->max_tokens));
    json_object_set_new(o, "count_source", json_string(result_source_names[t->source & 3]));
    json_object_set_new(o, "stream_tokens", json_integer((json_int_t)rec->stream_tokens));
    if (rec->held_tokens)
        json_object_set_new(o, "empty_text_tokens", json_integer((json_int_t)rec->held_tokens));
    if (rec->reasoning_tokens)
        json_object_set_new(o, "reasoning_tokens", json_integer((json_int_t)rec->reasoning_tokens));
    if (t->t_answer != TL_NONE)
        json_object_set_new(o, "answer_ns", json_integer((json_int_t)(t->t_answer - origin)));
    if (rec->unread[0]) json_object_set_new(o, "unread_field", json_string(rec->unread));
    if (rec->implausible[0]) json_object_set_new(o, "implausible", json_string(rec->implausible));
    if (rec->has_cached)
        json_object_set_new(o, "cached_tokens", json_integer((json_int_t)rec->cached_tokens));
    if (rec->turn) {
        json_object_set_new(o, "conversation", json_integer(rec->conversation));
        json_object_set_new(o, "turn", json_integer(rec->turn));
    }
    if (rec->has_usage)
        json_object_set_new(o, "usage",
                            json_pack("{s:I, s:I}", "prompt_tokens", (json_int_t)rec->usage_prompt,
                                      "completion_tokens", (json_int_t)rec->usage_completion));
    if (rec->has_timings)
        json_object_set_new(
            o, "timings",
            json_pack("{s:f, s:f, s:f, s:f, s:I}", "queue_ms", rec->timings.queue_ms, "prefill_ms",
                      rec->timings.prefill_ms, "decode_ms", rec->timings.decode_ms, "ttft_ms",
                      rec->timings.ttft_ms, "preemptions", (json_int_t)rec->timings.preemptions));
    json_t *ev = json_array();
    for (size_t k = 0; k < t->n_events; k++)
        json_array_append_new(ev, json_pack("[I, i]", (json_int_t)(t->events[k].t_ns - origin),
                                            (int)t->events[k].tokens));
    json_object_set_new(o, "events", ev); /* [arrival ns, tokens] */
    return o;
}

void result_opts_take_run(result_opts *o, const bench_run_out *run) {
    o->origin_ns = run->t_start_ns;
    o->origin_unix_ns = run->t_start_unix_ns;
    o->client_cpu_s = run->client_cpu_s;
    o->client_loops = run->client_loops;
    o->client_loop_cpu_max_s = run->client_loop_cpu_max_s;
    o->has_runq = run->has_runq;
    o->client_runq_s = run->client_runq_s;
    o->bytes = run->bytes_received;
    o->events = run->events_received;
    o->host = run->host;
    o->host_ticks = run->host_ticks;
    o->n_host_ticks = run->n_host_ticks;
}

/* The run-wide settings and client figures, as the caller measured them. */
static void take_opts(bench_result *r, const result_opts *o) {
    r->runs = 1;
    r->config = o->config ? json_incref(o->config) : json_object();
    r->t0_unix_ns = o->origin_unix_ns;
    r->slo = o->slo;
    r->client_cpu_s = o->client_cpu_s;
    r->client_loops = o->client_loops ? o->client_loops : 1;
    r->client_loop_cpu_max_s = o->client_loop_cpu_max_s;
    r->has_runq = o->has_runq;
    r->client_runq_s = o->client_runq_s;
    r->bytes = o->bytes;
    r->events = o->events;
    r->host = o->host;
    if (o->per_request) r->per_request = json_array();
    if (o->server_metrics) r->server_metrics = json_incref(o->server_metrics);
}

/* How a request ended, and the tokens and stream events it counted. */
static void count_outcome(bench_result *r, const bench_record *rec, bool warm) {
    const timeline *t = &rec->tl;
    r->warmup_excluded += warm;
    r->requests++;
    if (rec->err == BENCH_OK)
        r->completed++;
    else if (rec->err == BENCH_ERR_CANCELLED)
        r->cancelled++;
    else
        r->failed++;
    r->errors[rec->err]++;
    if (rec->err != BENCH_OK) set_example(r, rec->err, rec->err_msg);
    if (!warm) hist_record(r->h[RH_SEND_LAG], t->t_sent - t->t_sched);
    r->output_tokens += t->output_tokens;
    if (t->n_events || rec->err == BENCH_OK) {
        r->input_tokens += t->prompt_tokens;
        add_cached(&r->cached, rec);
    }
    r->token_events += t->n_events;
    r->multi_token_events += t->multi_token_events;
    size_t arrivals, multi;
    timeline_arrivals(t, &arrivals, &multi);
    r->token_arrivals += arrivals;
    r->multi_token_arrivals += multi;
    r->held_tokens += rec->held_tokens;
    r->reasoning_tokens += rec->reasoning_tokens;
    r->reasoning_from_usage += rec->err == BENCH_OK && rec->reasoning_from_usage;
    if (rec->implausible[0]) {
        if (!r->implausible_requests)
            memcpy(r->implausible_example, rec->implausible, sizeof r->implausible_example);
        r->implausible_requests++;
    }
    if (rec->unread_events) {
        if (!r->unread_requests) memcpy(r->unread_field, rec->unread, sizeof r->unread_field);
        r->unread_requests++;
    }
    if (rec->has_usage) r->with_usage++;
    if (rec->has_usage && rec->usage_completion != rec->stream_tokens) {
        r->mismatch_requests++;
        r->mismatch_tokens += (int64_t)rec->usage_completion - (int64_t)rec->stream_tokens;
    }
    if (rec->err == BENCH_OK) r->by_source[t->source & 3]++;
}

/* The server's own timings of a request, where it sent them. */
static void count_server_timings(bench_result *r, const bench_record *rec, bool warm) {
    if (!rec->has_timings) return;
    const bench_timings *x = &rec->timings;
    r->with_timings++;
    if (x->preemptions > 0) r->server_preemptions += (uint64_t)x->preemptions;
    if (warm) return;
    if (x->queue_ms >= 0) hist_record(r->h[RH_SRV_QUEUE], ms_to_ns(x->queue_ms));
    if (x->prefill_ms >= 0) hist_record(r->h[RH_SRV_PREFILL], ms_to_ns(x->prefill_ms));
    if (x->decode_ms >= 0) hist_record(r->h[RH_SRV_DECODE], ms_to_ns(x->decode_ms));
    if (x->ttft_ms >= 0) hist_record(r->h[RH_SRV_TTFT], ms_to_ns(x->ttft_ms));
}

/* One request (the i-th sent) into the counts and, unless it is warm-up or
 * failed, the distributions; th holds r's timeline histograms. */
static int add_record(bench_result *r, const bench_record *rec, size_t i, bool warm,
                      const timeline_hists *th, uint64_t origin, tps_err *e) {
    count_outcome(r, rec, warm);
    count_server_timings(r, rec, warm);
    if (rec->turn) {
        int rc = add_turn(&r->turns, rec, warm, e);
        if (rc) return rc;
    }
    if (rec->err == BENCH_OK && !warm) {
        timeline_record(&rec->tl, th);
        hist_record(r->h[RH_OUTPUT_TOKENS], rec->tl.output_tokens);
        hist_record(r->h[RH_INPUT_TOKENS], rec->tl.prompt_tokens);
    }
    if (r->per_request) json_array_append_new(r->per_request, record_json(rec, i, warm, origin));
    return TPS_OK;
}

int result_build(bench_result *r, const bench_record *recs, size_t n, const result_opts *o,
                 tps_err *e) {
    memset(r, 0, sizeof *r);
    if (n == 0) return tps_fail(e, TPS_EINVAL, "no requests were sent: nothing to report");
    int rc = alloc_hists(r, e);
    if (rc) goto fail;
    const timeline **tls = malloc(n * sizeof *tls);
    if (!tls) {
        rc = tps_fail(e, TPS_ENOMEM, "out of memory");
        goto fail;
    }
    take_opts(r, o);
    window run;
    for (size_t i = 0; i < n; i++)
        tls[i] = &recs[i].tl;
    if ((rc = window_run(&run, tls, n, e))) goto fail_tls;
    uint64_t warm_end = 0;
    const bool has_warm = warmup_end(&warm_end, &run, o, tls, n);
    /* a whole response (not streamed) shows no first token and no gaps: E2E only */
    const timeline_hists whole = {.e2e = r->h[RH_E2E], .e2e_sent = r->h[RH_E2E_SENT]};
    const timeline_hists th = !result_streamed(r)
                                  ? whole
                                  : (timeline_hists){.ttft = r->h[RH_TTFT],
                                                     .ttft_sent = r->h[RH_TTFT_SENT],
                                                     .ttfo = r->h[RH_TTFO],
                                                     .itl = r->h[RH_ITL],
                                                     .tpot = r->h[RH_TPOT],
                                                     .e2e = r->h[RH_E2E],
                                                     .e2e_sent = r->h[RH_E2E_SENT],
                                                     .arrival_gap = r->h[RH_ARRIVAL_GAP]};
    for (size_t i = 0; i < n; i++) {
        const bool warm = has_warm && recs[i].tl.t_sent < warm_end;
        if ((rc = add_record(r, &recs[i], i, warm, &th, o->origin_ns, e))) goto fail_tls;
    }
    measure_windows(r, &run, o, tls, n);
    if ((rc = measure_series(r, &run, o, tls, n, e))) goto fail_tls;
    free(tls);
    return TPS_OK;
fail_tls:
    free(tls);
fail:
    result_free(r);
    return rc;
}
