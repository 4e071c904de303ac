/* The terminal summary and the glossary (report.h): layout and units only.
 * Not here: the maths (metrics/, result.c). */
#include "bench/report/report.h"

#include <string.h>

#include "bench/result/scrape.h"
#include "bench/result/verdict.h"

static const char *cfg_str(const bench_result *r, const char *k, const char *dflt) {
    const char *s = json_string_value(json_object_get(r->config, k));
    return s ? s : dflt;
}

static double cfg_num(const bench_result *r, const char *k) {
    json_t *v = json_object_get(r->config, k);
    return json_is_number(v) ? json_number_value(v) : 0;
}

static void window_row(FILE *f, const char *name, const result_window *w, bool slo) {
    if (!w->valid) {
        fprintf(f, "  %-16s (none: %s)\n", name, w->why[0] ? w->why : "not asked for");
        return;
    }
    const window_tps *t = &w->tps;
    char span[40];
    snprintf(span, sizeof span, "%.2f-%.2f s", t->w.t0 / 1e9, t->w.t1 / 1e9);
    fprintf(f, "  %-16s %-17s %8.2f %10.1f %10.1f %10.1f %8.2f", name, span, t->seconds,
            t->output_tps, t->input_tps, t->total_tps, t->request_rate);
    if (slo) fprintf(f, " %8.2f (%3.0f%%)", w->good.goodput, 100 * w->good.good_fraction);
    fprintf(f, "\n");
}

/* The workload shapes that measure a prefix cache, when the run used them. */
static void workload_rows(FILE *f, const bench_result *r) {
    if (cfg_num(r, "prefix_len") > 0)
        fprintf(f,
                "  shared prefixes: %.0f of %.0f tokens each, chosen %s, then each request's own "
                "part\n",
                cfg_num(r, "prefixes"), cfg_num(r, "prefix_len"),
                cfg_str(r, "prefix_dist", "round-robin"));
    if (cfg_num(r, "turns") > 0)
        fprintf(f,
                "  conversations: %.0f of %.0f turns (X-Session-Id each), think time %.3g s; each "
                "turn sends the history with the server's replies\n",
                cfg_num(r, "conversations"), cfg_num(r, "turns"), cfg_num(r, "think_time_s"));
}

static void cached_row(FILE *f, const char *name, const result_cached *c) {
    if (!c->requests) {
        fprintf(f,
                "  %s: unknown (no usage.prompt_tokens_details.cached_tokens or timings.cache_n "
                "in the responses)\n",
                name);
        return;
    }
    fprintf(f, "  %s: %llu of %llu prompt tokens (%.1f%%) in the %llu requests that reported it\n",
            name, (unsigned long long)c->tokens, (unsigned long long)c->prompt,
            c->prompt ? 100.0 * (double)c->tokens / (double)c->prompt : 0.0,
            (unsigned long long)c->requests);
}

static void turn_row(FILE *f, const char *name, const result_turn_group *g) {
    const hist *h = g->ttft;
    fprintf(f, "  %-12s TTFT p50/p90/p99 %.2f / %.2f / %.2f ms (n %llu); input %llu tokens", name,
            hist_percentile(h, 50) / 1e6, hist_percentile(h, 90) / 1e6,
            hist_percentile(h, 99) / 1e6, (unsigned long long)hist_count(h),
            (unsigned long long)g->input_tokens);
    if (g->cached.requests && g->cached.prompt)
        fprintf(f, ", %.1f%% cached\n",
                100.0 * (double)g->cached.tokens / (double)g->cached.prompt);
    else
        fprintf(f, ", cached unknown\n");
}

/* Turn 1 against the later turns of a multi-turn run. */
static void turns_rows(FILE *f, const result_turns *t) {
    if (!t->turns) return;
    char later[32];
    snprintf(later, sizeof later, "turns 2..%u", t->turns);
    fprintf(f, "\nturns     %llu conversations, up to %u turns each (completed requests)\n",
            (unsigned long long)t->conversations, t->turns);
    turn_row(f, "turn 1", &t->first);
    if (t->turns > 1) turn_row(f, later, &t->later);
}

static void hist_row(FILE *f, const char *name, const hist *h, double scale) {
    if (hist_count(h) == 0) {
        fprintf(f, "  %-32s (no values)\n", name);
        return;
    }
    fprintf(f, "  %-32s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %7llu\n", name,
            hist_mean(h) / scale, hist_percentile(h, 50) / scale, hist_percentile(h, 90) / scale,
            hist_percentile(h, 95) / scale, hist_percentile(h, 99) / scale,
            hist_percentile(h, 99.9) / scale, hist_max(h) / scale,
            (unsigned long long)hist_count(h));
    if (hist_underflow(h) || hist_overflow(h))
        fprintf(f,
                "  %-32s   (%llu below, %llu above the histogram range: percentiles there are "
                "bounds)\n",
                "", (unsigned long long)hist_underflow(h), (unsigned long long)hist_overflow(h));
}

