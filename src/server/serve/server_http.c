/* The HTTP routes: dispatch by path and method, the browser checks (Host,
 * Origin, CORS preflight), authentication, the synchronous endpoints
 * (/health, /v1/models, /metrics, /reset_prefix_cache), and handing request
 * bodies (/tokenize, /detokenize, /apply-template, completions) to be
 * prepared on a worker (server_work.c).
 *
 * Not here: preparing bodies and admitting completions (server_prepare.c),
 * streaming the answers back (server_stream.c), the /metrics page
 * (server_metrics.c), JSON request parsing (openai.c), response bodies
 * (sse_write.c). */
#include "server/serve/serve.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/clock.h"
#include <stdio.h>

/* ---------------------------------------------------------------------------
 * Synchronous endpoints
 * ------------------------------------------------------------------------- */

static void handle_health(server *s, struct evhttp_request *req) {
    if (server_reply_unavailable(s, req)) return;
    static const char ok[] = "{\"status\":\"ok\"}";
    server_reply(s, req, 200, "application/json", ok, sizeof ok - 1);
}

static void handle_models(server *s, struct evhttp_request *req) {
    if (server_reply_loading(s, req)) return;
    sbuf b;
    sbuf_init(&b);
    sbuf_adds(&b, "{\"object\":\"list\",\"data\":[{\"id\":");
    sbuf_json_str(&b, s->model_id, strlen(s->model_id));
    char tmpl[256];
    chat_prompt_describe(&s->prompt, tmpl, sizeof tmpl);
    sbuf_printf(&b,
                ",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"tps\","
                "\"meta\":{\"n_ctx\":%u,\"n_vocab\":%u,\"chat_template\":",
                (long long)time(NULL), s->model->cfg.ctx_len, s->model->cfg.n_vocab);
    sbuf_json_str(&b, tmpl, strlen(tmpl));
    sbuf_adds(&b, "}}]}");
    server_reply_json(s, req, 200, &b);
    sbuf_free(&b);
}

static void render_routes(server *s, sbuf *b);

static void handle_metrics(server *s, struct evhttp_request *req) {
    if (server_reply_loading(s, req)) return;
    sbuf b;
    sbuf_init(&b);
    server_metrics_render(s, &b);
    render_routes(s, &b);
    if (sbuf_failed(&b))
        server_reply_err(s, req, 500, "server_error", NULL, NULL, "out of memory");
    else
        server_reply(s, req, 200, PROM_CONTENT_TYPE, b.p ? b.p : "", b.len);
    sbuf_free(&b);
}

/* POST /reset_prefix_cache (vLLM's name): the engine empties its prefix
 * cache before its next step, so a request sent after this answer is served
 * nothing from an earlier one: benchmarks call it between experiments. It
 * empties every user's cache (4,000 resets/s took a victim's TTFT from 1.7
 * to 172 ms, issue 48), so it is an admin route: served only with
 * --enable-admin-routes (vLLM: dev mode only), and at most once per
 * SERVER_ADMIN_PERIOD_MS. */
static void handle_reset_prefix(server *s, struct evhttp_request *req) {
    if (!s->cfg.enable_admin_routes) {
        server_reply_err(s, req, 404, "not_found_error", NULL, "not_found",
                         "/reset_prefix_cache is an admin route, off by default: start the "
                         "server with --enable-admin-routes to serve it");
        return;
    }
    if (server_reply_unavailable(s, req)) return;
    uint64_t now = tps_now_ns();
    if (s->admin_last_ns && now - s->admin_last_ns < SERVER_ADMIN_PERIOD_MS * TPS_NS_PER_MS) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
        server_reply_err(s, req, 429, "rate_limit_error", NULL, "rate_limited",
                         "/reset_prefix_cache is served at most once a second; retry after a "
                         "second");
        return;
    }
    s->admin_last_ns = now;
    static const char on[] = "{\"status\":\"ok\",\"prefix_cache\":true}",
                      off[] = "{\"status\":\"ok\",\"prefix_cache\":false}";
    if (engine_reset_prefix_cache(s->eng))
        server_reply(s, req, 200, "application/json", on, sizeof on - 1);
    else /* --no-prefix-cache: nothing was ever kept */
        server_reply(s, req, 200, "application/json", off, sizeof off - 1);
}

