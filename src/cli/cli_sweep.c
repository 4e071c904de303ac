/* `tps sweep`: argument parsing and wiring only. The grid, the local server
 * and the sweep document are src/bench/experiment/sweep.h. The options sweep does not
 * know are parsed once, by tps bench's own table (cli_bench_parse_spec), into
 * the spec every point runs, so bench options mean the same here. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/experiment/bench_spec.h"
#include "bench/io/json_file.h"
#include "bench/report/report_set.h"
#include "bench/experiment/sweep.h"
#include "cli/cli.h"
#include "cli/opt.h"
#include "plan/plan_env.h"

/* Everything `tps sweep` parses; the grid options are in o. */
typedef struct sweep_cli {
    sweep_opts o;
    const char *bench_buf[SWEEP_MAX_ARGS - 1];
    opt_list bench_args; /* options sweep does not know: tps bench's */
    bench_spec base;     /* bench_args parsed */
    const char *serve_args, *json_out, *html, *svg, *serve, *models, *plan, *plan_args;
    bool quiet;
} sweep_cli;

static int axis_arg(void *dst, const char *v, char *why, size_t cap) {
    tps_err e = {{0}};
    return opt_err_why(sweep_list_parse(dst, v, &e), &e, why, cap);
}

static int csv_arg(void *dst, const char *v, char *why, size_t cap) {
    snprintf(why, cap, "--csv is per bench run; use --json (tps report reads it)");
    return -1;
}

#define W(field) offsetof(sweep_cli, field)
#define AXIS_ROW(flag, ax, text)                                                                   \
    {                                                                                              \
        flag, .kind = OPT_CUSTOM, .off = W(o.axis[ax]), .parse = axis_arg, .metavar = "LIST",      \
              .help = text                                                                         \
    }

static const opt_row sweep_rows[] = {
    OPT_HEAD("endpoint"),
    {"--url", .kind = OPT_STR, .off = W(o.url), .metavar = "URL",
     .help = "the endpoint (default http://127.0.0.1:8080)"},
    {"--serve", .kind = OPT_STR, .off = W(serve), .metavar = "MODEL.gguf",
     .help = "start `tps serve -m MODEL` on 127.0.0.1 (a free port),\n"
             "wait for /health, sweep it, stop it (SIGTERM)"},
    {"--models", .kind = OPT_STR, .off = W(models), .metavar = "A,B,...",
     .help = "the same once per model: model size is an axis"},
    {"--serve-args", .kind = OPT_STR, .off = W(serve_args), .metavar = "'ARGS'",
     .help = "extra `tps serve` options, e.g. '--threads 2 --max-seqs 32'"},
    {"--serve-wait", .kind = OPT_SECONDS, .off = W(o.serve_wait_s), .max = INFINITY,
     .flags = OPT_ABOVE_MIN, .def = "120", .help = "seconds to wait for /health"},
    {"--plan", .kind = OPT_STR, .off = W(plan), .metavar = "MODEL.gguf",
     .help = "predict each point with tps plan instead of measuring it\n"
             "(no server; the points are marked predicted)"},
    {"--plan-args", .kind = OPT_STR, .off = W(plan_args), .metavar = "'ARGS'",
     .help = "tps plan's model, cost and server options, e.g.\n"
             "'--calibration cal.txt --max-seqs 16'"},
    OPT_HEAD("axes (one value: fixed for every point; more: swept)"),
    AXIS_ROW("--concurrency", SWEEP_CONCURRENCY, "closed loop in flight (with --rate: the cap)"),
    AXIS_ROW("--rate", SWEEP_RATE, "open loop requests/s"),
    AXIS_ROW("--input-len", SWEEP_INPUT_LEN, "prompt tokens"),
    AXIS_ROW("--output-len", SWEEP_OUTPUT_LEN, "max_tokens"),
    OPT_HEAD("bench options: every other option goes to each `tps bench` run unchanged\n"
             "  (--requests/--duration are needed; see tps bench --help). When serving, prompts\n"
             "  are sized with the served model's tokenizer unless --tokenizer is given.\n"
             "output"),
    {"--json", .kind = OPT_STR, .off = W(json_out), .metavar = "FILE",
     .help = "the sweep: every point's axes, bench result, exit status\n"
             "and the server's /metrics deltas (steps, prompt and\n"
             "generated tokens) when the endpoint is tps serve"},
    {"--html", .kind = OPT_STR, .off = W(html), .metavar = "FILE",
     .help = "also render the report (as tps report does)"},
    {"--svg", .kind = OPT_STR, .off = W(svg), .metavar = "DIR",
     .help = "also draw the report's SVG plots in DIR"},
    {"--quiet", .kind = OPT_FLAG, .off = W(quiet), .help = "no table at the end"},
    {"--csv", .kind = OPT_CUSTOM, .parse = csv_arg, .metavar = "FILE",
     .help = "refused: a CSV row is per bench run; use --json"},
    {.kind = OPT_REST, .off = W(bench_args), .flags = OPT_UNKNOWN_TOO},
    {0},
};

