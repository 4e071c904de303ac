/* The connection table: every accepted connection, the bytes it sends
 * checked by our own framing parser (http_frame.h) before evhttp parses
 * them, and the limits that keep one client from holding every slot:
 *   - a header block must arrive whole within --header-timeout of the
 *     connection's accept or of its request's first byte (slowloris);
 *   - a request must arrive whole, and an idle keep-alive connection must
 *     speak, within --timeout;
 *   - one client address holds at most --max-conns-per-client connections;
 *     more are refused at once (429);
 *   - beyond --max-connections, SERVER_RESERVED_CONNS more are accepted for
 *     GET/HEAD /health and /metrics only (others 503), so probes and
 *     scrapes answer while the slots are full; beyond those, accepts wait.
 * A refusal is answered here, as the OpenAI-shaped JSON error every route
 * answers with, written straight to the socket, and the connection closes:
 * evhttp never sees the offending bytes, so it never answers with its own
 * HTML error page, and never frames a request we would frame otherwise.
 *
 * Not here: routing (server_http.c), the server's lifecycle (server.c). */
#include "server/server_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"

#define CONN_LINGER_MS 1000 /* a refused connection is closed by then if its client has not */

static uint64_t secs_ns(uint32_t s) {
    return (uint64_t)s * TPS_NS_PER_SEC;
}

/* ---------------------------------------------------------------------------
 * Refusals
 * ------------------------------------------------------------------------- */

static const char *reason_of(int status) {
    switch (status) {
    case 400:
        return "Bad Request";
    case 408:
        return "Request Timeout";
    case 413:
        return "Content Too Large";
    case 417:
        return "Expectation Failed";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Error";
    }
}

static const char *code_of(int status) {
    switch (status) {
    case 408:
        return "request_timeout";
    case 413:
        return "request_too_large";
    case 417:
        return "expectation_failed";
    case 429:
        return "too_many_connections";
    case 431:
        return "headers_too_large";
    case 501:
        return "not_implemented";
    case 503:
        return "connection_limit";
    case 505:
        return "http_version_not_supported";
    default:
        return "bad_request";
    }
}

/* Refuses the connection: its unread input is dropped (and all that comes
 * after), the error goes out when nothing else is being written on it,
 * then the connection closes. */
static void conn_refuse(conn_slot *c, int status, const char *msg) {
    if (c->refused) return;
    c->refused = true;
    struct evbuffer *in = bufferevent_get_input(c->bev);
    evbuffer_drain(in, evbuffer_get_length(in));
    evutil_socket_t fd = bufferevent_getfd(c->bev);
    if (fd < 0) return;
    c->head_deadline_ns = 0;
    if (c->busy || evbuffer_get_length(bufferevent_get_output(c->bev))) {
        shutdown(fd, SHUT_RDWR); /* a response is under way: never interleave */
        return;
    }
    oai_error e;
    oai_error_set(&e, status,
                  status == 429   ? "rate_limit_error"
                  : status == 503 ? "unavailable_error"
                  : status >= 500 ? "server_error"
                                  : "invalid_request_error",
                  NULL, code_of(status), "%s", msg);
    sbuf body, out;
    sbuf_init(&body);
    sbuf_init(&out);
    oai_error_json(&e, &body);
    sbuf_printf(&out,
                "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                "%sConnection: close\r\n\r\n",
                status, reason_of(status), body.len,
                status == 429 || status == 503 ? "Retry-After: 1\r\n" : "");
    sbuf_add(&out, body.p ? body.p : "", body.len);
    if (!sbuf_failed(&out)) {
        ssize_t k = send(fd, out.p, out.len, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)k; /* a small reply into an idle socket; a client that left gets nothing */
    }
    sbuf_free(&body);
    sbuf_free(&out);
    shutdown(fd, SHUT_WR);
    c->close_ns = tps_now_ns() + (uint64_t)CONN_LINGER_MS * TPS_NS_PER_MS;
}

/* ---------------------------------------------------------------------------
 * Framing: every byte read, before evhttp reads it
 * ------------------------------------------------------------------------- */

static bool reserved_route(const http_frame *f) {
    if (strcmp(f->method, "GET") && strcmp(f->method, "HEAD")) return false;
    return !f->path_truncated && (!strcmp(f->path, "/health") || !strcmp(f->path, "/metrics"));
}