/* GET /v1/responses/{id}: the stored response object; DELETE: removed.
 * A missing id is a 404 that says why (never stored, evicted, expired,
 * deleted). */
static void handle_response_id(server *s, struct evhttp_request *req) {
    if (server_reply_loading(s, req)) return;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *id = evhttp_uri_get_path(uri) + strlen("/v1/responses/");
    tps_err err = {{0}};
    bool del = evhttp_request_get_command(req) == EVHTTP_REQ_DELETE;
    char *text = NULL;
    size_t n = 0;
    int rc = del ? response_store_delete(s->store, id, tps_now_ns(), &err)
                 : response_store_get(s->store, id, RESPONSE_OBJECT, tps_now_ns(), &text, &n, &err);
    if (rc) {
        server_reply_err(s, req, rc == TPS_ENOENT ? 404 : 500,
                         rc == TPS_ENOENT ? "invalid_request_error" : "server_error", "response_id",
                         rc == TPS_ENOENT ? "not_found" : NULL, err.msg);
        return;
    }
    sbuf b;
    sbuf_init(&b);
    if (del) {
        sbuf_adds(&b, "{\"id\":");
        sbuf_json_str(&b, id, strlen(id));
        sbuf_adds(&b, ",\"object\":\"response\",\"deleted\":true}");
    } else {
        sbuf_add(&b, text, n);
    }
    free(text);
    server_reply_json(s, req, 200, &b);
    sbuf_free(&b);
}

/* ---------------------------------------------------------------------------
 * Bodies: prepared on a worker (server_prepare.c, server_work.c)
 * ------------------------------------------------------------------------- */

/* Takes the body (moved, not copied) and hands it to a worker; the answer
 * comes from server_work_finish. */
