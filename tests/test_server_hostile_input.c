/* `tps serve` against the hostile request bodies and clients of issue 48:
 * continue_final_message bodies built to make its search quadratic (never
 * on the event loop now, and one pass), clients that hang up on a slow
 * body (their jobs are abandoned; SIGTERM exits within --drain-timeout),
 * /health slowloris from one address (the reserve is not theirs), the
 * admin route, invalid UTF-8 in JSON answers. The server runs as a child
 * (support/serve_child.h) or in-process, on an ephemeral 127.0.0.1 port,
 * driven by raw sockets from 127.0.0.x; every loop is bounded in count and
 * time. Each failed before the fix it covers (src/server/serve/server_http.c,
 * server_work.c, chat_prompt.c, server_admit.c, src/base/sbuf.c). Model:
 * ../shared/models/stories260K.gguf. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/sbuf.h"
#include "server/chat/chat_prompt.h"
#include "support/raw_http.h"
#include "support/serve_child.h"
#include "support/server_fixture.h"
#include "support/test_support.h"

#define MODEL "models/stories260K.gguf"

/* ---------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------- */

/* A chat body whose final (assistant) message is "a a a ..." of final_len
 * bytes after a user message of user_len bytes of the same: the final
 * message occurs at every other byte of the user's, which made the old
 * search O(n * m). Malloc'ed. */
static char *cfm_body(size_t user_len, size_t final_len) {
    sbuf b;
    sbuf_init(&b);
    sbuf_adds(&b, "{\"messages\":[{\"role\":\"user\",\"content\":\"");
    for (size_t i = 0; i < user_len / 2; i++)
        sbuf_adds(&b, "a ");
    sbuf_adds(&b, "\"},{\"role\":\"assistant\",\"content\":\"");
    for (size_t i = 0; i < final_len / 2; i++)
        sbuf_adds(&b, "a ");
    sbuf_adds(&b, "\"}],\"continue_final_message\":true,\"add_generation_prompt\":false,"
                  "\"max_tokens\":1}");
    cr_assert(!sbuf_failed(&b));
    return b.p;
}

/* method path with body on a new connection from 127.0.0.<from>: the
 * status within timeout_ms (-1: none), the answer in *out when not NULL. */
static int call(int port, int from, const char *path, const char *body, int timeout_ms,
                char **out) {
    char *req = raw_request("POST", path, body, NULL);
    size_t cap = 1 << 16;
    char *buf = calloc(1, cap);
    int st = raw_exchange(port, from, req, strlen(req), timeout_ms, buf, cap, NULL);
    free(req);
    if (out)
        *out = buf;
    else
        free(buf);
    return st;
}

/* GET /health from 127.0.0.<from>: the milliseconds to a 200, -1 when none
 * came within timeout_ms. */
static long health_ms(int port, int from, int timeout_ms) {
    static const char req[] =
        "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    char buf[4096];
    uint64_t t0 = raw_now_ms();
    int st = raw_exchange(port, from, req, sizeof req - 1, timeout_ms, buf, sizeof buf, NULL);
    return st == 200 ? (long)(raw_now_ms() - t0) : -1;
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? -1 : x > y;
}

/* ---------------------------------------------------------------------------
 * continue_final_message: off the loop, and linear
 * ------------------------------------------------------------------------- */

typedef struct cfm_loop {
    int port;
    const char *body;
    atomic_bool stop;
    int sent, ok;
} cfm_loop;

static void *cfm_loop_run(void *arg) {
    cfm_loop *l = arg;
    uint64_t t0 = raw_now_ms();
    for (int i = 0; i < 200 && !atomic_load(&l->stop) && raw_now_ms() - t0 < 8000; i++) {
        l->sent++;
        l->ok += call(l->port, 1, "/apply-template", l->body, 10000, NULL) == 200;
    }
    return NULL;
}

Test(hostile_input, continue_final_message_in_a_loop_keeps_health_p99_under_100_ms,
     .timeout = 120) {
    SERVE_CHILD(ch, NULL);
    char *body = cfm_body(42000, 21000); /* 63 KB: 0.66 s of the event loop before */
    cfm_loop l = {.port = ch.port, .body = body};
    pthread_t th;
    pthread_create(&th, NULL, cfm_loop_run, &l);
    usleep(100000);
    long ms[60];
    int n = 0;
    for (; n < 60; n++) {
        ms[n] = health_ms(ch.port, 2, 5000);
        cr_assert_geq(ms[n], 0, "/health got no answer in 5 s while the loop ran");
        usleep(30000);
    }
    atomic_store(&l.stop, true);
    pthread_join(th, NULL);
    qsort(ms, (size_t)n, sizeof *ms, cmp_long);
    long p99 = ms[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1];
    cr_log_info("/health beside a continue_final_message loop (%d bodies, %d answered 200): "
                "p50 %ld ms, p99 %ld ms, max %ld ms",
                l.sent, l.ok, ms[n / 2], p99, ms[n - 1]);
    cr_assert_gt(l.ok, 0, "no continue_final_message body was answered 200");
    cr_assert_lt(p99, 100, "/health p99 %ld ms beside the loop", p99);
    free(body);
    serve_reap(&ch, SIGTERM);
}

