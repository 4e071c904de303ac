/* The server object's lifecycle: bind, the HTTP thread, loading the model,
 * drain and stop. The routes are in server_http.c, engine events in
 * server_stream.c, the connection table in http/server_conn.c; the order
 * in which these files call each other is in serve.h.
 *
 * Not here: request parsing, response formats, argument parsing. */
#include "kernels/machine.h"
#include "server/serve/serve.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/thread.h>

#include "base/clock.h"
#include "base/file_read.h"
#include "base/free_all.h"

void server_config_default(server_config *c) {
    memset(c, 0, sizeof *c);
    c->host = "127.0.0.1";
    c->port = 8080;
    engine_params_default(&c->engine);
    c->max_body_bytes = 8u << 20;
    c->max_header_bytes = 16u << 10;
    c->max_connections = 1024;
    c->timeout_s = 60;
    c->header_timeout_s = 10;
    c->drain_timeout_s = 30;
    c->max_n = 16;
    c->grammar_max_ms = 2000;
    c->grammar_max_bytes = (size_t)64 << 20;
    c->constraint_mem = (size_t)1 << 30;
    c->grammar_cache = 64;
    c->engine.itl_target_ms = ENGINE_ITL_TARGET_AUTO;
    c->signal_fd = -1;
    response_store_limits_default(&c->response_store);
}

/* libevent's locking, once per process (idempotent, but not thread-safe). */
static void use_pthreads(void) {
    evthread_use_pthreads();
}

static char *dup_or_null(const char *s) {
    return s ? strdup(s) : NULL;
}

/* Copies n strings into a NULL-ended array; nonzero when out of memory. */
static int copy_strs(char ***out, const char *const *v, size_t n) {
    *out = calloc(n + 1, sizeof **out);
    if (!*out) return -1;
    for (size_t i = 0; i < n; i++)
        if (!((*out)[i] = strdup(v[i]))) return -1;
    return 0;
}

