/* `tps bench` and `tps bench merge`: argument parsing and wiring only. The
 * client, workloads, metrics and printing live in src/bench. */
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/capacity.h"
#include "bench/report.h"
#include "bench/result.h"
#include "cli/cli.h"
#include "cli/opt.h"

#define STR_(x) #x
#define STR(x)  STR_(x)

/* Everything `tps bench` parses: the table's rows point into this. */
typedef struct bench_cli {
    bench_config cfg;
    workload_opts wo;
    result_opts ro;
    const char *json_out, *csv_out, *prefix_dist;
    const char *header_buf[64];
    opt_list headers;
    double max_err;
    uint64_t prompts, conversations;
    bool quiet, progress, out_len_given, prefixes_given, think_given;
    bool find_max_rate;
    double goodput_target;
} bench_cli;

/* ---- custom values ---------------------------------------------------------------------- */

static int num(const char *s, double *out, double lo) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || v < lo) return -1;
    *out = v;
    return 0;
}

/* "5", "5s", "2.5s" -> seconds; "20r", "20req" -> requests. */
static int trim_arg(const char *s, double *sec, uint64_t *reqs, char *why, size_t cap) {
    char buf[64];
    snprintf(buf, sizeof buf, "%s", s);
    size_t n = strlen(buf);
    bool r = false;
    if (n > 3 && !strcmp(buf + n - 3, "req"))
        buf[n -= 3] = 0, r = true;
    else if (n > 1 && buf[n - 1] == 'r')
        buf[--n] = 0, r = true;
    else if (n > 1 && buf[n - 1] == 's')
        buf[--n] = 0;
    double v;
    if (num(buf, &v, 0) || (r && v != floor(v))) {
        snprintf(why, cap, "expected seconds (5, 5s) or requests (20r)");
        return -1;
    }
    if (r)
        *reqs = (uint64_t)v;
    else
        *sec = v;
    return 0;
}

static int warmup_arg(void *dst, const char *v, char *why, size_t cap) {
    result_opts *ro = dst;
    return trim_arg(v, &ro->warmup_s, &ro->warmup_reqs, why, cap);
}

static int cooldown_arg(void *dst, const char *v, char *why, size_t cap) {
    result_opts *ro = dst;
    return trim_arg(v, &ro->cooldown_s, &ro->cooldown_reqs, why, cap);
}

static int window_arg(void *dst, const char *v, char *why, size_t cap) {
    result_opts *ro = dst;
    char buf[64];
    snprintf(buf, sizeof buf, "%s", v);
    char *c = strchr(buf, ':');
    if (!c) return snprintf(why, cap, "expected A:B seconds"), -1;
    *c = 0;
    if (num(buf, &ro->user_t0_s, 0) || num(c + 1, &ro->user_t1_s, 0) ||
        ro->user_t1_s <= ro->user_t0_s)
        return snprintf(why, cap, "expected A:B seconds with A < B"), -1;
    ro->has_user = true;
    return 0;
}

static int slo_arg(void *dst, const char *v, char *why, size_t cap) {
    tl_slo *slo = dst;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        double ms;
        uint64_t *ns = NULL;
        if (eq && !num(eq + 1, &ms, 0) && ms > 0) {
            *eq = 0;
            /* the capacity search's names: a p99 limit is the same per-request
             * limit, checked also on the probe's p99 (itl: per request, TPOT) */
            ns = !strcmp(tok, "ttft") || !strcmp(tok, "ttft_p99")  ? &slo->ttft_ns
                 : !strcmp(tok, "tpot") || !strcmp(tok, "itl_p99") ? &slo->tpot_ns
                 : !strcmp(tok, "e2e") || !strcmp(tok, "e2e_p99")  ? &slo->e2e_ns
                                                                   : NULL;
        }
        if (!ns)
            return snprintf(why, cap,
                            "expected ttft=MS,tpot=MS,e2e=MS (or ttft_p99=, itl_p99=, e2e_p99=; "
                            "any subset, > 0)"),
                   -1;
        *ns = (uint64_t)llround(ms * 1e6);
    }
    return 0;
}

