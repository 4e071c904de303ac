/* The load loop (bench.h): one thread, one libcurl multi handle, a fixed
 * pool of connection slots. Bytes are time-stamped in the write callback
 * before the SSE parser and JSON see them; the per-token path allocates
 * nothing once buffers are warm (jansson's parse of each event aside).
 * Multi-turn bodies are built when a turn is sent, never on receive.
 * Not here: metrics over requests (result.c), printing (report.c), which
 * conversation goes next (convo.c). */
#include "bench/bench.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench/convo.h"
#include "bench/sse.h"
#include "metrics/clock.h"

/* ---- error kinds --------------------------------------------------------------- */

static const char *const ERR_NAMES[BENCH_ERR_COUNT] = {
    [BENCH_OK] = "ok",
    [BENCH_ERR_CONNECT] = "connect",
    [BENCH_ERR_HTTP_4XX] = "http_4xx",
    [BENCH_ERR_HTTP_5XX] = "http_5xx",
    [BENCH_ERR_NO_RESPONSE] = "no_response",
    [BENCH_ERR_STALL] = "stall",
    [BENCH_ERR_TIMEOUT] = "timeout",
    [BENCH_ERR_RESET] = "reset",
    [BENCH_ERR_MALFORMED] = "malformed",
    [BENCH_ERR_STREAM_ERROR] = "stream_error",
    [BENCH_ERR_TRUNCATED] = "truncated",
    [BENCH_ERR_CANCELLED] = "cancelled",
    [BENCH_ERR_OTHER] = "other",
};

const char *bench_err_name(bench_errkind k) {
    return (unsigned)k < BENCH_ERR_COUNT ? ERR_NAMES[k] : "?";
}

bench_errkind bench_err_from_name(const char *s) {
    for (int k = 0; k < BENCH_ERR_COUNT; k++)
        if (!strcmp(s, ERR_NAMES[k])) return (bench_errkind)k;
    return BENCH_ERR_COUNT;
}

void bench_record_free(bench_record *r) {
    timeline_free(&r->tl);
    free(r->err_msg);
    r->err_msg = NULL;
}

/* ---- connection slots ----------------------------------------------------------- */

#define ERR_BODY_MAX  4096u
#define JSON_BODY_MAX (4u << 20)
#define SSE_EVENT_MAX (1u << 20)

typedef struct run_state run_state;

typedef struct conn {
    run_state *run; /* borrowed */
    CURL *easy;
    sse_parser sse;
    size_t rec; /* index into run->recs of the request in flight */
    bool busy;
    bool checked;      /* status and content type looked at */
    bool is_sse;       /* 200 with text/event-stream */
    bool done;         /* [DONE] seen */
    bool saw_ids;      /* token ids came in the stream */
    bench_errkind err; /* set by a callback that aborted the transfer */
    uint64_t now;      /* arrival time of the chunk being parsed */
    uint64_t t_first_byte, t_last_byte;
    char *body; /* non-SSE body (error text, or a non-streamed JSON response) */
    size_t body_len, body_cap;
    char *text; /* streamed text, when keep_text */
    size_t text_len, text_cap;
    char *reply; /* multi-turn: the reply's content (no reasoning), for the next turn */
    size_t reply_len, reply_cap;
    char *send_body;                 /* multi-turn: this turn's body, built at send time */
    struct curl_slist *session_hdrs; /* multi-turn: the headers plus X-Session-Id */
    char msg[256];
    char curl_err[CURL_ERROR_SIZE];
} conn;

struct run_state {
    const bench_config *cfg;
    const workload *wl;
    CURLM *multi;
    struct curl_slist *hdrs;
    char *url;
    conn *conns; /* (n_conns,) */
    size_t n_conns;
    size_t *free_list, n_free;
    bench_record *recs;
    size_t n_recs, cap_recs;
    uint64_t planned; /* requests the run will send at most; 0: bounded by time only */
    bool multi_turn;
    convo_set convos; /* multi-turn only */
    uint64_t bytes, events;
    uint64_t completed, failed, out_tokens;
};

