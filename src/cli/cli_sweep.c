/* `tps sweep`: argument parsing and wiring only. The grid, the local server
 * and the sweep document are src/bench/sweep.h; every point is a whole
 * `tps bench` run (cli_bench), so bench options mean the same here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/report_set.h"
#include "bench/sweep.h"
#include "cli/cli.h"

static void usage(FILE *out) {
    fputs("usage: tps sweep [--url URL | --serve MODEL.gguf | --models A.gguf,B.gguf]\n"
          "                 [--concurrency LIST] [--rate LIST] [--input-len LIST]\n"
          "                 [--output-len LIST] [bench options] [--json OUT.json]\n"
          "                 [--html OUT.html] [--svg DIR]\n"
          "\n"
          "Runs `tps bench` once per point of a grid against one endpoint and keeps every\n"
          "point's full bench result in one JSON file (schema tps.sweep.result v1), which\n"
          "`tps report` renders. A LIST is comma-separated: --concurrency 1,4,16 or\n"
          "--input-len 32,512 (each item any form bench takes: 128, uniform:64:512). At\n"
          "most two axes may have more than one value; the grid is their product.\n"
          "\n"
          "endpoint\n"
          "  --url URL             the endpoint (default http://127.0.0.1:8080)\n"
          "  --serve MODEL.gguf    start `tps serve -m MODEL` on 127.0.0.1 (a free port),\n"
          "                        wait for /health, sweep it, stop it (SIGTERM)\n"
          "  --models A,B,...      the same once per model: model size is an axis\n"
          "  --serve-args 'ARGS'   extra `tps serve` options, e.g. '--threads 2 --max-seqs 32'\n"
          "  --serve-wait S        seconds to wait for /health (default 120)\n"
          "axes (one value: fixed for every point; more: swept)\n"
          "  --concurrency LIST    closed loop in flight (with --rate: the cap)\n"
          "  --rate LIST           open loop requests/s\n"
          "  --input-len LIST      prompt tokens\n"
          "  --output-len LIST     max_tokens\n"
          "bench options: every other option goes to each `tps bench` run unchanged\n"
          "  (--requests/--duration are needed; see tps bench --help). When serving, prompts\n"
          "  are sized with the served model's tokenizer unless --tokenizer is given.\n"
          "output\n"
          "  --json FILE           the sweep: every point's axes, bench result, exit status\n"
          "                        and the server's /metrics deltas (steps, prompt and\n"
          "                        generated tokens) when the endpoint is tps serve\n"
          "  --html FILE, --svg DIR   also render the report (as tps report does)\n"
          "  --quiet               no table at the end\n"
          "\n"
          "Exit status: 0; 1 when a point's bench run exited non-zero (errors above its\n"
          "--max-error-rate, or no result) or the server did not start; 2 for bad options.\n",
          out);
}

static int split_words(char *buf, const char **out, size_t cap, size_t *n) {
    for (char *save = NULL, *t = strtok_r(buf, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
        if (*n == cap) return -1;
        out[(*n)++] = t;
    }
    return 0;
}

int cli_sweep(int argc, char **argv) {
    sweep_opts *o = calloc(1, sizeof *o);
    if (!o) return 1;
    const char *bench_args[SWEEP_MAX_ARGS], *serve_args[64];
    char serve_buf[2048] = "";
    size_t nb = 0, ns = 0;
    const char *json_out = NULL, *html = NULL, *svg = NULL, *serve = NULL, *models = NULL;
    bool quiet = false, has_tokenizer = false, bounded = false;
    tps_err e = {{0}};
    int rc = 2;
    o->url = "http://127.0.0.1:8080";
    o->serve_wait_s = 120;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int axis = -1;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            rc = 0;
            goto out;
        }
        if (!strcmp(a, "--concurrency")) axis = SWEEP_CONCURRENCY;
        if (!strcmp(a, "--rate")) axis = SWEEP_RATE;
        if (!strcmp(a, "--input-len")) axis = SWEEP_INPUT_LEN;
        if (!strcmp(a, "--output-len")) axis = SWEEP_OUTPUT_LEN;
        bool takes = axis >= 0 || !strcmp(a, "--url") || !strcmp(a, "--serve") ||
                     !strcmp(a, "--models") || !strcmp(a, "--serve-args") ||
                     !strcmp(a, "--serve-wait") || !strcmp(a, "--json") || !strcmp(a, "--html") ||
                     !strcmp(a, "--svg");
        if (takes && !v) {
            fprintf(stderr, "tps sweep: %s needs a value\n", a);
            goto out;
        }
        if (axis >= 0) {
            if (sweep_list_parse(&o->axis[axis], v, &e)) {
                fprintf(stderr, "tps sweep: %s: %s\n", a, e.msg);
                goto out;
            }
        } else if (!strcmp(a, "--url"))
            o->url = v;
        else if (!strcmp(a, "--serve"))
            serve = v;
        else if (!strcmp(a, "--models"))
            models = v;
        else if (!strcmp(a, "--serve-args"))
            snprintf(serve_buf, sizeof serve_buf, "%s", v);
        else if (!strcmp(a, "--serve-wait")) {
            char *end;
            o->serve_wait_s = strtod(v, &end);
            if (*end || !(o->serve_wait_s > 0)) {
                fprintf(stderr, "tps sweep: --serve-wait '%s': expected seconds > 0\n", v);
                goto out;
            }
        } else if (!strcmp(a, "--json"))
            json_out = v;
        else if (!strcmp(a, "--html"))
            html = v;
        else if (!strcmp(a, "--svg"))
            svg = v;
        else if (!strcmp(a, "--quiet"))
            quiet = true;
        else if (!strcmp(a, "--csv")) {
            fprintf(stderr,
                    "tps sweep: --csv is per bench run; use --json (tps report reads it)\n");
            goto out;
        } else {
            if (nb + 1 >= SWEEP_MAX_ARGS) {
                fprintf(stderr, "tps sweep: too many bench options\n");
                goto out;
            }
            if (!strcmp(a, "--tokenizer")) has_tokenizer = true;
            if (!strcmp(a, "--requests") || !strcmp(a, "--duration")) bounded = true;
            bench_args[nb++] = a;
            continue;
        }
        if (takes) i++;
    }
    if (serve && models) {
        fprintf(stderr, "tps sweep: give --serve MODEL or --models A,B, not both\n");
        goto out;
    }
    if ((serve || models) && sweep_list_parse(&o->axis[SWEEP_MODEL], serve ? serve : models, &e)) {
        fprintf(stderr, "tps sweep: --models: %s\n", e.msg);
        goto out;
    }
    if (serve && o->axis[SWEEP_MODEL].n != 1) {
        fprintf(stderr, "tps sweep: --serve takes one model; use --models A,B for several\n");
        goto out;
    }
    if (!bounded) {
        fprintf(stderr, "tps sweep: give --requests N and/or --duration S (each point must "
                        "end)\n");
        goto out;
    }
    if (sweep_naxes(o) > 2) {
        fprintf(stderr,
                "tps sweep: %zu axes vary; sweep at most two at a time (one value "
                "fixes an axis)\n",
                sweep_naxes(o));
        goto out;
    }
    if (split_words(serve_buf, serve_args, 64, &ns)) {
        fprintf(stderr, "tps sweep: --serve-args: too many words\n");
        goto out;
    }
    o->exe = "/proc/self/exe";
    o->serve_args = serve_args;
    o->n_serve_args = ns;
    o->bench_args = bench_args;
    o->n_bench_args = nb;
    o->add_tokenizer = !has_tokenizer;
    o->bench = cli_bench;
    o->log = stderr;

    json_t *doc = NULL;
    size_t failed = 0;
    fprintf(stderr, "tps sweep: %zu point%s\n", sweep_npoints(o), sweep_npoints(o) == 1 ? "" : "s");
    if (sweep_run(&doc, &failed, o, &e)) {
        fprintf(stderr, "tps sweep: %s\n", e.msg);
        rc = 1;
        goto out;
    }
    rc = failed ? 1 : 0;
    if (json_out) {
        if (json_dump_file(doc, json_out, JSON_INDENT(1) | JSON_REAL_PRECISION(10))) {
            fprintf(stderr, "tps sweep: cannot write '%s'\n", json_out);
            rc = 1;
        } else {
            fprintf(stderr, "tps sweep: wrote %s (tps report %s)\n", json_out, json_out);
        }
    }
    rset s;
    rset_init(&s);
    if (rset_add_json(&s, doc, json_out ? json_out : "sweep", &e)) {
        fprintf(stderr, "tps sweep: %s\n", e.msg);
        rc = 1;
    } else {
        rset_finish(&s);
        if (!quiet) rset_print(stdout, &s);
        if ((html || svg) && rset_render(&s, html, svg, &e)) {
            fprintf(stderr, "tps sweep: %s\n", e.msg);
            rc = 1;
        } else if (html) {
            fprintf(stderr, "tps sweep: wrote %s\n", html);
        }
    }
    rset_free(&s);
    json_decref(doc);
out:
    free(o);
    return rc;
}