/* N, uniform:A:B or normal:MU:SD, by the bench library's parser. */
static int dist_arg(void *dst, const char *v, char *why, size_t cap) {
    tps_err e = {{0}};
    if (!load_dist_parse(dst, v, &e)) return 0;
    snprintf(why, cap, "%s", e.msg);
    return -1;
}

static int prefix_dist_arg(void *dst, const char *v, char *why, size_t cap) {
    bench_cli *b = dst;
    tps_err e = {{0}};
    if (workload_prefix_dist_parse(v, &b->wo.prefix_zipf, &e))
        return snprintf(why, cap, "expected round-robin or zipf:S with S > 0"), -1;
    b->prefix_dist = v;
    return 0;
}

static int header_check(void *dst, const char *v, char *why, size_t cap) {
    if (strchr(v, ':')) return 0;
    return snprintf(why, cap, "expected 'Name: value'"), -1;
}

/* ---- the table -------------------------------------------------------------------------- */

#define B(field) offsetof(bench_cli, field)

static const opt_row bench_rows[] = {
    OPT_HEAD("target"),
    {"--url", .kind = OPT_STR, .off = B(cfg.base_url), .metavar = "URL",
     .def = "http://127.0.0.1:8080", .help = "server base URL"},
    {"--endpoint", .kind = OPT_CHOICE, .off = B(cfg.endpoint), .metavar = "KIND",
     .choices = (const opt_choice[]){{"completions", BENCH_EP_COMPLETIONS},
                                     {"chat", BENCH_EP_CHAT},
                                     {NULL, 0}},
     .def = "completions", .help = "completions or chat"},
    {"--model", .kind = OPT_STR, .off = B(wo.model), .metavar = "NAME",
     .help = "\"model\" field sent (default: none)"},
    {"--api-key", .kind = OPT_STR, .off = B(cfg.api_key), .metavar = "KEY",
     .help = "Authorization: Bearer KEY (default $OPENAI_API_KEY)"},
    {"--header", .kind = OPT_LIST, .off = B(headers), .parse = header_check,
     .metavar = "'Name: value'", .help = "extra request header (repeatable)"},
    {"--insecure", .kind = OPT_FLAG, .off = B(cfg.insecure),
     .help = "HTTPS without certificate checks"},
    OPT_HEAD("load (every run is bounded: give --requests and/or --duration)"),
    {"--concurrency", .kind = OPT_U32, .off = B(cfg.concurrency), .min = 1, .max = 100000,
     .help = "closed loop: N requests in flight (default 1);\n"
             "with --rate: the most in flight (default 1000)"},
    {"--rate", .kind = OPT_NUM, .off = B(cfg.rate), .max = INFINITY, .flags = OPT_ABOVE_MIN,
     .metavar = "R",
     .help = "open loop: R requests/s on a schedule; TTFT/E2E count\nfrom the scheduled time"},
    {"--arrival", .kind = OPT_CHOICE, .off = B(cfg.arrival), .metavar = "KIND",
     .choices = (const opt_choice[]){{"poisson", LOAD_ARRIVAL_POISSON},
                                     {"constant", LOAD_ARRIVAL_CONSTANT},
                                     {"gamma", LOAD_ARRIVAL_GAMMA},
                                     {NULL, 0}},
     .def = "poisson", .help = "poisson, constant or gamma"},
    {"--burstiness", .kind = OPT_NUM, .off = B(cfg.burstiness), .max = INFINITY,
     .flags = OPT_ABOVE_MIN, .metavar = "B", .help = "gamma shape (1 = poisson, <1 burstier)"},
    {"--requests", .kind = OPT_U64, .off = B(cfg.requests), .min = 1, .max = 1e18,
     .help = "send N requests"},
    {"--duration", .kind = OPT_SECONDS, .off = B(cfg.duration_s), .max = INFINITY,
     .flags = OPT_ABOVE_MIN,
     .help = "stop sending after S seconds; in-flight requests\nfinish (at most --timeout more)"},
    {"--seed", .kind = OPT_U64, .off = B(cfg.seed), .max = 18446744073709551615.0, .def = "1",
     .help = "arrivals and prompts"},
    OPT_HEAD("workload"),
    {"--input-len", .kind = OPT_CUSTOM, .off = B(wo.input_len), .parse = dist_arg, .metavar = "D",
     .def = "128", .help = "prompt tokens: N, uniform:A:B or normal:MU:SD"},
    {"--output-len", .kind = OPT_CUSTOM, .off = B(wo.output_len), .parse = dist_arg,
     .seen = OPT_SEEN(bench_cli, out_len_given), .metavar = "D", .def = "128",
     .help = "max_tokens, same forms"},
    {"--tokenizer", .kind = OPT_STR, .off = B(wo.tokenizer_path), .metavar = "MODEL.gguf",
     .help = "size prompts in this model's tokens (else the server's\n"
             "/tokenize, else approximate: one word per token)"},
    {"--dataset", .kind = OPT_STR, .off = B(wo.dataset), .metavar = "FILE",
     .help = "requests from a file, detected by content: JSONL of\n"
             "{\"prompt\"|\"messages\", \"max_tokens\"}, ShareGPT JSON, or a\n"
             "Mooncake trace (JSONL with timestamp, input_length,\n"
             "output_length, hash_ids), replayed at its timestamps"},
    {"--trace-speed", .kind = OPT_NUM, .off = B(wo.trace_speed), .max = 1e6, .flags = OPT_ABOVE_MIN,
     .metavar = "X", .def = "1", .help = "trace replay: send times are trace time / X"},
    {"--prompts", .kind = OPT_U64, .off = B(prompts), .min = 1, .max = 10000000,
     .help = "prompts to prepare when --requests is not given"},
    {"--ignore-eos", .kind = OPT_SET_INT, .off = B(wo.ignore_eos), .set = 1,
     .help = "send ignore_eos (default: synthetic yes, dataset no)"},
    {"--no-ignore-eos", .kind = OPT_SET_INT, .off = B(wo.ignore_eos), .set = 0,
     .help = "do not send ignore_eos"},
    {"--no-usage", .kind = OPT_FLAG_OFF, .off = B(wo.include_usage),
     .help = "do not ask for stream_options.include_usage"},
    {"--temperature", .kind = OPT_NUM, .off = B(wo.temperature), .max = INFINITY, .metavar = "T",
     .help = "send a temperature (default: none sent)"},
    OPT_HEAD("prefix cache workloads (synthetic)"),
    {"--prefix-len", .kind = OPT_U32, .off = B(wo.prefix_len), .min = 1, .max = 10000000,
     .metavar = "P",
     .help = "every prompt starts with one of --prefixes shared prefixes\n"
             "of P tokens, then its own --input-len tokens (chat: the\n"
             "prefix is the system message, the own part the user's)"},
    {"--prefixes", .kind = OPT_U32, .off = B(wo.n_prefixes), .min = 1, .max = 100000,
     .seen = OPT_SEEN(bench_cli, prefixes_given), .metavar = "K", .def = "1",
     .help = "how many shared prefixes"},
    {"--prefix-dist", .kind = OPT_CUSTOM, .off = 0, .parse = prefix_dist_arg, .metavar = "D",
     .def = "round-robin", .help = "round-robin or zipf:S (prefix k used ~1/k^S)"},
    {"--turns", .kind = OPT_U32, .off = B(wo.turns), .min = 1, .max = 10000, .metavar = "T",
     .help = "conversations of T turns: each turn sends the history\n"
             "(earlier messages and the server's actual replies) and a\n"
             "new user message of --input-len tokens, with the header\n"
             "X-Session-Id; requests = conversations x turns. Chat sends\n"
             "messages; completions one text, each reply appended"},
    {"--conversations", .kind = OPT_U64, .off = B(conversations), .min = 1, .max = 1000000,
     .help = "conversations, taking turns round robin with at most\n"
             "--concurrency in flight (default: the concurrency)"},
    {"--think-time", .kind = OPT_SECONDS, .off = B(cfg.think_time_s), .max = INFINITY,
     .seen = OPT_SEEN(bench_cli, think_given), .def = "0",
     .help = "seconds between a reply and the next turn"},
    OPT_HEAD("limits"),
    {"--timeout", .kind = OPT_SECONDS, .off = B(cfg.timeout_s), .max = INFINITY,
     .flags = OPT_ABOVE_MIN, .def = "300", .help = "per request, total"},
    {"--idle-timeout", .kind = OPT_SECONDS, .off = B(cfg.idle_timeout_s), .max = INFINITY,
     .flags = OPT_ABOVE_MIN, .def = "60", .help = "no byte for S seconds fails a request"},
    {"--connect-timeout", .kind = OPT_SECONDS, .off = B(cfg.connect_timeout_s), .max = INFINITY,
     .flags = OPT_ABOVE_MIN, .def = "10", .help = "connection set-up"},
    {"--max-error-rate", .kind = OPT_NUM, .off = B(max_err), .max = 1, .metavar = "F", .def = "0",
     .help = "exit 1 when failed/(completed+failed) > F"},
    OPT_HEAD("report"),
    {"--warmup", .kind = OPT_CUSTOM, .off = B(ro), .parse = warmup_arg, .metavar = "X",
     .help = "trim the steady window: X seconds (5, 5s) or\n"
             "requests (20r); default: automatic steady window"},
    {"--cooldown", .kind = OPT_CUSTOM, .off = B(ro), .parse = cooldown_arg, .metavar = "X",
     .help = "the same at the end of the run"},
    {"--window", .kind = OPT_CUSTOM, .off = B(ro), .parse = window_arg, .metavar = "A:B",
     .help = "also report the user window, seconds after the run's\nfirst send"},
    {"--slo", .kind = OPT_CUSTOM, .off = B(ro.slo), .parse = slo_arg,
     .metavar = "ttft=MS,tpot=MS,e2e=MS", .help = "goodput limits (any subset)"},
    {"--find-max-rate", .kind = OPT_FLAG, .off = B(find_max_rate),
     .help = "capacity search: the highest open-loop rate whose\n"
             "goodput fraction meets --goodput-target under --slo\n"
             "(bracket from --rate, default 1, then bisect; each probe\n"
             "runs --duration seconds; --json holds every probe)"},
    {"--goodput-target", .kind = OPT_NUM, .off = B(goodput_target), .max = 1,
     .flags = OPT_ABOVE_MIN, .metavar = "F", .def = "0.95",
     .help = "capacity search: share of requests that must meet --slo"},
    {"--bin", .kind = OPT_SECONDS, .off = B(ro.bin_s), .min = 0.001, .max = INFINITY, .def = "1 s",
     .help = "time-series bin"},
    {"--json", .kind = OPT_STR, .off = B(json_out), .metavar = "FILE",
     .help = "the result (schema tps.bench.result v" STR(BENCH_RESULT_VERSION) ")"},
    {"--per-request", .kind = OPT_FLAG, .off = B(ro.per_request),
     .help = "include every request, with each token's arrival"},
    {"--csv", .kind = OPT_STR, .off = B(csv_out), .metavar = "FILE",
     .help = "headline figures as one CSV row"},
    {"--quiet", .kind = OPT_FLAG, .off = B(quiet), .help = "no summary on stdout"},
    {"--no-progress", .kind = OPT_FLAG_OFF, .off = B(progress),
     .help = "no progress bar (drawn on stderr only when a tty)"},
    {"-v", .kind = OPT_SET_INT, .off = B(cfg.verbose), .set = 1,
     .help = "print each failed request on stderr"},
    {0},
};

