/* A cost model of one engine step, kept calibrated from the steps the
 * engine measures, so the scheduler can size prompt chunks to keep a step
 * under the inter-token-latency target (--itl-target-ms).
 *
 * A step's time is modelled as c0 + c1 * work, where work counts token
 * rows plus attention: work = rows + attn_w * attended, attended being the
 * sum over rows of the positions each row attends to. c0 is what a step
 * costs whatever its size (streaming every weight once, thread wake-ups);
 * c1 is a row's share (its multiply-adds). attn_w converts an attended
 * position into row-equivalents from the model's shape (fixed at create).
 *
 * Calibration: two measured prior points (a one-row step and a many-row
 * step, measured at engine start) that never decay, plus every step
 * observed since, exponentially forgotten (half-life ~ 30 steps), fitted by
 * weighted least squares. Engine-thread only; no locking. */
#ifndef TPS_STEP_COST_H
#define TPS_STEP_COST_H

#include <stdint.h>

/* The floor of the automatic ITL target (engine.h, ENGINE_ITL_TARGET_AUTO),
 * which the scheduler sets at start (planner.h, sched_prime). The automatic
 * target is 3 x a one-row step: at one stream that keeps a prompt-carrying
 * step within 3x the ITL the stream otherwise sees. The
 * floor only guards tiny models, whose one-row step is well under a
 * millisecond (docs/performance.md, "The automatic ITL target's floor",
 * has the measurement that set it). */
#define ENGINE_ITL_TARGET_FLOOR_MS 5.0

typedef struct step_cost {
    double attn_w; /* row-equivalents per attended position */
    double c0_ns, c1_ns;
    /* weighted sums over observations (priors included): weight, x, x^2, y, xy */
    double sw, sx, sxx, sy, sxy;
    double prior[2][2]; /* (work, ns) of the two start-up measurements */
} step_cost;

/* attn_w from the model: multiply-adds per attended position per row
 * (QK and AV over every layer) against those of a row's weights, scaled
 * by how much slower the fp32 attention runs than the int8 matmuls. */
void step_cost_init(step_cost *c, double attn_w);
/* Sets the priors from two measured steps (work1 < work2) and refits. */
void step_cost_prime(step_cost *c, double work1, double ns1, double work2, double ns2);
void step_cost_observe(step_cost *c, double work, double ns);

static inline double step_cost_work(const step_cost *c, double rows, double attended) {
    return rows + c->attn_w * attended;
}
static inline double step_cost_predict(const step_cost *c, double work) {
    return c->c0_ns + c->c1_ns * work;
}

/* Positions attended by n prompt rows starting at position pos (row i
 * attends pos + i + 1 positions). */
static inline double step_cost_chunk_attended(uint32_t pos, uint32_t n) {
    return (double)n * pos + (double)n * (n + 1) / 2.0;
}

/* The most prompt rows (at most max_rows) a chunk starting at pos can
 * have so that a step already predicted to take pred_ns stays within
 * target_ns; 0 when none fit. */
uint32_t step_cost_rows_within(const step_cost *c, double pred_ns, double target_ns, uint32_t pos,
                               uint32_t max_rows);

#endif
