/* `tps serve`: argument parsing and wiring only. Blocks SIGTERM/SIGINT in
 * every thread and hands a signalfd to the server, whose event loop drains
 * on the first signal and stops on the second; the server itself is
 * src/server/http/server.h. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_rows.h"
#include "cli/opt.h"
#include "server/http/server.h"

/* The config and the repeatable options that fill its string arrays. */
typedef struct serve_args {
    server_config c; /* first: the rows' offsets are server_config's */
    opt_list cors, hosts;
    const char *cors_buf[64], *hosts_buf[64];
} serve_args;

#define S(field) offsetof(server_config, field)
#define U32_ROW(flag, field, text)                                                                 \
    { flag, .kind = OPT_U32, .off = S(field), .max = 4294967295.0, .help = text }

#define E(field) offsetof(engine_params, field)
#define E32_ROW(flag, field, text)                                                                 \
    { flag, .kind = OPT_U32, .off = E(field), .max = 4294967295.0, .help = text }

/* The engine's rows, which tps plan shares (cli_rows.h): offsets into an
 * engine_params. */
const opt_row serve_engine_rows[] = {
    E32_ROW("--max-seqs", max_seqs, "sequences running at once (default 64)"),
    E32_ROW("--max-batch-tokens", max_batch_tokens, "token rows per step (default 256)"),
    E32_ROW("--prefill-chunk", prefill_chunk, "prompt rows one sequence gets per step"),
    {"--itl-target-ms", .kind = OPT_NUM, .off = E(itl_target_ms), .max = 1e6, .metavar = "T",
     .help = "keep a step that carries decoding streams under T ms by\n"
             "cutting its prompt chunks (predicted from a step-time model\n"
             "calibrated as it runs); 0: off (default: measured at start,\n"
             "3 x a one-row step, at least 5 ms)"},
    {"--kv-mem", .kind = OPT_SIZE, .off = E(kv_mem),
     .help = "KV pool size, e.g. 512M, 2G (default: room for max-seqs\n"
             "full contexts, at most 1 GiB)"},
    E32_ROW("--kv-tokens", kv_tokens, "KV pool size in positions instead of bytes"),
    {"--kv-type", .kind = OPT_CHOICE, .off = E(kv_type),
     .choices =
         (const opt_choice[]){
             {"f16", GGML_TYPE_F16}, {"f32", GGML_TYPE_F32}, {"q8_0", GGML_TYPE_Q8_0}, {NULL, 0}},
     .help = "KV element type (default f16; q8_0 halves KV memory and reads)"},
    E32_ROW("--kv-block", kv_block, "positions per KV block (default 16)"),
    E32_ROW("--max-queue", max_queue, "waiting requests before 429 (default 0: unlimited)"),
    {"--threads", .kind = OPT_INT, .off = E(n_threads), .max = 2147483647.0,
     .help = "kernel threads (default: all cores)"},
    {"--no-prefix-cache", .kind = OPT_FLAG, .off = E(no_prefix_cache),
     .help = "compute every prompt in full (default: reuse the KV blocks\n"
             "of a prompt prefix already computed; same tokens either way)"},
    {"--kv-prefault", .kind = OPT_FLAG, .off = E(kv_prefault),
     .help = "fault in the whole KV pool while idle and let the prefix\n"
             "cache fill it (resident memory: the pool; default: an\n"
             "eighth of it, at least 64 MiB, growing only as far as the\n"
             "running sequences need)"},
    {0},
};

