/* Admission: which connections the server keeps, and what it tells the
 * others.
 *   - A connection's class is decided by its first request line, never at
 *     accept time: GET/HEAD /health and /metrics take a reserved slot
 *     (SERVER_RESERVED_CONNS of them) when the --max-connections general
 *     slots are full; any other request takes a general slot, and one
 *     client address holds at most --max-conns-per-client of those (429
 *     above), all of them at most --max-connections (503 above).
 *   - A request's first byte counts against its address's share at once:
 *     an address with --max-conns-per-client requests under way (heads or
 *     bodies arriving, answers being written) gets 429 for another, /health
 *     included, so that one address trickling header lines cannot hold the
 *     slots (general or reserved) that another's /health needs (issue 48).
 *   - Connections that have sent nothing hold no class. When the table is
 *     full (--max-connections + the reserved slots), a new connection sheds
 *     the oldest of them (one from its own address first) with a 503, and
 *     then an idle keep-alive one (closed, as servers may close idle
 *     connections): so a probe from a new address gets through while idle
 *     sockets fill every slot. A request that finds the general slots full
 *     sheds an idle keep-alive one too, before it is refused.
 *   - The process's open-file limit: the table never holds more
 *     connections than it leaves room for (SERVER_FD_RESERVE descriptors
 *     for everything else), and when accept() fails for want of
 *     descriptors or memory the listener pauses (100 ms, doubling to 1 s)
 *     instead of failing again at once, logging once per episode.
 * A refusal is the OpenAI-shaped JSON error every route answers with,
 * written straight to the socket, and the connection closes.
 *
 * Not here: the table itself, framing and sweeping (server_conn.c, which
 * calls this file and nothing here calls back). */
#include "server/http/http.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "base/clock.h"

#define CONN_LINGER_MS      1000 /* a refused connection is closed by then if its client has not */
#define ACCEPT_PAUSE_MIN_MS 100  /* accept() out of descriptors: first pause */
#define ACCEPT_PAUSE_MAX_MS 1000

/* ---------------------------------------------------------------------------
 * Refusals
 * ------------------------------------------------------------------------- */

/* A refusal's status line reason and the error code its body names. */
typedef struct refusal_kind {
    int status;
    const char *reason, *code;
} refusal_kind;

static const refusal_kind *refusal_of(int status) {
    static const refusal_kind KINDS[] = {
        {400, "Bad Request", "bad_request"},
        {408, "Request Timeout", "request_timeout"},
        {413, "Content Too Large", "request_too_large"},
        {417, "Expectation Failed", "expectation_failed"},
        {429, "Too Many Requests", "too_many_connections"},
        {431, "Request Header Fields Too Large", "headers_too_large"},
        {501, "Not Implemented", "not_implemented"},
        {503, "Service Unavailable", "connection_limit"},
        {505, "HTTP Version Not Supported", "http_version_not_supported"},
    };
    static const refusal_kind OTHER = {0, "Error", "bad_request"};
    for (size_t i = 0; i < sizeof KINDS / sizeof KINDS[0]; i++)
        if (KINDS[i].status == status) return &KINDS[i];
    return &OTHER;
}

/* The error as a whole HTTP response with Connection: close, sent on fd
 * (a small reply into an idle socket; a client that left gets nothing). */
static void send_refusal(evutil_socket_t fd, int status, const char *msg) {
    oai_error e;
    oai_error_set(&e, status,
                  status == 429   ? "rate_limit_error"
                  : status == 503 ? "unavailable_error"
                  : status >= 500 ? "server_error"
                                  : "invalid_request_error",
                  NULL, refusal_of(status)->code, "%s", msg);
    sbuf body, out;
    sbuf_init(&body);
    sbuf_init(&out);
    oai_error_json(&e, &body);
    sbuf_printf(&out,
                "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                "%sConnection: close\r\n\r\n",
                status, refusal_of(status)->reason, body.len,
                status == 429 || status == 503 ? "Retry-After: 1\r\n" : "");
    sbuf_add(&out, body.p ? body.p : "", body.len);
    if (!sbuf_failed(&out)) {
        ssize_t k = send(fd, out.p, out.len, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)k;
    }
    sbuf_free(&body);
    sbuf_free(&out);
}

