/* The kernels' thread pool (pool.h says why it is not OpenMP).
 *
 * One 64-bit word, `claim`, holds the job's generation (high half) and the
 * next unclaimed task (low half). A thread takes a task with one
 * compare-and-swap on that word, so a claim succeeds only while the job it
 * read is still the current one: a worker that wakes up late, after the
 * caller has finished the job alone and published the next, fails its
 * claim instead of running a stale task. The caller publishes a job in
 * three steps: close (low half CLOSED, new generation), write the job's
 * fields, open (low half 0). `done` counts finished tasks; the caller
 * returns when it reaches n_tasks. */
#include "kernels/pool.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/clock.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

#define CLOSED   UINT32_MAX
#define SPIN_NS  100000 /* a worker spins this long for the next job before sleeping */
#define SPIN_CHK 64     /* pause loops between clock reads */

typedef struct pool_worker {
    tps_pool *pool;
    pthread_t thread;
    int id;
} pool_worker;

struct tps_pool {
    int n_threads;
    uint32_t gen; /* caller's own copy of the current generation */
    _Atomic uint64_t claim;
    _Atomic(tps_pool_fn) fn;
    _Atomic(void *) arg;
    _Atomic size_t n_tasks;
    _Atomic size_t done;
    _Atomic uint32_t wake_seq; /* futex word the sleepers wait on */
    _Atomic int sleepers;
    _Atomic int stop;
    pool_worker *workers;
    int n_started;
};

static void futex_wait(_Atomic uint32_t *word, uint32_t expected) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *word) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Claims and runs tasks of the job whose claim word was last seen as c
 * (an open state of generation gen) until none is left. */
static void work_on(tps_pool *p, uint64_t c, uint32_t gen, int thread) {
    const tps_pool_fn fn = atomic_load_explicit(&p->fn, memory_order_relaxed);
    void *const arg = atomic_load_explicit(&p->arg, memory_order_relaxed);
    const size_t n = atomic_load_explicit(&p->n_tasks, memory_order_relaxed);
    for (;;) {
        if ((uint32_t)(c >> 32) != gen || (uint32_t)c >= n) return;
        if (atomic_compare_exchange_weak_explicit(&p->claim, &c, c + 1, memory_order_acq_rel,
                                                  memory_order_acquire)) {
            fn(arg, (uint32_t)c, thread);
            atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
            c = atomic_load_explicit(&p->claim, memory_order_acquire);
        }
    }
}

static void *worker_main(void *varg) {
    pool_worker *w = varg;
    tps_pool *p = w->pool;
    uint32_t seen = 0;
    uint64_t deadline = tps_now_ns() + SPIN_NS;
    for (int spins = 0;;) {
        uint64_t c = atomic_load_explicit(&p->claim, memory_order_acquire);
        const uint32_t gen = (uint32_t)(c >> 32);
        if (gen != seen && (uint32_t)c != CLOSED) {
            seen = gen;
            work_on(p, c, gen, w->id);
            deadline = tps_now_ns() + SPIN_NS;
            continue;
        }
        if (atomic_load_explicit(&p->stop, memory_order_relaxed)) return NULL;
        CPU_RELAX();
        if (++spins < SPIN_CHK) continue;
        spins = 0;
        if (tps_now_ns() < deadline) continue;
        /* sleep until the caller bumps wake_seq; re-check after announcing
         * ourselves so a job published in between is not slept through */
        const uint32_t ws = atomic_load(&p->wake_seq);
        atomic_fetch_add(&p->sleepers, 1);
        c = atomic_load(&p->claim);
        if ((uint32_t)(c >> 32) == seen && !atomic_load(&p->stop)) futex_wait(&p->wake_seq, ws);
        atomic_fetch_sub(&p->sleepers, 1);
        deadline = tps_now_ns() + SPIN_NS;
    }
}

int tps_pool_create(tps_pool **out, int n_threads, tps_err *err) {
    *out = NULL;
    if (n_threads < 1 || n_threads > 1024)
        return tps_fail(err, TPS_EINVAL, "thread pool: %d threads (1..1024 allowed)", n_threads);
    tps_pool *p = calloc(1, sizeof *p);
    if (!p) return tps_fail(err, TPS_ENOMEM, "thread pool: out of memory");
    p->n_threads = n_threads;
    atomic_init(&p->claim, (uint64_t)CLOSED);
    if (n_threads > 1) {
        p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers);
        if (!p->workers) goto fail;
        for (int i = 0; i < n_threads - 1; i++) {
            pool_worker *w = &p->workers[i];
            w->pool = p;
            w->id = i + 1;
            if (pthread_create(&w->thread, NULL, worker_main, w)) goto fail;
            p->n_started++;
        }
    }
    *out = p;
    return 0;
fail:
    tps_pool_free(p);
    return tps_fail(err, TPS_ENOMEM, "thread pool: cannot start %d threads", n_threads - 1);
}

void tps_pool_free(tps_pool *p) {
    if (!p) return;
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->wake_seq, 1);
    futex_wake_all(&p->wake_seq);
    for (int i = 0; i < p->n_started; i++)
        pthread_join(p->workers[i].thread, NULL);
    free(p->workers);
    free(p);
}

int tps_pool_threads(const tps_pool *p) {
    return p ? p->n_threads : 1;
}

void tps_pool_run(tps_pool *p, size_t n_tasks, tps_pool_fn fn, void *arg) {
    if (n_tasks == 0) return;
    if (p->n_threads == 1 || n_tasks == 1 || n_tasks >= CLOSED) {
        for (size_t i = 0; i < n_tasks; i++)
            fn(arg, i, 0);
        return;
    }
    const uint32_t gen = ++p->gen;
    const uint64_t base = (uint64_t)gen << 32;
    atomic_store(&p->claim, base | CLOSED);
    atomic_store_explicit(&p->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&p->arg, arg, memory_order_relaxed);
    atomic_store_explicit(&p->n_tasks, n_tasks, memory_order_relaxed);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    atomic_store(&p->claim, base);
    if (atomic_load(&p->sleepers) > 0) {
        atomic_fetch_add(&p->wake_seq, 1);
        futex_wake_all(&p->wake_seq);
    }
    work_on(p, base, gen, 0);
    while (atomic_load_explicit(&p->done, memory_order_acquire) < n_tasks)
        CPU_RELAX();
}