static int grow_buf(char **b, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 256;
    while (c < need)
        c *= 2;
    char *nb = realloc(*b, c);
    if (!nb) return -1;
    *b = nb;
    *cap = c;
    return 0;
}

static void append(char **b, size_t *len, size_t *cap, const char *p, size_t n) {
    if (grow_buf(b, cap, *len + n + 1) == 0) {
        memcpy(*b + *len, p, n);
        *len += n;
    }
}

/* A chunk's text: all of it for re-tokenizing the output count; the
 * reply's content (not its reasoning) for a conversation's next turn. */
static void keep_text(conn *c, const oai_chunk *ch) {
    if (!ch->text) return;
    if (c->run->cfg->keep_text)
        append(&c->text, &c->text_len, &c->text_cap, ch->text, ch->text_len);
    if (c->run->multi_turn && !ch->reasoning)
        append(&c->reply, &c->reply_len, &c->reply_cap, ch->text, ch->text_len);
}

/* What the server said about the request as a whole: usage, the share of
 * the prompt its prefix cache served, its timings. */
static void take_usage(bench_record *rec, const oai_chunk *ch) {
    if (ch->has_usage) {
        rec->has_usage = true;
        rec->usage_prompt = ch->prompt_tokens;
        rec->usage_completion = ch->completion_tokens;
    }
    if (ch->has_cached && (ch->cached_from_usage || !rec->cached_from_usage)) {
        rec->has_cached = true;
        rec->cached_from_usage = ch->cached_from_usage;
        rec->cached_tokens = ch->cached_tokens;
    }
    if (ch->has_timings) {
        rec->has_timings = true;
        rec->timings = ch->timings;
    }
}

/* Records why the request failed (the first reason wins): prefix + detail,
 * truncated to fit. */
static void set_err(conn *c, bench_errkind k, const char *prefix, const char *detail) {
    if (c->err != BENCH_OK) return;
    c->err = k;
    size_t a = strlen(prefix), b = strlen(detail), cap = sizeof c->msg - 1;
    if (a > cap) a = cap;
    if (b > cap - a) b = cap - a;
    memcpy(c->msg, prefix, a);
    memcpy(c->msg + a, detail, b);
    c->msg[a + b] = 0;
}

/* ---- receive path ----------------------------------------------------------------- */

static int on_event(void *ud, const sse_event *ev) {
    conn *c = ud;
    run_state *r = c->run;
    bench_record *rec = &r->recs[c->rec];
    oai_chunk ch;
    tps_err e;
    r->events++;
    if (bench_oai_parse(&ch, ev->data, ev->data_len, ev->event, &e) != 0) {
        set_err(c, BENCH_ERR_MALFORMED, "", e.msg);
        return 1;
    }
    if (ch.done) {
        c->done = true;
        return 0;
    }
    int stop = 0;
    if (ch.error) {
        set_err(c, BENCH_ERR_STREAM_ERROR, "server error event: ", ch.error_msg);
        stop = 1;
    }
    if (ch.tokens && !stop) {
        if (timeline_add(&rec->tl, c->now, ch.tokens, &e) != 0) {
            set_err(c, BENCH_ERR_OTHER, "", e.msg);
            stop = 1;
        }
        rec->stream_tokens += ch.tokens;
        r->out_tokens += ch.tokens;
        c->saw_ids |= ch.from_ids;
    }
    keep_text(c, &ch);
    take_usage(rec, &ch);
    bench_oai_release(&ch);
    return stop;
}

