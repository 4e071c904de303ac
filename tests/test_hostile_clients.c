/* `tps serve` against the hostile clients of issue 19: request smuggling and
 * other framing ambiguities, errors libevent would have answered in HTML,
 * HEAD, slot exhaustion (header deadline, per-address limit, the reserved
 * class for /health and /metrics, decided by the request line since issue
 * 33), browsers (Origin, Host). A real server
 * on an ephemeral 127.0.0.1 port, in-process, driven by raw sockets so
 * every byte is ours to choose. Loops are bounded; only 127.0.0.x is used.
 * Model: ../shared/models/stories260K.gguf. Each test failed before the
 * fix it covers (src/server/http/http_frame.c, server_conn.c, server_http.c). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server/http/server.h"
#include "support/raw_http.h"
#include "support/server_fixture.h"
#include "support/test_support.h"

#define MODEL "models/stories260K.gguf"

static size_t count_of(const char *hay, const char *needle) {
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

typedef struct raw_reply {
    int status;
    bool closed;
    char text[16384];
} raw_reply;

/* Sends bytes[0..len) on a new connection from 127.0.0.from and reads
 * until the server closes (or 10 s). */
static void raw(int port, int from, const char *bytes, size_t len, raw_reply *r) {
    r->status = raw_exchange(port, from, bytes, len, 10000, r->text, sizeof r->text, &r->closed);
    cr_assert_neq(r->status, -2, "connect: %s", strerror(errno));
}

static void raw_str(int port, const char *bytes, raw_reply *r) {
    raw(port, 1, bytes, strlen(bytes), r);
}

/* The reply is one JSON error with this status, and the server closed. */
static void assert_json_error(const raw_reply *r, int status, const char *what) {
    cr_assert_eq(r->status, status, "%s: got %d: %s", what, r->status, r->text);
    cr_assert(strstr(r->text, "Content-Type: application/json"), "%s: not JSON: %s", what, r->text);
    cr_assert(strstr(r->text, "{\"error\":{\"message\":"), "%s: not an OpenAI error: %s", what,
              r->text);
    cr_assert_eq(count_of(r->text, "HTTP/1."), 1, "%s: more than one response: %s", what, r->text);
    cr_assert(r->closed, "%s: the connection stayed open", what);
}

#define H "Host: 127.0.0.1\r\n"

/* "METHOD PATH" (line) with Host and Connection: close on a new
 * connection; the reply in r. */
static void ask(int port, const char *line, raw_reply *r) {
    char req[256];
    snprintf(req, sizeof req, "%s HTTP/1.1\r\n" H "Connection: close\r\n\r\n", line);
    raw_str(port, req, r);
}

/* ask, asserting the status of the reply. */
static void expect_answer(int port, const char *line, int status, raw_reply *r) {
    ask(port, line, r);
    cr_assert_eq(r->status, status, "%s: %s", line, r->text);
}

/* ---------------------------------------------------------------------------
 * Framing
 * ------------------------------------------------------------------------- */

