/* bench_run (bench.h): the run's event loops (client.c), one thread each,
 * started on one origin; a progress bar drawn from their counters while
 * they run; their records merged into the run's (run_merge.h). Not here:
 * the loop itself (client.c), metrics (result.c). */
#include <curl/curl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/client/bench.h"
#include "bench/client/sched_stat.h"
#include "bench/client/client_loop.h"
#include "bench/client/run_merge.h"
#include "base/clock.h"
#include "base/cond.h"
#include "base/grow.h"

#define STREAMS_PER_LOOP 64u /* what one loop carries before another pays off */
#define MAX_LOOPS        256u

void bench_run_free(bench_run_out *out) {
    for (size_t i = 0; i < out->n; i++)
        bench_record_free(&out->recs[i]);
    free(out->recs);
    out->recs = NULL;
    out->n = 0;
    free(out->host_ticks);
    out->host_ticks = NULL;
    out->n_host_ticks = 0;
}

static uint32_t usable_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return (uint32_t)CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (uint32_t)n : 1;
}

uint32_t bench_client_threads_auto(const bench_config *cfg, const workload *wl) {
    if (wl && wl->turns) return 1;
    uint32_t conc = cfg->concurrency ? cfg->concurrency : 1;
    uint32_t n = (conc + STREAMS_PER_LOOP - 1) / STREAMS_PER_LOOP, cores = usable_cores();
    if (n > cores) n = cores;
    if (n > conc) n = conc;
    if (n > MAX_LOOPS) n = MAX_LOOPS;
    return n ? n : 1;
}

static int check_run(const bench_config *cfg, const workload *wl, tps_err *e) {
    if (!wl || wl->n == 0) return tps_fail(e, TPS_EINVAL, "the workload has no requests");
    if (wl->timed && cfg->rate > 0)
        return tps_fail(e, TPS_EINVAL,
                        "--rate does not apply to a trace: its timestamps say when each request "
                        "is sent (--trace-speed scales them)");
    if (!cfg->requests && !(cfg->duration_s > 0) && !wl->turns && !wl->timed)
        return tps_fail(e, TPS_EINVAL, "give --requests N or --duration S: a run must be bounded");
    if (cfg->concurrency == 0) return tps_fail(e, TPS_EINVAL, "--concurrency must be >= 1");
    if (wl->turns && cfg->rate > 0)
        return tps_fail(e, TPS_EINVAL,
                        "--rate does not apply to conversations (--turns): each sends its next "
                        "turn when its reply is in and its think time is over");
    if (wl->turns && cfg->client_threads > 1)
        return tps_fail(e, TPS_EINVAL,
                        "--client-threads %u with --turns: a multi-turn run has one event loop "
                        "(its conversations take turns in one place); drop --client-threads",
                        cfg->client_threads);
    if (cfg->client_threads > cfg->concurrency)
        return tps_fail(e, TPS_EINVAL,
                        "--client-threads %u is more than the %u connections (--concurrency): "
                        "each event loop needs one",
                        cfg->client_threads, cfg->concurrency);
    if (cfg->client_threads > MAX_LOOPS)
        return tps_fail(e, TPS_EINVAL, "--client-threads %u: at most %u", cfg->client_threads,
                        MAX_LOOPS);
    return TPS_OK;
}

/* ---- the loops' threads ------------------------------------------------------------------- */

typedef struct loop_slot {
    bench_loop *loop;
    bench_loop_progress prog;
    pthread_t th;
    bool started;
    int rc;
    tps_err err;
    struct pool *pool;
    bool has_runq; /* the thread's run-queue wait during its run is known */
    double runq_s;
} loop_slot;

typedef struct pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint32_t done; /* loops that returned */
} pool;

static void *loop_main(void *arg) {
    loop_slot *s = arg;
    sched_stat s0, s1; /* each loop thread reads its own */
    const bool has0 = sched_stat_read(&s0);
    s->rc = bench_loop_run(s->loop, &s->err);
    s->has_runq = has0 && sched_stat_read(&s1);
    s->runq_s = s->has_runq ? (double)(s1.runq_ns - s0.runq_ns) / 1e9 : 0;
    pthread_mutex_lock(&s->pool->mu);
    s->pool->done++;
    pthread_cond_signal(&s->pool->cv);
    pthread_mutex_unlock(&s->pool->mu);
    return NULL;
}

