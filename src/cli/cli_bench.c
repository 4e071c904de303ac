/* `tps bench` and `tps bench merge`: argument parsing and wiring only. The
 * option table parses into a bench_spec (src/bench/experiment/bench_spec.h), which the
 * library runs; tps sweep parses its bench options with the same table
 * (cli_bench_parse_spec). The client, workloads, metrics and printing live
 * in src/bench. */
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench/client/bench.h"
#include "bench/experiment/bench_spec.h"
#include "bench/experiment/capacity.h"
#include "bench/result/compare.h"
#include "bench/report/report.h"
#include "bench/result/result.h"
#include "bench/result/verdict.h"
#include "bench/io/json_file.h"
#include "cli/cli.h"
#include "cli/cli_rows.h"
#include "cli/opt.h"

#define STR_(x) #x
#define STR(x)  STR_(x)

/* Everything `tps bench` parses: the table's rows point into this. The run
 * itself is spec (bench_spec.h); the rest is what the command does with it. */
typedef struct bench_cli {
    bench_spec spec;
    const char *json_out;
    result_out_opts out;
    opt_list headers; /* into spec.headers */
    bool progress;
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
    return opt_err_why(load_dist_parse(dst, v, &e), &e, why, cap);
}

static int prefix_dist_arg(void *dst, const char *v, char *why, size_t cap) {
    bench_spec *s = dst;
    tps_err e = {{0}};
    if (workload_prefix_dist_parse(v, &s->wo.prefix_zipf, &e))
        return snprintf(why, cap, "expected round-robin or zipf:S with S > 0"), -1;
    s->prefix_dist = v;
    return 0;
}

static int header_check(void *dst, const char *v, char *why, size_t cap) {
    if (strchr(v, ':')) return 0;
    return snprintf(why, cap, "expected 'Name: value'"), -1;
}

/* ---- the table -------------------------------------------------------------------------- */

#define S(field) offsetof(bench_spec, field)

/* --csv and --quiet (cli_rows.h): offsets into a result_out_opts. */
const opt_row result_out_rows[] = {
    {"--csv", .kind = OPT_STR, .off = offsetof(result_out_opts, csv_out), .metavar = "FILE",
     .help = "headline figures as one CSV row"},
    {"--quiet", .kind = OPT_FLAG, .off = offsetof(result_out_opts, quiet),
     .help = "no summary on stdout"},
    {0},
};

/* Rows tps plan shares (cli_rows.h): offsets into a bench_spec. */
const opt_row bench_endpoint_rows[] = {
    {"--endpoint", .kind = OPT_CHOICE, .off = S(cfg.endpoint), .metavar = "KIND",
     .choices = (const opt_choice[]){{"completions", BENCH_EP_COMPLETIONS},
                                     {"chat", BENCH_EP_CHAT},
                                     {"responses", BENCH_EP_RESPONSES},
                                     {"messages", BENCH_EP_MESSAGES},
                                     {"embeddings", BENCH_EP_EMBEDDINGS},
                                     {NULL, 0}},
     .def = "completions",
     .help = "completions, chat (/v1/chat/completions), responses\n"
             "(OpenAI's /v1/responses), messages (Anthropic's /v1/messages)\n"
             "or embeddings (/v1/embeddings: input tokens/s, not streamed)"},
    {0},
};

