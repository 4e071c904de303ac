/* tps sweep (sweep.h): the grid, a local `tps serve` per model, /metrics
 * deltas, and the one JSON document that holds every point. Each point is a
 * bench_spec_run on a copy of the caller's spec with the point's axis values
 * set; this file never parses bench options. Not here: printing a sweep
 * (report_set.h). */
#include "bench/experiment/sweep.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/io/http_call.h"
#include "bench/io/tmp_dir.h"
#include "bench/result/result.h"
#include "bench/result/verdict.h"
#include "base/clock.h"
#include "metrics/metric_names.h"

/* Each axis: its name in the result and its short name in a point's
 * label. */
static const struct {
    const char *name, *label;
} AXES[SWEEP_AXES] = {
    [SWEEP_MODEL] = {"model", "model"},
    [SWEEP_CONCURRENCY] = {"concurrency", "c"},
    [SWEEP_RATE] = {"rate", "rate"},
    [SWEEP_INPUT_LEN] = {"input_len", "in"},
    [SWEEP_OUTPUT_LEN] = {"output_len", "out"},
};

const char *sweep_axis_name(sweep_axis a) {
    return (unsigned)a < SWEEP_AXES ? AXES[a].name : "?";
}

const char *sweep_axis_label(sweep_axis a) {
    return (unsigned)a < SWEEP_AXES ? AXES[a].label : "?";
}

int sweep_list_parse(sweep_list *l, const char *s, tps_err *e) {
    memset(l, 0, sizeof *l);
    if (strlen(s) >= sizeof l->buf)
        return tps_fail(e, TPS_ERANGE, "list '%.40s...' is too long", s);
    snprintf(l->buf, sizeof l->buf, "%s", s);
    char *p = l->buf;
    for (;;) {
        char *c = strchr(p, ',');
        if (c) *c = 0;
        if (!*p) return tps_fail(e, TPS_EINVAL, "'%s': empty item in the list", s);
        if (l->n == SWEEP_MAX_VALUES)
            return tps_fail(e, TPS_ERANGE, "'%.40s...': more than %d values", s, SWEEP_MAX_VALUES);
        l->v[l->n++] = p;
        if (!c) break;
        p = c + 1;
    }
    return TPS_OK;
}

static size_t axis_len(const sweep_opts *o, int a) {
    return o->axis[a].n ? o->axis[a].n : 1;
}

size_t sweep_npoints(const sweep_opts *o) {
    size_t n = 1;
    for (int a = 0; a < SWEEP_AXES; a++)
        n *= axis_len(o, a);
    return n;
}

size_t sweep_naxes(const sweep_opts *o) {
    size_t n = 0;
    for (int a = 0; a < SWEEP_AXES; a++)
        n += o->axis[a].n > 1;
    return n;
}

/* ---- HTTP GET (health, metrics) ------------------------------------------------------ */

/* Returns the HTTP status (0: no answer); the body (the caller frees it)
 * into *body when body is not NULL. A tps server of the sweep's own, or the
 * --url endpoint's /metrics: never through a proxy, at most 64 MiB. */
static long http_get(const char *url, sbuf *body, long timeout_ms) {
    const http_call_opts o = {.timeout_ms = timeout_ms, .max_body = 64u << 20, .local = true};
    return http_call_once(url, NULL, &o, body);
}

/* base URL without a trailing "/" or "/v1" */
static void base_of(char *out, size_t cap, const char *url) {
    snprintf(out, cap, "%s", url);
    size_t n = strlen(out);
    while (n && out[n - 1] == '/')
        out[--n] = 0;
    if (n >= 3 && !strcmp(out + n - 3, "/v1")) out[n - 3] = 0;
}

/* ---- /metrics ----------------------------------------------------------------------------- */

/* Every field of sweep_counters once: the series it is scraped from, its key
 * in a point's server_metrics (in the order written), and how it is
 * written: a counter as its change over the point, a gauge as its last
 * value, the experts' three only for a mixture-of-experts model, busy as
 * `true` when set. */