static void glossary(FILE *out) {
    fputc('\n', out);
    report_print_glossary(out);
}

static const opt_cmd bench_cmd = {
    .prog = "tps bench",
    .usage = "usage: tps bench [options]                 drive an endpoint and report\n"
             "       tps bench merge A.json B.json ... [--json OUT] [--csv OUT]\n"
             "\n",
    .rows = bench_rows,
    .epilogue = glossary,
};

static void raise_fd_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* The prefix-cache workload flags that cannot go together, each with what
 * to do instead; prints the first and returns -1. */
static int check_workload_flags(const workload_opts *wo, const bench_config *cfg, bool prefix_opts,
                                bool turn_opts, uint64_t prompts) {
    const char *msg = NULL;
    if (wo->prefix_len && wo->dataset)
        msg = "--prefix-len with --dataset: shared prefixes are a synthetic workload; drop one";
    else if (prefix_opts && !wo->prefix_len)
        msg = "--prefixes and --prefix-dist need --prefix-len P (the prefix length in tokens)";
    else if (wo->turns && wo->dataset)
        msg = "--turns with --dataset: conversations are a synthetic workload; drop one";
    else if (turn_opts && !wo->turns)
        msg = "--conversations and --think-time need --turns T";
    else if (wo->turns && cfg->rate > 0)
        msg = "--turns with --rate: a conversation sends its next turn when its reply is in and "
              "its think time is over (a closed loop); drop --rate, use --concurrency and "
              "--think-time";
    else if (wo->turns && cfg->requests)
        msg = "--turns with --requests: a multi-turn run sends --conversations x --turns "
              "requests; give --conversations instead";
    else if (wo->turns && prompts)
        msg = "--turns with --prompts: the user messages are --conversations x --turns; drop "
              "--prompts";
    if (!msg) return 0;
    fprintf(stderr, "tps bench: %s\n", msg);
    return -1;
}

