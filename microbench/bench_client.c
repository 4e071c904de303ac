/* The bench client's own cost: CPU time per 1,000 tokens received and the
 * event rate it sustains against a fast local streaming source (a trivial
 * SSE server thread here), in two cases: the source writes each whole
 * response at once (one read carries many events), or each SSE event in a
 * send of its own, as a real server streaming token by token does (then
 * every event can cost the client a wake-up and a read). Also the cost of
 * one timestamp. Each case at concurrency 1, 16, 256 and 1,000, with one
 * event loop; then the event rate with 1 and 2 loops (--client-threads).
 * "could carry" is events / the busiest loop's CPU time: the rate the
 * loops would sustain with a core each, whatever else the machine runs.
 * Numbers, not pass/fail; correctness is tests/test_bench_*.c. The client's
 * CPU is its event loops' own (RUSAGE_THREAD in each), so the source
 * thread's work is not counted.
 *
 * usage: bench_client [tokens_per_request (default 256)]
 *        bench_client TOKENS per-event|whole CONCURRENCY LOOPS REQUESTS   (one case) */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/client/bench.h"
#include "base/clock.h"

/* ---- a fast SSE source ------------------------------------------------------------------ */

#define MAX_CONN 1100

typedef struct src_conn {
    int fd;
    size_t got;  /* request bytes seen */
    size_t sent; /* response bytes written; == resp_len when idle */
    size_t next; /* per-event mode: the next event boundary to send up to */
    bool writing;
} src_conn;

typedef struct source {
    int lfd, port;
    bool per_event; /* one send per SSE event (else the whole response) */
    char *resp;     /* one whole chunked response */
    size_t resp_len;
    size_t *bounds; /* (n_bounds,) where the headers and each event end */
    size_t n_bounds;
    atomic_bool stop;
    pthread_t th;
} source;