static const opt_cmd sweep_cmd = {
    .prog = "tps sweep",
    .usage = "usage: tps sweep [--url URL | --serve MODEL.gguf | --models A.gguf,B.gguf]\n"
             "                 [--concurrency LIST] [--rate LIST] [--input-len LIST]\n"
             "                 [--output-len LIST] [bench options] [--json OUT.json]\n"
             "                 [--html OUT.html] [--svg DIR]\n"
             "\n"
             "Runs `tps bench` once per point of a grid against one endpoint and keeps every\n"
             "point's full bench result in one JSON file (schema tps.sweep.result v1), which\n"
             "`tps report` renders. A LIST is comma-separated: --concurrency 1,4,16 or\n"
             "--input-len 32,512 (each item any form bench takes: 128, uniform:64:512). At\n"
             "most two axes may have more than one value; the grid is their product.\n"
             "\n",
    .rows = sweep_rows,
    .after = "\n"
             "Exit status: 0; 1 when a point's bench run exited non-zero (errors above its\n"
             "--max-error-rate, or no result) or the server did not start; 2 for bad options.\n",
};

static int split_words(char *buf, const char **out, size_t cap, size_t *n) {
    for (char *save = NULL, *t = strtok_r(buf, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
        if (*n == cap) return -1;
        out[(*n)++] = t;
    }
    return 0;
}

/* Whether the bench options include NAME (as --name or --name=...). */
static bool has_bench_opt(const opt_list *l, const char *name) {
    size_t n = strlen(name);
    for (size_t i = 0; i < l->n; i++)
        if (!strncmp(l->v[i], name, n) && (!l->v[i][n] || l->v[i][n] == '=')) return true;
    return false;
}

/* The checks across options; 0, or -1 after a message. */
static int sweep_check(sweep_cli *w) {
    tps_err e = {{0}};
    sweep_opts *o = &w->o;
    const char *msg = NULL;
    if (w->serve && w->models)
        msg = "give --serve MODEL or --models A,B, not both";
    else if (w->plan && (w->serve || w->models))
        msg = "--plan predicts the points instead of serving a model: drop --serve/--models";
    else if (w->plan_args && !w->plan)
        msg = "--plan-args are for --plan MODEL";
    else if ((w->serve || w->models) &&
             sweep_list_parse(&o->axis[SWEEP_MODEL], w->serve ? w->serve : w->models, &e))
        msg = e.msg;
    else if (w->serve && o->axis[SWEEP_MODEL].n != 1)
        msg = "--serve takes one model; use --models A,B for several";
    else if (!has_bench_opt(&w->bench_args, "--requests") &&
             !has_bench_opt(&w->bench_args, "--duration"))
        msg = "give --requests N and/or --duration S (each point must end)";
    if (msg) {
        fprintf(stderr, "tps sweep: %s%s\n", msg == e.msg ? "--models: " : "", msg);
        return -1;
    }
    if (sweep_naxes(o) > 2) {
        fprintf(stderr,
                "tps sweep: %zu axes vary; sweep at most two at a time (one value "
                "fixes an axis)\n",
                sweep_naxes(o));
        return -1;
    }
    return 0;
}

/* The sweep, its document written and its report shown; the exit code. */
static int sweep_go(sweep_cli *w) {
    sweep_opts *o = &w->o;
    tps_err e = {{0}};
    json_t *doc = NULL;
    size_t failed = 0;
    fprintf(stderr, "tps sweep: %zu point%s\n", sweep_npoints(o), sweep_npoints(o) == 1 ? "" : "s");
    int src = sweep_run(&doc, &failed, o, &e);
    if (src) {
        fprintf(stderr, "tps sweep: %s\n", e.msg);
        return src == TPS_EINVAL ? 2 : 1;
    }
    int rc = failed ? 1 : 0;
    if (w->json_out) {
        if (json_file_write(doc, w->json_out, JSON_INDENT(1) | JSON_REAL_PRECISION(10), &e)) {
            fprintf(stderr, "tps sweep: %s\n", e.msg);
            rc = 1;
        } else {
            fprintf(stderr, "tps sweep: wrote %s (tps report %s)\n", w->json_out, w->json_out);
        }
    }
    rset s;
    rset_init(&s);
    if (rset_add_json(&s, doc, w->json_out ? w->json_out : "sweep", &e)) {
        fprintf(stderr, "tps sweep: %s\n", e.msg);
        rc = 1;
    } else {
        rset_finish(&s);
        if (!w->quiet) rset_print(stdout, &s);
        if ((w->html || w->svg) && rset_render(&s, w->html, w->svg, &e)) {
            fprintf(stderr, "tps sweep: %s\n", e.msg);
            rc = 1;
        } else if (w->html) {
            fprintf(stderr, "tps sweep: wrote %s\n", w->html);
        }
    }
    rset_free(&s);
    json_decref(doc);
    return rc;
}

int cli_sweep(int argc, char **argv) {
    sweep_cli *w = calloc(1, sizeof *w);
    if (!w) return 1;
    const char *serve_args[64];
    char serve_buf[2048] = "";
    size_t ns = 0;
    w->bench_args = OPT_LIST_OF(w->bench_buf);
    w->o.url = "http://127.0.0.1:8080";
    w->o.serve_wait_s = 120;
    int rc = opt_main(&sweep_cmd, w, argc, argv);
    if (rc >= 0) goto out;
    rc = 2;
    if (sweep_check(w)) goto out;
    snprintf(serve_buf, sizeof serve_buf, "%s", w->serve_args ? w->serve_args : "");
    if (split_words(serve_buf, serve_args, 64, &ns)) {
        fprintf(stderr, "tps sweep: --serve-args: too many words\n");
        goto out;
    }
    sweep_opts *o = &w->o;
    o->exe = "/proc/self/exe";
    o->serve_args = serve_args;
    o->n_serve_args = ns;
    char *bargv[SWEEP_MAX_ARGS + 1] = {"bench"};
    for (size_t i = 0; i < w->bench_args.n; i++)
        bargv[i + 1] = (char *)w->bench_args.v[i];
    if (cli_bench_parse_spec(&w->base, (int)w->bench_args.n + 1, bargv)) goto out; /* said why */
    plan_env env;
    bool planned = false;
    if (w->plan) {
        char plan_buf[2048];
        const char *pargv[65] = {"plan"};
        size_t np = 0;
        snprintf(plan_buf, sizeof plan_buf, "%s", w->plan_args ? w->plan_args : "");
        if (split_words(plan_buf, pargv + 1, 64, &np)) {
            fprintf(stderr, "tps sweep: --plan-args: too many words\n");
            goto out;
        }
        if ((rc = cli_plan_env_open(&env, w->plan, (int)np + 1, (char **)pargv))) goto out;
        planned = true;
        plan_env_spec(&env, &w->base, w->plan);
        o->url = "plan:";
    }
    o->base = &w->base;
    o->bench_args = w->bench_args.v;
    o->n_bench_args = w->bench_args.n;
    o->log = stderr;
    rc = sweep_go(w);
    if (planned) plan_env_close(&env);
out:
    free(w);
    return rc;
}