static void free_strs(char **v) {
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

static void on_sweep(evutil_socket_t fd, short what, void *arg) {
    server *s = arg;
    server_conns_sweep(s, false);
    server_check_gone(s);
    server_work_check_gone(s);
}

/* ---------------------------------------------------------------------------
 * Drain and stop
 * ------------------------------------------------------------------------- */

static void begin_drain(server *s) {
    if (s->draining) return;
    s->draining = true;
    fprintf(s->log, "tps serve: draining: %u request(s) in flight, up to %u s\n", s->n_inflight,
            s->cfg.drain_timeout_s);
    if (s->bound) { /* stop accepting: close the listening socket */
        evhttp_del_accept_socket(s->http, s->bound);
        s->bound = NULL;
        s->listener = NULL;
    }
    struct timeval tv = {.tv_sec = s->cfg.drain_timeout_s};
    event_add(s->ev_drain_deadline, &tv);
    /* a body still with the workers would be answered 503 once prepared:
     * abandoned now, so that no template render holds the drain */
    server_work_cancel_all(s);
    server_maybe_finish_drain(s);
}

/* Every request in flight is cancelled; each is answered as the engine
 * reports it (a 503, or a stream's SSE error event and [DONE]), and the
 * loop exits once they are and their bytes are out, or after
 * SERVER_STOP_MS. */
static void cut_in_flight(server *s) {
    s->stopping = true;
    server_cancel_all(s, "the server is shutting down");
    struct timeval tv = {.tv_sec = SERVER_STOP_MS / 1000, .tv_usec = SERVER_STOP_MS % 1000 * 1000};
    event_base_loopexit(s->base, &tv); /* cancelled requests end within a step */
    server_maybe_finish_drain(s);
}

static void on_drain_deadline(evutil_socket_t fd, short what, void *arg) {
    server *s = arg;
    fprintf(s->log, "tps serve: drain timeout: cancelling %u request(s)\n", s->n_inflight);
    cut_in_flight(s);
}

static void on_wake(evutil_socket_t fd, short what, void *arg) {
    server *s = arg;
    int w = atomic_load(&s->want);
    if (w == 2 && !s->stopping) {
        /* stop: as a drain whose time is up at once, so that every stream
         * cut still ends with an error event and [DONE] */
        begin_drain(s);
        fprintf(s->log, "tps serve: stopping: cancelling %u request(s)\n", s->n_inflight);
        event_del(s->ev_drain_deadline);
        cut_in_flight(s);
    } else if (w == 1) {
        begin_drain(s);
    }
}

static void on_signal(evutil_socket_t fd, short what, void *arg) {
    server *s = arg;
    struct signalfd_siginfo si;
    while (read(fd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (s->draining) {
            fprintf(s->log, "tps serve: signal %u again: stopping now\n", si.ssi_signo);
            atomic_store(&s->want, 2);
        } else {
            fprintf(s->log, "tps serve: signal %u: draining\n", si.ssi_signo);
            atomic_store(&s->want, 1);
        }
        on_wake(-1, 0, s);
    }
}

void server_drain(server *s) {
    int expect = 0;
    atomic_compare_exchange_strong(&s->want, &expect, 1);
    event_active(s->ev_wake, EV_READ, 0);
}

void server_stop(server *s) {
    atomic_store(&s->want, 2);
    event_active(s->ev_wake, EV_READ, 0);
}

/* ---------------------------------------------------------------------------
 * Create, start, load, wait, free
 * ------------------------------------------------------------------------- */

/* The evhttp object with its limits and callbacks, bound and listening;
 * the port and whether it is a loopback address are read back. */
static int create_http(server *s, const server_config *c, tps_err *err) {
    if (!(s->http = evhttp_new(s->base))) {
        return tps_fail(err, TPS_EIO, "evhttp_new failed");
    }
    /* The body limit is checked by the route (an OpenAI-shaped 413); evhttp
     * holds bodies up to twice the limit, beyond that it answers 413 itself. */
    size_t body_cap = c->max_body_bytes > SIZE_MAX / 4 ? SIZE_MAX / 2 : c->max_body_bytes * 2;
    evhttp_set_max_body_size(s->http, (ev_ssize_t)(body_cap ? body_cap : 1));
    /* Our framing (server_conn.c) refuses headers over the limit as JSON
     * first; evhttp's own limit, twice ours, is never the one hit. */
    evhttp_set_max_headers_size(
        s->http,
        (ev_ssize_t)(c->max_header_bytes > SIZE_MAX / 4 ? SIZE_MAX / 2 : c->max_header_bytes * 2));
    if (c->timeout_s) evhttp_set_timeout(s->http, (int)c->timeout_s);
    evhttp_set_allowed_methods(s->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                            EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                            EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
    evhttp_set_gencb(s->http, server_http_route, s);
    evhttp_set_bevcb(s->http, server_conn_new_bev, s);
    s->bound = evhttp_bind_socket_with_handle(s->http, s->host, (ev_uint16_t)c->port);
    if (!s->bound) {
        return tps_fail(err, TPS_EIO, "cannot listen on %s:%d: %s", s->host, c->port,
                        strerror(errno));
    }
    s->listener = evhttp_bound_socket_get_listener(s->bound);
    /* out of descriptors, libevent would log and retry at once, forever */
    evconnlistener_set_error_cb(s->listener, server_on_accept_error);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(evhttp_bound_socket_get_fd(s->bound), (struct sockaddr *)&ss, &sl) == 0) {
        s->port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                           : ntohs(((struct sockaddr_in *)&ss)->sin_port);
        s->loopback = ss.ss_family == AF_INET6
                          ? IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&ss)->sin6_addr)
                          : (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127;
    }
    return 0;
}

/* The loop's own events (wake, drain deadline, sweep, flush, accept
 * classification, the signal fd) and the worker pool. */
static int create_events(server *s, const server_config *c, tps_err *err) {
    int rc;
    s->ev_wake = event_new(s->base, -1, 0, on_wake, s);
    s->ev_drain_deadline = evtimer_new(s->base, on_drain_deadline, s);
    s->ev_sweep = event_new(s->base, -1, EV_PERSIST, on_sweep, s);
    s->ev_flush = event_new(s->base, -1, EV_PERSIST, server_conns_on_flush, s);
    s->ev_classify = event_new(s->base, -1, 0, server_conns_on_accept, s);
    s->ev_accept_retry = evtimer_new(s->base, server_on_accept_retry, s);
    if ((rc = server_work_create(s, err))) return rc;
    if (!s->ev_wake || !s->ev_drain_deadline || !s->ev_sweep || !s->ev_flush || !s->ev_classify ||
        !s->ev_accept_retry)
        return TPS_EIO;
    struct timeval tv = {.tv_usec = SERVER_SWEEP_MS * 1000};
    event_add(s->ev_sweep, &tv);
    server_arm_accept_retry(s);
    if (c->signal_fd >= 0) {
        s->ev_signal = event_new(s->base, c->signal_fd, EV_READ | EV_PERSIST, on_signal, s);
        if (!s->ev_signal || event_add(s->ev_signal, NULL)) return TPS_EIO;
    }
    return 0;
}

/* The generator of fresh sampling seeds (one per request that names no
 * seed), seeded from the OS, else from the clock and the process id. */
static void seed_generator(server *s) {
    uint64_t x = 0;
    if (getrandom(&x, sizeof x, GRND_NONBLOCK) != (ssize_t)sizeof x)
        x = tps_now_ns() ^ ((uint64_t)getpid() << 32);
    tps_rng_seed(&s->seed_rng, x);
}

int server_create(server **out, const server_config *c, tps_err *err) {
    *out = NULL;
    if (c->max_n < 1)
        return tps_fail(err, TPS_EINVAL, "max_n is 0; a request has at least one choice");
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, use_pthreads);
    server *s = calloc(1, sizeof *s);
    if (!s) return tps_fail(err, TPS_ENOMEM, "out of memory");
    s->cfg = *c;
    s->host = strdup(c->host ? c->host : "127.0.0.1");
    s->api_key = c->api_key && c->api_key[0] ? strdup(c->api_key) : NULL;
    s->chat_template_name = dup_or_null(c->chat_template);
    s->chat_template_file = dup_or_null(c->chat_template_file);
    s->model_path = dup_or_null(c->model_path);
    s->model_id = dup_or_null(c->model_id);
    s->calibration_out = dup_or_null(c->calibration_out);
    s->cfg.calibration_out = s->calibration_out;
    s->cfg.host = s->host;
    s->cfg.api_key = s->api_key;
    s->cfg.chat_template = s->chat_template_name;
    s->cfg.chat_template_file = s->chat_template_file;
    s->cfg.model_path = s->model_path;
    s->cfg.model_id = s->model_id;
    if (copy_strs(&s->cors_origins, c->cors_origins, c->n_cors_origins) ||
        copy_strs(&s->allowed_hosts, c->allowed_hosts, c->n_allowed_hosts)) {
        server_free(s);
        return tps_fail(err, TPS_ENOMEM, "out of memory");
    }
    s->cfg.cors_origins = (const char *const *)s->cors_origins;
    s->cfg.allowed_hosts = (const char *const *)s->allowed_hosts;
    s->log = c->log ? c->log : stderr;
    s->tmpl_eot_id = -1;
    s->think_open_id = s->think_close_id = -1;
    seed_generator(s);
    int rc = TPS_ENOMEM;
    s->events = calloc(SERVER_POLL_BATCH, sizeof *s->events);
    s->wbuf = evbuffer_new();
    if (!s->host || !s->events || !s->wbuf) goto fail;
    if ((rc = server_hists_create(&s->h, err))) goto fail;
    rc = TPS_EIO;
    if (!(s->base = event_base_new())) {
        tps_fail(err, rc, "event_base_new failed");
        goto fail;
    }
    server_admit_limits(s); /* before the listener: it caps max_connections */
    if ((rc = create_http(s, c, err))) goto fail;
    if ((rc = create_events(s, c, err))) goto fail;
    if (!s->api_key)
        fprintf(s->log,
                "tps serve: warning: no --api-key: the API is unauthenticated; anyone "
                "who can reach %s:%d can use it\n",
                s->host, s->port);
    *out = s;
    return 0;
fail:
    if (!err->msg[0]) tps_fail(err, rc, "server_create: out of memory or libevent failure");
    server_free(s);
    return rc;
}

