/* tps report: many bench results side by side. A set of points is read from
 * sweep documents (tps.sweep.result), single bench results
 * (tps.bench.result) and capacity searches (tps.bench.capacity: each probe
 * with a result is a point, and the search itself is kept for its probe
 * table and its plot), then shown as a terminal table with bars
 * (report_set.c), SVG plots drawn by gnuplot from generated scripts
 * (report_plot.c), and one self-contained HTML page (report_html.c).
 *
 * Every rate shown names its window: "steady" and "run" as the bench
 * defines them (docs/metrics.md), "1 s bin" for the time series. Latencies
 * are over completed requests, from the scheduled start.
 * Not here: measuring (result.c), running sweeps (sweep.c). */
#ifndef TPS_BENCH_REPORT_SET_H
#define TPS_BENCH_REPORT_SET_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "bench/experiment/capacity.h"
#include "bench/result/result.h"
#include "bench/experiment/sweep.h"
#include "base/error.h"
#include "base/file_write.h"

#define RSET_MAX_POINTS 1000
#define RSET_MAX_PLOTS  (8 + RSET_MAX_POINTS)

typedef struct rset_point {
    char label[256];            /* the varying axes: "c=4 in=512" */
    char source[256];           /* the file it came from */
    char axis[SWEEP_AXES][128]; /* model, concurrency, rate, input_len, output_len ("" unknown) */
    int exit_status;            /* of its bench run (sweeps) */
    bool has_result;            /* false: the run produced no result */
    bench_result r;             /* owned when has_result */
    bool has_server;            /* /metrics deltas over the point */
    sweep_counters srv;
    size_t x;     /* rank of its value on the plotted axis */
    size_t group; /* which curve it belongs to */
    /* The read bandwidth its share is read against (rset_limit_apply), in
     * bytes/s; 0: the server's own figure (srv.machine_read_bps). */
    double limit_bps;
    bool limit_busy;      /* that limit was measured while the machine was busy */
    char limit_note[800]; /* why it is not the server's figure; "" when it is */
} rset_point;

/* A capacity search as read (capacity_from_json). */
typedef struct rset_capacity {
    char source[256];
    capacity_result r; /* the probes' summaries; their results are points */
    capacity_opts o;   /* the SLO and goodput target it searched under */
} rset_capacity;

#define RSET_MAX_CAPACITY 8

typedef struct rset {
    rset_point *p; /* (n,), owned */
    size_t n, cap;
    rset_capacity *caps; /* (ncaps,), owned */
    size_t ncaps;
    bool varies[SWEEP_AXES];
    int xaxis;          /* the plotted axis; -1: none varies (points in order) */
    size_t nx, ngroups; /* distinct x values, curves */
    char xname[32];     /* "concurrency", ... or "point" */
    char sources[512];  /* file names, for the title */
} rset;

void rset_init(rset *s);
void rset_free(rset *s);
/* Adds a sweep document's points, one bench result, or a capacity search. */
int rset_add_json(rset *s, const json_t *doc, const char *source, tps_err *e);
int rset_add_file(rset *s, const char *path, tps_err *e);
/* After the last add: finds the varying axes, labels, x ranks and curves. */
void rset_finish(rset *s);

/* Borrowed pointers to the value of point p's x rank k and curve g's name
 * ("in=512", or "all"). */
const char *rset_x_label(const rset *s, size_t k);
void rset_group_label(const rset *s, size_t g, char *out, size_t cap);

/* What the server's steps read over point p, from its /metrics deltas:
 * bytes (weights + KV) per second of step time in GB/s, that as a fraction
 * of the machine's measured read bandwidth, and bytes per generated token
 * in MB. Each is -1 when the point has no such deltas (not a tps server, or
 * an older one). */
double rset_point_gbs(const rset_point *p);
double rset_point_bw_fraction(const rset_point *p);
/* Why the point's share of the bandwidth needs a word (above 100%, or read
 * against limits measured while busy: metrics/roofline.h), or NULL. */
const char *rset_point_bw_flag(const rset_point *p);
double rset_point_mb_per_token(const rset_point *p);

/* report_limit.c: the read bandwidth the shares are read against. Each
 * point's is the given figure (tps report --read-gbs), else its server's
 * (tps machine's, from /metrics). A limit below what the machine was seen
 * to read is no limit: when a point whose steps read more than the last-
 * level cache holds (roofline_dram_sized) read faster, every point read
 * against that same figure is read against what it read instead, and says
 * so (limit_note). So no point too big for the caches reads above 100%. */
typedef struct rset_limit {
    double read_bps;  /* given, bytes/s; 0: each point's server's figure */
    const char *from; /* what measured the given figure, in words (borrowed); NULL: unsaid */
    size_t llc_bytes; /* the last-level cache (machine_llc_bytes()); 0: unknown */
} rset_limit;
/* Over every point of sets[0..n) (one report), before anything reads a share. */
void rset_limit_apply(rset *sets, size_t n, const rset_limit *l);
/* "% of bandwidth is read against 42.9 GB/s (what measured it)", and where
 * a point raised it, to what; "" when no point has a limit. */
void rset_limit_describe(char *out, size_t cap, const rset *sets, size_t n, const rset_limit *l);
/* The words of a limit_note that say a limit was raised (make demo looks
 * for them in the report's output to measure again). */
#define RSET_LIMIT_RAISED "was below it, so it was no limit"

/* Prompt tokens the server's prefix cache served over the point, in % of
 * the prompts of the requests that said; -1 when none did. */
