/* Results of runs made at the same time merged into one (result.h):
 * histograms bucket by bucket, counts and window rates summed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/result/result.h"
#include "bench/result/result_internal.h"

/* ---- merge ---------------------------------------------------------------------------------- */

static void merge_cached(result_cached *d, const result_cached *s) {
    d->requests += s->requests;
    d->tokens += s->tokens;
    d->prompt += s->prompt;
}

/* The runs' machines' shares, weighted by their run windows' lengths;
 * unknown when either is. Before the windows merge. */
static void merge_host(bench_result *d, const bench_result *s) {
    if (!d->host.known || !s->host.known) {
        d->host.known = false;
        return;
    }
    double a = d->run.valid ? d->run.tps.seconds : 0, b = s->run.valid ? s->run.tps.seconds : 0;
    if (!(a + b > 0)) a = b = 1;
    d->host.steal = (a * d->host.steal + b * s->host.steal) / (a + b);
    d->host.others = (a * d->host.others + b * s->host.others) / (a + b);
}

static void merge_window(result_window *d, const result_window *s) {
    if (!s->valid) return;
    if (!d->valid) {
        *d = *s;
        return;
    }
    window_tps *a = &d->tps;
    const window_tps *b = &s->tps;
    if (b->seconds > a->seconds) a->seconds = b->seconds;
    a->output_tokens += b->output_tokens;
    a->input_tokens += b->input_tokens;
    a->completed += b->completed;
    a->output_tps += b->output_tps;
    a->input_tps += b->input_tps;
    a->total_tps += b->total_tps;
    a->request_rate += b->request_rate;
    d->good.good += s->good.good;
    d->good.completed += s->good.completed;
    d->good.goodput += s->good.goodput;
    d->good.good_fraction =
        d->good.completed ? (double)d->good.good / (double)d->good.completed : 0.0;
}

static int merge_group(result_turn_group *d, const result_turn_group *s, tps_err *e) {
    d->completed += s->completed;
    d->input_tokens += s->input_tokens;
    merge_cached(&d->cached, &s->cached);
    return hist_merge(d->ttft, s->ttft, e);
}

static int merge_turns(result_turns *d, const result_turns *s, tps_err *e) {
    if (!s->turns) return TPS_OK;
    int rc = result_turns_alloc(d, e);
    if (rc) return rc;
    if (s->turns > d->turns) d->turns = s->turns;
    d->conversations += s->conversations;
    rc = merge_group(&d->first, &s->first, e);
    return rc ? rc : merge_group(&d->later, &s->later, e);
}

/* The time series, aligned on the wall clock at bin resolution. */
static int merge_series(bench_result *dst, const bench_result *src, tps_err *e) {
    if (src->nbins && src->bin_s == dst->bin_s && dst->bin_s > 0) {
        int64_t t0 = dst->t0_unix_ns < src->t0_unix_ns ? dst->t0_unix_ns : src->t0_unix_ns;
        const double bin_ns = dst->bin_s * 1e9;
        size_t od = (size_t)llround((double)(dst->t0_unix_ns - t0) / bin_ns);
        size_t os = (size_t)llround((double)(src->t0_unix_ns - t0) / bin_ns);
        size_t n = od + dst->nbins > os + src->nbins ? od + dst->nbins : os + src->nbins;
        uint64_t *so = calloc(n, sizeof *so), *si = calloc(n, sizeof *si);
        if (!so || !si) {
            free(so);
            free(si);
            return tps_fail(e, TPS_ENOMEM, "out of memory");
        }
        for (size_t k = 0; k < dst->nbins; k++)
            so[od + k] += dst->series_out[k], si[od + k] += dst->series_in[k];
        for (size_t k = 0; k < src->nbins; k++)
            so[os + k] += src->series_out[k], si[os + k] += src->series_in[k];
        free(dst->series_out);
        free(dst->series_in);
        free(dst->series_steal); /* the runs' machines per bin: not merged */
        dst->series_steal = NULL;
        dst->series_out = so;
        dst->series_in = si;
        dst->nbins = n;
        dst->t0_unix_ns = t0;
        dst->peak_tps = 0;
        for (size_t k = 0; k + 1 < n || (n == 1 && k == 0); k++) /* full bins only */
            if ((double)so[k] / dst->bin_s > dst->peak_tps)
                dst->peak_tps = (double)so[k] / dst->bin_s, dst->peak_bin = k;
    }
    return TPS_OK;
}

int result_merge(bench_result *dst, const bench_result *src, tps_err *e) {
    for (int i = 0; i < RH_COUNT; i++) {
        int rc = hist_merge(dst->h[i], src->h[i], e);
        if (rc) return rc;
    }
    int rc = merge_turns(&dst->turns, &src->turns, e);
    if (rc) return rc;
    merge_cached(&dst->cached, &src->cached);
    if ((rc = merge_series(dst, src, e))) return rc;
    dst->runs += src->runs;
    dst->requests += src->requests;
    dst->completed += src->completed;
    dst->failed += src->failed;
    dst->cancelled += src->cancelled;
    for (int k = 0; k < BENCH_ERR_COUNT; k++) {
        dst->errors[k] += src->errors[k];
        if (!dst->error_example[k] && src->error_example[k])
            dst->error_example[k] = strdup(src->error_example[k]);
    }
    for (int k = 0; k < 4; k++)
        dst->by_source[k] += src->by_source[k];
    dst->token_events += src->token_events;
    dst->multi_token_events += src->multi_token_events;
    dst->token_arrivals += src->token_arrivals;
    dst->multi_token_arrivals += src->multi_token_arrivals;
    dst->held_tokens += src->held_tokens;
    dst->reasoning_tokens += src->reasoning_tokens;
    dst->reasoning_from_usage += src->reasoning_from_usage;
    if (!dst->unread_requests && src->unread_requests)
        memcpy(dst->unread_field, src->unread_field, sizeof dst->unread_field);
    dst->unread_requests += src->unread_requests;
    if (!dst->implausible_requests && src->implausible_requests)
        memcpy(dst->implausible_example, src->implausible_example, sizeof dst->implausible_example);
    dst->implausible_requests += src->implausible_requests;
    dst->mismatch_requests += src->mismatch_requests;
    dst->mismatch_tokens += src->mismatch_tokens;
    dst->output_tokens += src->output_tokens;
    dst->input_tokens += src->input_tokens;
    dst->with_usage += src->with_usage;
    dst->with_timings += src->with_timings;
    dst->server_preemptions += src->server_preemptions;
    dst->client_cpu_s += src->client_cpu_s;
    dst->client_loops += src->client_loops;
    if (src->client_loop_cpu_max_s > dst->client_loop_cpu_max_s)
        dst->client_loop_cpu_max_s = src->client_loop_cpu_max_s;
    dst->has_runq = dst->has_runq && src->has_runq;
    dst->client_runq_s += src->client_runq_s;
    dst->warmup_excluded += src->warmup_excluded;
    dst->bytes += src->bytes;
    dst->events += src->events;
    merge_host(dst, src);
    merge_window(&dst->run, &src->run);
    merge_window(&dst->steady, &src->steady);
    merge_window(&dst->user, &src->user);
    json_decref(dst->per_request); /* per-request records are per run; not merged */
    dst->per_request = NULL;
    json_decref(dst->server_metrics); /* one server's series per run */
    dst->server_metrics = NULL;
    return TPS_OK;
}
