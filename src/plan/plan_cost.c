/* The cost of a simulated step (plan_cost.h): a calibrated fit, or the
 * roofline of the model's bytes and multiply-adds on a machine's limits. */
#include "plan/plan_cost.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/core/engine_setup.h" /* engine_state_bytes */
#include "engine/kv/kv_cache.h"
#include "base/ggml_type.h"

/* The HTTP path outside the engine, on a loopback connection: a request's
 * body read, parsed and tokenized before engine_submit (a fixed part and
 * one per prompt token), and a token's SSE event written and read. Both
 * are small beside a step; they matter for TTFT at low load. */
#define INGRESS_NS           150e3
#define INGRESS_NS_PER_TOKEN 0.3e3
#define DELIVER_NS           100e3

/* The roofline's efficiencies: the share of each peak the engine's kernels
 * reach, from the calibrated fits of the 15M, 110M and 1B presets on the
 * machine of docs/plan.md (the weight stream at ~80% of the measured read
 * bandwidth; int8 matrix products at ~45% of the in-register peak; fp32
 * attention over paged KV at ~25% of the FMA peak measured in ymm, which
 * tps machine now measures in zmm on AVX-512 builds: 12.5% of that, for a
 * CPU with two 512-bit FMA units). A machine unlike that one moves them:
 * the estimate is marked uncalibrated. */
#define EFF_BW   0.80
#define EFF_INT8 0.45
#define EFF_FP32 0.125
/* per step: waking the threads and joining them, per layer and matmul */
#define STEP_FIXED_NS_PER_LAYER 15e3
/* after the forward pass: sampling scans a logits row per sampling
 * sequence (spread over the threads), and a fixed part for the events */
#define POST_NS           20e3
#define POST_NS_PER_LOGIT 1.5

static void fill_common(plan_cost *pc, const llama_model *m) {
    pc->ingress_ns = INGRESS_NS;
    pc->ingress_ns_per_token = INGRESS_NS_PER_TOKEN;
    pc->deliver_ns = DELIVER_NS;
    pc->weight_bytes = (double)m->w.bytes_per_token;
    pc->macs = engine_macs_of(&m->cfg);
    pc->n_vocab = m->cfg.n_vocab;
    pc->n_layers = m->cfg.n_layers;
    pc->scale = 1;
}

static const char *kv_name(uint32_t t) {
    const ggml_type_info *i = ggml_type_get(t);
    return i ? i->name : "?";
}

int plan_cost_calibrated(plan_cost *pc, const step_calib *c, const char *path, const llama_model *m,
                         uint32_t kv_type, tps_err *e) {
    memset(pc, 0, sizeof *pc);
    step_calib_model mine;
    step_calib_model_of(&mine, m);
    const char *why = step_calib_model_differs(&c->model, &mine);
    if (why)
        return tps_fail(e, TPS_EINVAL,
                        "calibration %s was taken on another model (its %s differs: %s dim %u, %u "
                        "layers); calibrate this one (tps plan calibrate -m MODEL -o FILE)",
                        path, why, c->model.arch, c->model.dim, c->model.n_layers);
    fill_common(pc, m);
    pc->kind = PLAN_COST_FIT;
    const step_fit *f = step_calib_find(c, kv_type);
    char scaled[96] = "";
    if (f) {
        pc->fit = *f;
    } else { /* another KV type's fit, attention scaled by the bytes it reads */
        pc->fit = c->fit[0];
        const uint32_t dim = m->cfg.n_kv_heads * m->cfg.head_dim;
        double a = (double)kv_cache_row_bytes(c->kv_type[0], dim),
               b = (double)kv_cache_row_bytes(kv_type, dim);
        if (a > 0 && b > 0)
            for (int t = 0; t < 2; t++)
                pc->fit.coef[t][STEP_FIT_NF - 1] *= b / a;
        snprintf(scaled, sizeof scaled, "; %s KV not calibrated: %s's attention scaled by bytes",
                 kv_name(kv_type), kv_name(c->kv_type[0]));
    }
    pc->turnaround = c->turnaround;
    pc->has_steal = c->has_steal;
    pc->steal = c->steal;
    pc->threads = c->threads;
    char steal[48] = "";
    if (c->has_steal) snprintf(steal, sizeof steal, ", %.1f%% stolen", 100 * c->steal);
    const step_noise *z = &pc->fit.noise;
    char served[160] = "; no served steps: no spread";
    if (z->n)
        snprintf(served, sizeof served,
                 "; served steps over the fit: p10 x%.2f, p50 x%.2f, p99 x%.2f; one-row: p50 "
                 "x%.2f, p99 x%.2f",
                 step_noise_at(z, 0.1), step_noise_at(z, 0.5), step_noise_at(z, 0.99),
                 plan_cost_spread(pc, 1, 0.5), plan_cost_spread(pc, 1, 0.99));
    int len = snprintf(pc->source, sizeof pc->source,
                       "calibrated: %s (%s, %d threads, %s%s, %llu steps, median error %.1f%%%s%s)",
                       path, c->source, c->threads, c->machine.cpu, steal,
                       (unsigned long long)pc->fit.n, 100 * pc->fit.err_p50, scaled, served);
    if (len >= (int)sizeof pc->source) /* a long path: the text is cut, and says so */
        memcpy(pc->source + sizeof pc->source - 4, "...", 4);
    return 0;
}