static void draw_progress(const loop_slot *sl, uint32_t n, const bench_config *cfg,
                          uint64_t planned, uint64_t now, uint64_t t0, bool last) {
    uint64_t ok = 0, failed = 0, toks = 0, inflight = 0;
    for (uint32_t i = 0; i < n; i++) {
        ok += atomic_load_explicit(&sl[i].prog.completed, memory_order_relaxed);
        failed += atomic_load_explicit(&sl[i].prog.failed, memory_order_relaxed);
        toks += atomic_load_explicit(&sl[i].prog.out_tokens, memory_order_relaxed);
        inflight += atomic_load_explicit(&sl[i].prog.in_flight, memory_order_relaxed);
    }
    double el = tps_ns_to_s(now - t0), frac = 0;
    if (planned) frac = (double)(ok + failed) / (double)planned;
    if (cfg->duration_s > 0) {
        double f2 = el / cfg->duration_s;
        frac = planned ? (frac > f2 ? frac : f2) : f2;
    }
    if (frac > 1) frac = 1;
    char bar[31];
    int fill = (int)(frac * 30);
    for (int i = 0; i < 30; i++)
        bar[i] = i < fill ? '=' : ' ';
    bar[30] = 0;
    fprintf(stderr, "\r[%s] %5.1f s  %llu ok  %llu failed  %llu in flight  %llu output tok ", bar,
            el, (unsigned long long)ok, (unsigned long long)failed, (unsigned long long)inflight,
            (unsigned long long)toks);
    if (last) fprintf(stderr, "\r%*s\r", 100, "");
    fflush(stderr);
}

/* Waits for every loop, drawing the progress bar every 200 ms if asked. */
/* This machine's counters now, appended to the run's readings (a reading
 * that fails, or memory that runs out, leaves them as they were). */
typedef struct tick_list {
    cpu_tick *v;
    size_t n, cap;
} tick_list;

static void take_tick(tick_list *l, const cpu_sample *s) {
    if (!s->ok || TPS_GROW(l->v, l->cap, l->n + 1, 64)) return;
    l->v[l->n++] = (cpu_tick){.t_ns = tps_now_ns(), .total = s->total, .steal = s->steal};
}

static void wait_loops(pool *p, const loop_slot *sl, uint32_t n, const bench_config *cfg,
                       uint64_t planned, uint64_t t0, tick_list *ticks) {
    pthread_mutex_lock(&p->mu);
    uint64_t last_tick = tps_now_ns();
    while (p->done < n) {
        tps_cond_wait_ns(&p->cv, &p->mu, HOST_TICK_MS * TPS_NS_PER_MS);
        if (cfg->progress && p->done < n)
            draw_progress(sl, n, cfg, planned, tps_now_ns(), t0, false);
        if (tps_now_ns() - last_tick >= HOST_TICK_MS * TPS_NS_PER_MS) {
            cpu_sample s;
            cpu_sample_take(&s);
            take_tick(ticks, &s);
            last_tick = tps_now_ns();
        }
    }
    pthread_mutex_unlock(&p->mu);
    if (cfg->progress) draw_progress(sl, n, cfg, planned, tps_now_ns(), t0, true);
}

/* Each loop on its share of the --concurrency connections. */
static int new_loops(loop_slot *sl, uint32_t n, pool *p, bench_shared *sh, tps_err *e) {
    const uint32_t conc = sh->cfg->concurrency;
    int rc = TPS_OK;
    for (uint32_t i = 0; i < n && !rc; i++) {
        sl[i].pool = p;
        uint32_t conns = conc / n + (i < conc % n);
        rc = bench_loop_new(&sl[i].loop, sh, i, conns, &sl[i].prog, e);
    }
    return rc;
}

/* One thread per loop; *started of them began. On a failure the others are
 * told to stop (they still have to be waited for). */
static int start_loops(loop_slot *sl, uint32_t n, bench_shared *sh, uint32_t *started, tps_err *e) {
    *started = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (pthread_create(&sl[i].th, NULL, loop_main, &sl[i]) != 0) {
            atomic_store(&sh->stop, true);
            return tps_fail(e, TPS_EIO, "cannot start event loop thread %u of %u", i + 1, n);
        }
        sl[i].started = true;
        (*started)++;
    }
    return TPS_OK;
}

/* Joins the started loops; rc, or else the first loop's error. */
static int join_loops(loop_slot *sl, uint32_t n, int rc, tps_err *e) {
    for (uint32_t i = 0; i < n; i++) {
        if (!sl[i].started) continue;
        pthread_join(sl[i].th, NULL);
        if (sl[i].rc && !rc) {
            rc = sl[i].rc;
            *e = sl[i].err;
        }
    }
    return rc;
}