/* Runs bytes through the connection's framer; false once it refused. */
static bool frame_bytes(conn_slot *c, const uint8_t *p, size_t n) {
    server *s = c->s;
    while (n) {
        bool was_started = c->frame.started;
        size_t used = 0;
        http_frame_ev ev = http_frame_feed(&c->frame, p, n, &used);
        if (!was_started && c->frame.started && s->cfg.header_timeout_s && !c->head_deadline_ns)
            c->head_deadline_ns = tps_now_ns() + secs_ns(s->cfg.header_timeout_s);
        p += used;
        n -= used;
        if (ev == HTTP_FRAME_ERROR) {
            conn_refuse(c, c->frame.status, c->frame.message);
            return false;
        }
        if (ev == HTTP_FRAME_HEAD) {
            c->head_deadline_ns = 0;
            if (c->reserve && !reserved_route(&c->frame)) {
                char msg[160];
                snprintf(msg, sizeof msg,
                         "the server has %u connections open (--max-connections); only "
                         "/health and /metrics are answered beyond them: retry shortly",
                         s->cfg.max_connections);
                conn_refuse(c, 503, msg);
                return false;
            }
        }
    }
    return true;
}

/* The input buffer's callback: runs as bytes are read, before the
 * bufferevent's read callback (evhttp's) sees them. */
static void on_input(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg) {
    conn_slot *c = arg;
    if (!info->n_added) return;
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
 * Accept and classify
 * ------------------------------------------------------------------------- */

/* Accepts wait (in the kernel's backlog) while the live connections,
 * those not being closed after a refusal, fill --max-connections and the
 * reserved class. */
static void update_accept(server *s) {
    if (!s->listener || !s->cfg.max_connections) return;
    size_t live = 0;
    for (size_t i = 0; i < s->n_conns; i++)
        live += !s->conns[i]->refused;
    bool full = live >= (size_t)s->cfg.max_connections + SERVER_RESERVED_CONNS;
    if (full && !s->accept_paused) {
        evconnlistener_disable(s->listener);
        s->accept_paused = true;
    } else if (!full && s->accept_paused && !s->draining) {
        evconnlistener_enable(s->listener);
        s->accept_paused = false;
    }
}

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
    c->deadline_ns = s->cfg.timeout_s ? now + secs_ns(s->cfg.timeout_s) : 0;
    c->head_deadline_ns = s->cfg.header_timeout_s ? now + secs_ns(s->cfg.header_timeout_s) : 0;
    http_frame_init(&c->frame, s->cfg.max_header_bytes, s->cfg.max_body_bytes);
    s->conns[s->n_conns++] = c;
    update_accept(s);
    /* evhttp gives the bufferevent its socket after this returns */
    event_active(s->ev_classify, EV_TIMEOUT, 0);
    return bev;
}

static bool same_addr(const conn_slot *a, const conn_slot *b) {
    const struct sockaddr_storage *x = &a->peer, *y = &b->peer;
    if (x->ss_family != y->ss_family) return false;
    if (x->ss_family == AF_INET)
        return ((const struct sockaddr_in *)x)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)y)->sin_addr.s_addr;
    if (x->ss_family == AF_INET6)
        return !memcmp(&((const struct sockaddr_in6 *)x)->sin6_addr,
                       &((const struct sockaddr_in6 *)y)->sin6_addr, sizeof(struct in6_addr));
    return false;
}

uint32_t server_conns_per_client(const server *s) {
    if (s->cfg.max_conns_per_client) return s->cfg.max_conns_per_client;
    uint32_t half = s->cfg.max_connections / 2;
    return half ? half : (s->cfg.max_connections ? 1 : 0);
}

