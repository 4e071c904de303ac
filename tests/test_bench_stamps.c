/* Arrival stamps do not wait for parsing: a server on 127.0.0.1 writes one
 * event to many connections at once while the client is busy, so the next
 * read pass finds them all ready; every event is slow to parse (an escaped
 * key sends it to jansson, a long array makes jansson work). If the client
 * parsed each connection's bytes before reading the next socket, the k-th
 * connection's stamp would come at least k parse times after the first; with
 * stamps taken before any parse they all fall within the reads. The bound
 * is on the smallest spread over several bursts, against the parse time
 * measured here, so a busy machine can only make the test pass less
 * narrowly, not fail: a parse-first client can never get under it. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench/client/bench.h"
#include "bench/client/chunk.h"
#include "base/clock.h"
#include "support/bench_workload.h"
#include "support/raw_http.h" /* raw_listen, raw_send_all */

#define K_CONNS   8
#define ROUNDS    8
#define PAD_BURST 12000 /* array elements in a burst event */
#define PAD_GATE  60000 /* ... in the gate event, which keeps the client busy */

typedef struct burst_server {
    int lfd, port;
    pthread_t th;
    int fds[K_CONNS];
    uint64_t sent_ns[ROUNDS][K_CONNS]; /* just before each burst event's write */
    char *burst, *gate;                /* whole HTTP chunks */
    size_t burst_len, gate_len;
    int failed;
} burst_server;

/* One SSE event as an HTTP/1.1 chunk: the "choices" key escaped (the scanner
 * declines it, jansson parses) and `pad` zeros in an array beside it. */
static char *slow_event(int pad, size_t *len) {
    size_t cap = (size_t)pad * 2 + 256;
    char *ev = malloc(cap), *out = malloc(cap + 32);
    size_t n = (size_t)snprintf(ev, cap,
                                "data: {\"\\u0063hoices\":[{\"index\":0,\"text\":\" x\","
                                "\"finish_reason\":null}],\"pad\":[");
    for (int i = 0; i < pad; i++) {
        ev[n++] = '0';
        ev[n++] = i + 1 < pad ? ',' : ']';
    }
    n += (size_t)snprintf(ev + n, cap - n, "}\n\n");
    *len = (size_t)snprintf(out, cap + 32, "%zx\r\n", n);
    memcpy(out + *len, ev, n);
    *len += n;
    memcpy(out + *len, "\r\n", 2);
    *len += 2;
    free(ev);
    return out;
}

