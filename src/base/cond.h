/* Condition variables on the monotonic clock (base/clock.h): a wall-clock
 * step neither cuts a timed wait short nor stretches it. */
#ifndef TPS_BASE_COND_H
#define TPS_BASE_COND_H

#include <pthread.h>
#include <stdint.h>

/* pthread_cond_init with CLOCK_MONOTONIC; 0 or the pthread error. */
int tps_cond_init_monotonic(pthread_cond_t *cv);

/* Waits on cv (made by tps_cond_init_monotonic, mu held) for at most ns. */
void tps_cond_wait_ns(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t ns);

#endif
