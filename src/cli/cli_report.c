/* `tps report`: argument parsing and wiring only. Reading results, the
 * table, the plots and the page live in src/bench/report_set.h. */
#include <stdio.h>
#include <string.h>

#include "bench/report_set.h"
#include "cli/cli.h"

static void usage(FILE *out) {
    fputs("usage: tps report RESULT.json... [--html OUT.html] [--svg DIR] [--quiet]\n"
          "\n"
          "Shows saved results side by side: sweep files (tps sweep --json) and single bench\n"
          "results (tps bench --json), in any mix. Prints a table (every rate names its window)\n"
          "and bars of output tok/s; with --svg or --html draws, with gnuplot:\n"
          "  throughput.svg          output tok/s ([steady] and [run] windows) and TTFT/ITL\n"
          "                          p50/p99 against the axis that varies (concurrency, rate,\n"
          "                          input or output length, model)\n"
          "  latency_throughput.svg  ITL p99 against output tok/s [steady]\n"
          "  cdf_ttft/itl/e2e.svg    distributions (CDF) from the stored histograms\n"
          "  series_NN.svg           output tok/s per bin over each run, steady window shaded\n"
          "  tokens_per_step.svg     prefill and decode tokens per engine step (tps serve's\n"
          "                          /metrics, recorded by tps sweep)\n"
          "Each SVG has its gnuplot script beside it (NAME.gp) to redraw or restyle it.\n"
          "\n"
          "  --html FILE   one self-contained page: table, plots inlined, definitions\n"
          "  --svg DIR     keep the SVG files and scripts in DIR (else a temporary folder)\n"
          "  --quiet       no table on stdout\n"
          "\n"
          "Exit status: 0, 1 when a file cannot be read or a plot cannot be drawn, 2 for bad\n"
          "options.\n",
          out);
}

int cli_report(int argc, char **argv) {
    const char *html = NULL, *svg = NULL;
    const char *files[RSET_MAX_POINTS];
    int nf = 0;
    bool quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if ((!strcmp(a, "--html") || !strcmp(a, "--svg")) && i + 1 < argc) {
            if (a[2] == 'h')
                html = argv[++i];
            else
                svg = argv[++i];
        } else if (!strcmp(a, "--quiet")) {
            quiet = true;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "tps report: unknown option '%s' (see tps report --help)\n", a);
            return 2;
        } else if (nf < RSET_MAX_POINTS) {
            files[nf++] = a;
        }
    }
    if (nf == 0) {
        fprintf(stderr, "tps report: give result files (tps sweep --json / tps bench --json)\n");
        return 2;
    }
    rset s;
    rset_init(&s);
    tps_err e = {{0}};
    for (int i = 0; i < nf; i++)
        if (rset_add_file(&s, files[i], &e)) {
            fprintf(stderr, "tps report: %s\n", e.msg);
            rset_free(&s);
            return 1;
        }
    rset_finish(&s);
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