enum { CK_COUNTER, CK_GAUGE, CK_MOE_COUNTER, CK_MOE_GAUGE, CK_FLAG };
static const struct {
    const char *series, *key;
    size_t off;
    int kind;
} K[] = {
    {TPS_M_STEPS, "steps", offsetof(sweep_counters, steps), CK_COUNTER},
    {TPS_M_PROMPT_TOKENS, "prompt_tokens", offsetof(sweep_counters, prompt_tokens), CK_COUNTER},
    {TPS_M_GENERATION_TOKENS, "generation_tokens", offsetof(sweep_counters, generation_tokens),
     CK_COUNTER},
    {TPS_M_PREEMPTIONS, "preemptions", offsetof(sweep_counters, preemptions), CK_COUNTER},
    {TPS_M_WEIGHT_BYTES_READ, "weight_bytes", offsetof(sweep_counters, weight_bytes), CK_COUNTER},
    {TPS_M_KV_BYTES_READ, "kv_bytes", offsetof(sweep_counters, kv_bytes), CK_COUNTER},
    {TPS_M_STEP_SECONDS, "step_seconds", offsetof(sweep_counters, step_seconds), CK_COUNTER},
    {TPS_M_MACHINE_READ_BW, "machine_read_bps", offsetof(sweep_counters, machine_read_bps),
     CK_GAUGE},
    {TPS_M_EXPERTS_RUN, "experts", offsetof(sweep_counters, experts), CK_MOE_COUNTER},
    {TPS_M_MODEL_EXPERTS, "model_experts", offsetof(sweep_counters, model_experts), CK_MOE_GAUGE},
    {TPS_M_MODEL_LAYERS, "model_layers", offsetof(sweep_counters, model_layers), CK_MOE_GAUGE},
    {TPS_M_MACHINE_LIMITS_BUSY, "machine_limits_busy", offsetof(sweep_counters, machine_busy),
     CK_FLAG},
};
#define K_N (sizeof K / sizeof K[0])

static double *field(sweep_counters *c, size_t k) {
    return (double *)((char *)c + K[k].off);
}

static double field_of(const sweep_counters *c, size_t k) {
    return *(const double *)((const char *)c + K[k].off);
}

int sweep_parse_metrics(sweep_counters *c, const char *text, tps_err *e) {
    memset(c, 0, sizeof *c);
    bool steps = false;
    const char *p = text;
    for (size_t line = 0; p && *p && line < 1000000; line++) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (*p != '#') {
            for (size_t k = 0; k < K_N; k++) {
                size_t kn = strlen(K[k].series);
                if (len > kn && !strncmp(p, K[k].series, kn) && (p[kn] == ' ' || p[kn] == '{')) {
                    const char *v = memchr(p + kn, ' ', len - kn);
                    if (!v) continue;
                    double x = strtod(v + 1, NULL);
                    if (isfinite(x)) *field(c, k) += x; /* sum of labels */
                    if (k == 0) steps = true;
                }
            }
        }
        p = nl ? nl + 1 : NULL;
    }
    return steps ? TPS_OK : tps_fail(e, TPS_ENOENT, "no tps_steps_total in /metrics");
}

int sweep_scrape(sweep_counters *c, const char *base_url, tps_err *e) {
    char base[1024], url[1100];
    base_of(base, sizeof base, base_url);
    snprintf(url, sizeof url, "%s/metrics", base);
    sbuf body;
    long st = http_get(url, &body, 3000);
    int rc = st == 200 && body.p ? sweep_parse_metrics(c, body.p, e)
                                 : tps_fail(e, TPS_ENOENT, "%s: no /metrics (status %ld)", url, st);
    sbuf_free(&body);
    return rc;
}

/* The server's counters over a point (c1 - c0) and its gauges (c1's). */
static json_t *counters_json(const sweep_counters *c0, const sweep_counters *c1) {
    json_t *m = json_object();
    for (size_t k = 0; m && k < K_N; k++) {
        double v1 = field_of(c1, k), d = v1 - field_of(c0, k);
        switch (K[k].kind) {
        case CK_FLAG:
            if (v1 > 0) json_object_set_new(m, K[k].key, json_true());
            break;
        case CK_MOE_COUNTER:
        case CK_MOE_GAUGE:
            if (!(c1->model_experts > 0)) break;
            json_object_set_new(m, K[k].key, json_real(K[k].kind == CK_MOE_GAUGE ? v1 : d));
            break;
        default:
            json_object_set_new(m, K[k].key, json_real(K[k].kind == CK_GAUGE ? v1 : d));
        }
    }
    return m;
}

