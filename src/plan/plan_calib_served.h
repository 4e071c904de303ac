/* tps plan calibrate's served phase: the model served by a real tps
 * server on a loopback port, a real bench client against it, and every
 * step the engine ran while serving kept. Where the kernel threads fill
 * the cores, the HTTP thread (a write per token) and the client (a read
 * and a parse per token) take their time from the steps, and a thread
 * descheduled for a time slice makes a step late: the engine alone over
 * the grid never shows either, and a server's throughput and latency
 * percentiles are made of both. Not here: the grid and the fit
 * (plan_calib.c), the spread (engine/cost/step_noise.h). */
#ifndef TPS_PLAN_CALIB_SERVED_H
#define TPS_PLAN_CALIB_SERVED_H

#include <stddef.h>

#include "engine/cost/step_fit.h"
#include "plan/plan_calib.h"

typedef struct served_steps {
    step_shape *sh;
    double *fwd, *post; /* ns */
    size_t n;
    step_noise turnaround; /* a request's end to the next one queued, ns (step_calib's) */
    step_prime prime;      /* the served engine's warm-up (from its trace) */
} served_steps;

/* Serves o->model_path with kv_type and o's engine options and runs three
 * closed loads of o->served_s seconds each against it (one stream; a few
 * with longer prompts, their chunks beside decodes; many), keeping every
 * step after the server's warm-up in *out (freed with served_steps_free),
 * and the closed loops' turnarounds from the engine's trace. */
int plan_calib_served(served_steps *out, const plan_calib_opts *o, uint32_t kv_type, tps_err *e);
void served_steps_free(served_steps *s);

#endif