/* The workload shape, in the result's config, when it is not the plain one. */
static void config_workload_shape(json_t *jc, const workload_opts *wo, const bench_config *cfg,
                                  const char *prefix_dist, uint64_t conversations) {
    if (wo->prefix_len) {
        json_object_set_new(jc, "prefix_len", json_integer(wo->prefix_len));
        json_object_set_new(jc, "prefixes", json_integer(wo->n_prefixes));
        json_object_set_new(jc, "prefix_dist",
                            json_string(prefix_dist ? prefix_dist : "round-robin"));
    }
    if (wo->turns) {
        json_object_set_new(jc, "requests", json_integer((json_int_t)(conversations * wo->turns)));
        json_object_set_new(jc, "turns", json_integer(wo->turns));
        json_object_set_new(jc, "conversations", json_integer((json_int_t)conversations));
        json_object_set_new(jc, "think_time_s", json_real(cfg->think_time_s));
    }
}

/* ---- merge ------------------------------------------------------------------------------ */

typedef struct merge_cli {
    const char *json_out, *csv_out;
    const char *file_buf[256];
    opt_list files;
    bool quiet;
} merge_cli;

static const opt_row merge_rows[] = {
    {"--json", .kind = OPT_STR, .off = offsetof(merge_cli, json_out), .metavar = "FILE",
     .help = "the merged result"},
    {"--csv", .kind = OPT_STR, .off = offsetof(merge_cli, csv_out), .metavar = "FILE",
     .help = "headline figures as one CSV row"},
    {"--quiet", .kind = OPT_FLAG, .off = offsetof(merge_cli, quiet),
     .help = "no summary on stdout"},
    {.kind = OPT_REST, .off = offsetof(merge_cli, files)},
    {0},
};

