/* libFuzzer harness for the readers of tps plan's inputs: a calibration
 * file (engine/cost/step_fit.h) and an engine trace to replay (plan/plan_replay.h).
 * Any bytes must parse or fail with a message; a calibration that parses
 * must predict a finite time for any step. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cost/step_fit.h"
#include "plan/plan_replay.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* A private copy of exactly `size` bytes so ASan catches any overread. */
    char *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    tps_err err;
    step_calib c;
    if (step_calib_parse(&c, buf, size, "fuzz", &err) == 0) {
        for (uint32_t i = 0; i < c.n_kv; i++) {
            step_shape s = {37, 5, 12345, 678, 5};
            double t = step_fit_fwd_ns(&c.fit[i], &s) + step_fit_post_ns(&c.fit[i], &s);
            if (!isfinite(t)) abort();
        }
    }
    plan_replay r;
    if (plan_replay_parse(&r, buf, size, "fuzz", &err) == 0) plan_replay_free(&r);
    free(buf);
    return 0;
}
