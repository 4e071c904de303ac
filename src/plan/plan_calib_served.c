/* tps plan calibrate's served phase (plan_calib_served.h). */
#include "plan/plan_calib_served.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/free_all.h"
#include "base/grow.h"
#include "bench/experiment/bench_spec.h"
#include "plan/plan_replay.h"
#include "server/http/server.h"

#define SERVED_LOADS 3

typedef struct served_obs {
    pthread_mutex_t mu; /* the engine thread appends, the caller reads after the stop */
    served_steps st;
    size_t cap_sh, cap_fwd, cap_post;
    uint32_t conc[SERVED_LOADS]; /* each load's concurrency */
    uint64_t sent[SERVED_LOADS]; /* ... and the requests it sent */
    bool keep;                   /* false during the server's warm-up */
    bool oom;
} served_obs;

static void on_step(void *arg, const engine_step_obs *o) {
    served_obs *l = arg;
    served_steps *st = &l->st;
    pthread_mutex_lock(&l->mu);
    if (l->keep && !l->oom) {
        if (TPS_GROW(st->sh, l->cap_sh, st->n + 1, 1024) ||
            TPS_GROW(st->fwd, l->cap_fwd, st->n + 1, 1024) ||
            TPS_GROW(st->post, l->cap_post, st->n + 1, 1024)) {
            l->oom = true;
        } else {
            st->sh[st->n] = (step_shape){.rows = o->rows,
                                         .logit_rows = o->logit_rows,
                                         .attended = o->attended,
                                         .kv_read = o->kv_positions};
            st->fwd[st->n] = (double)(o->t1 - o->t0);
            st->post[st->n++] = (double)(o->t2 - o->t1);
        }
    }
    pthread_mutex_unlock(&l->mu);
}

/* One closed-loop load of `seconds` against url. Failed requests are the
 * server's to explain: only a run that could not start fails here. */
static int one_load(const char *url, const char *model, uint32_t concurrency, const char *in,
                    const char *out, double seconds, uint64_t *sent, tps_err *e) {
    bench_spec s;
    bench_spec_init(&s);
    s.cfg.base_url = url;
    s.cfg.concurrency = concurrency;
    s.cfg.duration_s = seconds;
    s.cfg.timeout_s = 60 + seconds;
    s.cfg.progress = false;
    s.wo.tokenizer_path = model;
    s.scrape = "off";
    int rc = load_dist_parse(&s.wo.input_len, in, e);
    if (!rc) rc = load_dist_parse(&s.wo.output_len, out, e);
    if (rc) return rc;
    bench_result r;
    if ((rc = bench_spec_run(&r, &s, NULL, "tps plan calibrate", e))) return rc;
    *sent = r.requests;
    result_free(&r);
    return 0;
}

static int serve_and_load(served_obs *l, const plan_calib_opts *o, uint32_t kv_type,
                          const char *trace, tps_err *e) {
    FILE *quiet = o->verbose ? NULL : fopen("/dev/null", "w");
    server_config c;
    server_config_default(&c);
    c.model_path = o->model_path;
    c.host = "127.0.0.1";
    c.port = 0;
    c.log = o->verbose ? o->log : quiet;
    c.engine.n_threads = o->n_threads;
    c.engine.max_seqs = o->max_seqs;
    c.engine.max_batch_tokens = o->max_batch_tokens;
    c.engine.kv_type = kv_type;
    c.engine.no_prefix_cache = true; /* every load's prompts are its own */
    c.engine.trace_path = trace;
    c.engine.on_step = on_step;
    c.engine.on_step_arg = l;
    server *s = NULL;
    int rc = server_create(&s, &c, e);
    if (!rc) rc = server_start(s, e);
    if (!rc) rc = server_load(s, e);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s ? server_port(s) : 0);
    pthread_mutex_lock(&l->mu);
    l->keep = true;
    pthread_mutex_unlock(&l->mu);
    /* the kinds of load a plan is asked about: one stream, a few with
     * longer prompts (chunks beside decodes), many */
    const uint32_t many = o->max_seqs < 16 ? o->max_seqs : 16;
    const double t = o->served_s;
    const uint32_t conc[SERVED_LOADS] = {1, many < 4 ? many : 4, many};
    const char *in[SERVED_LOADS] = {"128", "512", "128"}, *out[SERVED_LOADS] = {"128", "64", "128"};
    for (int i = 0; !rc && i < SERVED_LOADS; i++) {
        l->conc[i] = conc[i];
        rc = one_load(url, o->model_path, conc[i], in[i], out[i], t, &l->sent[i], e);
    }
    if (s) {
        server_stop(s);
        int wrc = server_wait(s);
        if (!rc && wrc) rc = tps_fail(e, wrc, "the served phase's server stopped with an error");
        server_free(s);
    }
    if (quiet) fclose(quiet);
    return rc;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Whether request i (submit order) is one a closed loop sent when another
 * ended: not among the first `concurrency` of its load, which the client
 * sent at its start. */
