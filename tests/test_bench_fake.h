/* A misbehaving (or well-behaved) OpenAI-style streaming server for the
 * bench tests: one thread, poll(), plain sockets on 127.0.0.1, an ephemeral
 * port. Every connection gets the same behaviour (fake_mode). Header-only so
 * each tests/test_bench*.c can include it; not a general HTTP server.
 *
 * fake_start / fake_stop pair; the struct's counters (and, with capture,
 * the requests it received) are read after stop. */
#ifndef TPS_TEST_BENCH_FAKE_H
#define TPS_TEST_BENCH_FAKE_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "support/raw_http.h" /* raw_listen, raw_send_all */

typedef enum fake_mode {
    FAKE_OK = 0,      /* tokens, usage + timings, [DONE] */
    FAKE_SLOW_FIRST,  /* nothing for delay_ms, then as OK */
    FAKE_STALL,       /* two tokens, then silence */
    FAKE_MALFORMED,   /* one token, then a broken JSON event */
    FAKE_HTTP500,     /* 500 with an OpenAI-shaped error */
    FAKE_RESET,       /* two tokens, then a TCP reset */
    FAKE_NO_DONE,     /* tokens, then a clean end without [DONE] */
    FAKE_ERROR_EVENT, /* one token, then data: {"error":...} */
    FAKE_DONE_ONLY,   /* a 200 stream of [DONE] alone: no token */
    FAKE_REDIRECT,    /* 302 Found to another path */
} fake_mode;

/* The response shape (FAKE_OK only): completions text events by default; the
 * others stream `thinking` thinking tokens, then the rest of `tokens` as the
 * answer, in one server dialect each, with usage saying both counts. */
typedef enum fake_dialect {
    FAKE_D_COMPLETIONS = 0,
    FAKE_D_CHAT_REASONING,         /* delta.reasoning (vLLM, Ollama, OpenRouter) */
    FAKE_D_CHAT_REASONING_CONTENT, /* delta.reasoning_content (llama.cpp, SGLang) */
    FAKE_D_CHAT_UNKNOWN,           /* delta.thinking: a field no dialect row reads */
    FAKE_D_RESPONSES,              /* OpenAI Responses events */
    FAKE_D_MESSAGES,               /* Anthropic Messages events */
    FAKE_D_CHAT_WHOLE,             /* "stream": false: one JSON body after the tokens' time */
    FAKE_D_EMBEDDINGS,             /* one JSON body with usage.prompt_tokens = 40 */
} fake_dialect;

#define FAKE_MAX_CONN 4096
#define FAKE_LOG_SEP  "\n<<<end of request>>>\n"

typedef struct fake_conn {
    int fd;
    char req[8192];
    size_t req_len;
    bool responding;
    int step;         /* events written */
    uint64_t next_ns; /* when to write the next piece */
    bool queued;      /* serial_ms: waiting for the single server */
    uint64_t arrived_ns;
} fake_conn;

typedef struct fake_server {
    fake_mode mode;
    int tokens;        /* per response */
    int per_event;     /* tokens per SSE event (>= 1) */
    int gap_ms;        /* between events */
    int delay_ms;      /* SLOW_FIRST: before the first byte; OK: before the first event */
    bool no_usage;     /* leave out the usage chunk */
    int held_every;    /* > 0, one token per event: only every held_every-th event (and the
                        * last) has text, the others "" (llama.cpp holding back bytes) */
    int cached_tokens; /* > 0: usage.prompt_tokens_details.cached_tokens (else not sent) */
    fake_dialect dialect;
    long long usage_prompt; /* > 0: usage.prompt_tokens (else 7) */
    int event_bytes;        /* > 0: each token event's text is this many bytes ('x') */
    int thinking;           /* dialects: of `tokens`, how many are thinking (streamed first) */
    int serial_ms;          /* > 0: one server, FIFO: each request holds it serial_ms before its
                             * response starts (capacity 1000/serial_ms requests/s; latency grows
                             * without bound above it); a request whose client left is dropped */
    bool capture;           /* keep every request (headers and body) in log, in arrival order */
    char *log; /* with capture: each request then FAKE_LOG_SEP; fake_free_log frees it */
    size_t log_len, log_cap;
    int port;
    char url[64]; /* http://127.0.0.1:port, once started */
    int lfd;
    int wake[2];
    pthread_t th;
    atomic_bool stop;
    atomic_int served, max_conns;
    fake_conn *conns; /* (FAKE_MAX_CONN,) */
    int n_conns;
    uint64_t serial_free_ns; /* serial_ms: when the server is next free */
} fake_server;