static void build_response(source *s, int tokens) {
    size_t cap = (size_t)tokens * 160 + 1024, n = 0;
    s->resp = malloc(cap);
    n += (size_t)snprintf(s->resp + n, cap - n,
                          "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                          "Transfer-Encoding: chunked\r\n\r\n");
    char ev[256];
    s->bounds = malloc(sizeof *s->bounds * (size_t)(tokens + 4));
    s->n_bounds = 0;
    s->bounds[s->n_bounds++] = n;
    for (int i = 0; i <= tokens + 1; i++) {
        int k;
        if (i < tokens)
            k = snprintf(ev, sizeof ev,
                         "data: {\"id\":\"c\",\"object\":\"text_completion\",\"choices\":[{"
                         "\"index\":0,\"text\":\" tok\",\"finish_reason\":%s}]}\n\n",
                         i + 1 == tokens ? "\"length\"" : "null");
        else if (i == tokens)
            k = snprintf(ev, sizeof ev,
                         "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":8,"
                         "\"completion_tokens\":%d}}\n\n",
                         tokens);
        else
            k = snprintf(ev, sizeof ev, "data: [DONE]\n\n");
        n += (size_t)snprintf(s->resp + n, cap - n, "%x\r\n%s\r\n", k, ev);
        if (i < tokens + 1) s->bounds[s->n_bounds++] = n;
    }
    n += (size_t)snprintf(s->resp + n, cap - n, "0\r\n\r\n");
    s->resp_len = n;
    s->bounds[s->n_bounds++] = n;
}

static void *source_main(void *arg) {
    source *s = arg;
    src_conn *c = calloc(MAX_CONN, sizeof *c);
    struct pollfd *p = calloc(MAX_CONN + 1, sizeof *p);
    int n = 0;
    while (!atomic_load(&s->stop)) {
        p[0] = (struct pollfd){.fd = s->lfd, .events = POLLIN};
        for (int i = 0; i < n; i++)
            p[1 + i] = (struct pollfd){.fd = c[i].fd, .events = c[i].writing ? POLLOUT : POLLIN};
        if (poll(p, (nfds_t)(1 + n), 50) <= 0) continue;
        if (p[0].revents & POLLIN) {
            int fd;
            while (n < MAX_CONN && (fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                int one = 1; /* per-event sends go out as they are made, as tps serve's do */
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                c[n++] = (src_conn){.fd = fd};
            }
        }
        int m = n;
        for (int i = m - 1; i >= 0; i--) {
            src_conn *x = &c[i];
            short re = p[1 + i].revents;
            if (!re) continue;
            if (!x->writing) {
                char buf[8192];
                ssize_t k = recv(x->fd, buf, sizeof buf, 0);
                if (k <= 0) {
                    if (k < 0 && errno == EAGAIN) continue;
                    close(x->fd);
                    c[i] = c[--n];
                    continue;
                }
                /* the request ends with its JSON body's closing brace */
                if (buf[k - 1] == '}') x->writing = true, x->sent = 0, x->next = 0;
            }
            if (x->writing) {
                size_t end = s->resp_len;
                if (s->per_event) { /* up to the next event's end, then poll again */
                    while (x->next < s->n_bounds && s->bounds[x->next] <= x->sent)
                        x->next++;
                    if (x->next < s->n_bounds) end = s->bounds[x->next];
                }
                ssize_t k = send(x->fd, s->resp + x->sent, end - x->sent, MSG_NOSIGNAL);
                if (k > 0) x->sent += (size_t)k;
                if (x->sent == s->resp_len) x->writing = false;
                if (k < 0 && errno != EAGAIN) {
                    close(x->fd);
                    c[i] = c[--n];
                }
            }
        }
    }
    for (int i = 0; i < n; i++)
        close(c[i].fd);
    free(c);
    free(p);
    return NULL;
}

static int source_start(source *s, int tokens) {
    build_response(s, tokens);
    s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(s->lfd, (struct sockaddr *)&a, sizeof a) || listen(s->lfd, 2048)) return -1;
    socklen_t al = sizeof a;
    getsockname(s->lfd, (struct sockaddr *)&a, &al);
    s->port = ntohs(a.sin_port);
    return pthread_create(&s->th, NULL, source_main, s);
}

static void source_stop(source *s) {
    atomic_store(&s->stop, true);
    pthread_join(s->th, NULL);
    close(s->lfd);
    free(s->resp);
    free(s->bounds);
}

/* ---- measurements ------------------------------------------------------------------------ */

static void timestamp_cost(void) {
    const int n = 10 * 1000 * 1000;
    uint64_t sink = 0, t0 = tps_now_ns();
    for (int i = 0; i < n; i++)
        sink += tps_now_ns();
    uint64_t t1 = tps_now_ns();
    printf("timestamp (clock_gettime CLOCK_MONOTONIC): %.1f ns per call (%llu)\n",
           (double)(t1 - t0) / n, (unsigned long long)(sink & 1));
}

static void run_case(int tokens, uint32_t concurrency, uint64_t requests, bool per_event,
                     uint32_t threads) {
    source s = {.per_event = per_event};
    if (source_start(&s, tokens)) {
        fprintf(stderr, "cannot start the source\n");
        return;
    }
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s.port);
    workload_opts wo = {.endpoint = BENCH_EP_COMPLETIONS,
                        .n_items = 64,
                        .seed = 1,
                        .ignore_eos = 1,
                        .include_usage = true,
                        .temperature = -1};
    tps_err e = {{0}};
    load_dist_parse(&wo.input_len, "32", &e);
    wo.output_len = (load_dist){.kind = LOAD_DIST_FIXED, .a = tokens};
    workload wl;
    if (workload_build(&wl, &wo, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        source_stop(&s);
        return;
    }
    bench_config cfg = {.base_url = url,
                        .concurrency = concurrency,
                        .requests = requests,
                        .timeout_s = 60,
                        .idle_timeout_s = 30,
                        .connect_timeout_s = 5,
                        .client_threads = threads};
    bench_run_out out;
    if (bench_run(&out, &cfg, &wl, &e)) {
        fprintf(stderr, "%s\n", e.msg);
    } else {
        uint64_t toks = 0, ok = 0;
        for (size_t i = 0; i < out.n; i++) {
            toks += out.recs[i].tl.output_tokens;
            ok += out.recs[i].err == BENCH_OK;
        }
        double wall = tps_ns_to_s(out.t_stop_ns - out.t_start_ns);
        printf("%-9s c=%-4u %u loop%s %4d tok/req: %5llu/%llu ok, %7llu tokens in %5.2f s; "
               "client CPU %5.2f us/token, %5.2f us/event (busiest loop %.2f s); %7.0f events/s; "
               "the loops could carry %7.0f events/s\n",
               per_event ? "per-event" : "whole", concurrency, out.client_loops,
               out.client_loops == 1 ? " " : "s", tokens, (unsigned long long)ok,
               (unsigned long long)requests, (unsigned long long)toks, wall,
               1e6 * out.client_cpu_s / (double)(toks ? toks : 1),
               1e6 * out.client_cpu_s / (double)(out.events_received ? out.events_received : 1),
               out.client_loop_cpu_max_s, (double)out.events_received / wall,
               (double)out.events_received /
                   (out.client_loop_cpu_max_s > 0 ? out.client_loop_cpu_max_s : 1e-9));
        bench_run_free(&out);
    }
    workload_free(&wl);
    source_stop(&s);
}

int main(int argc, char **argv) {
    int tokens = argc > 1 ? atoi(argv[1]) : 256;
    if (tokens < 1) tokens = 256;
    if (argc == 6) {
        run_case(tokens, (uint32_t)atoi(argv[3]), (uint64_t)atoll(argv[5]),
                 !strcmp(argv[2], "per-event"), (uint32_t)atoi(argv[4]));
        return 0;
    }
    timestamp_cost();
    printf("one event loop, whole responses (whole) and one send per event (per-event):\n");
    for (int per_event = 1; per_event >= 0; per_event--) {
        run_case(tokens, 1, 200, per_event, 1);
        run_case(tokens, 16, 800, per_event, 1);
        run_case(tokens, 256, 2048, per_event, 1);
        run_case(16, 1000, 4000, per_event, 1);
    }
    printf("event rate with 1 and 2 event loops (--client-threads), one token per event:\n");
    for (int per_event = 1; per_event >= 0; per_event--)
        for (uint32_t th = 1; th <= 2; th++)
            run_case(tokens, 256, 2048, per_event, th);
    return 0;
}
