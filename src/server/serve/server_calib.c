/* tps serve --save-calibration FILE: every step the engine runs while
 * serving feeds a step-cost fit (engine/cost/step_fit.h) through the engine's
 * step observer, and a uniform sample of them is kept for the spread of
 * served steps about that fit (engine/cost/step_noise.h); at exit the fit is
 * written with the model's shape and the machine's limits, for tps plan
 * --calibration. Both are written by the engine thread only and read
 * after that thread has stopped. */
#include <stdlib.h>
#include <unistd.h>

#include "base/rng.h"
#include "engine/cost/step_fit.h"
#include "server/serve/serve.h"

/* Steps kept for the spread: a uniform sample of every step served
 * (reservoir), so a day-long run costs what a minute's does. */
#define CALIB_SAMPLE 65536

typedef struct server_calib {
    step_fit fit;
    step_shape sh[CALIB_SAMPLE];
    double took[CALIB_SAMPLE]; /* ns, forward and after */
    uint64_t seen;
    tps_rng rng;
} server_calib;

static void on_step(void *arg, const engine_step_obs *o) {
    server_calib *c = arg;
    step_shape sh = {.rows = o->rows,
                     .logit_rows = o->logit_rows,
                     .attended = o->attended,
                     .kv_read = o->kv_positions};
    step_fit_add(&c->fit, &sh, (double)(o->t1 - o->t0), (double)(o->t2 - o->t1));
    uint64_t at = c->seen < CALIB_SAMPLE ? c->seen : tps_rng_next(&c->rng) % (c->seen + 1);
    if (at < CALIB_SAMPLE) {
        c->sh[at] = sh;
        c->took[at] = (double)(o->t2 - o->t0);
    }
    c->seen++;
}

int server_calib_begin(server *s, engine_params *ep, tps_err *err) {
    if (!s->calibration_out) return 0;
    if (!(s->calib = calloc(1, sizeof *s->calib)))
        return tps_fail(err, TPS_ENOMEM, "out of memory");
    step_fit_init(&s->calib->fit);
    tps_rng_seed(&s->calib->rng, 36);
    ep->on_step = on_step;
    ep->on_step_arg = s->calib;
    return 0;
}

/* The sample's spread about the solved fit; none with too few steps. */
static void calib_spread(server_calib *c) {
    const size_t n = c->seen < CALIB_SAMPLE ? (size_t)c->seen : CALIB_SAMPLE;
    double *fit = malloc(sizeof *fit * (n ? n : 1)), *rows = malloc(sizeof *rows * (n ? n : 1));
    tps_err err = {{0}};
    for (size_t i = 0; fit && rows && i < n; i++) {
        fit[i] = step_fit_fwd_ns(&c->fit, &c->sh[i]) + step_fit_post_ns(&c->fit, &c->sh[i]);
        rows[i] = c->sh[i].rows;
    }
    if (!fit || !rows ||
        step_noise_fit_split(&c->fit.noise_one, &c->fit.noise, rows, c->took, fit, n, &err))
        c->fit.noise.n = c->fit.noise_one.n = 0;
    free(fit);
    free(rows);
}

void server_calib_warmup(server *s) {
    if (!s->calib) return;
    engine_stats st;
    engine_get_stats(s->eng, &st);
    if (step_prime_ok(&st.warmup)) s->calib->fit.prime = st.warmup;
}

void server_calib_end(server *s) {
    if (!s->calib) return;
    step_calib c = {.threads = s->cfg.engine.n_threads ? s->cfg.engine.n_threads
                                                       : (int)sysconf(_SC_NPROCESSORS_ONLN),
                    .machine = s->machine,
                    .n_kv = 1,
                    .kv_type = {s->cfg.engine.kv_type},
                    .source = "serve"};
    tps_err err = {{0}};
    int rc = s->model ? step_fit_solve(&s->calib->fit, &err) : TPS_EINVAL;
    if (!rc) {
        calib_spread(s->calib);
        step_calib_model_of(&c.model, s->model);
        c.fit[0] = s->calib->fit;
        rc = step_calib_write(&c, s->calibration_out, &err);
    }
    if (rc)
        fprintf(s->log, "tps serve: --save-calibration: %s\n", err.msg);
    else
        fprintf(s->log, "tps serve: calibration (%llu steps) written to %s\n",
                (unsigned long long)s->calib->fit.n, s->calibration_out);
    free(s->calib);
    s->calib = NULL;
}
