/* The factor report: what moves tokens per second, one section per factor
 * the seed names (batch size; the prefill/decode mix; the KV cache; memory
 * bandwidth and model size; active size; context depth, where a hybrid
 * stack's linear layers read a state that does not grow), each made of parts (a set of points
 * measured to show one effect), each part with its table, its plot and a reading: one or two
 * sentences generated from the very cells the table shows (every number in a reading is formatted
 * by the same function as its cell, and every ratio is computed from those formatted numbers).
 *
 * `tps report --factor PART[:LABEL]=FILE` fills it (make demo does); the
 * page is written by factor_render, the terminal summary by factor_print,
 * which ends with one line of readings per factor.
 * Not here: the generic table and plots of one set (report_set.h). */
#ifndef TPS_BENCH_REPORT_FACTOR_H
#define TPS_BENCH_REPORT_FACTOR_H

#include <stdio.h>

#include "bench/report/report_depth.h" /* the context-depth part: tps generate --depth files */
#include "bench/report/report_set.h"
#include "base/error.h"

typedef enum factor_part {
    FP_BATCH,   /* concurrency sweep */
    FP_MIX,     /* the same tokens per request split between prompt and output */
    FP_ITL,     /* streams' ITL while long prompts arrive: chunking, the ITL target */
    FP_PREFIX,  /* shared-prefix prompts, prefix cache off then on */
    FP_KV_TYPE, /* a long context with F16 then Q8_0 KV */
    FP_MODEL,   /* two model sizes on one workload */
    FP_ACTIVE,  /* a dense model and a mixture of experts of about its active size */
    FP_EXPERTS, /* the mixture of experts against concurrency: experts a step runs */
    FP_PARTS
} factor_part;

#define FACTOR_SECTIONS    5
#define FACTOR_MAX_LABELS  64
#define FACTOR_READING_CAP 1024

typedef struct factor_label {
    int part;
    size_t first, n; /* the points the file added */
    char label[128];
} factor_label;

typedef struct factor_report {
    rset part[FP_PARTS];
    factor_label labels[FACTOR_MAX_LABELS];
    size_t nlabels;
    char reading[FP_PARTS][FACTOR_READING_CAP]; /* "" when the part has < 2 points */
    rset_limit limit; /* the read bandwidth shares are read against (set before factor_finish) */
    depth_set depth;  /* --factor depth:LABEL=FILE: a model's decode against context depth */
} factor_report;

void factor_init(factor_report *f);
void factor_free(factor_report *f);
/* spec: "PART=FILE" or "PART:LABEL=FILE" (LABEL names every point of the
 * file, in place of the label from its varying axes). Points keep the
 * order they are added in: a reading compares the first with the last.
 * PART "depth" takes a tps generate --depth --json document instead: one
 * model's series (report_depth.h), LABEL its name. */
int factor_add(factor_report *f, const char *spec, tps_err *e);
/* After the last add: labels, the bandwidth limit (f->limit:
 * rset_limit_apply over every part), then the readings. */
void factor_finish(factor_report *f);

/* Each part's points in a short table, then "What moves tokens per
 * second" and one line per factor with its readings. */
void factor_print(FILE *out, const factor_report *f);

/* The plots into svg_dir (NULL: a temporary folder) and the page. Without
 * gnuplot the page is still written, without plots, and the error returned. */
int factor_render(const factor_report *f, const char *html_path, const char *svg_dir, tps_err *e);

#endif