int server_port(const server *s) {
    return s->port;
}

engine *server_engine(server *s) {
    return atomic_load(&s->ready) ? s->eng : NULL;
}

static void *loop_main(void *arg) {
    server *s = arg;
    /* This thread writes to sockets that peers have reset, and to sockets
     * the server itself shut down to refuse input mid-response; libevent's
     * writev then fails with EPIPE and raises SIGPIPE, whose default
     * action ends the process. tps serve ignores SIGPIPE in main, but a
     * program that embeds the server need not; blocked here (a mask of
     * this thread only), it is the EPIPE that libevent handles. */
    sigset_t sigpipe;
    sigemptyset(&sigpipe);
    sigaddset(&sigpipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &sigpipe, NULL);
    s->loop_rc = event_base_dispatch(s->base) < 0 ? TPS_EIO : 0;
    return NULL;
}

int server_start(server *s, tps_err *err) {
    if (pthread_create(&s->thread, NULL, loop_main, s))
        return tps_fail(err, TPS_EIO, "cannot start the HTTP thread");
    s->thread_started = true;
    return 0;
}

static const char *basename_of(const char *p) {
    const char *b = strrchr(p, '/');
    return b ? b + 1 : p;
}

/* --chat-template-file FILE: its text compiled as the template. */
static int template_from_file(server *s, tps_err *err) {
    char *text;
    size_t n;
    int rc = tps_read_file(s->chat_template_file, (64u << 20) - 1, &text, &n);
    if (rc == TPS_ENOENT)
        return tps_fail(err, TPS_EIO, "--chat-template-file %s: cannot open it",
                        s->chat_template_file);
    if (rc)
        return tps_fail(err, TPS_EIO, "--chat-template-file %s: cannot read it (or over 64 MiB)",
                        s->chat_template_file);
    rc = chat_prompt_init(&s->prompt, text, n, NULL, 0, CHAT_SRC_FILE, s->chat_template_file, err);
    free(text);
    return rc;
}

