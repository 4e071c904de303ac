/* The simulated server opened from its options (plan_env.h): the model's
 * shape, the cost model and where its limits come from, the chat template,
 * the result's config.plan. Prints only the note the caller asks for. */
#include "plan/plan_env.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/result/result.h" /* --steal-series: a bench result read back */
#include "kernels/machine.h"
#include "model/tokenizer.h"
#include "base/ggml_type.h"

void plan_env_opts_default(plan_env_opts *o) {
    memset(o, 0, sizeof *o);
    engine_params_default(&o->ep);
    o->ep.itl_target_ms = ENGINE_ITL_TARGET_AUTO; /* tps serve's default */
    o->steal = -1;
}

static int threads_of(const plan_env_opts *o) {
    return o->ep.n_threads ? o->ep.n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
}

/* The machine the roofline is read against: tps machine's limits for the
 * threads, with what the options say in their place. */
static int machine_for(machine_limits *ml, const plan_env_opts *o, tps_err *e) {
    int threads = threads_of(o);
    memset(ml, 0, sizeof *ml);
    if (!(o->bandwidth > 0 && o->int8_rate > 0)) {
        int rc = machine_limits_get(ml, threads, e);
        if (rc) return rc;
    } else {
        snprintf(ml->cpu, sizeof ml->cpu, "as given");
    }
    ml->threads = threads;
    if (o->bandwidth > 0) ml->read_gbs = o->bandwidth;
    if (o->int8_rate > 0) ml->int8_gops = o->int8_rate;
    if (o->fp32_rate > 0)
        ml->fp32_gflops = o->fp32_rate;
    else if (o->int8_rate > 0)
        ml->fp32_gflops = o->int8_rate / 2;
    return 0;
}

static int cost_for(plan_cost *pc, const plan_env_opts *o, const llama_model *m, FILE *log,
                    const char *prog, tps_err *e) {
    if (o->calibration) {
        step_calib c;
        int rc = step_calib_read(&c, o->calibration, e);
        if (!rc) rc = plan_cost_calibrated(pc, &c, o->calibration, m, o->ep.kv_type, e);
        if (!rc && o->steal >= 0) rc = plan_cost_at_steal(pc, o->steal, o->calibration, e);
        int threads = threads_of(o);
        if (!rc && c.threads != threads && log)
            fprintf(log,
                    "%s: note: %s was taken with %d threads, the plan asks for %d: the times are "
                    "those of %d\n",
                    prog, o->calibration, c.threads, threads, c.threads);
        return rc;
    }
    machine_limits ml;
    int rc = machine_for(&ml, o, e);
    if (!rc) plan_cost_roofline(pc, &ml, m, o->ep.kv_type);
    if (!rc && o->steal >= 0) rc = plan_cost_at_steal(pc, o->steal, "the roofline", e);
    return rc;
}

/* --steal-series: the result's steal per bin, kept in env for its cost. */
static int steal_series_for(plan_env *env, const char *path, tps_err *e) {
    bench_result r;
    int rc = result_read_json(&r, path, e);
    if (rc) return rc;
    if (!r.series_steal || !r.nbins || !r.host.known) {
        rc = tps_fail(e, TPS_EINVAL,
                      "--steal-series %s: the result does not say what the hypervisor stole "
                      "during it (host.steal and series.steal: a plan, or a tps bench from "
                      "before they were recorded)",
                      path);
    } else if (!(env->steal_bins = malloc(r.nbins * sizeof *env->steal_bins))) {
        rc = tps_fail(e, TPS_ENOMEM, "out of memory");
    } else {
        memcpy(env->steal_bins, r.series_steal, r.nbins * sizeof *env->steal_bins);
        rc = plan_cost_steal_series(&env->cost, env->steal_bins, r.nbins, r.bin_s, r.host.steal,
                                    path, e);
    }
    result_free(&r);
    return rc;
}

/* The result's config beside the bench's: what was predicted, how. */
static json_t *plan_config(const plan_env_opts *o, const plan_server *srv) {
    const engine_params *ep = &o->ep;
    const ggml_type_info *kt = ggml_type_get(ep->kv_type);
    /* the hypervisor's steal while the calibration was taken: a run's
     * host.steal beside it says whether the machine was as shared */
    json_t *steal = srv->cost->has_steal ? json_real(srv->cost->steal) : json_null();
    return json_pack("{s:b, s:{s:s, s:s, s:b, s:o, s:{s:i, s:i, s:i, s:f, s:s, s:b, s:I}, s:s}}",
                     "predicted", 1, "plan", "model", o->model, "cost", srv->cost->source,
                     "calibrated", srv->cost->kind == PLAN_COST_FIT, "calibration_steal", steal,
                     "engine", "max_seqs", (int)ep->max_seqs, "max_batch_tokens",
                     (int)ep->max_batch_tokens, "threads", ep->n_threads, "itl_target_ms",
                     ep->itl_target_ms, "kv_type", kt ? kt->name : "?", "prefix_cache",
                     !ep->no_prefix_cache, "kv_mem", (json_int_t)ep->kv_mem, "assumes",
                     "every request generates max_tokens; the network adds a fixed latency");
}

int plan_env_open(plan_env *env, const plan_env_opts *o, uint64_t seed, FILE *log, const char *prog,
                  tps_err *e) {
    memset(env, 0, sizeof *env);
    llama_load_opts lo = {.no_repack = 1}; /* only the shape and the bytes are needed */
    int rc = llama_model_load_opts(&env->m, o->model, &lo, e);
    if (!rc) rc = tokenizer_load(&env->tok, env->m->file, e);
    if (!rc) rc = cost_for(&env->cost, o, env->m, log, prog, e);
    if (!rc && o->steal_series) rc = steal_series_for(env, o->steal_series, e);
    if (!rc) rc = chat_prompt_for_model(&env->prompt, env->m->file, env->tok, o->chat_template, e);
    if (rc) {
        plan_env_close(env);
        return rc;
    }
    env->srv = (plan_server){.m = env->m,
                             .tok = env->tok,
                             .prompt = &env->prompt,
                             .ep = o->ep,
                             .cost = &env->cost,
                             .seed = seed};
    env->config = plan_config(o, &env->srv);
    return TPS_OK;
}

void plan_env_close(plan_env *env) {
    json_decref(env->config);
    free(env->steal_bins);
    chat_prompt_free(&env->prompt);
    tokenizer_free(env->tok);
    llama_model_free(env->m);
    memset(env, 0, sizeof *env);
}

void plan_env_spec(plan_env *env, bench_spec *s, const char *model) {
    s->run = plan_run;
    s->run_arg = &env->srv;
    s->config_extra = env->config;
    s->scrape = "off";
    s->cfg.base_url = "plan:";
    if (!s->wo.tokenizer_path) s->wo.tokenizer_path = model;
}
