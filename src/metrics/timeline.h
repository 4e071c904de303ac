/* One request's token timeline and the per-request metrics defined on it:
 * TTFT, ITL, TPOT, E2E (DESIGN.md "The metrics contract"; docs/metrics.md
 * says the same for users).
 *
 * A timeline records when the request was meant to be sent (scheduled), when
 * it was sent, each streamed event that carried output tokens (arrival time,
 * how many tokens), and the last byte of the response. The bench builds one
 * per request as bytes arrive; the server builds one per request as it writes
 * tokens. Times are CLOCK_MONOTONIC nanoseconds (base/clock.h).
 *
 * Events live in a growable array owned by the timeline: reserve enough at
 * init (e.g. max_tokens) and timeline_add never allocates; past that it
 * doubles (amortised, never per token). timeline_reset keeps the array so a
 * connection can reuse one timeline for request after request.
 *
 * Not here: parsing, token counting from text, windows over many requests
 * (metrics/window.h). Not thread-safe: one writer per timeline. */
#ifndef TPS_METRICS_TIMELINE_H
#define TPS_METRICS_TIMELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metrics/hist.h"
#include "base/error.h"

/* "no such time / undefined metric" for every uint64 time or duration here. */
#define TL_NONE UINT64_MAX

/* Which start a latency is measured from. In open-loop (rate) mode the
 * scheduled send time is the honest one (coordinated omission: a backed-up
 * client must not hide queueing); closed-loop callers pass the same time for
 * both, making the two variants equal. */
typedef enum tl_start {
    TL_FROM_SCHEDULED = 0,
    TL_FROM_SENT = 1,
} tl_start;

typedef enum tl_status {
    TL_PENDING = 0, /* started, no last byte yet */
    TL_OK = 1,      /* response complete */
    TL_FAILED = 2,  /* error, cancel, timeout, truncated stream */
} tl_status;

/* Where the output-token count came from, most trusted first. */
typedef enum tl_count_source {
    TL_COUNT_USAGE = 0,       /* the server's usage.completion_tokens */
    TL_COUNT_STREAM_IDS = 1,  /* token ids carried in the stream */
    TL_COUNT_RETOKENIZED = 2, /* streamed text re-tokenized: approximate */
    TL_COUNT_EVENTS = 3,      /* assumed one token per event: approximate */
} tl_count_source;

typedef struct tl_event {
    uint64_t t_ns;   /* arrival of the event's last byte */
    uint32_t tokens; /* output tokens it carried, >= 1 */
} tl_event;

/* Fields are readable by anyone; change them only through the functions. */
typedef struct timeline {
    uint64_t t_sched;            /* intended send time (== t_sent in closed loop) */
    uint64_t t_sent;             /* first byte of the request written */
    uint64_t t_end;              /* last byte of the response; TL_NONE while pending */
    uint64_t t_answer;           /* first answer (not thinking) token's arrival; TL_NONE none */
    uint64_t prompt_tokens;      /* input tokens, 0 if unknown */
    uint64_t output_tokens;      /* sum of events[].tokens */
    uint64_t multi_token_events; /* events that carried more than one token */
    tl_status status;
    tl_count_source source; /* how output_tokens was counted */
    tl_event *events;       /* (n_events,), in arrival order, owned */
    size_t n_events, cap_events;
} timeline;

/* ---- create / free ---------------------------------------------------- */

/* Prepares an empty timeline with room for cap_events events (0 is fine). */
int timeline_init(timeline *t, size_t cap_events, tps_err *e);
void timeline_free(timeline *t);
/* Empties it for the next request, keeping the event array. */
void timeline_reset(timeline *t);

/* ---- building ------------------------------------------------------------ */

/* The request is sent at sent_ns, having been scheduled for sched_ns. Also
 * resets the rest of the timeline. */
void timeline_start(timeline *t, uint64_t sched_ns, uint64_t sent_ns);
void timeline_set_prompt_tokens(timeline *t, uint64_t n);
/* How the counts passed to timeline_add were obtained; timeline_start
 * restores the default, TL_COUNT_STREAM_IDS, so call this after it. */
void timeline_set_count_source(timeline *t, tl_count_source source);
/* A streamed event carrying `tokens` output tokens arrived at t_ns. Events
 * with 0 tokens (role chunks, keep-alives) are ignored. TPS_EINVAL if t_ns is
 * before the send or before the previous event; TPS_ENOMEM if the array had
 * to grow and could not. */
int timeline_add(timeline *t, uint64_t t_ns, uint32_t tokens, tps_err *e);
/* Merges n one-token events at the times t_ns[0..n) (ascending, each at or
 * after the send and at or before t_end when finished) into the timeline,
 * keeping arrival order: tokens whose events the caller set aside until
 * their count was proven (the bench's empty-text events). TPS_EINVAL on a
 * time out of order or range; TPS_ENOMEM. */
