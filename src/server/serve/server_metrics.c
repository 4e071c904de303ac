/* The /metrics page: the engine's counters and gauges, the server's own,
 * and the request histograms (created here, recorded by server_stream.c in
 * the HTTP thread) with the engine's step histograms merged in at scrape
 * time. Metric names and meanings are defined once (docs/metrics.md); the
 * text format is prom_write.c's.
 *
 * Not here: the route (server_http.c), recording (server_stream.c). */
#include "server/serve/serve.h"

#include <stdio.h>
#include <string.h>

#include "metrics/metric_names.h"

/* ---------------------------------------------------------------------------
 * Histograms and /metrics
 * ------------------------------------------------------------------------- */

/* Tokens per step: the engine's count histogram config (engine.c). */
#define SERVER_HIST_COUNT ENGINE_HIST_STEP_TOKENS

int server_hists_create(server_hists *h, tps_err *err) {
    hist_config lat = HIST_CONFIG_LATENCY_NS, cnt = SERVER_HIST_COUNT;
    hist **lats[] = {&h->ttft, &h->itl, &h->e2e, &h->queue, &h->prefill, &h->decode, &h->step_ns};
    int rc;
    for (size_t i = 0; i < sizeof lats / sizeof lats[0]; i++)
        if ((rc = hist_create(lats[i], &lat, err))) return rc;
    return hist_create(&h->step_tokens, &cnt, err);
}

void server_hists_free(server_hists *h) {
    hist_free(h->ttft);
    hist_free(h->itl);
    hist_free(h->e2e);
    hist_free(h->queue);
    hist_free(h->prefill);
    hist_free(h->decode);
    hist_free(h->step_ns);
    hist_free(h->step_tokens);
    memset(h, 0, sizeof *h);
}

static void counter(sbuf *b, const char *name, const char *help, double v) {
    prom_family(b, name, "counter", help);
    prom_sample(b, name, NULL, v);
}

static void gauge(sbuf *b, const char *name, const char *help, double v) {
    prom_family(b, name, "gauge", help);
    prom_sample(b, name, NULL, v);
}

/* Compiled grammars: the cache's hits and misses, its entries, and the
 * constrained requests' memory against its budget (grammar_cache.h). */
static void render_grammars(server *s, sbuf *b) {
    grammar_cache_stats g;
    grammar_cache_get_stats(s->grammars, &g);
    counter(b, "tps_grammar_cache_hits_total",
            "Constrained requests whose grammar was already compiled (no compile).",
            (double)g.hits);
    counter(b, "tps_grammar_cache_misses_total", "Constrained requests whose grammar was compiled.",
            (double)g.misses);
    counter(b, "tps_grammar_compile_failures_total",
            "Grammars refused when compiled (malformed, too ambiguous, over a limit).",
            (double)g.compile_fails);
    counter(b, "tps_grammar_cache_evictions_total", "Compiled grammars dropped from the cache.",
            (double)g.evictions);
    gauge(b, "tps_grammar_cache_entries", "Compiled grammars kept for reuse.", (double)g.entries);
    gauge(b, "tps_constraint_memory_bytes",
          "Bytes held by compiled grammars alive and constrained choices' recognizers.",
          (double)g.bytes);
    gauge(b, "tps_constraint_memory_limit_bytes",
          "The most those may hold (--constraint-mem; 0: no limit).", (double)g.budget_bytes);
    counter(b, "tps_constraint_memory_refusals_total",
            "Constrained requests refused (503) because the memory budget had no room.",
            (double)g.refused);
}

/* The step window since the last one read (server_window.h): one that read
 * faster than the machine's cached bandwidth raises it, here and in the
 * cache, so the figures below are read against what was seen. */
static void read_window(server *s, const engine_stats *st) {
    server_window now = {st->step_seconds_total,
                         st->weight_bytes_read_total + st->kv_bytes_read_total, st->steps_total};
    const double was = s->machine.read_gbs;
    double gbs = 0;
    tps_err err = {{0}};
    int rc = server_window_saw(&s->bw_window, &now, &s->machine, machine_llc_bytes, s->model_path,
                               &gbs, &err);
    if (rc)
        fprintf(s->log,
                "tps serve: the steps read %.1f GB/s from a model too big for the caches, above "
                "the cached %.1f GB/s: that figure was no limit, this one is now (%s)\n",
                gbs, was, rc > 0 ? "cached" : err.msg);
}

/* This machine's limits as tps machine measured them: the roofline's ceiling. */
static void render_machine(server *s, sbuf *b) {
    gauge(b, TPS_M_MACHINE_READ_BW,
          "This machine's measured read bandwidth (tps machine); 0: unknown.",
          s->machine.read_gbs * 1e9);
    gauge(b, TPS_M_MACHINE_INT8,
          "This machine's measured peak int8 multiply-add rate (tps machine); 0: unknown.",
          s->machine.int8_gops * 1e9);
    gauge(b, TPS_M_MACHINE_LIMITS_BUSY,
          "1: the machine's limits were measured while it was busy (below its own; every "
          "fraction of them reads high).",
          s->machine.busy ? 1.0 : 0.0);
}