const opt_row bench_load_rows[] = {
    {"--concurrency", .kind = OPT_U32, .off = S(cfg.concurrency), .min = 1, .max = 100000,
     .help = "closed loop: N requests in flight (default 1);\n"
             "with --rate: the most in flight (default 1000)"},
    {"--rate", .kind = OPT_NUM, .off = S(cfg.rate), .max = INFINITY, .flags = OPT_ABOVE_MIN,
     .metavar = "R",
     .help = "open loop: R requests/s on a schedule; TTFT/E2E count\nfrom the scheduled time"},
    {"--arrival", .kind = OPT_CHOICE, .off = S(cfg.arrival), .metavar = "KIND",
     .choices = (const opt_choice[]){{"poisson", LOAD_ARRIVAL_POISSON},
                                     {"constant", LOAD_ARRIVAL_CONSTANT},
                                     {"gamma", LOAD_ARRIVAL_GAMMA},
                                     {NULL, 0}},
     .def = "poisson", .help = "poisson, constant or gamma"},
    {"--burstiness", .kind = OPT_NUM, .off = S(cfg.burstiness), .max = INFINITY,
     .flags = OPT_ABOVE_MIN, .metavar = "B", .help = "gamma shape (1 = poisson, <1 burstier)"},
    {"--requests", .kind = OPT_U64, .off = S(cfg.requests), .min = 1, .max = 1e18,
     .help = "send N requests"},
    {"--duration", .kind = OPT_SECONDS, .off = S(cfg.duration_s), .max = INFINITY,
     .flags = OPT_ABOVE_MIN,
     .help = "stop sending after S seconds; in-flight requests\nfinish (at most --timeout more)"},
    {"--seed", .kind = OPT_U64, .off = S(cfg.seed), .max = 281474976710655.0,
     .seen = OPT_SEEN(bench_spec, seed_given),
     .help = "arrivals and prompts: give a run's config.seed to repeat\n"
             "it (default: a new one each run, so no run sends\n"
             "another's prompts)"},
    {0},
};

const opt_row bench_workload_rows[] = {
    {"--input-len", .kind = OPT_CUSTOM, .off = S(wo.input_len), .parse = dist_arg, .metavar = "D",
     .def = "128", .help = "prompt tokens: N, uniform:A:B or normal:MU:SD"},
    {"--output-len", .kind = OPT_CUSTOM, .off = S(wo.output_len), .parse = dist_arg,
     .seen = OPT_SEEN(bench_spec, wo.has_output_len), .metavar = "D", .def = "128",
     .help = "max_tokens, same forms"},
    {"--dataset", .kind = OPT_STR, .off = S(wo.dataset), .metavar = "FILE",
     .help = "requests from a file, detected by content: JSONL of\n"
             "{\"prompt\"|\"messages\", \"max_tokens\"}, ShareGPT JSON, or a\n"
             "Mooncake trace (JSONL with timestamp, input_length,\n"
             "output_length, hash_ids), replayed at its timestamps;\n"
             "without --requests/--duration: each entry once"},
    {"--trace-speed", .kind = OPT_NUM, .off = S(wo.trace_speed), .max = 1e6, .flags = OPT_ABOVE_MIN,
     .metavar = "X", .def = "1", .help = "trace replay: send times are trace time / X"},
    {"--prompts", .kind = OPT_U64, .off = S(prompts), .min = 1, .max = 10000000,
     .help = "prompts to prepare when --requests is not given"},
    {0},
};

const opt_row bench_shape_rows[] = {
    OPT_HEAD("prefix cache workloads (synthetic)"),
    {"--prefix-len", .kind = OPT_U32, .off = S(wo.prefix_len), .min = 1, .max = 10000000,
     .metavar = "P",
     .help = "every prompt starts with one of --prefixes shared prefixes\n"
             "of P tokens, then its own --input-len tokens (chat: the\n"
             "prefix is the system message, the own part the user's)"},
    {"--prefixes", .kind = OPT_U32, .off = S(wo.n_prefixes), .min = 1, .max = 100000,
     .seen = OPT_SEEN(bench_spec, given_prefixes), .metavar = "K", .def = "1",
     .help = "how many shared prefixes"},
    {"--prefix-dist", .kind = OPT_CUSTOM, .off = 0, .parse = prefix_dist_arg, .metavar = "D",
     .def = "round-robin", .help = "round-robin or zipf:S (prefix k used ~1/k^S)"},
    {"--turns", .kind = OPT_U32, .off = S(wo.turns), .min = 1, .max = 10000, .metavar = "T",
     .help = "conversations of T turns: each turn sends the history\n"
             "(earlier messages and the server's actual replies) and a\n"
             "new user message of --input-len tokens, with the header\n"
             "X-Session-Id; requests = conversations x turns. Chat sends\n"
             "messages; completions one text, each reply appended.\n"
             "With a ShareGPT --dataset: its conversations, turn k\n"
             "sending its first k human messages"},
    {"--conversations", .kind = OPT_U64, .off = S(conversations), .min = 1, .max = 1000000,
     .help = "conversations, taking turns round robin with at most\n"
             "--concurrency in flight (default: the concurrency)"},
    {"--think-time", .kind = OPT_SECONDS, .off = S(cfg.think_time_s), .max = INFINITY,
     .seen = OPT_SEEN(bench_spec, given_think), .def = "0",
     .help = "seconds between a reply and the next turn"},
    {0},
};

