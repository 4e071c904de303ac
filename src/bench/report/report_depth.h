/* The context-depth part of the factor report: decode speed and the bytes a
 * decoded token reads against the depth of its context, one series per
 * model, read from `tps generate --depth D,D,... --json` documents
 * (tps.generate.depth). A full-attention model reads a KV cache that grows
 * with the context; a hybrid stack (Qwen3.5) reads K and V in its attention
 * layers only and a fixed-size state in its linear ones. The reading
 * compares how much of its first depth's speed each series keeps, from the
 * very cells the table shows (every number formatted by one function, every
 * ratio computed from those formatted numbers).
 * Not here: the sweep-based parts and the page around it (report_factor.c). */
#ifndef TPS_BENCH_REPORT_DEPTH_H
#define TPS_BENCH_REPORT_DEPTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "base/error.h"
#include "bench/report/report_set.h" /* rplot */

#define DEPTH_MAX_SERIES  4
#define DEPTH_MAX_POINTS  16
#define DEPTH_READING_CAP 1536

/* One depth of one model, as its document gives it (bytes in MB, 1e6). */
typedef struct depth_point {
    double depth, cached, prefill_s;
    double decode_tps, gbps;
    double weight_mb, kv_mb, state_mb, mb; /* read a decoded token; mb: their sum */
} depth_point;

typedef struct depth_series {
    char label[128];  /* --factor depth:LABEL=FILE, else the file's name */
    char source[256]; /* the file */
    char arch[32];
    unsigned layers, recurrent; /* recurrent: linear-attention layers (0: all attend) */
    unsigned threads;
    depth_point p[DEPTH_MAX_POINTS]; /* increasing depth */
    size_t n;
} depth_series;

typedef struct depth_set {
    depth_series s[DEPTH_MAX_SERIES];
    size_t n;
    char reading[DEPTH_READING_CAP]; /* "" until depth_finish, or with < 2 depths */
} depth_set;

/* Adds one document as a series; label NULL or "": the file's name.
 * Errors name the file and what is wrong with it. */
int depth_add_file(depth_set *d, const char *label, const char *path, tps_err *e);
int depth_add_json(depth_set *d, const char *label, const char *text, const char *source,
                   tps_err *e);
/* The reading: each series' speed at every depth as a share of its first
 * depth's, and at the deepest depth both share, the hybrid's loss of
 * speed against the attention model's. */
void depth_finish(depth_set *d);

/* A depth's share of the series' first-depth speed as the table shows it
 * (from the formatted cells); NAN when unknown. */
double depth_share(const depth_series *s, size_t i);

/* The table as text (one row a model and depth). */
void depth_print(FILE *out, const depth_set *d);
/* The table as HTML. */
void depth_html(FILE *h, const depth_set *d);
/* Decode tok/s (left axis) and MB per token (right axis) against depth,
 * a pair of lines a series, as factor_depth.svg in dir. */
int depth_plot(const depth_set *d, const char *dir, rplot *out, tps_err *e);

#endif
