/* A bench run from a spec (bench_spec.h): the defaults and the values that
 * follow from several fields, the workload, the client, the result. Prints
 * nothing but the notes the caller asks for. */
#include "bench/experiment/bench_spec.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "base/rng.h"
#include "bench/result/scrape.h"

void bench_spec_init(bench_spec *s) {
    tps_err e = {{0}};
    *s = (bench_spec){.cfg = {.base_url = "http://127.0.0.1:8080",
                              .arrival = LOAD_ARRIVAL_POISSON,
                              .burstiness = 1.0,
                              .timeout_s = 300,
                              .idle_timeout_s = 60,
                              .connect_timeout_s = 10,
                              .keep_text = true},
                      .wo = {.ignore_eos = -1, .include_usage = true, .temperature = -1}};
    load_dist_parse(&s->wo.input_len, "128", &e);
    load_dist_parse(&s->wo.output_len, "128", &e);
}

uint64_t bench_spec_fresh_seed(void) {
    uint64_t x = 0;
    if (getrandom(&x, sizeof x, GRND_NONBLOCK) != (ssize_t)sizeof x) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        x = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ (uint64_t)getpid() << 20;
        x = tps_splitmix64(&x);
    }
    x &= (1ull << 48) - 1;
    return x ? x : 1;
}

/* How the run reaches the endpoint, for its one-shot requests (/tokenize,
 * /metrics) as for its streams. */
static http_auth auth_of(const bench_config *cfg) {
    return (http_auth){.api_key = cfg->api_key,
                       .x_api_key = cfg->endpoint == BENCH_EP_MESSAGES,
                       .headers = cfg->headers,
                       .n_headers = cfg->n_headers,
                       .insecure = cfg->insecure};
}

/* bench_spec_prepare on a spec bench_spec_check has passed. */
static int prepare_checked(workload *wl, bench_config *cfg, const bench_spec *s, FILE *log,
                           const char *prog, tps_err *e) {
    memset(wl, 0, sizeof *wl);
    *cfg = s->cfg;
    if (!s->seed_given) cfg->seed = bench_spec_fresh_seed();
    cfg->concurrency = bench_spec_concurrency(s);
    cfg->headers = s->headers;
    cfg->n_headers = s->n_headers;
    workload_opts wo = s->wo;
    wo.seed = cfg->seed;
    wo.endpoint = cfg->endpoint;
    wo.no_stream = cfg->no_stream;
    if (cfg->endpoint == BENCH_EP_EMBEDDINGS) cfg->no_stream = true; /* one JSON body */
    if (wo.prefix_len && !wo.n_prefixes) wo.n_prefixes = 1;
    const bool turns = workload_kind_turns(s->kind);
    if (turns)
        wo.n_items = bench_spec_conversations(s) * wo.turns; /* every user message, prepared now */
    else if (s->prompts)
        wo.n_items = s->prompts;
    else if (cfg->requests)
        wo.n_items = cfg->requests;
    else if (cfg->rate > 0)
        wo.n_items = (size_t)(cfg->rate * cfg->duration_s * 1.2) + cfg->concurrency;
    else
        wo.n_items = 2000;
    if (wo.n_items > 100000 && !s->prompts && !turns) wo.n_items = 100000;
    if (cfg->endpoint == BENCH_EP_EMBEDDINGS && wo.batch_size > 1 && !wo.dataset)
        wo.n_items *= wo.batch_size; /* the texts of every request */
    char tok_url[1100];
    snprintf(tok_url, sizeof tok_url, "%s/tokenize", cfg->base_url);
    wo.tokenize_url = tok_url; /* used while building only */
    wo.auth = auth_of(cfg);
    int rc = workload_build(wl, &wo, e);
    if (rc) return rc;
    if (log && !wl->exact_inputs && !wo.dataset)
        fprintf(log,
                "%s: note: prompt lengths are %s (give --tokenizer MODEL.gguf for exact model "
                "tokens); the server's usage is reported as input tokens\n",
                prog,
                !strcmp(wl->input_source, "approximate (words)") ? "approximate" : "not all exact");
    if (log && wl->note[0]) fprintf(log, "%s: note: %s\n", prog, wl->note);
    if (s->kind == WL_KIND_DATASET && !cfg->requests && !(cfg->duration_s > 0))
        cfg->requests = wl->n; /* one pass: each entry once (a trace replays its own times) */
    return TPS_OK;
}

