/* Capacity under an SLO (capacity.h): probes at fixed open-loop rates, a
 * verdict per probe, bracket then bisection, JSON and a table. Every probe
 * is bench_run + result_build in this process: no argv, no temp files.
 * Not here: option parsing, the metric definitions (result.h, metrics/). */
#include "bench/experiment/capacity.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/workload/load.h"
#include "bench/io/json_file.h"
#include "bench/result/verdict.h"
#include "base/clock.h"

capacity_opts capacity_opts_default(void) {
    return (capacity_opts){
        .goodput_target = 0.95,
        .check_p99 = true,
        .start_rate = 1.0,
        .max_rate = 1024.0,
        .precision = 0.05,
        .max_probes = 12,
        .time_budget_s = 600.0,
        .min_sent_frac = 0.9,
    };
}

const char *capacity_stop_name(capacity_stop s) {
    switch (s) {
    case CAP_STOP_CONVERGED:
        return "converged";
    case CAP_STOP_MAX_RATE:
        return "max_rate";
    case CAP_STOP_MIN_RATE:
        return "min_rate";
    case CAP_STOP_PROBES:
        return "max_probes";
    case CAP_STOP_TIME:
        return "time_budget";
    }
    return "?";
}

void capacity_result_free(capacity_result *r) {
    for (size_t i = 0; i < r->n; i++)
        result_free(&r->probes[i].result);
    free(r->probes);
    memset(r, 0, sizeof *r);
}

/* ---- the verdict ---------------------------------------------------------------------- */

static double ns_ms(uint64_t ns) {
    return (double)ns / 1e6;
}

/* A quarter of the tightest start-based limit (TTFT, else E2E), at least
 * 5 ms: a later send eats that much of the request's budget before the
 * server sees it. 50 ms when neither is set. */
double capacity_lag_limit_ms(const capacity_opts *o) {
    if (o->max_send_lag_ms > 0) return o->max_send_lag_ms;
    uint64_t lim = o->slo.ttft_ns ? o->slo.ttft_ns : o->slo.e2e_ns;
    if (!lim) return 50.0;
    double ms = ns_ms(lim) / 4;
    return ms < 5.0 ? 5.0 : ms;
}

/* Appends "; text" (or text) to p->why. */
static void why_add(capacity_probe *p, const char *text) {
    size_t n = strlen(p->why);
    snprintf(p->why + n, sizeof p->why - n, "%s%s", n ? "; " : "", text);
}

static void check_p99(capacity_probe *p, const char *name, double p99_ms, uint64_t lim_ns) {
    if (!lim_ns || p99_ms <= ns_ms(lim_ns)) return;
    char b[96];
    snprintf(b, sizeof b, "%s p99 %.1f ms > %.1f ms", name, p99_ms, ns_ms(lim_ns));
    why_add(p, b);
    p->pass = false;
}

void capacity_judge(capacity_probe *p, const capacity_opts *o) {
    p->why[0] = 0;
    p->good_fraction = p->sent ? (double)p->good / (double)p->sent : 0.0;
    p->achieved_rate = p->duration_s > 0 ? (double)p->sent / p->duration_s : 0.0;
    const double lag_lim = capacity_lag_limit_ms(o);
    p->client_limited = false;
    char b[96];
    if (p->scheduled && (double)p->sent < o->min_sent_frac * (double)p->scheduled) {
        p->client_limited = true;
        snprintf(b, sizeof b, "client-limited: sent %llu of %llu scheduled",
                 (unsigned long long)p->sent, (unsigned long long)p->scheduled);
        why_add(p, b);
    }
    if (p->send_lag_p99_ms > lag_lim) {
        p->client_limited = true;
        snprintf(b, sizeof b, "client-limited: send lag p99 %.1f ms > %.1f ms", p->send_lag_p99_ms,
                 lag_lim);
        why_add(p, b);
    }
    p->pass = !p->client_limited;
    if (p->completed == 0) {
        p->pass = false;
        why_add(p, "no request completed");
    }
    if (p->good_fraction < o->goodput_target) {
        p->pass = false;
        snprintf(b, sizeof b, "goodput %.1f%% < %.1f%%", 100 * p->good_fraction,
                 100 * o->goodput_target);
        why_add(p, b);
    }
    if (o->check_p99 && p->completed) {
        check_p99(p, "TTFT", p->ttft_p99_ms, o->slo.ttft_ns);
        check_p99(p, "ITL", p->itl_p99_ms, o->slo.tpot_ns);
        check_p99(p, "E2E", p->e2e_p99_ms, o->slo.e2e_ns);
    }
    if (p->pass) snprintf(p->why, sizeof p->why, "ok");
}

