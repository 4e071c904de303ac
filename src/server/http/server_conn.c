/* The connection table: every accepted connection, the bytes it sends
 * checked by our own framing parser (http_frame.h) before evhttp parses
 * them, and the limits on time that keep one client from holding a slot:
 *   - a header block must arrive whole within --header-timeout of the
 *     connection's accept or of its request's first byte (slowloris);
 *   - a request must arrive whole, and an idle keep-alive connection must
 *     speak, within --timeout.
 * Which connections are kept, and the class each request line puts its
 * connection in, is server_admit.c's. A client that shuts its sending side
 * once its request is sent (a half-close, which HTTP/1.1 allows) still gets
 * its whole answer: evhttp would take the EOF for the client's leaving, so
 * the socket is not read while an answer is being written
 * (server_conn_guard), and a client that did leave is found when a write
 * fails or by server_check_gone's probe.
 *
 * Not here: routing (server_http.c), admission and refusals
 * (server_admit.c), the server's lifecycle (server.c). */
#include "server/http/http.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"

static uint64_t secs_ns(uint32_t s) {
    return (uint64_t)s * TPS_NS_PER_SEC;
}

/* ---------------------------------------------------------------------------
 * Framing: every byte read, before evhttp reads it
 * ------------------------------------------------------------------------- */

/* Runs bytes through the connection's framer; false once it refused. */
static bool frame_bytes(conn_slot *c, const uint8_t *p, size_t n) {
    server *s = c->s;
    while (n) {
        bool was_started = c->frame.started;
        size_t used = 0;
        http_frame_ev ev = http_frame_feed(&c->frame, p, n, &used);
        if (!was_started && c->frame.started && s->cfg.header_timeout_s && !c->head_deadline_ns)
            c->head_deadline_ns = tps_now_ns() + secs_ns(s->cfg.header_timeout_s);
        if (!was_started && c->frame.started && !server_admit_start(c)) return false;
        p += used;
        n -= used;
        if (ev == HTTP_FRAME_ERROR) {
            server_conn_refuse(c, c->frame.status, "%s", c->frame.message);
            return false;
        }
        if (ev == HTTP_FRAME_HEAD) {
            c->head_deadline_ns = 0;
            if (!server_admit_request(c)) return false;
        }
    }
    return true;
}

/* The input buffer's callback: runs as bytes are read, before the
 * bufferevent's read callback (evhttp's) sees them. */
static void on_input(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg) {
    conn_slot *c = arg;
    if (!info->n_added) return;
    c->spoke = true;
    if (c->refused) {
        evbuffer_drain(buf, evbuffer_get_length(buf));
        return;
    }
    size_t len = evbuffer_get_length(buf);
    size_t off = len >= info->n_added ? len - info->n_added : 0;
    struct evbuffer_ptr ptr;
    if (evbuffer_ptr_set(buf, &ptr, off, EVBUFFER_PTR_SET) < 0) return;
    size_t left = len - off;
    while (left) {
        struct evbuffer_iovec v[8];
        int nv = evbuffer_peek(buf, (ev_ssize_t)left, &ptr, v, 8);
        if (nv <= 0) return;
        size_t took = 0;
        for (int i = 0; i < nv && i < 8 && took < left; i++) {
            size_t k = v[i].iov_len < left - took ? v[i].iov_len : left - took;
            if (!frame_bytes(c, v[i].iov_base, k)) return;
            took += k;
        }
        left -= took;
        if (left && evbuffer_ptr_set(buf, &ptr, took, EVBUFFER_PTR_ADD) < 0) return;
    }
}

/* ---------------------------------------------------------------------------
 * Accept
 * ------------------------------------------------------------------------- */

/* evhttp's bufferevent factory: every connection is made here, tracked,
 * and its input watched by on_input. */