void sweep_counters_read(sweep_counters *c, const json_t *m) {
    for (size_t k = 0; k < K_N; k++) {
        json_t *v = json_object_get(m, K[k].key);
        *field(c, k) = K[k].kind == CK_FLAG ? json_is_true(v) : json_number_value(v);
    }
}

/* ---- a local tps serve ---------------------------------------------------------------------- */

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &al) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* The last non-empty line of a file, for error messages. */
static void last_line(char *out, size_t cap, const char *path) {
    out[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[512];
    for (int i = 0; i < 100000 && fgets(line, sizeof line, f); i++) {
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = 0;
        if (n) {
            size_t k = n < cap - 1 ? n : cap - 1;
            memcpy(out, line, k);
            out[k] = 0;
        }
    }
    fclose(f);
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int spawn_server(sweep_server *s, const char *exe, const char *model,
                        const char *const *extra, size_t n_extra, const char *log_path,
                        tps_err *e) {
    char port[16];
    snprintf(port, sizeof port, "%d", s->port);
    const char *argv[SWEEP_MAX_ARGS + 12];
    size_t k = 0;
    argv[k++] = "tps";
    argv[k++] = "serve";
    argv[k++] = "-m";
    argv[k++] = model;
    argv[k++] = "--host";
    argv[k++] = "127.0.0.1";
    argv[k++] = "--port";
    argv[k++] = port;
    for (size_t i = 0; i < n_extra && i < SWEEP_MAX_ARGS; i++)
        argv[k++] = extra[i];
    argv[k] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return tps_fail(e, TPS_EIO, "fork: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* never outlive the sweep */
        int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
            close(fd);
        }
        execv(exe, (char *const *)argv);
        dprintf(STDERR_FILENO, "cannot run %s: %s\n", exe, strerror(errno));
        _exit(127);
    }
    s->pid = pid;
    return TPS_OK;
}

int sweep_server_start(sweep_server *s, const char *exe, const char *model,
                       const char *const *extra, size_t n_extra, const char *log_path,
                       double wait_s, tps_err *e) {
    memset(s, 0, sizeof *s);
    snprintf(s->log_path, sizeof s->log_path, "%s", log_path);
    if (wait_s <= 0) wait_s = 120;
    for (int attempt = 0; attempt < 3; attempt++) { /* another process may take the port */
        s->port = free_port();
        if (s->port <= 0) return tps_fail(e, TPS_EIO, "no free port on 127.0.0.1");
        snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d", s->port);
        int rc = spawn_server(s, exe, model, extra, n_extra, log_path, e);
        if (rc) return rc;
        char health[96];
        snprintf(health, sizeof health, "%s/health", s->url);
        const uint64_t t_end = tps_now_ns() + (uint64_t)(wait_s * 1e9);
        bool exited = false;
        int ws = 0;
        while (tps_now_ns() < t_end) {
            if (http_get(health, NULL, 1000) == 200) return TPS_OK;
            if (waitpid(s->pid, &ws, WNOHANG) == s->pid) {
                exited = true;
                break;
            }
            sleep_ms(100);
        }
        char why[400];
        last_line(why, sizeof why, log_path);
        if (!exited) {
            kill(s->pid, SIGKILL);
            waitpid(s->pid, NULL, 0);
            s->pid = 0;
            return tps_fail(e, TPS_EIO, "tps serve %s: no 200 from /health within %.0f s (%s)",
                            model, wait_s, why[0] ? why : "no output");
        }
        s->pid = 0;
        if (!strstr(why, "in use")) /* anything but a port taken meanwhile */
            return tps_fail(e, TPS_EIO, "tps serve %s exited with status %d: %s", model,
                            WIFEXITED(ws) ? WEXITSTATUS(ws) : -1, why[0] ? why : "no output");
    }
    return tps_fail(e, TPS_EIO, "tps serve %s: could not get a free port in 3 tries", model);
}

int sweep_server_stop(sweep_server *s, double wait_s) {
    if (s->pid <= 0) return -1;
    kill(s->pid, SIGTERM);
    int ws = 0;
    const uint64_t t_end = tps_now_ns() + (uint64_t)((wait_s > 0 ? wait_s : 40) * 1e9);
    pid_t r = 0;
    while ((r = waitpid(s->pid, &ws, WNOHANG)) == 0 && tps_now_ns() < t_end)
        sleep_ms(50);
    if (r == 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, &ws, 0);
    }
    s->pid = 0;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

/* ---- the sweep ------------------------------------------------------------------------------ */

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static json_t *string_array(const sweep_list *l) {
    json_t *a = json_array();
    for (size_t i = 0; i < l->n; i++)
        json_array_append_new(a, json_string(l->v[i]));
    return a;
}

typedef struct point_ctx {
    const sweep_opts *o;
    const char *url;
    const char *model; /* served model path, or NULL */
    uint64_t seed;     /* point k runs with seed + k: no point sends another's prompts */
    const char *val[SWEEP_AXES];
    char label[256];
} point_ctx;

static void point_label(point_ctx *p) {
    size_t n = 0;
    p->label[0] = 0;
    for (int a = 0; a < SWEEP_AXES; a++) {
        if (p->o->axis[a].n <= 1) continue;
        const char *v = a == SWEEP_MODEL ? base_name(p->val[a]) : p->val[a];
        n += (size_t)snprintf(p->label + n, sizeof p->label - (n < sizeof p->label ? n : 0),
                              "%s%s=%s", n ? " " : "", AXES[a].label, v);
        if (n >= sizeof p->label) break;
    }
    if (!p->label[0]) snprintf(p->label, sizeof p->label, "point");
    char *dot = strstr(p->label, ".gguf");
    if (dot) memmove(dot, dot + 5, strlen(dot + 5) + 1);
}

int sweep_apply_axes(bench_spec *s, const char *const val[SWEEP_AXES], tps_err *e) {
    const char *v = val[SWEEP_CONCURRENCY];
    if (v) {
        char *end;
        unsigned long long c = strtoull(v, &end, 10);
        if (end == v || *end || *v == '-' || c < 1 || c > 100000)
            return tps_fail(e, TPS_EINVAL, "--concurrency: '%s' is not a whole number in 1..100000",
                            v);
        s->cfg.concurrency = (uint32_t)c;
    }
    if ((v = val[SWEEP_RATE])) {
        char *end;
        double r = strtod(v, &end);
        if (end == v || *end || !isfinite(r) || !(r > 0))
            return tps_fail(e, TPS_EINVAL, "--rate: '%s' is not a number > 0", v);
        s->cfg.rate = r;
    }
    tps_err de = {{0}};
    if ((v = val[SWEEP_INPUT_LEN]) && load_dist_parse(&s->wo.input_len, v, &de))
        return tps_fail(e, TPS_EINVAL, "--input-len: %s", de.msg);
    if ((v = val[SWEEP_OUTPUT_LEN])) {
        if (load_dist_parse(&s->wo.output_len, v, &de))
            return tps_fail(e, TPS_EINVAL, "--output-len: %s", de.msg);
        s->wo.has_output_len = true; /* as if given to bench */
    }
    return TPS_OK;
}

/* Every value of every axis, each alone on a copy of the base. */
static int check_axes(const sweep_opts *o, tps_err *e) {
    for (int a = SWEEP_CONCURRENCY; a < SWEEP_AXES; a++)
        for (size_t i = 0; i < o->axis[a].n; i++) {
            bench_spec s = *o->base;
            const char *val[SWEEP_AXES] = {0};
            val[a] = o->axis[a].v[i];
            int rc = sweep_apply_axes(&s, val, e);
            if (rc) return rc;
        }
    return TPS_OK;
}

/* One bench run; *point gets the point's JSON. Returns its exit status (0
 * ok, 1 failed or over --max-error-rate, 2 options refused). */
static int run_point(json_t **point, point_ctx *p, size_t index, size_t total) {
    const sweep_opts *o = p->o;
    point_label(p);
    if (o->log) {
        fprintf(o->log, "sweep: [%zu/%zu] %s ...\n", index + 1, total, p->label);
        fflush(o->log);
    }
    bench_spec s = *o->base;
    s.cfg.base_url = p->url;
    s.cfg.seed = p->seed + index;
    s.seed_given = true;
    if (p->model && !s.wo.tokenizer_path) s.wo.tokenizer_path = p->model; /* served model's */
    tps_err e = {{0}};
    int status = sweep_apply_axes(&s, p->val, &e) || bench_spec_check(&s, NULL, &e) ? 2 : 0;

    sweep_counters c0, c1;
    tps_err me = {{0}};
    /* a point run in bench_run's place (a prediction) has no endpoint */
    bool have_metrics = !status && !s.run && sweep_scrape(&c0, p->url, &me) == TPS_OK;
    bench_result r;
    bool have_result = false;
    if (!status) {
        if (bench_spec_run(&r, &s, o->log, "tps bench", &e))
            status = 1;
        else
            have_result = true;
    }
    have_metrics = have_metrics && sweep_scrape(&c1, p->url, &me) == TPS_OK;
    verdict v = {.why = ""}; /* one judgement: the status and the point's result */
    if (have_result) verdict_judge_run(&v, &r, s.max_error_rate);
    if (v.outcome) status = 1;
    const char *why = v.why;

    json_t *pt = json_object();
    json_object_set_new(pt, "index", json_integer((json_int_t)index));
    json_object_set_new(pt, "label", json_string(p->label));
    json_object_set_new(pt, "url", json_string(p->url));
    for (int a = 0; a < SWEEP_AXES; a++)
        json_object_set_new(pt, AXES[a].name, p->val[a] ? json_string(p->val[a]) : json_null());
    json_object_set_new(pt, "exit_status", json_integer(status));
    if (have_metrics) json_object_set_new(pt, "server_metrics", counters_json(&c0, &c1));
    if (have_result) {
        if (o->log) {
            const result_window *w = r.steady.valid ? &r.steady : &r.run;
            fprintf(o->log,
                    "sweep:        %.1f output tok/s (%s window, %.1f s), %llu/%llu completed, "
                    "TTFT p50 %.1f ms, ITL p99 %.1f ms%s%s\n",
                    w->tps.output_tps, r.steady.valid ? "steady" : "run", w->tps.seconds,
                    (unsigned long long)r.completed, (unsigned long long)r.requests,
                    hist_percentile(r.h[RH_TTFT], 50) / 1e6, hist_percentile(r.h[RH_ITL], 99) / 1e6,
                    why[0] ? "; " : "", why);
        }
        json_object_set_new(pt, "result", result_to_json_judged(&r, &v));
        result_free(&r);
    } else {
        if (o->log)
            fprintf(o->log, "sweep:        no result (exit status %d: %s)\n", status, e.msg);
        json_object_set_new(pt, "result", json_null());
    }
    *point = pt;
    return status;
}

/* The options a sweep cannot run with, before anything starts. */
static int check_sweep(const sweep_opts *o, size_t total, tps_err *e) {
    if (total > SWEEP_MAX_POINTS)
        return tps_fail(e, TPS_ERANGE, "the grid has %zu points; at most %d", total,
                        SWEEP_MAX_POINTS);
    if (!o->axis[SWEEP_MODEL].n && !o->url)
        return tps_fail(e, TPS_EINVAL, "give --url or a model to serve");
    if (!o->base) return tps_fail(e, TPS_EINVAL, "no bench spec to run");
    return check_axes(o, e);
}

/* The sweep document without its points: schema, start time, the grid and
 * the bench arguments; "points" is an empty array to fill. */
static json_t *sweep_doc(const sweep_opts *o, uint64_t seed) {
    json_t *d = json_object(), *axes = json_array(), *grid = json_object();
    char when[64];
    time_t now = time(NULL);
    struct tm tmv;
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tmv));
    json_object_set_new(d, "schema", json_string(SWEEP_SCHEMA));
    json_object_set_new(d, "version", json_integer(SWEEP_VERSION));
    json_object_set_new(d, "started_at", json_string(when));
    json_object_set_new(d, "seed", json_integer((json_int_t)seed));
    if (!o->axis[SWEEP_MODEL].n) json_object_set_new(d, "url", json_string(o->url));
    for (int a = 0; a < SWEEP_AXES; a++) {
        if (o->axis[a].n > 1) json_array_append_new(axes, json_string(AXES[a].name));
        if (o->axis[a].n) json_object_set_new(grid, AXES[a].name, string_array(&o->axis[a]));
    }
    json_object_set_new(d, "axes", axes);
    json_object_set_new(d, "grid", grid);
    json_t *ba = json_array();
    for (size_t i = 0; o->bench_args && i < o->n_bench_args; i++)
        json_array_append_new(ba, json_string(o->bench_args[i]));
    json_object_set_new(d, "bench_args", ba);
    json_object_set_new(d, "points", json_array());
    return d;
}

