/* Offline engine benchmark (issue 8): what moves tokens per second.
 *
 * 1. generate-style figures per model, as llama-bench defines them: prefill
 *    of a 512-token prompt (pp512), and decode of 128 tokens after a 1-token
 *    prompt (tg128), each at batch 1, with the weight bytes read
 *    per token x tokens/s as GB/s (and as a fraction of the machine's read
 *    bandwidth when TPS_MACHINE_READ_GBS is set; scripts/bench.sh sets it
 *    from bench_machine);
 * 2. the batched decode curve on the first model: N sequences of 128 prompt
 *    + 128 output tokens submitted together, N = 1, 2, 4, ... 64, printing
 *    aggregate decode tokens/s, mean decode step time and tokens/s per
 *    sequence, and the N=32 / N=1 ratio.
 *
 * Decode window of the curve: from the step that gave the last sequence its
 * first token (every prompt is prefilled) to the last token; every step in
 * it decodes all N sequences, as llama-batched-bench's TG phase does. The
 * models are the `110M` preset made with model_make() (seeded random weights,
 * same cost as a trained model) in TPS_BENCH_DIR (default /tmp/tps-bench)
 * when absent. Numbers, not pass/fail.
 *
 * usage: bench_engine [threads (default 2)] [max N (default 64)] [first N (default 1)]
 * env:   TPS_BENCH_DIR, TPS_MACHINE_READ_GBS, TPS_BENCH_MODELS (comma list of
 *        GGUF paths for part 1 instead of the 110M q8_0 and q4_0 files),
 *        TPS_REPACK=0 (borrow the mmapped weights; default: repack at load),
 *        TPS_BENCH_KV=f16|f32|q8_0 (KV cache type; default f16),
 *        TPS_BENCH_TEMP=T (sampling temperature; default 0, greedy: llama-bench
 *        and llama-batched-bench sample nothing, so a full-vocabulary draw,
 *        2-3% of a 32-sequence step at 110M, would be ours alone),
 *        TPS_BENCH_PP=N (the prefill's prompt length, as llama-bench -p N;
 *        default 512) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/core/engine.h"
#include "model/llama_model.h"
#include "model/model_make.h"
#include "model/tokenizer.h"
#include "support/bench_models.h"

#define CURVE_PROMPT 128
#define CURVE_OUTPUT 128
#define PP_TOKENS    512 /* unless TPS_BENCH_PP says */
#define PP_MAX       32768
#define TG_TOKENS    128

typedef struct run_result {
    double prefill_tps;    /* batch 1: prompt tokens / (first token - first scheduled) */
    double decode_tps;     /* aggregate, over the decode window */
    double step_ms;        /* mean decode step in the window */
    double run_output_tps; /* all output tokens / (first submit -> last done) */
    size_t decode_steps;
} run_result;

/* TPS_BENCH_TEMP, or 0 (greedy); a value that is not a number is an
 * error rather than a silent greedy run (the engine checks the range). */
static int bench_temperature(float *out) {
    const char *temp = getenv("TPS_BENCH_TEMP");
    *out = 0.0f;
    if (!temp) return 0;
    char *end;
    *out = strtof(temp, &end);
    if (end == temp || *end) {
        fprintf(stderr, "bench_engine: TPS_BENCH_TEMP must be a number, not '%s'\n", temp);
        return -1;
    }
    return 0;
}

/* TPS_BENCH_PP, or PP_TOKENS; anything but a length in 1 .. PP_MAX is an
 * error, not a pp512 run under another name. */
static int bench_pp(uint32_t *out) {
    const char *v = getenv("TPS_BENCH_PP");
    *out = PP_TOKENS;
    if (!v) return 0;
    char *end;
    const unsigned long n = strtoul(v, &end, 10);
    if (end == v || *end || n < 1 || n > PP_MAX) {
        fprintf(stderr, "bench_engine: TPS_BENCH_PP must be a prompt length 1 .. %d, not '%s'\n",
                PP_MAX, v);
        return -1;
    }
    *out = (uint32_t)n;
    return 0;
}

