/* `tps plan` and `tps plan calibrate`: argument parsing and wiring only.
 * The options are tps bench's (load, workload, report) and tps serve's
 * (engine) from those commands' own tables (cli_rows.h), so a plan is
 * asked exactly as the run it predicts would be. The simulation is
 * src/plan/plan.h; its result is a tps bench result, printed and written
 * as tps bench does. */
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/experiment/bench_spec.h"
#include "bench/experiment/capacity.h"
#include "bench/report/report.h"
#include "bench/result/result.h"
#include "cli/cli.h"
#include "cli/cli_rows.h"
#include "cli/opt.h"
#include "plan/plan.h"
#include "plan/plan_calib.h"
#include "plan/plan_env.h"
#include "plan/plan_replay.h"
#include "base/file_write.h"
#include "base/ggml_type.h"

typedef struct plan_cli {
    bench_spec spec;   /* bench's rows count from here */
    plan_env_opts env; /* the model, cost and server rows (serve's engine rows in env.ep) */
    const char *json_out, *replay, *steps_out;
    result_out_opts out;
    bool find_max_rate;
    double goodput_target, replicas_for;
} plan_cli;

#define P(field) offsetof(plan_cli, field)
#define E(field) offsetof(plan_env_opts, field)

/* Offsets into a plan_env_opts: tps plan's, and tps sweep --plan-args'. */
static const opt_row plan_server_rows[] = {
    OPT_HEAD("model and cost"),
    {"--model", "-m", OPT_STR, E(model), .metavar = "FILE",
     .help = "the GGUF model to plan for (required; its weights are not read)"},
    {"--calibration", .kind = OPT_STR, .off = E(calibration), .metavar = "FILE",
     .help = "step costs measured on this machine for this model (tps plan\n"
             "calibrate, or tps serve --save-calibration); default: the\n"
             "roofline of the model's bytes and multiply-adds (uncalibrated)"},
    {"--bandwidth", .kind = OPT_NUM, .off = E(bandwidth), .max = 1e6, .flags = OPT_ABOVE_MIN,
     .metavar = "GB/s", .help = "roofline: the read bandwidth to assume (default: tps machine's)"},
    {"--int8-rate", .kind = OPT_NUM, .off = E(int8_rate), .max = 1e9, .flags = OPT_ABOVE_MIN,
     .metavar = "G/s",
     .help = "roofline: int8 multiply-adds per second, 1e9 (default: tps machine's)"},
    {"--fp32-rate", .kind = OPT_NUM, .off = E(fp32_rate), .max = 1e9, .flags = OPT_ABOVE_MIN,
     .metavar = "GFLOP/s",
     .help = "roofline: fp32 flops per second (default: tps machine's, or\n"
             "half --int8-rate when that is given)"},
    {"--steal", .kind = OPT_NUM, .off = E(steal), .max = 0.99, .metavar = "S",
     .help = "a shared VM whose hypervisor takes S (0 to 0.99) of its CPU\n"
             "time, as tps bench's host.steal reads it: each step slower by\n"
             "((1 - the calibration's) / (1 - S))^threads (default: as when\n"
             "calibrated; the roofline's limits are a quiet machine's)"},
    {"--chat-template", .kind = OPT_STR, .off = E(chat_template), .metavar = "NAME",
     .help = "as tps serve's (default: recognised from the model, else chatml)"},
    OPT_HEAD("server (as tps serve; --threads also picks the machine's limits)"),
    OPT_ROWS_AT(serve_engine_rows, E(ep)),
    {0},
};

