/* Prefix cache benchmark (issue 13): what reusing computed KV does to time
 * to first token and output tokens per second, the cache on against the
 * same engine with --no-prefix-cache, one after the other in one run.
 *
 * Workloads, each a closed loop at a fixed concurrency on the engine alone
 * (no HTTP; `tps bench --prefix-len/--turns` measures the served figures):
 *   two:     two requests one after the other, the second sharing a
 *            1000-token prefix with the first: the second's prefill time;
 *   shared:  a 1024-token system prompt shared by every request, 32 unique
 *            tokens, 64 out, concurrency 8;
 *   turns:   conversations of 6 turns at concurrency 8, each turn resending
 *            the history (earlier prompts and the generated replies) plus
 *            64 new tokens, 64 out: TTFT of turn 1 and of turns 2..6;
 *   unique:  256-token prompts nobody shares, 64 out, concurrency 8: what
 *            the cache costs when it cannot help.
 * TTFT here is engine submit -> the step that produced the first token;
 * output tok/s is every generated token / (first submit -> last finish).
 * Numbers, not pass/fail.
 *
 * usage: bench_prefix [threads (default 2)]
 * env:   TPS_BENCH_DIR (models made there when absent: 15M-q8_0.gguf,
 *        110M-q8_0.gguf), TPS_BENCH_MODELS (comma list of GGUF paths
 *        instead), TPS_BENCH_QUICK=1 (a quarter of the requests),
 *        TPS_PREFIX_WORKLOADS (e.g. "shared unique": only these),
 *        TPS_PREFIX_REPS=N (each off/on pair N times, for A B A B) */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/core/engine.h"
#include "support/bench_models.h"

#define OUT_MAX 64

typedef struct conv {
    int32_t *hist; /* prompt of the next turn */
    uint32_t n_hist, cap;
    uint32_t turn, turns, seed;
    int32_t out[OUT_MAX];
    uint32_t n_out;
} conv;

typedef struct load_spec {
    uint32_t n_convs, turns, concurrency, n_out, turn_add;
} load_spec;

typedef struct load_result {
    double *ttft_first, *ttft_later; /* ms */
    size_t n_first, n_later;
    double last_prefill_ms; /* the last request's first scheduled step -> first token */
    uint64_t out_tokens, t0, t1;
    uint64_t cached_tokens, prompt_tokens;
} load_result;

static void conv_append(conv *c, const int32_t *ids, uint32_t n) {
    if (c->n_hist + n > c->cap) {
        c->cap = (c->n_hist + n) * 2;
        c->hist = realloc(c->hist, c->cap * sizeof *c->hist);
    }
    memcpy(c->hist + c->n_hist, ids, n * sizeof *ids);
    c->n_hist += n;
}

/* The next turn's new user tokens: seeded, no BOS. */
static void conv_add_turn(conv *c, uint32_t n, uint32_t vocab) {
    int32_t *ids = malloc((n + 1) * sizeof *ids);
    bench_prompt(ids, n + 1, vocab, c->seed * 97 + c->turn);
    conv_append(c, ids + 1, n);
    free(ids);
}

static int submit(engine *e, conv *c, uint32_t n_out) {
    engine_request rq = {.prompt = c->hist, .n_prompt = c->n_hist, .max_tokens = n_out, .user = c};
    sampler_params_default(&rq.sampling);
    rq.sampling.ignore_eos = true;
    uint64_t id;
    tps_err err = {0};
    c->n_out = 0;
    if (engine_submit(e, &rq, &id, &err)) {
        fprintf(stderr, "bench_prefix: %s\n", err.msg);
        return -1;
    }
    return 0;
}

/* Runs every turn of every conversation, at most `concurrency` in flight,
 * conversations taking turns round robin. */