static inline uint64_t fake_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void fake_chunk(int fd, const char *data) {
    char head[32];
    size_t n = strlen(data);
    snprintf(head, sizeof head, "%zx\r\n", n);
    char *buf = malloc(n + 48);
    size_t h = strlen(head);
    memcpy(buf, head, h);
    memcpy(buf + h, data, n);
    memcpy(buf + h + n, "\r\n", 2);
    raw_send_all(fd, buf, h + n + 2);
    free(buf);
}

static void fake_close(fake_server *s, int i, bool reset) {
    fake_conn *c = &s->conns[i];
    if (reset) {
        struct linger lg = {1, 0};
        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
    close(c->fd);
    s->conns[i] = s->conns[--s->n_conns];
}

/* Advances connection i by one piece; returns false if it was closed. */
/* The response is served (counted) and the connection waits for its next
 * request. Returns true (fake_step's "keep the connection"). */
static bool fake_served(fake_server *s, fake_conn *c) {
    c->responding = false;
    c->req_len = 0;
    c->step = 0;
    atomic_fetch_add(&s->served, 1);
    return true;
}

/* A streamed answer's head: 200, text/event-stream, chunked (with
 * Cache-Control: no-cache when no_cache). */
static void fake_sse_head(fake_conn *c, bool no_cache) {
    const char *h =
        no_cache ? "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: "
                   "no-cache\r\nTransfer-Encoding: chunked\r\n\r\n"
                 : "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: "
                   "chunked\r\n\r\n";
    raw_send_all(c->fd, h, strlen(h));
}

/* The chunked body's last (empty) chunk, then fake_served. */
static bool fake_end_response(fake_server *s, fake_conn *c) {
    fake_chunk(c->fd, "");
    return fake_served(s, c);
}

/* A whole JSON response (the body after the headers). */
static void fake_json_response(fake_server *s, fake_conn *c, const char *body) {
    char head[160];
    snprintf(head, sizeof head,
             "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
             strlen(body));
    raw_send_all(c->fd, head, strlen(head));
    raw_send_all(c->fd, body, strlen(body));
    fake_served(s, c);
}

/* Token k (1-based) of a dialect stream: thinking or answer. */
static void fake_dialect_token(fake_server *s, int k, char *ev, size_t cap) {
    const bool think = k <= s->thinking;
    const char *chat_field = s->dialect == FAKE_D_CHAT_REASONING           ? "reasoning"
                             : s->dialect == FAKE_D_CHAT_REASONING_CONTENT ? "reasoning_content"
                                                                           : "thinking";
    switch (s->dialect) {
    case FAKE_D_RESPONSES:
        snprintf(ev, cap,
                 "event: response.%s.delta\ndata: {\"type\":\"response.%s.delta\",\"item_id\":"
                 "\"i1\",\"output_index\":0,\"content_index\":0,\"delta\":\" w%d\","
                 "\"sequence_number\":%d}\n\n",
                 think ? "reasoning_text" : "output_text", think ? "reasoning_text" : "output_text",
                 k, k + 1);
        break;
    case FAKE_D_MESSAGES: {
        char start[200] = "", stop[80] = "";
        if (k == 1 || k == s->thinking + 1)
            snprintf(start, sizeof start,
                     "event: content_block_start\ndata: {\"type\":\"content_block_start\","
                     "\"index\":%d,\"content_block\":{\"type\":\"%s\",\"%s\":\"\"}}\n\n",
                     k > s->thinking, think ? "thinking" : "text", think ? "thinking" : "text");
        if (k == s->thinking + 1 && k > 1)
            snprintf(stop, sizeof stop,
                     "event: content_block_stop\ndata: {\"type\":\"content_block_stop\","
                     "\"index\":0}\n\n");
        snprintf(ev, cap,
                 "%s%sevent: content_block_delta\ndata: {\"type\":\"content_block_delta\","
                 "\"index\":%d,\"delta\":{\"type\":\"%s\",\"%s\":\" w%d\"}}\n\n",
                 stop, start, k > s->thinking, think ? "thinking_delta" : "text_delta",
                 think ? "thinking" : "text", k);
        break;
    }
    default:
        snprintf(ev, cap,
                 "data: {\"choices\":[{\"index\":0,\"delta\":{\"%s\":\" w%d\"},"
                 "\"finish_reason\":null}]}\n\n",
                 think ? chat_field : "content", k);
    }
}

/* The stream's end: usage with the thinking count, then the end event. */
static void fake_dialect_end(fake_server *s, char *ev, size_t cap) {
    const int n = s->tokens, th = s->thinking;
    if (s->dialect == FAKE_D_RESPONSES)
        snprintf(ev, cap,
                 "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":"
                 "{\"id\":\"r1\",\"status\":\"completed\",\"usage\":{\"input_tokens\":7,"
                 "\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":%d,"
                 "\"output_tokens_details\":{\"reasoning_tokens\":%d},\"total_tokens\":%d}}}\n\n",
                 n, th, n + 7);
    else if (s->dialect == FAKE_D_MESSAGES)
        snprintf(ev, cap,
                 "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}"
                 "\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{"
                 "\"stop_reason\":\"max_tokens\",\"stop_sequence\":null},\"usage\":{"
                 "\"output_tokens\":%d}}\n\nevent: message_stop\ndata: {\"type\":"
                 "\"message_stop\"}\n\n",
                 n);
    else
        snprintf(ev, cap,
                 "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":%d,"
                 "\"total_tokens\":%d,\"completion_tokens_details\":{\"reasoning_tokens\":%d}}}"
                 "\n\ndata: [DONE]\n\n",
                 n, n + 7, th);
}

/* One piece of a dialect response: the head, token k, or the end. */
static bool fake_dialect_step(fake_server *s, fake_conn *c) {
    char ev[1024];
    const uint64_t gap = (uint64_t)s->gap_ms * 1000000ull;
    if (s->dialect == FAKE_D_CHAT_WHOLE || s->dialect == FAKE_D_EMBEDDINGS) {
        if (c->step == 0) { /* the body comes when the tokens would have */
            c->step = 1;
            c->next_ns =
                fake_now() + gap * (uint64_t)(s->dialect == FAKE_D_EMBEDDINGS ? 1 : s->tokens);
            return true;
        }
        if (s->dialect == FAKE_D_EMBEDDINGS)
            snprintf(ev, sizeof ev,
                     "{\"object\":\"list\",\"data\":[{\"object\":\"embedding\",\"index\":0,"
                     "\"embedding\":[0.25,-0.5]}],\"model\":\"m\",\"usage\":{\"prompt_tokens\":40,"
                     "\"total_tokens\":40}}");
        else
            snprintf(ev, sizeof ev,
                     "{\"id\":\"c1\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,"
                     "\"message\":{\"role\":\"assistant\",\"content\":\"w1 w2\"},"
                     "\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":7,"
                     "\"completion_tokens\":%d,\"total_tokens\":%d}}",
                     s->tokens, s->tokens + 7);
        fake_json_response(s, c, ev);
        return true;
    }
    if (c->step == 0) {
        fake_sse_head(c, false);
        if (s->dialect == FAKE_D_RESPONSES)
            fake_chunk(c->fd, "event: response.created\ndata: {\"type\":\"response.created\","
                              "\"response\":{\"id\":\"r1\",\"status\":\"in_progress\"}}\n\n");
        if (s->dialect == FAKE_D_MESSAGES)
            fake_chunk(c->fd, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":"
                              "{\"id\":\"m1\",\"type\":\"message\",\"role\":\"assistant\","
                              "\"content\":[],\"usage\":{\"input_tokens\":7,\"output_tokens\":1}}}"
                              "\n\nevent: ping\ndata: {\"type\":\"ping\"}\n\n");
        c->step = 1;
        c->next_ns = fake_now() + gap; /* the first token, one gap after the request */
        return true;
    }
    if (c->step <= s->tokens) {
        fake_dialect_token(s, c->step, ev, sizeof ev);
        fake_chunk(c->fd, ev);
        c->step++;
        c->next_ns = c->step <= s->tokens ? fake_now() + gap : fake_now();
        return true;
    }
    fake_dialect_end(s, ev, sizeof ev);
    fake_chunk(c->fd, ev);
    return fake_end_response(s, c);
}

/* A token event of s->event_bytes bytes of text (heap: they are large). */
static void fake_big_event(fake_server *s, fake_conn *c, int k, int events) {
    size_t n = (size_t)s->event_bytes;
    char *ev = malloc(n + 128);
    int h = snprintf(ev, 128, "data: {\"choices\":[{\"index\":0,\"text\":\"");
    memset(ev + h, 'x', n);
    snprintf(ev + h + n, 100, "\",\"finish_reason\":%s}]}\n\n",
             k == events ? "\"length\"" : "null");
    fake_chunk(c->fd, ev);
    free(ev);
}

/* The faults that answer before any token: a [DONE] alone, a redirect. */
static bool fake_step_early(fake_server *s, fake_conn *c) {
    if (s->mode == FAKE_REDIRECT) {
        const char *r = "HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n";
        raw_send_all(c->fd, r, strlen(r));
        return fake_served(s, c);
    }
    fake_sse_head(c, false);
    fake_chunk(c->fd, "data: [DONE]\n\n");
    return fake_end_response(s, c);
}

static bool fake_step(fake_server *s, int i) {
    fake_conn *c = &s->conns[i];
    if (s->dialect != FAKE_D_COMPLETIONS && s->mode == FAKE_OK) return fake_dialect_step(s, c);
    if (s->mode == FAKE_REDIRECT || s->mode == FAKE_DONE_ONLY) return fake_step_early(s, c);
    const int events = (s->tokens + s->per_event - 1) / s->per_event;
    char ev[512];
    if (c->step == 0) {
        if (s->mode == FAKE_HTTP500) {
            const char *body = "{\"error\":{\"message\":\"the fake server is broken\",\"type\":"
                               "\"server_error\",\"param\":null,\"code\":500}}";
            snprintf(ev, sizeof ev,
                     "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
            raw_send_all(c->fd, ev, strlen(ev));
            return fake_served(s, c);
        }
        fake_sse_head(c, true);
        fake_chunk(c->fd, ": keep-alive comment\r\n\r\n");
        c->step = 1;
        c->next_ns = fake_now() + (uint64_t)(s->mode == FAKE_OK ? s->delay_ms : 0) * 1000000ull;
        return true;
    }
    int k = c->step; /* 1-based event index */
    if ((s->mode == FAKE_STALL || s->mode == FAKE_RESET) && k == 3) {
        if (s->mode == FAKE_RESET) {
            fake_close(s, i, true);
            return false;
        }
        c->next_ns = UINT64_MAX; /* silence */
        return true;
    }
    if (s->mode == FAKE_MALFORMED && k == 2) {
        fake_chunk(c->fd, "data: {\"choices\":[{\"text\":\"x\"\n\n");
        c->next_ns = UINT64_MAX;
        return true;
    }
    if (s->mode == FAKE_ERROR_EVENT && k == 2) {
        fake_chunk(c->fd, "event: error\ndata: {\"error\":{\"message\":\"out of KV blocks\"}}\n\n");
        c->next_ns = UINT64_MAX;
        return true;
    }
    if (k <= events) {
        int n = s->per_event;
        if (k == events && s->tokens % s->per_event) n = s->tokens % s->per_event;
        char ids[256] = "";
        size_t o = 0;
        for (int t = 0; t < n && o + 8 < sizeof ids; t++)
            o += (size_t)snprintf(ids + o, sizeof ids - o, "%s%d", t ? "," : "", 100 + t);
        /* multi-token events carry token ids; single ones only text (CRLF line ends) */
        if (s->event_bytes > 0) {
            fake_big_event(s, c, k, events);
            c->step++;
            c->next_ns = fake_now() + (uint64_t)s->gap_ms * 1000000ull;
            return true;
        }
        if (s->per_event > 1)
            snprintf(ev, sizeof ev,
                     "data: {\"choices\":[{\"index\":0,\"text\":\"w%d\",\"finish_reason\":%s}],"
                     "\"tokens\":[%s]}\n\n",
                     k, k == events ? "\"length\"" : "null", ids);
        else if (s->held_every > 0 && k % s->held_every && k != events)
            snprintf(ev, sizeof ev,
                     "data: {\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":null}]}"
                     "\n\n");
        else
            snprintf(ev, sizeof ev,
                     "data: {\"choices\":[{\"index\":0,\"text\":\" w%d\",\"finish_reason\":%s}]}"
                     "\r\n\r\n",
                     k, k == events ? "\"length\"" : "null");
        fake_chunk(c->fd, ev);
        c->step++;
        c->next_ns = fake_now() + (uint64_t)s->gap_ms * 1000000ull;
        return true;
    }
    /* after the tokens */
    if (s->mode == FAKE_NO_DONE) return fake_end_response(s, c);
    if (!s->no_usage) {
        char details[96] = "";
        if (s->cached_tokens > 0)
            snprintf(details, sizeof details, ",\"prompt_tokens_details\":{\"cached_tokens\":%d}",
                     s->cached_tokens);
        snprintf(ev, sizeof ev,
                 "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%lld,\"completion_tokens\":%d,"
                 "\"total_tokens\":%d%s},\"timings\":{\"queue_ms\":1.5,\"prefill_ms\":2.0,"
                 "\"prompt_tokens\":7,\"decode_ms\":%d.0,\"completion_tokens\":%d,\"ttft_ms\":3.5,"
                 "\"preemptions\":0}}\n\n",
                 s->usage_prompt > 0 ? s->usage_prompt : 7, s->tokens, s->tokens + 7, details,
                 s->gap_ms * events, s->tokens);
        fake_chunk(c->fd, ev);
    }
    fake_chunk(c->fd, "data: [DONE]\n\n");
    return fake_end_response(s, c);
}