void server_conn_refuse(conn_slot *c, int status, const char *fmt, ...) {
    if (c->refused) return;
    c->refused = true;
    c->klass = CONN_NEW;
    struct evbuffer *in = bufferevent_get_input(c->bev);
    evbuffer_drain(in, evbuffer_get_length(in));
    evutil_socket_t fd = bufferevent_getfd(c->bev);
    if (fd < 0) return;
    c->head_deadline_ns = 0;
    if (c->busy || evbuffer_get_length(bufferevent_get_output(c->bev))) {
        shutdown(fd, SHUT_RDWR); /* a response is under way: never interleave */
        return;
    }
    if (status) {
        char msg[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        send_refusal(fd, status, msg);
    }
    if (!status || !c->spoke) { /* nothing of its to read: closed at once, its descriptor too */
        shutdown(fd, SHUT_RDWR);
        return;
    }
    /* it may still be sending: closing now could reset the connection
     * before the client reads the answer */
    shutdown(fd, SHUT_WR);
    c->close_ns = tps_now_ns() + (uint64_t)CONN_LINGER_MS * TPS_NS_PER_MS;
}

/* ---------------------------------------------------------------------------
 * Counting and shedding
 * ------------------------------------------------------------------------- */

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

/* The table's size: general slots and the reserved ones. */
static size_t table_cap(const server *s) {
    return (size_t)s->cfg.max_connections + SERVER_RESERVED_CONNS;
}

static size_t live_conns(const server *s) {
    size_t live = 0;
    for (size_t i = 0; i < s->n_conns; i++)
        live += !s->conns[i]->refused;
    return live;
}

/* Accepted, its peer known, nothing sent yet: the first to go. */
static bool is_silent(const conn_slot *c) {
    return !c->refused && c->peer_known && !c->spoke && !c->busy;
}

/* Answered (its last bytes out) and waiting for its next request, none of
 * which has started. */
static bool is_idle(const conn_slot *c) {
    return !c->refused && c->spoke && !c->busy && !c->frame.started && c->klass != CONN_NEW &&
           !evbuffer_get_length(bufferevent_get_output(c->bev));
}

/* The connection to shed: the oldest silent one (from like's address
 * first, when like is given), else the longest idle one (of klass, and
 * from like's address when same); NULL when there is none. Never but. */
static conn_slot *pick_shed(server *s, const conn_slot *like, bool silent, int klass, bool same,
                            const conn_slot *but) {
    conn_slot *best = NULL, *best_same = NULL;
    for (size_t i = 0; i < s->n_conns; i++) {
        conn_slot *o = s->conns[i];
        if (o == but || !(silent ? is_silent(o) : is_idle(o))) continue;
        if (!silent && klass && o->klass != klass) continue;
        uint64_t t = silent ? o->born_ns : o->idle_ns;
        if (!best || t < (silent ? best->born_ns : best->idle_ns)) best = o;
        if (like && same_addr(o, like) &&
            (!best_same || t < (silent ? best_same->born_ns : best_same->idle_ns)))
            best_same = o;
    }
    if (same) return best_same;
    return best_same ? best_same : best;
}

static void shed(conn_slot *o, bool silent) {
    server_conn_refuse(o, silent ? 503 : 0, /* an idle keep-alive one: closed */
                       "the server's %u connection slots (--max-connections) are full and this "
                       "connection had sent nothing: reconnect and send the request at once",
                       o->s->cfg.max_connections);
    o->s->conns_shed++;
}

static bool sheddable(server *s) {
    return pick_shed(s, NULL, true, 0, false, NULL) || pick_shed(s, NULL, false, 0, false, NULL);
}

/* ---------------------------------------------------------------------------
 * The listener: paused when the table is full with nothing to shed, or the
 * descriptors run out, or accept() failed a moment ago
 * ------------------------------------------------------------------------- */

void server_conn_slot_free(conn_slot *c) {
    evbuffer_remove_cb_entry(bufferevent_get_input(c->bev), c->cb);
    bufferevent_disable(c->bev, EV_READ | EV_WRITE);
    bufferevent_decref(c->bev); /* the last reference: the socket closes */
    free(c);
}

bool server_conn_released(const conn_slot *c) {
    bufferevent_data_cb rd = NULL;
    bufferevent_event_cb ev = NULL;
    bufferevent_getcb(c->bev, &rd, NULL, &ev, NULL);
    return !rd && !ev;
}

/* The sweep's first part alone: drops the slots of connections evhttp has
 * freed (until then our reference keeps their sockets open). */
static void reap(server *s) {
    size_t k = 0;
    for (size_t i = 0; i < s->n_conns; i++) {
        if (server_conn_released(s->conns[i]))
            server_conn_slot_free(s->conns[i]);
        else
            s->conns[k++] = s->conns[i];
    }
    s->n_conns = k;
}

void server_update_accept(server *s, bool just_accepted) {
    if (!s->listener) return;
    if (s->n_conns >= s->fd_cap) reap(s); /* the sweep's part, now: descriptors are short */
    bool full =
        s->n_conns >= s->fd_cap || (s->cfg.max_connections && live_conns(s) >= table_cap(s) &&
                                    (just_accepted || !sheddable(s)));
    if (s->accept_backoff) full = true;
    if (full && !s->accept_paused) {
        evconnlistener_disable(s->listener);
        s->accept_paused = true;
    } else if (!full && s->accept_paused && !s->draining) {
        evconnlistener_enable(s->listener);
        s->accept_paused = false;
    }
}

/* The retry timer is always pending (a long period, shortened for a
 * pause): it is how the accept error callback finds its server, since
 * libevent hands that callback evhttp's argument, not ours. */
#define ACCEPT_IDLE_S 3600

static int find_server(const struct event_base *base, const struct event *ev, void *arg) {
    (void)base;
    if (event_get_callback(ev) != server_on_accept_retry) return 0;
    *(server **)arg = event_get_callback_arg(ev);
    return 1;
}

void server_arm_accept_retry(server *s) {
    struct timeval tv = {.tv_sec = ACCEPT_IDLE_S};
    evtimer_add(s->ev_accept_retry, &tv);
}

void server_on_accept_error(struct evconnlistener *l, void *arg) {
    (void)arg; /* evhttp's */
    int err = EVUTIL_SOCKET_ERROR();
    server *s = NULL;
    event_base_foreach_event(evconnlistener_get_base(l), find_server, &s);
    if (!s || s->listener != l) { /* not ours to manage: at least do not spin */
        evconnlistener_disable(l);
        return;
    }
    uint64_t ms = s->accept_pause_ms ? s->accept_pause_ms * 2 : ACCEPT_PAUSE_MIN_MS;
    s->accept_pause_ms = ms > ACCEPT_PAUSE_MAX_MS ? ACCEPT_PAUSE_MAX_MS : ms;
    s->accept_backoff = true;
    s->accept_errors++;
    server_update_accept(s, false);
    if (!s->accept_logged) { /* once per episode: the accept that succeeds ends it */
        s->accept_logged = true;
        fprintf(s->log,
                "tps serve: accept() failed: %s (%zu connections open, open-file limit %u): "
                "pausing new connections, %llu ms at first\n",
                evutil_socket_error_to_string(err), s->n_conns, s->fd_limit,
                (unsigned long long)s->accept_pause_ms);
    }
    struct timeval tv = {.tv_sec = (long)(s->accept_pause_ms / 1000),
                         .tv_usec = (long)(s->accept_pause_ms % 1000) * 1000};
    evtimer_add(s->ev_accept_retry, &tv);
}

void server_on_accept_retry(evutil_socket_t fd, short what, void *arg) {
    server *s = arg;
    s->accept_backoff = false;
    server_update_accept(s, false);
    server_arm_accept_retry(s);
    (void)fd, (void)what;
}

/* An accept that went through ends a pause episode. */
static void accept_ok(server *s) {
    if (!s->accept_logged || s->accept_backoff) return;
    fprintf(s->log, "tps serve: accepting again after %llu failed accept() calls\n",
            (unsigned long long)s->accept_errors);
    s->accept_logged = false;
    s->accept_pause_ms = 0;
    s->accept_errors = 0;
}

/* ---------------------------------------------------------------------------
 * Decisions: at accept (room for it), at a request line (its class)
 * ------------------------------------------------------------------------- */

void server_admit_accepted(server *s, conn_slot *c) {
    evutil_socket_t fd = bufferevent_getfd(c->bev);
    if (fd < 0) return;
    socklen_t len = sizeof c->peer;
    if (getpeername(fd, (struct sockaddr *)&c->peer, &len) != 0)
        memset(&c->peer, 0, sizeof c->peer);
    c->peer_known = true;
    accept_ok(s);
    if (!s->cfg.max_connections || live_conns(s) <= table_cap(s)) return;
    conn_slot *o = pick_shed(s, c, true, 0, false, c);
    if (o) {
        shed(o, true);
    } else if ((o = pick_shed(s, NULL, false, 0, false, c))) {
        shed(o, false);
    } else {
        server_conn_refuse(c, 503,
                           "the server has %u connections open (--max-connections) and every one "
                           "is in use: retry shortly",
                           s->cfg.max_connections);
    }
}

static bool probe_route(const http_frame *f) {
    if (strcmp(f->method, "GET") && strcmp(f->method, "HEAD")) return false;
    return !f->path_truncated && (!strcmp(f->path, "/health") || !strcmp(f->path, "/metrics"));
}

/* Connections of klass (and from c's address when same), c excluded. */
static uint32_t count_class(const server *s, const conn_slot *c, int klass, bool same) {
    uint32_t n = 0;
    for (size_t i = 0; i < s->n_conns; i++) {
        const conn_slot *o = s->conns[i];
        if (o != c && !o->refused && o->klass == klass && (!same || same_addr(o, c))) n++;
    }
    return n;
}

/* Room for c among the general connections of its address (per_addr) or
 * of all, at most limit of them (0: no limit); when they are full, an idle
 * keep-alive one of that set is shed to make it. 0 when there is room,
 * else how many hold the slots (the refusal is the caller's). */
static uint32_t over_limit(server *s, conn_slot *c, bool per_addr, uint32_t limit) {
    if (!limit) return 0;
    uint32_t n = count_class(s, c, CONN_GENERAL, per_addr);
    if (n < limit) return 0;
    conn_slot *o = pick_shed(s, per_addr ? c : NULL, false, CONN_GENERAL, per_addr, c);
    if (!o) return n;
    shed(o, false);
    return 0;
}

/* A general slot for c: over the address's share or the whole, an idle
 * keep-alive connection (the address's own for its share) is shed first. */
static bool admit_general(server *s, conn_slot *c) {
    uint32_t per = server_conns_per_client(s), max = s->cfg.max_connections;
    uint32_t n = over_limit(s, c, true, per);
    if (n) {
        server_conn_refuse(c, 429,
                           "this address has %u connections with requests open; the server "
                           "allows %u per client (--max-conns-per-client)",
                           n, per);
        return false;
    }
    if (over_limit(s, c, false, max)) {
        server_conn_refuse(c, 503,
                           "the server has %u connections with requests open (--max-connections); "
                           "only /health and /metrics are answered beyond them: retry shortly",
                           max);
        return false;
    }
    c->klass = CONN_GENERAL;
    return true;
}

/* Requests under way from c's address, c excluded: started and not whole,
 * or being answered. */
static uint32_t under_way(const server *s, const conn_slot *c) {
    uint32_t n = 0;
    for (size_t i = 0; i < s->n_conns; i++) {
        const conn_slot *o = s->conns[i];
        if (o != c && !o->refused && (o->busy || o->frame.started) && same_addr(o, c)) n++;
    }
    return n;
}

bool server_admit_start(conn_slot *c) {
    server *s = c->s;
    uint32_t per = server_conns_per_client(s);
    if (!per || !c->peer_known) return true;
    uint32_t n = under_way(s, c);
    if (n < per) return true;
    server_conn_refuse(c, 429,
                       "this address has %u requests under way; the server allows %u per client "
                       "(--max-conns-per-client)",
                       n, per);
    return false;
}

bool server_admit_request(conn_slot *c) {
    server *s = c->s;
    if (c->klass == CONN_GENERAL) return true;
    if (!probe_route(&c->frame)) {
        c->klass = CONN_NEW; /* a probe's reserved slot is given back first */
        return admit_general(s, c);
    }
    if (c->klass == CONN_PROBE) return true;
    uint32_t max = s->cfg.max_connections;
    if (!max || count_class(s, c, CONN_GENERAL, false) < max) {
        c->klass = CONN_GENERAL;
    } else if (count_class(s, c, CONN_PROBE, false) < SERVER_RESERVED_CONNS) {
        c->klass = CONN_PROBE;
    } else {
        server_conn_refuse(c, 503,
                           "the server has %u connections with requests open (--max-connections) "
                           "and its %d reserved for /health and /metrics: retry shortly",
                           max, SERVER_RESERVED_CONNS);
        return false;
    }
    return true;
}

/* ---------------------------------------------------------------------------
 * The open-file limit
 * ------------------------------------------------------------------------- */

void server_admit_limits(server *s) {
    struct rlimit rl;
    rlim_t soft = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : RLIM_INFINITY;
    uint64_t lim = soft == RLIM_INFINITY || soft > UINT32_MAX ? UINT32_MAX : (uint64_t)soft;
    s->fd_limit = (uint32_t)lim;
    s->fd_cap = lim > 2 * SERVER_FD_RESERVE ? (uint32_t)(lim - SERVER_FD_RESERVE)
                                            : (uint32_t)(lim / 2 ? lim / 2 : 1);
    /* the table, and room for connections being closed (refused, shed) */
    uint64_t want = (uint64_t)s->cfg.max_connections + SERVER_RESERVED_CONNS + SERVER_FD_CLOSING;
    if (s->cfg.max_connections && want > s->fd_cap) {
        uint32_t was = s->cfg.max_connections;
        uint32_t room = s->fd_cap > SERVER_RESERVED_CONNS + SERVER_FD_CLOSING
                            ? s->fd_cap - SERVER_RESERVED_CONNS - SERVER_FD_CLOSING
                            : 1;
        s->cfg.max_connections = room;
        fprintf(s->log,
                "tps serve: warning: the open-file limit is %u (ulimit -n): --max-connections "
                "lowered from %u to %u (+%d for /health and /metrics, %d descriptors for the "
                "rest); raise the limit (systemd: LimitNOFILE) to keep %u\n",
                s->fd_limit, was, room, SERVER_RESERVED_CONNS, SERVER_FD_RESERVE, was);
    }
    fprintf(s->log,
            "tps serve: connections: at most %u (+%d for /health and /metrics), %u per client "
            "address; open-file limit %u\n",
            s->cfg.max_connections, SERVER_RESERVED_CONNS, server_conns_per_client(s), s->fd_limit);
}