static void render_connections(server *s, sbuf *b) {
    gauge(b, "tps_http_requests_in_flight", "Completion requests being answered.",
          (double)s->n_inflight);
    gauge(b, "tps_http_connections_open", "Open client connections.", (double)server_conns_open(s));
    counter(b, "tps_http_connections_shed_total",
            "Connections closed to make room: silent ones, then idle keep-alive ones.",
            (double)s->conns_shed);
}

/* The Responses store, and the fields --unknown-fields ignore dropped
 * (requests by endpoint: server_http.c, which owns the route table). */
static void render_api(server *s, sbuf *b) {
    response_store_stats st = {0};
    if (s->store) response_store_get_stats(s->store, &st);
    gauge(b, "tps_response_store_entries", "Responses kept for previous_response_id and GET.",
          (double)st.entries);
    gauge(b, "tps_response_store_bytes", "Bytes the kept responses hold.", (double)st.bytes);
    counter(b, "tps_response_store_stored_total", "Responses stored.", (double)st.stored_total);
    prom_family(b, "tps_response_store_evictions_total", "counter",
                "Stored responses removed before anyone deleted them: for room (entries or "
                "bytes) or for age.");
    prom_sample(b, "tps_response_store_evictions_total", "reason=\"room\"",
                (double)st.evicted_total);
    prom_sample(b, "tps_response_store_evictions_total", "reason=\"age\"",
                (double)st.expired_total);
    counter(b, "tps_ignored_fields_total",
            "Request fields no allow-list names, dropped under --unknown-fields ignore.",
            (double)s->ignored_fields);
    counter(b, "tps_ignored_field_requests_total",
            "Requests that had a field dropped under --unknown-fields ignore.",
            (double)s->ignored_requests);
    prom_family(b, "tps_tool_calls_total", "counter",
                "Complete tool calls answered, by whether their arguments are an instance of "
                "the tool's parameters schema (a call the model wrote freely may not be; it is "
                "answered as written).");
    prom_sample(b, "tps_tool_calls_total", "schema=\"valid\"",
                (double)(s->tool_calls - s->tool_calls_invalid));
    prom_sample(b, "tps_tool_calls_total", "schema=\"invalid\"", (double)s->tool_calls_invalid);
}

/* The engine's counters and gauges, the machine's limits, the server's
 * own gauges. */
