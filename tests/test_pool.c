/* The kernels' thread pool (src/kernels/pool.c): every task of a job runs
 * exactly once and the call returns only after all of them, with thread
 * ids in range; many back-to-back jobs, jobs after the workers have gone to
 * sleep, more threads than cores, and jobs of 0, 1 and many tasks. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/pool.h"

typedef struct count_job {
    _Atomic int *hits; /* per task */
    _Atomic int bad_thread;
    int n_threads;
} count_job;

static void count_task(void *arg, size_t task, int thread) {
    count_job *j = arg;
    if (thread < 0 || thread >= j->n_threads) atomic_store(&j->bad_thread, 1);
    atomic_fetch_add(&j->hits[task], 1);
}

static void run_and_check(tps_pool *p, size_t n_tasks) {
    count_job j = {.n_threads = tps_pool_threads(p)};
    j.hits = calloc(n_tasks ? n_tasks : 1, sizeof *j.hits);
    cr_assert_not_null(j.hits);
    tps_pool_run(p, n_tasks, count_task, &j);
    for (size_t i = 0; i < n_tasks; i++)
        cr_assert_eq(atomic_load(&j.hits[i]), 1, "task %zu of %zu ran %d times", i, n_tasks,
                     atomic_load(&j.hits[i]));
    cr_assert_eq(atomic_load(&j.bad_thread), 0, "a thread id outside [0, %d)", j.n_threads);
    free(j.hits);
}

Test(pool, every_task_runs_exactly_once_for_any_thread_and_task_count) {
    const int threads[] = {1, 2, 3, 8};
    const size_t tasks[] = {0, 1, 2, 3, 7, 64, 1000, 100000};
    for (size_t a = 0; a < sizeof threads / sizeof *threads; a++) {
        tps_pool *p = NULL;
        tps_err err = {0};
        cr_assert_eq(tps_pool_create(&p, threads[a], &err), 0, "%s", err.msg);
        for (size_t b = 0; b < sizeof tasks / sizeof *tasks; b++)
            run_and_check(p, tasks[b]);
        tps_pool_free(p);
    }
}

static void sleep_us(long us) {
    struct timespec ts = {.tv_sec = 0, .tv_nsec = us * 1000};
    nanosleep(&ts, NULL);
}

Test(pool, back_to_back_jobs_and_jobs_after_the_workers_sleep_all_complete) {
    tps_pool *p = NULL;
    tps_err err = {0};
    cr_assert_eq(tps_pool_create(&p, 2, &err), 0, "%s", err.msg);
    for (int i = 0; i < 20000; i++)
        run_and_check(p, (size_t)(i % 5) + 2);
    /* gaps longer than the workers' spin: every job starts with sleepers */
    for (int i = 0; i < 50; i++) {
        sleep_us(1000);
        run_and_check(p, 16);
    }
    tps_pool_free(p);
}

typedef struct sum_job {
    const double *x;
    double *part; /* per task */
    size_t per;
} sum_job;

static void sum_task(void *arg, size_t task, int thread) {
    (void)thread;
    sum_job *j = arg;
    double s = 0;
    for (size_t i = 0; i < j->per; i++)
        s += j->x[task * j->per + i];
    j->part[task] = s;
}

Test(pool, results_written_by_workers_are_visible_to_the_caller_after_run) {
    enum { TASKS = 64, PER = 1000 };
    double *x = malloc(sizeof(double) * TASKS * PER), part[TASKS];
    cr_assert_not_null(x);
    for (size_t i = 0; i < (size_t)TASKS * PER; i++)
        x[i] = (double)(i % 7);
    tps_pool *p = NULL;
    tps_err err = {0};
    cr_assert_eq(tps_pool_create(&p, 4, &err), 0, "%s", err.msg);
    for (int rep = 0; rep < 200; rep++) {
        for (int t = 0; t < TASKS; t++)
            part[t] = -1;
        sum_job j = {.x = x, .part = part, .per = PER};
        tps_pool_run(p, TASKS, sum_task, &j);
        for (size_t t = 0; t < TASKS; t++) {
            double want = 0;
            for (size_t i = 0; i < PER; i++)
                want += (double)((t * PER + i) % 7);
            cr_assert_eq(part[t], want, "rep %d task %zu", rep, t);
        }
    }
    tps_pool_free(p);
    free(x);
}

Test(pool, refuses_absurd_thread_counts_with_a_message) {
    tps_pool *p = NULL;
    tps_err err = {0};
    cr_assert_neq(tps_pool_create(&p, 0, &err), 0);
    cr_assert_null(p);
    cr_assert(strstr(err.msg, "threads") != NULL, "%s", err.msg);
    cr_assert_neq(tps_pool_create(&p, 100000, &err), 0);
}