static const opt_row plan_rows[] = {
    OPT_ROWS_AT(plan_server_rows, P(env)),
    OPT_HEAD("load (as tps bench)"),
    OPT_ROWS_AT(bench_load_rows, P(spec)),
    OPT_HEAD("workload (as tps bench)"),
    OPT_ROWS_AT(bench_endpoint_rows, P(spec)),
    OPT_ROWS_AT(bench_workload_rows, P(spec)),
    OPT_ROWS_AT(bench_shape_rows, P(spec)),
    OPT_HEAD("limits (as tps bench)"),
    OPT_ROWS_AT(bench_limit_rows, P(spec)),
    OPT_HEAD("report (as tps bench)"),
    OPT_ROWS_AT(bench_report_rows, P(spec)),
    {"--find-max-rate", .kind = OPT_FLAG, .off = P(find_max_rate),
     .help = "capacity: the highest open-loop rate whose goodput meets\n"
             "--goodput-target under --slo (tps bench's search, each probe\n"
             "simulated for --duration seconds)"},
    {"--goodput-target", .kind = OPT_NUM, .off = P(goodput_target), .max = 1,
     .flags = OPT_ABOVE_MIN, .metavar = "F", .def = "0.95",
     .help = "capacity: share of requests that must meet --slo"},
    {"--replicas-for", .kind = OPT_NUM, .off = P(replicas_for), .max = 1e9, .flags = OPT_ABOVE_MIN,
     .metavar = "RATE",
     .help = "replicas needed to serve RATE requests/s under --slo (the\n"
             "capacity of one, then RATE split evenly over them, checked)"},
    {"--steal-series", .kind = OPT_STR, .off = P(env.steal_series), .metavar = "RESULT",
     .help = "a tps bench result (JSON) whose hypervisor's steal the steps\n"
             "follow second by second (its series.steal, about its\n"
             "host.steal), as --steal does with one share: what the run\n"
             "would have measured on a machine taken from as that run's was"},
    {"--json", .kind = OPT_STR, .off = P(json_out), .metavar = "FILE",
     .help = "the predicted result (tps bench's schema, config.predicted true)"},
    OPT_ROWS_AT(result_out_rows, P(out)),
    {"--steps", .kind = OPT_STR, .off = P(steps_out), .metavar = "FILE",
     .help = "every simulated step as a CSV line (t0, t1, t2 in ns;\n"
             "rows, prefill, decode, cached, logits, running, waiting, taken,\n"
             "attended, kv_read; the cost model's forward and after, ns)"},
    OPT_HEAD("checking the planner against a real run"),
    {"--replay", .kind = OPT_STR, .off = P(replay), .metavar = "TRACE",
     .help = "replay a real run's timing (tps serve --trace TRACE): its\n"
             "requests reach the queue when they did, its steps take what\n"
             "they took; the plan's steps must then be the engine's own"},
    {0},
};

static const opt_cmd plan_cmd = {
    .prog = "tps plan",
    .usage = "usage: tps plan -m MODEL [--calibration FILE] [tps serve and tps bench options]\n"
             "       tps plan calibrate -m MODEL [--threads N] -o FILE\n"
             "\n"
             "Predicts what tps bench would measure against tps serve, without running the\n"
             "model: a simulation of the server (the engine's own scheduler, step times from a\n"
             "cost model) under the bench's load. The result is a tps bench result marked\n"
             "predicted: tps report, tps bench compare and tps sweep's readers take it.\n"
             "Every request is taken to generate max_tokens (as with --ignore-eos).\n"
             "\n",
    .rows = plan_rows,
};

/* ---- runs ------------------------------------------------------------------------ */

static void print_stats(const plan_server *srv) {
    const plan_stats *st = &srv->stats;
    printf("predicted by %s\n  %llu steps simulated (%llu prefill rows, %llu decode rows, %llu "
           "prompt tokens from the prefix cache, %llu preemptions) in %.2f s\n",
           srv->cost->source, (unsigned long long)st->steps, (unsigned long long)st->prefill_rows,
           (unsigned long long)st->decode_rows, (unsigned long long)st->cached_rows,
           (unsigned long long)st->preemptions, st->wall_s);
}

static int write_outputs(const bench_result *res, const plan_cli *p, tps_err *e) {
    if (p->json_out && result_write_json(res, p->json_out, e)) return 1;
    return p->out.csv_out && result_write_csv_file(res, p->out.csv_out, e) ? 1 : 0;
}