/* The chat template: a file or a built-in when asked; else the model's
 * own (its tool_use variant beside it), compiled now so that one it cannot
 * render is a startup error; ChatML only for a file with none. Then the
 * texts of BOS and EOS it reads, and how its end-of-turn stops a chat (a
 * token id, or a stop string). */
static int choose_template(server *s, tps_err *err) {
    int rc = s->chat_template_file ? template_from_file(s, err)
                                   : chat_prompt_for_model(&s->prompt, s->model->file, s->tok,
                                                           s->chat_template_name, err);
    if (!rc && s->chat_template_file) rc = chat_prompt_vocab(&s->prompt, s->tok, err);
    if (rc) return rc;
    if (s->prompt.source == CHAT_SRC_DEFAULT)
        fprintf(s->log, "tps serve: warning: the model has no chat template; chat uses ChatML "
                        "(--chat-template NAME or --chat-template-file FILE to choose)\n");
    const char *eot = s->prompt.eot;
    int32_t id = eot ? tokenizer_find(s->tok, eot, strlen(eot)) : TOKEN_NONE;
    if (eot && id == TOKEN_NONE)
        s->tmpl_eot_as_stop = true;
    else if (eot && !tokenizer_is_eog(s->tok, id))
        s->tmpl_eot_id = id;
    return 0;
}

