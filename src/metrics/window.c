/* Windows over many timelines: run/steady/user, TPS, time series, goodput
 * (window.h states every convention). Not here: per-request metrics
 * (timeline.c), printing. */
#include "metrics/window.h"

#include <stdlib.h>

#include "base/clock.h"

/* ---- when tokens count ---------------------------------------------------- */

static inline int in_window(window w, uint64_t t) {
    return t > w.t0 && t <= w.t1;
}

/* When a request's input tokens count, or TL_NONE if they never do. */
static uint64_t input_time(const timeline *t) {
    if (t->n_events) return t->events[0].t_ns;
    if (t->status == TL_OK) return t->t_end;
    return TL_NONE;
}

/* Last byte, or the last token of a request still pending; TL_NONE if neither. */
static uint64_t last_seen(const timeline *t) {
    if (t->t_end != TL_NONE) return t->t_end;
    return timeline_last_token_ns(t);
}

/* ---- named windows -------------------------------------------------------- */

int window_run(window *out, const timeline *const *tls, size_t n, tps_err *e) {
    if (n == 0) return tps_fail(e, TPS_EINVAL, "no requests were sent: the run window is empty");
    uint64_t t0 = UINT64_MAX, t1 = 0;
    for (size_t i = 0; i < n; i++) {
        const timeline *t = tls[i];
        if (t->t_sent < t0) t0 = t->t_sent;
        uint64_t end = last_seen(t);
        if (end != TL_NONE && end > t1) t1 = end;
    }
    out->t0 = t0;
    out->t1 = t1 > t0 ? t1 : t0;
    return TPS_OK;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* First instant at which `target` requests are in flight, or TL_NONE. Sends
 * and ends are sorted together as (time << 1 | is_send) so that at equal
 * times an end is counted before a send: a closed-loop client replacing a
 * finished request does not momentarily exceed its concurrency. */
static int concurrency_reached(uint64_t *out, uint32_t target, const timeline *const *tls, size_t n,
                               tps_err *e) {
    uint64_t *ev = malloc(2 * n * sizeof *ev);
    if (!ev)
        return tps_fail(e, TPS_ENOMEM, "cannot allocate %zu events for the steady window", 2 * n);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        ev[m++] = tls[i]->t_sent << 1 | 1;
        if (tls[i]->t_end != TL_NONE) ev[m++] = tls[i]->t_end << 1;
    }
    qsort(ev, m, sizeof *ev, cmp_u64);
    *out = TL_NONE;
    uint64_t inflight = 0, peak = 0;
    for (size_t i = 0; i < m; i++) {
        if (ev[i] & 1) {
            if (++inflight > peak) peak = inflight;
            if (inflight >= target) {
                *out = ev[i] >> 1;
                break;
            }
        } else if (inflight) {
            inflight--;
        }
    }
    free(ev);
    if (*out == TL_NONE)
        return tps_fail(e, TPS_ERANGE,
                        "concurrency never reached its target of %u (peak %llu in flight): "
                        "no steady window; use --warmup/--cooldown or more requests",
                        target, (unsigned long long)peak);
    return TPS_OK;
}

int window_steady(window *out, const steady_opts *o, const timeline *const *tls, size_t n,
                  tps_err *e) {
    window run;
    int rc = window_run(&run, tls, n, e);
    if (rc) return rc;
    uint64_t t0, t1;
    if (o->warmup_ns || o->cooldown_ns) {
        t0 = run.t0 + o->warmup_ns;
        t1 = run.t1 > o->cooldown_ns ? run.t1 - o->cooldown_ns : 0;
        if (t1 <= t0)
            return tps_fail(e, TPS_ERANGE,
                            "warmup %.3f s + cooldown %.3f s leave nothing of a %.3f s run",
                            tps_ns_to_s(o->warmup_ns), tps_ns_to_s(o->cooldown_ns),
                            tps_ns_to_s(run.t1 - run.t0));
        *out = (window){t0, t1};
        return TPS_OK;
    }

    if (o->target_concurrency) {
        rc = concurrency_reached(&t0, o->target_concurrency, tls, n, e);
        if (rc) return rc;
    } else {
        t0 = UINT64_MAX; /* first completion */
        for (size_t i = 0; i < n; i++)
            if (tls[i]->t_end != TL_NONE && tls[i]->t_end < t0) t0 = tls[i]->t_end;
    }
    uint64_t last_send = 0;
    for (size_t i = 0; i < n; i++)
        if (tls[i]->t_sent > last_send) last_send = tls[i]->t_sent;
    t1 = UINT64_MAX; /* first completion after the last send */
    for (size_t i = 0; i < n; i++) {
        uint64_t end = tls[i]->t_end;
        if (end != TL_NONE && end > last_send && end < t1) t1 = end;
    }
    if (t0 == UINT64_MAX || t1 == UINT64_MAX || t1 <= t0)
        return tps_fail(e, TPS_ERANGE,
                        "no steady window: the load never held (the drain began before the "
                        "target load was reached); use --warmup/--cooldown or a longer run");
    *out = (window){t0, t1};
    return TPS_OK;
}

