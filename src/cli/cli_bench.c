/* `tps bench` and `tps bench merge`: argument parsing and wiring only. The
 * client, workloads, metrics and printing live in src/bench. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/report.h"
#include "bench/result.h"
#include "cli/cli.h"

static void usage(FILE *out) {
    fprintf(
        out,
        "usage: tps bench [options]                 drive an endpoint and report\n"
        "       tps bench merge A.json B.json ... [--json OUT] [--csv OUT]\n"
        "\n"
        "target\n"
        "  --url URL               server base URL (default http://127.0.0.1:8080)\n"
        "  --endpoint KIND         completions (default) or chat\n"
        "  --model NAME            \"model\" field sent (default: none)\n"
        "  --api-key KEY           Authorization: Bearer KEY (default $OPENAI_API_KEY)\n"
        "  --header 'Name: value'  extra request header (repeatable)\n"
        "  --insecure              HTTPS without certificate checks\n"
        "load (every run is bounded: give --requests and/or --duration)\n"
        "  --concurrency N         closed loop: N requests in flight (default 1);\n"
        "                          with --rate: the most in flight (default 1000)\n"
        "  --rate R                open loop: R requests/s on a schedule; TTFT/E2E count\n"
        "                          from the scheduled time\n"
        "  --arrival KIND          poisson (default), constant or gamma\n"
        "  --burstiness B          gamma shape (1 = poisson, <1 burstier)\n"
        "  --requests N            send N requests\n"
        "  --duration S            stop sending after S seconds; in-flight requests\n"
        "                          finish (at most --timeout more)\n"
        "  --seed N                arrivals and prompts (default 1)\n"
        "workload\n"
        "  --input-len D           prompt tokens: N, uniform:A:B or normal:MU:SD (default 128)\n"
        "  --output-len D          max_tokens, same forms (default 128)\n"
        "  --tokenizer MODEL.gguf  size prompts in this model's tokens (else the server's\n"
        "                          /tokenize, else approximate: one word per token)\n"
        "  --dataset FILE.jsonl    {\"prompt\"|\"messages\", \"max_tokens\"} per line instead\n"
        "  --prompts N             prompts to prepare when --requests is not given\n"
        "  --ignore-eos / --no-ignore-eos   send ignore_eos (default: synthetic yes)\n"
        "  --no-usage              do not ask for stream_options.include_usage\n"
        "  --temperature T         send a temperature (default: none sent)\n"
        "prefix cache workloads (synthetic)\n"
        "  --prefix-len P          every prompt starts with one of --prefixes shared prefixes\n"
        "                          of P tokens, then its own --input-len tokens (chat: the\n"
        "                          prefix is the system message, the own part the user's)\n"
        "  --prefixes K            how many shared prefixes (default 1)\n"
        "  --prefix-dist D         round-robin (default) or zipf:S (prefix k used ~1/k^S)\n"
        "  --turns T               conversations of T turns: each turn sends the history\n"
        "                          (earlier messages and the server's actual replies) and a\n"
        "                          new user message of --input-len tokens, with the header\n"
        "                          X-Session-Id; requests = conversations x turns. Chat sends\n"
        "                          messages; completions one text, each reply appended\n"
        "  --conversations N       conversations, taking turns round robin with at most\n"
        "                          --concurrency in flight (default: the concurrency)\n"
        "  --think-time S          seconds between a reply and the next turn (default 0)\n"
        "limits\n"
        "  --timeout S             per request, total (default 300)\n"
        "  --idle-timeout S        no byte for S seconds fails a request (default 60)\n"
        "  --connect-timeout S     (default 10)\n"
        "  --max-error-rate F      exit 1 when failed/(completed+failed) > F (default 0)\n"
        "report\n"
        "  --warmup X / --cooldown X   trim the steady window: X seconds (5, 5s) or\n"
        "                          requests (20r); default: automatic steady window\n"
        "  --window A:B            also report the user window, seconds after the run's\n"
        "                          first send\n"
        "  --slo ttft=MS,tpot=MS,e2e=MS   goodput limits (any subset)\n"
        "  --bin S                 time-series bin (default 1 s)\n"
        "  --json FILE             the result (schema tps.bench.result v%d)\n"
        "  --per-request           include every request, with each token's arrival\n"
        "  --csv FILE              headline figures as one CSV row\n"
        "  --quiet                 no summary on stdout\n"
        "  --no-progress           no progress bar (drawn on stderr only when a tty)\n"
        "  -v                      print each failed request on stderr\n"
        "\n",
        BENCH_RESULT_VERSION);
    report_print_glossary(out);
}

/* ---- small parsers -------------------------------------------------------------------- */

