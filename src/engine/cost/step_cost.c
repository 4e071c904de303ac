#include "engine/cost/step_cost.h"

/* Per-step forgetting of past observations: their weight halves in about
 * 30 steps, so the model follows a machine whose speed drifts (thermal,
 * neighbours) without chasing one noisy step. */
#define STEP_COST_DECAY 0.977
/* An observation weighs this much against a prior point (which weighs 1):
 * a few dozen steps outvote the start-up measurement. */
#define STEP_COST_OBS_WEIGHT 0.5

void step_cost_init(step_cost *c, double attn_w) {
    *c = (step_cost){.attn_w = attn_w > 0 ? attn_w : 0, .c0_ns = 0, .c1_ns = 1e6};
}

static void add_point(step_cost *c, double w, double x, double y) {
    c->sw += w;
    c->sx += w * x;
    c->sxx += w * x * x;
    c->sy += w * y;
    c->sxy += w * x * y;
}

/* Weighted least squares over the sums; when every point has about the
 * same work (a steady decode batch) the slope is undetermined: keep it
 * and fit the intercept only. Both stay non-negative. */
static void refit(step_cost *c) {
    double mx = c->sx / c->sw, my = c->sy / c->sw;
    double var = c->sxx / c->sw - mx * mx;
    double cov = c->sxy / c->sw - mx * my;
    if (var > 1e-6 * (mx * mx + 1)) c->c1_ns = cov / var;
    if (c->c1_ns < 1) c->c1_ns = 1;
    c->c0_ns = my - c->c1_ns * mx;
    if (c->c0_ns < 0) c->c0_ns = 0;
}

void step_cost_prime(step_cost *c, double work1, double ns1, double work2, double ns2) {
    c->prior[0][0] = work1;
    c->prior[0][1] = ns1;
    c->prior[1][0] = work2;
    c->prior[1][1] = ns2;
    c->sw = c->sx = c->sxx = c->sy = c->sxy = 0;
    add_point(c, 1, work1, ns1);
    add_point(c, 1, work2, ns2);
    refit(c);
}

void step_cost_observe(step_cost *c, double work, double ns) {
    /* decay everything, then put the priors' full weight back */
    const double d = STEP_COST_DECAY;
    c->sw *= d;
    c->sx *= d;
    c->sxx *= d;
    c->sy *= d;
    c->sxy *= d;
    for (int i = 0; i < 2; i++)
        if (c->prior[i][0] > 0) add_point(c, 1 - d, c->prior[i][0], c->prior[i][1]);
    add_point(c, STEP_COST_OBS_WEIGHT, work, ns);
    refit(c);
}

uint32_t step_cost_rows_within(const step_cost *c, double pred_ns, double target_ns, uint32_t pos,
                               uint32_t max_rows) {
    /* the predicted time grows with n (rows and attention both), so the
     * largest n that fits is found by bisection */
    uint32_t lo = 0, hi = max_rows;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo + 1) / 2;
        double add = c->c1_ns * step_cost_work(c, mid, step_cost_chunk_attended(pos, mid));
        if (pred_ns + add <= target_ns)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}