static const opt_row serve_rows[] = {
    {"--model", "-m", OPT_STR, S(model_path), .metavar = "FILE", .help = "GGUF model (required)"},
    {"--model-id", .kind = OPT_STR, .off = S(model_id), .metavar = "NAME",
     .help = "model id in responses (default: the file name)"},
    {"--host", .kind = OPT_STR, .off = S(host), .metavar = "ADDR", .def = "127.0.0.1",
     .help = "bind address"},
    {"--port", .kind = OPT_INT, .off = S(port), .max = 65535,
     .help = "port (default 8080; 0: any free port)"},
    {"--api-key", .kind = OPT_STR, .off = S(api_key), .metavar = "KEY",
     .help = "require 'Authorization: Bearer KEY' (or $TPS_API_KEY)"},
    {"--cors-origin", .kind = OPT_LIST, .off = offsetof(serve_args, cors), .metavar = "ORIGIN",
     .help = "let browser pages from ORIGIN (e.g. http://localhost:3000,\n"
             "or *) call the API; repeatable. Requests with any other\n"
             "Origin header get 403 (default: none allowed)"},
    {"--allowed-host", .kind = OPT_LIST, .off = offsetof(serve_args, hosts), .metavar = "NAME",
     .help = "bound to loopback, Host values other than the address and\n"
             "localhost get 403 (DNS rebinding); NAME is accepted too;\n"
             "repeatable"},
    {"--chat-template-file", .kind = OPT_STR, .off = S(chat_template_file), .metavar = "FILE",
     .help = "a Jinja chat template to serve instead of the model's\n"
             "(default: the GGUF's tokenizer.chat_template, rendered as\n"
             "transformers renders it; a model with none: ChatML)"},
    {"--chat-template", .kind = OPT_STR, .off = S(chat_template), .metavar = "NAME",
     .help = "a built-in template instead of the model's: chatml, llama2,\n"
             "llama3, mistral, mistral-v7, mistral-v7-tekken, zephyr,\n"
             "gemma, phi3"},
    OPT_HEAD("engine:"),
    OPT_ROWS_AT(serve_engine_rows, S(engine)),
    {"--no-repack", .kind = OPT_FLAG, .off = S(no_repack),
     .help = "keep quantized weights in the file's layout (no repacked\n"
             "copy at load: half the memory, slower decode)"},
    {"--trace", .kind = OPT_STR, .off = S(engine.trace_path), .metavar = "FILE",
     .help = "Chrome trace JSON written at exit"},
    {"--save-calibration", .kind = OPT_STR, .off = S(calibration_out), .metavar = "FILE",
     .help = "at exit, write the step-cost model fitted on every step\n"
             "served (tps plan --calibration FILE reads it)"},
    OPT_HEAD("limits:"),
    {"--max-body-bytes", .kind = OPT_SIZE, .off = S(max_body_bytes), .metavar = "N",
     .help = "request body limit, 413 above (default 8M)"},
    {"--max-header-bytes", .kind = OPT_SIZE, .off = S(max_header_bytes), .metavar = "N",
     .help = "request headers limit (default 16K)"},
    U32_ROW("--max-connections", max_connections,
            "connections with requests under way, 503 above; 8 more\n"
            "for /health and /metrics. Silent connections hold no slot:\n"
            "the oldest are shed when the table is full (default 1024,\n"
            "lowered to fit the open-file limit)"),
    U32_ROW("--max-conns-per-client", max_conns_per_client,
            "requests under way from one client address, 429 above\n"
            "(default: half of --max-connections)"),
    {"--header-timeout", .kind = OPT_U32, .off = S(header_timeout_s), .max = 4294967295.0,
     .metavar = "S",
     .help = "a request's headers must arrive within S seconds of the\n"
             "connection or of the request's first byte, 408 after\n"
             "(default 10; 0: only --timeout)"},
    {"--timeout", .kind = OPT_U32, .off = S(timeout_s), .max = 4294967295.0, .metavar = "S",
     .help = "a request must arrive within S seconds; idle keep-alive\n"
             "connections close after S (default 60)"},
    U32_ROW("--max-tokens-cap", max_tokens_cap,
            "highest max_tokens accepted (default: the context)"),
    U32_ROW("--max-prompt-tokens", max_prompt_tokens,
            "longest prompt accepted, 400 above (default: the context)"),
    {"--max-n", .kind = OPT_U32, .off = S(max_n), .min = 1, .max = 4294967295.0,
     .help = "most choices per request (n), 400 above (default 16)"},
    {"--drain-timeout", .kind = OPT_U32, .off = S(drain_timeout_s), .max = 4294967295.0,
     .metavar = "S", .help = "on SIGTERM, in-flight requests get S seconds (default 30)"},
    {"--enable-admin-routes", .kind = OPT_FLAG, .off = S(enable_admin_routes),
     .help = "serve POST /reset_prefix_cache (once a second at most): it\n"
             "empties every user's prefix cache (off: 404)"},
    {"--grammar-max-ms", .kind = OPT_U32, .off = S(grammar_max_ms), .max = 4294967295.0,
     .metavar = "MS",
     .help = "compiling one request's grammar or JSON schema may take MS\n"
             "milliseconds, 400 above (default 2000; 0: no limit)"},
    {"--grammar-max-mem", .kind = OPT_SIZE, .off = S(grammar_max_bytes), .metavar = "BYTES",
     .help = "one request's compiled grammar may take BYTES, 400 above\n"
             "(default 64M; 0: no limit)"},
    {"--constraint-mem", .kind = OPT_SIZE, .off = S(constraint_mem), .metavar = "BYTES",
     .help = "compiled grammars alive plus the recognizers of every\n"
             "constrained choice, all requests together; a request that\n"
             "would pass it gets 503 + Retry-After (default 1G; 0: no limit)"},
    U32_ROW("--grammar-cache", grammar_cache,
            "compiled grammars kept for requests that send the same\n"
            "one again (default 64; 0: none)"),
    OPT_HEAD("APIs (/v1/chat/completions, /v1/completions, /v1/responses, /v1/messages):"),
    {"--unknown-fields", .kind = OPT_CHOICE, .off = S(unknown_fields_ignore),
     .choices = (const opt_choice[]){{"reject", 0}, {"ignore", 1}, {NULL, 0}},
     .help = "a request field no allow-list names (docs/api.md): a 400\n"
             "naming it (reject, the default), or dropped, named in the\n"
             "header X-Tps-Ignored-Fields and counted in /metrics (ignore)"},
    U32_ROW("--response-store-entries", response_store.max_entries,
            "/v1/responses answers kept for previous_response_id and\n"
            "GET /v1/responses/{id}, oldest evicted first (default 1024;\n"
            "0: none kept, store: true is a 400)"),
    {"--response-store-bytes", .kind = OPT_SIZE, .off = S(response_store.max_bytes), .metavar = "N",
     .help = "bytes the kept answers may hold together (default 64M)"},
    {"--response-store-age", .kind = OPT_U32, .off = S(response_store.max_age_s),
     .max = 4294967295.0, .metavar = "S",
     .help = "a kept answer is dropped S seconds after it was made\n"
             "(default 3600; 0: no limit)"},
    {0},
};