const opt_row bench_limit_rows[] = {
    {"--timeout", .kind = OPT_SECONDS, .off = S(cfg.timeout_s), .max = INFINITY,
     .flags = OPT_ABOVE_MIN, .def = "300", .help = "per request, total"},
    {"--idle-timeout", .kind = OPT_SECONDS, .off = S(cfg.idle_timeout_s), .max = INFINITY,
     .flags = OPT_ABOVE_MIN, .def = "60", .help = "no byte for S seconds fails a request"},
    {0},
};

const opt_row bench_report_rows[] = {
    {"--warmup", .kind = OPT_CUSTOM, .off = S(ro), .parse = warmup_arg, .metavar = "X",
     .help = "warm-up: X seconds (5, 5s) or requests (20r); the\n"
             "steady window starts after it, and requests sent\n"
             "during it enter no latency distribution (TTFT, ITL,\n"
             "TPOT, E2E...); default: automatic steady window, all\n"
             "requests in the distributions"},
    {"--cooldown", .kind = OPT_CUSTOM, .off = S(ro), .parse = cooldown_arg, .metavar = "X",
     .help = "the same at the end of the run"},
    {"--window", .kind = OPT_CUSTOM, .off = S(ro), .parse = window_arg, .metavar = "A:B",
     .help = "also report the user window, seconds after the run's\nfirst send"},
    {"--slo", .kind = OPT_CUSTOM, .off = S(ro.slo), .parse = slo_arg,
     .metavar = "ttft=MS,tpot=MS,e2e=MS", .help = "goodput limits (any subset)"},
    {"--bin", .kind = OPT_SECONDS, .off = S(ro.bin_s), .min = 0.001, .max = INFINITY, .def = "1 s",
     .help = "time-series bin"},
    {"--per-request", .kind = OPT_FLAG, .off = S(ro.per_request),
     .help = "include every request, with each token's arrival"},
    {0},
};

#define B(field) offsetof(bench_cli, field)