/* The total the progress bar counts towards: the run's planned requests, or
 * a multi-turn run's turns (0: none known, the duration alone). */
static uint64_t progress_total(const bench_config *cfg, const workload *wl, uint64_t planned) {
    if (!wl->turns) return planned;
    planned = 0;
    for (size_t i = 0; i < wl->conversations; i++)
        planned += workload_conv_turns(wl, i);
    if (cfg->requests && cfg->requests < planned) planned = cfg->requests;
    return planned;
}

/* The loops' records into out, with the worst loop's run-queue wait. */
static int collect_loops(bench_run_out *out, loop_slot *sl, bench_run_out *parts, uint32_t n,
                         tps_err *e) {
    for (uint32_t i = 0; i < n; i++)
        bench_loop_take(sl[i].loop, &parts[i]);
    int rc = bench_run_merge(out, parts, n, e);
    if (rc) return rc;
    out->has_runq = true;
    for (uint32_t i = 0; i < n; i++) {
        out->has_runq &= sl[i].has_runq;
        if (sl[i].runq_s > out->client_runq_s) out->client_runq_s = sl[i].runq_s;
    }
    return TPS_OK;
}

/* Wall-clock time: a label only (durations use the monotonic clock). */
static int64_t wall_now_ns(void) {
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    return (int64_t)wall.tv_sec * 1000000000 + wall.tv_nsec;
}

/* ---- the run -------------------------------------------------------------------------------- */

int bench_run(bench_run_out *out, const bench_config *cfg, const workload *wl, tps_err *e) {
    memset(out, 0, sizeof *out);
    int rc = check_run(cfg, wl, e);
    if (rc) return rc;
    const uint32_t n =
        cfg->client_threads ? cfg->client_threads : bench_client_threads_auto(cfg, wl);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return tps_fail(e, TPS_EIO, "curl_global_init failed");

    bench_shared sh = {
        .cfg = cfg, .wl = wl, .n_loops = n, .planned = cfg->requests, .t0_unix_ns = wall_now_ns()};
    /* a trace sends each item once, at its time: it bounds the run itself */
    if (wl->timed && (!sh.planned || sh.planned > wl->n)) sh.planned = wl->n;
    atomic_init(&sh.next_seq, 0);
    atomic_init(&sh.stop, false);
    pool p = {.done = 0};
    pthread_mutex_init(&p.mu, NULL);
    tps_cond_init_monotonic(&p.cv);
    loop_slot *sl = calloc(n, sizeof *sl);
    bench_run_out *parts = calloc(n, sizeof *parts);
    if (!sl || !parts) {
        rc = tps_fail(e, TPS_ENOMEM, "out of memory");
        goto done;
    }
    if ((rc = new_loops(sl, n, &p, &sh, e))) goto done;

    sh.t0 = tps_now_ns(); /* after every loop's set-up: start-up is not the run */
    /* the wall-clock label read beside the origin, not before set-up (which
     * can take milliseconds): a capture or a server log is matched through it */
    sh.t0_unix_ns = wall_now_ns();
    cpu_sample host0, host1;
    tick_list ticks = {0};
    cpu_sample_take(&host0);
    take_tick(&ticks, &host0);
    uint32_t started;
    rc = start_loops(sl, n, &sh, &started, e);
    wait_loops(&p, sl, started, cfg, progress_total(cfg, wl, sh.planned), sh.t0, &ticks);
    cpu_sample_take(&host1);
    take_tick(&ticks, &host1);
    if (!(rc = join_loops(sl, n, rc, e))) rc = collect_loops(out, sl, parts, n, e);
    if (!rc) {
        out->host = cpu_contention_between(&host0, &host1);
        if (host1.total - host0.total < CPU_TICKS_MIN) out->host.known = false; /* too short */
        out->host_ticks = ticks.v;
        out->n_host_ticks = ticks.n;
    } else {
        free(ticks.v);
    }

done:
    for (uint32_t i = 0; sl && i < n; i++)
        bench_loop_free(sl[i].loop);
    for (uint32_t i = 0; parts && i < n; i++)
        bench_run_free(&parts[i]);
    free(sl);
    free(parts);
    pthread_cond_destroy(&p.cv);
    pthread_mutex_destroy(&p.mu);
    curl_global_cleanup();
    if (rc) bench_run_free(out);
    return rc;
}
