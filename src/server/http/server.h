/* `tps serve` as an object: an OpenAI-compatible HTTP server (libevent
 * evhttp) in its own thread, in front of one engine. The HTTP thread never
 * waits on a step: it submits requests, and the engine's event fd, watched
 * by the same loop, wakes it to write each token as it comes.
 *
 * Lifecycle (tests run it in-process on port 0):
 *   server_config_default(&c); c.model_path = ...; c.port = 0;
 *   server_create(&s, &c, &err);  binds; /health answers 503 until loaded
 *   server_start(s, &err);        starts the HTTP thread
 *   server_load(s, &err);         loads model, tokenizer, engine (blocking)
 *   ... server_port(s) ...
 *   server_drain(s) or server_stop(s); server_wait(s); server_free(s);
 *
 * Not here: argument parsing and signal setup (cli/cli_serve.c passes a
 * signalfd in), the request JSON (openai.h), response bodies (sse_write.h),
 * chat templates (chat_template.h), the Prometheus writer (prom_write.h). */
#ifndef TPS_SERVER_H
#define TPS_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "engine/core/engine.h"
#include "base/error.h"
#include "server/write/response_store.h"

typedef struct server server;

typedef struct server_config {
    const char *model_path;         /* GGUF file (required by server_load) */
    bool no_repack;                 /* borrow every weight from the mmap (no repacked copy) */
    const char *model_id;           /* id in responses and /v1/models; NULL: file basename */
    const char *host;               /* bind address; default "127.0.0.1" */
    int port;                       /* 0: an ephemeral port (server_port says which) */
    const char *api_key;            /* NULL or "": no authentication (warned at startup) */
    const char *chat_template;      /* a built-in template by name; NULL: the model's own */
    const char *chat_template_file; /* a Jinja template file; NULL: the model's own */
    time_t template_now;            /* the time templates read (strftime_now, FireFunction's
                                       datetime); 0: the clock. A fixed one makes renders
                                       reproducible (tests against jinja2's) */
    engine_params engine;           /* model and tok are filled by server_load */
    size_t max_body_bytes;          /* request body limit (413); default 8 MiB */
    size_t max_header_bytes;        /* request line + headers limit; default 16 KiB */
    uint32_t max_connections;       /* connections with requests (503 above), 8 more for /health
                                       and /metrics; silent ones are shed first when the table
                                       is full (server_admit.c); lowered to fit the open-file
                                       limit; default 1024 */
    uint32_t max_conns_per_client;  /* requests under way from one address (429 above); 0: half
                                       of max_connections */
    uint32_t timeout_s; /* a request must arrive whole within it; idle keep-alive too; default 60 */
    uint32_t header_timeout_s;       /* a request's header block must arrive within it of the
                                        connection's accept or of its first byte; default 10; 0: none */
    const char *const *cors_origins; /* Origin values browsers may call from (exact match, or
                                        "*"); others get 403; none by default */
    size_t n_cors_origins;
    const char *const *allowed_hosts; /* bound to loopback: Host names accepted besides the
                                         bound address and localhost */
    size_t n_allowed_hosts;
    uint32_t max_tokens_cap;    /* max_tokens ceiling (400 above it); 0: the context */
    uint32_t max_prompt_tokens; /* prompt tokens ceiling (400 above it); 0: the context */
    uint32_t max_n;             /* most choices per request (n; 400 above it); default 16, >= 1 */
    uint32_t drain_timeout_s;   /* drain: in-flight requests get this long; default 30 */
    bool enable_admin_routes;   /* POST /reset_prefix_cache is served (at most once per
                                   SERVER_ADMIN_PERIOD_MS, 429 above); off: 404 naming
                                   --enable-admin-routes */
    /* Constrained output (grammar_cache.h): compiling one request's grammar
     * may take grammar_max_ms and grammar_max_bytes (400 above either; 0:
     * no limit); compiled grammars alive and the choices' recognizers take
     * at most constraint_mem together (503 + Retry-After above; 0: no
     * limit); grammar_cache compiled grammars are kept for requests that
     * send the same one again (0: none). Defaults 2000 ms, 64 MiB, 1 GiB, 64. */
    uint32_t grammar_max_ms;
    size_t grammar_max_bytes;
    size_t constraint_mem;
    uint32_t grammar_cache;
    int signal_fd; /* -1, or a signalfd: readable -> drain; a second -> stop */
    FILE *log;     /* startup lines and warnings; NULL: stderr */
    /* At server_free, the step-cost model fitted on every step served is
     * written here (engine/cost/step_fit.h; tps plan --calibration reads it);
     * NULL: none. */
    const char *calibration_out;
    /* Fields no allow-list row names (docs/api.md): a 400 naming them
     * (false, the default), or dropped, named in the answer's header
     * X-Tps-Ignored-Fields and counted in /metrics (--unknown-fields ignore). */
    int unknown_fields_ignore; /* 0 or 1 (an int: the option table writes an int) */
    /* The Responses API's store (response_store.h): entries, bytes and age
     * (--response-store-entries, --response-store-bytes, --response-store-age). */
    response_store_limits response_store;
} server_config;

void server_config_default(server_config *c);

/* Binds host:port and prepares the loop; no thread, no model yet. The
 * config's strings are copied. */
int server_create(server **out, const server_config *c, tps_err *err);
/* The bound port (the ephemeral one when the config said 0). */
int server_port(const server *s);
/* Starts the HTTP thread. */
int server_start(server *s, tps_err *err);
/* Loads the model, tokenizer and chat template and starts the engine; then
 * the completion endpoints and /health answer. Blocks the caller. */
int server_load(server *s, tps_err *err);
/* Thread-safe. Drain: stop accepting, answer new requests 503, let
 * in-flight ones finish (bounded by drain_timeout_s, then cancelled), then
 * the loop exits. Stop: cancel everything and exit the loop now. */
void server_drain(server *s);
void server_stop(server *s);
/* Waits for the HTTP thread to exit (after a drain, a stop or a fatal
 * error). Returns 0, or the error that ended the loop. */
int server_wait(server *s);
/* Stops if needed, then frees everything in reverse order of creation. */
void server_free(server *s);

/* Borrowed; NULL before server_load. For tests (engine_get_stats). */
engine *server_engine(server *s);

#endif