static const opt_row bench_rows[] = {
    OPT_HEAD("target"),
    {"--url", .kind = OPT_STR, .off = B(spec.cfg.base_url), .metavar = "URL",
     .def = "http://127.0.0.1:8080", .help = "server base URL"},
    OPT_ROWS_AT(bench_endpoint_rows, B(spec)),
    {"--model", .kind = OPT_STR, .off = B(spec.wo.model), .metavar = "NAME",
     .help = "\"model\" field sent (default: none)"},
    {"--api-key", .kind = OPT_STR, .off = B(spec.cfg.api_key), .metavar = "KEY",
     .help = "Authorization: Bearer KEY; with --endpoint messages\n"
             "x-api-key: KEY (default $OPENAI_API_KEY, or\n"
             "$ANTHROPIC_API_KEY for messages)"},
    {"--header", .kind = OPT_LIST, .off = B(headers), .parse = header_check,
     .metavar = "'Name: value'", .help = "extra request header (repeatable)"},
    {"--insecure", .kind = OPT_FLAG, .off = B(spec.cfg.insecure),
     .help = "HTTPS without certificate checks"},
    OPT_HEAD("load (every run is bounded: give --requests and/or --duration)"),
    OPT_ROWS_AT(bench_load_rows, B(spec)),
    {"--client-threads", .kind = OPT_U32, .off = B(spec.cfg.client_threads), .min = 1, .max = 256,
     .metavar = "N",
     .help = "event loops (threads) sharing the connections; default:\n"
             "one per 64 in flight, at most the usable cores (1 with\n"
             "--turns); the summary's client line shows their CPU"},
    OPT_HEAD("workload"),
    OPT_ROWS_AT(bench_workload_rows, B(spec)),
    {"--tokenizer", .kind = OPT_STR, .off = B(spec.wo.tokenizer_path), .metavar = "PATH",
     .help = "size prompts in the model's tokens: a GGUF, a Hugging Face\n"
             "tokenizer.json, or its folder (with tokenizer_config.json:\n"
             "BOS, chat template); chat prompts are sized after the\n"
             "template. Else the server's /tokenize (llama.cpp, vLLM,\n"
             "SGLang), else approximate: one word per token"},
    {"--ignore-eos", .kind = OPT_SET_INT, .off = B(spec.wo.ignore_eos), .set = 1,
     .help = "send ignore_eos (default: synthetic yes, dataset no)"},
    {"--no-ignore-eos", .kind = OPT_SET_INT, .off = B(spec.wo.ignore_eos), .set = 0,
     .help = "do not send ignore_eos"},
    {"--no-usage", .kind = OPT_FLAG_OFF, .off = B(spec.wo.include_usage),
     .help = "do not ask for stream_options.include_usage"},
    {"--no-stream", .kind = OPT_FLAG, .off = B(spec.cfg.no_stream),
     .help = "ask for whole responses (\"stream\": false): E2E and\n"
             "output tokens/s only; TTFT and ITL cannot be seen"},
    {"--batch-size", .kind = OPT_U32, .off = B(spec.wo.batch_size), .min = 1, .max = 100000,
     .metavar = "N", .help = "embeddings: texts per request (default 1)"},
    {"--temperature", .kind = OPT_NUM, .off = B(spec.wo.temperature), .max = INFINITY,
     .metavar = "T", .help = "send a temperature (default: none sent)"},
    {"--extra-body", .kind = OPT_STR, .off = B(spec.wo.extra_body), .metavar = "JSON",
     .help = "other fields every request body also carries, e.g.\n"
             "'{\"return_tokens\":true}'; fields the bench writes itself\n"
             "(prompt, max_tokens, stream, model, temperature...) are refused"},
    OPT_ROWS_AT(bench_shape_rows, B(spec)),
    OPT_HEAD("limits"),
    OPT_ROWS_AT(bench_limit_rows, B(spec)),
    {"--connect-timeout", .kind = OPT_SECONDS, .off = B(spec.cfg.connect_timeout_s),
     .max = INFINITY, .flags = OPT_ABOVE_MIN, .def = "10", .help = "connection set-up"},
    {"--max-error-rate", .kind = OPT_NUM, .off = B(spec.max_error_rate), .max = 1, .metavar = "F",
     .def = "0", .help = "exit 1 when failed/(completed+failed) > F"},
    OPT_HEAD("report"),
    OPT_ROWS_AT(bench_report_rows, B(spec)),
    {"--find-max-rate", .kind = OPT_FLAG, .off = B(find_max_rate),
     .help = "capacity search: the highest open-loop rate whose\n"
             "goodput fraction meets --goodput-target under --slo\n"
             "(bracket from --rate, default 1, then bisect; each probe\n"
             "runs --duration seconds; --json holds every probe)"},
    {"--goodput-target", .kind = OPT_NUM, .off = B(goodput_target), .max = 1,
     .flags = OPT_ABOVE_MIN, .metavar = "F", .def = "0.95",
     .help = "capacity search: share of requests that must meet --slo"},
    {"--scrape", .kind = OPT_STR, .off = B(spec.scrape), .metavar = "URL|off",
     .help = "sample this Prometheus endpoint during the run (every\n"
             "second, or --bin if shorter): gauges and counter rates\n"
             "named tps:/tps_, vllm:, llamacpp:, sglang:, shown beside\n"
             "the client's curve and kept in --json; default: the\n"
             "target's /metrics when it answers; off: none"},
    {"--json", .kind = OPT_STR, .off = B(json_out), .metavar = "FILE",
     .help = "the result (schema tps.bench.result v" STR(BENCH_RESULT_VERSION) ")"},
    OPT_ROWS_AT(result_out_rows, B(out)),
    {"--no-progress", .kind = OPT_FLAG_OFF, .off = B(progress),
     .help = "no progress bar (drawn on stderr only when a tty)"},
    {"-v", .kind = OPT_SET_INT, .off = B(spec.cfg.verbose), .set = 1,
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
             "       tps bench compare A.json B.json [--json OUT]\n"
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

/* ---- merge ------------------------------------------------------------------------------ */

/* The results at paths[0..n) into r[0..n): 0, or 1 with the failure said
 * on stderr under prog and nothing left to free. */
static int read_results(const char *prog, const char *const *paths, size_t n, bench_result *r) {
    tps_err e = {{0}};
    for (size_t i = 0; i < n; i++)
        if (result_read_json(&r[i], paths[i], &e)) {
            fprintf(stderr, "%s: %s\n", prog, e.msg);
            while (i--)
                result_free(&r[i]);
            return 1;
        }
    return 0;
}

typedef struct merge_cli {
    const char *json_out;
    result_out_opts out;
    const char *file_buf[256];
    opt_list files;
} merge_cli;

static const opt_row merge_rows[] = {
    {"--json", .kind = OPT_STR, .off = offsetof(merge_cli, json_out), .metavar = "FILE",
     .help = "the merged result"},
    OPT_ROWS_AT(result_out_rows, offsetof(merge_cli, out)),
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
    bench_result acc;
    if (read_results(merge_cmd.prog, m.files.v, 1, &acc)) return 1;
    tps_err e = {{0}};
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
    if (!m.out.quiet) report_print(stdout, &acc);
    if (m.json_out && result_write_json(&acc, m.json_out, &e)) rc = 1;
    if (m.out.csv_out && result_write_csv_file(&acc, m.out.csv_out, &e)) rc = 1;
    if (rc) fprintf(stderr, "tps bench merge: %s\n", e.msg);
    result_free(&acc);
    return rc;
}

/* ---- compare ---------------------------------------------------------------------------- */

typedef struct compare_cli {
    const char *json_out;
    const char *file_buf[4];
    opt_list files;
} compare_cli;

static const opt_row compare_rows[] = {
    {"--json", .kind = OPT_STR, .off = offsetof(compare_cli, json_out), .metavar = "FILE",
     .help = "the comparison (schema tps.bench.compare)"},
    {.kind = OPT_REST, .off = offsetof(compare_cli, files)},
    {0},
};

static const opt_cmd compare_cmd = {
    .prog = "tps bench compare",
    .usage = "usage: tps bench compare A.json B.json [--json OUT]\n"
             "\n"
             "The headline figures of two results side by side, the ratio B/A and its 95%\n"
             "interval from the run-to-run noise: a bootstrap over the requests when both\n"
             "results were written with --per-request, else the histograms' bounds (the\n"
             "output says which). A difference whose interval excludes 1 is reported as\n"
             "better or worse; otherwise it is within the noise.\n"
             "\n",
    .rows = compare_rows,
};

static int bench_compare(int argc, char **argv) {
    compare_cli c = {0};
    c.files = OPT_LIST_OF(c.file_buf);
    int prc = opt_main(&compare_cmd, &c, argc, argv);
    if (prc >= 0) return prc;
    if (c.files.n != 2) {
        fprintf(stderr, "tps bench compare: give two result files, A and B (got %zu)\n", c.files.n);
        return 2;
    }
    bench_result ab[2];
    if (read_results(compare_cmd.prog, c.files.v, 2, ab)) return 1;
    tps_err e = {{0}};
    compare_out out;
    int rc = compare_results(&out, &ab[0], &ab[1], &e) ? 1 : 0;
    if (!rc) {
        compare_print(stdout, &out, c.files.v[0], c.files.v[1]);
        if (c.json_out) {
            json_t *j = compare_json(&out, c.files.v[0], c.files.v[1]);
            if (json_file_write(j, c.json_out, JSON_INDENT(1), &e)) rc = 1; /* the path and why */
            json_decref(j);
        }
    }
    if (rc) fprintf(stderr, "tps bench compare: %s\n", e.msg);
    result_free(&ab[0]);
    result_free(&ab[1]);
    return rc;
}

/* ---- bench --------------------------------------------------------------------------------- */

/* Defaults, the table, and the checks across flags: 0 or an exit code (-1: go on). */
static int bench_parse(bench_cli *b, int argc, char **argv) {
    *b = (bench_cli){.progress = true};
    bench_spec *s = &b->spec;
    bench_spec_init(s);
    b->headers = OPT_LIST_OF(s->headers);
    int prc = opt_main(&bench_cmd, b, argc, argv);
    if (prc >= 0) return prc;
    s->n_headers = b->headers.n;
    tps_err e = {{0}};
    const bench_ask ask = {.find_max_rate = b->find_max_rate,
                           .goodput_target = b->goodput_target > 0};
    if (bench_spec_check(s, &ask, &e)) { /* every rule across flags: the library's */
        fprintf(stderr, "tps bench: %s\n", e.msg);
        return 2;
    }
    if (!s->cfg.api_key && s->cfg.endpoint == BENCH_EP_MESSAGES)
        s->cfg.api_key = getenv("ANTHROPIC_API_KEY");
    if (!s->cfg.api_key) s->cfg.api_key = getenv("OPENAI_API_KEY");
    s->cfg.progress = b->progress && isatty(STDERR_FILENO);
    return -1;
}

int cli_bench_parse_spec(bench_spec *out, int argc, char **argv) {
    bench_cli *b = malloc(sizeof *b);
    if (!b) return 1;
    int rc = bench_parse(b, argc, argv);
    if (rc < 0 && (b->find_max_rate || b->json_out || b->out.csv_out)) {
        fprintf(stderr, "tps bench: %s is for a run of its own, not one given to tps sweep\n",
                b->find_max_rate ? "--find-max-rate"
                : b->json_out    ? "--json"
                                 : "--csv");
        rc = 2;
    }
    if (rc < 0) {
        *out = b->spec;
        rc = 0;
    } else if (rc == 0) { /* --help was printed: not a spec */
        rc = 2;
    }
    free(b);
    return rc;
}

static void print_probe(const capacity_probe *p, size_t i, void *arg) {
    (void)arg;
    capacity_print_probe(stdout, p, i);
    fflush(stdout);
}

/* Probe k of a search: the spec at the probe's rate and duration, with seed
 * base + k, so no probe sends the prompts of another (capacity_opts.prepare). */
typedef struct probe_spec {
    const bench_spec *s;
    uint64_t seed; /* the search's: its first probe's */
} probe_spec;

static int prepare_probe(workload *wl, bench_config *cfg, size_t k, double rate, double dur,
                         void *arg, tps_err *e) {
    const probe_spec *ps = arg;
    bench_spec s = *ps->s;
    s.cfg.rate = rate;
    s.cfg.duration_s = dur;
    s.cfg.requests = 0;
    s.cfg.seed = ps->seed + k;
    s.seed_given = true;
    /* the probe's sends (Poisson: 1.2x the mean and 16 covers > 3 sigma), not
     * bench's rate x duration + in-flight cap: sized again every probe */
    if (!s.prompts) s.prompts = (uint64_t)(rate * dur * 1.2) + 16;
    return bench_spec_prepare(wl, cfg, &s, NULL, "tps bench", e);
}

/* --find-max-rate: the search, each probe printed as it ends, the answer,
 * and every probe in --json. The exit code. */
static int bench_capacity(const bench_cli *b) {
    const bench_spec *s = &b->spec;
    tps_err e = {{0}};
    workload wl;
    bench_config cfg;
    bench_spec one = *s; /* the options checked and the notes said once, on one prompt */
    one.prompts = 1;
    if (bench_spec_prepare(&wl, &cfg, &one, stderr, "tps bench", &e)) {
        fprintf(stderr, "tps bench: %s\n", e.msg);
        return 1;
    }
    probe_spec ps = {.s = s, .seed = cfg.seed};
    json_t *jc = bench_spec_config_json(s, &cfg, &wl);
    capacity_opts o = capacity_opts_default();
    o.slo = s->ro.slo;
    if (b->goodput_target > 0) o.goodput_target = b->goodput_target;
    if (cfg.rate > 0) o.start_rate = cfg.rate, o.min_rate = cfg.rate / 16;
    o.probe_s = cfg.duration_s;
    o.config = jc;
    o.prepare = prepare_probe;
    o.prepare_arg = &ps;
    capacity_result r;
    int rc = 0;
    capacity_print_header(stdout);
    if (capacity_search(&r, &o, &cfg, &wl, print_probe, NULL, &e)) {
        fprintf(stderr, "tps bench: %s\n", e.msg);
        rc = 1;
    } else {
        capacity_print_answer(stdout, &r);
        if (b->json_out && capacity_write_json(&r, &o, b->json_out, &e)) {
            fprintf(stderr, "tps bench: %s\n", e.msg);
            rc = 1;
        }
        capacity_result_free(&r);
    }
    json_decref(jc);
    workload_free(&wl);
    return rc;
}

/* One run: the result built, printed, written; the exit code. */
static int bench_single(const bench_cli *b) {
    tps_err e = {{0}};
    bench_result res;
    if (bench_spec_run(&res, &b->spec, stderr, "tps bench", &e)) {
        fprintf(stderr, "tps bench: %s\n", e.msg);
        return 1;
    }
    verdict v; /* judged once: the summary, the JSON and the exit code read it */
    verdict_judge_run(&v, &res, b->spec.max_error_rate);
    int rc = 0;
    if (!b->out.quiet) report_print_judged(stdout, &res, &v);
    if (b->json_out && result_write_json_judged(&res, &v, b->json_out, &e)) {
        fprintf(stderr, "tps bench: %s\n", e.msg);
        rc = 1;
    }
    if (b->out.csv_out && result_write_csv_file(&res, b->out.csv_out, &e)) {
        fprintf(stderr, "tps bench: %s\n", e.msg);
        rc = 1;
    }
    if (v.outcome == VERDICT_ERRORS) fprintf(stderr, "tps bench: %s\n", v.why);
    result_free(&res);
    return v.outcome == VERDICT_PASSED ? rc : 1;
}

int cli_bench(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "merge")) return bench_merge(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "compare")) return bench_compare(argc - 1, argv + 1);
    bench_cli *b = malloc(sizeof *b);
    if (!b) return 1;
    int rc = bench_parse(b, argc, argv);
    if (rc < 0) {
        raise_fd_limit();
        rc = b->find_max_rate ? bench_capacity(b) : bench_single(b);
    }
    free(b);
    return rc;
}
