/* The simulated server tps plan predicts with, opened from the options that
 * describe it: the model (its shape and tokenizer; its weights are not
 * read), the cost model (a calibration, else the roofline of this
 * machine's limits or the rates given, at an optional steal share or a
 * run's steal series), the chat template tps serve would use, and the
 * engine parameters. tps plan and tps sweep --plan both open one and make
 * a bench spec run on it (plan_env_spec), so a prediction is asked exactly
 * as the run it predicts.
 *
 * Not here: parsing the options (src/cli/cli_plan.c), the simulation
 * (plan.h), printing beyond the notes a caller asks for. */
#ifndef TPS_PLAN_PLAN_ENV_H
#define TPS_PLAN_PLAN_ENV_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "bench/experiment/bench_spec.h"
#include "plan/plan.h"
#include "base/error.h"

/* What the simulated server is made from (tps plan's model, cost and
 * server options). Strings borrowed; they must outlive plan_env_open. */
typedef struct plan_env_opts {
    const char *model;         /* the GGUF (required) */
    const char *calibration;   /* step costs measured (tps plan calibrate); NULL: the roofline */
    const char *chat_template; /* as tps serve's --chat-template; NULL: the model's */
    const char *steal_series;  /* a bench result whose series.steal the steps follow; NULL */
    double bandwidth, int8_rate, fp32_rate; /* roofline limits given (> 0), else the machine's */
    double steal;                           /* < 0: as calibrated */
    engine_params ep;                       /* the engine tps serve would run */
} plan_env_opts;

/* tps serve's engine defaults (its ITL target automatic), as calibrated. */
void plan_env_opts_default(plan_env_opts *o);

typedef struct plan_env {
    struct llama_model *m;
    struct tokenizer *tok;
    plan_cost cost;
    chat_prompt prompt; /* the chat template tps serve would use */
    plan_server srv;
    json_t *config;     /* the result's config.plan; owned */
    double *steal_bins; /* --steal-series: the run's steal per bin (cost borrows it) */
} plan_env;

/* The model loaded (shape only), the cost model, the chat template and the
 * server; seed is the simulated server's (the spec's). A note for the user
 * (a calibration taken with other threads) goes to log as "PROG: note:
 * ..."; log may be NULL. TPS_EINVAL for options that do not fit (an
 * unknown chat template, a result without a steal series), another code
 * when a file cannot be read; *env is then empty. */
int plan_env_open(plan_env *env, const plan_env_opts *o, uint64_t seed, FILE *log, const char *prog,
                  tps_err *e);
void plan_env_close(plan_env *env);

/* Makes spec s run on env's simulated server: a prediction, not a request
 * (no URL, no scrape; the model's tokenizer sizes the prompts unless the
 * spec names one). s borrows env: it must outlive s's runs. */
void plan_env_spec(plan_env *env, bench_spec *s, const char *model);

#endif