static int num(const char *s, double *out, double lo) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || v < lo) return -1;
    *out = v;
    return 0;
}

/* "5", "5s", "2.5s" -> seconds; "20r", "20req" -> requests. */
static int trim_arg(const char *s, double *sec, uint64_t *reqs) {
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
    if (num(buf, &v, 0)) return -1;
    if (r) {
        if (v != floor(v)) return -1;
        *reqs = (uint64_t)v;
    } else {
        *sec = v;
    }
    return 0;
}

static int parse_slo(const char *s, tl_slo *slo) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        double ms;
        if (!eq || num(eq + 1, &ms, 0) || ms == 0) return -1;
        *eq = 0;
        uint64_t ns = (uint64_t)llround(ms * 1e6);
        if (!strcmp(tok, "ttft"))
            slo->ttft_ns = ns;
        else if (!strcmp(tok, "tpot"))
            slo->tpot_ns = ns;
        else if (!strcmp(tok, "e2e"))
            slo->e2e_ns = ns;
        else
            return -1;
    }
    return 0;
}

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

static int bench_merge(int argc, char **argv) {
    const char *json_out = NULL, *csv_out = NULL;
    const char *files[256];
    int nf = 0;
    bool quiet = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json_out = argv[++i];
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc)
            csv_out = argv[++i];
        else if (!strcmp(argv[i], "--quiet"))
            quiet = true;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "tps bench merge: unknown option '%s'\n", argv[i]);
            return 2;
        } else if (nf < 256)
            files[nf++] = argv[i];
    }
    if (nf < 1) {
        fprintf(stderr, "tps bench merge: give result files to merge\n");
        return 2;
    }
    tps_err e = {{0}};
    bench_result acc;
    if (result_read_json(&acc, files[0], &e)) {
        fprintf(stderr, "tps bench merge: %s\n", e.msg);
        return 1;
    }
    for (int i = 1; i < nf; i++) {
        bench_result r;
        if (result_read_json(&r, files[i], &e) || result_merge(&acc, &r, &e)) {
            fprintf(stderr, "tps bench merge: %s: %s\n", files[i], e.msg);
            result_free(&acc);
            return 1;
        }
        result_free(&r);
    }
    int rc = 0;
    if (!quiet) report_print(stdout, &acc);
    if (json_out && result_write_json(&acc, json_out, &e)) rc = 1;
    if (csv_out) {
        FILE *fp = fopen(csv_out, "w");
        if (!fp || result_write_csv(&acc, fp, &e))
            rc = 1, snprintf(e.msg, sizeof e.msg, "cannot write '%s'", csv_out);
        if (fp) fclose(fp);
    }
    if (rc) fprintf(stderr, "tps bench merge: %s\n", e.msg);
    result_free(&acc);
    return rc;
}

/* ---- bench --------------------------------------------------------------------------------- */

int cli_bench(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "merge")) return bench_merge(argc - 1, argv + 1);

    bench_config cfg = {.base_url = "http://127.0.0.1:8080",
                        .concurrency = 0,
                        .arrival = LOAD_ARRIVAL_POISSON,
                        .burstiness = 1.0,
                        .timeout_s = 300,
                        .idle_timeout_s = 60,
                        .connect_timeout_s = 10,
                        .seed = 1,
                        .keep_text = true};
    workload_opts wo = {.ignore_eos = -1, .include_usage = true, .temperature = -1, .seed = 1};
    result_opts ro = {0};
    const char *in_len = "128", *out_len = "128", *json_out = NULL, *csv_out = NULL;
    const char *headers[64];
    size_t n_headers = 0;
    double max_err = 0, d;
    uint64_t prompts = 0, conversations = 0;
    bool quiet = false, progress = true, out_len_given = false;
    const char *prefix_dist = NULL;
    bool prefixes_given = false, think_given = false;
    tps_err e = {{0}};

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEEDV()                                                                                    \
    do {                                                                                           \
        if (!v) {                                                                                  \
            fprintf(stderr, "tps bench: %s needs a value\n", a);                                   \
            return 2;                                                                              \
        }                                                                                          \
        i++;                                                                                       \
    } while (0)