/* Serves the m-th model of the grid (its log in log_dir); p's points go to it. */
static int serve_model(point_ctx *p, sweep_server *srv, size_t m, const char *log_dir, tps_err *e) {
    const sweep_opts *o = p->o;
    p->model = p->val[SWEEP_MODEL] = o->axis[SWEEP_MODEL].v[m];
    char log_path[128];
    snprintf(log_path, sizeof log_path, "%s/serve-%zu.log", log_dir, m);
    if (o->log) {
        fprintf(o->log, "sweep: starting tps serve -m %s on 127.0.0.1 ...\n", p->model);
        fflush(o->log);
    }
    int rc = sweep_server_start(srv, o->exe, p->model, o->serve_args, o->n_serve_args, log_path,
                                o->serve_wait_s, e);
    if (rc) return rc;
    if (o->log) fprintf(o->log, "sweep: serving %s at %s\n", p->model, srv->url);
    p->url = srv->url;
    return TPS_OK;
}

/* The grid's points for one model (or for --url), the last axis varying
 * fastest; *index counts the points run over the whole sweep. */
static int run_model_points(json_t *points, point_ctx *p, size_t per_model, size_t *index,
                            size_t total, size_t *n_failed, tps_err *e) {
    const sweep_opts *o = p->o;
    for (size_t q = 0; q < per_model; q++) {
        size_t rest = q;
        for (int a = SWEEP_AXES - 1; a > SWEEP_MODEL; a--) {
            size_t n = axis_len(o, a);
            p->val[a] = o->axis[a].n ? o->axis[a].v[rest % n] : NULL;
            rest /= n;
        }
        json_t *pt;
        int status = run_point(&pt, p, (*index)++, total);
        json_array_append_new(points, pt);
        if (status != 0 || json_is_null(json_object_get(pt, "result"))) (*n_failed)++;
        if (status == 2)
            return tps_fail(e, TPS_EINVAL,
                            "point %zu: bench refused the options (exit status 2; the message "
                            "is above)",
                            *index);
    }
    return TPS_OK;
}