void plan_cost_roofline(plan_cost *pc, const machine_limits *ml, const llama_model *m,
                        uint32_t kv_type) {
    memset(pc, 0, sizeof *pc);
    fill_common(pc, m);
    pc->kind = PLAN_COST_ROOFLINE;
    pc->ml = *ml;
    pc->threads = ml->threads;
    pc->kv_bytes_per_pos = engine_kv_bytes_attended(&m->cfg, kv_type, 1);
    pc->state_bytes = (double)engine_state_bytes(&m->cfg);
    snprintf(pc->source, sizeof pc->source,
             "roofline (uncalibrated): %.1f GB/s, %.0f G int8 MAC/s, %.0f GFLOP/s fp32, %d threads "
             "(%s)",
             ml->read_gbs, ml->int8_gops, ml->fp32_gflops, ml->threads, ml->cpu);
}

static double roofline_fwd(const plan_cost *pc, const step_shape *s) {
    const machine_limits *ml = &pc->ml;
    const double bw = ml->read_gbs * 1e9 * EFF_BW, r8 = ml->int8_gops * 1e9 * EFF_INT8,
                 r32 = ml->fp32_gflops * 1e9 / 2 * EFF_FP32; /* an FMA is 2 flops */
    double t_w = pc->weight_bytes / bw;
    double t_c = (s->rows * pc->macs.body + s->logit_rows * pc->macs.head) / r8;
    /* a linear layer's state: read and written once a step, whatever its context */
    double t_att = s->attended * pc->macs.per_attended / r32 +
                   (s->kv_read * pc->kv_bytes_per_pos + 2 * s->seqs * pc->state_bytes) / bw;
    return STEP_FIXED_NS_PER_LAYER * pc->n_layers + ((t_w > t_c ? t_w : t_c) + t_att) * 1e9;
}

/* How much longer a step takes at steal `to` than at `from`: the threads
 * meet at every matrix product, so each waits on its own vCPU's share
 * (plan_cost.h). */
static double steal_slowdown(double from, double to, int threads) {
    return pow((1 - from) / (1 - to), threads > 0 ? threads : 1);
}