static void handle_body(server *s, struct evhttp_request *req, work_kind kind) {
    if (server_reply_unavailable(s, req)) return;
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    if (len > s->cfg.max_body_bytes) {
        oai_error e;
        oai_error_set(&e, 413, "invalid_request_error", NULL, "request_too_large",
                      "the request body has %zu bytes; this server accepts at most %zu "
                      "(--max-body-bytes)",
                      len, s->cfg.max_body_bytes);
        server_reply_error(s, req, &e);
        return;
    }
    work_job *j = calloc(1, sizeof *j);
    if (j) j->body = evbuffer_new();
    if (!j || !j->body || evbuffer_add_buffer(j->body, in)) {
        if (j && j->body) evbuffer_free(j->body);
        free(j);
        server_reply_err(s, req, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    j->s = s;
    j->kind = kind;
    j->req = req;
    j->conn = evhttp_request_get_connection(req);
    sbuf_init(&j->reply);
    j->large = len > SERVER_SMALL_BODY;
    /* every body on a worker, however small: parsing is cheap but a
     * template render or a continue_final_message search need not be */
    if (!server_work_submit(s, j)) {
        j->conn = NULL;
        server_work_job_free(j);
        server_reply_err(s, req, 429, "rate_limit_error", NULL, "server_busy",
                         "the server is busy preparing other large requests; retry after a second");
    }
}

/* ---------------------------------------------------------------------------
 * Dispatch
 * ------------------------------------------------------------------------- */

/* Compares in time that depends only on the key's length, never on where
 * the first difference is. */
static bool key_matches(const char *given, size_t gl, const char *key) {
    size_t kl = strlen(key);
    volatile unsigned char d = (unsigned char)(gl != kl);
    for (size_t i = 0; i < kl; i++)
        d |= (unsigned char)(key[i] ^ (i < gl ? given[i] : 0));
    return d == 0;
}

/* The API key as Bearer (OpenAI's clients) or x-api-key (Anthropic's). */
static bool authorized(server *s, struct evhttp_request *req) {
    if (!s->api_key) return true;
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    const char *x = evhttp_find_header(in, "x-api-key");
    if (x) return key_matches(x, strlen(x), s->api_key);
    const char *h = evhttp_find_header(in, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0) return false;
    h += 7;
    while (*h == ' ')
        h++;
    return key_matches(h, strlen(h), s->api_key);
}

/* A synchronous answer; NULL in a row whose body is prepared (handle_body). */
typedef void (*route_fn)(server *s, struct evhttp_request *req);

/* One row per route: adding one is adding a row. */
static const struct route {
    const char *path;
    unsigned method;  /* evhttp_cmd_type bits; GET also answers HEAD; OPTIONS is the CORS
                         preflight */
    route_fn handler; /* the answer, or NULL: the body is prepared as `body` */
    work_kind body;
    bool open;   /* no API key needed */
    bool prefix; /* the path and anything after it (an id) */
} routes[] = {
    {"/v1/completions", EVHTTP_REQ_POST, NULL, WORK_COMPLETION, false, false},
    {"/v1/chat/completions", EVHTTP_REQ_POST, NULL, WORK_CHAT, false, false},
    {"/v1/responses", EVHTTP_REQ_POST, NULL, WORK_RESPONSES, false, false},
    {"/v1/responses/", EVHTTP_REQ_GET | EVHTTP_REQ_DELETE, handle_response_id, 0, false, true},
    {"/v1/messages", EVHTTP_REQ_POST, NULL, WORK_MESSAGES, false, false},
    {"/v1/messages/count_tokens", EVHTTP_REQ_POST, NULL, WORK_COUNT_TOKENS, false, false},
    {"/v1/models", EVHTTP_REQ_GET, handle_models, 0, false, false},
    {"/health", EVHTTP_REQ_GET, handle_health, 0, true, false},
    {"/metrics", EVHTTP_REQ_GET, handle_metrics, 0, true, false},
    {"/tokenize", EVHTTP_REQ_POST, NULL, WORK_TOKENIZE, false, false},
    {"/detokenize", EVHTTP_REQ_POST, NULL, WORK_DETOKENIZE, false, false},
    {"/apply-template", EVHTTP_REQ_POST, NULL, WORK_APPLY_TEMPLATE, false, false},
    {"/reset_prefix_cache", EVHTTP_REQ_POST, handle_reset_prefix, 0, false, false},
};

_Static_assert(sizeof routes / sizeof routes[0] <= SERVER_ROUTES_MAX, "room in route_requests");

/* /metrics: requests by the route they matched, every route a row (an
 * id-taking route's path ends "{id}"). */
static void render_routes(server *s, sbuf *b) {
    prom_family(b, "tps_http_requests_by_endpoint_total", "counter",
                "HTTP requests by the route they matched (before authentication).");
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        char labels[96];
        snprintf(labels, sizeof labels, "endpoint=\"%s%s\"", routes[i].path,
                 routes[i].prefix ? "{id}" : "");
        prom_sample(b, "tps_http_requests_by_endpoint_total", labels, (double)s->route_requests[i]);
    }
}

/* The Allow header of a route: its methods. */
static const char *methods_of(const struct route *rt) {
    return rt->method == EVHTTP_REQ_POST                        ? "POST"
           : rt->method == (EVHTTP_REQ_GET | EVHTTP_REQ_DELETE) ? "GET, HEAD, DELETE"
                                                                : "GET, HEAD";
}

/* The Host header, port cut, names this server: the bound address,
 * localhost, or an --allowed-host name (checked only when bound to
 * loopback, where a browser page reaching it through DNS rebinding sends
 * its own host name). */
static bool host_allowed(server *s, const char *host) {
    if (!s->loopback || !host) return true;
    size_t n = strlen(host);
    if (host[0] == '[') { /* [v6]:port */
        const char *e = strchr(host, ']');
        if (!e) return false;
        n = (size_t)(e - host) + 1;
    } else {
        const char *c = strchr(host, ':');
        if (c) n = (size_t)(c - host);
    }
    if (n == 0) return false;
    static const char *const local[] = {"localhost", "127.0.0.1", "[::1]"};
    for (size_t i = 0; i < sizeof local / sizeof local[0]; i++)
        if (strlen(local[i]) == n && !strncasecmp(host, local[i], n)) return true;
    if (strlen(s->host) == n && !strncasecmp(host, s->host, n)) return true;
    if (s->host[0] != '[' && host[0] == '[' && strlen(s->host) == n - 2 &&
        !strncasecmp(host + 1, s->host, n - 2))
        return true;
    for (char **a = s->allowed_hosts; a && *a; a++)
        if (strlen(*a) == n && !strncasecmp(host, *a, n)) return true;
    return false;
}

static bool origin_allowed(server *s, const char *origin) {
    for (char **a = s->cors_origins; a && *a; a++)
        if (!strcmp(*a, "*") || !strcmp(*a, origin)) return true;
    return false;
}

/* OPTIONS from an allowed origin: the CORS preflight's answer. */
static void reply_preflight(server *s, struct evhttp_request *req, const struct route *rt) {
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    char m[64];
    snprintf(m, sizeof m, "%s, OPTIONS", methods_of(rt));
    evhttp_add_header(h, "Access-Control-Allow-Methods", m);
    evhttp_add_header(h, "Access-Control-Allow-Headers",
                      "Authorization, Content-Type, x-api-key, anthropic-version");
    evhttp_add_header(h, "Access-Control-Max-Age", "600");
    conn_slot *slot = server_conn_busy(s, req, false);
    evhttp_send_reply(req, 204, "No Content", NULL);
    server_conn_guard(slot);
}

/* Host and Origin: true when the request may go on (else it was answered
 * 403). Allowed origins get their Access-Control-Allow-Origin header. */
static bool browser_checks(server *s, struct evhttp_request *req) {
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    const char *host = evhttp_find_header(in, "Host");
    oai_error e;
    if (!host_allowed(s, host)) {
        oai_error_set(&e, 403, "permission_error", NULL, "host_not_allowed",
                      "Host '%.100s' does not name this server; it answers to %s and localhost "
                      "(--allowed-host NAME to add a name)",
                      host, s->host);
        server_reply_error(s, req, &e);
        return false;
    }
    const char *origin = evhttp_find_header(in, "Origin");
    if (!origin) return true; /* not a browser's cross-origin request: curl, SDKs */
    if (!origin_allowed(s, origin)) {
        oai_error_set(&e, 403, "permission_error", NULL, "origin_not_allowed",
                      "requests from web origin '%.100s' are not allowed (--cors-origin ORIGIN "
                      "to allow one)",
                      origin);
        server_reply_error(s, req, &e);
        return false;
    }
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);
    evhttp_add_header(out, "Access-Control-Allow-Origin", origin);
    evhttp_add_header(out, "Vary", "Origin");
    return true;
}