/* ---- one probe ------------------------------------------------------------------------ */

/* Sends the schedule has in [0, dur): the same arrival process and seed as
 * bench_run's sender (client.c), replayed. */
static uint64_t scheduled_sends(const bench_config *c) {
    tps_rng rng;
    tps_rng_seed(&rng, c->seed);
    const uint64_t dur = (uint64_t)(c->duration_s * 1e9);
    uint64_t t = 0, n = 0;
    while (t < dur && n < 100000000ull) {
        n++;
        t += load_next_gap_ns(c->arrival, c->rate, c->burstiness, &rng);
    }
    return n;
}

static double p99_ms(const bench_result *r, result_hist_id id) {
    return ns_ms(hist_percentile(r->h[id], 99.0));
}

/* The probe's result from its records: its config is o->config with the
 * probe's rate, duration and seed. */
static int probe_result(capacity_probe *p, const capacity_opts *o, const bench_config *c,
                        const bench_run_out *ro, tps_err *e) {
    json_t *cfg = o->config ? json_deep_copy(o->config) : json_object();
    if (!cfg) return tps_fail(e, TPS_ENOMEM, "out of memory");
    json_object_set_new(cfg, "rate", json_real(c->rate));
    json_object_set_new(cfg, "duration_s", json_real(c->duration_s));
    json_object_set_new(cfg, "requests", json_integer(0));
    json_object_set_new(cfg, "seed", json_integer((json_int_t)c->seed));
    result_opts ropts = {.slo = o->slo, .config = cfg};
    result_opts_take_run(&ropts, ro);
    int rc = result_build(&p->result, ro->recs, ro->n, &ropts, e);
    json_decref(cfg);
    if (rc) return rc;
    p->ttft_p99_ms = p99_ms(&p->result, RH_TTFT);
    p->itl_p99_ms = p99_ms(&p->result, RH_ITL);
    p->e2e_p99_ms = p99_ms(&p->result, RH_E2E);
    p->send_lag_p99_ms = p99_ms(&p->result, RH_SEND_LAG);
    const result_cached *cached = &p->result.cached;
    p->cached_fraction =
        cached->requests && cached->prompt ? (double)cached->tokens / (double)cached->prompt : -1;
    p->steal = p->result.host.known ? p->result.host.steal : -1;
    return TPS_OK;
}

/* Probe k (from 0): its own workload (o->prepare) or the search's. */
static int run_probe(capacity_probe *p, const capacity_opts *o, const bench_config *base,
                     const workload *wl, size_t k, double rate, double dur, tps_err *e) {
    memset(p, 0, sizeof *p);
    p->cached_fraction = -1;
    p->steal = -1;
    bench_config c = *base;
    workload own;
    if (o->prepare) {
        int rc = o->prepare(&own, &c, k, rate, dur, o->prepare_arg, e);
        if (rc) return rc;
        wl = &own;
    }
    c.rate = rate;
    c.requests = 0;
    c.duration_s = dur;
    c.progress = false;
    p->rate = rate;
    p->duration_s = dur;
    p->scheduled = scheduled_sends(&c);
    const uint64_t t0 = tps_now_ns();
    bench_run_out ro;
    int rc = o->run ? o->run(&ro, &c, wl, o->run_arg, e) : bench_run(&ro, &c, wl, e);
    if (o->prepare) workload_free(&own);
    if (rc) return rc;
    p->sent = ro.n;
    for (size_t i = 0; i < ro.n; i++) {
        const bench_record *rec = &ro.recs[i];
        if (rec->err != BENCH_OK) continue;
        p->completed++;
        p->good += timeline_meets_slo(&rec->tl, &o->slo, TL_FROM_SCHEDULED);
    }
    if (ro.n && (rc = probe_result(p, o, &c, &ro, e))) {
        bench_run_free(&ro);
        return rc;
    }
    bench_run_free(&ro);
    p->wall_s = tps_ns_to_s(tps_now_ns() - t0);
    capacity_judge(p, o);
    return TPS_OK;
}

