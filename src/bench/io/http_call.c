/* One-shot HTTP requests on libcurl's easy interface (http_call.h). */
#include "bench/io/http_call.h"

#include <curl/curl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static size_t on_body(char *p, size_t sz, size_t nm, void *ud) {
    http_call *c = ud;
    size_t n = sz * nm;
    if (c->max_body && c->body.len + n > c->max_body) {
        c->over = true;
        return 0;
    }
    sbuf_add(&c->body, p, n);
    return sbuf_failed(&c->body) ? 0 : n;
}

/* The requests' headers: Content-Type for JSON bodies, the key, --header;
 * NULL when there are none (or no memory: *failed). */
static struct curl_slist *headers_of(const http_call_opts *o, bool *failed) {
    const http_auth *a = o->auth;
    struct curl_slist *h = NULL, *n;
    const char *lines[2 + 64];
    size_t k = 0;
    char key[512];
    if (o->json) lines[k++] = "Content-Type: application/json";
    if (a && a->api_key) {
        snprintf(key, sizeof key, a->x_api_key ? "x-api-key: %s" : "Authorization: Bearer %s",
                 a->api_key);
        lines[k++] = key;
    }
    for (size_t i = 0; a && i < a->n_headers && k < sizeof lines / sizeof lines[0]; i++)
        lines[k++] = a->headers[i];
    *failed = false;
    for (size_t i = 0; i < k; i++) {
        if (!(n = curl_slist_append(h, lines[i]))) {
            *failed = true;
            break;
        }
        h = n;
    }
    return h;
}

int http_call_open(http_call *c, const char *url, const http_call_opts *o, tps_err *e) {
    memset(c, 0, sizeof *c);
    sbuf_init(&c->body);
    snprintf(c->url, sizeof c->url, "%s", url);
    c->max_body = o->max_body;
    CURL *h = curl_easy_init();
    bool failed = false;
    c->curl = h;
    c->hdrs = h ? headers_of(o, &failed) : NULL;
    if (!h || failed) {
        http_call_close(c);
        return tps_fail(e, TPS_ENOMEM, "cannot create a libcurl handle for %s", url);
    }
    curl_easy_setopt(h, CURLOPT_URL, c->url);
    if (c->hdrs) curl_easy_setopt(h, CURLOPT_HTTPHEADER, (struct curl_slist *)c->hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (o->timeout_ms) curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, o->timeout_ms);
    if (o->connect_timeout_ms)
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, o->connect_timeout_ms);
    if (o->local) curl_easy_setopt(h, CURLOPT_NOPROXY, "127.0.0.1,localhost");
    if (o->auth && o->auth->insecure) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    return TPS_OK;
}

void http_call_close(http_call *c) {
    if (c->curl) curl_easy_cleanup(c->curl);
    curl_slist_free_all(c->hdrs);
    sbuf_free(&c->body);
    memset(c, 0, sizeof *c);
}

int http_call_do(http_call *c, const char *json, tps_err *e) {
    sbuf_reset(&c->body);
    c->over = false;
    c->status = 0;
    CURL *h = c->curl;
    if (json)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, json);
    else
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    CURLcode cc = curl_easy_perform(h);
    if (cc != CURLE_OK)
        return tps_fail(e, TPS_EIO, "%s: %s", c->url,
                        c->over ? "response over the size limit" : curl_easy_strerror(cc));
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &c->status);
    sbuf_add(&c->body, "", 0); /* NUL-terminated even when empty */
    return TPS_OK;
}

long http_call_once(const char *url, const char *json, const http_call_opts *o, sbuf *body) {
    http_call c;
    tps_err e;
    long status = 0;
    if (http_call_open(&c, url, o, &e) == TPS_OK && http_call_do(&c, json, &e) == TPS_OK)
        status = c.status;
    if (body) {
        *body = c.body; /* moved: the handle gives it up */
        sbuf_init(&c.body);
    }
    http_call_close(&c);
    return status;
}
