/* tps serve --save-calibration FILE: every step the engine runs while
 * serving feeds a step-cost fit (engine/step_fit.h) through the engine's
 * step observer; at exit the fit is written with the model's shape and
 * the machine's limits, for tps plan --calibration. The fit is written by
 * the engine thread only and read after that thread has stopped. */
#include <stdlib.h>
#include <unistd.h>

#include "engine/step_fit.h"
#include "server/server_internal.h"

static void on_step(void *arg, const engine_step_obs *o) {
    step_shape sh = {.rows = o->rows,
                     .logit_rows = o->logit_rows,
                     .attended = o->attended,
                     .kv_read = o->kv_positions};
    step_fit_add(arg, &sh, (double)(o->t1 - o->t0), (double)(o->t2 - o->t1));
}

int server_calib_begin(server *s, engine_params *ep, tps_err *err) {
    if (!s->calibration_out) return 0;
    if (!(s->calib = calloc(1, sizeof *s->calib)))
        return tps_fail(err, TPS_ENOMEM, "out of memory");
    step_fit_init(s->calib);
    ep->on_step = on_step;
    ep->on_step_arg = s->calib;
    return 0;
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
    int rc = s->model ? step_fit_solve(s->calib, &err) : TPS_EINVAL;
    if (!rc) {
        step_calib_model_of(&c.model, s->model);
        c.fit[0] = *s->calib;
        rc = step_calib_write(&c, s->calibration_out, &err);
    }
    if (rc)
        fprintf(s->log, "tps serve: --save-calibration: %s\n", err.msg);
    else
        fprintf(s->log, "tps serve: calibration (%llu steps) written to %s\n",
                (unsigned long long)s->calib->n, s->calibration_out);
    free(s->calib);
    s->calib = NULL;
}