static const opt_cmd merge_cmd = {
    .prog = "tps bench merge",
    .usage = "usage: tps bench merge A.json B.json ... [--json OUT] [--csv OUT]\n"
             "\n"
             "Merges bench results of one configuration (e.g. from several client machines)\n"
             "into one: counts add, histograms merge.\n"
             "\n",
    .rows = merge_rows,
};

static int bench_merge(int argc, char **argv) {
    merge_cli m = {0};
    m.files = OPT_LIST_OF(m.file_buf);
    int prc = opt_main(&merge_cmd, &m, argc, argv);
    if (prc >= 0) return prc;
    if (m.files.n < 1) {
        fprintf(stderr, "tps bench merge: give result files to merge\n");
        return 2;
    }
    tps_err e = {{0}};
    bench_result acc;
    if (result_read_json(&acc, m.files.v[0], &e)) {
        fprintf(stderr, "tps bench merge: %s\n", e.msg);
        return 1;
    }
    for (size_t i = 1; i < m.files.n; i++) {
        bench_result r;
        if (result_read_json(&r, m.files.v[i], &e) || result_merge(&acc, &r, &e)) {
            fprintf(stderr, "tps bench merge: %s: %s\n", m.files.v[i], e.msg);
            result_free(&acc);
            return 1;
        }
        result_free(&r);
    }
    int rc = 0;
    if (!m.quiet) report_print(stdout, &acc);
    if (m.json_out && result_write_json(&acc, m.json_out, &e)) rc = 1;
    if (m.csv_out) {
        FILE *fp = fopen(m.csv_out, "w");
        if (!fp || result_write_csv(&acc, fp, &e))
            rc = 1, snprintf(e.msg, sizeof e.msg, "cannot write '%s'", m.csv_out);
        if (fp) fclose(fp);
    }
    if (rc) fprintf(stderr, "tps bench merge: %s\n", e.msg);
    result_free(&acc);
    return rc;
}

