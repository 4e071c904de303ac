/* tps serve's step windows against the machine's read bandwidth
 * (server_window.h). */
#include "server/http/server_window.h"

#include <stdio.h>

#include "kernels/machine.h"

int server_window_saw(server_window *start, const server_window *now, machine_limits *m,
                      size_t (*llc)(void), const char *model, double *gbs, tps_err *err) {
    if (now->step_s < start->step_s || now->bytes < start->bytes || now->steps < start->steps) {
        *start = *now; /* totals never go back: a new engine, a new window */
        return 0;
    }
    const double secs = now->step_s - start->step_s, bytes = now->bytes - start->bytes;
    const uint64_t steps = now->steps - start->steps;
    if (secs < SERVER_WINDOW_MIN_S || !steps) return 0;
    *start = *now;
    const double read_gbs = bytes / secs / 1e9;
    if (gbs) *gbs = read_gbs;
    if (read_gbs <= m->read_gbs) return 0; /* the usual case: no file read */
    char window[320];
    snprintf(window, sizeof window, "step window of tps serve -m %s", model ? model : "?");
    return machine_limits_saw(m, read_gbs, bytes / (double)steps, llc(), window, err);
}