static int plan_single(const plan_cli *p, plan_server *srv) {
    tps_err e = {{0}};
    bench_result res;
    if (bench_spec_run(&res, &p->spec, stderr, "tps plan", &e)) {
        fprintf(stderr, "tps plan: %s\n", e.msg);
        return 1;
    }
    if (!p->out.quiet) {
        report_print(stdout, &res);
        print_stats(srv);
    }
    int rc = write_outputs(&res, p, &e);
    if (rc) fprintf(stderr, "tps plan: %s\n", e.msg);
    result_free(&res);
    return rc;
}

static void print_probe(const capacity_probe *cp, size_t i, void *arg) {
    const plan_cli *p = arg;
    if (!p->out.quiet) capacity_print_probe(stdout, cp, i);
}

/* The capacity search with the simulation as its probes; *max_rate. */
static int search(const plan_cli *p, plan_server *srv, double *max_rate, bool print, tps_err *e) {
    workload wl;
    bench_config cfg;
    int rc = bench_spec_prepare(&wl, &cfg, &p->spec, stderr, "tps plan", e);
    if (rc) return rc;
    json_t *jc = bench_spec_config_json(&p->spec, &cfg, &wl);
    capacity_opts o = capacity_opts_default();
    o.slo = p->spec.ro.slo;
    if (p->goodput_target > 0) o.goodput_target = p->goodput_target;
    if (cfg.rate > 0) o.start_rate = cfg.rate, o.min_rate = cfg.rate / 16;
    o.probe_s = cfg.duration_s;
    o.config = jc;
    o.run = plan_run;
    o.run_arg = srv;
    o.max_probes = 24;
    o.precision = 0.01;
    o.max_rate = 1e6;
    capacity_result r;
    if (print && !p->out.quiet) capacity_print_header(stdout);
    rc = capacity_search(&r, &o, &cfg, &wl, print ? print_probe : NULL, (void *)p, e);
    if (!rc) {
        *max_rate = r.max_rate;
        if (print && !p->out.quiet) capacity_print_answer(stdout, &r);
        if (print && p->json_out) rc = capacity_write_json(&r, &o, p->json_out, e);
        capacity_result_free(&r);
    }
    json_decref(jc);
    workload_free(&wl);
    return rc;
}

static int plan_capacity(const plan_cli *p, plan_server *srv) {
    tps_err e = {{0}};
    double max_rate = 0;
    int rc = search(p, srv, &max_rate, true, &e);
    if (rc) fprintf(stderr, "tps plan: %s\n", e.msg);
    if (!rc && !p->out.quiet) printf("predicted by %s\n", srv->cost->source);
    return rc ? 1 : 0;
}

/* --replicas-for RATE: one replica's capacity under the SLO, the replicas
 * that RATE needs, and one replica simulated at its share to check it. */
static int plan_replicas(plan_cli *p, plan_server *srv) {
    tps_err e = {{0}};
    double max_rate = 0;
    int rc = search(p, srv, &max_rate, false, &e);
    if (rc) {
        fprintf(stderr, "tps plan: %s\n", e.msg);
        return 1;
    }
    if (!(max_rate > 0)) {
        printf("no rate meets the SLO on one replica: more replicas do not help; relax --slo\n");
        return 1;
    }
    const double n = ceil(p->replicas_for / max_rate);
    printf("one replica serves %.3g requests/s within the SLO; %.3g requests/s need %.0f "
           "replicas (%.3g requests/s each)\n",
           max_rate, p->replicas_for, n, p->replicas_for / n);
    p->spec.cfg.rate = p->replicas_for / n;
    printf("one replica at %.3g requests/s:\n\n", p->spec.cfg.rate);
    return plan_single(p, srv);
}

/* ---- tps plan calibrate ---------------------------------------------------------- */