struct bufferevent *server_conn_new_bev(struct event_base *base, void *arg) {
    server *s = arg;
    struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (!bev) return NULL; /* evhttp makes its own; it is then untracked */
    if (s->n_conns == s->cap_conns) {
        size_t cap = s->cap_conns ? s->cap_conns * 2 : 64;
        conn_slot **p = realloc(s->conns, cap * sizeof *p);
        if (!p) return bev;
        s->conns = p;
        s->cap_conns = cap;
    }
    conn_slot *c = calloc(1, sizeof *c);
    if (!c) return bev;
    c->cb = evbuffer_add_cb(bufferevent_get_input(bev), on_input, c);
    if (!c->cb) {
        free(c);
        return bev;
    }
    bufferevent_incref(bev);
    uint64_t now = tps_now_ns();
    c->s = s;
    c->bev = bev;
    c->born_ns = now;
    c->deadline_ns = s->cfg.timeout_s ? now + secs_ns(s->cfg.timeout_s) : 0;
    c->head_deadline_ns = s->cfg.header_timeout_s ? now + secs_ns(s->cfg.header_timeout_s) : 0;
    http_frame_init(&c->frame, s->cfg.max_header_bytes, s->cfg.max_body_bytes);
    s->conns[s->n_conns++] = c;
    server_update_accept(s, true);
    /* evhttp gives the bufferevent its socket after this returns */
    event_active(s->ev_classify, EV_TIMEOUT, 0);
    return bev;
}

void server_conns_on_accept(evutil_socket_t fd, short what, void *arg) {
    server *s = arg;
    for (size_t i = 0; i < s->n_conns; i++)
        if (!s->conns[i]->peer_known && !s->conns[i]->refused)
            server_admit_accepted(s, s->conns[i]);
    server_update_accept(s, false);
}

/* ---------------------------------------------------------------------------
 * Busy, sweep, output
 * ------------------------------------------------------------------------- */

conn_slot *server_conn_of(server *s, struct evhttp_request *req) {
    struct evhttp_connection *conn = req ? evhttp_request_get_connection(req) : NULL;
    struct bufferevent *bev = conn ? evhttp_connection_get_bufferevent(conn) : NULL;
    if (!bev) return NULL;
    for (size_t i = 0; i < s->n_conns; i++)
        if (s->conns[i]->bev == bev) return s->conns[i];
    return NULL;
}

/* Marks the connection of req as serving a request (no arrival deadline) or
 * idle again (a new deadline). */
conn_slot *server_conn_busy(server *s, struct evhttp_request *req, bool busy) {
    conn_slot *c = server_conn_of(s, req);
    if (!c) return NULL;
    uint64_t t = secs_ns(s->cfg.timeout_s);
    uint64_t now = tps_now_ns();
    c->busy = busy;
    c->deadline_ns = busy || !t ? 0 : now + t;
    if (!busy) c->idle_ns = now;
    if (busy && !c->nodelay) {
        /* Each streamed token is a small write: without TCP_NODELAY,
         * Nagle's algorithm holds it until the client's delayed ACK
         * (~40 ms), which bunches tokens and inflates TTFT and ITL. */
        int fd = (int)bufferevent_getfd(c->bev), one = 1;
        if (fd >= 0) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->nodelay = true;
    }
    return c;
}

void server_conn_guard(conn_slot *c) {
    /* evhttp turns reading on at every write, only to notice a close; an
     * EOF it reads there (a client's half-close as much as its leaving)
     * makes it drop the connection and the answer with it. Reading stays
     * off until the answer is out (evhttp turns it on again for the next
     * request); a client that left is found by a failed write, or by
     * server_check_gone. bufferevents coalesce nothing, so this costs an
     * epoll_ctl per write. */
    if (c && !c->refused) bufferevent_disable(c->bev, EV_READ);
}

int server_conn_peek(struct evhttp_connection *conn, evutil_socket_t *fd) {
    struct bufferevent *bev = evhttp_connection_get_bufferevent(conn);
    *fd = bev ? bufferevent_getfd(bev) : -1;
    if (*fd < 0) return 1; /* nothing to look at: evhttp will tell */
    char byte;
    ssize_t n = recv(*fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))) return 1;
    return n == 0 ? 0 : -1;
}