Test(hostile, smuggling_and_framing_ambiguities_get_one_json_400_and_a_close, .timeout = 60) {
    FIXTURE_SERVE(f);
    static const struct {
        const char *what, *bytes;
    } bad[] = {
        {"two Content-Length, the second smuggling a GET",
         "POST /tokenize HTTP/1.1\r\n" H "Content-Length: 0\r\nContent-Length: 39\r\n\r\n"
         "GET /v1/models HTTP/1.1\r\n" H "\r\n"},
        {"two equal Content-Length",
         "POST /tokenize HTTP/1.1\r\n" H "Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}"},
        {"Content-Length and Transfer-Encoding",
         "POST /tokenize HTTP/1.1\r\n" H "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
         "0\r\n\r\n"},
        {"Transfer-Encoding other than chunked",
         "POST /tokenize HTTP/1.1\r\n" H "Transfer-Encoding: gzip\r\n\r\n"},
        {"obs-fold", "GET /health HTTP/1.1\r\n" H "X-A: 1\r\n continued\r\n\r\n"},
        {"bare LF", "GET /health HTTP/1.1\n" H "\n"},
        {"space before the colon", "POST /tokenize HTTP/1.1\r\n" H "Content-Length : 2\r\n\r\n{}"},
        {"two Host", "GET /health HTTP/1.1\r\n" H "Host: evil.example\r\n\r\n"},
        {"a body on GET, smuggling a request",
         "GET /health HTTP/1.1\r\n" H "Content-Length: 39\r\n\r\n"
         "GET /v1/models HTTP/1.1\r\n" H "\r\n"},
        {"chunk size zz",
         "POST /tokenize HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\n\r\nzz\r\n"},
        {"chunk size -1",
         "POST /tokenize HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\n\r\n-1\r\n"},
        {"chunk size ffffffffffffffff",
         "POST /tokenize HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        raw_reply r;
        raw_str(f.port, bad[i].bytes, &r);
        assert_json_error(&r, 400, bad[i].what);
        cr_assert(!strstr(r.text, "\"object\":\"list\""), "%s: the smuggled request was served",
                  bad[i].what);
    }
    /* the server goes on */
    raw_reply r;
    expect_answer(f.port, "GET /health", 200, &r);
    fixture_finish(&f);
}

Test(hostile, a_nul_in_the_authorization_value_is_refused, .timeout = 30) {
    FIXTURE_CONFIG(f, c);
    c.api_key = "k";
    fixture_start(&f, &c, true);
    /* before: the value was compared up to the NUL, so "k\0junk" was the key */
    static const char req[] = "GET /v1/models HTTP/1.1\r\n" H "Authorization: Bearer k\0junk\r\n"
                              "Connection: close\r\n\r\n";
    raw_reply r;
    raw(f.port, 1, req, sizeof req - 1, &r);
    assert_json_error(&r, 400, "NUL in a header value");
    cr_assert(strstr(r.text, "control byte 0x00"), "%s", r.text);
    fixture_finish(&f);
}

Test(hostile, every_error_libevent_would_answer_is_openai_json, .timeout = 30) {
    FIXTURE_CONFIG(f, c);
    c.max_body_bytes = 1024;
    c.max_header_bytes = 1024;
    fixture_start(&f, &c, true);
    raw_reply r;
    raw_str(f.port, "POST /tokenize HTTP/1.1\r\n" H "Content-Length: 5000\r\n\r\n", &r);
    assert_json_error(&r, 413, "a body over the limit");
    raw_str(f.port, "POST /tokenize HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\n\r\n800\r\n",
            &r);
    assert_json_error(&r, 413, "a chunked body over the limit");
    char big[2048];
    snprintf(big, sizeof big, "GET /health HTTP/1.1\r\n" H "X-Big: %01500d\r\n\r\n", 0);
    raw_str(f.port, big, &r);
    assert_json_error(&r, 431, "headers over the limit");
    raw_str(f.port, "BREW /health HTTP/1.1\r\n" H "\r\n", &r);
    assert_json_error(&r, 501, "an unknown method");
    raw_str(f.port, "GET /health HTTP/2.0\r\n" H "\r\n", &r);
    assert_json_error(&r, 505, "HTTP/2.0");
    raw_str(f.port, "GET /health\r\n\r\n", &r);
    assert_json_error(&r, 400, "HTTP/0.9");
    raw_str(f.port, "POST /tokenize HTTP/1.1\r\n" H "Expect: teapot\r\nContent-Length: 2\r\n\r\n",
            &r);
    assert_json_error(&r, 417, "an unknown Expect");
    fixture_finish(&f);
}

Test(hostile, head_is_answered_wherever_get_is, .timeout = 30) {
    FIXTURE_SERVE(f);
    const char *paths[] = {"/health", "/metrics", "/v1/models"};
    for (size_t i = 0; i < 3; i++) {
        /* HEAD then GET on one keep-alive connection: the HEAD reply has a
         * length and no body, so the GET's reply is read where it starts */
        char req[256];
        snprintf(req, sizeof req,
                 "HEAD %s HTTP/1.1\r\n" H "\r\nGET /health HTTP/1.1\r\n" H
                 "Connection: close\r\n\r\n",
                 paths[i]);
        raw_reply r;
        raw_str(f.port, req, &r);
        cr_assert_eq(r.status, 200, "HEAD %s: %s", paths[i], r.text);
        cr_assert(strstr(r.text, "Content-Length: "), "HEAD %s: no length: %s", paths[i], r.text);
        const char *second = strstr(r.text, "\r\n\r\n");
        cr_assert(second && !strncmp(second + 4, "HTTP/1.1 200", 12),
                  "HEAD %s: a body followed its headers: %s", paths[i], r.text);
        cr_assert(strstr(second, "{\"status\":\"ok\"}"), "%s", r.text);
    }
    raw_reply r;
    expect_answer(f.port, "HEAD /v1/completions", 405, &r);
    fixture_finish(&f);
}

/* ---------------------------------------------------------------------------
 * Slot exhaustion
 * ------------------------------------------------------------------------- */

Test(hostile, a_header_block_trickled_a_line_a_second_meets_the_header_deadline, .timeout = 30) {
    FIXTURE_CONFIG(f, c);
    c.timeout_s = 60; /* the idle timeout alone would hold the slot for a minute */
    c.header_timeout_s = 1;
    fixture_start(&f, &c, true);
    int fd = raw_connect(f.port, 1);
    cr_assert(raw_send_all(fd, "GET /health HTTP/1.1\r\n", 22));
    uint64_t t0 = raw_now_ms();
    char buf[4096];
    size_t len = 0;
    bool closed = false;
    /* a header line every 300 ms: never idle, never whole */
    for (int i = 0; i < 20 && !closed; i++) {
        usleep(300000);
        char line[32];
        int n = snprintf(line, sizeof line, "X-%d: a\r\n", i);
        if (send(fd, line, (size_t)n, MSG_NOSIGNAL) < 0) closed = true;
        ssize_t k = recv(fd, buf + len, sizeof buf - 1 - len, MSG_DONTWAIT);
        if (k > 0) len += (size_t)k;
        if (k == 0) closed = true;
    }
    uint64_t took = raw_now_ms() - t0;
    if (!closed) {
        bool c2;
        len += raw_read_until_close(fd, buf + len, sizeof buf - len, 2000, &c2);
        closed = c2;
    }
    buf[len] = 0;
    close(fd);
    cr_assert(closed, "headers trickled for 6 s were not cut off (--header-timeout 1)");
    cr_assert_lt(took, 4000, "cut off only after %llu ms", (unsigned long long)took);
    cr_assert(!len || (raw_status_of(buf) == 408 && strstr(buf, "--header-timeout")), "%s", buf);
    fixture_finish(&f);
}

/* A connection whose request has begun and is not whole: its head is in
 * (its class decided by the request line) and part of its body, so it is
 * neither silent nor idle: nothing sheds it before --timeout. */
static int hold_slot(int port, int from) {
    static const char partial[] = "POST /v1/completions HTTP/1.1\r\n" H
                                  "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{";
    int fd = raw_connect(port, from);
    cr_assert_geq(fd, 0, "connect: %s", strerror(errno));
    cr_assert(raw_send_all(fd, partial, sizeof partial - 1));
    return fd;
}

/* Waits until the server has answered fd (or closed it); the answer. */
static void answer_of(int fd, raw_reply *r) {
    raw_read_until_close(fd, r->text, sizeof r->text, 10000, &r->closed);
    r->status = raw_status_of(r->text);
}

Test(hostile, one_address_cannot_hold_every_slot, .timeout = 60) {
    FIXTURE_CONFIG(f, c);
    c.max_connections = 20; /* 10 per client by default */
    fixture_start(&f, &c, true);
    /* requests under way from one address: 10 are taken, the rest get 429 */
    int fds[14];
    for (int i = 0; i < 10; i++)
        fds[i] = hold_slot(f.port, 1);
    usleep(100000);
    for (int i = 10; i < 14; i++) {
        fds[i] = hold_slot(f.port, 1);
        raw_reply r;
        answer_of(fds[i], &r);
        cr_assert_eq(r.status, 429, "request %d from one address: %s", i, r.text);
        cr_assert(strstr(r.text, "--max-conns-per-client") && strstr(r.text, "Retry-After"), "%s",
                  r.text);
    }
    /* another address is served at once, completion and /metrics */
    static const char body[] = "{\"prompt\":\"Once\",\"max_tokens\":2}";
    char req[512];
    snprintf(req, sizeof req,
             "POST /v1/completions HTTP/1.1\r\n" H "Connection: close\r\nContent-Length: %zu\r\n"
             "\r\n%s",
             sizeof body - 1, body);
    raw_reply r;
    uint64_t t0 = raw_now_ms();
    raw(f.port, 2, req, strlen(req), &r);
    cr_assert_eq(r.status, 200, "%s", r.text);
    const char *scrape = "GET /metrics HTTP/1.1\r\n" H "Connection: close\r\n\r\n";
    raw(f.port, 2, scrape, strlen(scrape), &r);
    cr_assert_eq(r.status, 200, "%s", r.text);
    cr_assert_lt(raw_now_ms() - t0, 5000);
    for (int i = 0; i < 14; i++)
        close(fds[i]);
    /* silent sockets hold no slot: past the table (20 + 8) the oldest are
     * shed with a 503, and the address's next request is served */
    int quiet[30];
    for (int i = 0; i < 30; i++)
        quiet[i] = raw_connect(f.port, 3);
    raw_reply q;
    answer_of(quiet[0], &q);
    cr_assert_eq(q.status, 503, "the oldest silent socket: %s", q.text);
    cr_assert(strstr(q.text, "had sent nothing"), "%s", q.text);
    raw(f.port, 3, req, strlen(req), &r);
    cr_assert_eq(r.status, 200, "%s", r.text);
    for (int i = 0; i < 30; i++)
        close(quiet[i]);
    fixture_finish(&f);
}

Test(hostile, health_and_metrics_answer_while_every_slot_is_taken, .timeout = 60) {
    FIXTURE_SERVE_SLOTS(f, 4);
    int fds[4];
    for (int i = 0; i < 4; i++) /* every general slot: requests under way */
        fds[i] = hold_slot(f.port, 1);
    usleep(200000);
    raw_reply r;
    expect_answer(f.port, "GET /health", 200, &r);
    expect_answer(f.port, "HEAD /metrics", 200, &r);
    ask(f.port, "GET /v1/models", &r);
    assert_json_error(&r, 503, "a request over --max-connections");
    cr_assert(strstr(r.text, "--max-connections") && strstr(r.text, "Retry-After"), "%s", r.text);
    for (int i = 0; i < 4; i++)
        close(fds[i]);
    fixture_finish(&f);
}

/* ---------------------------------------------------------------------------
 * Browsers: Origin, Host
 * ------------------------------------------------------------------------- */

static const char complete_body[] = "{\"prompt\":\"Once\",\"max_tokens\":1}";

static void post(int port, const char *headers, raw_reply *r) {
    char req[1024];
    snprintf(req, sizeof req,
             "POST /v1/completions HTTP/1.1\r\n%sConnection: close\r\nContent-Type: text/plain\r\n"
             "Content-Length: %zu\r\n\r\n%s",
             headers, sizeof complete_body - 1, complete_body);
    raw_str(port, req, r);
}

Test(hostile, a_web_page_cannot_start_generations_without_being_allowed, .timeout = 30) {
    FIXTURE_CONFIG(f, c);
    static const char *const origins[] = {"http://localhost:3000"};
    c.cors_origins = origins;
    c.n_cors_origins = 1;
    fixture_start(&f, &c, true);
    raw_reply r;
    /* curl and the SDKs send no Origin: served, text/plain or not */
    post(f.port, H, &r);
    cr_assert_eq(r.status, 200, "%s", r.text);
    cr_assert(!strstr(r.text, "Access-Control-Allow-Origin"), "%s", r.text);
    /* a page elsewhere: 403, nothing generated */
    post(f.port, H "Origin: http://evil.example\r\n", &r);
    assert_json_error(&r, 403, "a foreign origin");
    cr_assert(strstr(r.text, "--cors-origin") && strstr(r.text, "origin_not_allowed"), "%s",
              r.text);
    post(f.port, H "Origin: null\r\n", &r);
    cr_assert_eq(r.status, 403, "%s", r.text);
    /* the allowed origin: served, with the CORS header */
    post(f.port, H "Origin: http://localhost:3000\r\n", &r);
    cr_assert_eq(r.status, 200, "%s", r.text);
    cr_assert(strstr(r.text, "Access-Control-Allow-Origin: http://localhost:3000"), "%s", r.text);
    /* preflight: answered for the allowed origin only */
    raw_str(f.port,
            "OPTIONS /v1/chat/completions HTTP/1.1\r\n" H "Origin: http://localhost:3000\r\n"
            "Access-Control-Request-Method: POST\r\nConnection: close\r\n\r\n",
            &r);
    cr_assert_eq(r.status, 204, "%s", r.text);
    cr_assert(strstr(r.text, "Access-Control-Allow-Methods: POST"), "%s", r.text);
    cr_assert(strstr(r.text, "Access-Control-Allow-Headers: Authorization"), "%s", r.text);
    raw_str(f.port,
            "OPTIONS /v1/chat/completions HTTP/1.1\r\n" H "Origin: http://evil.example\r\n"
            "Access-Control-Request-Method: POST\r\nConnection: close\r\n\r\n",
            &r);
    cr_assert_eq(r.status, 403, "%s", r.text);
    fixture_finish(&f);
}

Test(hostile, bound_to_loopback_only_its_own_host_names_are_answered, .timeout = 30) {
    FIXTURE_CONFIG(f, c);
    static const char *const hosts[] = {"tps.internal"};
    c.allowed_hosts = hosts;
    c.n_allowed_hosts = 1;
    fixture_start(&f, &c, true);
    raw_reply r;
    /* DNS rebinding: the page's own name arrives as Host */
    post(f.port, "Host: rebind.evil.example:8080\r\n", &r);
    assert_json_error(&r, 403, "a foreign Host");
    cr_assert(strstr(r.text, "host_not_allowed") && strstr(r.text, "--allowed-host"), "%s", r.text);
    const char *ok[] = {"Host: 127.0.0.1\r\n", "Host: 127.0.0.1:8080\r\n", "Host: localhost\r\n",
                        "Host: LOCALHOST:1\r\n", "Host: tps.internal:80\r\n"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        post(f.port, ok[i], &r);
        cr_assert_eq(r.status, 200, "%s: %s", ok[i], r.text);
    }
    fixture_finish(&f);
}

/* ---------------------------------------------------------------------------
 * Event-loop stalls
 * ------------------------------------------------------------------------- */

Test(hostile, a_large_prompt_being_tokenized_does_not_hold_up_other_clients, .timeout = 120) {
    FIXTURE_SERVE(f);
    /* 7 MB of text: over a second of tokenizing (more under ASan) */
    static const char story[] = "Once upon a time, there was a little girl named Lily. ";
    size_t text = 7u * 1000 * 1000, cap = text + 256;
    char *req = malloc(cap);
    int head = snprintf(req, cap,
                        "POST /tokenize HTTP/1.1\r\n" H "Connection: close\r\nContent-Length: %zu"
                        "\r\n\r\n{\"content\":\"",
                        text + 14);
    size_t len = (size_t)head;
    while (len < (size_t)head + text) {
        size_t k = sizeof story - 1 < (size_t)head + text - len ? sizeof story - 1
                                                                : (size_t)head + text - len;
        memcpy(req + len, story, k);
        len += k;
    }
    memcpy(req + len, "\"}", 2);
    len += 2;
    int fd = raw_connect(f.port, 1);
    cr_assert(raw_send_all(fd, req, len));
    free(req);
    usleep(300000); /* the body is in; tokenizing has begun */
    raw_reply r;
    expect_answer(f.port, "GET /health", 200, &r);
    /* /health came back while the big request was still being tokenized:
     * before, the HTTP thread tokenized and answered nothing meanwhile */
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    cr_assert_eq(poll(&pf, 1, 0), 0, "the 7 MB request was answered before /health");
    /* and the big one is answered too */
    char *big = malloc(64u << 20);
    bool closed;
    size_t got = raw_read_until_close(fd, big, 64u << 20, 60000, &closed);
    cr_assert(got > 0 && raw_status_of(big) == 200, "%.200s", big);
    cr_assert(strstr(big, "{\"tokens\":["), "%.300s", big);
    free(big);
    close(fd);
    fixture_finish(&f);
}

/* ---------------------------------------------------------------------------
 * Smaller ones: the default max_tokens, the connections gauge
 * ------------------------------------------------------------------------- */

Test(hostile, a_request_naming_no_max_tokens_fits_a_small_kv_pool, .timeout = 60) {
    FIXTURE_CONFIG(f, c);
    c.engine.kv_tokens = 64; /* 4 blocks of 16; the context is 512 */
    fixture_start(&f, &c, true);
    /* before: max_tokens defaulted to the context, which no pool of 64 holds */
    static const char chat[] = "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],"
                               "\"ignore_eos\":true}";
    char req[512];
    snprintf(req, sizeof req,
             "POST /v1/chat/completions HTTP/1.1\r\n" H "Connection: close\r\n"
             "Content-Length: %zu\r\n\r\n%s",
             sizeof chat - 1, chat);
    raw_reply r;
    raw_str(f.port, req, &r);
    cr_assert_eq(r.status, 200, "%s", r.text);
    cr_assert(strstr(r.text, "\"finish_reason\":\"length\""), "%s", r.text);
    /* prompt + completion fill the pool, no more */
    const char *pt = strstr(r.text, "\"prompt_tokens\":"),
               *ct = strstr(r.text, "\"completion_tokens\":");
    cr_assert(pt && ct, "%s", r.text);
    cr_assert_eq(atoi(pt + 16) + atoi(ct + 20), 64, "%s", r.text);
    fixture_finish(&f);
}

Test(hostile, the_open_connections_gauge_counts_only_open_ones, .timeout = 60) {
    FIXTURE_SERVE(f);
    int fds[16];
    for (int i = 0; i < 16; i++) {
        fds[i] = raw_connect(f.port, 1);
        const char *req = "GET /health HTTP/1.1\r\n" H "\r\n"; /* keep-alive */
        cr_assert(raw_send_all(fds[i], req, strlen(req)));
        char buf[512];
        cr_assert_gt(recv(fds[i], buf, sizeof buf, 0), 0);
    }
    /* 16 kept alive, plus the scrape's own */
    cr_assert_eq(raw_metric(f.port, "http_connections_open"), 17);
    for (int i = 0; i < 16; i++)
        close(fds[i]);
    double v = -1;
    for (int i = 0; i < 100 && v != 1; i++) { /* the server sees each close as it comes */
        usleep(20000);
        v = raw_metric(f.port, "http_connections_open");
    }
    cr_assert_eq(v, 1, "16 closed connections still counted: %g open", v);
    fixture_finish(&f);
}