int bench_spec_prepare(workload *wl, bench_config *cfg, const bench_spec *s, FILE *log,
                       const char *prog, tps_err *e) {
    memset(wl, 0, sizeof *wl);
    bench_spec checked = *s; /* the kind named from the fields as they are now */
    int rc = bench_spec_check(&checked, NULL, e);
    return rc ? rc : prepare_checked(wl, cfg, &checked, log, prog, e);
}

/* The workload's kind and shape, in the result's config (the shape when it
 * is not the plain one). */
static void config_workload_shape(json_t *jc, const bench_spec *s, const bench_config *cfg) {
    const workload_opts *wo = &s->wo;
    json_object_set_new(jc, "workload", json_string(workload_kind_name(s->kind)));
    /* the result reads these to leave out what a whole response cannot show */
    if (cfg->no_stream) json_object_set_new(jc, "stream", json_false());
    if (cfg->endpoint == BENCH_EP_EMBEDDINGS)
        json_object_set_new(jc, "batch_size", json_integer(wo->batch_size ? wo->batch_size : 1));
    if (wo->prefix_len) {
        json_object_set_new(jc, "prefix_len", json_integer(wo->prefix_len));
        json_object_set_new(jc, "prefixes", json_integer(wo->n_prefixes ? wo->n_prefixes : 1));
        json_object_set_new(jc, "prefix_dist",
                            json_string(s->prefix_dist ? s->prefix_dist : "round-robin"));
    }
    if (workload_kind_turns(s->kind)) {
        uint64_t conv = bench_spec_conversations(s);
        json_object_set_new(jc, "requests", json_integer((json_int_t)(conv * wo->turns)));
        json_object_set_new(jc, "turns", json_integer(wo->turns));
        json_object_set_new(jc, "conversations", json_integer((json_int_t)conv));
        json_object_set_new(jc, "think_time_s", json_real(cfg->think_time_s));
    }
}

json_t *bench_spec_config_json(const bench_spec *s, const bench_config *cfg, const workload *wl) {
    const workload_opts *wo = &s->wo;
    char url[1200], inl[64], outl[64];
    snprintf(url, sizeof url, "%s%s", cfg->base_url, bench_endpoint_path(cfg->endpoint));
    load_dist_format(&wo->input_len, inl, sizeof inl);
    load_dist_format(&wo->output_len, outl, sizeof outl);
    json_t *jc =
        json_pack("{s:s, s:s, s:s?, s:i, s:f, s:s, s:f, s:I, s:f, s:I, s:f, s:f, s:s, s:s, "
                  "s:s, s:s?, s:b, s:b}",
                  "url", url, "endpoint", bench_endpoint_name(cfg->endpoint), "model", wo->model,
                  "concurrency", (int)cfg->concurrency, "rate", cfg->rate, "arrival",
                  load_arrival_name(cfg->arrival), "burstiness", cfg->burstiness, "requests",
                  (json_int_t)cfg->requests, "duration_s", cfg->duration_s, "seed",
                  (json_int_t)cfg->seed, "timeout_s", cfg->timeout_s, "idle_timeout_s",
                  cfg->idle_timeout_s, "input_len", wo->dataset ? "dataset" : inl, "output_len",
                  outl, "input_source", wl->input_source, "dataset", wo->dataset, "ignore_eos",
                  wo->ignore_eos == 1 || (wo->ignore_eos == -1 && !wo->dataset), "include_usage",
                  wo->include_usage);
    if (jc && wo->extra_body) {
        json_t *x = json_loads(wo->extra_body, 0, NULL);
        if (x) json_object_set_new(jc, "extra_body", x);
    }
    if (jc) config_workload_shape(jc, s, cfg);
    if (jc && s->config_extra) json_object_update(jc, s->config_extra);
    return jc;
}

