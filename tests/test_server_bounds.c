/* `tps serve` keeps its event loop free and every resource bounded (issue
 * 33): grammars compile off the HTTP thread, once, through a cache, within
 * per-request limits and a server-wide memory budget; running out of file
 * descriptors pauses accepts instead of spinning; the reserved /health
 * slots are decided by the request line and silent sockets are shed first;
 * a second SIGTERM ends every cut stream cleanly; a half-closed client
 * gets its whole answer. Each test runs the tps binary on an ephemeral
 * 127.0.0.1 port (support/serve_child.h: TPS_TEST_BIN runs another build)
 * and drives it with raw sockets; every loop is bounded in count and
 * time. Each failed before the fix it covers (src/server/http/server_admit.c,
 * server_conn.c, server_prepare.c, server_stream.c, server.c,
 * src/constrain/grammar_cache.c). Model: ../shared/models/stories260K.gguf. */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/sbuf.h"
#include "support/raw_http.h"
#include "support/serve_child.h"
#include "support/test_support.h"

#define MODEL "models/stories260K.gguf"

/* ---------------------------------------------------------------------------
 * Raw requests
 * ------------------------------------------------------------------------- */

/* A POST /v1/completions with body, keep-alive unless close. Malloc'ed. */
static char *post_req(const char *body, bool close_) {
    size_t n = strlen(body) + 256;
    char *r = malloc(n);
    snprintf(r, n,
             "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n%sContent-Type: "
             "application/json\r\nContent-Length: %zu\r\n\r\n%s",
             close_ ? "Connection: close\r\n" : "", strlen(body), body);
    return r;
}

/* Sends req on a new connection from 127.0.0.<from> and reads until the
 * server closes (timeout_ms at most) into a malloc'ed *out. */
static void exchange(int port, int from, const char *req, int timeout_ms, char **out) {
    size_t cap = 1 << 20;
    *out = calloc(1, cap);
    int fd = raw_connect(port, from);
    cr_assert_geq(fd, 0, "connect: %s", strerror(errno));
    bool closed;
    if (raw_send_all(fd, req, strlen(req)))
        raw_read_until_close(fd, *out, cap, timeout_ms, &closed);
    close(fd);
}

/* The status of the final response (1xx interim responses skipped). */
static int final_status(const char *resp) {
    while (raw_status_of(resp) >= 100 && raw_status_of(resp) < 200) {
        const char *end = strstr(resp, "\r\n\r\n");
        if (!end) return -1;
        resp = end + 4;
    }
    return raw_status_of(resp);
}

/* GET path on a new connection; the milliseconds the whole answer took,
 * or -1 when it was not a 200 within timeout_ms. */
static long timed_get(int port, int from, const char *path, int timeout_ms) {
    char req[256], buf[8192];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
             path);
    uint64_t t0 = raw_now_ms();
    int fd = raw_connect(port, from);
    if (fd < 0) return -1;
    bool closed;
    if (raw_send_all(fd, req, strlen(req)))
        raw_read_until_close(fd, buf, sizeof buf, timeout_ms, &closed);
    else
        buf[0] = 0;
    close(fd);
    long ms = (long)(raw_now_ms() - t0);
    return raw_status_of(buf) == 200 ? ms : -1;
}

/* A sample's value in the server's /metrics page; -1 when absent. */
static double metric(int port, const char *key) {
    char *page = NULL;
    exchange(port, 0, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
             10000, &page);
    double v = -1;
    size_t kl = strlen(key);
    for (const char *p = strstr(page, key); p; p = strstr(p + 1, key))
        if (p[-1] == '\n' && p[kl] == ' ') {
            v = strtod(p + kl + 1, NULL);
            break;
        }
    free(page);
    return v;
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? -1 : x > y;
}

/* ---------------------------------------------------------------------------
 * Grammars
 * ------------------------------------------------------------------------- */

/* A completions body: the JSON fields that fmt formats, then "grammar"
 * holding g's text (escaped for JSON already). Frees g; the caller frees
 * the body. */