static void sleep_ms(int ms) {
    struct timespec ts = {.tv_sec = 0, .tv_nsec = ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* Reads one request (it ends with its JSON body's closing brace). */
static bool read_request(int fd) {
    char buf[8192];
    for (;;) {
        ssize_t k = recv(fd, buf, sizeof buf, 0);
        if (k <= 0) return false;
        if (buf[k - 1] == '}') return true;
    }
}

static void *burst_main(void *arg) {
    burst_server *s = arg;
    for (int i = 0; i < K_CONNS; i++) {
        s->fds[i] = accept(s->lfd, NULL, NULL);
        int one = 1;
        setsockopt(s->fds[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    for (int i = 0; i < K_CONNS; i++)
        if (!read_request(s->fds[i])) s->failed = 1;
    const char *hdr = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < K_CONNS; i++)
        raw_send_all(s->fds[i], hdr, strlen(hdr));
    for (int r = 0; r < ROUNDS; r++) {
        /* the gate: the client reads and parses it while the burst is written */
        raw_send_all(s->fds[0], s->gate, s->gate_len);
        sleep_ms(2);
        for (int i = 0; i < K_CONNS; i++) {
            s->sent_ns[r][i] = tps_now_ns();
            raw_send_all(s->fds[i], s->burst, s->burst_len);
        }
        sleep_ms(60);
    }
    for (int i = 0; i < K_CONNS; i++) {
        char done[256];
        int n = snprintf(done, sizeof done,
                         "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":8,"
                         "\"completion_tokens\":%d}}\n\n",
                         i == 0 ? 2 * ROUNDS : ROUNDS);
        char chunk[320];
        int m = snprintf(chunk, sizeof chunk, "%x\r\n%s\r\n", n, done);
        raw_send_all(s->fds[i], chunk, (size_t)m);
        const char *end = "e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n";
        raw_send_all(s->fds[i], end, strlen(end));
    }
    sleep_ms(50);
    for (int i = 0; i < K_CONNS; i++)
        close(s->fds[i]);
    return NULL;
}

/* The fastest of a few parses of a burst event: what each connection's parse
 * would cost a parse-first client. */
static uint64_t parse_ns(const burst_server *s) {
    const char *data = strstr(s->burst, "data: ") + 6;
    size_t len = (size_t)(strstr(data, "\n\n") - data);
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 5; i++) {
        bench_chunk ch;
        tps_err e = {{0}};
        uint64_t t0 = tps_now_ns();
        cr_assert_eq(bench_chunk_parse(&ch, BENCH_DIALECT_OPENAI, data, len, "", &e), 0, "%s",
                     e.msg);
        uint64_t dt = tps_now_ns() - t0;
        cr_assert_eq(ch.tokens, 1, "the event carries a token");
        bench_chunk_release(&ch);
        if (dt < best) best = dt;
    }
    return best;
}

Test(bench_stamps, a_burst_on_many_connections_is_stamped_before_any_parse, .timeout = 60) {
    burst_server s = {0};
    s.burst = slow_event(PAD_BURST, &s.burst_len);
    s.gate = slow_event(PAD_GATE, &s.gate_len);
    const uint64_t parse = parse_ns(&s);

    s.lfd = raw_listen(0, 64, &s.port);
    cr_assert_geq(s.lfd, 0);
    cr_assert_eq(pthread_create(&s.th, NULL, burst_main, &s), 0);

    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s.port);
    workload wl;
    test_workload(&wl, 64, 4);
    bench_config cfg = test_bench_config(url, K_CONNS, K_CONNS);
    cfg.client_threads = 1;
    bench_run_out out;
    test_bench_run(&out, &cfg, &wl);
    pthread_join(s.th, NULL);
    close(s.lfd);
    cr_assert_eq(s.failed, 0, "the server read every request");
    cr_assert_eq(out.n, K_CONNS);

    /* the burst event of round r on each request: the gated one has a gate event before each */
    uint64_t stamp[ROUNDS][K_CONNS];
    int gated = -1;
    for (size_t i = 0; i < out.n; i++) {
        const bench_record *rec = &out.recs[i];
        cr_assert_eq(rec->err, BENCH_OK, "%s", rec->err_msg ? rec->err_msg : "");
        if (rec->tl.n_events == 2 * ROUNDS) gated = (int)i;
    }
    cr_assert_geq(gated, 0, "one stream carried the gate events");
    /* which server connection each request was on: the gated one is connection 0; the
     * others are matched by stamp order within a round, which only the spread needs */
    for (int r = 0; r < ROUNDS; r++) {
        int col = 1;
        for (size_t i = 0; i < out.n; i++) {
            const timeline *tl = &out.recs[i].tl;
            if ((int)i == gated) {
                cr_assert_eq(tl->n_events, 2 * ROUNDS);
                stamp[r][0] = tl->events[2 * r + 1].t_ns;
            } else {
                cr_assert_eq(tl->n_events, ROUNDS);
                stamp[r][col++] = tl->events[r].t_ns;
            }
        }
    }
    uint64_t best_spread = UINT64_MAX;
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t lo = UINT64_MAX, hi = 0, first_send = UINT64_MAX;
        for (int i = 0; i < K_CONNS; i++) {
            lo = stamp[r][i] < lo ? stamp[r][i] : lo;
            hi = stamp[r][i] > hi ? stamp[r][i] : hi;
            first_send = s.sent_ns[r][i] < first_send ? s.sent_ns[r][i] : first_send;
        }
        cr_expect_geq(lo, first_send, "round %d: no event is stamped before it was sent", r);
        if (hi - lo < best_spread) best_spread = hi - lo;
    }
    const uint64_t parse_first_floor = (K_CONNS - 1) * parse;
    cr_log_info("burst stamps spread %.3f ms at best; a parse-first client: >= %.3f ms",
                (double)best_spread / 1e6, (double)parse_first_floor / 1e6);
    cr_expect_lt(
        best_spread, parse_first_floor / 2,
        "the stamps of one burst spread over %.3f ms at best; parsing between reads "
        "would spread them over at least %.3f ms (%d connections after the first x %.3f ms a "
        "parse)",
        (double)best_spread / 1e6, (double)parse_first_floor / 1e6, K_CONNS - 1,
        (double)parse / 1e6);
    bench_run_free(&out);
    workload_free(&wl);
    free(s.burst);
    free(s.gate);
}