/* ---- the search ----------------------------------------------------------------------- */

static int check_opts(const capacity_opts *o, const bench_config *base, const workload *wl,
                      double min_rate, double dur, tps_err *e) {
    if (!o->slo.ttft_ns && !o->slo.tpot_ns && !o->slo.e2e_ns)
        return tps_fail(e, TPS_EINVAL,
                        "a capacity search needs an SLO: set a TTFT, ITL or E2E "
                        "limit");
    if (!(o->goodput_target > 0 && o->goodput_target <= 1))
        return tps_fail(e, TPS_EINVAL, "the goodput target must be in (0, 1], not %g",
                        o->goodput_target);
    if (!(o->start_rate > 0) || !(min_rate > 0) || min_rate > o->start_rate ||
        o->start_rate > o->max_rate)
        return tps_fail(e, TPS_EINVAL,
                        "rates must satisfy 0 < min (%g) <= start (%g) <= max (%g) requests/s",
                        min_rate, o->start_rate, o->max_rate);
    if (!(o->precision > 0))
        return tps_fail(e, TPS_EINVAL, "the precision must be > 0, not %g", o->precision);
    if (o->max_probes < 1) return tps_fail(e, TPS_EINVAL, "at least one probe must be allowed");
    if (!(dur > 0)) return tps_fail(e, TPS_EINVAL, "each probe needs a duration > 0");
    if (!(o->time_budget_s > 0)) return tps_fail(e, TPS_EINVAL, "the time budget must be > 0");
    if (wl && wl->turns)
        return tps_fail(e, TPS_EINVAL,
                        "a capacity search sets --rate, which conversations "
                        "(--turns) do not take");
    (void)base;
    return TPS_OK;
}

int capacity_search(capacity_result *out, const capacity_opts *o, const bench_config *base,
                    const workload *wl, capacity_probe_cb cb, void *cb_arg, tps_err *e) {
    memset(out, 0, sizeof *out);
    const double min_rate = o->min_rate > 0 ? o->min_rate : o->start_rate / 16;
    const double dur = o->probe_s > 0 ? o->probe_s : base->duration_s > 0 ? base->duration_s : 10;
    int rc = check_opts(o, base, wl, min_rate, dur, e);
    if (rc) return rc;
    out->probes = calloc(o->max_probes, sizeof *out->probes);
    if (!out->probes) return tps_fail(e, TPS_ENOMEM, "out of memory");

    const uint64_t t0 = tps_now_ns();
    double lo = 0, hi = 0, rate = o->start_rate, longest = 0;
    for (;;) {
        if (out->n >= o->max_probes) {
            out->stop = CAP_STOP_PROBES;
            break;
        }
        const double elapsed = tps_ns_to_s(tps_now_ns() - t0);
        if (out->n && elapsed + longest > o->time_budget_s) {
            out->stop = CAP_STOP_TIME;
            break;
        }
        capacity_probe *p = &out->probes[out->n];
        if ((rc = run_probe(p, o, base, wl, out->n, rate, dur, e))) goto fail;
        out->n++;
        if (p->wall_s > longest) longest = p->wall_s;
        if (p->pass) {
            if (rate > lo) lo = rate;
        } else if (hi == 0 || rate < hi) {
            hi = rate;
            out->client_limited = p->client_limited;
        }
        if (cb) cb(p, out->n - 1, cb_arg);
        if (hi == 0) { /* nothing failed yet: up */
            if (rate >= o->max_rate) {
                out->stop = CAP_STOP_MAX_RATE;
                break;
            }
            rate = fmin(2 * rate, o->max_rate);
        } else if (lo == 0) { /* nothing passed yet: down */
            if (rate <= min_rate) {
                out->stop = CAP_STOP_MIN_RATE;
                break;
            }
            rate = fmax(rate / 2, min_rate);
        } else {
            if (hi - lo <= o->precision * lo) {
                out->stop = CAP_STOP_CONVERGED;
                break;
            }
            rate = (lo + hi) / 2;
        }
    }
    out->max_rate = lo;
    out->fail_rate = hi;
    if (hi == 0) out->client_limited = false;
    out->wall_s = tps_ns_to_s(tps_now_ns() - t0);
    return TPS_OK;
fail:
    capacity_result_free(out);
    return rc;
}