__attribute__((format(printf, 2, 3))) static char *grammar_body(sbuf *g, const char *fmt, ...) {
    char fields[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(fields, sizeof fields, fmt, ap);
    va_end(ap);
    sbuf b;
    sbuf_init(&b);
    sbuf_printf(&b, "{%s,\"grammar\":\"%s\"}", fields, g->p);
    sbuf_free(g);
    return b.p;
}

/* The grammar: 2^15 paths through t0..t14 into a 3500-rule chain;
 * compiling it expands for a long while (then refuses it as too ambiguous,
 * or takes it). end is the chain's last literal. As a completions body. */
static char *chain_body(char end, int n) {
    sbuf g;
    sbuf_init(&g);
    sbuf_adds(&g, "root ::= t0\\n");
    for (int i = 0; i < 14; i++)
        sbuf_printf(&g, "t%d ::= t%d | t%d\\n", i, i + 1, i + 1);
    sbuf_adds(&g, "t14 ::= c0\\n");
    for (int i = 0; i < 3500; i++)
        sbuf_printf(&g, "c%d ::= c%d\\n", i, i + 1);
    sbuf_printf(&g, "c3500 ::= \\\"%c\\\"\\n", end);
    return grammar_body(&g, "\"prompt\":\"hi\",\"max_tokens\":4,\"n\":%d", n);
}

/* 20 rules of [lo-z]{0,10000}: a 600-byte grammar that compiles to ~16 MiB. */
static char *repeat_body(char lo, int max_tokens, bool stream) {
    sbuf g;
    sbuf_init(&g);
    sbuf_adds(&g, "root ::=");
    for (int i = 0; i < 20; i++)
        sbuf_printf(&g, " r%d", i);
    sbuf_adds(&g, "\\n");
    for (int i = 0; i < 20; i++)
        sbuf_printf(&g, "r%d ::= [%c-z]{0,10000}\\n", i, lo);
    return grammar_body(&g,
                        "\"prompt\":\"Once\",\"max_tokens\":%d,\"temperature\":0,"
                        "\"ignore_eos\":true,\"stream\":%s",
                        max_tokens, stream ? "true" : "false");
}

typedef struct bg_post {
    int port;
    char *body;
    char *out;
    uint64_t done_ms;
} bg_post;

static void *bg_post_run(void *arg) {
    bg_post *b = arg;
    char *req = post_req(b->body, true);
    exchange(b->port, 0, req, 60000, &b->out);
    __atomic_store_n(&b->done_ms, raw_now_ms(), __ATOMIC_RELEASE);
    free(req);
    return NULL;
}

Test(bounds, health_answers_within_20_ms_while_grammars_compile, .timeout = 120) {
    SERVE_CHILD(ch, NULL);
    /* two different grammars: both workers compile at once (each is
     * refused as too ambiguous, or over --grammar-max-ms under a sanitizer,
     * after a long expansion: what is measured is /health meanwhile) */
    bg_post bg[2] = {{.port = ch.port, .body = chain_body('a', 16)},
                     {.port = ch.port, .body = chain_body('b', 16)}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, bg_post_run, &bg[i]);
    usleep(150000); /* the bodies are in */
    long ms[40];
    int n = 0;
    for (; n < 40; n++) {
        ms[n] = timed_get(ch.port, 2, "/health", 10000);
        cr_assert_geq(ms[n], 0, "/health failed while grammars compiled");
        if (__atomic_load_n(&bg[0].done_ms, __ATOMIC_ACQUIRE) &&
            __atomic_load_n(&bg[1].done_ms, __ATOMIC_ACQUIRE))
            break;
        usleep(20000);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    int during = n; /* the last probe may have ended after both compiles */
    cr_assert_geq(during, 3,
                  "only %d probes while compiling: the grammars compiled too fast to "
                  "measure",
                  during);
    qsort(ms, (size_t)during, sizeof *ms, cmp_long);
    cr_log_info("/health during the compiles: %d probes, min %ld ms, median %ld ms, max %ld ms",
                during, ms[0], ms[during / 2], ms[during - 1]);
    cr_assert_lt(ms[during / 2], 20, "/health took %ld ms (median of %d) while grammars compiled",
                 ms[during / 2], during);
    for (int i = 0; i < 2; i++) {
        int st = final_status(bg[i].out);
        cr_assert(st == 200 || st == 400, "grammar request: %.300s", bg[i].out);
        free(bg[i].out);
        free(bg[i].body);
    }
    serve_reap(&ch, SIGTERM);
}

Test(bounds, a_second_identical_grammar_is_a_cache_hit_with_the_same_tokens, .timeout = 60) {
    SERVE_CHILD(ch, "--grammar-max-ms", "60000"); /* slow under a sanitizer */
    char *body = repeat_body('a', 12, false);
    char *req = post_req(body, true), *a = NULL, *b = NULL;
    exchange(ch.port, 0, req, 30000, &a);
    exchange(ch.port, 0, req, 30000, &b);
    cr_assert_eq(final_status(a), 200, "%.300s", a);
    cr_assert_eq(final_status(b), 200, "%.300s", b);
    const char *ta = strstr(a, "\"text\":"), *tb = strstr(b, "\"text\":");
    cr_assert(ta && tb);
    cr_assert_eq(strcspn(ta, ","), strcspn(tb, ","));
    cr_assert_eq(strncmp(ta, tb, strcspn(ta, ",")), 0,
                 "a cache hit changed the tokens: %.80s / %.80s", ta, tb);
    cr_assert_eq(metric(ch.port, "tps_grammar_cache_misses_total"), 1.0);
    cr_assert_eq(metric(ch.port, "tps_grammar_cache_hits_total"), 1.0);
    cr_assert_eq(metric(ch.port, "tps_grammar_cache_entries"), 1.0);
    /* the compiled grammar, once (not once per choice): 16 MiB and change */
    double held = metric(ch.port, "tps_constraint_memory_bytes");
    cr_log_info("20 x [a-z]{0,10000} compiled: %.1f MiB", held / 1048576.0);
    cr_assert_lt(held, 24.0 * 1048576.0);
    free(a);
    free(b);
    free(req);
    free(body);
    serve_reap(&ch, SIGTERM);
}

/* One request against a server started with extra; the answer. */
static char *one_request(const char *const *extra, const char *body, uint64_t *took_ms,
                         double *fails) {
    serve_child ch;
    serve_spawn(&ch, extra, 0);
    char *req = post_req(body, true), *out = NULL;
    uint64_t t0 = raw_now_ms();
    exchange(ch.port, 0, req, 30000, &out);
    *took_ms = raw_now_ms() - t0;
    *fails = metric(ch.port, "tps_grammar_compile_failures_total");
    free(req);
    serve_reap(&ch, SIGTERM);
    return out;
}

Test(bounds, per_request_grammar_limits_refuse_naming_the_limit, .timeout = 60) {
    REQUIRE_SHARED(MODEL);
    char *slow = chain_body('a', 1), *big = repeat_body('a', 4, false);
    const char *time_limit[] = {"--grammar-max-ms", "50", NULL};
    const char *mem_limit[] = {"--grammar-max-mem", "4M", "--grammar-max-ms", "60000", NULL};
    uint64_t took, took_b;
    double fails, fails_b;
    char *a = one_request(time_limit, slow, &took, &fails);
    char *b = one_request(mem_limit, big, &took_b, &fails_b);
    cr_assert_eq(final_status(a), 400, "%.400s", a);
    cr_assert(strstr(a, "--grammar-max-ms") && strstr(a, "50 ms") &&
                  strstr(a, "\"param\":\"grammar\""),
              "%.400s", a);
    cr_assert_lt(took, 5000, "the time limit did not stop the compile (%llu ms)",
                 (unsigned long long)took);
    cr_assert_eq(final_status(b), 400, "%.400s", b);
    cr_assert(strstr(b, "--grammar-max-mem") && strstr(b, "4.0 MiB"), "%.400s", b);
    cr_assert(fails == 1.0 && fails_b == 1.0, "compile failures counted: %g, %g", fails, fails_b);
    free(a);
    free(b);
    free(slow);
    free(big);
}

/* 4 rules of [lo-z]{0,10000} separated by spaces: ~3.3 MiB compiled. */
static char *spaced_body(char lo, int max_tokens) {
    sbuf g;
    sbuf_init(&g);
    sbuf_adds(&g, "root ::= r0 \\\" \\\" r1 \\\" \\\" r2 \\\" \\\" r3\\n");
    for (int i = 0; i < 4; i++)
        sbuf_printf(&g, "r%d ::= [%c-z]{0,10000}\\n", i, lo);
    return grammar_body(&g, "\"prompt\":\"Once\",\"max_tokens\":%d", max_tokens);
}

#define N_AHEAD 64

Test(bounds, constraint_memory_budget_is_503_with_retry_after_when_full, .timeout = 120) {
    /* one grammar of ~3.3 MiB fits 5 MiB; two in flight do not */
    SERVE_CHILD(ch, "--constraint-mem", "5M", "--max-seqs", "1", "--grammar-max-ms", "60000");
    /* long requests hold the only sequence (read later); the first
     * constrained one waits behind them, holding its compiled grammar */
    char *long_req = post_req("{\"prompt\":\"Once\",\"max_tokens\":500,\"ignore_eos\":true}", true);
    int ahead[N_AHEAD];
    for (int i = 0; i < N_AHEAD; i++) {
        ahead[i] = raw_connect(ch.port, 0);
        cr_assert(ahead[i] >= 0 && raw_send_all(ahead[i], long_req, strlen(long_req)));
    }
    bg_post first = {.port = ch.port, .body = spaced_body('a', 4)};
    pthread_t t;
    pthread_create(&t, NULL, bg_post_run, &first);
    bool held = false;
    for (int i = 0; i < 1000 && !held; i++) {
        held = metric(ch.port, "tps_constraint_memory_bytes") > 2.0 * 1048576.0;
        if (!held) usleep(5000);
    }
    cr_assert(held, "the first constrained request never held its grammar");
    char *other = spaced_body('b', 4), *req = post_req(other, true), *out = NULL;
    exchange(ch.port, 0, req, 30000, &out);
    double waiting = metric(ch.port, "tps_requests_waiting");
    cr_assert_eq(final_status(out), 503, "%.400s", out);
    cr_assert(strstr(out, "Retry-After: 1") && strstr(out, "--constraint-mem") &&
                  strstr(out, "constraint_memory_full"),
              "%.400s", out);
    cr_assert_gt(waiting, 0, "the first request was no longer waiting: the test did not test");
    cr_assert_geq(metric(ch.port, "tps_constraint_memory_refusals_total"), 1.0);
    pthread_join(t, NULL);
    cr_assert_eq(final_status(first.out), 200, "%.300s", first.out);
    for (int i = 0; i < N_AHEAD; i++)
        close(ahead[i]);
    free(out);
    /* with the first done, the same request is served (its grammar evicted) */
    exchange(ch.port, 0, req, 30000, &out);
    cr_assert_eq(final_status(out), 200, "%.400s", out);
    free(out);
    free(req);
    free(other);
    free(long_req);
    free(first.out);
    free(first.body);
    serve_reap(&ch, SIGTERM);
}

/* ---------------------------------------------------------------------------
 * Descriptors and slots
 * ------------------------------------------------------------------------- */

#define N_FLOOD 300

Test(bounds, out_of_descriptors_the_server_pauses_accepts_and_health_answers, .timeout = 120) {
    REQUIRE_SHARED(MODEL);
    serve_child ch;
    serve_spawn(&ch, NULL, 128); /* ulimit -n 128, soft and hard */
    bool said = strstr(ch.log, "--max-connections lowered from 1024") != NULL;
    /* more connections than descriptors, from four addresses, all silent */
    int fds[N_FLOOD];
    int opened = 0;
    for (int i = 0; i < N_FLOOD; i++) {
        fds[i] = raw_connect(ch.port, 2 + i % 4);
        opened += fds[i] >= 0;
    }
    cr_assert_eq(opened, N_FLOOD, "the flood's own connects failed: %s", strerror(errno));
    /* a probe gets through while they are open, and again after */
    long during = timed_get(ch.port, 9, "/health", 5000);
    usleep(500000);
    long later = timed_get(ch.port, 9, "/health", 5000);
    for (int i = 0; i < N_FLOOD; i++)
        close(fds[i]);
    usleep(300000);
    long after = timed_get(ch.port, 9, "/health", 5000);
    serve_read_log(&ch);
    cr_log_info("/health with %d silent connections: %ld ms, %ld ms; after: %ld ms; log %zu bytes",
                N_FLOOD, during, later, after, ch.log_total);
    cr_assert(during >= 0 && later >= 0 && after >= 0, "/health: %ld, %ld, %ld ms", during, later,
              after);
    cr_assert_lt(after, 1000);
    cr_assert_lt(ch.log_total, 16384, "the log grew by %zu bytes: %.2000s", ch.log_total, ch.log);
    cr_assert(said, "no word at start of the limit lowering --max-connections: %s", ch.log);
    int st = serve_reap(&ch, SIGTERM);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d: %s", st, ch.log);
}

Test(bounds, a_probe_gets_through_while_silent_sockets_hold_every_slot, .timeout = 60) {
    SERVE_CHILD(ch, "--max-connections", "32");
    /* the reproducer: 48 silent sockets from three addresses */
    int fds[48];
    for (int i = 0; i < 48; i++)
        fds[i] = raw_connect(ch.port, 2 + i % 3);
    usleep(300000);
    for (int k = 0; k < 5; k++) {
        long ms = timed_get(ch.port, 1, "/health", 5000);
        cr_assert_geq(ms, 0, "probe %d: no answer in 5 s", k);
        cr_assert_lt(ms, 2000, "probe %d took %ld ms", k, ms);
    }
    /* and an ordinary request from a new address is served too */
    char *req = post_req("{\"prompt\":\"Once\",\"max_tokens\":2}", true), *out = NULL;
    exchange(ch.port, 5, req, 10000, &out);
    cr_assert_eq(final_status(out), 200, "%.300s", out);
    free(out);
    free(req);
    /* those shed were told why */
    int shed = 0;
    for (int i = 0; i < 48; i++) {
        struct pollfd pf = {.fd = fds[i], .events = POLLIN};
        char buf[2048];
        if (poll(&pf, 1, 0) == 1) {
            ssize_t k = recv(fds[i], buf, sizeof buf - 1, MSG_DONTWAIT);
            if (k > 0) {
                buf[k] = 0;
                cr_assert_eq(raw_status_of(buf), 503, "%s", buf);
                cr_assert(strstr(buf, "connection_limit") && strstr(buf, "Retry-After"), "%s", buf);
                shed++;
            }
        }
        close(fds[i]);
    }
    cr_assert_gt(shed, 0, "no silent socket was shed");
    cr_assert_gt(metric(ch.port, "tps_http_connections_shed_total"), 0.0);
    serve_reap(&ch, SIGTERM);
}

/* ---------------------------------------------------------------------------
 * A second SIGTERM; half-closed clients
 * ------------------------------------------------------------------------- */

#define N_STREAMS 20

typedef struct stream_job {
    int port;
    char out[1 << 17];
    size_t len;
    bool closed;
} stream_job;

static void *stream_run(void *arg) {
    stream_job *j = arg;
    char *req = post_req("{\"prompt\":\"Once upon a time\",\"max_tokens\":480,\"ignore_eos\":true,"
                         "\"stream\":true}",
                         true);
    int fd = raw_connect(j->port, 0);
    if (fd >= 0 && raw_send_all(fd, req, strlen(req)))
        j->len = raw_read_until_close(fd, j->out, sizeof j->out, 60000, &j->closed);
    if (fd >= 0) close(fd);
    free(req);
    return NULL;
}

Test(bounds, a_second_sigterm_ends_every_cut_stream_with_an_error_event_and_done, .timeout = 120) {
    SERVE_CHILD(ch, "--max-seqs", "4");
    static stream_job jobs[N_STREAMS];
    pthread_t th[N_STREAMS];
    for (int i = 0; i < N_STREAMS; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].port = ch.port;
        pthread_create(&th[i], NULL, stream_run, &jobs[i]);
    }
    bool all = false;
    for (int i = 0; i < 1000 && !all; i++) {
        all = metric(ch.port, "tps_requests_running") + metric(ch.port, "tps_requests_waiting") ==
              N_STREAMS;
        if (!all) usleep(2000);
    }
    cr_assert(all, "the streams never all reached the engine");
    kill(ch.pid, SIGTERM); /* drain: the streams go on (--drain-timeout 30) */
    usleep(200000);
    int st = serve_reap(&ch, SIGTERM); /* stop now */
    int cut = 0;
    for (int i = 0; i < N_STREAMS; i++) {
        pthread_join(th[i], NULL);
        const char *o = jobs[i].out;
        cr_assert_eq(raw_status_of(o), 200, "stream %d: %.300s", i, o);
        const char *done = strstr(o, "data: [DONE]\n\n");
        cr_assert(done, "stream %d was cut without [DONE]: ...%s", i,
                  jobs[i].len > 300 ? o + jobs[i].len - 300 : o);
        cr_assert(strstr(done, "\r\n0\r\n\r\n"), "stream %d: no last chunk", i);
        bool finished = strstr(o, "\"finish_reason\":\"length\"") != NULL;
        bool error = strstr(o, "data: {\"error\"") != NULL;
        cr_assert(finished || error, "stream %d ended with neither a finish nor an error", i);
        if (error) {
            cr_assert(strstr(o, "shutting down"), "stream %d: %.300s", i,
                      strstr(o, "data: {\"error\""));
            cut++;
        }
    }
    cr_log_info("two SIGTERMs: %d of %d streams cut, each with an error event and [DONE]", cut,
                N_STREAMS);
    cr_assert_gt(cut, 0, "no stream was cut: the test did not test");
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d: %s", st, ch.log);
    cr_assert(strstr(ch.log, "stopping"), "%s", ch.log);
}

/* Sends req, then shuts the sending side (a half-close), and reads the
 * whole answer until the server closes. */
static size_t half_closed(int port, const char *req, char *out, size_t cap, bool *closed) {
    int fd = raw_connect(port, 0);
    cr_assert_geq(fd, 0);
    cr_assert(raw_send_all(fd, req, strlen(req)));
    cr_assert_eq(shutdown(fd, SHUT_WR), 0);
    size_t n = raw_read_until_close(fd, out, cap, 30000, closed);
    close(fd);
    return n;
}

Test(bounds, a_half_closed_client_gets_its_whole_answer_streamed_or_not, .timeout = 120) {
    SERVE_CHILD(ch, "--max-seqs", "1");
    static char out[1 << 17];
    for (int queued = 0; queued < 2; queued++) {
        /* queued: a long stream holds the only sequence, so the server sees
         * the EOF long before it has anything to write */
        bg_post ahead = {.port = ch.port,
                         .body = strdup("{\"prompt\":\"Once\",\"max_tokens\":300,\"ignore_eos\":"
                                        "true,\"stream\":true}")};
        pthread_t t;
        if (queued) {
            pthread_create(&t, NULL, bg_post_run, &ahead);
            usleep(100000);
        }
        for (int stream = 0; stream < 2; stream++) {
            char body[160];
            snprintf(body, sizeof body,
                     "{\"prompt\":\"Once upon a time\",\"max_tokens\":40,\"ignore_eos\":true,"
                     "\"stream\":%s}",
                     stream ? "true" : "false");
            char *req = post_req(body, false);
            bool closed = false;
            size_t n = half_closed(ch.port, req, out, sizeof out, &closed);
            cr_assert(closed, "queued %d stream %d: the server did not close after answering",
                      queued, stream);
            cr_assert_eq(final_status(out), 200, "queued %d stream %d: %.300s", queued, stream,
                         out);
            if (stream) {
                cr_assert(strstr(out, "data: [DONE]\n\n") && strstr(out, "\r\n0\r\n\r\n"),
                          "queued %d: the stream was not whole: ...%s", queued,
                          n > 300 ? out + n - 300 : out);
                cr_assert(strstr(out, "\"finish_reason\":\"length\""));
            } else {
                cr_assert(strstr(out, "\"finish_reason\":\"length\"") &&
                              strstr(out, "\"completion_tokens\":40"),
                          "queued %d: %.400s", queued, out);
            }
            free(req);
        }
        if (queued) pthread_join(t, NULL);
        free(ahead.out);
        free(ahead.body);
    }
    serve_reap(&ch, SIGTERM);
}