static size_t on_data(char *p, size_t sz, size_t nm, void *ud) {
    const uint64_t now = tps_now_ns(); /* first thing: the arrival time */
    conn *c = ud;
    const size_t n = sz * nm;
    c->run->bytes += n;
    if (!c->t_first_byte) c->t_first_byte = now;
    c->t_last_byte = now;
    if (!c->checked) {
        long status = 0;
        const char *ctype = NULL;
        curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_getinfo(c->easy, CURLINFO_CONTENT_TYPE, &ctype);
        c->run->recs[c->rec].http_status = (int)status;
        c->is_sse = status == 200 && (!ctype || strstr(ctype, "event-stream"));
        c->checked = true;
    }
    if (!c->is_sse) {
        size_t max = c->run->recs[c->rec].http_status == 200 ? JSON_BODY_MAX : ERR_BODY_MAX;
        size_t k = c->body_len + n > max ? max - c->body_len : n;
        if (k && grow_buf(&c->body, &c->body_cap, c->body_len + k + 1) == 0) {
            memcpy(c->body + c->body_len, p, k);
            c->body_len += k;
            c->body[c->body_len] = 0;
        }
        if (k < n && c->run->recs[c->rec].http_status == 200) {
            set_err(c, BENCH_ERR_MALFORMED, "a non-streamed response over 4 MiB", "");
            return 0;
        }
        return n;
    }
    c->now = now;
    tps_err e;
    int rc = sse_parser_feed(&c->sse, p, n, on_event, c, &e);
    if (rc < 0) set_err(c, BENCH_ERR_MALFORMED, "", e.msg);
    return rc ? 0 : n; /* 0 aborts the transfer (CURLE_WRITE_ERROR) */
}

/* ---- sending ------------------------------------------------------------------------ */

static int new_record(run_state *r, size_t *idx, uint32_t item, tps_err *e) {
    if (r->n_recs == r->cap_recs) {
        size_t cap = r->cap_recs ? r->cap_recs * 2 : 256;
        bench_record *nr = realloc(r->recs, cap * sizeof *nr);
        if (!nr) return tps_fail(e, TPS_ENOMEM, "cannot allocate %zu request records", cap);
        r->recs = nr;
        r->cap_recs = cap;
    }
    bench_record *rec = &r->recs[r->n_recs];
    memset(rec, 0, sizeof *rec);
    const workload_item *it = &r->wl->items[item];
    size_t cap_ev = it->max_tokens + 2u < 65536u ? it->max_tokens + 2u : 65536u;
    int rc = timeline_init(&rec->tl, cap_ev, e);
    if (rc) return rc;
    rec->item = item;
    rec->max_tokens = it->max_tokens;
    rec->input_target = it->input_target;
    rec->input_client = it->input_tokens;
    *idx = r->n_recs++;
    return TPS_OK;
}

/* Puts the request recs[idx] on a free connection with its body (borrowed
 * until the transfer ends) and headers. sched_ns: the scheduled time (open
 * loop), or UINT64_MAX for "now" (closed). */
static int start(run_state *r, conn *c, size_t idx, const char *body, size_t len,
                 struct curl_slist *hdrs, uint64_t sched_ns, tps_err *e) {
    c->rec = idx;
    c->busy = true;
    c->checked = c->is_sse = c->done = c->saw_ids = false;
    c->err = BENCH_OK;
    c->t_first_byte = c->t_last_byte = 0;
    c->body_len = c->text_len = c->reply_len = 0;
    c->msg[0] = c->curl_err[0] = 0;
    sse_parser_reset(&c->sse);
    curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c->easy, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    uint64_t sent = tps_now_ns();
    timeline_start(&r->recs[idx].tl, sched_ns < sent ? sched_ns : sent, sent);
    CURLMcode mc = curl_multi_add_handle(r->multi, c->easy);
    if (mc != CURLM_OK)
        return tps_fail(e, TPS_EIO, "curl_multi_add_handle: %s", curl_multi_strerror(mc));
    return TPS_OK;
}

/* The next single-turn request: the workload's items in order, cycling. */
static int launch(run_state *r, uint64_t sched_ns, tps_err *e) {
    uint32_t item = (uint32_t)(r->n_recs % r->wl->n);
    size_t idx = 0;
    int rc = new_record(r, &idx, item, e);
    if (rc) return rc;
    conn *c = &r->conns[r->free_list[--r->n_free]];
    const workload_item *it = &r->wl->items[item];
    return start(r, c, idx, it->body, it->body_len, r->hdrs, sched_ns, e);
}

