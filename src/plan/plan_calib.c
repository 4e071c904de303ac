/* tps plan calibrate (plan_calib.h): a real engine over a grid of step
 * shapes, its steps observed, a step-cost fit on each shape's median. */
#include "plan/plan_calib.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/core/engine.h"
#include "plan/plan_calib_served.h"
#include "kernels/machine.h"
#include "metrics/cpu_load.h"
#include "base/grow.h"
#include "base/rng.h"

typedef struct obs {
    step_shape sh;
    double fwd, post;
} obs;

typedef struct obs_list {
    pthread_mutex_t mu; /* the engine thread appends, the caller reads */
    obs *v;
    size_t n, cap;
    bool keep; /* false during the warm-up */
} obs_list;

static void on_step(void *arg, const engine_step_obs *o) {
    obs_list *l = arg;
    pthread_mutex_lock(&l->mu);
    if (l->keep && !TPS_GROW(l->v, l->cap, l->n + 1, 256))
        l->v[l->n++] = (obs){.sh = {.rows = o->rows,
                                    .logit_rows = o->logit_rows,
                                    .attended = o->attended,
                                    .kv_read = o->kv_positions},
                             .fwd = (double)(o->t1 - o->t0),
                             .post = (double)(o->t2 - o->t1)};
    pthread_mutex_unlock(&l->mu);
}

/* ---- driving the engine ------------------------------------------------------- */

/* n requests at once, each a prompt of len random tokens of its own,
 * max_tokens each; returns when every one is done. */
static int run_batch(engine *eng, tps_rng *r, uint32_t n_vocab, uint32_t len, uint32_t n,
                     uint32_t max_tokens, tps_err *e) {
    int32_t *p = malloc(sizeof *p * (len ? len : 1));
    if (!p) return tps_fail(e, TPS_ENOMEM, "out of memory");
    int rc = 0;
    for (uint32_t i = 0; i < n && !rc; i++) {
        for (uint32_t k = 0; k < len; k++)
            p[k] = 3 + (int32_t)(tps_rng_next(r) % (n_vocab - 3));
        engine_request rq = {.prompt = p, .n_prompt = len, .max_tokens = max_tokens};
        sampler_params_default(&rq.sampling);
        uint64_t id;
        rc = engine_submit(eng, &rq, &id, e);
    }
    free(p);
    engine_event ev[64];
    for (uint32_t done = 0; !rc && done < n;) {
        engine_wait(eng, 1000);
        size_t k = engine_poll(eng, ev, 64);
        for (size_t i = 0; i < k; i++)
            done += ev[i].kind == ENGINE_EV_DONE;
    }
    return rc;
}

/* The decode grid's prompts, all streams together, at most this many
 * positions: each stream holds its own K/V, as a server's streams with
 * distinct prompts do (a shared prefix would be read from cache once per
 * step and make K/V reads look several times cheaper than they are), and
 * the grid's prefill stays a few seconds on a 1B model. */
#define CALIB_KV_TOKENS 8192

/* The grid for one engine: prompts alone, then streams decoding at a
 * short and a long context, each stream its own prompt. */
static int run_grid(engine *eng, obs_list *l, const plan_calib_opts *o, uint32_t n_ctx,
                    tps_err *e) {
    tps_rng r;
    tps_rng_seed(&r, 36);
    const uint32_t nv = o->m->cfg.n_vocab, mb = o->max_batch_tokens;
    int rc = run_batch(eng, &r, nv, 64 < n_ctx / 2 ? 64 : n_ctx / 2, 1, 4, e);
    pthread_mutex_lock(&l->mu);
    l->keep = true; /* the warm-up's steps are not kept */
    pthread_mutex_unlock(&l->mu);
    const int reps = o->quick ? 1 : 3;
    for (uint32_t p = 16; !rc && p <= 2 * mb && p < n_ctx / 2; p *= (o->quick ? 4 : 2))
        for (int i = 0; i < reps && !rc; i++)
            rc = run_batch(eng, &r, nv, p, 1, 2, e);
    uint32_t ctxs[2] = {32, n_ctx / 2 < 1024 ? n_ctx / 2 : 1024};
    for (int c = 0; c < 2 && !rc; c++)
        for (uint32_t n = 1; !rc && n <= o->max_seqs; n *= (o->quick ? 4 : 2)) {
            uint32_t len = ctxs[c] < CALIB_KV_TOKENS / n ? ctxs[c] : CALIB_KV_TOKENS / n;
            rc = run_batch(eng, &r, nv, len > 16 ? len : 16, n, o->quick ? 4 : 12, e);
        }
    return rc;
}