void server_http_route(struct evhttp_request *req, void *arg) {
    server *s = arg;
    server_conn_busy(s, req, true);
    if (!browser_checks(s, req)) return;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    if (!path || !path[0]) path = "/";
    const struct route *rt = NULL;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0] && !rt; i++) {
        size_t n = strlen(routes[i].path);
        if (routes[i].prefix
                ? !strncmp(path, routes[i].path, n) && path[n] && !strchr(path + n, '/')
                : !strcmp(path, routes[i].path)) {
            rt = &routes[i];
            s->route_requests[i]++;
        }
    }
    if (!rt) {
        oai_error e;
        oai_error_set(&e, 404, "not_found_error", NULL, "not_found",
                      "no route %.200s; see docs/api.md for the endpoints", path);
        server_reply_error(s, req, &e);
        return;
    }
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    if (cmd == EVHTTP_REQ_OPTIONS &&
        evhttp_find_header(evhttp_request_get_input_headers(req), "Origin")) {
        reply_preflight(s, req, rt); /* browser_checks allowed the origin */
        return;
    }
    if (!(cmd & rt->method) && !(cmd == EVHTTP_REQ_HEAD && (rt->method & EVHTTP_REQ_GET))) {
        const char *m = methods_of(rt);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", m);
        oai_error e;
        oai_error_set(&e, 405, "invalid_request_error", NULL, "method_not_allowed",
                      "%s accepts only %s", rt->path, m);
        server_reply_error(s, req, &e);
        return;
    }
    if (!rt->open && !authorized(s, req)) {
        server_reply_err(s, req, 401, "authentication_error", NULL, "invalid_api_key",
                         "missing or wrong API key: send the header 'Authorization: Bearer KEY' "
                         "(or 'x-api-key: KEY')");
        return;
    }
    if (rt->handler)
        rt->handler(s, req);
    else
        handle_body(s, req, rt->body);
}
