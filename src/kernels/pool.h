/* A small thread pool for the kernels: the caller and n_threads - 1 workers
 * claim the tasks of one job one at a time, and the job ends when every
 * task is done, not when every thread has arrived. A worker that is asleep
 * or descheduled when a job starts (a busy machine, another process on its
 * core) is simply not waited for: the threads that are running take its
 * share. That is the difference from an OpenMP parallel region, whose
 * barriers wait for the slowest thread, so that one preempted worker stalls
 * every layer of a forward pass.
 *
 * Workers spin for a short while after a job (the next matmul of a forward
 * pass usually follows within microseconds), then sleep on a futex. Not
 * here: what a task does (matmul.c, forward.c). Linux only (futex). */
#ifndef TPS_KERNELS_POOL_H
#define TPS_KERNELS_POOL_H

#include <stddef.h>

#include "base/compiler.h" /* ALWAYS_INLINE */
#include "base/error.h"

typedef struct tps_pool tps_pool;

/* fn(arg, task, thread): thread is 0 for the caller, 1 .. n_threads - 1 for
 * the workers; use it to index per-thread scratch. */
typedef void (*tps_pool_fn)(void *arg, size_t task, int thread);

/* n_threads counts the caller; 1 starts no worker. */
int tps_pool_create(tps_pool **out, int n_threads, tps_err *err);
void tps_pool_free(tps_pool *p);
/* The threads p runs a job on, counting the caller; 1 for NULL (no pool:
 * the caller alone). */
int tps_pool_threads(const tps_pool *p);

/* Runs fn for every task in [0, n_tasks) and returns when all are done.
 * Tasks may run in any order on any thread. One caller at a time; fn must
 * not call tps_pool_run on the same pool. */
void tps_pool_run(tps_pool *p, size_t n_tasks, tps_pool_fn fn, void *arg);

/* tps_pool_run where p may be NULL (a kernel context of one thread has no
 * pool, kernel_ctx_pool): then the caller runs every task, in order, as
 * thread 0. Inline, so that loop calls fn directly, as a caller's own
 * loop would. */
ALWAYS_INLINE void tps_pool_run_any(tps_pool *p, size_t n_tasks, tps_pool_fn fn, void *arg) {
    if (p) {
        tps_pool_run(p, n_tasks, fn, arg);
        return;
    }
    for (size_t t = 0; t < n_tasks; t++)
        fn(arg, t, 0);
}

#endif
