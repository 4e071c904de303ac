/* One event loop of the bench client (client_loop.h): one libcurl multi
 * handle driven through its socket API (curl_multi_socket_action on the
 * sockets epoll reports ready), a fixed pool of connection slots.
 *
 * Stamps come before any parse: the write callback only reads
 * CLOCK_MONOTONIC and appends the bytes and that stamp to the connection's
 * inbox; the SSE and JSON of every inbox are parsed once all the sockets
 * epoll reported in that pass were read. So parsing one connection's events
 * never delays another connection's stamp (curl's own reading of the other
 * ready sockets still comes between them: microseconds). The per-token
 * path allocates nothing once buffers are warm. Multi-turn bodies are built
 * when a turn is sent, never on receive.
 *
 * The kernel's receive stamp (SO_TIMESTAMPNS) is not used: curl reads the
 * socket with recv(), which drops the control message carrying it, and
 * TCP sockets do not keep a last-packet stamp for SIOCGSTAMPNS.
 * This file is the loop itself (curl's socket API on epoll, what to send
 * when, setup); the receive, finish and send paths are files of their own
 * (client_internal.h). Not here: starting loops and merging them
 * (client_pool.c), metrics over requests (result/), printing (report/),
 * which conversation goes next (convo.c). */
#include "bench/client/bench.h"

#include "base/grow.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench/client/client_internal.h"
#include "bench/workload/convo.h"
#include "bench/client/sse_read.h"
#include "base/clock.h"

/* curl says which events it wants on a socket; epoll watches them. */
static int on_socket(CURL *easy, curl_socket_t s, int what, void *ud, void *sockp) {
    (void)easy;
    run_state *r = ud;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(r->epfd, EPOLL_CTL_DEL, s, NULL);
        curl_multi_assign(r->multi, s, NULL);
        return 0;
    }
    struct epoll_event ev = {.events = (what & CURL_POLL_IN ? EPOLLIN : 0u) |
                                       (what & CURL_POLL_OUT ? EPOLLOUT : 0u),
                             .data.fd = s};
    if (sockp || epoll_ctl(r->epfd, EPOLL_CTL_ADD, s, &ev) != 0)
        epoll_ctl(r->epfd, EPOLL_CTL_MOD, s, &ev);
    if (!sockp) curl_multi_assign(r->multi, s, r);
    return 0;
}

/* curl's one timer: when it next wants curl_multi_socket_action(TIMEOUT). */
static int on_timer(CURLM *m, long ms, void *ud) {
    (void)m;
    run_state *r = ud;
    r->timer_ns = ms < 0 ? UINT64_MAX : tps_now_ns() + (uint64_t)ms * TPS_NS_PER_MS;
    return 0;
}

static void curl_timeout_action(run_state *r, uint64_t now) {
    if (r->timer_ns > now) return;
    r->timer_ns = UINT64_MAX;
    int running = 0;
    curl_multi_socket_action(r->multi, CURL_SOCKET_TIMEOUT, 0, &running);
}

/* One pass: wait up to ms for sockets, let curl read every ready one (each
 * chunk stamped as it is delivered), then parse what came. */
static void socket_pass(run_state *r, int ms) {
    int n = epoll_wait(r->epfd, r->evs, (int)r->n_conns + 1, ms);
    for (int i = 0; i < n; i++) {
        uint32_t ev = r->evs[i].events;
        int mask = (ev & (EPOLLIN | EPOLLHUP | EPOLLRDHUP) ? CURL_CSELECT_IN : 0) |
                   (ev & EPOLLOUT ? CURL_CSELECT_OUT : 0) | (ev & EPOLLERR ? CURL_CSELECT_ERR : 0);
        int running = 0;
        curl_multi_socket_action(r->multi, r->evs[i].data.fd, mask, &running);
    }
    client_parse_pending(r);
}

