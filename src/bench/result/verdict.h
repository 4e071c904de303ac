/* Whether a bench result's figures can be trusted: a set of checks, each
 * with the evidence it weighed, judged from the result alone (so a result
 * read back from JSON, or a merge, gets the same verdict).
 *
 *   client        the client was CPU-bound (its CPU time over the run's
 *                 length) or descheduled (its run-queue wait, from
 *                 /proc/thread-self/schedstat): arrival stamps are late
 *   batching      the server sent several tokens per SSE event: ITL then
 *                 measures the server's flushes, not its decoding
 *   approximate   some token counts (output or prompt) came from an
 *                 approximate source (re-tokenized text, one per event,
 *                 words)
 *   usage         the server's usage differed from what the stream showed
 *   requests      too few completed requests in the steady window for the
 *                 p99 the report prints (it is then one of the few largest)
 *   steady        the run never reached a steady load (no steady window)
 *   steal         the hypervisor took CPU time from this machine during the
 *                 run (/proc/stat's steal): a shared VM runs slower while
 *                 other guests are busy, so its figures move with theirs
 *   plausible     the server's usage said what cannot be (prompt tokens far
 *                 beyond the prompt sent, cached above the prompt, more
 *                 output than asked for): such a figure is not used
 *   fields        the responses carried text in a field no dialect row
 *                 reads (chunk.h): those tokens were neither counted nor
 *                 timed, so TTFT, ITL and tokens/s are wrong
 *
 * A check that cannot be judged (e.g. no schedstat) is unknown, not passed.
 * The outcome (passed, or failed by its error rate or with nothing
 * completed) is judged with them: the JSON keeps the checks, the outcome
 * sets the exit code.
 * Not here: printing beyond one block (report.c calls verdict_print). */
#ifndef TPS_BENCH_VERDICT_H
#define TPS_BENCH_VERDICT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "bench/result/result.h"

/* The limits, exposed so the tests and the docs name the same numbers. */
#define VERDICT_CPU_BUSY     0.80 /* client CPU / run length */
#define VERDICT_RUNQ_SHARE   0.02 /* client run-queue wait / run length */
#define VERDICT_MULTI_SHARE  0.05 /* events with > 1 token / token events */
#define VERDICT_MIN_REQUESTS 100  /* for p99 to lie below the largest value */
#define VERDICT_STEAL_SHARE  0.03 /* CPU time the hypervisor stole / all CPU time */

typedef enum verdict_id {
    VERDICT_CLIENT = 0,
    VERDICT_BATCHING,
    VERDICT_APPROXIMATE,
    VERDICT_USAGE,
    VERDICT_REQUESTS,
    VERDICT_STEADY,
    VERDICT_STEAL,
    VERDICT_FIELDS,
    VERDICT_PLAUSIBLE,
    VERDICT_COUNT
} verdict_id;

typedef struct verdict_check {
    const char *name; /* "client", "batching", ... (static) */
    bool known;       /* false: could not be judged */
    bool tripped;     /* the figures it guards are suspect */
    double value;     /* what was measured (share, count), for the JSON */
    double limit;     /* the limit it was held to */
    char evidence[384];
} verdict_check;

/* Whether the run passes: what sets tps bench's exit code (and a sweep
 * point's status), beside the checks of whether its figures are trusted. */
typedef enum verdict_outcome {
    VERDICT_PASSED = 0,
    VERDICT_ERRORS,         /* failed / (completed + failed) is above the pass mark */
    VERDICT_NONE_COMPLETED, /* no request completed */
} verdict_outcome;

typedef struct verdict {
    verdict_check check[VERDICT_COUNT];
    int tripped; /* how many checks tripped */
    verdict_outcome outcome;
    char why[160]; /* the outcome in words; "" when passed */
} verdict;

/* The one judgement of a result: the checks, and the outcome against
 * max_error_rate (--max-error-rate). A caller judges once and hands the
 * verdict to the summary, the JSON and the exit code (report_print_judged,
 * result_to_json_judged), so all three say the same. */
void verdict_judge_run(verdict *v, const bench_result *r, double max_error_rate);
/* The same with no error allowed (the pass mark tps bench defaults to). */
void verdict_judge(verdict *v, const bench_result *r);
/* {"trusted": bool, "tripped": [names], "checks": {name: {"ok": true|false|null,
 * "value", "limit", "evidence"}}}; new reference. */
json_t *verdict_json(const verdict *v);
/* "verdict   trusted: ..." or the tripped checks with their evidence. */
void verdict_print(FILE *f, const verdict *v);

#endif
