/* A request's token timeline and its TTFT, ITL, TPOT, E2E (timeline.h).
 * Not here: anything across requests (window.c), parsing, clocks. */
#include "metrics/timeline.h"

#include <stdlib.h>
#include <string.h>

#include "base/grow.h"

/* ---- create / free ---------------------------------------------------- */

int timeline_init(timeline *t, size_t cap_events, tps_err *e) {
    memset(t, 0, sizeof *t);
    t->t_end = t->t_answer = TL_NONE;
    t->source = TL_COUNT_STREAM_IDS;
    if (cap_events) {
        t->events = malloc(cap_events * sizeof *t->events);
        if (!t->events)
            return tps_fail(e, TPS_ENOMEM, "cannot allocate a timeline of %zu events", cap_events);
        t->cap_events = cap_events;
    }
    return TPS_OK;
}

void timeline_free(timeline *t) {
    free(t->events);
    t->events = NULL;
    t->n_events = t->cap_events = 0;
}

void timeline_reset(timeline *t) {
    t->t_sched = t->t_sent = 0;
    t->t_end = t->t_answer = TL_NONE;
    t->prompt_tokens = t->output_tokens = t->multi_token_events = 0;
    t->status = TL_PENDING;
    t->source = TL_COUNT_STREAM_IDS;
    t->n_events = 0;
}

/* ---- building ------------------------------------------------------------ */

void timeline_start(timeline *t, uint64_t sched_ns, uint64_t sent_ns) {
    timeline_reset(t);
    t->t_sched = sched_ns;
    t->t_sent = sent_ns;
}

void timeline_mark_answer(timeline *t, uint64_t t_ns) {
    if (t_ns < t->t_answer) t->t_answer = t_ns;
}

void timeline_set_prompt_tokens(timeline *t, uint64_t n) {
    t->prompt_tokens = n;
}

void timeline_set_count_source(timeline *t, tl_count_source source) {
    t->source = source;
}

/* Room for need events. */
static int grow(timeline *t, size_t need, tps_err *e) {
    if (TPS_GROW(t->events, t->cap_events, need, 64))
        return tps_fail(e, TPS_ENOMEM, "cannot grow a timeline to %zu events", need);
    return TPS_OK;
}

int timeline_add(timeline *t, uint64_t t_ns, uint32_t tokens, tps_err *e) {
    if (tokens == 0) return TPS_OK;
    uint64_t prev = t->n_events ? t->events[t->n_events - 1].t_ns : t->t_sent;
    if (t_ns < prev)
        return tps_fail(e, TPS_EINVAL,
                        "token event at %llu ns is earlier than the send or the previous event "
                        "(%llu ns): timestamps must come from one monotonic clock, in order",
                        (unsigned long long)t_ns, (unsigned long long)prev);
    int rc = grow(t, t->n_events + 1, e);
    if (rc) return rc;
    t->events[t->n_events++] = (tl_event){.t_ns = t_ns, .tokens = tokens};
    t->output_tokens += tokens;
    t->multi_token_events += tokens > 1;
    return TPS_OK;
}

int timeline_insert_tokens(timeline *t, const uint64_t *t_ns, size_t n, tps_err *e) {
    for (size_t i = 0; i < n; i++)
        if (t_ns[i] < t->t_sent || (i && t_ns[i] < t_ns[i - 1]) ||
            (t->t_end != TL_NONE && t_ns[i] > t->t_end))
            return tps_fail(e, TPS_EINVAL,
                            "inserted token event %zu at %llu ns is out of order or outside "
                            "the request",
                            i, (unsigned long long)t_ns[i]);
    int rc = grow(t, t->n_events + n, e);
    if (rc) return rc;
    /* merge from the back: events ending at n_events + n */
    size_t a = t->n_events, b = n, out = t->n_events + n;
    while (b > 0) {
        if (a > 0 && t->events[a - 1].t_ns > t_ns[b - 1])
            t->events[--out] = t->events[--a];
        else
            t->events[--out] = (tl_event){.t_ns = t_ns[--b], .tokens = 1};
    }
    t->n_events += n;
    t->output_tokens += n;
    return TPS_OK;
}

void timeline_finish(timeline *t, uint64_t end_ns, bool ok) {
    uint64_t last = t->n_events ? t->events[t->n_events - 1].t_ns : t->t_sent;
    t->t_end = end_ns < last ? last : end_ns;
    t->status = ok ? TL_OK : TL_FAILED;
}

int timeline_set_output_tokens(timeline *t, uint64_t n, tl_count_source source, tps_err *e) {
    if (n > t->output_tokens) {
        uint64_t extra = n - t->output_tokens;
        if (t->n_events == 0) {
            if (t->t_end == TL_NONE)
                return tps_fail(e, TPS_EINVAL,
                                "%llu output tokens have no arrival time: finish the timeline "
                                "before setting the count",
                                (unsigned long long)n);
            if (extra > UINT32_MAX)
                return tps_fail(e, TPS_ERANGE, "%llu output tokens in one event is too many",
                                (unsigned long long)extra);
            int rc = grow(t, 1, e);
            if (rc) return rc;
            t->events[t->n_events++] = (tl_event){.t_ns = t->t_end, .tokens = (uint32_t)extra};
        } else {
            tl_event *last = &t->events[t->n_events - 1];
            if (extra > UINT32_MAX - last->tokens)
                return tps_fail(e, TPS_ERANGE, "%llu output tokens in one event is too many",
                                (unsigned long long)(extra + last->tokens));
            last->tokens += (uint32_t)extra;
        }
    } else {
        uint64_t surplus = t->output_tokens - n;
        while (surplus > 0) {
            tl_event *last = &t->events[t->n_events - 1];
            if (last->tokens > surplus) {
                last->tokens -= (uint32_t)surplus;
                surplus = 0;
            } else {
                surplus -= last->tokens;
                t->n_events--;
            }
        }
    }
    t->output_tokens = n;
    t->multi_token_events = 0;
    for (size_t i = 0; i < t->n_events; i++)
        t->multi_token_events += t->events[i].tokens > 1;
    t->source = source;
    return TPS_OK;
}