/* Sends body to /v1/chat/completions and hangs up at once. */
static void *hang_up_run(void *arg) {
    const int *port = arg;
    char *body = cfm_body(1100000, 500000); /* 1.6 MB */
    char *req = raw_request("POST", "/v1/chat/completions", body, NULL);
    int fd = raw_connect(*port, 3);
    if (fd >= 0) {
        raw_send_all(fd, req, strlen(req));
        close(fd);
    }
    free(req);
    free(body);
    return NULL;
}

typedef struct big_call {
    int port, status;
} big_call;

static void *big_call_run(void *arg) {
    big_call *b = arg;
    char *body = cfm_body(1100000, 500000);
    b->status = call(b->port, 4, "/v1/chat/completions", body, 30000, NULL);
    free(body);
    return NULL;
}

Test(hostile_input, hung_up_bodies_free_the_workers_and_sigterm_exits_within_drain_timeout,
     .timeout = 180) {
    SERVE_CHILD(ch, "--drain-timeout", "5");
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, hang_up_run, &ch.port);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    /* both workers had one each: a normal chat still answers */
    uint64_t t0 = raw_now_ms();
    char *out = NULL;
    int st = call(ch.port, 2, "/v1/chat/completions",
                  "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":2}", 10000,
                  &out);
    long chat_ms = (long)(raw_now_ms() - t0);
    cr_assert_eq(st, 200, "a normal chat after two hung-up 1.6 MB bodies: %.300s", out);
    free(out);
    /* two more, their clients waiting, then SIGTERM: out within the drain */
    big_call b[2] = {{.port = ch.port}, {.port = ch.port}};
    pthread_t bt[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&bt[i], NULL, big_call_run, &b[i]);
    usleep(300000);
    t0 = raw_now_ms();
    int ws = serve_reap(&ch, SIGTERM);
    long exit_ms = (long)(raw_now_ms() - t0);
    for (int i = 0; i < 2; i++)
        pthread_join(bt[i], NULL);
    cr_log_info("normal chat answered in %ld ms after two hung-up 1.6 MB bodies; SIGTERM with "
                "--drain-timeout 5: exit in %ld ms (answers %d, %d)",
                chat_ms, exit_ms, b[0].status, b[1].status);
    cr_assert_lt(chat_ms, 5000, "the normal chat took %ld ms", chat_ms);
    cr_assert_lt(exit_ms, 6500, "SIGTERM took %ld ms to exit (--drain-timeout 5)", exit_ms);
    cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "status %d: %s", ws, ch.log);
}

Test(hostile_input, a_cancelled_render_stops_and_the_final_message_is_found_last) {
    chat_prompt p;
    tps_err err = {{0}};
    static const char src[] =
        "{% set r = range(2000) %}{% for i in range(1000) %}{% for j in r %}{% endfor %}"
        "{% endfor %}{{ messages[0].content }}"; /* long, within the bounds: it loads */
    cr_assert_eq(chat_prompt_init(&p, src, sizeof src - 1, NULL, 0, CHAT_SRC_FILE, "t", &err), 0,
                 "%s", err.msg);
    json_t *msgs = json_loads("[{\"role\":\"user\",\"content\":\"x\"}]", 0, NULL);
    atomic_bool cancel = true;
    chat_request rq = {.messages = msgs, .cancel = &cancel};
    sbuf out;
    sbuf_init(&out);
    chat_error ce;
    uint64_t t0 = raw_now_ms();
    cr_assert_neq(chat_prompt_render(&p, &rq, &out, &ce), 0, "a cancelled render succeeded");
    cr_assert_lt(raw_now_ms() - t0, 200);
    cr_assert(strstr(ce.msg, "cancelled"), "%s", ce.msg);
    json_decref(msgs);
    chat_prompt_free(&p);
    /* continue_final_message cuts after the LAST occurrence of the final
     * message, also when it occurs many times, overlapping, before */
    static const char echo[] = "{% for m in messages %}[{{ m.content }}]{% endfor %}<end>";
    cr_assert_eq(chat_prompt_init(&p, echo, sizeof echo - 1, NULL, 0, CHAT_SRC_FILE, "t", &err), 0);
    msgs = json_loads("[{\"role\":\"user\",\"content\":\"aaaaaaaa\"},"
                      "{\"role\":\"assistant\",\"content\":\" aaa\"}]",
                      0, NULL);
    rq = (chat_request){.messages = msgs, .continue_final_message = true};
    cr_assert_eq(chat_prompt_render(&p, &rq, &out, &ce), 0, "%s", ce.msg);
    cr_assert_str_eq(out.p, "[aaaaaaaa][ aaa", "%s", out.p);
    sbuf_free(&out);
    json_decref(msgs);
    chat_prompt_free(&p);
}

