/* Sharing n independent items (rows of a batch, expert slots) among the
 * kernel pool's threads, for the forward pass, the MoE layer and the
 * matmul's activation quantizer: enough
 * tasks for the pool to balance (4 a thread), each a contiguous run of
 * items, and no pool at all below a size where waking it costs more than
 * the work.
 *
 *     static void task(void *arg, size_t t, int thread) {
 *         const job *j = arg;
 *         for (size_t i = t * j->per_task; i < pool_rows_end(t, j->per_task, j->n); i++) ...
 *     }
 *     pool_rows_run(pool, j->n, &j->per_task, 16, task, &j);
 *
 * Not here: what an item does, the pool itself (kernels/pool.h). */
#ifndef TPS_KERNELS_POOL_ROWS_H
#define TPS_KERNELS_POOL_ROWS_H

#include <stddef.h>

#include "kernels/pool.h"

/* The end of task t's run of items: min((t + 1) * per_task, n). */
static inline size_t pool_rows_end(size_t t, size_t per_task, size_t n) {
    return (t + 1) * per_task < n ? (t + 1) * per_task : n;
}

/* Sets *per_task and runs task(arg, t, thread) for every run of items in
 * [0, n): as one task on the calling thread when there is no pool or
 * n < min_on_pool, else on the pool. */
static inline void pool_rows_run(tps_pool *pool, size_t n, size_t *per_task, size_t min_on_pool,
                                 tps_pool_fn task, void *arg) {
    *per_task = n;
    if (!pool || n < min_on_pool) {
        task(arg, 0, 0);
        return;
    }
    const size_t n_tasks = 4 * (size_t)tps_pool_threads(pool);
    *per_task = (n + n_tasks - 1) / n_tasks;
    tps_pool_run(pool, (n + *per_task - 1) / *per_task, task, arg);
}

#endif