/* ---- the fit ----------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n) {
    qsort(v, n, sizeof *v, cmp_double);
    return n ? (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2) : 0;
}

/* A shape's bucket: its rows, logit rows, attended and read positions to
 * about 10% (steps of streams decoding at one context fall together). */
static uint64_t bucket_key(const step_shape *s) {
    uint64_t a = (uint64_t)(log2(s->attended + 1) * 8), k = (uint64_t)(log2(s->kv_read + 1) * 8);
    return ((uint64_t)s->rows << 40) ^ ((uint64_t)s->logit_rows << 24) ^ (a << 8) ^ k;
}

static int cmp_key(const void *a, const void *b) {
    uint64_t x = bucket_key(&((const obs *)a)->sh), y = bucket_key(&((const obs *)b)->sh);
    return (x > y) - (x < y);
}

/* The fit on each bucket's median (the grid runs the engine alone: a slow
 * step is a neighbour's, not the engine's), and its median error over
 * every step;
 * each bucket's line on vlog (NULL: none) after the fit. */
static int fit_medians(step_fit *f, obs *v, size_t n, FILE *vlog, tps_err *e) {
    step_fit_init(f);
    double *tf = malloc(sizeof *tf * (n ? n : 1)), *tp = malloc(sizeof *tp * (n ? n : 1));
    if (!tf || !tp) {
        free(tf);
        free(tp);
        return tps_fail(e, TPS_ENOMEM, "out of memory");
    }
    qsort(v, n, sizeof *v, cmp_key);
    for (size_t i = 0, j; i < n; i = j) {
        step_shape mean = {0};
        for (j = i; j < n && bucket_key(&v[j].sh) == bucket_key(&v[i].sh); j++) {
            tf[j - i] = v[j].fwd;
            tp[j - i] = v[j].post;
            mean.rows += v[j].sh.rows;
            mean.logit_rows += v[j].sh.logit_rows;
            mean.attended += v[j].sh.attended;
            mean.kv_read += v[j].sh.kv_read;
            mean.seqs += v[j].sh.seqs;
        }
        const double k = (double)(j - i);
        mean = (step_shape){mean.rows / k, mean.logit_rows / k, mean.attended / k, mean.kv_read / k,
                            mean.seqs / k};
        step_fit_add(f, &mean, median(tf, j - i), median(tp, j - i));
    }
    int rc = step_fit_solve(f, e);
    for (size_t i = 0, j; !rc && vlog && i < n; i = j) {
        size_t m = 0;
        for (j = i; j < n && bucket_key(&v[j].sh) == bucket_key(&v[i].sh); j++)
            tf[m] = v[j].fwd, tp[m++] = v[j].post;
        fprintf(vlog,
                "  rows %4.0f logits %4.0f attended %8.0f read %6.0f: %3zu steps, forward %8.3f ms "
                "(fit %8.3f), after %6.3f ms (fit %6.3f)\n",
                v[i].sh.rows, v[i].sh.logit_rows, v[i].sh.attended, v[i].sh.kv_read, m,
                median(tf, m) / 1e6, step_fit_fwd_ns(f, &v[i].sh) / 1e6, median(tp, m) / 1e6,
                step_fit_post_ns(f, &v[i].sh) / 1e6);
    }
    for (size_t i = 0; !rc && i < n; i++)
        tf[i] = fabs(step_fit_fwd_ns(f, &v[i].sh) - v[i].fwd) / v[i].fwd;
    if (!rc) f->err_p50 = median(tf, n);
    f->n = n;
    free(tf);
    free(tp);
    return rc;
}