#define BAD(what)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "tps bench: %s '%s': %s\n", a, v, what);                                   \
        return 2;                                                                                  \
    } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--url")) {
            NEEDV();
            cfg.base_url = v;
        } else if (!strcmp(a, "--endpoint")) {
            NEEDV();
            if (!strcmp(v, "completions"))
                cfg.endpoint = BENCH_EP_COMPLETIONS;
            else if (!strcmp(v, "chat"))
                cfg.endpoint = BENCH_EP_CHAT;
            else
                BAD("expected completions or chat");
        } else if (!strcmp(a, "--model")) {
            NEEDV();
            wo.model = v;
        } else if (!strcmp(a, "--api-key")) {
            NEEDV();
            cfg.api_key = v;
        } else if (!strcmp(a, "--header")) {
            NEEDV();
            if (!strchr(v, ':')) BAD("expected 'Name: value'");
            if (n_headers < 64) headers[n_headers++] = v;
        } else if (!strcmp(a, "--insecure"))
            cfg.insecure = true;
        else if (!strcmp(a, "--concurrency")) {
            NEEDV();
            if (num(v, &d, 1) || d != floor(d) || d > 100000) BAD("expected an integer 1..100000");
            cfg.concurrency = (uint32_t)d;
        } else if (!strcmp(a, "--rate")) {
            NEEDV();
            if (num(v, &d, 0) || d <= 0) BAD("expected requests per second > 0");
            cfg.rate = d;
        } else if (!strcmp(a, "--arrival")) {
            NEEDV();
            if (load_arrival_parse(&cfg.arrival, v, &e)) BAD("expected poisson, constant or gamma");
        } else if (!strcmp(a, "--burstiness")) {
            NEEDV();
            if (num(v, &d, 0) || d <= 0) BAD("expected a number > 0");
            cfg.burstiness = d;
        } else if (!strcmp(a, "--requests")) {
            NEEDV();
            if (num(v, &d, 1) || d != floor(d)) BAD("expected an integer >= 1");
            cfg.requests = (uint64_t)d;
        } else if (!strcmp(a, "--duration")) {
            NEEDV();
            if (num(v, &d, 0) || d <= 0) BAD("expected seconds > 0");
            cfg.duration_s = d;
        } else if (!strcmp(a, "--seed")) {
            NEEDV();
            if (num(v, &d, 0) || d != floor(d)) BAD("expected an integer >= 0");
            cfg.seed = wo.seed = (uint64_t)d;
        } else if (!strcmp(a, "--input-len")) {
            NEEDV();
            in_len = v;
        } else if (!strcmp(a, "--output-len")) {
            NEEDV();
            out_len = v, out_len_given = true;
        } else if (!strcmp(a, "--tokenizer")) {
            NEEDV();
            wo.tokenizer_path = v;
        } else if (!strcmp(a, "--dataset")) {
            NEEDV();
            wo.dataset = v;
        } else if (!strcmp(a, "--prompts")) {
            NEEDV();
            if (num(v, &d, 1) || d != floor(d) || d > 10000000) BAD("expected an integer >= 1");
            prompts = (uint64_t)d;
        } else if (!strcmp(a, "--prefix-len")) {
            NEEDV();
            if (num(v, &d, 1) || d != floor(d) || d > 10000000)
                BAD("expected tokens, an integer >= 1");
            wo.prefix_len = (uint32_t)d;
        } else if (!strcmp(a, "--prefixes")) {
            NEEDV();
            if (num(v, &d, 1) || d != floor(d) || d > 100000) BAD("expected an integer 1..100000");
            wo.n_prefixes = (uint32_t)d;
            prefixes_given = true;
        } else if (!strcmp(a, "--prefix-dist")) {
            NEEDV();
            if (workload_prefix_dist_parse(v, &wo.prefix_zipf, &e))
                BAD("expected round-robin or zipf:S with S > 0");
            prefix_dist = v;
        } else if (!strcmp(a, "--turns")) {
            NEEDV();
            if (num(v, &d, 1) || d != floor(d) || d > 10000) BAD("expected an integer 1..10000");
            wo.turns = (uint32_t)d;
        } else if (!strcmp(a, "--conversations")) {
            NEEDV();
            if (num(v, &d, 1) || d != floor(d) || d > 1000000)
                BAD("expected an integer 1..1000000");
            conversations = (uint64_t)d;
        } else if (!strcmp(a, "--think-time")) {
            NEEDV();
            if (num(v, &cfg.think_time_s, 0)) BAD("expected seconds >= 0");
            think_given = true;
        } else if (!strcmp(a, "--ignore-eos"))
            wo.ignore_eos = 1;
        else if (!strcmp(a, "--no-ignore-eos"))
            wo.ignore_eos = 0;
        else if (!strcmp(a, "--no-usage"))
            wo.include_usage = false;
        else if (!strcmp(a, "--temperature")) {
            NEEDV();
            if (num(v, &wo.temperature, 0)) BAD("expected a number >= 0");
        } else if (!strcmp(a, "--timeout")) {
            NEEDV();
            if (num(v, &cfg.timeout_s, 0) || cfg.timeout_s <= 0) BAD("expected seconds > 0");
        } else if (!strcmp(a, "--idle-timeout")) {
            NEEDV();
            if (num(v, &cfg.idle_timeout_s, 0) || cfg.idle_timeout_s <= 0)
                BAD("expected seconds > 0");
        } else if (!strcmp(a, "--connect-timeout")) {
            NEEDV();
            if (num(v, &cfg.connect_timeout_s, 0) || cfg.connect_timeout_s <= 0)
                BAD("expected seconds > 0");
        } else if (!strcmp(a, "--max-error-rate")) {
            NEEDV();
            if (num(v, &max_err, 0) || max_err > 1) BAD("expected a fraction 0..1");
        } else if (!strcmp(a, "--warmup")) {
            NEEDV();
            if (trim_arg(v, &ro.warmup_s, &ro.warmup_reqs))
                BAD("expected seconds (5, 5s) or requests (20r)");
        } else if (!strcmp(a, "--cooldown")) {
            NEEDV();
            if (trim_arg(v, &ro.cooldown_s, &ro.cooldown_reqs))
                BAD("expected seconds (5, 5s) or requests (20r)");
        } else if (!strcmp(a, "--window")) {
            NEEDV();
            char buf[64];
            snprintf(buf, sizeof buf, "%s", v);
            char *c = strchr(buf, ':');
            if (!c) BAD("expected A:B seconds");
            *c = 0;
            if (num(buf, &ro.user_t0_s, 0) || num(c + 1, &ro.user_t1_s, 0) ||
                ro.user_t1_s <= ro.user_t0_s)
                BAD("expected A:B seconds with A < B");
            ro.has_user = true;
        } else if (!strcmp(a, "--slo")) {
            NEEDV();
            if (parse_slo(v, &ro.slo)) BAD("expected ttft=MS,tpot=MS,e2e=MS (any subset, > 0)");
        } else if (!strcmp(a, "--bin")) {
            NEEDV();
            if (num(v, &ro.bin_s, 0) || ro.bin_s < 0.001) BAD("expected seconds >= 0.001");
        } else if (!strcmp(a, "--json")) {
            NEEDV();
            json_out = v;
        } else if (!strcmp(a, "--per-request"))
            ro.per_request = true;
        else if (!strcmp(a, "--csv")) {
            NEEDV();
            csv_out = v;
        } else if (!strcmp(a, "--quiet"))
            quiet = true;
        else if (!strcmp(a, "--no-progress"))
            progress = false;
        else if (!strcmp(a, "-v"))
            cfg.verbose = 1;
        else {
            fprintf(stderr, "tps bench: unknown option '%s' (see tps bench --help)\n", a);
            return 2;
        }