/* ---- output --------------------------------------------------------------------------- */

static json_t *probe_json(const capacity_probe *p) {
    json_t *j = json_pack(
        "{s:f, s:f, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:b, s:b, s:s, s:f}", "rate",
        p->rate, "duration_s", p->duration_s, "scheduled", (json_int_t)p->scheduled, "sent",
        (json_int_t)p->sent, "completed", (json_int_t)p->completed, "good", (json_int_t)p->good,
        "achieved_rate", p->achieved_rate, "good_fraction", p->good_fraction, "ttft_p99_ms",
        p->ttft_p99_ms, "itl_p99_ms", p->itl_p99_ms, "e2e_p99_ms", p->e2e_p99_ms, "send_lag_p99_ms",
        p->send_lag_p99_ms, "pass", p->pass, "client_limited", p->client_limited, "why", p->why,
        "wall_s", p->wall_s);
    if (!j) return NULL;
    json_object_set_new(j, "cached_fraction",
                        p->cached_fraction >= 0 ? json_real(p->cached_fraction) : json_null());
    json_object_set_new(j, "steal", p->steal >= 0 ? json_real(p->steal) : json_null());
    json_object_set_new(j, "result", p->result.runs ? result_to_json(&p->result) : json_null());
    return j;
}

json_t *capacity_to_json(const capacity_result *r, const capacity_opts *o) {
    json_t *probes = json_array();
    for (size_t i = 0; i < r->n; i++)
        json_array_append_new(probes, probe_json(&r->probes[i]));
    return json_pack("{s:s, s:i, s:{s:I, s:I, s:I}, s:f, s:b, s:f, s:o, s:f, s:f, s:b, s:s, s:f}",
                     "schema", CAPACITY_SCHEMA, "version", CAPACITY_VERSION, "slo_ns", "ttft",
                     (json_int_t)o->slo.ttft_ns, "itl", (json_int_t)o->slo.tpot_ns, "e2e",
                     (json_int_t)o->slo.e2e_ns, "goodput_target", o->goodput_target, "check_p99",
                     o->check_p99, "send_lag_limit_ms", capacity_lag_limit_ms(o), "probes", probes,
                     "max_rate", r->max_rate, "fail_rate", r->fail_rate, "client_limited",
                     r->client_limited, "stop", capacity_stop_name(r->stop), "wall_s", r->wall_s);
}

int capacity_write_json(const capacity_result *r, const capacity_opts *o, const char *path,
                        tps_err *e) {
    json_t *j = capacity_to_json(r, o);
    if (!j) return tps_fail(e, TPS_ENOMEM, "out of memory building the capacity JSON");
    int rc = json_file_write(j, path, JSON_INDENT(1), e); /* the path and why */
    json_decref(j);
    return rc;
}

/* ---- input ---------------------------------------------------------------------------- */

static double num_of(const json_t *o, const char *k) {
    return json_number_value(json_object_get(o, k));
}