/* The endpoint to scrape: --scrape URL (which must answer), or the target's
 * /metrics when it answers, or none (*url = ""). */
static int scrape_url(char *url, size_t cap, const bench_spec *s, const bench_config *cfg,
                      FILE *log, const char *prog, tps_err *e) {
    url[0] = 0;
    if (s->run || (s->scrape && !strcmp(s->scrape, "off"))) return TPS_OK;
    if (s->scrape) {
        snprintf(url, cap, "%s", s->scrape);
        const http_auth a = auth_of(cfg);
        int rc = scrape_probe(url, &a, e);
        if (rc) {
            char m[sizeof e->msg];
            snprintf(m, sizeof m, "%s", e->msg);
            tps_fail(e, rc, "--scrape: %s", m);
        }
        return rc;
    }
    size_t n = strlen(cfg->base_url);
    while (n && cfg->base_url[n - 1] == '/')
        n--;
    if (n >= 3 && !strncmp(cfg->base_url + n - 3, "/v1", 3)) n -= 3;
    snprintf(url, cap, "%.*s/metrics", (int)n, cfg->base_url);
    tps_err pe = {{0}};
    const http_auth a = auth_of(cfg);
    if (scrape_probe(url, &a, &pe)) {
        if (log) fprintf(log, "%s: note: no server metrics scraped (%s)\n", prog, pe.msg);
        url[0] = 0;
    }
    return TPS_OK;
}

/* The result's options for a run of s: the spec's, the run's figures, and
 * what the spec and the resolved config imply. */
static result_opts run_result_opts(const bench_spec *s, const bench_config *cfg,
                                   const bench_run_out *run) {
    result_opts ro = s->ro;
    result_opts_take_run(&ro, run);
    ro.target_concurrency = cfg->rate > 0 ? 0 : cfg->concurrency;
    /* conversations that think never hold the full concurrency: steady from the first reply */
    if (workload_kind_turns(s->kind)) {
        uint64_t conv = bench_spec_conversations(s);
        ro.target_concurrency = cfg->think_time_s > 0     ? 0
                                : conv < cfg->concurrency ? (uint32_t)conv
                                                          : cfg->concurrency;
    }
    return ro;
}

int bench_spec_run(bench_result *out, const bench_spec *given, FILE *log, const char *prog,
                   tps_err *e) {
    memset(out, 0, sizeof *out);
    workload wl;
    bench_config cfg;
    bench_spec checked = *given; /* its kind named: the config and the steady window read it */
    const bench_spec *s = &checked;
    int rc = bench_spec_check(&checked, NULL, e);
    if (!rc) rc = prepare_checked(&wl, &cfg, s, log, prog, e);
    if (rc) return rc;
    char url[1200];
    scraper *sc = NULL;
    const http_auth auth = auth_of(&cfg);
    double every = s->ro.bin_s > 0 && s->ro.bin_s < 1 ? s->ro.bin_s : 1.0;
    if ((rc = scrape_url(url, sizeof url, s, &cfg, log, prog, e)) ||
        (url[0] && (rc = scrape_start(&sc, url, &auth, every < 0.1 ? 0.1 : every, e)))) {
        workload_free(&wl);
        return rc;
    }
    bench_run_out run;
    rc = s->run ? s->run(&run, &cfg, &wl, s->run_arg, e) : bench_run(&run, &cfg, &wl, e);
    json_t *metrics = sc ? scrape_stop(sc, rc ? 0 : run.t_start_ns) : NULL;
    if (rc) {
        json_decref(metrics);
        workload_free(&wl);
        return rc;
    }
    json_t *jc = bench_spec_config_json(s, &cfg, &wl);
    result_opts ro = run_result_opts(s, &cfg, &run);
    ro.config = jc;
    ro.server_metrics = metrics;
    rc = result_build(out, run.recs, run.n, &ro, e);
    json_decref(metrics);
    json_decref(jc);
    bench_run_free(&run);
    workload_free(&wl);
    return rc;
}