/* A request is complete when its headers and Content-Length body are in. */
static bool fake_request_complete(fake_conn *c) {
    c->req[c->req_len < sizeof c->req ? c->req_len : sizeof c->req - 1] = 0;
    char *end = strstr(c->req, "\r\n\r\n");
    if (!end) return false;
    size_t body = 0;
    const char *cl = strcasestr(c->req, "content-length:");
    if (cl && cl < end) body = (size_t)strtoul(cl + 15, NULL, 10);
    return c->req_len >= (size_t)(end + 4 - c->req) + body;
}

/* With capture: appends the complete request on c to the log. */
static void fake_log_request(fake_server *s, const fake_conn *c) {
    if (!s->capture) return;
    size_t n = c->req_len, sep = strlen(FAKE_LOG_SEP);
    if (s->log_len + n + sep + 1 > s->log_cap) {
        size_t cap = (s->log_len + n + sep + 1) * 2;
        char *b = realloc(s->log, cap);
        if (!b) return;
        s->log = b;
        s->log_cap = cap;
    }
    memcpy(s->log + s->log_len, c->req, n);
    memcpy(s->log + s->log_len + n, FAKE_LOG_SEP, sep + 1);
    s->log_len += n + sep;
}

/* serial_ms: hands the free server to the longest-waiting requests. A start
 * is backdated to when the server was free or the request arrived (poll
 * wake-ups are late by a millisecond or so; that must not lower capacity). */