int timeline_insert_tokens(timeline *t, const uint64_t *t_ns, size_t n, tps_err *e);
/* An output token of the answer (not thinking) arrived at t_ns: the
 * earliest of the calls is the answer's first token. A stream without
 * thinking marks its first token. */
void timeline_mark_answer(timeline *t, uint64_t t_ns);
/* The last byte arrived at end_ns; ok says whether the response completed.
 * end_ns is raised to the last event's time if earlier. */
void timeline_finish(timeline *t, uint64_t end_ns, bool ok);
/* Replace the streamed count by a more trusted total n (e.g. usage) once the
 * response is finished. Extra tokens are placed on the last event (they had
 * arrived by then); if the stream carried no token events at all (a
 * non-streamed response) one event at t_end carries them. Surplus streamed
 * tokens are taken off the last events. TPS_EINVAL if tokens must be placed
 * but the timeline is not finished. */
int timeline_set_output_tokens(timeline *t, uint64_t n, tl_count_source source, tps_err *e);

/* ---- per-request metrics (TL_NONE where undefined) ---------------------- */

uint64_t timeline_start_ns(const timeline *t, tl_start from);
/* Arrival of the first / last output token; TL_NONE with no tokens. */
uint64_t timeline_first_token_ns(const timeline *t);
uint64_t timeline_last_token_ns(const timeline *t);
/* TTFT = first output token arrival - start. TL_NONE with no tokens. */
uint64_t timeline_ttft(const timeline *t, tl_start from);
/* TTFO = first answer token arrival - start (what a reader of a thinking
 * model waits for; equals TTFT without thinking). TL_NONE without one. */
uint64_t timeline_ttfo(const timeline *t, tl_start from);
/* E2E = last byte - start. TL_NONE while pending. */
uint64_t timeline_e2e(const timeline *t, tl_start from);
/* TPOT = (E2E - TTFT) / (output tokens - 1) = (last byte - first token) /
 * (output tokens - 1), rounded to the nearest ns; the start cancels, so there
 * is one variant. TL_NONE when fewer than 2 output tokens or pending. */
uint64_t timeline_tpot(const timeline *t);
/* Inter-token latencies: output_tokens - 1 gaps (0 with fewer than 2 tokens)
 * between consecutive output-token arrivals. An event carrying k tokens gives
 * one gap (from the previous event) and k - 1 zero gaps; the first event's
 * k - 1 extra tokens give k - 1 zero gaps. They sum to last token - first
 * token. Writes the first min(cap, count) gaps to out; returns the count. */
size_t timeline_itls(const timeline *t, uint64_t *out, size_t cap);

/* Arrivals: the distinct times at which output tokens arrived. Events that
 * came at one instant (several SSE events in one read, stamped alike) and
 * an event of several tokens are each one arrival: what a reader waits
 * between is arrivals, so with k tokens an arrival the per-token ITL holds
 * k - 1 zero gaps that no reader waited. Writes how many arrivals there
 * were and how many brought more than one token. */
void timeline_arrivals(const timeline *t, size_t *arrivals, size_t *multi);

/* Where to record a finished request's metrics; any member may be NULL. */
typedef struct timeline_hists {
    hist *ttft;        /* from scheduled start */
    hist *ttft_sent;   /* from actual send */
    hist *ttfo;        /* first answer token, from scheduled start */
    hist *itl;         /* every gap, zero gaps included */
    hist *arrival_gap; /* gaps between consecutive token arrivals (timeline_arrivals) */
    hist *tpot;        /* requests with >= 2 output tokens */
    hist *e2e;         /* from scheduled start */
    hist *e2e_sent;    /* from actual send */
} timeline_hists;

/* Records TTFT, ITL, TPOT, E2E and the arrival gaps of t if it completed (TL_OK); metrics that
 * are undefined for it are skipped. Returns whether it recorded. No
 * allocation. */
bool timeline_record(const timeline *t, const timeline_hists *h);

/* ---- SLOs ----------------------------------------------------------------- */

/* Service-level objectives; 0 means "not set". A request meets them when it
 * completed (TL_OK) and every set limit holds with <=. A TTFT limit fails a
 * request that produced no token (no first token can meet a first-token
 * deadline). A TPOT limit is not applied to a request with fewer than 2
 * tokens (there is no per-token pace to judge; TTFT and E2E still apply). */
typedef struct tl_slo {
    uint64_t ttft_ns;
    uint64_t tpot_ns;
    uint64_t e2e_ns;
} tl_slo;

bool timeline_meets_slo(const timeline *t, const tl_slo *slo, tl_start from);

#endif