/* A probe's summary as probe_json writes it. */
#define P(f) offsetof(capacity_probe, f)
static const json_field PROBE[] = {
    {"rate", JF_F64, P(rate)},
    {"duration_s", JF_F64, P(duration_s)},
    {"scheduled", JF_U64, P(scheduled)},
    {"sent", JF_U64, P(sent)},
    {"completed", JF_U64, P(completed)},
    {"good", JF_U64, P(good)},
    {"achieved_rate", JF_F64, P(achieved_rate)},
    {"good_fraction", JF_F64, P(good_fraction)},
    {"ttft_p99_ms", JF_F64, P(ttft_p99_ms)},
    {"itl_p99_ms", JF_F64, P(itl_p99_ms)},
    {"e2e_p99_ms", JF_F64, P(e2e_p99_ms)},
    {"send_lag_p99_ms", JF_F64, P(send_lag_p99_ms)},
    {"pass", JF_BOOL, P(pass)},
    {"client_limited", JF_BOOL, P(client_limited)},
    {"wall_s", JF_F64, P(wall_s)},
};
#undef P

int capacity_from_json(capacity_result *r, capacity_opts *o, const json_t *j, tps_err *e) {
    memset(r, 0, sizeof *r);
    *o = capacity_opts_default();
    const char *schema = json_string_value(json_object_get(j, "schema"));
    if (!schema || strcmp(schema, CAPACITY_SCHEMA))
        return tps_fail(e, TPS_EINVAL, "not a capacity search (%s)", CAPACITY_SCHEMA);
    json_t *v = json_object_get(j, "version");
    if (!json_is_integer(v) || json_integer_value(v) != CAPACITY_VERSION)
        return tps_fail(e, TPS_EUNSUP, "capacity search version %lld; this tps reads version %d",
                        json_is_integer(v) ? (long long)json_integer_value(v) : -1LL,
                        CAPACITY_VERSION);
    json_t *probes = json_object_get(j, "probes");
    if (!json_is_array(probes)) return tps_fail(e, TPS_EINVAL, "no \"probes\" array");
    json_t *slo = json_object_get(j, "slo_ns");
    o->slo.ttft_ns = (uint64_t)json_integer_value(json_object_get(slo, "ttft"));
    o->slo.tpot_ns = (uint64_t)json_integer_value(json_object_get(slo, "itl"));
    o->slo.e2e_ns = (uint64_t)json_integer_value(json_object_get(slo, "e2e"));
    if (json_is_number(json_object_get(j, "goodput_target")))
        o->goodput_target = num_of(j, "goodput_target");
    o->check_p99 = json_is_true(json_object_get(j, "check_p99"));
    size_t n = json_array_size(probes);
    r->probes = n ? calloc(n, sizeof *r->probes) : NULL;
    if (n && !r->probes) return tps_fail(e, TPS_ENOMEM, "out of memory");
    r->n = n;
    for (size_t i = 0; i < n; i++) {
        const json_t *pj = json_array_get(probes, i);
        capacity_probe *p = &r->probes[i];
        json_fields_read(p, pj, PROBE, sizeof PROBE / sizeof PROBE[0]);
        const char *why = json_string_value(json_object_get(pj, "why"));
        snprintf(p->why, sizeof p->why, "%s", why ? why : "");
        const json_t *cf = json_object_get(pj, "cached_fraction");
        p->cached_fraction = json_is_number(cf) ? json_number_value(cf) : -1;
        const json_t *st = json_object_get(pj, "steal");
        p->steal = json_is_number(st) ? json_number_value(st) : -1;
    }
    r->max_rate = num_of(j, "max_rate");
    r->fail_rate = num_of(j, "fail_rate");
    r->client_limited = json_is_true(json_object_get(j, "client_limited"));
    r->wall_s = num_of(j, "wall_s");
    const char *stop = json_string_value(json_object_get(j, "stop"));
    for (int k = CAP_STOP_CONVERGED; k <= CAP_STOP_TIME; k++)
        if (stop && !strcmp(stop, capacity_stop_name((capacity_stop)k))) r->stop = (capacity_stop)k;
    return TPS_OK;
}