static int run_load(engine *e, conv *cs, const load_spec *ls, uint32_t vocab, load_result *r) {
    const uint32_t n_req = ls->n_convs * ls->turns;
    uint32_t *ready = malloc(n_req * sizeof *ready), head = 0, tail = 0;
    memset(r, 0, sizeof *r);
    r->ttft_first = calloc(n_req, sizeof(double));
    r->ttft_later = calloc(n_req, sizeof(double));
    for (uint32_t i = 0; i < ls->n_convs; i++)
        ready[tail++] = i;
    uint32_t in_flight = 0, done = 0;
    int rc = 0;
    engine_event ev[64];
    while (rc == 0 && done < n_req) {
        while (in_flight < ls->concurrency && head < tail && rc == 0) {
            rc = submit(e, &cs[ready[head++]], ls->n_out);
            in_flight++;
        }
        engine_wait(e, 1000);
        size_t k = engine_poll(e, ev, 64);
        for (size_t i = 0; i < k; i++) {
            conv *c = ev[i].user;
            if (ev[i].kind == ENGINE_EV_TOKEN) {
                if (c->n_out < OUT_MAX) c->out[c->n_out++] = ev[i].token;
                r->out_tokens++;
                continue;
            }
            const engine_timings *tm = &ev[i].timings;
            if (ev[i].finish == ENGINE_FINISH_ERROR) {
                fprintf(stderr, "bench_prefix: request failed: %s\n", ev[i].error);
                rc = -1;
            }
            double ttft = (double)(tm->t_first_token - tm->t_queued) / 1e6;
            if (c->turn == 0)
                r->ttft_first[r->n_first++] = ttft;
            else
                r->ttft_later[r->n_later++] = ttft;
            r->last_prefill_ms = (double)(tm->t_first_token - tm->t_first_scheduled) / 1e6;
            r->cached_tokens += tm->cached_tokens;
            r->prompt_tokens += tm->prompt_tokens;
            if (!r->t0 || tm->t_queued < r->t0) r->t0 = tm->t_queued;
            if (tm->t_finished > r->t1) r->t1 = tm->t_finished;
            in_flight--;
            done++;
            if (++c->turn < c->turns) {
                conv_append(c, c->out, c->n_out);
                conv_add_turn(c, ls->turn_add, vocab);
                ready[tail++] = (uint32_t)(c - cs);
            }
        }
    }
    free(ready);
    return rc;
}