/* The heading of a table of hist_row lines. */
static void hist_header(FILE *f, const char *title) {
    fprintf(f, "%-34s %9s %9s %9s %9s %9s %9s %9s %7s\n", title, "mean", "p50", "p90", "p95", "p99",
            "p99.9", "max", "n");
}

/* What was run: the server, the load and the workload. */
static void run_rows(FILE *f, const bench_result *r) {
    const double rate = cfg_num(r, "rate");
    fprintf(f, "tps bench  %s  model %s\n", cfg_str(r, "url", "?"), cfg_str(r, "model", "(none)"));
    if (rate > 0)
        fprintf(f, "  load: open loop, %.3g req/s %s (burstiness %.3g), at most %.0f in flight",
                rate, cfg_str(r, "arrival", "poisson"), cfg_num(r, "burstiness"),
                cfg_num(r, "concurrency"));
    else
        fprintf(f, "  load: closed loop, concurrency %.0f", cfg_num(r, "concurrency"));
    fprintf(f, "; input %s tokens, output %s tokens (prompts sized by %s)\n",
            cfg_str(r, "input_len", "-"), cfg_str(r, "output_len", "-"),
            cfg_str(r, "input_source", "?"));
    workload_rows(f, r);
    if (r->runs > 1) fprintf(f, "  merged from %u runs\n", r->runs);
}

/* How the requests ended, and how their tokens were counted. */
static void requests_rows(FILE *f, const bench_result *r) {
    fprintf(f,
            "\nrequests  %llu sent, %llu completed, %llu failed (error rate %.2f%%), %llu "
            "cancelled at the end\n",
            (unsigned long long)r->requests, (unsigned long long)r->completed,
            (unsigned long long)r->failed, 100 * result_error_rate(r),
            (unsigned long long)r->cancelled);
    for (int k = 1; k < BENCH_ERR_COUNT; k++)
        if (r->errors[k])
            fprintf(f, "  %-13s %6llu   e.g. %s\n", bench_err_name((bench_errkind)k),
                    (unsigned long long)r->errors[k],
                    r->error_example[k] ? r->error_example[k] : "");
    fprintf(f,
            "tokens    %llu output, %llu input; output counted by: usage %llu, stream ids %llu, "
            "re-tokenized %llu (approx.), events %llu (approx.) requests\n",
            (unsigned long long)r->output_tokens, (unsigned long long)r->input_tokens,
            (unsigned long long)r->by_source[0], (unsigned long long)r->by_source[1],
            (unsigned long long)r->by_source[2], (unsigned long long)r->by_source[3]);
    if (r->reasoning_tokens)
        fprintf(f,
                "  of the output, %llu tokens were thinking (%.1f%%; the server counted them in "
                "%llu of %llu completed requests, the rest are the stream's thinking events)\n",
                (unsigned long long)r->reasoning_tokens,
                r->output_tokens ? 100.0 * (double)r->reasoning_tokens / (double)r->output_tokens
                                 : 0.0,
                (unsigned long long)r->reasoning_from_usage, (unsigned long long)r->completed);
    if (r->mismatch_requests)
        fprintf(f,
                "  usage differed from the streamed count in %llu requests (%+lld tokens in "
                "all)\n",
                (unsigned long long)r->mismatch_requests, (long long)r->mismatch_tokens);
    cached_row(f, "cached input (prefix cache)", &r->cached);
}

static void throughput_rows(FILE *f, const bench_result *r, bool slo) {
    fprintf(f, "\nthroughput (per second over the named window; times from the run's start)\n");
    fprintf(f, "  %-16s %-17s %8s %10s %10s %10s %8s%s\n", "window", "span", "seconds",
            "output t/s", "input t/s", "total t/s", "req/s", slo ? "  goodput req/s (good)" : "");
    window_row(f, "run", &r->run, slo);
    window_row(f, "steady", &r->steady, slo);
    if (r->user.valid || r->user.why[0]) window_row(f, "user (--window)", &r->user, slo);
    if (r->nbins)
        fprintf(f, "  peak %.3g s bin of run: %.1f output tok/s (bin %zu, %.1f-%.1f s)\n", r->bin_s,
                r->peak_tps, r->peak_bin, r->peak_bin * r->bin_s + r->run.tps.w.t0 / 1e9,
                (r->peak_bin + 1) * r->bin_s + r->run.tps.w.t0 / 1e9);
}