/* The base headers plus this conversation's X-Session-Id, on conn c. */
static int session_headers(run_state *r, conn *c, size_t conv, tps_err *e) {
    curl_slist_free_all(c->session_hdrs);
    c->session_hdrs = NULL;
    char h[96];
    convo_session_header(&r->convos, conv, h, sizeof h);
    for (const struct curl_slist *p = r->hdrs; p; p = p->next) {
        struct curl_slist *n = curl_slist_append(c->session_hdrs, p->data);
        if (!n) return tps_fail(e, TPS_ENOMEM, "out of memory");
        c->session_hdrs = n;
    }
    struct curl_slist *n = curl_slist_append(c->session_hdrs, h);
    if (!n) return tps_fail(e, TPS_ENOMEM, "out of memory");
    c->session_hdrs = n;
    return TPS_OK;
}

/* Conversation conv's next turn: its body, with the replies so far, is
 * built now (closed loop: it is sent at once). */
static int launch_turn(run_state *r, size_t conv, tps_err *e) {
    const convo *cv = &r->convos.c[conv];
    const uint32_t turn = cv->next;
    const uint32_t item = (uint32_t)(conv * r->wl->turns + turn);
    size_t idx = 0;
    int rc = new_record(r, &idx, item, e);
    if (rc) return rc;
    bench_record *rec = &r->recs[idx];
    rec->conversation = (uint32_t)conv;
    rec->turn = turn + 1;
    /* what the client can say of the prompt: the history so far and this message */
    rec->input_client = rec->input_client && (cv->history_tokens || turn == 0)
                            ? (uint32_t)(cv->history_tokens + rec->input_client)
                            : 0;
    conn *c = &r->conns[r->free_list[--r->n_free]];
    free(c->send_body);
    c->send_body = NULL;
    size_t len = 0;
    rc = workload_turn_body(r->wl, conv, turn, (const char *const *)cv->replies, cv->reply_lens,
                            &c->send_body, &len, e);
    if (!rc) rc = session_headers(r, c, conv, e);
    if (rc) {
        r->free_list[r->n_free++] = (size_t)(c - r->conns);
        return rc;
    }
    convo_sent(&r->convos, conv);
    return start(r, c, idx, c->send_body, len, c->session_hdrs, UINT64_MAX, e);
}

/* ---- finishing ------------------------------------------------------------------------ */

static bench_errkind map_curl(CURLcode cc) {
    switch (cc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_SSL_CONNECT_ERROR:
        return BENCH_ERR_CONNECT;
    case CURLE_OPERATION_TIMEDOUT:
        return BENCH_ERR_TIMEOUT;
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
        return BENCH_ERR_RESET;
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_BAD_CONTENT_ENCODING:
        return BENCH_ERR_MALFORMED;
    default:
        return BENCH_ERR_OTHER;
    }
}

/* The error message of a non-200 body: error.message if JSON, else the text. */
static void http_error_msg(conn *c, int status) {
    json_t *j = c->body_len ? json_loadb(c->body, c->body_len, 0, NULL) : NULL;
    json_t *er = json_object_get(j, "error");
    const char *m = json_is_object(er)   ? json_string_value(json_object_get(er, "message"))
                    : json_is_string(er) ? json_string_value(er)
                                         : NULL;
    snprintf(c->msg, sizeof c->msg, "HTTP %d: %.200s", status, m ? m : c->body_len ? c->body : "");
    json_decref(j);
}

/* A non-streamed 200 body: one JSON response. */
static void finish_json_body(conn *c, bench_record *rec) {
    oai_chunk ch;
    tps_err e;
    if (bench_oai_parse(&ch, c->body ? c->body : "", c->body_len, "", &e) != 0) {
        set_err(c, BENCH_ERR_MALFORMED, "", e.msg);
        return;
    }
    if (ch.error) set_err(c, BENCH_ERR_STREAM_ERROR, "server error: ", ch.error_msg);
    take_usage(rec, &ch);
    keep_text(c, &ch);
    c->done = true;
    bench_oai_release(&ch);
}