static void fake_serve_queue(fake_server *s, uint64_t now) {
    const uint64_t svc = (uint64_t)s->serial_ms * 1000000ull;
    while (s->serial_free_ns <= now) {
        int best = -1;
        for (int i = 0; i < s->n_conns; i++)
            if (s->conns[i].queued &&
                (best < 0 || s->conns[i].arrived_ns < s->conns[best].arrived_ns))
                best = i;
        if (best < 0) return;
        fake_conn *c = &s->conns[best];
        uint64_t start = c->arrived_ns > s->serial_free_ns ? c->arrived_ns : s->serial_free_ns;
        s->serial_free_ns = start + svc;
        c->queued = false;
        c->next_ns = s->serial_free_ns;
    }
}

static void *fake_main(void *arg) {
    fake_server *s = arg;
    struct pollfd *pfd = calloc(FAKE_MAX_CONN + 2, sizeof *pfd);
    while (!atomic_load(&s->stop)) {
        uint64_t now = fake_now(), next = UINT64_MAX;
        for (int i = 0; i < s->n_conns; i++)
            if (s->conns[i].responding && s->conns[i].next_ns < next) next = s->conns[i].next_ns;
        for (int i = 0; s->serial_ms > 0 && i < s->n_conns; i++)
            if (s->conns[i].queued && s->serial_free_ns < next) next = s->serial_free_ns;
        int tmo = 100;
        if (next != UINT64_MAX) tmo = next <= now ? 0 : (int)((next - now) / 1000000ull) + 1;
        if (tmo > 100) tmo = 100;
        pfd[0] = (struct pollfd){.fd = s->lfd, .events = POLLIN};
        pfd[1] = (struct pollfd){.fd = s->wake[0], .events = POLLIN};
        for (int i = 0; i < s->n_conns; i++)
            pfd[2 + i] = (struct pollfd){.fd = s->conns[i].fd, .events = POLLIN};
        int nc = s->n_conns;
        if (poll(pfd, (nfds_t)(2 + nc), tmo) < 0 && errno != EINTR) break;
        if (pfd[0].revents & POLLIN) {
            for (;;) {
                int fd = accept(s->lfd, NULL, NULL);
                if (fd < 0) break;
                if (s->n_conns >= FAKE_MAX_CONN) {
                    close(fd);
                    continue;
                }
                int one = 1;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                s->conns[s->n_conns++] = (fake_conn){.fd = fd};
                if (s->n_conns > atomic_load(&s->max_conns))
                    atomic_store(&s->max_conns, s->n_conns);
            }
        }
        /* reads (walk backwards: closing swaps the last connection in) */
        for (int i = nc - 1; i >= 0; i--) {
            if (!(pfd[2 + i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            fake_conn *c = &s->conns[i];
            char buf[4096];
            ssize_t k = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
            if (k <= 0) {
                if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
                fake_close(s, i, false);
                continue;
            }
            if (c->responding) continue; /* no pipelining */
            size_t room = sizeof c->req - 1 - c->req_len;
            size_t take = (size_t)k < room ? (size_t)k : room;
            memcpy(c->req + c->req_len, buf, take);
            c->req_len += take;
            if (fake_request_complete(c)) {
                fake_log_request(s, c);
                c->responding = true;
                c->step = 0;
                c->next_ns = fake_now() +
                             (uint64_t)(s->mode == FAKE_SLOW_FIRST ? s->delay_ms : 0) * 1000000ull;
                if (s->serial_ms > 0) {
                    c->queued = true;
                    c->arrived_ns = fake_now();
                    c->next_ns = UINT64_MAX;
                }
            }
        }
        now = fake_now();
        if (s->serial_ms > 0) fake_serve_queue(s, now);
        for (int i = s->n_conns - 1; i >= 0; i--)
            if (s->conns[i].responding && s->conns[i].next_ns <= now) fake_step(s, i);
    }
    while (s->n_conns)
        fake_close(s, s->n_conns - 1, false);
    free(pfd);
    return NULL;
}

static int fake_start(fake_server *s) {
    if (s->tokens <= 0) s->tokens = 8;
    if (s->per_event <= 0) s->per_event = 1;
    s->conns = calloc(FAKE_MAX_CONN, sizeof *s->conns);
    s->lfd = raw_listen(SOCK_NONBLOCK | SOCK_CLOEXEC, 4096, &s->port);
    if (s->lfd < 0) return -1;
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d", s->port);
    if (pipe(s->wake)) return -1;
    atomic_store(&s->stop, false);
    return pthread_create(&s->th, NULL, fake_main, s);
}

static void fake_stop(fake_server *s) {
    atomic_store(&s->stop, true);
    if (write(s->wake[1], "x", 1) < 0) { /* the poll times out anyway */
    }
    pthread_join(s->th, NULL);
    close(s->lfd);
    close(s->wake[0]);
    close(s->wake[1]);
    free(s->conns);
    s->conns = NULL;
}

/* The captured log is the caller's after fake_stop: free it with this. */
static inline void fake_free_log(fake_server *s) {
    free(s->log);
    s->log = NULL;
    s->log_len = s->log_cap = 0;
}

#endif