/* The latency and token-count distributions, the server's timings among them. */
static void distribution_rows(FILE *f, const bench_result *r) {
    if (r->warmup_excluded)
        fprintf(f, "\n%llu requests sent during --warmup are in no distribution below",
                (unsigned long long)r->warmup_excluded);
    fprintf(f, "\n");
    hist_header(f, "latency (ms, completed requests)");
    if (!result_streamed(r)) {
        fprintf(f, "  TTFT, TTFO, ITL, TPOT: not measured: %s\n",
                !strcmp(cfg_str(r, "endpoint", ""), "embeddings")
                    ? "an embeddings response is one body"
                    : "--no-stream: the whole response arrives at once, so no token's own "
                      "arrival can be seen");
    } else {
        hist_row(f, "TTFT from scheduled start", r->h[RH_TTFT], 1e6);
        hist_row(f, "TTFT from actual send", r->h[RH_TTFT_SENT], 1e6);
        if (r->reasoning_tokens || hist_count(r->h[RH_TTFO]) != hist_count(r->h[RH_TTFT]))
            hist_row(f, "TTFO (first answer token)", r->h[RH_TTFO], 1e6);
        hist_row(f, "ITL (gap per token)", r->h[RH_ITL], 1e6);
        hist_row(f, "gap per arrival (of tokens)", r->h[RH_ARRIVAL_GAP], 1e6);
        hist_row(f, "TPOT (per request)", r->h[RH_TPOT], 1e6);
    }
    hist_row(f, "E2E from scheduled start", r->h[RH_E2E], 1e6);
    hist_row(f, "E2E from actual send", r->h[RH_E2E_SENT], 1e6);
    hist_row(f, "send lag (sent - scheduled)", r->h[RH_SEND_LAG], 1e6);
    if (r->with_timings) {
        fprintf(f, "server's own timings (%llu requests reported them; %llu preemptions)\n",
                (unsigned long long)r->with_timings, (unsigned long long)r->server_preemptions);
        hist_row(f, "server queue", r->h[RH_SRV_QUEUE], 1e6);
        hist_row(f, "server prefill", r->h[RH_SRV_PREFILL], 1e6);
        hist_row(f, "server decode", r->h[RH_SRV_DECODE], 1e6);
        hist_row(f, "server TTFT", r->h[RH_SRV_TTFT], 1e6);
    }
    hist_header(f, "tokens per completed request");
    hist_row(f, "output tokens", r->h[RH_OUTPUT_TOKENS], 1);
    hist_row(f, "input tokens", r->h[RH_INPUT_TOKENS], 1);
}

/* How the stream carried its tokens, and what the client spent measuring. */
static void stream_notes(FILE *f, const bench_result *r) {
    if (r->multi_token_events)
        fprintf(f,
                "note: %llu of %llu token events carried more than one token; their extra "
                "tokens are zero ITL gaps\n",
                (unsigned long long)r->multi_token_events, (unsigned long long)r->token_events);
    if (r->multi_token_arrivals)
        fprintf(f,
                "note: %llu of %llu token arrivals (%.1f%%) brought more than one token (SSE "
                "events read together, or events of several tokens): ITL counts their extra "
                "tokens as zero gaps (p50 %.2f ms); the gap per arrival, what a reader waits "
                "between updates, has p50 %.2f ms\n",
                (unsigned long long)r->multi_token_arrivals, (unsigned long long)r->token_arrivals,
                100 * result_multi_arrival_share(r), hist_percentile(r->h[RH_ITL], 50) / 1e6,
                hist_percentile(r->h[RH_ARRIVAL_GAP], 50) / 1e6);
    if (r->held_tokens)
        fprintf(f,
                "note: %llu output tokens came in events with empty text (the server held back "
                "bytes that were not yet UTF-8); counted one per event, as usage agreed\n",
                (unsigned long long)r->held_tokens);
    if (r->output_tokens)
        fprintf(f,
                "client: %.3f s CPU in %u event loop%s (start-up excluded): %.1f us per output "
                "token, %.1f us per event; %llu events, %llu bytes\n",
                r->client_cpu_s, r->client_loops, r->client_loops == 1 ? "" : "s",
                1e6 * r->client_cpu_s / (double)r->output_tokens,
                r->events ? 1e6 * r->client_cpu_s / (double)r->events : 0.0,
                (unsigned long long)r->events, (unsigned long long)r->bytes);
}

void report_print(FILE *f, const bench_result *r) {
    verdict v;
    verdict_judge(&v, r);
    report_print_judged(f, r, &v);
}