/* Settles the request on conn c: its error kind, end time and token count. */
static void finish(run_state *r, conn *c, CURLcode cc, bench_errkind forced, uint64_t now) {
    bench_record *rec = &r->recs[c->rec];
    curl_multi_remove_handle(r->multi, c->easy);
    if (!c->checked) {
        long status = 0;
        curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
        rec->http_status = (int)status;
    }
    bench_errkind k = forced != BENCH_OK ? forced : c->err;
    if (forced != BENCH_OK && c->err == BENCH_OK) c->err = forced;
    if (k == BENCH_OK && cc != CURLE_OK) {
        k = map_curl(cc);
        if (rec->http_status && rec->http_status != 200 && k == BENCH_ERR_RESET) k = BENCH_OK;
        if (k != BENCH_OK)
            snprintf(c->msg, sizeof c->msg, "%.100s%s%.140s", curl_easy_strerror(cc),
                     c->curl_err[0] ? ": " : "", c->curl_err);
    }
    if (k == BENCH_OK && rec->http_status != 200) {
        k = rec->http_status >= 400 && rec->http_status < 500 ? BENCH_ERR_HTTP_4XX
                                                              : BENCH_ERR_HTTP_5XX;
        http_error_msg(c, rec->http_status);
    }
    if (k == BENCH_OK && !c->is_sse) {
        finish_json_body(c, rec);
        k = c->err;
    }
    if (k == BENCH_OK && !c->done) {
        k = BENCH_ERR_TRUNCATED;
        snprintf(c->msg, sizeof c->msg, "the stream ended without [DONE]%s",
                 sse_parser_pending(&c->sse) ? " (in the middle of an event)" : "");
    }
    rec->err = k;
    if (k != BENCH_OK) rec->err_msg = strdup(c->msg[0] ? c->msg : bench_err_name(k));
    uint64_t end = c->t_last_byte ? c->t_last_byte : now;
    timeline_finish(&rec->tl, end, k == BENCH_OK);

    /* the count: usage > ids in the stream > re-tokenized text > events */
    tps_err e;
    if (rec->has_usage && k == BENCH_OK) {
        timeline_set_output_tokens(&rec->tl, rec->usage_completion, TL_COUNT_USAGE, &e);
    } else if (c->saw_ids) {
        timeline_set_count_source(&rec->tl, TL_COUNT_STREAM_IDS);
    } else {
        int64_t n = c->text_len ? workload_count_tokens(r->wl, c->text, c->text_len) : -1;
        if (n >= 0 && k == BENCH_OK)
            timeline_set_output_tokens(&rec->tl, (uint64_t)n, TL_COUNT_RETOKENIZED, &e);
        else
            timeline_set_count_source(&rec->tl, TL_COUNT_EVENTS);
    }
    uint64_t prompt = rec->has_usage ? rec->usage_prompt
                      : rec->has_timings && rec->timings.prompt_tokens > 0
                          ? (uint64_t)rec->timings.prompt_tokens
                          : rec->input_client;
    timeline_set_prompt_tokens(&rec->tl, prompt);
    if (r->multi_turn) {
        const workload_item *it = &r->wl->items[rec->item];
        uint64_t turn_tokens = it->input_tokens ? it->input_tokens + rec->tl.output_tokens : 0;
        convo_settled(&r->convos, rec->conversation, k == BENCH_OK, c->reply, c->reply_len,
                      turn_tokens, now);
    }
    if (k == BENCH_OK)
        r->completed++;
    else if (k != BENCH_ERR_CANCELLED)
        r->failed++;
    if (r->cfg->verbose && k != BENCH_OK)
        fprintf(stderr, "tps bench: request %zu: %s: %s\n", c->rec, bench_err_name(k),
                rec->err_msg);
    c->busy = false;
    r->free_list[r->n_free++] = (size_t)(c - r->conns);
}

