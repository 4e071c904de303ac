/* What a simulated step costs: the time of its forward pass (when its
 * tokens are stamped) and of what follows it until the next step can
 * start (sampling, events), from one of two sources:
 *
 *   calibrated: a step_fit measured on this machine for this model and KV
 *     type (tps plan calibrate, or tps serve --save-calibration);
 *   roofline (uncalibrated): the model's bytes and multiply-adds against a
 *     machine's limits (tps machine's, or --bandwidth / --int8-rate /
 *     --threads for a machine one does not have): weights streamed once
 *     per step or their multiply-adds, whichever is longer, plus the LM
 *     head on the rows that sample and attention over the positions
 *     attended, each at an efficiency below the peak that the kernels
 *     reach in practice (plan_cost.c says which and why).
 *
 * A calibration with a served phase adds what a real server and client
 * on the machine do to each step: their steps are in the fit, and their
 * spread about it is drawn per step (added to the forward time, where the
 * engine's ITL target sees it too).
 *
 * Both add the server's fixed costs outside the engine: the HTTP path of a
 * request into the queue (per request and per prompt token) and of a token
 * out to the client. Not here: the simulation (plan.h). */
#ifndef TPS_PLAN_PLAN_COST_H
#define TPS_PLAN_PLAN_COST_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/core/engine.h"
#include "engine/cost/step_fit.h"
#include "metrics/roofline.h"
#include "model/llama_model.h"
#include "base/error.h"

typedef enum plan_cost_kind { PLAN_COST_FIT = 0, PLAN_COST_ROOFLINE = 1 } plan_cost_kind;

typedef struct plan_cost {
    plan_cost_kind kind;
    step_fit fit; /* PLAN_COST_FIT: solved */
    /* PLAN_COST_ROOFLINE */
    machine_limits ml;
    double weight_bytes;     /* streamed once per step */
    engine_macs macs;        /* of a row, its LM head, an attended position */
    double kv_bytes_per_pos; /* K and V of one attended position, every layer */
    double state_bytes;      /* a sequence's recurrent state (0: no linear layers) */
    double n_vocab, n_layers;
    /* outside the engine */
    double ingress_ns;           /* a request's send to its place in the engine's queue */
    double ingress_ns_per_token; /* ... and per prompt token (parsing, tokenizing) */
    double deliver_ns;           /* a step's end to its tokens at the client */
    step_noise turnaround; /* calibrated: a closed loop's turnaround (step_calib's); n 0: none */
    bool has_steal;        /* calibrated: the hypervisor's steal while it was taken is known */
    double steal;          /* ... that share of the machine's CPU time */
    int threads;           /* kernel threads the costs are for */
    double scale;          /* every step's time (and the warm-up's) x this: plan_cost_at_steal; 1 */
    /* plan_cost_steal_series: the steal over a run, bin by bin (borrowed;
     * -1 where not read), and the mean that scale is at; n 0: none */
    const double *steal_bins;
    size_t n_steal_bins;
    double steal_bin_ns, steal_mean;
    char source[512]; /* for people and the result's config */
} plan_cost;

/* The calibration c's fit for kv_type (or, failing that, its first fit
 * with attention scaled by the KV bytes of the two types, said in source).
 * TPS_EINVAL when c was taken on another model (naming what differs). */
int plan_cost_calibrated(plan_cost *pc, const step_calib *c, const char *path, const llama_model *m,
                         uint32_t kv_type, tps_err *e);
/* The roofline estimate on a machine with limits ml. */
void plan_cost_roofline(plan_cost *pc, const machine_limits *ml, const llama_model *m,
                        uint32_t kv_type);

/* The costs of a machine whose hypervisor steals `steal` (0 <= steal < 1)
 * of its CPU time, where they were measured under pc->steal (a roofline's
 * limits under none: tps machine keeps only quiet measurements). Each
 * kernel thread needs its vCPU for a step to end (the threads meet at
 * every matrix product), so with steal s taken from each vCPU
 * independently a step runs at (1 - s)^threads of its speed; every step's
 * time is scaled by ((1 - pc->steal) / (1 - steal))^threads. Measured on
 * 2 vCPUs here: the engine's rows per half second went as (1 - s)^2.18.
 * TPS_EINVAL when a calibration does not say its own steal (a server's
 * --save-calibration, an older file). */
int plan_cost_at_steal(plan_cost *pc, double steal, const char *path, tps_err *e);

/* The costs of a machine whose hypervisor's steal went as bins[0..n) of
 * bin_s seconds each from a run's start (a tps bench result's
 * series.steal), averaging `mean` over it (its host.steal): every step at
 * the mean (plan_cost_at_steal), then each step that starts in bin k x
 * ((1 - mean) / (1 - bins[k]))^threads, so that it runs at bin k's steal.
 * Bins not read (< 0), and time past the last, stay at the mean. What a
 * mean cannot say: steal comes in bursts, and a queue near capacity grows
 * during one faster than it drains after. bins is borrowed for pc's life;
 * TPS_EINVAL as plan_cost_at_steal, or for an empty series. */
int plan_cost_steal_series(plan_cost *pc, const double *bins, size_t n, double bin_s, double mean,
                           const char *path, tps_err *e);
/* What plan_cost_steal_series scales a step starting t_ns after the run's
 * start by, beyond the fixed scale (1 without a series). */
double plan_cost_scale_at(const plan_cost *pc, uint64_t t_ns);

double plan_cost_fwd_ns(const plan_cost *pc, const step_shape *s);
double plan_cost_post_ns(const plan_cost *pc, const step_shape *s);
/* A request's send to its place in the engine's queue, for a prompt of
 * n_ids tokens, at probability u in [0, 1): from a calibration's measured
 * turnaround less the delivery when it has one (the HTTP thread and the
 * client wait for a core while the kernel threads run a step), else the
 * fixed HTTP path. */
double plan_cost_ingress_ns(const plan_cost *pc, double n_ids, double u);
/* A step's time over its cost at probability u in [0, 1): drawn once per
 * simulated step (1 without a calibration that served). */
double plan_cost_spread(const plan_cost *pc, double rows, double u);

#endif