typedef struct calib_cli {
    const char *model, *out, *kv_buf[STEP_CALIB_MAX_KV];
    opt_list kv;
    int threads;
    uint32_t max_seqs, max_batch_tokens;
    double served_s;
    bool quick, verbose;
} calib_cli;

#define C(field) offsetof(calib_cli, field)
static const opt_row calib_rows[] = {
    {"--model", "-m", OPT_STR, C(model), .metavar = "FILE", .help = "the GGUF model (required)"},
    {"--output", "-o", OPT_STR, C(out), .metavar = "FILE", .help = "the calibration (required)"},
    {"--threads", .kind = OPT_INT, .off = C(threads), .max = 4096,
     .help = "kernel threads, as tps serve will run (default: all cores)"},
    {"--kv-type", .kind = OPT_LIST, .off = C(kv), .metavar = "TYPE",
     .help = "f16, q8_0 or f32; repeatable (default: f16, and q8_0\n"
             "when the model's head size allows it)"},
    {"--max-seqs", .kind = OPT_U32, .off = C(max_seqs), .min = 1, .max = 4096, .def = "64",
     .help = "decode steps of up to N streams"},
    {"--max-batch-tokens", .kind = OPT_U32, .off = C(max_batch_tokens), .min = 16, .max = 65536,
     .def = "256", .help = "prompt steps of up to N rows"},
    {"--served-s", .kind = OPT_SECONDS, .off = C(served_s), .max = 3600, .def = "4",
     .help = "then serve the model on a loopback port to a real bench\n"
             "client, three loads of this long each, and keep what the\n"
             "server and client add to a step on this machine (its mean\n"
             "and spread); 0: the engine alone"},
    {"--quick", .kind = OPT_FLAG, .off = C(quick), .help = "a smaller grid (seconds; tests)"},
    {"-v", .kind = OPT_FLAG, .off = C(verbose),
     .help = "print every shape measured beside the fit"},
    {0},
};

static const opt_cmd calib_cmd = {
    .prog = "tps plan calibrate",
    .usage = "usage: tps plan calibrate -m MODEL [--threads N] [--kv-type T] -o FILE\n"
             "\n"
             "Runs the engine on this machine over a grid of step shapes (prompt rows, decoding\n"
             "streams, attended positions, per KV type) and stores the fitted step-cost model\n"
             "with the machine's limits, for tps plan --calibration FILE; then serves it to a\n"
             "real client on a loopback port to measure what serving adds to each step. Under a\n"
             "minute for the 15M preset, a few minutes for 1B on 2 cores.\n"
             "\n",
    .rows = calib_rows,
};

static int calib_kv_types(plan_calib_opts *o, const calib_cli *c, const llama_model *m) {
    for (size_t i = 0; i < c->kv.n; i++) {
        int t = ggml_type_from_name(c->kv.v[i]);
        if (t != GGML_TYPE_F16 && t != GGML_TYPE_F32 && t != GGML_TYPE_Q8_0) {
            fprintf(stderr, "tps plan calibrate: --kv-type takes f16, q8_0 or f32, not '%s'\n",
                    c->kv.v[i]);
            return 2;
        }
        o->kv_types[o->n_kv++] = (uint32_t)t;
    }
    if (!o->n_kv) {
        o->kv_types[o->n_kv++] = GGML_TYPE_F16;
        if (m->cfg.head_dim % 32 == 0) o->kv_types[o->n_kv++] = GGML_TYPE_Q8_0;
    }
    return 0;
}