bool server_conn_probe_eof(conn_slot *c, evutil_socket_t fd) {
    if (!c) return false;
    if (c->probed) { /* asked before: a reset since (the socket closed) means it left */
        struct tcp_info ti;
        socklen_t tl = sizeof ti;
        return getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) == 0 && ti.tcpi_state != TCP_CLOSE;
    }
    c->probed = true;
    if (c->frame.http10 || evbuffer_get_length(bufferevent_get_output(c->bev))) return false;
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    return send(fd, cont, sizeof cont - 1, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof cont - 1;
}

void server_conns_sweep(server *s, bool all) {
    uint64_t now = tps_now_ns();
    size_t k = 0;
    for (size_t i = 0; i < s->n_conns; i++) {
        conn_slot *c = s->conns[i];
        if (all || server_conn_released(c)) { /* drop our reference */
            server_conn_slot_free(c);
            continue;
        }
        evutil_socket_t fd = bufferevent_getfd(c->bev);
        if (c->refused) {
            if (c->close_ns && now > c->close_ns && fd >= 0) {
                shutdown(fd, SHUT_RDWR);
                c->close_ns = 0;
            }
        } else if (!c->busy && c->head_deadline_ns && now > c->head_deadline_ns) {
            server_conn_refuse(c, 408,
                               "the request's headers did not arrive within %u s "
                               "(--header-timeout)",
                               s->cfg.header_timeout_s);
        } else if (c->deadline_ns && now > c->deadline_ns && fd >= 0) {
            /* The request did not arrive in time (slowloris) or the
             * connection idled: evhttp sees EOF and frees it. */
            shutdown(fd, SHUT_RDWR);
            c->deadline_ns = 0;
        }
        s->conns[k++] = c;
    }
    s->n_conns = k;
    server_update_accept(s, false);
}

/* Every response is answered once its last bytes are in the kernel. */
bool server_conns_output_pending(server *s) {
    for (size_t i = 0; i < s->n_conns; i++) {
        bufferevent_data_cb rd = NULL;
        bufferevent_event_cb ev = NULL;
        bufferevent_getcb(s->conns[i]->bev, &rd, NULL, &ev, NULL);
        if ((rd || ev) && evbuffer_get_length(bufferevent_get_output(s->conns[i]->bev)))
            return true;
    }
    return false;
}

uint32_t server_conns_open(server *s) {
    uint32_t n = 0;
    for (size_t i = 0; i < s->n_conns; i++) {
        bufferevent_data_cb rd = NULL;
        bufferevent_event_cb ev = NULL;
        bufferevent_getcb(s->conns[i]->bev, &rd, NULL, &ev, NULL);
        n += rd || ev;
    }
    return n;
}

/* ---------------------------------------------------------------------------
 * The end of a drain or stop: once no request is in flight and no body is
 * being prepared, the loop exits when every connection's output is in the
 * kernel (or SERVER_FLUSH_MAX_MS has passed)
 * ------------------------------------------------------------------------- */

void server_conns_on_flush(evutil_socket_t fd, short what, void *arg) {
    server *s = arg;
    if (!server_conns_output_pending(s) || tps_now_ns() > s->flush_deadline_ns) {
        event_del(s->ev_flush);
        event_base_loopexit(s->base, NULL);
    }
}

/* Called when the last request or body ends, and when a drain begins. */
void server_maybe_finish_drain(server *s) {
    if (!(s->draining || s->stopping) || s->n_inflight != 0 || s->n_jobs != 0 || s->flushing)
        return;
    s->flushing = true;
    s->flush_deadline_ns = tps_now_ns() + SERVER_FLUSH_MAX_MS * TPS_NS_PER_MS;
    struct timeval tv = {.tv_usec = 5000};
    event_add(s->ev_flush, &tv);
}