/* ---- per-request metrics -------------------------------------------------- */

uint64_t timeline_start_ns(const timeline *t, tl_start from) {
    return from == TL_FROM_SENT ? t->t_sent : t->t_sched;
}

uint64_t timeline_first_token_ns(const timeline *t) {
    return t->n_events ? t->events[0].t_ns : TL_NONE;
}

uint64_t timeline_last_token_ns(const timeline *t) {
    return t->n_events ? t->events[t->n_events - 1].t_ns : TL_NONE;
}

/* a - b, or 0 if the clock readings are out of order (cannot happen with one
 * monotonic clock; a scheduled time is never after the send it schedules). */
static uint64_t since(uint64_t a, uint64_t b) {
    return a > b ? a - b : 0;
}

uint64_t timeline_ttft(const timeline *t, tl_start from) {
    if (!t->n_events) return TL_NONE;
    return since(t->events[0].t_ns, timeline_start_ns(t, from));
}

uint64_t timeline_ttfo(const timeline *t, tl_start from) {
    if (t->t_answer == TL_NONE) return TL_NONE;
    return since(t->t_answer, timeline_start_ns(t, from));
}

uint64_t timeline_e2e(const timeline *t, tl_start from) {
    if (t->t_end == TL_NONE) return TL_NONE;
    return since(t->t_end, timeline_start_ns(t, from));
}

uint64_t timeline_tpot(const timeline *t) {
    if (t->output_tokens < 2 || t->t_end == TL_NONE) return TL_NONE;
    uint64_t span = since(t->t_end, t->events[0].t_ns); /* E2E - TTFT */
    uint64_t d = t->output_tokens - 1;
    return span / d + (span % d >= d - span % d); /* round half up */
}

size_t timeline_itls(const timeline *t, uint64_t *out, size_t cap) {
    if (t->output_tokens < 2) return 0;
    size_t n = 0;
    for (size_t i = 0; i < t->n_events; i++) {
        const tl_event *ev = &t->events[i];
        if (i > 0) {
            if (n < cap) out[n] = ev->t_ns - t->events[i - 1].t_ns;
            n++;
        }
        for (uint32_t k = 1; k < ev->tokens; k++) {
            if (n < cap) out[n] = 0;
            n++;
        }
    }
    return n;
}

void timeline_arrivals(const timeline *t, size_t *arrivals, size_t *multi) {
    *arrivals = *multi = 0;
    for (size_t i = 0; i < t->n_events;) {
        uint64_t tokens = 0;
        size_t j = i;
        for (; j < t->n_events && t->events[j].t_ns == t->events[i].t_ns; j++)
            tokens += t->events[j].tokens;
        ++*arrivals;
        *multi += tokens > 1;
        i = j;
    }
}

bool timeline_record(const timeline *t, const timeline_hists *h) {
    if (t->status != TL_OK) return false;
    uint64_t v;
    if (h->ttft && (v = timeline_ttft(t, TL_FROM_SCHEDULED)) != TL_NONE) hist_record(h->ttft, v);
    if (h->ttft_sent && (v = timeline_ttft(t, TL_FROM_SENT)) != TL_NONE)
        hist_record(h->ttft_sent, v);
    if (h->ttfo && (v = timeline_ttfo(t, TL_FROM_SCHEDULED)) != TL_NONE) hist_record(h->ttfo, v);
    if (h->tpot && (v = timeline_tpot(t)) != TL_NONE) hist_record(h->tpot, v);
    if (h->e2e) hist_record(h->e2e, timeline_e2e(t, TL_FROM_SCHEDULED));
    if (h->e2e_sent) hist_record(h->e2e_sent, timeline_e2e(t, TL_FROM_SENT));
    if (h->itl && t->output_tokens >= 2) {
        for (size_t i = 0; i < t->n_events; i++) {
            const tl_event *ev = &t->events[i];
            if (i > 0) hist_record(h->itl, ev->t_ns - t->events[i - 1].t_ns);
            hist_record_n(h->itl, 0, ev->tokens - 1);
        }
    }
    for (size_t i = 1, last = 0; h->arrival_gap && i < t->n_events; i++) {
        if (t->events[i].t_ns == t->events[last].t_ns) continue; /* the same arrival */
        hist_record(h->arrival_gap, t->events[i].t_ns - t->events[last].t_ns);
        last = i;
    }
    return true;
}

/* ---- SLOs ----------------------------------------------------------------- */

bool timeline_meets_slo(const timeline *t, const tl_slo *slo, tl_start from) {
    if (t->status != TL_OK) return false;
    if (slo->ttft_ns) {
        uint64_t v = timeline_ttft(t, from);
        if (v == TL_NONE || v > slo->ttft_ns) return false;
    }
    if (slo->tpot_ns) {
        uint64_t v = timeline_tpot(t);
        if (v != TL_NONE && v > slo->tpot_ns) return false;
    }
    if (slo->e2e_ns && timeline_e2e(t, from) > slo->e2e_ns) return false;
    return true;
}
