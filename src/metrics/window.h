/* Windows over many requests' timelines: which interval a TPS figure is
 * measured over, and the figures themselves (output, input and total TPS, a
 * binned time series and its peak, goodput).
 *
 * Convention: a window (t0, t1] is open at t0 and closed at t1. A token
 * counts in it when its arrival time t satisfies t0 < t <= t1, and its length
 * is t1 - t0. Bins (t0 + k*b, t0 + (k+1)*b] therefore partition a window with
 * no token counted twice, the `run` window (first send, last byte] includes
 * the token that arrives with the last byte, and a window that starts at a
 * send does not count tokens that had already arrived at that instant.
 *
 * When tokens count:
 *   output tokens at the arrival of the event that carried them;
 *   input (prompt) tokens at the request's first output-token arrival, the
 *     moment prefill is known to be done; a request that completed (TL_OK)
 *     with no output token counts them at its last byte, one that failed
 *     before its first token never counts them;
 *   total = input + output.
 * Tokens delivered by requests that later failed still count: they moved
 * through the system. Completed requests and goodput count at the last byte
 * of requests that completed (TL_OK).
 *
 * All functions take the requests as an array of n timeline pointers (the
 * bench may keep timelines inside its per-connection structs), read them
 * only, and run once per report: only window_steady allocates (scratch, freed
 * before it returns). Not here: load generation, printing. */
#ifndef TPS_METRICS_WINDOW_H
#define TPS_METRICS_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "metrics/timeline.h"
#include "base/error.h"

/* The interval (t0, t1], CLOCK_MONOTONIC ns. */
typedef struct window {
    uint64_t t0, t1;
} window;

/* `run`: (earliest send, latest last byte]. Requests still pending end at
 * their last token. TPS_EINVAL when n is 0. */
int window_run(window *out, const timeline *const *tls, size_t n, tps_err *e);

typedef struct steady_opts {
    /* Trimmed mode, when either is non-zero: (run.t0 + warmup, run.t1 - cooldown]. */
    uint64_t warmup_ns;
    uint64_t cooldown_ns;
    /* Auto mode (both trims 0). Start ("target load reached"):
     *   target_concurrency > 0 (closed loop): the first instant the number of
     *     requests in flight (sent, last byte not yet arrived) reaches it;
     *   target_concurrency == 0 (open loop): the first last byte of any
     *     request (ok or failed): departures have begun, so the in-flight
     *     count has filled to its level (Little's law: after about one E2E).
     * End: the last byte of the first request (ok or failed) to finish after
     * the last request was sent: the first departure of the drain phase. */
    uint32_t target_concurrency;
} steady_opts;

/* `steady`, as steady_opts says. TPS_ERANGE with a message saying why when
 * the window would be empty (t1 <= t0) or the target concurrency was never
 * reached; TPS_ENOMEM if its scratch cannot be allocated. */
int window_steady(window *out, const steady_opts *o, const timeline *const *tls, size_t n,
                  tps_err *e);

/* `user` (--window t0:t1): offsets in ns from run.t0. TPS_EINVAL unless
 * t0_off < t1_off. The window is kept as asked even if it runs past `run`. */
int window_user(window *out, const window *run, uint64_t t0_off_ns, uint64_t t1_off_ns, tps_err *e);

/* What one window measured. Rates are per second; 0 for an empty window. */
typedef struct window_tps {
    window w;
    double seconds;         /* (t1 - t0) / 1e9 */
    uint64_t output_tokens; /* arrived in (t0, t1] */
    uint64_t input_tokens;  /* counted in (t0, t1] as above */
    uint64_t completed;     /* requests with TL_OK and last byte in (t0, t1] */
    double output_tps;      /* output_tokens / seconds */
    double input_tps;       /* input_tokens / seconds */
    double total_tps;       /* (input + output) / seconds */
    double request_rate;    /* completed / seconds */
} window_tps;

void window_measure(window_tps *out, window w, const timeline *const *tls, size_t n);

/* Time series: number of bins of width bin_ns covering w (the last may be
 * shorter); 0 if bin_ns is 0 or the window is empty. */
size_t window_nbins(window w, uint64_t bin_ns);
/* Fills out_tokens[k] (and in_tokens[k] unless NULL) with the output (input)
 * tokens counted in bin k = (t0 + k*bin_ns, min(t0 + (k+1)*bin_ns, t1)],
 * for k < nbins. TPS_EINVAL unless nbins == window_nbins(w, bin_ns). */
int window_series(uint64_t *out_tokens, uint64_t *in_tokens, size_t nbins, window w,
                  uint64_t bin_ns, const timeline *const *tls, size_t n, tps_err *e);
/* The peak bin of a series: the full-length bin with the most tokens (the
 * earliest on ties); a shorter last bin is reported in the series but only
 * counts here when it is the only bin, at its own length. Returns its rate
 * in tokens/s and sets *bin_out (unless NULL) to its index; 0 and bin 0 when
 * nbins is 0. */
double window_peak(const uint64_t *tokens, size_t nbins, window w, uint64_t bin_ns,
                   size_t *bin_out);

/* Goodput over a window: requests that completed in it (TL_OK, last byte in
 * (t0, t1]) and met every set SLO (timeline_meets_slo), per second. */
typedef struct window_goodput {
    uint64_t completed; /* as window_tps.completed */
    uint64_t good;      /* of those, met every SLO */
    double seconds;
    double goodput;       /* good / seconds */
    double good_fraction; /* good / completed; 0 if none completed */
} window_goodput;

void window_goodput_measure(window_goodput *out, window w, const tl_slo *slo, tl_start from,
                            const timeline *const *tls, size_t n);

#endif