/* A new connection's class, once its socket and peer are known. */
static void classify(server *s, conn_slot *c) {
    evutil_socket_t fd = bufferevent_getfd(c->bev);
    if (fd < 0) return;
    socklen_t len = sizeof c->peer;
    if (getpeername(fd, (struct sockaddr *)&c->peer, &len) != 0)
        memset(&c->peer, 0, sizeof c->peer);
    c->classified = true;
    uint32_t normal = 0, same = 0;
    for (size_t i = 0; i < s->n_conns; i++) {
        const conn_slot *o = s->conns[i];
        if (o == c || !o->classified || o->refused || o->reserve) continue;
        normal++;
        same += same_addr(o, c);
    }
    uint32_t per = server_conns_per_client(s);
    char msg[160];
    if (per && same >= per) {
        snprintf(msg, sizeof msg,
                 "this address has %u connections open; the server allows %u per client "
                 "(--max-conns-per-client)",
                 same, per);
        conn_refuse(c, 429, msg);
    } else if (s->cfg.max_connections && normal >= s->cfg.max_connections) {
        if (s->n_reserve < SERVER_RESERVED_CONNS) {
            c->reserve = true;
            s->n_reserve++;
        } else {
            snprintf(msg, sizeof msg,
                     "the server has %u connections open (--max-connections): retry shortly",
                     s->cfg.max_connections);
            conn_refuse(c, 503, msg);
        }
    }
}

void server_conns_on_accept(evutil_socket_t fd, short what, void *arg) {
    server *s = arg;
    for (size_t i = 0; i < s->n_conns; i++)
        if (!s->conns[i]->classified) classify(s, s->conns[i]);
    update_accept(s);
}

/* ---------------------------------------------------------------------------
 * Busy, sweep, output
 * ------------------------------------------------------------------------- */

static conn_slot *slot_of(server *s, struct evhttp_request *req) {
    struct evhttp_connection *conn = req ? evhttp_request_get_connection(req) : NULL;
    struct bufferevent *bev = conn ? evhttp_connection_get_bufferevent(conn) : NULL;
    if (!bev) return NULL;
    for (size_t i = 0; i < s->n_conns; i++)
        if (s->conns[i]->bev == bev) return s->conns[i];
    return NULL;
}

/* Marks the connection of req as serving a request (no arrival deadline) or
 * idle again (a new deadline). */
void server_conn_busy(server *s, struct evhttp_request *req, bool busy) {
    conn_slot *c = slot_of(s, req);
    if (!c) return;
    uint64_t t = secs_ns(s->cfg.timeout_s);
    c->busy = busy;
    c->deadline_ns = busy || !t ? 0 : tps_now_ns() + t;
    if (busy && !c->nodelay) {
        /* Each streamed token is a small write: without TCP_NODELAY,
         * Nagle's algorithm holds it until the client's delayed ACK
         * (~40 ms), which bunches tokens and inflates TTFT and ITL. */
        int fd = (int)bufferevent_getfd(c->bev), one = 1;
        if (fd >= 0) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->nodelay = true;
    }
}

static void slot_free(server *s, conn_slot *c) {
    evbuffer_remove_cb_entry(bufferevent_get_input(c->bev), c->cb);
    bufferevent_disable(c->bev, EV_READ | EV_WRITE);
    bufferevent_decref(c->bev);
    if (c->reserve) s->n_reserve--;
    free(c);
}

void server_conns_sweep(server *s, bool all) {
    uint64_t now = tps_now_ns();
    size_t k = 0;
    for (size_t i = 0; i < s->n_conns; i++) {
        conn_slot *c = s->conns[i];
        bufferevent_data_cb rd = NULL;
        bufferevent_event_cb ev = NULL;
        bufferevent_getcb(c->bev, &rd, NULL, &ev, NULL);
        if (all || (!rd && !ev)) { /* evhttp freed it: drop our reference */
            slot_free(s, c);
            continue;
        }
        evutil_socket_t fd = bufferevent_getfd(c->bev);
        if (c->refused) {
            if (c->close_ns && now > c->close_ns && fd >= 0) {
                shutdown(fd, SHUT_RDWR);
                c->close_ns = 0;
            }
        } else if (!c->busy && c->head_deadline_ns && now > c->head_deadline_ns) {
            char msg[128];
            snprintf(msg, sizeof msg,
                     "the request's headers did not arrive within %u s (--header-timeout)",
                     s->cfg.header_timeout_s);
            conn_refuse(c, 408, msg);
        } else if (c->deadline_ns && now > c->deadline_ns && fd >= 0) {
            /* The request did not arrive in time (slowloris) or the
             * connection idled: evhttp sees EOF and frees it. */
            shutdown(fd, SHUT_RDWR);
            c->deadline_ns = 0;
        }
        s->conns[k++] = c;
    }
    s->n_conns = k;
    update_accept(s);
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