void capacity_print_header(FILE *f) {
    fprintf(f, "%5s %9s %9s %6s %6s %10s %10s %10s %9s %7s %6s  %s\n", "probe", "rate/s", "sent/s",
            "sent", "good%", "TTFT p99", "ITL p99", "E2E p99", "lag p99", "cached", "steal",
            "verdict");
}

void capacity_print_probe(FILE *f, const capacity_probe *p, size_t i) {
    char cached[16] = "-", steal[16] = "-";
    if (p->cached_fraction >= 0)
        snprintf(cached, sizeof cached, "%.1f%%", 100 * p->cached_fraction);
    if (p->steal >= 0) snprintf(steal, sizeof steal, "%.0f%%", 100 * p->steal);
    fprintf(f, "%5zu %9.2f %9.2f %6llu %5.1f%% %10.1f %10.1f %10.1f %9.1f %7s %6s  %s: %s\n", i + 1,
            p->rate, p->achieved_rate, (unsigned long long)p->sent, 100 * p->good_fraction,
            p->ttft_p99_ms, p->itl_p99_ms, p->e2e_p99_ms, p->send_lag_p99_ms, cached, steal,
            p->pass ? "pass" : "FAIL", p->why);
}

void capacity_print(FILE *f, const capacity_result *r) {
    capacity_print_header(f);
    for (size_t i = 0; i < r->n; i++)
        capacity_print_probe(f, &r->probes[i], i);
    capacity_print_answer(f, r);
}

/* The least and most the hypervisor stole during a probe, over the
 * probes that read it; false when none did. */
static bool steal_range(const capacity_result *r, double *lo, double *hi) {
    bool any = false;
    for (size_t i = 0; i < r->n; i++) {
        const double s = r->probes[i].steal;
        if (!(s >= 0)) continue;
        if (!any || s < *lo) *lo = s;
        if (!any || s > *hi) *hi = s;
        any = true;
    }
    return any;
}

/* The last probe run at rate (the search's answer and the failure above
 * it are probe rates); NULL when none was. */
static const capacity_probe *probe_at(const capacity_result *r, double rate) {
    for (size_t i = r->n; i-- > 0;)
        if (r->probes[i].rate == rate) return &r->probes[i];
    return NULL;
}

static void print_edge_steal(FILE *f, const char *what, const capacity_probe *p) {
    if (p && p->steal >= 0) fprintf(f, "; %s %.2f: %.0f%%", what, p->rate, 100 * p->steal);
}

void capacity_print_answer(FILE *f, const capacity_result *r) {
    const char *stop = capacity_stop_name(r->stop);
    if (r->max_rate <= 0)
        fprintf(f, "no probed rate met the SLO (stopped: %s)\n", stop);
    else if (r->fail_rate <= 0)
        fprintf(f,
                "max rate within the SLO: at least %.2f requests/s, no probe failed (stopped: "
                "%s)\n",
                r->max_rate, stop);
    else
        fprintf(f, "max rate within the SLO: %.2f requests/s (%.2f failed; stopped: %s)\n",
                r->max_rate, r->fail_rate, stop);
    if (r->client_limited)
        fprintf(f, "note: the failing probe above the answer was client-limited (the load "
                   "generator could not keep its schedule): the server may sustain more\n");
    double lo = 0, hi = 0;
    if (steal_range(r, &lo, &hi) && hi >= VERDICT_STEAL_SHARE) {
        fprintf(f, "note: the hypervisor stole %.0f-%.0f%% of the CPU time during the probes",
                100 * lo, 100 * hi);
        print_edge_steal(f, "the passing probe at", r->max_rate > 0 ? probe_at(r, r->max_rate) : 0);
        print_edge_steal(f, "the failing one at", r->fail_rate > 0 ? probe_at(r, r->fail_rate) : 0);
        fprintf(f, ". The answer is this machine's at that steal; a search at another finds "
                   "another (the probes' steal column)\n");
    }
}