int sweep_run(json_t **doc, size_t *n_failed, const sweep_opts *o, tps_err *e) {
    *doc = NULL;
    *n_failed = 0;
    const size_t total = sweep_npoints(o);
    int rc = check_sweep(o, total, e);
    if (rc) return rc;
    char tmp[] = "/tmp/tps-sweep-XXXXXX"; /* the served models' logs */
    if (o->axis[SWEEP_MODEL].n && !mkdtemp(tmp))
        return tps_fail(e, TPS_EIO, "mkdtemp: %s", strerror(errno));
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) { /* held across the bench runs */
        if (o->axis[SWEEP_MODEL].n) rmdir(tmp);
        return tps_fail(e, TPS_EIO, "curl_global_init failed");
    }

    /* --seed S repeats a sweep (point k: S + k); without it each sweep draws its own */
    const uint64_t seed = o->base->seed_given ? o->base->cfg.seed : bench_spec_fresh_seed();
    json_t *d = sweep_doc(o, seed), *points = json_object_get(d, "points");
    size_t index = 0;
    const size_t n_models = axis_len(o, SWEEP_MODEL);
    for (size_t m = 0; m < n_models && !rc; m++) {
        point_ctx p = {.o = o, .url = o->url, .seed = seed};
        sweep_server srv = {0};
        if (o->axis[SWEEP_MODEL].n && (rc = serve_model(&p, &srv, m, tmp, e))) break;
        rc = run_model_points(points, &p, total / n_models, &index, total, n_failed, e);
        if (srv.pid > 0) {
            int st = sweep_server_stop(&srv, 60);
            if (o->log) fprintf(o->log, "sweep: stopped the server (exit status %d)\n", st);
        }
    }
    if (o->axis[SWEEP_MODEL].n) tmp_dir_remove(tmp);
    curl_global_cleanup();
    if (rc) {
        json_decref(d);
        return rc;
    }
    *doc = d;
    return TPS_OK;
}