static void render_counters(server *s, sbuf *b) {
    engine_stats st;
    engine_get_stats(s->eng, &st);
    counter(b, TPS_M_PROMPT_TOKENS,
            "Prompt tokens computed (recomputation after preemption included).",
            (double)st.prompt_tokens_total);
    counter(b, TPS_M_GENERATION_TOKENS, "Output tokens generated and delivered.",
            (double)st.generation_tokens_total);
    prom_family(b, "tps_requests_total", "counter", "Finished requests by finish reason.");
    for (int f = 0; f < 4; f++) {
        char labels[64];
        snprintf(labels, sizeof labels, "finish_reason=\"%s\"",
                 engine_finish_name((engine_finish)f));
        prom_sample(b, "tps_requests_total", labels, (double)st.requests_total[f]);
    }
    counter(b, TPS_M_PREEMPTIONS, "Times a sequence's KV cache was taken back.",
            (double)st.preemptions_total);
    counter(b, TPS_M_STEPS, "Engine steps (iterations) run.", (double)st.steps_total);
    gauge(b, "tps_itl_target_seconds",
          "Step-time target prompt chunks are sized to when streams are decoding (0: none).",
          (double)st.itl_target_ns * 1e-9);
    counter(b, "tps_steps_over_itl_target_total",
            "Steps carrying decode rows that took longer than the ITL target.",
            (double)st.steps_over_itl_target_total);
    gauge(b, "tps_step_cost_fixed_seconds",
          "Step-time model: the part of a step that does not grow with its rows.",
          (double)st.step_cost_fixed_ns * 1e-9);
    gauge(b, "tps_step_cost_row_seconds", "Step-time model: the time each token row adds.",
          (double)st.step_cost_row_ns * 1e-9);
    /* the roofline: rate(bytes) / rate(step seconds) is the bandwidth the
     * steps achieved; over the machine's read bandwidth, how close to it */
    counter(b, TPS_M_STEP_SECONDS, "Wall time spent in engine steps.", st.step_seconds_total);
    counter(b, TPS_M_WEIGHT_BYTES_READ,
            "Weight bytes the steps read (every dense matrix once a step, and the experts each "
            "step ran).",
            st.weight_bytes_read_total);
    counter(b, TPS_M_EXPERTS_RUN,
            "Mixture of experts: experts the steps ran, each once a step and layer however many "
            "rows chose it (summed over layers).",
            (double)st.experts_run_total);
    gauge(b, TPS_M_MODEL_EXPERTS, "Experts a layer of the model has (0: a dense model).",
          (double)st.model_experts);
    gauge(b, TPS_M_MODEL_LAYERS, "Layers of the model.", (double)st.model_layers);
    counter(b, TPS_M_KV_BYTES_READ, "KV cache bytes the steps read.", st.kv_bytes_read_total);
    counter(b, "tps_multiply_adds_total", "Multiply-adds the steps did (weights and attention).",
            st.macs_total);
    read_window(s, &st);
    render_machine(s, b);
    gauge(b, "tps_requests_running", "Sequences in the running batch.",
          (double)st.requests_running);
    gauge(b, "tps_requests_waiting", "Requests queued or preempted, waiting to run.",
          (double)st.requests_waiting);
    gauge(b, "tps_kv_cache_usage_ratio", "Fraction of KV cache blocks in use.",
          st.kv_blocks_total ? (double)st.kv_blocks_used / (double)st.kv_blocks_total : 0.0);
    gauge(b, "tps_kv_cache_blocks", "KV cache blocks in the pool.", (double)st.kv_blocks_total);
    gauge(b, "tps_state_slots",
          "Recurrent-state slots of a hybrid model's linear layers, one per running sequence "
          "(0: no such layers).",
          (double)st.state_slots_total);
    gauge(b, "tps_state_slots_used", "Recurrent-state slots sequences hold.",
          (double)st.state_slots_used);
    gauge(b, "tps_state_slot_bytes",
          "Bytes of one sequence's recurrent state (every linear layer).",
          (double)st.state_slot_bytes);
    /* vLLM's prefix cache counters: in tokens, so hits / queries is the
     * fraction of prompt tokens that were not computed. */
    counter(b, "tps_prefix_cache_queries_total",
            "Prompt tokens looked up in the prefix cache at admission.",
            (double)st.prefix_cache_queries_total);
    counter(b, "tps_prefix_cache_hits_total",
            "Prompt tokens found in the prefix cache (not computed).",
            (double)st.prefix_cache_hits_total);
    gauge(b, "tps_kv_cache_blocks_cached",
          "KV cache blocks whose contents are indexed for reuse (in use or kept free).",
          (double)st.kv_blocks_cached);
    render_grammars(s, b);
    render_connections(s, b);
    render_api(s, b);
}

/* The request histograms, and the engine's step histograms merged now. */
static void render_histograms(server *s, sbuf *b) {
    const double ns = 1e-9;
    const server_hists *h = &s->h;
    prom_histogram(b, "tps_time_to_first_token_seconds",
                   "Request arrival to its first output token (server side).", h->ttft, ns,
                   prom_latency_bounds, prom_n_latency_bounds);
    prom_histogram(b, "tps_inter_token_latency_seconds",
                   "Gap between consecutive output tokens of a request.", h->itl, ns,
                   prom_latency_bounds, prom_n_latency_bounds);
    prom_histogram(b, "tps_e2e_request_latency_seconds",
                   "Request arrival to its last token, finished requests.", h->e2e, ns,
                   prom_latency_bounds, prom_n_latency_bounds);
    prom_histogram(b, "tps_request_queue_time_seconds", "Submit to first scheduled step.", h->queue,
                   ns, prom_latency_bounds, prom_n_latency_bounds);
    prom_histogram(b, "tps_request_prefill_time_seconds", "First scheduled step to first token.",
                   h->prefill, ns, prom_latency_bounds, prom_n_latency_bounds);
    prom_histogram(b, "tps_request_decode_time_seconds", "First token to finish.", h->decode, ns,
                   prom_latency_bounds, prom_n_latency_bounds);
    hist_reset(h->step_ns);
    hist_reset(h->step_tokens);
    tps_err err = {{0}};
    if (engine_merge_step_hists(s->eng, h->step_ns, h->step_tokens, &err))
        fprintf(s->log, "tps serve: step histograms: %s\n", err.msg);
    prom_histogram(b, "tps_step_duration_seconds", "Wall time of one engine step.", h->step_ns, ns,
                   prom_latency_bounds, prom_n_latency_bounds);
    prom_histogram(b, "tps_tokens_per_step", "Token rows (prefill + decode) in one engine step.",
                   h->step_tokens, 1.0, prom_count_bounds, prom_n_count_bounds);
}

void server_metrics_render(server *s, sbuf *b) {
    render_counters(s, b);
    render_histograms(s, b);
}