static int plan_calibrate_cmd(int argc, char **argv) {
    calib_cli c = {.max_seqs = 64, .max_batch_tokens = 256, .served_s = 4};
    c.kv = OPT_LIST_OF(c.kv_buf);
    int prc = opt_main(&calib_cmd, &c, argc, argv);
    if (prc >= 0) return prc;
    if (!c.model || !c.out) {
        fprintf(stderr, "tps plan calibrate: -m MODEL and -o FILE are required\n");
        return 2;
    }
    tps_err e = {{0}};
    llama_model *m = NULL;
    tokenizer *tok = NULL;
    llama_load_opts lo = {0};
    int rc = llama_model_load_opts(&m, c.model, &lo, &e);
    if (!rc) rc = tokenizer_load(&tok, m->file, &e);
    plan_calib_opts o = {.m = m,
                         .tok = tok,
                         .n_threads = c.threads,
                         .max_seqs = c.max_seqs,
                         .max_batch_tokens = c.max_batch_tokens,
                         .quick = c.quick,
                         .model_path = c.model,
                         .served_s = c.served_s,
                         .verbose = c.verbose,
                         .log = stdout};
    int bad = rc ? 0 : calib_kv_types(&o, &c, m);
    step_calib cal;
    if (!rc && !bad) rc = plan_calibrate(&cal, &o, &e);
    if (!rc && !bad) rc = step_calib_write(&cal, c.out, &e);
    if (!rc && !bad) printf("tps plan calibrate: wrote %s\n", c.out);
    if (rc) fprintf(stderr, "tps plan calibrate: %s\n", e.msg);
    tokenizer_free(tok);
    llama_model_free(m);
    return bad ? bad : rc ? 1 : 0;
}

/* ---- tps plan ------------------------------------------------------------------- */

static int plan_parse(plan_cli *p, int argc, char **argv) {
    memset(p, 0, sizeof *p);
    bench_spec_init(&p->spec);
    plan_env_opts_default(&p->env);
    int prc = opt_main(&plan_cmd, p, argc, argv);
    if (prc >= 0) return prc;
    if (p->spec.cfg.endpoint != BENCH_EP_CHAT && p->spec.cfg.endpoint != BENCH_EP_COMPLETIONS) {
        fprintf(stderr,
                "tps plan: --endpoint %s is not simulated (tps plan predicts tps serve's chat and "
                "completions endpoints)\n",
                bench_endpoint_name(p->spec.cfg.endpoint));
        return 2;
    }
    const plan_env_opts *o = &p->env;
    if (!o->model) {
        fprintf(stderr, "tps plan: -m MODEL is required (see tps plan --help)\n");
        return 2;
    }
    if (p->replicas_for > 0 &&
        (p->find_max_rate || !(p->spec.cfg.duration_s > 0) ||
         !(p->spec.ro.slo.ttft_ns || p->spec.ro.slo.tpot_ns || p->spec.ro.slo.e2e_ns))) {
        fprintf(stderr, "tps plan: --replicas-for needs --slo and --duration S (each probe's "
                        "length), and not --find-max-rate (it runs the search itself)\n");
        return 2;
    }
    bool search = p->find_max_rate || p->replicas_for > 0;
    tps_err e = {{0}};
    const bench_ask ask = {.find_max_rate = search, .goodput_target = p->goodput_target > 0};
    if (bench_spec_check(&p->spec, &ask, &e)) { /* tps bench's rules, as it says them */
        fprintf(stderr, "tps plan: %s\n", e.msg);
        return 2;
    }
    if (o->calibration && (o->bandwidth > 0 || o->int8_rate > 0 || o->fp32_rate > 0)) {
        fprintf(stderr, "tps plan: --bandwidth, --int8-rate and --fp32-rate describe the roofline "
                        "of an uncalibrated plan; drop them or --calibration\n");
        return 2;
    }
    if (p->replay && (o->steal >= 0 || o->steal_series)) {
        fprintf(stderr, "tps plan: --replay takes the run's own step times; --steal and "
                        "--steal-series have nothing to scale\n");
        return 2;
    }
    if (o->steal_series && (o->steal >= 0 || search)) {
        fprintf(stderr,
                "tps plan: --steal-series follows one run's steal in time; not with %s "
                "(give one share with --steal)\n",
                o->steal >= 0 ? "--steal"
                              : "a capacity search, whose probes each start "
                                "at 0");
        return 2;
    }
    return -1;
}

