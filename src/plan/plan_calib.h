/* tps plan calibrate: measure what engine steps of each shape cost on this
 * machine for one model, and fit the step-cost model tps plan predicts
 * with (engine/cost/step_fit.h).
 *
 * Runs a real engine (engine.h, in this process, no HTTP) over a grid of
 * step shapes, per KV type: prompts of 16 to max_batch_tokens rows alone
 * (one logits row), and decode steps of 1 to max_seqs streams at a short
 * and a long context (each stream its own prompt, so that each reads its
 * own K/V as a server's streams do; the long context is cut so the grid's
 * prompts hold at most 8,192 positions together). Every step's shape and times come
 * from the engine's step observer; the fit is made on each shape's median
 * (the engine runs alone: a slow step is a neighbour's doing, which the
 * median ignores; tps serve --save-calibration keeps every step of a real
 * run instead), and reports its median error over the steps. Then, unless
 * served_s is 0, the served phase (plan_calib_served.h): what a real server
 * and client on this machine add to those steps. Not here: the
 * file (step_fit.h), options (src/cli/cli_plan.c). */
#ifndef TPS_PLAN_CALIB_H
#define TPS_PLAN_CALIB_H

#include <stdbool.h>
#include <stdio.h>

#include "engine/cost/step_fit.h"
#include "model/llama_model.h"
#include "model/tokenizer.h"

typedef struct plan_calib_opts {
    const llama_model *m; /* borrowed */
    const tokenizer *tok; /* borrowed */
    int n_threads;        /* kernel threads; 0: all cores */
    uint32_t kv_types[STEP_CALIB_MAX_KV];
    uint32_t n_kv;
    uint32_t max_seqs;         /* decode grid up to this many streams (default 64) */
    uint32_t max_batch_tokens; /* prefill grid up to this many rows (default 256) */
    bool quick;                /* a smaller grid (tests): fewer shapes, fewer steps */
    const char *model_path;    /* the file m was loaded from (the served phase loads it) */
    double served_s;           /* seconds of each served load (plan_calib_served.h); 0: none */
    FILE *log;                 /* one line per KV type and its fit; NULL: none */
    bool verbose;              /* and a line per shape measured */
} plan_calib_opts;

/* Fills c (model, machine limits, threads, one fit per KV type). */
int plan_calibrate(step_calib *c, const plan_calib_opts *o, tps_err *e);

#endif