static double thread_cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static int setup(run_state *r, tps_err *e) {
    const bench_config *cfg = r->cfg;
    size_t blen = strlen(cfg->base_url);
    while (blen && cfg->base_url[blen - 1] == '/')
        blen--;
    if (blen >= 3 && !strncmp(cfg->base_url + blen - 3, "/v1", 3)) blen -= 3;
    const char *path = bench_endpoint_path(cfg->endpoint);
    r->url = malloc(blen + strlen(path) + 1);
    if (!r->url) return tps_fail(e, TPS_ENOMEM, "out of memory");
    memcpy(r->url, cfg->base_url, blen);
    strcpy(r->url + blen, path);

    r->dialect = bench_endpoint_dialect(cfg->endpoint);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    h = curl_slist_append(h, cfg->no_stream || cfg->endpoint == BENCH_EP_EMBEDDINGS
                                 ? "Accept: application/json"
                                 : "Accept: text/event-stream");
    h = curl_slist_append(h, "Expect:");    /* no 100-continue round trip */
    if (cfg->endpoint == BENCH_EP_MESSAGES) /* Anthropic's version header, always sent */
        h = curl_slist_append(h, "anthropic-version: " BENCH_ANTHROPIC_VERSION);
    if (cfg->api_key) {
        char a[1024];
        snprintf(a, sizeof a,
                 cfg->endpoint == BENCH_EP_MESSAGES ? "x-api-key: %s" : "Authorization: Bearer %s",
                 cfg->api_key);
        h = curl_slist_append(h, a);
    }
    for (size_t i = 0; i < cfg->n_headers; i++)
        h = curl_slist_append(h, cfg->headers[i]);
    r->hdrs = h;
    if (!h) return tps_fail(e, TPS_ENOMEM, "out of memory");

    r->timer_ns = UINT64_MAX;
    r->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (r->epfd < 0) return tps_fail(e, TPS_EIO, "epoll_create1 failed");
    r->multi = curl_multi_init();
    if (!r->multi) return tps_fail(e, TPS_EIO, "curl_multi_init failed");
    curl_multi_setopt(r->multi, CURLMOPT_MAXCONNECTS, (long)r->n_conns);
    curl_multi_setopt(r->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_NOTHING);
    curl_multi_setopt(r->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(r->multi, CURLMOPT_SOCKETDATA, r);
    curl_multi_setopt(r->multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(r->multi, CURLMOPT_TIMERDATA, r);

    r->conns = calloc(r->n_conns, sizeof *r->conns);
    r->free_list = malloc(r->n_conns * sizeof *r->free_list);
    r->pending = malloc(r->n_conns * sizeof *r->pending);
    r->evs = malloc((r->n_conns + 1) * sizeof *r->evs);
    if (!r->conns || !r->free_list || !r->pending || !r->evs)
        return tps_fail(e, TPS_ENOMEM, "cannot allocate connections");
    for (size_t i = 0; i < r->n_conns; i++) {
        conn *c = &r->conns[i];
        c->run = r;
        int rc = sse_reader_init(&c->sse, SSE_EVENT_MAX, e);
        if (rc) return rc;
        c->easy = curl_easy_init();
        if (!c->easy) return tps_fail(e, TPS_EIO, "curl_easy_init failed");
        CURL *x = c->easy;
        curl_easy_setopt(x, CURLOPT_URL, r->url);
        curl_easy_setopt(x, CURLOPT_HTTPHEADER, r->hdrs);
        curl_easy_setopt(x, CURLOPT_POST, 1L);
        curl_easy_setopt(x, CURLOPT_WRITEFUNCTION, client_on_data);
        curl_easy_setopt(x, CURLOPT_WRITEDATA, c);
        curl_easy_setopt(x, CURLOPT_PRIVATE, c);
        curl_easy_setopt(x, CURLOPT_ERRORBUFFER, c->curl_err);
        curl_easy_setopt(x, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(x, CURLOPT_TCP_NODELAY, 1L);
        curl_easy_setopt(x, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
        curl_easy_setopt(x, CURLOPT_CONNECTTIMEOUT_MS, (long)(cfg->connect_timeout_s * 1000));
        curl_easy_setopt(x, CURLOPT_BUFFERSIZE, 64L * 1024);
        if (cfg->insecure) {
            curl_easy_setopt(x, CURLOPT_SSL_VERIFYPEER, 0L);
            curl_easy_setopt(x, CURLOPT_SSL_VERIFYHOST, 0L);
        }
        r->free_list[r->n_free++] = r->n_conns - 1 - i;
    }
    return TPS_OK;
}

static void teardown(run_state *r) {
    for (size_t i = 0; r->conns && i < r->n_conns; i++) {
        conn *c = &r->conns[i];
        if (c->easy) {
            if (c->busy) curl_multi_remove_handle(r->multi, c->easy);
            curl_easy_cleanup(c->easy);
        }
        sse_reader_free(&c->sse);
        free(c->inbox);
        free(c->marks);
        free(c->held);
        free(c->body);
        free(c->text);
        free(c->reply);
        free(c->send_body);
        curl_slist_free_all(c->session_hdrs);
    }
    free(r->conns);
    free(r->free_list);
    free(r->pending);
    free(r->evs);
    if (r->multi) curl_multi_cleanup(r->multi);
    if (r->epfd > 0) close(r->epfd);
    curl_slist_free_all(r->hdrs);
    free(r->url);
    convo_set_free(&r->convos);
}

/* When and what to send next. */
typedef struct sender {
    bool sending; /* false once nothing more will be sent */
    bool open_loop;
    uint64_t t0, dur; /* the run's start; --duration in ns (0: none) */
    uint64_t k;       /* open loop: the number of this loop's next arrival */
    uint64_t next_sched;
    tps_rng rng;
} sender;

/* When item i of a timed workload (a trace) is due. */
static uint64_t trace_time_ns(const sender *s, const workload *wl, size_t i) {
    double at = wl->items[i].send_at_s;
    return s->t0 + (at > 0 ? (uint64_t)(at * 1e9) : 0);
}

/* Open loop: on by `steps` arrivals of the run's one schedule (a loop owns
 * every n_loops-th), then whether sending goes on. */
static void advance_arrivals(const run_state *r, sender *s, uint64_t steps) {
    const bench_config *cfg = r->cfg;
    for (uint64_t i = 0; i < steps; i++) {
        s->k++;
        if (r->wl->timed) /* a trace: each item once, at its own time */
            s->next_sched = s->k < r->wl->n ? trace_time_ns(s, r->wl, s->k) : UINT64_MAX;
        else
            s->next_sched += load_next_gap_ns(cfg->arrival, cfg->rate, cfg->burstiness, &s->rng);
    }
    if (r->planned && s->k >= r->planned) s->sending = false;
    if (s->dur && s->next_sched - s->t0 >= s->dur) s->sending = false;
}

/* Sends what is due at now: a closed loop fills every free slot, an open
 * loop follows its schedule, a multi-turn run sends the next turn of each
 * conversation that may go. */
static int send_due(run_state *r, sender *s, uint64_t now, tps_err *e) {
    if (s->sending && s->dur && now - s->t0 >= s->dur) s->sending = false;
    if (atomic_load_explicit(&r->sh->stop, memory_order_relaxed)) s->sending = false;
    while (s->sending && r->n_free > 0) {
        int rc;
        if (r->multi_turn) {
            size_t conv;
            if (r->planned && r->n_recs >= r->planned) break;
            if (!convo_next(&r->convos, now, &conv)) break;
            rc = client_launch_turn(r, conv, e);
        } else if (s->open_loop) {
            if (s->next_sched > now) break;
            rc = client_launch(r, s->k, s->next_sched, e);
            advance_arrivals(r, s, r->sh->n_loops);
        } else {
            uint64_t seq = atomic_fetch_add_explicit(&r->sh->next_seq, 1, memory_order_relaxed);
            if (r->planned && seq >= r->planned) {
                s->sending = false;
                break;
            }
            rc = client_launch(r, seq, UINT64_MAX, e);
        }
        if (rc) return rc;
    }
    if (r->multi_turn && ((r->planned && r->n_recs >= r->planned) || convo_all_ended(&r->convos)))
        s->sending = false;
    return TPS_OK;
}

/* How long the loop may wait for sockets: until the next scheduled send,
 * the next conversation's end of thinking or curl's timer, at most 20 ms;
 * 0 when a closed loop has a free slot to fill. */
static int wait_ms(const run_state *r, const sender *s, uint64_t now) {
    uint64_t next = now + 20 * TPS_NS_PER_MS;
    if (s->sending && r->n_free > 0) {
        uint64_t due = r->multi_turn  ? convo_next_ready_ns(&r->convos)
                       : s->open_loop ? s->next_sched
                                      : now;
        if (due < next) next = due;
    }
    if (r->timer_ns < next) next = r->timer_ns;
    if (next <= now) return 0;
    return (int)((next - now + TPS_NS_PER_MS - 1) / TPS_NS_PER_MS);
}

/* A multi-turn run: its conversations, and requests = the sum of their
 * turns, conversations x turns for a synthetic workload (or fewer with
 * --requests). Session ids start with a tag of this run, so
 * load generators running at once do not share sessions. */
static int setup_turns(run_state *r, int64_t unix_ns, tps_err *e) {
    const workload *wl = r->wl;
    r->multi_turn = true;
    char tag[32];
    snprintf(tag, sizeof tag, "tps-%08llx",
             (unsigned long long)(((uint64_t)unix_ns ^ ((uint64_t)getpid() << 20)) & 0xffffffffu));
    int rc = convo_set_init(&r->convos, wl->conversations, wl->turns, r->cfg->think_time_s, tag, e);
    r->planned = 0; /* a dataset's conversations may have fewer turns */
    for (size_t i = 0; rc == TPS_OK && i < wl->conversations; i++) {
        convo_set_turns(&r->convos, i, workload_conv_turns(wl, i));
        r->planned += r->convos.c[i].turns;
    }
    if (r->cfg->requests && r->cfg->requests < r->planned) r->planned = r->cfg->requests;
    return rc;
}

/* Requests that ended: settle each. */
static void reap(run_state *r, uint64_t now) {
    CURLMsg *m;
    int q;
    while ((m = curl_multi_info_read(r->multi, &q))) {
        if (m->msg != CURLMSG_DONE) continue;
        conn *c = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&c);
        client_finish(r, c, m->data.result, BENCH_OK, now);
    }
}

int bench_loop_new(bench_loop **out, bench_shared *sh, uint32_t index, uint32_t conns,
                   bench_loop_progress *prog, tps_err *e) {
    *out = NULL;
    run_state *r = calloc(1, sizeof *r);
    if (!r) return tps_fail(e, TPS_ENOMEM, "out of memory");
    *r = (run_state){.cfg = sh->cfg,
                     .wl = sh->wl,
                     .sh = sh,
                     .index = index,
                     .prog = prog,
                     .epfd = -1,
                     .n_conns = conns,
                     .planned = sh->planned};
    int rc = setup(r, e);
    if (!rc && sh->wl->turns) rc = setup_turns(r, sh->t0_unix_ns, e);
    if (rc) {
        bench_loop_free(r);
        return rc;
    }
    *out = r;
    return TPS_OK;
}

int bench_loop_run(bench_loop *lp, tps_err *e) {
    run_state *r = lp;
    const bench_config *cfg = r->cfg;
    const workload *wl = r->wl;
    const double cpu0 = thread_cpu_s();
    const uint64_t t0 = r->sh->t0;
    sender s = {.sending = true, .open_loop = cfg->rate > 0 || wl->timed, .t0 = t0};
    tps_rng_seed(&s.rng, cfg->seed);
    s.dur = cfg->duration_s > 0 ? (uint64_t)(cfg->duration_s * 1e9) : 0;
    s.next_sched = wl->timed ? trace_time_ns(&s, wl, 0) : t0;
    if (s.open_loop) advance_arrivals(r, &s, r->index); /* this loop's first arrival */
    const uint64_t tmo = (uint64_t)((cfg->timeout_s > 0 ? cfg->timeout_s : 600) * 1e9);
    /* requests alone bound the run by requests x timeout; duration by duration + timeout */
    uint64_t last_check = t0;
    int rc = TPS_OK;

    for (;;) {
        uint64_t now = tps_now_ns();
        if ((rc = send_due(r, &s, now, e))) break;
        curl_timeout_action(r, now);
        client_parse_pending(r);
        now = tps_now_ns();
        reap(r, now);
        if (now - last_check >= 10 * TPS_NS_PER_MS) {
            client_check_timeouts(r, now);
            last_check = now;
            client_publish_progress(r);
        }
        if (!s.sending && r->n_free == r->n_conns) break;
        if (s.dur && now - t0 >= s.dur + tmo) { /* safety net: the run ends on time */
            for (size_t i = 0; i < r->n_conns; i++)
                if (r->conns[i].busy) {
                    snprintf(r->conns[i].msg, sizeof r->conns[i].msg,
                             "still running at duration + timeout");
                    client_finish(r, &r->conns[i], CURLE_OK, BENCH_ERR_CANCELLED, now);
                }
            r->hit_deadline = true;
            break;
        }
        socket_pass(r, wait_ms(r, &s, now));
        reap(r, tps_now_ns());
    }
    if (rc) atomic_store(&r->sh->stop, true);
    r->t_stop = tps_now_ns();
    r->cpu_s = thread_cpu_s() - cpu0;
    return rc;
}

void bench_loop_take(bench_loop *lp, bench_run_out *out) {
    run_state *r = lp;
    memset(out, 0, sizeof *out);
    out->recs = r->recs;
    out->n = r->n_recs;
    r->recs = NULL;
    r->n_recs = r->cap_recs = 0;
    out->t_start_ns = r->sh->t0;
    out->t_start_unix_ns = r->sh->t0_unix_ns;
    out->t_stop_ns = r->t_stop;
    out->client_cpu_s = r->cpu_s;
    out->client_loops = 1;
    out->client_loop_cpu_max_s = r->cpu_s;
    out->bytes_received = r->bytes;
    out->events_received = r->events;
    out->hit_deadline = r->hit_deadline;
}

void bench_loop_free(bench_loop *lp) {
    run_state *r = lp;
    if (!r) return;
    teardown(r);
    for (size_t i = 0; i < r->n_recs; i++)
        bench_record_free(&r->recs[i]);
    free(r->recs);
    free(r);
}