#undef NEEDV
#undef BAD
    }
    if (check_workload_flags(&wo, &cfg, prefixes_given || prefix_dist, think_given || conversations,
                             prompts))
        return 2;
    if (!cfg.requests && !(cfg.duration_s > 0) && !wo.turns) {
        fprintf(stderr, "tps bench: give --requests N and/or --duration S (a run must end)\n");
        return 2;
    }
    if (!cfg.concurrency) cfg.concurrency = cfg.rate > 0 ? 1000 : 1;
    if (wo.prefix_len && !wo.n_prefixes) wo.n_prefixes = 1;
    if (wo.turns && !conversations) conversations = cfg.concurrency;
    if (wo.turns && conversations * wo.turns > 10000000) {
        fprintf(stderr,
                "tps bench: --conversations %llu x --turns %u is over 10,000,000 requests; "
                "give fewer\n",
                (unsigned long long)conversations, wo.turns);
        return 2;
    }
    if (!cfg.api_key) cfg.api_key = getenv("OPENAI_API_KEY");
    cfg.headers = headers;
    cfg.n_headers = n_headers;
    cfg.progress = progress && isatty(STDERR_FILENO);
    if (load_dist_parse(&wo.input_len, in_len, &e) ||
        load_dist_parse(&wo.output_len, out_len, &e)) {
        fprintf(stderr, "tps bench: %s\n", e.msg);
        return 2;
    }
    wo.has_output_len = out_len_given;
    wo.endpoint = cfg.endpoint;
    if (wo.turns)
        wo.n_items = conversations * wo.turns; /* every user message, prepared now */
    else if (prompts)
        wo.n_items = prompts;
    else if (cfg.requests)
        wo.n_items = cfg.requests;
    else if (cfg.rate > 0)
        wo.n_items = (size_t)(cfg.rate * cfg.duration_s * 1.2) + cfg.concurrency;
    else
        wo.n_items = 2000;
    if (wo.n_items > 100000 && !prompts && !wo.turns) wo.n_items = 100000;
    char tok_url[1024];
    snprintf(tok_url, sizeof tok_url, "%s/tokenize", cfg.base_url);
    wo.tokenize_url = tok_url;
    wo.api_key = cfg.api_key;
    raise_fd_limit();

    workload wl;
    if (workload_build(&wl, &wo, &e)) {
        fprintf(stderr, "tps bench: %s\n", e.msg);
        return 1;
    }
    if (!wl.exact_inputs && !wo.dataset)
        fprintf(stderr,
                "tps bench: note: prompt lengths are %s (give --tokenizer MODEL.gguf for "
                "exact model tokens); the server's usage is reported as input tokens\n",
                !strcmp(wl.input_source, "approximate (words)") ? "approximate" : "not all exact");

    bench_run_out run;
    if (bench_run(&run, &cfg, &wl, &e)) {
        fprintf(stderr, "tps bench: %s\n", e.msg);
        workload_free(&wl);
        return 1;
    }

    char url[1200];
    snprintf(url, sizeof url, "%s%s", cfg.base_url, bench_endpoint_path(cfg.endpoint));
    char inl[64], outl[64];
    load_dist_format(&wo.input_len, inl, sizeof inl);
    load_dist_format(&wo.output_len, outl, sizeof outl);
    json_t *jc =
        json_pack("{s:s, s:s, s:s?, s:i, s:f, s:s, s:f, s:I, s:f, s:I, s:f, s:f, s:s, s:s, "
                  "s:s, s:s?, s:b, s:b}",
                  "url", url, "endpoint", cfg.endpoint == BENCH_EP_CHAT ? "chat" : "completions",
                  "model", wo.model, "concurrency", (int)cfg.concurrency, "rate", cfg.rate,
                  "arrival", load_arrival_name(cfg.arrival), "burstiness", cfg.burstiness,
                  "requests", (json_int_t)cfg.requests, "duration_s", cfg.duration_s, "seed",
                  (json_int_t)cfg.seed, "timeout_s", cfg.timeout_s, "idle_timeout_s",
                  cfg.idle_timeout_s, "input_len", wo.dataset ? "dataset" : inl, "output_len", outl,
                  "input_source", wl.input_source, "dataset", wo.dataset, "ignore_eos",
                  wo.ignore_eos == 1 || (wo.ignore_eos == -1 && !wo.dataset), "include_usage",
                  wo.include_usage);
    config_workload_shape(jc, &wo, &cfg, prefix_dist, conversations);
    ro.config = jc;
    ro.origin_ns = run.t_start_ns;
    ro.origin_unix_ns = run.t_start_unix_ns;
    ro.target_concurrency = cfg.rate > 0 ? 0 : cfg.concurrency;
    /* conversations that think never hold the full concurrency: steady from the first reply */
    if (wo.turns)
        ro.target_concurrency = cfg.think_time_s > 0              ? 0
                                : conversations < cfg.concurrency ? (uint32_t)conversations
                                                                  : cfg.concurrency;
    ro.client_cpu_s = run.client_cpu_s;
    ro.bytes = run.bytes_received;
    ro.events = run.events_received;
    bench_result res;
    int rc = 0;
    if (result_build(&res, run.recs, run.n, &ro, &e)) {
        fprintf(stderr, "tps bench: %s\n", e.msg);
        rc = 1;
    } else {
        if (!quiet) report_print(stdout, &res);
        if (json_out && result_write_json(&res, json_out, &e)) {
            fprintf(stderr, "tps bench: %s\n", e.msg);
            rc = 1;
        }
        if (csv_out) {
            FILE *fp = fopen(csv_out, "w");
            if (!fp || result_write_csv(&res, fp, &e)) {
                fprintf(stderr, "tps bench: cannot write '%s'\n", csv_out);
                rc = 1;
            }
            if (fp) fclose(fp);
        }
        double er = result_error_rate(&res);
        if (er > max_err) {
            fprintf(
                stderr,
                "tps bench: error rate %.2f%% (%llu of %llu) is above --max-error-rate %.2f%%\n",
                100 * er, (unsigned long long)res.failed,
                (unsigned long long)(res.completed + res.failed), 100 * max_err);
            rc = 1;
        }
        if (res.completed == 0 && rc == 0) rc = 1;
        result_free(&res);
    }
    json_decref(jc);
    bench_run_free(&run);
    workload_free(&wl);
    return rc;
}