static const opt_cmd serve_cmd = {
    .prog = "tps serve",
    .usage = "usage: tps serve -m MODEL.gguf [options]\n"
             "\n"
             "OpenAI-compatible streaming server (POST /v1/completions, /v1/chat/completions,\n"
             "/tokenize, /detokenize; GET or HEAD /v1/models, /health, /metrics) over the\n"
             "continuous-batching engine. SIGTERM drains: no new requests, in-flight ones\n"
             "finish (bounded by --drain-timeout), exit 0. Browsers: requests with an Origin\n"
             "header need --cors-origin. See docs/api.md.\n"
             "\n",
    .rows = serve_rows,
};

int cli_serve(int argc, char **argv) {
    serve_args a;
    memset(&a, 0, sizeof a);
    server_config_default(&a.c);
    a.cors = OPT_LIST_OF(a.cors_buf);
    a.hosts = OPT_LIST_OF(a.hosts_buf);
    a.c.api_key = getenv("TPS_API_KEY");
    int prc = opt_main(&serve_cmd, &a, argc, argv);
    if (prc >= 0) return prc;
    server_config c = a.c;
    c.cors_origins = a.cors.v;
    c.n_cors_origins = a.cors.n;
    c.allowed_hosts = a.hosts.v;
    c.n_allowed_hosts = a.hosts.n;
    if (!c.model_path) {
        fprintf(stderr, "tps serve: -m MODEL is required (see tps serve --help)\n");
        return 2;
    }

    /* Signals: blocked here, so every thread started later inherits the mask;
     * the server's loop reads them from the signalfd. */
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    if (pthread_sigmask(SIG_BLOCK, &mask, NULL) ||
        (c.signal_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC)) < 0) {
        fprintf(stderr, "tps serve: cannot set up signal handling: %s\n", strerror(errno));
        return 1;
    }
    signal(SIGPIPE, SIG_IGN); /* a client gone mid-write is an error return, not a kill */
    /* one descriptor per connection: the soft open-file limit (often 1024)
     * up to the hard one; the server keeps its connections below it */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    server *s = NULL;
    tps_err err = {{0}};
    int rc = server_create(&s, &c, &err);
    if (!rc) rc = server_start(s, &err);
    if (!rc) rc = server_load(s, &err);
    if (rc) {
        fprintf(stderr, "tps serve: %s\n", err.msg);
        server_free(s);
        close(c.signal_fd);
        return 1;
    }
    rc = server_wait(s);
    server_free(s);
    close(c.signal_fd);
    if (rc) {
        fprintf(stderr, "tps serve: the event loop failed\n");
        return 1;
    }
    fprintf(stderr, "tps serve: stopped\n");
    return 0;
}