double rset_point_cached_pct(const rset_point *p);

/* The server's prompt and generated tokens per step over p (its /metrics
 * deltas); false when it has none. */
bool rset_point_step_tokens(const rset_point *p, double *prefill, double *decode);

/* The latency columns of a set's tables, in order: a histogram's
 * percentile in ms. The page's table has them all, the terminal's those
 * not page_only. */
typedef struct rset_ms_col {
    result_hist_id h;
    double pct;
    bool page_only;
} rset_ms_col;
#define RSET_MS_COLS 7
extern const rset_ms_col rset_ms_cols[RSET_MS_COLS];

/* ---- terminal ------------------------------------------------------------------------- */

void rset_print(FILE *f, const rset *s);
/* Whether any point's output had thinking (then each point's TTFO, the
 * first answer token, is shown), and a result's thinking share of its
 * output. */
bool rset_has_thinking(const rset *s);
double rset_thinking_share(const bench_result *r);

/* report_pred.c: whether p is a prediction (tps plan: config.predicted),
 * and the table of each prediction beside the measured point of the same
 * load (output tok/s, TTFT and ITL p50/p99, the error); the pairs shown
 * (0: none, nothing printed). */
bool rset_point_predicted(const rset_point *p);
size_t rset_print_predicted(FILE *f, const rset *s);

/* ---- plots ---------------------------------------------------------------------------- */

typedef struct rplot {
    char file[64]; /* name inside the SVG folder */
    char title[160];
    char caption[512]; /* what it shows and over which window */
} rplot;

typedef struct rplot_list {
    rplot p[RSET_MAX_PLOTS];
    size_t n;
    size_t first_series; /* index where the per-point time series begin */
} rplot_list;

/* Writes NAME.gp scripts and runs gnuplot on each in dir, giving NAME.svg. */
int rset_plot(rplot_list *out, const rset *s, const char *dir, tps_err *e);

/* The gnuplot plumbing the factor plots share (report_plot.c): a script
 * NAME.gp in dir that draws NAME.svg (w x h px), and running it. */
FILE *rplot_script_open(const char *dir, const char *name, int w, int h, tps_err *e);
int rplot_script_run(FILE *f, const char *dir, const char *name, tps_err *e);
/* s as the body of a gnuplot "..." string. */
void rplot_gp_str(char *out, size_t cap, const char *s);

/* ---- HTML ----------------------------------------------------------------------------- */

/* One self-contained page: the table, the plots of `plots` (read from
 * svg_dir and inlined; plots may be NULL when gnuplot was not available,
 * plot_note then says why), the definitions. */
int rset_write_html(const rset *s, const rplot_list *plots, const char *svg_dir,
                    const char *plot_note, const char *path, tps_err *e);

/* The plots into svg_dir (NULL: a temporary folder, removed after) and, when
 * html_path is given, the page. Without gnuplot the page is still written,
 * without plots, and the gnuplot error is returned. */
int rset_render(const rset *s, const char *html_path, const char *svg_dir, tps_err *e);

/* Pieces of the page the factor report reuses (report_html.c): s escaped
 * for HTML; the plot p inlined from svg_dir as a <figure> of class cls
 * (false when its SVG cannot be read); the page's style sheet; the time
 * now as the page's "rendered" label; closing the page at path f, an error
 * when it could not be written or (missing) a plot's SVG in svg_dir could
 * not be read. */
void rhtml_esc(FILE *f, const char *s);
/* A table row's first cells for point p: its label, then its requests
 * "ok / failed"; a point without a result gets instead one cell spanning
 * span columns that says so, ending the row, and false. */
bool rhtml_row_head(FILE *f, const rset_point *p, int span);
bool rhtml_figure(FILE *f, const rplot *p, const char *svg_dir, const char *cls);
extern const char rhtml_css[];
void rhtml_when(char *buf, size_t size);
/* A page opened with file_out_open (base/file_write.h: a regular file
 * replaced whole, /dev/stdout in place) closed: TPS_EIO naming the path and
 * the reason when a write failed, or naming svg_dir when missing. */
int rhtml_close(file_out *o, bool missing, const char *svg_dir, tps_err *e);
/* A report's plots and page, as both reports render them: the plots drawn
 * (plots) into svg_dir (made when missing and make_svg_dir) or, without
 * one, a temporary folder from tmpl ("/tmp/...XXXXXX", removed after);
 * then, given html_path, the page (page), told the plots' error when they
 * failed (NULL when they did not): it is still written, without them, and
 * that error is returned after it. ctx is the callbacks'. */
typedef int rhtml_plots_fn(void *ctx, const char *dir, tps_err *e);
typedef int rhtml_page_fn(void *ctx, const char *dir, const char *plot_err, const char *html_path,
                          tps_err *e);
int rhtml_render(char *tmpl, const char *svg_dir, bool make_svg_dir, rhtml_plots_fn *plots,
                 rhtml_page_fn *page, void *ctx, const char *html_path, tps_err *e);
/* A table cell's text in buf: v in fmt, or "-" when v is not finite; in
 * *shown (when not NULL) the number the text shows (NAN for "-"), so a
 * reading made from cells never holds a number its table does not show.
 * Returns buf. */
const char *rset_cell(char *buf, size_t cap, const char *fmt, double v, double *shown);
/* A line per point of s whose share of the bandwidth is marked '!' (rset_point_bw_flag):
 * "! label: % of bandwidth why", as HTML paragraphs or indented text lines. */
void rset_bw_notes(FILE *f, const rset *s, bool html);

#endif