int window_user(window *out, const window *run, uint64_t t0_off_ns, uint64_t t1_off_ns,
                tps_err *e) {
    if (t0_off_ns >= t1_off_ns)
        return tps_fail(e, TPS_EINVAL, "window %.3f:%.3f s is empty: t0 must be below t1",
                        tps_ns_to_s(t0_off_ns), tps_ns_to_s(t1_off_ns));
    *out = (window){run->t0 + t0_off_ns, run->t0 + t1_off_ns};
    return TPS_OK;
}

/* ---- TPS -------------------------------------------------------------------- */

static double per_second(uint64_t count, double seconds) {
    return seconds > 0 ? (double)count / seconds : 0.0;
}

void window_measure(window_tps *out, window w, const timeline *const *tls, size_t n) {
    uint64_t out_tok = 0, in_tok = 0, completed = 0;
    for (size_t i = 0; i < n; i++) {
        const timeline *t = tls[i];
        for (size_t j = 0; j < t->n_events; j++)
            if (in_window(w, t->events[j].t_ns)) out_tok += t->events[j].tokens;
        uint64_t ti = input_time(t);
        if (ti != TL_NONE && in_window(w, ti)) in_tok += t->prompt_tokens;
        completed += t->status == TL_OK && in_window(w, t->t_end);
    }
    double s = w.t1 > w.t0 ? tps_ns_to_s(w.t1 - w.t0) : 0.0;
    *out = (window_tps){
        .w = w,
        .seconds = s,
        .output_tokens = out_tok,
        .input_tokens = in_tok,
        .completed = completed,
        .output_tps = per_second(out_tok, s),
        .input_tps = per_second(in_tok, s),
        .total_tps = per_second(in_tok + out_tok, s),
        .request_rate = per_second(completed, s),
    };
}

/* ---- time series -------------------------------------------------------- */

size_t window_nbins(window w, uint64_t bin_ns) {
    if (bin_ns == 0 || w.t1 <= w.t0) return 0;
    uint64_t len = w.t1 - w.t0;
    return (size_t)(len / bin_ns + (len % bin_ns != 0));
}

int window_series(uint64_t *out_tokens, uint64_t *in_tokens, size_t nbins, window w,
                  uint64_t bin_ns, const timeline *const *tls, size_t n, tps_err *e) {
    if (nbins != window_nbins(w, bin_ns))
        return tps_fail(e, TPS_EINVAL, "series needs %zu bins of %llu ns, not %zu",
                        window_nbins(w, bin_ns), (unsigned long long)bin_ns, nbins);
    for (size_t k = 0; k < nbins; k++) {
        out_tokens[k] = 0;
        if (in_tokens) in_tokens[k] = 0;
    }
    /* t in (t0, t1] lies in bin (t - t0 - 1) / b. */
    for (size_t i = 0; i < n; i++) {
        const timeline *t = tls[i];
        for (size_t j = 0; j < t->n_events; j++) {
            uint64_t ta = t->events[j].t_ns;
            if (in_window(w, ta)) out_tokens[(ta - w.t0 - 1) / bin_ns] += t->events[j].tokens;
        }
        uint64_t ti = input_time(t);
        if (in_tokens && ti != TL_NONE && in_window(w, ti))
            in_tokens[(ti - w.t0 - 1) / bin_ns] += t->prompt_tokens;
    }
    return TPS_OK;
}

double window_peak(const uint64_t *tokens, size_t nbins, window w, uint64_t bin_ns,
                   size_t *bin_out) {
    if (bin_out) *bin_out = 0;
    if (nbins == 0) return 0.0;
    uint64_t len = w.t1 - w.t0;
    size_t full = (size_t)(len / bin_ns);
    if (full == 0) return per_second(tokens[0], tps_ns_to_s(len));
    size_t best = 0;
    for (size_t k = 1; k < full; k++)
        if (tokens[k] > tokens[best]) best = k;
    if (bin_out) *bin_out = best;
    return per_second(tokens[best], tps_ns_to_s(bin_ns));
}

/* ---- goodput -------------------------------------------------------------- */

void window_goodput_measure(window_goodput *out, window w, const tl_slo *slo, tl_start from,
                            const timeline *const *tls, size_t n) {
    uint64_t completed = 0, good = 0;
    for (size_t i = 0; i < n; i++) {
        const timeline *t = tls[i];
        if (t->status != TL_OK || !in_window(w, t->t_end)) continue;
        completed++;
        good += timeline_meets_slo(t, slo, from);
    }
    double s = w.t1 > w.t0 ? tps_ns_to_s(w.t1 - w.t0) : 0.0;
    *out = (window_goodput){
        .completed = completed,
        .good = good,
        .seconds = s,
        .goodput = per_second(good, s),
        .good_fraction = completed ? (double)good / (double)completed : 0.0,
    };
}