int plan_cost_at_steal(plan_cost *pc, double steal, const char *path, tps_err *e) {
    if (!(steal >= 0 && steal < 1))
        return tps_fail(e, TPS_EINVAL, "--steal %g: a share of the CPU time, in [0, 1)", steal);
    if (pc->kind == PLAN_COST_FIT && !pc->has_steal)
        return tps_fail(e, TPS_EINVAL,
                        "--steal: %s does not say what the hypervisor stole while it was taken (a "
                        "server's --save-calibration, or a file from before tps recorded it); "
                        "take one with tps plan calibrate",
                        path);
    const double at = pc->kind == PLAN_COST_FIT ? pc->steal : 0;
    const int threads = pc->threads > 0 ? pc->threads : 1;
    pc->scale = steal_slowdown(at, steal, threads);
    pc->fit.prime.t1_ns *= pc->scale; /* a server's warm-up runs at that steal too */
    pc->fit.prime.tn_ns *= pc->scale;
    size_t n = strlen(pc->source);
    snprintf(pc->source + n, sizeof pc->source - n,
             "; at %.1f%% stolen: every step x%.3f ((1 - %.3f) / (1 - %.3f))^%d threads",
             100 * steal, pc->scale, at, steal, threads);
    return 0;
}

/* The most of a bin's CPU time counted as stolen: a bin read at (nearly)
 * all stolen would stop the simulated engine; the engine never stops for
 * a whole bin, as the bins' readings are tick counts. */
#define BIN_STEAL_MAX 0.95

int plan_cost_steal_series(plan_cost *pc, const double *bins, size_t n, double bin_s, double mean,
                           const char *path, tps_err *e) {
    if (!n || !(bin_s > 0))
        return tps_fail(e, TPS_EINVAL, "--steal-series %s: no steal read in any bin", path);
    int rc = plan_cost_at_steal(pc, mean, path, e);
    if (rc) return rc;
    pc->steal_bins = bins;
    pc->n_steal_bins = n;
    pc->steal_bin_ns = bin_s * 1e9;
    pc->steal_mean = mean;
    size_t known = 0;
    double lo = 1, hi = 0;
    for (size_t k = 0; k < n; k++) {
        if (!(bins[k] >= 0)) continue;
        known++;
        lo = bins[k] < lo ? bins[k] : lo;
        hi = bins[k] > hi ? bins[k] : hi;
    }
    size_t len = strlen(pc->source);
    snprintf(pc->source + len, sizeof pc->source - len,
             "; then as the steal went, %zu of %zu %.3g s bins read (%.0f-%.0f%%)", known, n, bin_s,
             known ? 100 * lo : 0, known ? 100 * hi : 0);
    return 0;
}

double plan_cost_scale_at(const plan_cost *pc, uint64_t t_ns) {
    if (!pc->n_steal_bins) return 1;
    size_t k = (size_t)((double)t_ns / pc->steal_bin_ns);
    if (k >= pc->n_steal_bins || !(pc->steal_bins[k] >= 0)) return 1;
    double s = pc->steal_bins[k] < BIN_STEAL_MAX ? pc->steal_bins[k] : BIN_STEAL_MAX;
    return steal_slowdown(pc->steal_mean, s, pc->threads);
}

double plan_cost_fwd_ns(const plan_cost *pc, const step_shape *s) {
    if (pc->kind == PLAN_COST_FIT) return pc->scale * step_fit_fwd_ns(&pc->fit, s);
    return pc->scale * roofline_fwd(pc, s);
}

double plan_cost_ingress_ns(const plan_cost *pc, double n_ids, double u) {
    double fixed = pc->ingress_ns;
    if (pc->turnaround.n) {
        fixed = step_noise_at(&pc->turnaround, u) - pc->deliver_ns;
        if (fixed < 0) fixed = 0;
    }
    return fixed + pc->ingress_ns_per_token * n_ids;
}

double plan_cost_spread(const plan_cost *pc, double rows, double u) {
    if (pc->kind != PLAN_COST_FIT) return 1;
    const step_fit *f = &pc->fit;
    return step_noise_at(rows <= 1 && f->noise_one.n ? &f->noise_one : &f->noise, u);
}

double plan_cost_post_ns(const plan_cost *pc, const step_shape *s) {
    if (pc->kind == PLAN_COST_FIT) return pc->scale * step_fit_post_ns(&pc->fit, s);
    int threads = pc->ml.threads > 0 ? pc->ml.threads : 1;
    return pc->scale * (POST_NS + s->logit_rows * pc->n_vocab * POST_NS_PER_LOGIT / threads);
}