static bool is_turn(const served_obs *l, size_t i) {
    uint64_t first = 0;
    for (int k = 0; k < SERVED_LOADS; first += l->sent[k++])
        if (i < first + l->sent[k]) return i >= first + l->conc[k];
    return false;
}

/* A closed loop sends its next request when one ends: for each request
 * it sent so, the gap from the latest end before it. */
static int turnarounds(served_steps *st, const served_obs *l, const char *trace, tps_err *e) {
    plan_replay r;
    int rc = plan_replay_read(&r, trace, e);
    if (rc) return rc;
    st->prime = (step_prime){.n = r.prime_n, .t1_ns = r.prime_t1_ns, .tn_ns = r.prime_tn_ns};
    if (!step_prime_ok(&st->prime)) st->prime = (step_prime){0};
    step_noise *z = &st->turnaround;
    const size_t cap = r.n_arrivals ? r.n_arrivals : 1;
    uint64_t *end = malloc(sizeof *end * cap);
    double *gap = malloc(sizeof *gap * cap), *one = malloc(sizeof *one * cap);
    size_t n_end = 0, n = 0;
    if (!end || !gap || !one) rc = tps_fail(e, TPS_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < r.n_arrivals; i++)
        if (r.finishes[i]) end[n_end++] = r.finishes[i];
    if (!rc) qsort(end, n_end, sizeof *end, cmp_u64);
    for (size_t i = 0; !rc && i < r.n_arrivals; i++) {
        const uint64_t a = r.arrivals[i];
        size_t lo = 0, hi = n_end; /* the first end after a */
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (end[mid] <= a)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo && is_turn(l, i)) gap[n] = (double)(a - end[lo - 1]), one[n++] = 1;
    }
    /* over 1: the quantiles in ns; too few (a large model's requests
     * outlast the loads): none, and the plan keeps its fixed HTTP path */
    memset(z, 0, sizeof *z);
    if (!rc && n >= 16) rc = step_noise_fit(z, gap, one, n, e);
    free(end);
    free(gap);
    free(one);
    plan_replay_free(&r);
    return rc;
}

int plan_calib_served(served_steps *out, const plan_calib_opts *o, uint32_t kv_type, tps_err *e) {
    served_obs l = {0};
    pthread_mutex_init(&l.mu, NULL);
    char trace[] = "/tmp/tps-calibrate-trace-XXXXXX";
    int fd = mkstemp(trace);
    int rc = fd < 0 ? tps_fail(e, TPS_EIO, "cannot make a temporary file in /tmp") : 0;
    if (fd >= 0) close(fd);
    if (!rc) rc = serve_and_load(&l, o, kv_type, trace, e);
    if (!rc && l.oom) rc = tps_fail(e, TPS_ENOMEM, "out of memory");
    if (!rc) rc = turnarounds(&l.st, &l, trace, e);
    if (fd >= 0) unlink(trace);
    pthread_mutex_destroy(&l.mu);
    if (rc) served_steps_free(&l.st);
    *out = l.st;
    return rc;
}

void served_steps_free(served_steps *s) {
    TPS_FREE_ALL(s->sh, s->fwd, s->post);
    memset(s, 0, sizeof *s);
}