static void load_result_free(load_result *r) {
    free(r->ttft_first);
    free(r->ttft_later);
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n) {
    if (!n) return 0;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double out_tps(const load_result *r) {
    return r->t1 > r->t0 ? (double)r->out_tokens / ((double)(r->t1 - r->t0) / 1e9) : 0;
}

/* Conversations whose first prompt is `shared` tokens common to all (seeded
 * by 7) and `unique` tokens of their own. */
static conv *convs_make(uint32_t n, uint32_t turns, uint32_t shared, uint32_t unique,
                        uint32_t vocab) {
    conv *cs = calloc(n, sizeof *cs);
    int32_t *buf = malloc((shared + unique + 1) * sizeof *buf);
    for (uint32_t i = 0; i < n; i++) {
        cs[i].turns = turns;
        cs[i].seed = 1000 + i;
        if (shared) {
            bench_prompt(buf, shared, vocab, 7);
            bench_prompt(buf + shared - 1, unique + 1, vocab, cs[i].seed);
            bench_prompt(buf, shared, vocab, 7); /* its last id, overwritten by the BOS above */
        } else {
            bench_prompt(buf, unique, vocab, cs[i].seed);
        }
        conv_append(&cs[i], buf, shared + unique);
    }
    free(buf);
    return cs;
}

static void convs_free(conv *cs, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        free(cs[i].hist);
    free(cs);
}

static engine *start(const bench_model *l, int threads, bool no_cache) {
    engine_params ep;
    bench_engine_params(&ep, l, threads);
    ep.no_prefix_cache = no_cache;
    engine *e = NULL;
    tps_err err = {0};
    if (engine_create(&e, &ep, &err)) {
        fprintf(stderr, "bench_prefix: %s\n", err.msg);
        return NULL;
    }
    bench_wait_kv_warm(e); /* a server that has been up a while */
    return e;
}

/* One workload with the cache off, then on; prints one line each and the
 * ratios. */
static int compare_once(const bench_model *l, int threads, const char *what, const load_spec *ls,
                        uint32_t shared, uint32_t unique) {
    const uint32_t vocab = l->m->cfg.n_vocab;
    double ttft1[2], ttft2[2], tps[2], prefill[2];
    for (int on = 0; on < 2; on++) {
        engine *e = start(l, threads, !on);
        if (!e) return -1;
        conv *cs = convs_make(ls->n_convs, ls->turns, shared, unique, vocab);
        load_result r;
        int rc = run_load(e, cs, ls, vocab, &r);
        engine_destroy(e);
        convs_free(cs, ls->n_convs);
        if (rc) {
            load_result_free(&r);
            return rc;
        }
        ttft1[on] = median(r.ttft_first, r.n_first);
        ttft2[on] = median(r.ttft_later, r.n_later);
        tps[on] = out_tps(&r);
        prefill[on] = r.last_prefill_ms;
        printf("%-8s %-5s %8u %11.1f %11.1f %11.1f %12.1f %9.0f%%\n", what, on ? "on" : "off",
               ls->n_convs * ls->turns, ttft1[on], r.n_later ? ttft2[on] : 0.0, tps[on],
               prefill[on],
               r.prompt_tokens ? 100.0 * (double)r.cached_tokens / (double)r.prompt_tokens : 0);
        fflush(stdout);
        load_result_free(&r);
    }
    printf("%-8s ratio off/on: TTFT p50 %.2fx", what, ttft1[0] / ttft1[1]);
    if (ls->turns > 1) printf(", TTFT p50 turns 2+ %.2fx", ttft2[0] / ttft2[1]);
    printf(", output t/s on/off %.2fx, last prefill %.2fx\n", tps[1] / tps[0],
           prefill[0] / prefill[1]);
    return 0;
}

/* The pair TPS_PREFIX_REPS times (default 1: off on; 2: off on off on),
 * for the workloads TPS_PREFIX_WORKLOADS names (default all). */
static int compare(const bench_model *l, int threads, const char *what, const load_spec *ls,
                   uint32_t shared, uint32_t unique) {
    const char *only = getenv("TPS_PREFIX_WORKLOADS");
    if (only && !strstr(only, what)) return 0;
    const int reps = getenv("TPS_PREFIX_REPS") ? atoi(getenv("TPS_PREFIX_REPS")) : 1;
    for (int r = 0; r < (reps > 0 ? reps : 1); r++)
        if (compare_once(l, threads, what, ls, shared, unique)) return -1;
    return 0;
}

int main(int argc, char **argv) {
    const int threads = argc > 1 ? atoi(argv[1]) : 2;
    const bool quick = getenv("TPS_BENCH_QUICK") && !strcmp(getenv("TPS_BENCH_QUICK"), "1");
    const char *dir = bench_dir();
    char models[BENCH_MAX_MODELS][BENCH_PATH_MAX];
    int n_models = bench_model_list(models);
    if (!n_models) {
        const char *presets[] = {"15M", "110M"};
        for (int i = 0; i < 2; i++) {
            snprintf(models[n_models], sizeof models[0], "%s/%s-q8_0.gguf", dir, presets[i]);
            if (bench_ensure_model(models[n_models++], presets[i], GGML_TYPE_Q8_0)) return 1;
        }
    }
    for (int i = 0; i < n_models; i++) {
        bench_model l;
        if (bench_load(&l, models[i])) return 1;
        const char *name = bench_model_name(models[i]);
        const uint32_t scale = quick ? 4 : 1;
        printf("prefix cache: %s, %d threads; TTFT and prefill in ms, medians\n", name, threads);
        printf("%-8s %-5s %8s %11s %11s %11s %12s %10s\n", "workload", "cache", "requests",
               "TTFT p50", "TTFT 2+ p50", "out t/s", "last prefill", "cached");
        const load_spec two = {.n_convs = 2, .turns = 1, .concurrency = 1, .n_out = 8};
        const load_spec shared = {
            .n_convs = 32 / scale, .turns = 1, .concurrency = 8, .n_out = OUT_MAX};
        const load_spec turns = {
            .n_convs = 32 / scale, .turns = 6, .concurrency = 8, .n_out = OUT_MAX, .turn_add = 64};
        const load_spec unique = {
            .n_convs = 32 / scale, .turns = 1, .concurrency = 8, .n_out = OUT_MAX};
        if (compare(&l, threads, "two", &two, 1000, 24) ||
            compare(&l, threads, "shared", &shared, 1024, 32) ||
            compare(&l, threads, "turns", &turns, 0, 64) ||
            compare(&l, threads, "unique", &unique, 0, 256))
            return 1;
        printf("\n");
        bench_unload(&l);
    }
    return 0;
}