/* How chat answers are split into reasoning and content, from the served
 * template (the GGUF's, or the one --chat-template-file or --chat-template
 * put in its place) and the vocabulary: harmony channels when the template
 * writes them (gpt-oss); <think> blocks when the vocabulary has "<think>"
 * and "</think>" tokens (Qwen3, QwQ, DeepSeek-R1 and its distills) or the
 * template writes "</think>"; else none. */
static void choose_reasoning(server *s) {
    s->think_open_id = tokenizer_find(s->tok, THINK_OPEN, sizeof THINK_OPEN - 1);
    s->think_close_id = tokenizer_find(s->tok, THINK_CLOSE, sizeof THINK_CLOSE - 1);
    bool tokens = s->think_open_id >= 0 && s->think_close_id >= 0;
    s->reasoning = s->prompt.reasoning == CHAT_REASON_HARMONY           ? CHAT_REASON_HARMONY
                   : tokens || s->prompt.reasoning == CHAT_REASON_THINK ? CHAT_REASON_THINK
                                                                        : CHAT_REASON_NONE;
    if (s->reasoning == CHAT_REASON_THINK)
        fprintf(s->log,
                "tps serve: reasoning model: chat answers' %s...%s blocks go to "
                "reasoning_content (reasoning_format \"none\" keeps them inline)\n",
                THINK_OPEN, THINK_CLOSE);
    else if (s->reasoning == CHAT_REASON_HARMONY)
        fprintf(s->log, "tps serve: reasoning model: chat answers' harmony analysis channel goes "
                        "to reasoning_content, the final channel to content (reasoning_format "
                        "\"none\" keeps the channels inline)\n");
}

/* The markers the server reads out of answers (the tool-call syntax's,
 * "<think>"/"</think>") are output as text even where the vocabulary has
 * them as control tokens, as llama-server keeps a format's "preserved
 * tokens"; an end-of-generation token is left as it is. Before the engine
 * (and its grammar trie) is made from the tokenizer. */
static void show_markers(server *s) {
    const char *const think[] = {THINK_OPEN, THINK_CLOSE, NULL};
    const char *const *lists[] = {s->prompt.tools_known ? tools_marker_texts(s->prompt.tools)
                                                        : NULL,
                                  s->reasoning == CHAT_REASON_THINK ? think : NULL};
    for (size_t l = 0; l < 2; l++)
        for (const char *const *m = lists[l]; m && *m; m++) {
            int32_t id = tokenizer_find(s->tok, *m, strlen(*m));
            if (id >= 0 && tokenizer_is_control(s->tok, id) && !tokenizer_is_eog(s->tok, id))
                tokenizer_render_as_text(s->tok, id);
        }
}