/* ---- bench --------------------------------------------------------------------------------- */

/* Defaults, the table, and the checks across flags: 0 or an exit code (-1: go on). */
static int bench_parse(bench_cli *b, int argc, char **argv) {
    tps_err e = {{0}};
    *b = (bench_cli){.cfg = {.base_url = "http://127.0.0.1:8080",
                             .arrival = LOAD_ARRIVAL_POISSON,
                             .burstiness = 1.0,
                             .timeout_s = 300,
                             .idle_timeout_s = 60,
                             .connect_timeout_s = 10,
                             .seed = 1,
                             .keep_text = true},
                     .wo = {.ignore_eos = -1, .include_usage = true, .temperature = -1},
                     .progress = true};
    b->headers = OPT_LIST_OF(b->header_buf);
    load_dist_parse(&b->wo.input_len, "128", &e);
    load_dist_parse(&b->wo.output_len, "128", &e);
    int prc = opt_main(&bench_cmd, b, argc, argv);
    if (prc >= 0) return prc;
    if (check_workload_flags(&b->wo, &b->cfg, b->prefixes_given || b->prefix_dist,
                             b->think_given || b->conversations, b->prompts))
        return 2;
    if (b->find_max_rate && (!(b->cfg.duration_s > 0) || b->wo.turns || b->cfg.requests ||
                             !(b->ro.slo.ttft_ns || b->ro.slo.tpot_ns || b->ro.slo.e2e_ns))) {
        fprintf(stderr, "tps bench: --find-max-rate needs --slo (the limits), --duration S (each "
                        "probe's length), and neither --requests nor --turns\n");
        return 2;
    }
    if (!b->cfg.requests && !(b->cfg.duration_s > 0) && !b->wo.turns) {
        fprintf(stderr, "tps bench: give --requests N and/or --duration S (a run must end)\n");
        return 2;
    }
    if (!b->cfg.concurrency) b->cfg.concurrency = b->cfg.rate > 0 || b->find_max_rate ? 1000 : 1;
    if (b->wo.prefix_len && !b->wo.n_prefixes) b->wo.n_prefixes = 1;
    if (b->wo.turns && !b->conversations) b->conversations = b->cfg.concurrency;
    if (b->wo.turns && b->conversations * b->wo.turns > 10000000) {
        fprintf(stderr,
                "tps bench: --conversations %llu x --turns %u is over 10,000,000 requests; "
                "give fewer\n",
                (unsigned long long)b->conversations, b->wo.turns);
        return 2;
    }
    return -1;
}