static void step_line(void *arg, const plan_step *st) {
    fprintf(arg, "%llu,%llu,%llu,%u,%u,%u,%u,%u,%u,%u,%u,%.0f,%.0f,%.0f,%.0f\n",
            (unsigned long long)st->t0, (unsigned long long)st->t1, (unsigned long long)st->t2,
            st->rows, st->prefill_rows, st->decode_rows, st->cached_rows, st->logit_rows,
            st->running, st->waiting, st->taken, st->attended, st->kv_read, st->cost_fwd_ns,
            st->cost_post_ns);
}

/* --replay and --steps on the simulated server; 0 or an exit code. */
static int plan_debug(const plan_cli *p, plan_server *srv, plan_replay *rp, file_out *steps) {
    tps_err e = {{0}};
    if (p->replay && plan_replay_read(rp, p->replay, &e)) {
        fprintf(stderr, "tps plan: %s\n", e.msg);
        return 1;
    }
    if (p->replay) srv->replay = rp;
    if (!p->steps_out) return 0;
    if (file_out_open(steps, p->steps_out, &e)) {
        fprintf(stderr, "tps plan: --steps: %s\n", e.msg);
        return 1;
    }
    fprintf(steps->f, "t0,t1,t2,rows,prefill,decode,cached,logits,running,waiting,taken,attended,"
                      "kv_read,cost_fwd,cost_post\n");
    srv->on_step = step_line;
    srv->on_step_arg = steps->f;
    return 0;
}

static const opt_cmd plan_server_cmd = {
    .prog = "tps sweep --plan-args",
    .usage = "the options tps plan takes for its model, cost and server:\n\n",
    .rows = plan_server_rows,
};

/* The simulated server from o; 0, or an exit code after the message (2:
 * options that do not fit, 1: a file that cannot be read). */
static int env_open(plan_env *env, const plan_env_opts *o, uint64_t seed) {
    tps_err e = {{0}};
    int rc = plan_env_open(env, o, seed, stderr, "tps plan", &e);
    if (!rc) return 0;
    fprintf(stderr, "tps plan: %s\n", e.msg);
    return rc == TPS_EINVAL && o->chat_template ? 2 : 1;
}

int cli_plan_env_open(plan_env *env, const char *model, int argc, char **argv) {
    plan_env_opts o;
    plan_env_opts_default(&o);
    int rc = opt_main(&plan_server_cmd, &o, argc, argv);
    if (rc < 0) {
        if (!o.model) o.model = model;
        bench_spec s; /* the seed a spec starts with */
        bench_spec_init(&s);
        rc = env_open(env, &o, s.cfg.seed);
    } else if (rc == 0) {
        rc = 2; /* --help was printed: no plan */
    }
    return rc;
}

static int plan_main(plan_cli *p) {
    plan_env env;
    int rc = env_open(&env, &p->env, p->spec.cfg.seed);
    if (rc) return rc;
    plan_env_spec(&env, &p->spec, p->env.model);
    plan_replay rp = {0};
    file_out steps = {0};
    if ((rc = plan_debug(p, &env.srv, &rp, &steps))) {
        /* said */
    } else if (p->replicas_for > 0) {
        rc = plan_replicas(p, &env.srv);
    } else {
        rc = p->find_max_rate ? plan_capacity(p, &env.srv) : plan_single(p, &env.srv);
    }
    tps_err e = {{0}};
    if (steps.f && file_out_close(&steps, &e)) { /* every row checked: the path and why */
        fprintf(stderr, "tps plan: --steps: %s\n", e.msg);
        rc = 1;
    }
    plan_replay_free(&rp);
    plan_env_close(&env);
    return rc;
}

int cli_plan(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "calibrate")) return plan_calibrate_cmd(argc - 1, argv + 1);
    plan_cli *p = malloc(sizeof *p);
    if (!p) return 1;
    int rc = plan_parse(p, argc, argv);
    if (rc < 0) rc = plan_main(p);
    free(p);
    return rc;
}