/* Requests over --timeout or silent for --idle-timeout. */
static void check_timeouts(run_state *r, uint64_t now) {
    const uint64_t tmo = (uint64_t)(r->cfg->timeout_s * 1e9);
    const uint64_t idle = (uint64_t)(r->cfg->idle_timeout_s * 1e9);
    for (size_t i = 0; i < r->n_conns; i++) {
        conn *c = &r->conns[i];
        if (!c->busy) continue;
        uint64_t sent = r->recs[c->rec].tl.t_sent;
        uint64_t last = c->t_last_byte ? c->t_last_byte : sent;
        if (tmo && now - sent > tmo) {
            snprintf(c->msg, sizeof c->msg, "no complete response within --timeout %.3g s",
                     r->cfg->timeout_s);
            finish(r, c, CURLE_OK, BENCH_ERR_TIMEOUT, now);
        } else if (idle && now - last > idle) {
            bool none = !c->t_first_byte;
            snprintf(c->msg, sizeof c->msg, "%s for --idle-timeout %.3g s",
                     none ? "no response byte" : "the stream went silent", r->cfg->idle_timeout_s);
            finish(r, c, CURLE_OK, none ? BENCH_ERR_NO_RESPONSE : BENCH_ERR_STALL, now);
        }
    }
}

/* ---- progress --------------------------------------------------------------------------- */

static void draw_progress(const run_state *r, uint64_t now, uint64_t t0, bool last) {
    const bench_config *cfg = r->cfg;
    double el = tps_ns_to_s(now - t0), frac = 0;
    if (r->planned) frac = (double)(r->completed + r->failed) / (double)r->planned;
    if (cfg->duration_s > 0) {
        double f2 = el / cfg->duration_s;
        frac = r->planned ? (frac > f2 ? frac : f2) : f2;
    }
    if (frac > 1) frac = 1;
    char bar[31];
    int fill = (int)(frac * 30);
    for (int i = 0; i < 30; i++)
        bar[i] = i < fill ? '=' : ' ';
    bar[30] = 0;
    fprintf(stderr, "\r[%s] %5.1f s  %llu ok  %llu failed  %zu in flight  %llu output tok ", bar,
            el, (unsigned long long)r->completed, (unsigned long long)r->failed,
            r->n_conns - r->n_free, (unsigned long long)r->out_tokens);
    if (last) fprintf(stderr, "\r%*s\r", 100, "");
    fflush(stderr);
}

/* ---- the run ------------------------------------------------------------------------------ */

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

    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    h = curl_slist_append(h, "Accept: text/event-stream");
    h = curl_slist_append(h, "Expect:"); /* no 100-continue round trip */
    if (cfg->api_key) {
        char a[1024];
        snprintf(a, sizeof a, "Authorization: Bearer %s", cfg->api_key);
        h = curl_slist_append(h, a);
    }
    for (size_t i = 0; i < cfg->n_headers; i++)
        h = curl_slist_append(h, cfg->headers[i]);
    r->hdrs = h;
    if (!h) return tps_fail(e, TPS_ENOMEM, "out of memory");

    r->multi = curl_multi_init();
    if (!r->multi) return tps_fail(e, TPS_EIO, "curl_multi_init failed");
    curl_multi_setopt(r->multi, CURLMOPT_MAXCONNECTS, (long)r->n_conns);
    curl_multi_setopt(r->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_NOTHING);

    r->conns = calloc(r->n_conns, sizeof *r->conns);
    r->free_list = malloc(r->n_conns * sizeof *r->free_list);
    if (!r->conns || !r->free_list) return tps_fail(e, TPS_ENOMEM, "cannot allocate connections");
    for (size_t i = 0; i < r->n_conns; i++) {
        conn *c = &r->conns[i];
        c->run = r;
        int rc = sse_parser_init(&c->sse, SSE_EVENT_MAX, e);
        if (rc) return rc;
        c->easy = curl_easy_init();
        if (!c->easy) return tps_fail(e, TPS_EIO, "curl_easy_init failed");
        CURL *x = c->easy;
        curl_easy_setopt(x, CURLOPT_URL, r->url);
        curl_easy_setopt(x, CURLOPT_HTTPHEADER, r->hdrs);
        curl_easy_setopt(x, CURLOPT_POST, 1L);
        curl_easy_setopt(x, CURLOPT_WRITEFUNCTION, on_data);
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
        sse_parser_free(&c->sse);
        free(c->body);
        free(c->text);
        free(c->reply);
        free(c->send_body);
        curl_slist_free_all(c->session_hdrs);
    }
    free(r->conns);
    free(r->free_list);
    if (r->multi) curl_multi_cleanup(r->multi);
    curl_slist_free_all(r->hdrs);
    free(r->url);
    convo_set_free(&r->convos);
}