void report_print_judged(FILE *f, const bench_result *r, const verdict *v) {
    const bool slo = r->slo.ttft_ns || r->slo.tpot_ns || r->slo.e2e_ns;
    run_rows(f, r);
    requests_rows(f, r);
    throughput_rows(f, r, slo);
    distribution_rows(f, r);
    turns_rows(f, &r->turns);
    stream_notes(f, r);
    scrape_print(f, r->server_metrics, r->series_out, r->nbins, r->bin_s, r->run.tps.w.t0 / 1e9);
    verdict_print(f, v);
}

void report_print_glossary(FILE *f) {
    fputs(
        "What the numbers mean (docs/metrics.md has the exact definitions):\n"
        "  output token  a model token the server generated; counted from the server's usage\n"
        "                (trusted), else token ids in the stream, else the streamed text\n"
        "                re-tokenized with --tokenizer (approx.), else one per SSE event\n"
        "                (approx.). The summary says which source each request used.\n"
        "  window        an interval (t0, t1]; a rate = what happened in it / (t1 - t0).\n"
        "    run         first send -> last byte of any request\n"
        "    steady      auto: target load reached (closed loop: N in flight; open loop: first\n"
        "                completion) -> first completion after the last send; or trimmed by\n"
        "                --warmup/--cooldown\n"
        "    user        --window A:B seconds after the run's first send\n"
        "  output t/s    output tokens that arrived in the window / its length\n"
        "  input t/s     prompt tokens, counted when the request's first output token arrives\n"
        "  total t/s     input + output\n"
        "  req/s         requests that completed (last byte) in the window / its length\n"
        "  goodput       completed requests in the window that met every --slo limit, per s\n"
        "  peak bin      the busiest full bin (--bin seconds) of the run's time series\n"
        "  TTFT          first output token's arrival - start (completed requests); a\n"
        "                thinking token is an output token\n"
        "  TTFO          first answer token's arrival - start: the first token after the\n"
        "                thinking (TTFT when there is none); shown when there was thinking\n"
        "  ITL           gaps between consecutive output tokens of one stream; an event with\n"
        "                k tokens gives one gap and k-1 zero gaps\n"
        "  gap per       gaps between one stream's token arrivals: SSE events read at one\n"
        "   arrival      instant, or an event of several tokens, are one arrival (what a\n"
        "                reader waits between updates); ITL's gaps when each brings one token\n"
        "  TPOT          (E2E - TTFT) / (output tokens - 1), one value per request\n"
        "  E2E           last byte of the response - start\n"
        "  start         scheduled send time (open loop: where the arrival process put it, so a\n"
        "                late client cannot hide queueing); 'from actual send' beside it.\n"
        "                Closed loop: both are the same instant\n"
        "  send lag      actual send - scheduled send (the client's own queue)\n"
        "  server ...    the server's `timings` (queue, prefill, decode, TTFT) when it sends them\n"
        "  cached input  prompt tokens the server's prefix cache served (its usage.prompt_tokens_\n"
        "                details.cached_tokens, else llama.cpp's timings.cache_n), over the\n"
        "                requests whose server said; unknown when none did (not zero)\n"
        "  turns         --turns: TTFT of each conversation's first turn against its later\n"
        "                turns, whose prompts carry the history\n"
        "  percentiles   nearest rank from a log-bucket histogram, within 0.39%; min, max and\n"
        "                mean are exact\n"
        "  errors        by kind: connect, http_4xx, http_5xx, no_response (no byte within\n"
        "                --idle-timeout), stall (stream silent for --idle-timeout), timeout\n"
        "                (--timeout), reset, malformed, stream_error, truncated (no [DONE]),\n"
        "                no_tokens (ended cleanly without an output token), http_3xx,\n"
        "                http_other;\n"
        "                cancelled = still running when duration + timeout ran out (not an error)\n"
        "  error rate    failed / (completed + failed); exit status 1 when above\n"
        "                --max-error-rate\n"
        "  warm-up       requests sent before --warmup ended are in no distribution (they\n"
        "                still count in the totals and the rates)\n"
        "  server        --scrape: the server's own gauges and counter rates (/metrics)\n"
        "  verdict       whether to trust the figures: client (CPU-bound or waiting for a\n"
        "                CPU), batching (several tokens per event: ITL measures flushes),\n"
        "                approximate (token counts), usage (differs from the stream),\n"
        "                requests (too few for p99), steady (load never steady), steal\n"
        "                (the hypervisor took this machine's CPU time), fields (text in a\n"
        "                field tps does not read), plausible (usage that cannot be); each\n"
        "                with its evidence. It does not\n"
        "                change the exit status\n",
        f);
}
