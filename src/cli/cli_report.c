/* `tps report`: argument parsing and wiring only. Reading results, the
 * table, the plots and the page live in src/bench/report/report_set.h. */
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "bench/report/report_factor.h"
#include "bench/report/report_set.h"
#include "cli/cli.h"
#include "cli/opt.h"
#include "metrics/roofline.h" /* machine_llc_bytes: which points are too big for the caches */

typedef struct report_cli {
    const char *html, *svg;
    const char *file_buf[RSET_MAX_POINTS];
    opt_list files;
    const char *factor_buf[256];
    opt_list factors;
    bool quiet;
    double read_gbs;       /* --read-gbs; 0: each point's server's figure */
    const char *read_from; /* --read-from */
} report_cli;

static const opt_row report_rows[] = {
    {"--html", .kind = OPT_STR, .off = offsetof(report_cli, html), .metavar = "FILE",
     .help = "one self-contained page: table, plots inlined, definitions"},
    {"--svg", .kind = OPT_STR, .off = offsetof(report_cli, svg), .metavar = "DIR",
     .help = "keep the SVG files and scripts in DIR (else a temporary folder)"},
    {"--quiet", .kind = OPT_FLAG, .off = offsetof(report_cli, quiet), .help = "no table on stdout"},
    {"--factor", .kind = OPT_LIST, .off = offsetof(report_cli, factors),
     .metavar = "PART[:LABEL]=FILE",
     .help = "the factor report instead (repeatable; make demo writes one):\n"
             "FILE's points join PART, one of batch, mix, itl, prefix,\n"
             "kv-type, model, active, experts (LABEL names them); or\n"
             "depth: a tps generate --depth --json file, one model\n"
             "(LABEL its name); a section per factor,\n"
             "each part with its table, plot and a reading made from\n"
             "the table's numbers (first point against the last)"},
    {"--read-gbs", .kind = OPT_NUM, .off = offsetof(report_cli, read_gbs), .min = 0, .max = 1e6,
     .metavar = "GB/s",
     .help = "read every share of the bandwidth against this figure\n(default: tps machine's on "
             "each point's server, from\nits /metrics); either way a point too big for the\n"
             "last-level cache that read faster raises it, noted"},
    {"--read-from", .kind = OPT_STR, .off = offsetof(report_cli, read_from), .metavar = "TEXT",
     .help = "what measured --read-gbs, printed beside it"},
    {.kind = OPT_REST, .off = offsetof(report_cli, files)},
    {0},
};

static const opt_cmd report_cmd = {
    .prog = "tps report",
    .usage = "usage: tps report RESULT.json... [--html OUT.html] [--svg DIR] [--quiet]\n"
             "       tps report --factor PART[:LABEL]=FILE... [--html OUT.html] [--svg DIR]\n"
             "\n"
             "Shows saved results side by side: sweep files (tps sweep --json), single bench\n"
             "results (tps bench --json) and capacity searches (tps bench --find-max-rate --json:\n"
             "each probe a point, then its probe table and answer), in any mix. Prints a table\n"
             "(every rate names its window)\n"
             "and bars of output tok/s; with --svg or --html draws, with gnuplot:\n"
             "  throughput.svg          output tok/s ([steady] and [run] windows) and TTFT/ITL\n"
             "                          p50/p99 against the axis that varies (concurrency, rate,\n"
             "                          input or output length, model)\n"
             "  latency_throughput.svg  ITL p99 against output tok/s [steady]\n"
             "  cdf_ttft/itl/e2e.svg    distributions (CDF) from the stored histograms\n"
             "  series_NN.svg           output tok/s per bin over each run, steady window shaded\n"
             "  tokens_per_step.svg     prefill and decode tokens per engine step (tps serve's\n"
             "                          /metrics, recorded by tps sweep)\n"
             "  capacity.svg            a capacity search: goodput fraction and TTFT p99 vs the\n"
             "                          probed rate, the answer marked\n"
             "Each SVG has its gnuplot script beside it (NAME.gp) to redraw or restyle it.\n"
             "\n",
    .rows = report_rows,
    .after = "\n"
             "Exit status: 0, 1 when a file cannot be read or a plot cannot be drawn, 2 for bad\n"
             "options.\n",
};

static int report_factors(const report_cli *r) {
    factor_report *f = malloc(sizeof *f);
    if (!f) {
        fprintf(stderr, "tps report: out of memory\n");
        return 1;
    }
    factor_init(f);
    f->limit = (rset_limit){r->read_gbs * 1e9, r->read_from, machine_llc_bytes()};
    tps_err e = {{0}};
    int rc = 0;
    for (size_t i = 0; i < r->factors.n && !rc; i++)
        if (factor_add(f, r->factors.v[i], &e)) {
            fprintf(stderr, "tps report: %s\n", e.msg);
            rc = strstr(e.msg, "--factor") == e.msg ? 2 : 1;
        }
    if (!rc) {
        factor_finish(f);
        if (r->html || r->svg) {
            if (factor_render(f, r->html, r->svg, &e)) {
                fprintf(stderr, "tps report: %s\n", e.msg);
                rc = 1;
            } else if (r->html) {
                fprintf(stderr, "tps report: wrote %s\n", r->html);
            }
        }
        if (!r->quiet) factor_print(stdout, f);
    }
    factor_free(f);
    free(f);
    return rc;
}

int cli_report(int argc, char **argv) {
    report_cli r = {0};
    r.files = OPT_LIST_OF(r.file_buf);
    r.factors = OPT_LIST_OF(r.factor_buf);
    int prc = opt_main(&report_cmd, &r, argc, argv);
    if (prc >= 0) return prc;
    const char *html = r.html, *svg = r.svg;
    const char **files = r.files.v;
    size_t nf = r.files.n;
    bool quiet = r.quiet;
    if (r.factors.n) {
        if (nf) {
            fprintf(stderr, "tps report: give result files or --factor, not both\n");
            return 2;
        }
        return report_factors(&r);
    }
    if (nf == 0) {
        fprintf(stderr, "tps report: give result files (tps sweep --json / tps bench --json)\n");
        return 2;
    }
    rset s;
    rset_init(&s);
    tps_err e = {{0}};
    for (size_t i = 0; i < nf; i++)
        if (rset_add_file(&s, files[i], &e)) {
            fprintf(stderr, "tps report: %s\n", e.msg);
            rset_free(&s);
            return 1;
        }
    rset_finish(&s);
    const rset_limit limit = {r.read_gbs * 1e9, r.read_from, machine_llc_bytes()};
    rset_limit_apply(&s, 1, &limit);
    if (!quiet) rset_print(stdout, &s);
    fflush(stdout);
    int rc = 0;
    if (html || svg) {
        if (rset_render(&s, html, svg, &e)) {
            fprintf(stderr, "tps report: %s\n", e.msg);
            rc = 1;
        }
        if (html && !rc) fprintf(stderr, "tps report: wrote %s\n", html);
        if (svg && !rc)
            fprintf(stderr, "tps report: SVG plots and their gnuplot scripts in %s/\n", svg);
    }
    rset_free(&s);
    return rc;
}