/* When and what to send next. */
typedef struct sender {
    bool sending; /* false once nothing more will be sent */
    bool open_loop;
    uint64_t t0, dur; /* the run's start; --duration in ns (0: none) */
    uint64_t next_sched;
    load_rng rng;
} sender;

/* When item i of a timed workload (a trace) is due. */
static uint64_t trace_time_ns(const sender *s, const workload *wl, size_t i) {
    double at = wl->items[i].send_at_s;
    return s->t0 + (at > 0 ? (uint64_t)(at * 1e9) : 0);
}

/* Sends what is due at now: a closed loop fills every free slot, an open
 * loop follows its schedule, a multi-turn run sends the next turn of each
 * conversation that may go. */
static int send_due(run_state *r, sender *s, uint64_t now, tps_err *e) {
    const bench_config *cfg = r->cfg;
    if (s->sending && s->dur && now - s->t0 >= s->dur) s->sending = false;
    while (s->sending && r->n_free > 0) {
        if (r->planned && r->n_recs >= r->planned) break;
        int rc;
        size_t conv;
        if (r->multi_turn) {
            if (!convo_next(&r->convos, now, &conv)) break;
            rc = launch_turn(r, conv, e);
        } else if (s->open_loop) {
            if (s->next_sched > now) break;
            rc = launch(r, s->next_sched, e);
            if (r->wl->timed) /* a trace: each item once, at its own time */
                s->next_sched =
                    r->n_recs < r->wl->n ? trace_time_ns(s, r->wl, r->n_recs) : UINT64_MAX;
            else
                s->next_sched +=
                    load_next_gap_ns(cfg->arrival, cfg->rate, cfg->burstiness, &s->rng);
            if (s->dur && s->next_sched - s->t0 >= s->dur) s->sending = false;
        } else {
            rc = launch(r, UINT64_MAX, e);
        }
        if (rc) return rc;
    }
    if (r->planned && r->n_recs >= r->planned) s->sending = false;
    if (r->multi_turn && convo_all_ended(&r->convos)) s->sending = false;
    return TPS_OK;
}

/* How long the loop may wait for sockets: until the next scheduled send or
 * the next conversation's end of thinking, at most 20 ms; 0 when a closed
 * loop has a free slot to fill. */
static int wait_ms(const run_state *r, const sender *s, uint64_t now) {
    if (!s->sending || r->n_free == 0) return 20;
    uint64_t next = r->multi_turn  ? convo_next_ready_ns(&r->convos)
                    : s->open_loop ? s->next_sched
                                   : now;
    if (next <= now) return 0;
    if (next - now >= 20 * TPS_NS_PER_MS) return 20;
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
        finish(r, c, m->data.result, BENCH_OK, now);
    }
}

static int check_run(const bench_config *cfg, const workload *wl, tps_err *e) {
    if (!wl || wl->n == 0) return tps_fail(e, TPS_EINVAL, "the workload has no requests");
    if (wl->timed && cfg->rate > 0)
        return tps_fail(e, TPS_EINVAL,
                        "--rate does not apply to a trace: its timestamps say when each request "
                        "is sent (--trace-speed scales them)");
    if (!cfg->requests && !(cfg->duration_s > 0) && !wl->turns && !wl->timed)
        return tps_fail(e, TPS_EINVAL, "give --requests N or --duration S: a run must be bounded");
    if (cfg->concurrency == 0) return tps_fail(e, TPS_EINVAL, "--concurrency must be >= 1");
    if (wl->turns && cfg->rate > 0)
        return tps_fail(e, TPS_EINVAL,
                        "--rate does not apply to conversations (--turns): each sends its next "
                        "turn when its reply is in and its think time is over");
    return TPS_OK;
}