/* Submits n_seqs requests together and drains every event. */
static int run(const bench_model *l, int threads, uint32_t n_seqs, size_t n_prompt, uint32_t n_out,
               uint32_t batch_tokens, run_result *res) {
    engine_params ep;
    bench_engine_params(&ep, l, threads);
    ep.max_seqs = n_seqs;
    ep.max_batch_tokens = batch_tokens;
    ep.kv_tokens = n_seqs * (uint32_t)(n_prompt + n_out + 32);
    /* The whole pool resident before the clock starts, as llama.cpp's KV
     * buffer is (cleared when its context is made). By default only an
     * eighth of the pool (at least 64 MiB) is, and 32 sequences growing
     * into the rest paid 2 MiB page faults inside the timed decode (perf:
     * 3.8% of the run in store_row's faults). */
    ep.kv_prefault = true;
    const char *kv = getenv("TPS_BENCH_KV");
    if (kv && !strcmp(kv, "q8_0")) ep.kv_type = GGML_TYPE_Q8_0;
    if (kv && !strcmp(kv, "f32")) ep.kv_type = GGML_TYPE_F32;
    tps_err err = {0};
    engine *e = NULL;
    if (engine_create(&e, &ep, &err)) {
        fprintf(stderr, "bench_engine: %s\n", err.msg);
        return -1;
    }
    bench_wait_kv_warm(e);
    int32_t *ids = malloc(sizeof(int32_t) * n_prompt);
    size_t cap = (size_t)n_seqs * n_out + 16, n_tok = 0;
    uint64_t *t_tok = malloc(sizeof(uint64_t) * cap);
    uint64_t t_submit = 0, t_last_first = 0, t_first_sched = 0, t_first_tok = 0, t_end = 0;
    int rc = 0;
    for (uint32_t s = 0; s < n_seqs && rc == 0; s++) {
        bench_prompt(ids, n_prompt, l->m->cfg.n_vocab, s + 1);
        engine_request rq = {.prompt = ids, .n_prompt = n_prompt, .max_tokens = n_out};
        sampler_params_default(&rq.sampling);
        rq.sampling.ignore_eos = true;
        if (bench_temperature(&rq.sampling.temperature)) {
            rc = -1;
            break;
        }
        uint64_t id;
        if (engine_submit(e, &rq, &id, &err)) {
            fprintf(stderr, "bench_engine: %s\n", err.msg);
            rc = -1;
        }
    }
    uint32_t done = 0;
    engine_event ev[64];
    while (rc == 0 && done < n_seqs) {
        engine_wait(e, 1000);
        size_t k = engine_poll(e, ev, 64);
        for (size_t i = 0; i < k; i++) {
            if (ev[i].kind == ENGINE_EV_TOKEN && n_tok < cap) t_tok[n_tok++] = ev[i].t_ns;
            if (ev[i].kind != ENGINE_EV_DONE) continue;
            done++;
            const engine_timings *tm = &ev[i].timings;
            if (ev[i].finish == ENGINE_FINISH_ERROR) {
                fprintf(stderr, "bench_engine: request failed: %s\n", ev[i].error);
                rc = -1;
            }
            if (!t_submit || tm->t_queued < t_submit) t_submit = tm->t_queued;
            if (!t_first_sched || tm->t_first_scheduled < t_first_sched)
                t_first_sched = tm->t_first_scheduled;
            if (!t_first_tok || tm->t_first_token < t_first_tok) t_first_tok = tm->t_first_token;
            if (tm->t_first_token > t_last_first) t_last_first = tm->t_first_token;
            if (tm->t_finished > t_end) t_end = tm->t_finished;
        }
    }
    if (rc == 0) {
        /* decode window (t_last_first, last token]: count tokens and distinct steps */
        size_t in_window = 0, steps = 0;
        uint64_t prev = 0, t_last_tok = t_last_first;
        for (size_t i = 0; i < n_tok; i++) {
            if (t_tok[i] <= t_last_first) continue;
            in_window++;
            if (t_tok[i] != prev) steps++;
            prev = t_tok[i];
            if (t_tok[i] > t_last_tok) t_last_tok = t_tok[i];
        }
        const double win_s = (double)(t_last_tok - t_last_first) / 1e9;
        res->decode_tps = win_s > 0 ? (double)in_window / win_s : 0;
        res->decode_steps = steps;
        res->step_ms = steps ? win_s * 1e3 / (double)steps : 0;
        res->prefill_tps = (double)n_prompt / ((double)(t_first_tok - t_first_sched) / 1e9);
        res->run_output_tps = (double)n_tok / ((double)(t_end - t_submit) / 1e9);
    }
    free(ids);
    free(t_tok);
    engine_destroy(e);
    return rc;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    const int threads = argc > 1 ? atoi(argv[1]) : 2;
    const uint32_t max_n = argc > 2 ? (uint32_t)atoi(argv[2]) : 64;
    const uint32_t first_n = argc > 3 ? (uint32_t)atoi(argv[3]) : 1;
    if (argc > 3 && (first_n < 1 || first_n > max_n)) {
        fprintf(stderr, "bench_engine: first N must be 1 .. max N (%u), not '%s'\n", max_n,
                argv[3]);
        return 2;
    }
    uint32_t pp_tokens; /* checked before any model file is made */
    if (bench_pp(&pp_tokens)) return 2;
    const char *dir = bench_dir();
    const char *bw_env = getenv("TPS_MACHINE_READ_GBS");
    const double bw = bw_env ? atof(bw_env) : 0;
    char q8[512], q4[512];
    snprintf(q8, sizeof q8, "%s/110M-q8_0.gguf", dir);
    snprintf(q4, sizeof q4, "%s/110M-q4_0.gguf", dir);
    char models[BENCH_MAX_MODELS][BENCH_PATH_MAX];
    int n_models = bench_model_list(models);
    if (!n_models) {
        if (bench_ensure_model(q8, "110M", GGML_TYPE_Q8_0) ||
            bench_ensure_model(q4, "110M", GGML_TYPE_Q4_0))
            return 1;
        snprintf(models[n_models++], sizeof models[0], "%s", q8);
        snprintf(models[n_models++], sizeof models[0], "%s", q4);
    }

    printf("engine: %d threads; pp%u / tg%d at batch 1 (median of 3)\n", threads, pp_tokens,
           TG_TOKENS);
    printf("%-28s %10s %10s %10s %8s %s\n", "model", "pp t/s", "tg t/s", "MiB/tok", "GB/s",
           bw > 0 ? "of machine read bw" : "");
    for (int i = 0; i < n_models; i++) {
        bench_model l;
        if (bench_load(&l, models[i])) return 1;
        double pp[3], tg[3];
        for (int r = 0; r < 3; r++) {
            run_result rp = {0}, rt = {0};
            if (run(&l, threads, 1, pp_tokens, 1, pp_tokens, &rp)) return 1;
            if (run(&l, threads, 1, 1, TG_TOKENS + 1, PP_TOKENS, &rt)) return 1;
            pp[r] = rp.prefill_tps;
            tg[r] = rt.decode_tps;
        }
        qsort(pp, 3, sizeof pp[0], cmp_double);
        qsort(tg, 3, sizeof tg[0], cmp_double);
        const double bpt = (double)l.m->w.bytes_per_token;
        const double gbs = tg[1] * bpt / 1e9;
        const char *name = bench_model_name(models[i]);
        printf("%-28s %10.1f %10.1f %10.1f %8.2f", name, pp[1], tg[1], bpt / 1048576.0, gbs);
        if (bw > 0) printf(" %5.0f%%", 100.0 * gbs / bw);
        printf("\n");
        bench_unload(&l);
    }

    bench_model l;
    if (bench_load(&l, models[0])) return 1;
    const char *name = bench_model_name(models[0]);
    printf("\nengine: batched decode, %s, N sequences of %d prompt + %d output tokens\n", name,
           CURVE_PROMPT, CURVE_OUTPUT);
    printf("%6s %14s %14s %14s %14s\n", "N", "decode t/s", "step ms", "t/s per seq", "run out t/s");
    double at1 = 0, at32 = 0;
    for (uint32_t n = first_n; n <= max_n; n *= 2) {
        run_result rr = {0};
        if (run(&l, threads, n, CURVE_PROMPT, CURVE_OUTPUT, 256, &rr)) return 1;
        printf("%6u %14.1f %14.2f %14.1f %14.1f\n", n, rr.decode_tps, rr.step_ms, rr.decode_tps / n,
               rr.run_output_tps);
        fflush(stdout);
        if (n == 1) at1 = rr.decode_tps;
        if (n == 32) at32 = rr.decode_tps;
    }
    if (at1 > 0 && at32 > 0) printf("engine: decode t/s N=32 / N=1 = %.2f\n", at32 / at1);
    bench_unload(&l);
    return 0;
}