static void log_fit(FILE *log, uint32_t kv_type, const step_fit *f) {
    if (!log) return;
    const ggml_type_info *ti = ggml_type_get(kv_type);
    step_shape one = {1, 1, 64, 64, 1}, many = {64, 64, 64 * 64, 64 * 64, 64},
               pre = {256, 1, 256 * 257 / 2.0, 256, 1};
    fprintf(log,
            "tps plan calibrate: %s KV: %llu steps, median error %.1f%%; decode 1 row %.2f ms, "
            "64 rows %.2f ms; a 256-row prompt %.2f ms; after a step %.3f ms + per logits row "
            "%.1f us\n",
            ti ? ti->name : "?", (unsigned long long)f->n, 100 * f->err_p50,
            step_fit_fwd_ns(f, &one) / 1e6, step_fit_fwd_ns(f, &many) / 1e6,
            step_fit_fwd_ns(f, &pre) / 1e6, step_fit_post_ns(f, &one) / 1e6,
            f->coef[1][STEP_FIT_KNOTS] / 1e3);
}

static void log_served(FILE *log, const step_fit *f, const step_noise *t) {
    if (!log) return;
    const step_noise *z = &f->noise;
    if (t->n)
        fprintf(log,
                "tps plan calibrate: a closed loop's turnaround (a request's end to the next "
                "request queued), %llu requests: p10 %.2f ms, p50 %.2f ms, p90 %.2f ms\n",
                (unsigned long long)t->n, step_noise_at(t, 0.1) / 1e6, step_noise_at(t, 0.5) / 1e6,
                step_noise_at(t, 0.9) / 1e6);
    fprintf(log,
            "tps plan calibrate: served to a real client on this machine: %llu steps, fitted with "
            "the grid's; a served step over the fit: p10 x%.2f, p50 x%.2f, p90 x%.2f, p99 x%.2f "
            "(%s)\n",
            (unsigned long long)(z->n + f->noise_one.n), step_noise_at(z, 0.1),
            step_noise_at(z, 0.5), step_noise_at(z, 0.9), step_noise_at(z, 0.99),
            f->noise_one.n ? "steps of many rows" : "every step");
    if (f->noise_one.n)
        fprintf(log,
                "tps plan calibrate: ... one-row steps (%llu): p10 x%.2f, p50 x%.2f, p90 x%.2f, "
                "p99 x%.2f\n",
                (unsigned long long)f->noise_one.n, step_noise_at(&f->noise_one, 0.1),
                step_noise_at(&f->noise_one, 0.5), step_noise_at(&f->noise_one, 0.9),
                step_noise_at(&f->noise_one, 0.99));
}

/* -v: the served steps by their rows and logits rows, each group's
 * percentiles beside the fit's median for the same steps. */
static void log_served_rows(FILE *log, const served_steps *sv, const step_fit *f) {
    const size_t n = sv->n ? sv->n : 1;
    double *a = malloc(sizeof *a * n), *b = malloc(sizeof *b * n);
    for (uint32_t rows = 1; a && b && rows <= 4096; rows++)
        for (uint32_t lr = 0; lr <= rows; lr++) {
            size_t k = 0;
            for (size_t i = 0; i < sv->n; i++)
                if (sv->sh[i].rows == rows && sv->sh[i].logit_rows == lr) {
                    a[k] = sv->fwd[i] + sv->post[i];
                    b[k++] = step_fit_fwd_ns(f, &sv->sh[i]) + step_fit_post_ns(f, &sv->sh[i]);
                }
            if (k < 3) continue;
            qsort(a, k, sizeof *a, cmp_double);
            qsort(b, k, sizeof *b, cmp_double);
            fprintf(log,
                    "  served rows %4u logits %4u: %5zu steps, took p50 %7.3f ms, p90 %7.3f ms, "
                    "p99 %7.3f ms (fit p50 %7.3f ms)\n",
                    rows, lr, k, a[k / 2] / 1e6, a[k * 9 / 10] / 1e6, a[k * 99 / 100] / 1e6,
                    b[k / 2] / 1e6);
        }
    free(a);
    free(b);
}

/* The served steps into the grid's fit f (solved), solved again, and their
 * spread about it. */
