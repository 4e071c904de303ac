/* One-shot HTTP requests of the bench, beside the load client's streams:
 * the server's /tokenize when sizing prompts, /metrics while scraping, and
 * a local server's /health and /metrics in a sweep. One handle per caller,
 * reused from request to request (libcurl keeps the connection), the
 * response body in a base/sbuf, and the same way to the endpoint as the
 * load client: the API key, --header lines and --insecure (http_auth), so
 * no call is made with less than the streams are.
 *
 * Blocking (curl easy): never on the load client's event loops. Not here:
 * streaming (client/), what the bodies mean (their callers). */
#ifndef TPS_BENCH_HTTP_CALL_H
#define TPS_BENCH_HTTP_CALL_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "base/sbuf.h"

/* How the bench reaches an endpoint; every string borrowed. */
typedef struct http_auth {
    const char *api_key;        /* "Authorization: Bearer KEY"; NULL: none */
    bool x_api_key;             /* send it as "x-api-key: KEY" (Anthropic's servers) */
    const char *const *headers; /* extra "Name: value" lines (--header) */
    size_t n_headers;
    bool insecure; /* HTTPS without certificate checks (--insecure) */
} http_auth;

typedef struct http_call_opts {
    const http_auth *auth;   /* NULL: none */
    long timeout_ms;         /* the whole request; 0: none */
    long connect_timeout_ms; /* 0: libcurl's */
    size_t max_body;         /* a larger response fails the request; 0: no limit */
    bool local;              /* never through a proxy (a server on this machine) */
    bool json;               /* the requests POST JSON: Content-Type: application/json */
} http_call_opts;

typedef struct http_call {
    void *curl; /* CURL *, owned */
    void *hdrs; /* struct curl_slist *, owned */
    char url[1100];
    size_t max_body;
    bool over;   /* the last response passed max_body */
    sbuf body;   /* the last response's body */
    long status; /* the last response's HTTP status; 0: none */
} http_call;

/* A handle for url. TPS_ENOMEM when libcurl cannot make one. */
int http_call_open(http_call *c, const char *url, const http_call_opts *o, tps_err *e);
void http_call_close(http_call *c);
/* GET url (json NULL) or POST json to it (open it with o->json), the
 * response's body into c->body and its status into c->status. 0 when an
 * answer came (any status); TPS_EIO naming the URL and why when none did or
 * it was over max_body. */
int http_call_do(http_call *c, const char *json, tps_err *e);
/* The same on a handle of its own: the HTTP status (0: no answer); the body
 * in *body (its owner the caller) when body is not NULL. */
long http_call_once(const char *url, const char *json, const http_call_opts *o, sbuf *body);

#endif