/* The workload options that follow from the parsed flags. */
static void bench_prepare(bench_cli *b, char *tok_url, size_t tok_cap) {
    bench_config *cfg = &b->cfg;
    workload_opts *wo = &b->wo;
    if (!cfg->api_key) cfg->api_key = getenv("OPENAI_API_KEY");
    cfg->headers = b->headers.v;
    cfg->n_headers = b->headers.n;
    cfg->progress = b->progress && isatty(STDERR_FILENO);
    wo->seed = cfg->seed;
    wo->has_output_len = b->out_len_given;
    wo->endpoint = cfg->endpoint;
    if (wo->turns)
        wo->n_items = b->conversations * wo->turns; /* every user message, prepared now */
    else if (b->prompts)
        wo->n_items = b->prompts;
    else if (cfg->requests)
        wo->n_items = cfg->requests;
    else if (cfg->rate > 0)
        wo->n_items = (size_t)(cfg->rate * cfg->duration_s * 1.2) + cfg->concurrency;
    else
        wo->n_items = 2000;
    if (wo->n_items > 100000 && !b->prompts && !wo->turns) wo->n_items = 100000;
    snprintf(tok_url, tok_cap, "%s/tokenize", cfg->base_url);
    wo->tokenize_url = tok_url;
    wo->api_key = cfg->api_key;
}

/* The run's configuration as it goes into the result. */
static json_t *bench_config_json(const bench_cli *b, const workload *wl) {
    const bench_config *cfg = &b->cfg;
    const workload_opts *wo = &b->wo;
    char url[1200], inl[64], outl[64];
    snprintf(url, sizeof url, "%s%s", cfg->base_url, bench_endpoint_path(cfg->endpoint));
    load_dist_format(&wo->input_len, inl, sizeof inl);
    load_dist_format(&wo->output_len, outl, sizeof outl);
    json_t *jc =
        json_pack("{s:s, s:s, s:s?, s:i, s:f, s:s, s:f, s:I, s:f, s:I, s:f, s:f, s:s, s:s, "
                  "s:s, s:s?, s:b, s:b}",
                  "url", url, "endpoint", cfg->endpoint == BENCH_EP_CHAT ? "chat" : "completions",
                  "model", wo->model, "concurrency", (int)cfg->concurrency, "rate", cfg->rate,
                  "arrival", load_arrival_name(cfg->arrival), "burstiness", cfg->burstiness,
                  "requests", (json_int_t)cfg->requests, "duration_s", cfg->duration_s, "seed",
                  (json_int_t)cfg->seed, "timeout_s", cfg->timeout_s, "idle_timeout_s",
                  cfg->idle_timeout_s, "input_len", wo->dataset ? "dataset" : inl, "output_len",
                  outl, "input_source", wl->input_source, "dataset", wo->dataset, "ignore_eos",
                  wo->ignore_eos == 1 || (wo->ignore_eos == -1 && !wo->dataset), "include_usage",
                  wo->include_usage);
    config_workload_shape(jc, wo, cfg, b->prefix_dist, b->conversations);
    return jc;
}

static void print_probe(const capacity_probe *p, size_t i, void *arg) {
    (void)arg;
    capacity_print_probe(stdout, p, i);
    fflush(stdout);
}

/* --find-max-rate: the search, each probe printed as it ends, the answer,
 * and every probe in --json. The exit code. */
static int bench_capacity(bench_cli *b, const workload *wl, json_t *jc) {
    capacity_opts o = capacity_opts_default();
    o.slo = b->ro.slo;
    if (b->goodput_target > 0) o.goodput_target = b->goodput_target;
    if (b->cfg.rate > 0) o.start_rate = b->cfg.rate, o.min_rate = b->cfg.rate / 16;
    o.probe_s = b->cfg.duration_s;
    o.config = jc;
    capacity_result r;
    tps_err e = {{0}};
    capacity_print_header(stdout);
    if (capacity_search(&r, &o, &b->cfg, wl, print_probe, NULL, &e)) {
        fprintf(stderr, "tps bench: %s\n", e.msg);
        return 1;
    }
    capacity_print_answer(stdout, &r);
    int rc = 0;
    if (b->json_out && capacity_write_json(&r, &o, b->json_out, &e)) {
        fprintf(stderr, "tps bench: %s\n", e.msg);
        rc = 1;
    }
    capacity_result_free(&r);
    return rc;
}

