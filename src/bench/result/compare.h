/* `tps bench compare A.json B.json`: the headline figures of two results
 * side by side, the ratio B/A, and whether the difference is larger than
 * the run-to-run noise, so a real speed-up can be told from chance.
 *
 * Noise, by what the results hold:
 *   bootstrap (both results kept --per-request records): each result's
 *     completed requests (warm-up excluded) are resampled with replacement
 *     COMPARE_RESAMPLES times; every percentile is recomputed on each
 *     resample and the 95% interval of B/A is read from the resampled
 *     ratios; output t/s, which resampling requests of equal length cannot
 *     move, takes -+ 1.96 standard errors of its window cut into 20 bins
 *     (tokens at their events' arrivals); requests/s is Poisson as below;
 *   histogram bounds (otherwise): a percentile's 95% interval is the
 *     histogram's values at the ranks n*p -+ 1.96*sqrt(n*p*(1-p)) (the
 *     order statistic's binomial interval) widened by the histogram's
 *     resolution; a token rate's is -+ 1.96 standard errors of the run's
 *     per-bin series; a request rate's is Poisson (1/sqrt(completed)).
 *     B/A's interval is then [lo_B/hi_A, hi_B/lo_A].
 * A difference "exceeds the noise" when the interval of B/A excludes 1.
 * Both methods are deterministic (a fixed seed). Not here: reading the
 * files (result.h), the command line (src/cli). */
#ifndef TPS_BENCH_COMPARE_H
#define TPS_BENCH_COMPARE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "bench/result/result.h"
#include "base/error.h"

#define COMPARE_RESAMPLES 1000
#define COMPARE_MAX_ROWS  16

typedef enum compare_method {
    COMPARE_BOOTSTRAP = 0,
    COMPARE_HIST_BOUNDS = 1,
} compare_method;

typedef struct compare_row {
    char name[40];      /* "steady output t/s", "TTFT p99 ms", ... */
    bool higher_better; /* rates; latencies are better lower */
    double a, b;        /* the figures as each result reports them */
    double ratio;       /* b / a (0 when a is 0) */
    bool known;         /* an interval could be formed */
    double lo, hi;      /* 95% interval of b / a */
    bool exceeds_noise; /* the interval excludes 1 */
} compare_row;

typedef struct compare_out {
    compare_method method;
    compare_row rows[COMPARE_MAX_ROWS];
    size_t n;
    /* each run's machine: the share of its CPU time the hypervisor stole
     * (host.steal); a difference beyond the noise can be that, not the
     * server (compare_steal_differs) */
    cpu_contention host_a, host_b;
} compare_out;

/* Points of steal between two runs past which the summary says their
 * machines differed (the verdict's limit for one run). */
#define COMPARE_STEAL_DIFF 0.03
/* Both runs' steal is known and differs by COMPARE_STEAL_DIFF or more. */
bool compare_steal_differs(const compare_out *c);

int compare_results(compare_out *out, const bench_result *a, const bench_result *b, tps_err *e);
const char *compare_method_name(compare_method m);
void compare_print(FILE *f, const compare_out *c, const char *name_a, const char *name_b);
json_t *compare_json(const compare_out *c, const char *name_a, const char *name_b);

#endif