/* ---------------------------------------------------------------------------
 * /health slowloris from one address
 * ------------------------------------------------------------------------- */

#define N_TRICKLE 40

Test(hostile_input, trickling_health_sockets_from_one_address_leave_health_answered,
     .timeout = 60) {
    SERVE_CHILD(ch, "--max-connections", "32");
    int fds[N_TRICKLE];
    for (int i = 0; i < N_TRICKLE; i++) {
        fds[i] = raw_connect(ch.port, 1);
        cr_assert_geq(fds[i], 0, "connect %d: %s", i, strerror(errno));
        static const char line[] = "GET /health HTTP/1.1\r\n";
        raw_send_all(fds[i], line, sizeof line - 1);
    }
    /* a header line a second from each, while another address asks */
    long ms[3];
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < N_TRICKLE; i++) {
            char h[32];
            int n = snprintf(h, sizeof h, "X-Trickle-%d: 1\r\n", k);
            send(fds[i], h, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        usleep(500000);
        ms[k] = health_ms(ch.port, 2, 2000);
        usleep(500000);
    }
    for (int i = 0; i < N_TRICKLE; i++)
        close(fds[i]);
    cr_log_info("/health from 127.0.0.2 beside %d trickling sockets from 127.0.0.1: %ld, %ld, "
                "%ld ms",
                N_TRICKLE, ms[0], ms[1], ms[2]);
    for (int k = 0; k < 3; k++)
        cr_assert(ms[k] >= 0 && ms[k] < 2000, "probe %d: no answer within 2 s (%ld)", k, ms[k]);
    serve_reap(&ch, SIGTERM);
}

/* ---------------------------------------------------------------------------
 * The admin route; invalid UTF-8 in JSON
 * ------------------------------------------------------------------------- */

Test(hostile_input, reset_prefix_cache_is_an_admin_route_off_by_default_and_rate_limited,
     .timeout = 60) {
    FIXTURE_SERVE(f);
    char *out = NULL;
    int st = call(f.port, 1, "/reset_prefix_cache", "{}", 10000, &out);
    cr_assert_eq(st, 404, "%s", out);
    cr_assert(strstr(out, "--enable-admin-routes"), "%s", out);
    free(out);
    fixture_finish(&f);
    server_config c;
    fixture_defaults(&c, &f);
    c.enable_admin_routes = true;
    fixture_start(&f, &c, true);
    cr_assert_eq(call(f.port, 1, "/reset_prefix_cache", "{}", 10000, NULL), 200);
    int limited = 0;
    for (int i = 0; i < 20; i++) /* within the second: all but none refused */
        limited += call(f.port, 1, "/reset_prefix_cache", "{}", 10000, &out) == 429;
    cr_assert_geq(limited, 19, "%d of 20 resets within a second were refused: %s", limited, out);
    cr_assert(strstr(out, "Retry-After"), "%s", out);
    free(out);
    fixture_finish(&f);
}

Test(hostile_input, invalid_utf8_in_a_json_answer_becomes_u_fffd, .timeout = 60) {
    sbuf b;
    sbuf_init(&b);
    static const char in[] = "ok \xff \xe2\x82 \xc3\xa9 \xed\xa0\x80 \xf0\x9f\x98\x80";
    sbuf_json_str(&b, in, sizeof in - 1);
    cr_assert_str_eq(b.p,
                     "\"ok \xef\xbf\xbd \xef\xbf\xbd \xc3\xa9 \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd "
                     "\xf0\x9f\x98\x80\"",
                     "%s", b.p);
    sbuf_free(&b);
    FIXTURE_SERVE(f);
    char *out = NULL; /* stories260K's byte tokens: <0xFF> is 3 + 0xFF */
    int st = call(f.port, 1, "/detokenize", "{\"tokens\":[258, 3]}", 10000, &out);
    cr_assert_eq(st, 200, "%s", out);
    cr_assert(!strchr(out, '\xff'), "a raw 0xFF byte in the JSON: %s", out);
    cr_assert(strstr(out, "\xef\xbf\xbd"), "no U+FFFD: %s", out);
    free(out);
    fixture_finish(&f);
}