int bench_run(bench_run_out *out, const bench_config *cfg, const workload *wl, tps_err *e) {
    memset(out, 0, sizeof *out);
    int rc = check_run(cfg, wl, e);
    if (rc) return rc;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return tps_fail(e, TPS_EIO, "curl_global_init failed");

    run_state r = {.cfg = cfg, .wl = wl, .n_conns = cfg->concurrency, .planned = cfg->requests};
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    const int64_t unix_ns = (int64_t)wall.tv_sec * 1000000000 + wall.tv_nsec;
    rc = setup(&r, e);
    if (!rc && wl->turns) rc = setup_turns(&r, unix_ns, e);
    if (rc) goto done;

    /* a trace sends each item once, at its time: it bounds the run itself */
    if (wl->timed && (!r.planned || r.planned > wl->n)) r.planned = wl->n;
    sender s = {.sending = true, .open_loop = cfg->rate > 0 || wl->timed};
    load_rng_seed(&s.rng, cfg->seed);
    const double cpu0 = thread_cpu_s();
    /* the wall-clock label read beside the origin, not before setup (which can take
     * milliseconds): a capture or a server log is matched through it */
    clock_gettime(CLOCK_REALTIME, &wall);
    const uint64_t t0 = tps_now_ns();
    out->t_start_ns = t0;
    out->t_start_unix_ns = (int64_t)wall.tv_sec * 1000000000 + wall.tv_nsec;
    s.t0 = s.next_sched = t0;
    if (wl->timed) s.next_sched = trace_time_ns(&s, wl, 0);
    s.dur = cfg->duration_s > 0 ? (uint64_t)(cfg->duration_s * 1e9) : 0;
    const uint64_t tmo = (uint64_t)((cfg->timeout_s > 0 ? cfg->timeout_s : 600) * 1e9);
    /* requests alone bound the run by requests x timeout; duration by duration + timeout */
    uint64_t last_check = t0, last_draw = t0;

    for (;;) {
        uint64_t now = tps_now_ns();
        if ((rc = send_due(&r, &s, now, e))) goto done;
        int running = 0;
        curl_multi_perform(r.multi, &running);
        now = tps_now_ns();
        reap(&r, now);
        if (now - last_check >= 10 * TPS_NS_PER_MS) {
            check_timeouts(&r, now);
            last_check = now;
        }
        const size_t inflight = r.n_conns - r.n_free;
        if (cfg->progress && now - last_draw >= 200 * TPS_NS_PER_MS) {
            draw_progress(&r, now, t0, false);
            last_draw = now;
        }
        if (!s.sending && inflight == 0) break;
        if (s.dur && now - t0 >= s.dur + tmo) { /* safety net: the run ends on time */
            for (size_t i = 0; i < r.n_conns; i++)
                if (r.conns[i].busy) {
                    snprintf(r.conns[i].msg, sizeof r.conns[i].msg,
                             "still running at duration + timeout");
                    finish(&r, &r.conns[i], CURLE_OK, BENCH_ERR_CANCELLED, now);
                }
            out->hit_deadline = true;
            break;
        }
        int ms = wait_ms(&r, &s, now);
        if (ms > 0) curl_multi_poll(r.multi, NULL, 0, ms, NULL);
    }
    if (cfg->progress) draw_progress(&r, tps_now_ns(), t0, true);
    out->t_stop_ns = tps_now_ns();
    out->client_cpu_s = thread_cpu_s() - cpu0;
    out->bytes_received = r.bytes;
    out->events_received = r.events;
    rc = TPS_OK;
done:
    teardown(&r);
    out->recs = r.recs;
    out->n = r.n_recs;
    curl_global_cleanup();
    if (rc) bench_run_free(out);
    return rc;
}

void bench_run_free(bench_run_out *out) {
    for (size_t i = 0; i < out->n; i++)
        bench_record_free(&out->recs[i]);
    free(out->recs);
    out->recs = NULL;
    out->n = 0;
}