/* The startup lines: model, engine sizes, memory, the ITL target. */
static void log_loaded(server *s) {
    const engine_params *in = engine_get_params(s->eng);
    engine_stats st;
    engine_get_stats(s->eng, &st);
    char tmpl[256];
    fprintf(s->log,
            "tps serve: model %s (ctx %u, vocab %u), chat template: %s (tool calls: %s), "
            "max_seqs %u, max_batch_tokens %u, kv %u blocks x %u tokens\n",
            s->model_id, s->model->cfg.ctx_len, s->model->cfg.n_vocab,
            chat_prompt_describe(&s->prompt, tmpl, sizeof tmpl),
            s->prompt.tools_known ? tools_format_name(s->prompt.tools) : "not parsed", in->max_seqs,
            in->max_batch_tokens, st.kv_blocks_total, st.kv_block_tokens);
    if (st.kv_local_blocks_total)
        fprintf(s->log,
                "tps serve: sliding-window layers: a pool of %u blocks of their own, each "
                "sequence holding only its window's\n",
                st.kv_local_blocks_total);
    if (st.state_slots_total && st.state_ckpt_every)
        fprintf(s->log,
                "tps serve: linear-attention layers: %u recurrent-state slots of %.2f MiB, one per "
                "running sequence; the prefix cache reuses a prompt up to its last state "
                "checkpoint (every %u positions, %u kept)\n",
                st.state_slots_total, (double)st.state_slot_bytes / 1048576.0, st.state_ckpt_every,
                st.state_ckpts_total);
    else if (st.state_slots_total)
        fprintf(s->log,
                "tps serve: linear-attention layers: %u recurrent-state slots of %.2f MiB, one per "
                "running sequence\n",
                st.state_slots_total, (double)st.state_slot_bytes / 1048576.0);
    const llama_weights *w = &s->model->w;
    const size_t file_data = s->model->file->size - s->model->file->data_offset;
    fprintf(s->log,
            "tps serve: memory: weights %.1f MiB (file tensors %.1f MiB%s), KV pool %.1f MiB "
            "reserved (%s), %.1f MiB faulted in ahead%s\n",
            (double)(file_data - w->released_bytes + w->packed_bytes) / 1048576.0,
            (double)file_data / 1048576.0,
            w->packed ? ", repacked copies replace their file pages" : "",
            (double)in->kv_mem / 1048576.0,
            in->kv_type == GGML_TYPE_F16    ? "f16"
            : in->kv_type == GGML_TYPE_Q8_0 ? "q8_0"
                                            : "f32",
            (double)in->kv_mem * st.kv_blocks_resident / st.kv_blocks_total / 1048576.0,
            st.kv_blocks_resident < st.kv_blocks_total ? ", more as the load needs it" : "");
    const llama_model *m = s->model;
    fprintf(s->log,
            "tps serve: loaded in %.2f s, peak RSS %.1f MiB = %.0f%% of the file's %.1f MiB "
            "(repacking streams it, giving back each tensor's pages)\n",
            (double)m->load_ns / 1e9, (double)m->load_peak_rss / 1048576.0,
            100.0 * (double)m->load_peak_rss / (double)m->file->size,
            (double)m->file->size / 1048576.0);
    if (m->cfg.n_expert)
        fprintf(s->log,
                "tps serve: mixture of experts: %u experts a layer, %u a token: %.2f B parameters, "
                "%.2f B active; a one-row step reads %.1f MiB of the weights' %.1f MiB\n",
                m->cfg.n_expert, m->cfg.n_expert_used, (double)w->params_total / 1e9,
                (double)w->params_active / 1e9, (double)w->bytes_per_token / 1048576.0,
                (double)w->bytes_total / 1048576.0);
    if (!st.itl_target_ns) return;
    char how[64] = "";
    if (s->cfg.engine.itl_target_ms < 0)
        snprintf(how, sizeof how, " (auto: 3 x a one-row step, at least %g ms)",
                 ENGINE_ITL_TARGET_FLOOR_MS);
    fprintf(s->log, "tps serve: itl target %.1f ms%s (step model: %.2f ms + %.3f ms per row)\n",
            (double)st.itl_target_ns / 1e6, how, (double)st.step_cost_fixed_ns / 1e6,
            (double)st.step_cost_row_ns / 1e6);
}