static int add_served(step_fit *f, step_noise *turnaround, const plan_calib_opts *o,
                      uint32_t kv_type, tps_err *e) {
    served_steps sv;
    int rc = plan_calib_served(&sv, o, kv_type, e);
    if (rc) return rc;
    const size_t n = sv.n ? sv.n : 1;
    double *took = malloc(sizeof *took * n), *fit = malloc(sizeof *fit * n),
           *rows = malloc(sizeof *rows * n);
    if (!took || !fit || !rows) rc = tps_fail(e, TPS_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < sv.n; i++)
        step_fit_add(f, &sv.sh[i], sv.fwd[i], sv.post[i]);
    if (!rc) rc = step_fit_solve(f, e);
    for (size_t i = 0; !rc && i < sv.n; i++) {
        took[i] = sv.fwd[i] + sv.post[i];
        fit[i] = step_fit_fwd_ns(f, &sv.sh[i]) + step_fit_post_ns(f, &sv.sh[i]);
    }
    for (size_t i = 0; !rc && i < sv.n; i++)
        rows[i] = sv.sh[i].rows;
    if (!rc) rc = step_noise_fit_split(&f->noise_one, &f->noise, rows, took, fit, sv.n, e);
    if (!rc && !turnaround->n) *turnaround = sv.turnaround; /* the machine's, from the first */
    if (!rc) f->prime = sv.prime;
    if (!rc && o->verbose && o->log) log_served_rows(o->log, &sv, f);
    free(took);
    free(rows);
    free(fit);
    served_steps_free(&sv);
    return rc;
}

/* ---- one KV type, every KV type -------------------------------------------------- */

static int calibrate_kv(step_fit *f, step_noise *turnaround, const plan_calib_opts *o,
                        uint32_t kv_type, tps_err *e) {
    obs_list l = {.keep = false};
    pthread_mutex_init(&l.mu, NULL);
    engine_params ep;
    engine_params_default(&ep);
    ep.model = o->m;
    ep.tok = o->tok;
    ep.n_threads = o->n_threads;
    ep.max_seqs = o->max_seqs;
    ep.max_batch_tokens = o->max_batch_tokens;
    ep.kv_type = kv_type;
    ep.itl_target_ms = 0; /* prompts are not cut: the grid's shapes are its own */
    ep.on_step = on_step;
    ep.on_step_arg = &l;
    engine *eng = NULL;
    int rc = engine_create(&eng, &ep, e);
    if (!rc) rc = run_grid(eng, &l, o, o->m->cfg.ctx_len, e);
    engine_destroy(eng);
    if (!rc) rc = fit_medians(f, l.v, l.n, o->verbose ? o->log : NULL, e);
    if (!rc && o->served_s > 0) rc = add_served(f, turnaround, o, kv_type, e);
    if (!rc) log_fit(o->log, kv_type, f);
    if (!rc && o->served_s > 0) log_served(o->log, f, turnaround);
    free(l.v);
    pthread_mutex_destroy(&l.mu);
    return rc;
}

int plan_calibrate(step_calib *c, const plan_calib_opts *o, tps_err *e) {
    memset(c, 0, sizeof *c);
    step_calib_model_of(&c->model, o->m);
    c->threads = o->n_threads ? o->n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(c->source, sizeof c->source, "calibrate");
    int rc = machine_limits_get(&c->machine, c->threads, e);
    cpu_sample s0, s1;
    cpu_sample_take(&s0);
    for (uint32_t i = 0; !rc && i < o->n_kv && i < STEP_CALIB_MAX_KV; i++) {
        c->kv_type[i] = o->kv_types[i];
        rc = calibrate_kv(&c->fit[i], &c->turnaround, o, o->kv_types[i], e);
        if (!rc) c->n_kv++;
    }
    cpu_sample_take(&s1);
    const cpu_contention h = cpu_contention_between(&s0, &s1);
    c->has_steal = h.known;
    c->steal = h.steal;
    if (!rc && h.known && o->log)
        fprintf(o->log,
                "tps plan calibrate: the hypervisor stole %.1f%% of the CPU time meanwhile%s\n",
                100 * h.steal,
                h.steal >= 0.03 ? " (a shared VM: a plan from this file assumes its neighbours "
                                  "take as much; calibrate again when they do not)"
                                : "");
    return rc;
}