/* The result: built, printed, written; the exit code. */
static int bench_report(bench_cli *b, const bench_run_out *run, json_t *jc) {
    result_opts *ro = &b->ro;
    const bench_config *cfg = &b->cfg;
    tps_err e = {{0}};
    ro->config = jc;
    ro->origin_ns = run->t_start_ns;
    ro->origin_unix_ns = run->t_start_unix_ns;
    ro->target_concurrency = cfg->rate > 0 ? 0 : cfg->concurrency;
    /* conversations that think never hold the full concurrency: steady from the first reply */
    if (b->wo.turns)
        ro->target_concurrency = cfg->think_time_s > 0                 ? 0
                                 : b->conversations < cfg->concurrency ? (uint32_t)b->conversations
                                                                       : cfg->concurrency;
    ro->client_cpu_s = run->client_cpu_s;
    ro->bytes = run->bytes_received;
    ro->events = run->events_received;
    bench_result res;
    if (result_build(&res, run->recs, run->n, ro, &e)) {
        fprintf(stderr, "tps bench: %s\n", e.msg);
        return 1;
    }
    int rc = 0;
    if (!b->quiet) report_print(stdout, &res);
    if (b->json_out && result_write_json(&res, b->json_out, &e)) {
        fprintf(stderr, "tps bench: %s\n", e.msg);
        rc = 1;
    }
    if (b->csv_out) {
        FILE *fp = fopen(b->csv_out, "w");
        if (!fp || result_write_csv(&res, fp, &e)) {
            fprintf(stderr, "tps bench: cannot write '%s'\n", b->csv_out);
            rc = 1;
        }
        if (fp) fclose(fp);
    }
    double er = result_error_rate(&res);
    if (er > b->max_err) {
        fprintf(stderr,
                "tps bench: error rate %.2f%% (%llu of %llu) is above --max-error-rate %.2f%%\n",
                100 * er, (unsigned long long)res.failed,
                (unsigned long long)(res.completed + res.failed), 100 * b->max_err);
        rc = 1;
    }
    if (res.completed == 0 && rc == 0) rc = 1;
    result_free(&res);
    return rc;
}

int cli_bench(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "merge")) return bench_merge(argc - 1, argv + 1);
    bench_cli *b = malloc(sizeof *b);
    if (!b) return 1;
    int rc = bench_parse(b, argc, argv);
    if (rc >= 0) goto out;
    char tok_url[1024];
    bench_prepare(b, tok_url, sizeof tok_url);
    raise_fd_limit();
    tps_err e = {{0}};
    workload wl;
    rc = 1;
    if (workload_build(&wl, &b->wo, &e)) {
        fprintf(stderr, "tps bench: %s\n", e.msg);
        goto out;
    }
    if (!wl.exact_inputs && !b->wo.dataset)
        fprintf(stderr,
                "tps bench: note: prompt lengths are %s (give --tokenizer MODEL.gguf for "
                "exact model tokens); the server's usage is reported as input tokens\n",
                !strcmp(wl.input_source, "approximate (words)") ? "approximate" : "not all exact");
    if (wl.note[0]) fprintf(stderr, "tps bench: note: %s\n", wl.note);
    if (b->find_max_rate) {
        json_t *jc = bench_config_json(b, &wl);
        rc = bench_capacity(b, &wl, jc);
        json_decref(jc);
        workload_free(&wl);
        goto out;
    }
    bench_run_out run;
    if (bench_run(&run, &b->cfg, &wl, &e)) {
        fprintf(stderr, "tps bench: %s\n", e.msg);
        workload_free(&wl);
        goto out;
    }
    json_t *jc = bench_config_json(b, &wl);
    rc = bench_report(b, &run, jc);
    json_decref(jc);
    bench_run_free(&run);
    workload_free(&wl);
out:
    free(b);
    return rc;
}