int server_load(server *s, tps_err *err) {
    if (!s->model_path) return tps_fail(err, TPS_EINVAL, "no model path (-m MODEL)");
    int rc;
    llama_load_opts lo = {.no_repack = s->cfg.no_repack};
    if ((rc = llama_model_load_opts(&s->model, s->model_path, &lo, err))) return rc;
    if ((rc = tokenizer_load(&s->tok, s->model->file, err))) return rc;
    if (!s->model_id && !(s->model_id = strdup(basename_of(s->model_path))))
        return tps_fail(err, TPS_ENOMEM, "out of memory");
    s->cfg.model_id = s->model_id;

    if ((rc = choose_template(s, err))) return rc;
    choose_reasoning(s);
    show_markers(s);

    grammar_cache_config gcc = {
        .max_entries = s->cfg.grammar_cache,
        .budget_bytes = s->cfg.constraint_mem,
        .budget_label = "(--constraint-mem)",
        .limits = {.max_ns = (uint64_t)s->cfg.grammar_max_ms * TPS_NS_PER_MS,
                   .max_bytes = s->cfg.grammar_max_bytes,
                   .time_label = "(--grammar-max-ms)",
                   .bytes_label = "(--grammar-max-mem)"},
    };
    if ((rc = grammar_cache_create(&s->grammars, &gcc, err))) return rc;
    if ((rc = response_store_create(&s->store, &s->cfg.response_store, err))) return rc;
    s->cursor_bytes = constraint_cursor_bytes(s->model->cfg.n_vocab);
    engine_params ep = s->cfg.engine;
    ep.model = s->model;
    ep.tok = s->tok;
    if ((rc = server_calib_begin(s, &ep, err))) return rc;
    if ((rc = engine_create(&s->eng, &ep, err))) return rc;
    server_calib_warmup(s);
    /* the roofline /metrics reads figures against: cached, or measured
     * once now (about a second, before the port says ready) */
    tps_err merr = {{0}};
    int nth = ep.n_threads ? ep.n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (machine_limits_get(&s->machine, nth, &merr))
        fprintf(s->log, "tps serve: warning: no machine limits for the roofline: %s\n", merr.msg);
    else if (s->machine.busy)
        fprintf(s->log,
                "tps serve: note: the machine's limits were measured while it was busy (%s); "
                "/metrics says so (tps_machine_limits_busy), and tps machine on a quiet machine "
                "caches its own\n",
                s->machine.busy_why);
    s->ev_engine =
        event_new(s->base, engine_event_fd(s->eng), EV_READ | EV_PERSIST, server_on_engine, s);
    if (!s->ev_engine || event_add(s->ev_engine, NULL))
        return tps_fail(err, TPS_EIO, "cannot watch the engine's event fd");
    log_loaded(s);
    atomic_store(&s->ready, true);
    fprintf(s->log, "tps serve: listening on http://%s:%d\n", s->host, s->port);
    fflush(s->log);
    return 0;
}

int server_wait(server *s) {
    if (s->thread_started) {
        pthread_join(s->thread, NULL);
        s->thread_started = false;
    }
    return s->loop_rc;
}

void server_free(server *s) {
    if (!s) return;
    if (s->thread_started) {
        server_stop(s);
        server_wait(s);
    }
    /* The workers first: they only prepare; their jobs are dropped. Then
     * the engine: its thread stops and nothing refers to a req_ctx. */
    server_work_free(s);
    if (s->ev_engine) event_free(s->ev_engine);
    engine_destroy(s->eng);
    server_calib_end(s);
    while (s->inflight) {
        req_ctx *c = s->inflight;
        if (c->conn) evhttp_connection_set_closecb(c->conn, NULL, NULL);
        if (c->req && !evhttp_request_get_connection(c->req)) evhttp_request_free(c->req);
        c->req = NULL;
        req_ctx_free(c);
    }
    grammar_cache_free(s->grammars); /* after everything that held its grammars */
    response_store_free(s->store);
    if (s->http) evhttp_free(s->http);
    server_conns_sweep(s, true);
    free(s->conns);
    if (s->ev_signal) event_free(s->ev_signal);
    if (s->ev_sweep) event_free(s->ev_sweep);
    if (s->ev_flush) event_free(s->ev_flush);
    if (s->ev_classify) event_free(s->ev_classify);
    if (s->ev_accept_retry) event_free(s->ev_accept_retry);
    if (s->ev_wake) event_free(s->ev_wake);
    if (s->ev_drain_deadline) event_free(s->ev_drain_deadline);
    if (s->base) event_base_free(s->base);
    chat_prompt_free(&s->prompt);
    tokenizer_free(s->tok);
    llama_model_free(s->model);
    server_hists_free(&s->h);
    free(s->events);
    if (s->wbuf) evbuffer_free(s->wbuf);
    free_strs(s->cors_origins);
    free_strs(s->allowed_hosts);
    TPS_FREE_ALL(s->host, s->api_key, s->chat_template_name, s->chat_template_file, s->model_path,
                 s->model_id, s->calibration_out, s);
}
