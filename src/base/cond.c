/* Monotonic condition variables (cond.h). */
#include "base/cond.h"

#include <time.h>

#include "base/clock.h"

int tps_cond_init_monotonic(pthread_cond_t *cv) {
    pthread_condattr_t a;
    int rc = pthread_condattr_init(&a);
    if (rc) return rc;
    rc = pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    if (!rc) rc = pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
    return rc;
}

void tps_cond_wait_ns(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t ns) {
    uint64_t t = tps_now_ns() + ns;
    struct timespec ts = {.tv_sec = (time_t)(t / TPS_NS_PER_SEC),
                          .tv_nsec = (long)(t % TPS_NS_PER_SEC)};
    pthread_cond_timedwait(cv, mu, &ts);
}
