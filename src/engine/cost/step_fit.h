/* A fitted model of what an engine step costs on one machine for one
 * model, and the calibration file that keeps it (tps plan calibrate writes
 * one; tps serve --save-calibration writes its running one at exit;
 * tps plan reads it).
 *
 * A step's shape is the planner's: token rows, rows that want logits (the
 * LM head and sampling run on those), and positions attended summed over
 * rows. Its time is split where the engine measures it: the forward pass
 * (what step_cost.h's online model sizes prompt chunks by, and when the
 * step's tokens are stamped), and what follows it before the next step can
 * start (sampling, detokenizing, events). Each is
 *
 *     body(rows) + c_logit * logit_rows + c_att * attended + c_kv * kv_read
 *
 * with body piecewise linear in rows between knots at 1, 2, 4, ... 4096
 * (a CPU step is flat while the weight stream dominates and linear once
 * the multiply-adds do; the knots take either shape) and never falling as
 * rows grow, fitted by non-negative weighted least squares (about
 * relative error) over every step observed, with a small penalty on a
 * change of slope so that row counts never observed are extrapolated from
 * their neighbours' slope. c_logit, c_att and c_kv are non-negative. Attention has two costs: its
 * multiply-adds (one per row and position attended) and reading the K/V (once per sequence and
 * step, shared by a prompt chunk's rows): a decode step of 64 streams at 1,000 positions reads
 * 64,000 positions' K/V, a 256-row chunk at 0 reads 256, for the same order of attended positions.
 *
 * The file (text, magic "tps-calibration", version) holds the model's
 * shape it was taken on, the machine's limits and thread count, and one
 * fit per KV type measured. Not here: running steps (the engine, tps plan
 * calibrate), the roofline estimate of a machine never measured (tps
 * plan). Not thread-safe: one writer. */
#ifndef TPS_ENGINE_STEP_FIT_H
#define TPS_ENGINE_STEP_FIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/cost/step_noise.h"
#include "metrics/roofline.h"
#include "model/llama_model.h"
#include "base/error.h"

#define STEP_FIT_KNOTS 13 /* rows 1, 2, 4, ..., 4096 */
/* a one-row step, the 12 segments' cost per row, logit rows, attended, K/V read */
#define STEP_FIT_NF (STEP_FIT_KNOTS + 3)

/* One step as the planner sized it. */
typedef struct step_shape {
    double rows;       /* token rows */
    double logit_rows; /* rows that want logits */
    double attended;   /* positions attended, summed over rows */
    double kv_read;    /* K/V positions read: each sequence's context once a step */
    double seqs; /* sequences in the step: a hybrid's each read and write their recurrent state */
} step_shape;

/* The engine's warm-up on this machine (engine.c): a one-row step and an
 * n-row prompt step, ns, which prime the planner's own step-time model
 * (its ITL target and chunk sizes come from them, not from the fit); n 0:
 * not measured. */
typedef struct step_prime {
    uint32_t n;
    double t1_ns, tn_ns;
} step_prime;

typedef struct step_fit {
    uint64_t n;                           /* steps observed */
    double sw;                            /* their weight */
    double sy2;                           /* sum of weight x time^2 */
    double max_rows;                      /* the most rows a step observed had */
    double xtx[STEP_FIT_NF][STEP_FIT_NF]; /* weighted feature sums */
    double xty[2][STEP_FIT_NF];           /* ... against forward and after-forward time */
    bool solved;
    double coef[2][STEP_FIT_NF]; /* step_fit_solve's answer: [0] forward, [1] after */
    double err_p50;              /* median relative error of the forward time, if known */
    /* served steps' time over the fit (step_noise.h): one-row steps', and
     * the others' (every step's when noise_one has none); n 0: none */
    step_noise noise, noise_one;
    step_prime prime;
} step_fit;

/* Whether p is a warm-up a planner can prime with: at least 2 rows, both
 * times in (0, a minute). */
bool step_prime_ok(const step_prime *p);

void step_fit_init(step_fit *f);
/* One measured step: fwd_ns its forward pass, post_ns what came after it
 * until the engine could start the next. */
void step_fit_add(step_fit *f, const step_shape *s, double fwd_ns, double post_ns);
/* Solves for coef; TPS_EINVAL when fewer than 2 steps were observed. */
int step_fit_solve(step_fit *f, tps_err *err);
/* Predictions of a solved fit, ns (never below 0). */
double step_fit_fwd_ns(const step_fit *f, const step_shape *s);
double step_fit_post_ns(const step_fit *f, const step_shape *s);

/* ---- the calibration file ------------------------------------------------- */

#define STEP_CALIB_MAGIC   "tps-calibration"
#define STEP_CALIB_VERSION 2 /* 2: body as a one-row step and slopes per segment */
#define STEP_CALIB_MAX_KV  3

/* What a calibration was taken on: the model's shape and weight bytes. */
typedef struct step_calib_model {
    char arch[32];
    uint32_t dim, n_layers, n_heads, n_kv_heads, head_dim, ffn_dim, n_vocab;
    uint64_t weight_bytes; /* read by one step (llama_weights.bytes_per_token) */
} step_calib_model;

typedef struct step_calib {
    step_calib_model model;
    machine_limits machine; /* the limits of the machine it ran on (threads: its count) */
    int threads;            /* kernel threads the engine ran with */
    char source[32];        /* "calibrate" or "serve" */
    uint32_t n_kv;
    uint32_t kv_type[STEP_CALIB_MAX_KV]; /* GGML_TYPE_F16, F32, Q8_0 */
    step_fit fit[STEP_CALIB_MAX_KV];     /* solved */
    /* A closed loop's turnaround on this machine: a request's last token
     * stamped to the client's next request in the engine's queue (the
     * token written and read, the request sent, read, parsed, tokenized),
     * ns at step_noise_p(i); n 0: not measured. */
    step_noise turnaround;
    /* The share of the machine's CPU time the hypervisor stole while the
     * steps were measured (/proc/stat): a shared VM's steps are slower by
     * what other guests take, and a plan from this file assumes as much. */
    bool has_steal;
    double steal;
} step_calib;

void step_calib_model_of(step_calib_model *out, const llama_model *m);
/* NULL when a and b are the same model, else what differs (static text). */
const char *step_calib_model_differs(const step_calib_model *a, const step_calib_model *b);
/* The fit for kv_type, or NULL. */
const step_fit *step_calib_find(const step_calib *c, uint32_t kv_type);

int step_calib_write(const step_calib *c, const char *path, tps_err *err);
/* Reads a file step_calib_write wrote; TPS_EINVAL naming the line when it
 * does not parse, the magic or the version differs. */
int step_calib_read(step_calib *c, const char *path, tps_err *err);
/* The same from buf[0..len) (the fuzz entry point); name labels errors. */
int step_calib_parse(step_calib *c, const char *buf, size_t len, const char *name, tps_err *err);

#endif
