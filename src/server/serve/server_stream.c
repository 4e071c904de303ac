/* From the engine back to the clients: each engine event becomes an SSE
 * chunk (or text gathered for a non-streamed body), DONE finishes the
 * response; a client that goes away cancels its request. Also the request
 * histograms' records (here, in the HTTP thread, from event times and
 * engine_timings).
 *
 * Not here: admission (server_prepare.c), the /metrics page
 * (server_metrics.c), formats (sse_write.c, prom_write.c). */
#include "server/serve/serve.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>

#include <jansson.h>

#include "base/grow.h"
#include "base/clock.h"

/* ---------------------------------------------------------------------------
 * Request contexts
 * ------------------------------------------------------------------------- */

req_ctx *req_ctx_new(server *s, struct evhttp_request *req, oai_kind kind, uint32_t n_choices) {
    if (n_choices == 0) n_choices = 1;
    /* One allocation for the request and its choices' state: nothing more
     * is allocated per choice until its text grows. */
    req_ctx *c = calloc(1, sizeof *c + (size_t)n_choices * sizeof c->choice[0]);
    if (!c) return NULL;
    c->s = s;
    c->req = req;
    c->conn = evhttp_request_get_connection(req);
    c->t_start_ns = tps_now_ns();
    c->n_choices = n_choices;
    snprintf(c->id, sizeof c->id, "%s-%llx%06llx", kind == OAI_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)(c->t_start_ns / TPS_NS_PER_MS),
             (unsigned long long)(++s->next_id & 0xffffff));
    c->meta =
        (sse_meta){.kind = kind, .id = c->id, .created = (int64_t)time(NULL), .model = s->model_id};
    sbuf_init(&c->out);
    for (uint32_t i = 0; i < n_choices; i++) {
        sbuf_init(&c->choice[i].text);
        sbuf_init(&c->choice[i].reasoning);
    }
    return c;
}

static void unlink_ctx(req_ctx *c) {
    server *s = c->s;
    if (!c->prev && s->inflight != c) return; /* not linked */
    if (c->prev)
        c->prev->next = c->next;
    else
        s->inflight = c->next;
    if (c->next) c->next->prev = c->prev;
    c->prev = c->next = NULL;
    s->n_inflight--;
}

void req_ctx_free(req_ctx *c) {
    if (!c) return;
    unlink_ctx(c);
    constrain_release(c->s->grammars, c->prog, c->prog_reserve);
    sbuf_free(&c->out);
    api_stream_free(c->api);
    free(c->api);
    if (c->history) json_decref(c->history);
    for (uint32_t i = 0; i < c->n_choices; i++) {
        sbuf_free(&c->choice[i].text);
        sbuf_free(&c->choice[i].reasoning);
        free(c->choice[i].lp);
        if (c->choice[i].tstream) { /* on the event loop, as /metrics reads them */
            c->s->tool_calls += tool_stream_whole(c->choice[i].tstream);
            c->s->tool_calls_invalid += tool_stream_invalid(c->choice[i].tstream);
        }
        tool_stream_free(c->choice[i].tstream);
    }
    tools_set_free(c->tset);
    free(c);
}

/* The connection closed under a request (a write failed or evhttp saw EOF). */
static void on_conn_close(struct evhttp_connection *conn, void *arg) {
    req_ctx *c = arg;
    c->client_gone = true;
    if (c->s->eng) engine_cancel(c->s->eng, c->engine_id);
    /* A request evhttp detached from the dying connection is ours to free;
     * one still attached goes with the connection. */
    if (c->req && !evhttp_request_get_connection(c->req)) evhttp_request_free(c->req);
    c->req = NULL;
    c->conn = NULL;
}

static void write_chunk(req_ctx *c);

void req_ctx_start(req_ctx *c) {
    server *s = c->s;
    c->next = s->inflight;
    if (s->inflight) s->inflight->prev = c;
    s->inflight = c;
    s->n_inflight++;
    if (c->conn) evhttp_connection_set_closecb(c->conn, on_conn_close, c);
    c->slot = server_conn_of(s, c->req);
    if (c->stream) {
        struct evkeyvalq *h = evhttp_request_get_output_headers(c->req);
        evhttp_add_header(h, "Content-Type", "text/event-stream");
        evhttp_add_header(h, "Cache-Control", "no-cache");
        evhttp_add_header(h, "X-Accel-Buffering", "no");
        evhttp_send_reply_start(c->req, 200, NULL);
        server_conn_guard(c->slot);
        if (c->api) { /* response.created / message_start */
            sbuf_reset(&c->out);
            api_stream_start(c->api, &c->out);
            write_chunk(c);
        }
    }
}

/* The socket of c read EOF while c is answered: the client shut its
 * sending side (a half-close: it still reads) or it left. Only a write
 * tells them apart, so one goes out: an SSE comment on a stream, an
 * interim "100 Continue" before a whole answer (HTTP/1.1 lets a server
 * send 1xx to any request, and clients skip them). If the client left,
 * its kernel answers with a reset, which the next look finds. True while
 * c should go on; false when it is gone (or cannot be asked: HTTP/1.0).
 * (After an EOF, recv reports no reset: the socket's TCP state does.) */
static bool probe_half_close(req_ctx *c, evutil_socket_t fd) {
    conn_slot *slot = c->slot;
    if (!slot || !c->req) return false;
    if (c->stream && !slot->probed) {
        slot->probed = true;
        evbuffer_add(c->s->wbuf, ":\n\n", 3);
        evhttp_send_reply_chunk(c->req, c->s->wbuf);
        evbuffer_drain(c->s->wbuf, evbuffer_get_length(c->s->wbuf));
        server_conn_guard(slot);
        return true;
    }
    return server_conn_probe_eof(slot, fd);
}

/* Polls the sockets of in-flight requests for a client that left: evhttp
 * reads nothing while a request waits for its answer (nor while it is
 * written: server_conn_guard), so a client that leaves before its first
 * byte (queued, prefilling, or non-streamed) is noticed here: a reset at
 * once, an EOF once a probe draws a reset (probe_half_close). */
void server_check_gone(server *s) {
    for (req_ctx *c = s->inflight; c; c = c->next) {
        if (c->client_gone || !c->conn) continue;
        evutil_socket_t fd;
        int here = server_conn_peek(c->conn, &fd);
        if (here > 0 || (here == 0 && probe_half_close(c, fd))) continue;
        struct evhttp_connection *conn = c->conn;
        evhttp_connection_set_closecb(conn, NULL, NULL);
        c->client_gone = true;
        if (s->eng) engine_cancel(s->eng, c->engine_id);
        c->req = NULL; /* attached: freed with the connection */
        c->conn = NULL;
        evhttp_connection_free(conn);
    }
}

void server_cancel_all(server *s, const char *why) {
    (void)why;
    for (req_ctx *c = s->inflight; c; c = c->next)
        if (s->eng) engine_cancel(s->eng, c->engine_id);
}

/* ---------------------------------------------------------------------------
 * Events
 * ------------------------------------------------------------------------- */

static void write_chunk(req_ctx *c) {
    if (sbuf_failed(&c->out) || !c->req) return;
    evbuffer_add(c->s->wbuf, c->out.p, c->out.len);
    evhttp_send_reply_chunk(c->req, c->s->wbuf);
    evbuffer_drain(c->s->wbuf, evbuffer_get_length(c->s->wbuf));
    if (c->conn) server_conn_guard(c->slot);
}

/* The choice an event is for; NULL for an index the request does not
 * have (always checked: it indexes the choice array). */
static req_choice *choice_of(req_ctx *c, const engine_event *ev) {
    return ev->choice < c->n_choices ? &c->choice[ev->choice] : NULL;
}

/* Chat streams open each choice with its own role chunk. */
static void add_role_once(req_ctx *c, req_choice *ch, uint32_t index) {
    if (c->meta.kind != OAI_CHAT || ch->sent_role) return;
    sse_chunk_role(&c->out, &c->meta, index);
    ch->sent_role = true;
}

static void lp_from_event(sse_lp *lp, const engine_event *ev, uint32_t text_offset) {
    lp->token = ev->token;
    lp->logprob = ev->logprob;
    lp->text_offset = text_offset;
    lp->n_top = ev->n_top < LOGPROBS_MAX_TOP ? ev->n_top : LOGPROBS_MAX_TOP;
    memcpy(lp->top_id, ev->top_id, lp->n_top * sizeof *lp->top_id);
    memcpy(lp->top_logprob, ev->top_logprob, lp->n_top * sizeof *lp->top_logprob);
}

/* Non-stream: the choice's logprobs are kept until its body is written
 * (doubling growth: amortized, not an allocation per token). Out of memory
 * drops the record; the body then says so with a 500. */
static void keep_logprobs(req_choice *ch, const sse_lp *lp) {
    if (TPS_GROW(ch->lp, ch->cap_lp, ch->n_lp + 1, 64)) {
        ch->text.failed = true;
        return;
    }
    ch->lp[ch->n_lp++] = *lp;
}

/* ---------------------------------------------------------------------------
 * Reasoning: a choice's text split into its thinking and its answer
 * ------------------------------------------------------------------------- */

void reason_split_init(reason_split *r, think_state think, bool harmony) {
    r->harmony = harmony;
    think_init(&r->think, think);
    harmony_init(&r->h);
}

/* An event's text plus what a splitter held: its largest output. */
#define SPLIT_CAP (ENGINE_TEXT_MAX + HARMONY_MAX_HEADER)
_Static_assert(HARMONY_MAX_HEADER >= sizeof(((think_split *)0)->held), "the larger hold");

/* One event's text split: the thinking (r) and the answer (c), each in
 * order; markers dropped, or kept inline in c (reasoning_format "none").
 * Harmony's calls go to c when tools are offered (the tool-call parser
 * reads them there), else nowhere. */
typedef struct split_text {
    oai_reasoning mode;
    bool tools;
    size_t nr, nc;
    char r[SPLIT_CAP], c[SPLIT_CAP];
} split_text;

static void split_add(split_text *st, bool thinking, const char *p, size_t n) {
    char *dst = thinking ? st->r : st->c;
    size_t *len = thinking ? &st->nr : &st->nc;
    if (n > SPLIT_CAP - *len) n = SPLIT_CAP - *len; /* cannot be: text + held fit */
    memcpy(dst + *len, p, n);
    *len += n;
}

static void think_sink_fn(void *ctx, think_part part, const char *p, size_t n) {
    split_text *st = ctx;
    bool thinking = part != THINK_PART_CONTENT && st->mode != OAI_REASONING_NONE;
    if (thinking && (part == THINK_PART_MARKER || st->mode == OAI_REASONING_HIDDEN)) return;
    split_add(st, thinking, p, n);
}

static void harmony_sink_fn(void *ctx, harmony_part part, const char *p, size_t n) {
    split_text *st = ctx;
    if (st->mode == OAI_REASONING_NONE) { /* inline: the text as it came */
        split_add(st, false, p, n);
        return;
    }
    if ((part == HARMONY_REASONING && st->mode == OAI_REASONING_HIDDEN) || part == HARMONY_MARKER ||
        (part == HARMONY_CALL && !st->tools))
        return;
    split_add(st, part == HARMONY_REASONING, p, n);
}

/* Feeds the event to the choice's splitter; true when the event's token
 * belongs to the thinking (sampled inside a block, or opening or closing
 * it; harmony: inside an analysis body before or after it). */
static bool split_feed(req_choice *ch, const engine_event *ev, split_text *st) {
    reason_split *sp = &ch->split;
    bool done = ev->kind == ENGINE_EV_DONE;
    if (sp->harmony) {
        bool before = harmony_in_reasoning(&sp->h);
        harmony_feed(&sp->h, ev->text, ev->text_len, harmony_sink_fn, st);
        if (done) harmony_flush(&sp->h, harmony_sink_fn, st);
        ch->thought |= sp->h.analysed;
        return before || harmony_in_reasoning(&sp->h);
    }
    think_state before = sp->think.state;
    think_feed(&sp->think, ev->text, ev->text_len, think_sink_fn, st);
    if (done) think_flush(&sp->think, think_sink_fn, st);
    bool in_block = before == THINK_IN || sp->think.state == THINK_IN;
    ch->thought |= in_block;
    return in_block;
}

/* Splits text[0..n) of choice ch (and, at its end, what the splitter
 * held); without reasoning everything is answer, unsplit. */
static void split_event(req_ctx *c, req_choice *ch, const engine_event *ev, split_text *st,
                        sse_text *r, sse_text *t) {
    *r = (sse_text){NULL, 0};
    *t = (sse_text){ev->text, ev->text_len};
    if (c->think == THINK_OFF && !c->harmony) return;
    st->mode = c->reasoning;
    st->tools = c->tools;
    st->nr = st->nc = 0;
    if (split_feed(ch, ev, st) && ev->kind == ENGINE_EV_TOKEN) ch->n_reasoning++;
    *r = (sse_text){st->r, st->nr};
    *t = (sse_text){st->c, st->nc};
}

/* How a piece of one choice's text is streamed (sse_write.h). */
typedef void chunk_fn(sbuf *b, const sse_meta *m, uint32_t index, const char *text, size_t n,
                      int32_t token, const sse_lp *lp, const tokenizer *tok);

/* Text of one event: kept in keep for the body, or streamed as the one
 * chunk that chunk writes, token and lp with it. */
static void text_out(req_ctx *c, req_choice *ch, const engine_event *ev, sse_text t, sbuf *keep,
                     chunk_fn *chunk, int32_t token, const sse_lp *lp) {
    if (!c->stream) {
        sbuf_add(keep, t.p, t.n);
        return;
    }
    sbuf_reset(&c->out);
    if (c->api) { /* a dialect's delta event; nothing for an empty piece */
        if (!t.n) return;
        api_stream_delta(c->api, &c->out,
                         keep == &ch->reasoning ? API_PART_REASONING : API_PART_TEXT, t.p, t.n);
        write_chunk(c);
        return;
    }
    add_role_once(c, ch, ev->choice);
    chunk(&c->out, &c->meta, ev->choice, t.p, t.n, token, lp, c->s->tok);
    write_chunk(c);
}

/* The thinking of one event: streamed as delta.reasoning_content, or kept
 * for the body. token and lp go with it when no answer text follows. */
static void reasoning_out(req_ctx *c, req_choice *ch, const engine_event *ev, sse_text r,
                          int32_t token, const sse_lp *lp) {
    text_out(c, ch, ev, r, &ch->reasoning, sse_chunk_reasoning, token, lp);
}

/* ---------------------------------------------------------------------------
 * Tokens
 * ------------------------------------------------------------------------- */

/* ---------------------------------------------------------------------------
 * Tool calls: each choice's answer read by its tool_stream (tools.h)
 * ------------------------------------------------------------------------- */

/* The prefix of call ids of one choice: "call_<request>_<choice>_". */
static void call_ids(const req_ctx *c, uint32_t choice, char *out, size_t cap) {
    const char *dash = strchr(c->id, '-');
    snprintf(out, cap, "call_%s_%u_", dash ? dash + 1 : c->id, choice);
}

/* The choice's reader, made at its first text (NULL when out of memory). */
static tool_stream *choice_tools(req_ctx *c, req_choice *ch, uint32_t choice) {
    if (!ch->tstream) {
        char prefix[80];
        call_ids(c, choice, prefix, sizeof prefix);
        ch->tstream = tool_stream_new(c->tfmt, c->tset, prefix);
    }
    return ch->tstream;
}

/* A stream's tool events as chat chunks: content as text (with the
 * token), a call's start and each piece of its arguments as deltas. */
typedef struct tool_out {
    req_ctx *c;
    uint32_t choice;
    int32_t token;
    bool text_sent;
} tool_out;

static void tool_chunk(void *ctx, const tool_event *ev) {
    tool_out *o = ctx;
    req_ctx *c = o->c;
    uint32_t k = (uint32_t)ev->index;
    if (ev->kind == TOOL_EV_CONTENT) {
        sse_chunk_text(&c->out, &c->meta, o->choice, ev->text, ev->n, o->token, NULL, NULL);
        o->token = -1;
        o->text_sent = true;
    } else if (ev->kind == TOOL_EV_CALL_START) {
        sse_chunk_tool_start(&c->out, &c->meta, o->choice, k, ev->id, ev->name, ev->name_len);
    } else if (ev->kind == TOOL_EV_ARGS) {
        sse_chunk_tool_args(&c->out, &c->meta, o->choice, k, ev->text, ev->n);
    }
}

/* A stream's tool events as a dialect's events (api_write.h): content as
 * answer text, a call's start, arguments and end as the call's item. */
typedef struct api_tool_out {
    api_stream *st;
    sbuf *out;
} api_tool_out;

static void api_tool_event(void *ctx, const tool_event *ev) {
    api_tool_out *o = ctx;
    if (ev->kind == TOOL_EV_CONTENT)
        api_stream_delta(o->st, o->out, API_PART_TEXT, ev->text, ev->n);
    else if (ev->kind == TOOL_EV_CALL_START)
        api_stream_call(o->st, o->out, ev->id, ev->name, ev->name_len);
    else if (ev->kind == TOOL_EV_ARGS)
        api_stream_delta(o->st, o->out, API_PART_CALL, ev->text, ev->n);
    else
        api_stream_call_done(o->st, o->out, ev->complete);
}

/* The answer text of one token event (possibly empty). */
static void content_out(req_ctx *c, req_choice *ch, const engine_event *ev, sse_text t,
                        int32_t token, const sse_lp *lp) {
    tool_stream *ts = c->stream && c->tools ? choice_tools(c, ch, ev->choice) : NULL;
    if (ts) { /* content goes out as it comes, a call's arguments as they come */
        sbuf_reset(&c->out);
        if (c->api) {
            api_tool_out o = {.st = c->api, .out = &c->out};
            tool_stream_feed(ts, t.p, t.n, api_tool_event, &o);
            write_chunk(c);
            return;
        }
        add_role_once(c, ch, ev->choice);
        tool_out o = {.c = c, .choice = ev->choice, .token = token};
        tool_stream_feed(ts, t.p, t.n, tool_chunk, &o);
        /* held text (it may be a call) still gets its token's event, empty,
         * as a split character's bytes do: every token arrives */
        if (!o.text_sent) sse_chunk_text(&c->out, &c->meta, ev->choice, "", 0, token, NULL, NULL);
        write_chunk(c);
        return;
    }
    text_out(c, ch, ev, t, &ch->text, sse_chunk_text, token, lp);
}

static void on_token(req_ctx *c, const engine_event *ev) {
    req_choice *ch = choice_of(c, ev);
    if (!ch) return;
    server_hists *h = &c->s->h;
    /* TTFT once per request (its first token of any choice); ITL within
     * each choice, whose tokens are one stream. */
    if (c->n_tokens == 0)
        hist_record(h->ttft, ev->t_ns > c->t_start_ns ? ev->t_ns - c->t_start_ns : 0);
    else if (ch->n_tokens)
        hist_record(h->itl, ev->t_ns > ch->t_last_ns ? ev->t_ns - ch->t_last_ns : 0);
    ch->t_last_ns = ev->t_ns;
    ch->n_tokens++;
    c->n_tokens++;
    if (c->client_gone) return;
    sse_lp lp = {0};
    if (c->logprobs) lp_from_event(&lp, ev, ch->text_offset);
    ch->text_offset += ev->text_len;
    if (!c->stream && c->logprobs) keep_logprobs(ch, &lp);
    const sse_lp *lpp = c->logprobs ? &lp : NULL;
    split_text st;
    sse_text r, t;
    split_event(c, ch, ev, &st, &r, &t);
    bool answer = t.n || !r.n; /* an empty event still carries its token */
    if (r.n) reasoning_out(c, ch, ev, r, answer ? -1 : ev->token, answer ? NULL : lpp);
    if (answer) content_out(c, ch, ev, t, ev->token, lpp);
}

/* The request's timings from its choices' as they finish: they share the
 * prompt, so queueing and prefill start with the earliest choice; the
 * first token is the earliest any choice made and the finish the last
 * one's; generated tokens and preemptions add up. With n = 1 these are the
 * choice's own. */
static void merge_timings(engine_timings *r, const engine_timings *t, bool first) {
    if (first) {
        *r = *t;
        return;
    }
    uint64_t *mins[] = {&r->t_queued, &r->t_first_scheduled, &r->t_first_token};
    const uint64_t ts[] = {t->t_queued, t->t_first_scheduled, t->t_first_token};
    for (size_t i = 0; i < 3; i++) /* 0: the phase never started */
        if (ts[i] && (!*mins[i] || ts[i] < *mins[i])) *mins[i] = ts[i];
    if (t->t_finished > r->t_finished) r->t_finished = t->t_finished;
    if (t->prompt_tokens > r->prompt_tokens) r->prompt_tokens = t->prompt_tokens;
    if (t->cached_tokens > r->cached_tokens) r->cached_tokens = t->cached_tokens;
    r->generated_tokens += t->generated_tokens;
    r->preemptions += t->preemptions;
}

/* Once per request, when its last choice is done. */
static void record_done(server_hists *h, const req_ctx *c, uint64_t t_end_ns) {
    const engine_timings *t = &c->timings;
    if (c->failed) return;
    hist_record(h->e2e, t_end_ns > c->t_start_ns ? t_end_ns - c->t_start_ns : 0);
    if (t->t_first_scheduled >= t->t_queued && t->t_queued)
        hist_record(h->queue, t->t_first_scheduled - t->t_queued);
    if (t->t_first_token >= t->t_first_scheduled && t->t_first_scheduled)
        hist_record(h->prefill, t->t_first_token - t->t_first_scheduled);
    if (t->t_finished >= t->t_first_token && t->t_first_token)
        hist_record(h->decode, t->t_finished - t->t_first_token);
}

static bool finish_ok(engine_finish f) {
    return f == ENGINE_FINISH_STOP || f == ENGINE_FINISH_LENGTH;
}

/* The error a request whose choice ended cancelled or failed is answered with. */
static void request_error(const req_ctx *c, oai_error *e) {
    if (c->fail == ENGINE_FINISH_CANCELLED)
        oai_error_set(e, 503, "unavailable_error", NULL, "cancelled",
                      "the request was cancelled: the server is shutting down");
    else
        oai_error_set(e, 500, "server_error", NULL, NULL, "generation failed: %s",
                      c->fail_msg[0] ? c->fail_msg : "engine error");
}

/* A streamed choice with tools: the rest of its answer, now complete, as
 * content or as the rest of its calls. max_tokens cutting a call keeps the
 * calls before it whole, with finish_reason "length". */
static void stream_tool_answer(req_ctx *c, req_choice *ch, const engine_event *ev, sse_text t) {
    tool_stream *ts = choice_tools(c, ch, ev->choice);
    tool_out o = {.c = c, .choice = ev->choice, .token = -1};
    if (ts) {
        tool_stream_feed(ts, t.p, t.n, tool_chunk, &o);
        tool_stream_end(ts, tool_chunk, &o);
    } else if (t.n) {
        sse_chunk_text(&c->out, &c->meta, ev->choice, t.p, t.n, -1, NULL, NULL);
    }
    bool calls = ts && tool_stream_whole(ts) && ev->finish == ENGINE_FINISH_STOP;
    sse_chunk_finish(&c->out, &c->meta, ev->choice,
                     calls ? "tool_calls" : engine_finish_name(ev->finish), &ev->timings);
}

/* The request's usage counts: every choice's tokens and thinking tokens. */
static sse_usage usage_of(const req_ctx *c) {
    sse_usage u = {.prompt_tokens = c->n_prompt, .completion_tokens = c->n_tokens};
    for (uint32_t i = 0; i < c->n_choices; i++)
        u.reasoning_tokens += c->choice[i].n_reasoning;
    return u;
}

/* Streams: a finished choice's held text (thinking r, answer t) and finish
 * chunk go out at once; after the last choice, the error or usage chunk
 * and [DONE]. One write. */
static void stream_done(req_ctx *c, req_choice *ch, const engine_event *ev, bool last, sse_text r,
                        sse_text t) {
    bool ok = finish_ok(ev->finish);
    sbuf_reset(&c->out);
    if (ok) add_role_once(c, ch, ev->choice);
    if (ok && r.n) sse_chunk_reasoning(&c->out, &c->meta, ev->choice, r.p, r.n, -1, NULL, NULL);
    if (ok && c->tools) {
        stream_tool_answer(c, ch, ev, t);
    } else {
        if (t.n) sse_chunk_text(&c->out, &c->meta, ev->choice, t.p, t.n, -1, NULL, NULL);
        if (ok)
            sse_chunk_finish(&c->out, &c->meta, ev->choice, engine_finish_name(ev->finish),
                             &ev->timings);
    }
    if (last) {
        if (c->failed) {
            oai_error e;
            request_error(c, &e);
            sse_error(&c->out, &e);
        } else if (c->include_usage) {
            sse_usage u = usage_of(c);
            sse_chunk_usage(&c->out, &c->meta, &u, &c->timings);
        }
        sse_done(&c->out);
    }
    write_chunk(c);
    if (!last) return;
    evhttp_send_reply_end(c->req);
    if (c->conn) server_conn_guard(c->slot);
}

/* Non-streamed: the body with every choice, or the error. */
static void reply_whole(req_ctx *c) {
    server *s = c->s;
    oai_error e;
    if (c->failed) {
        request_error(c, &e);
        server_reply_error(s, c->req, &e);
        return;
    }
    sbuf *b = &c->out;
    sbuf_reset(b);
    sse_body_open(b, &c->meta);
    bool oom = false;
    for (uint32_t i = 0; i < c->n_choices; i++) {
        const req_choice *ch = &c->choice[i];
        oom |= sbuf_failed(&ch->text);
        static const sse_lp no_tokens[1];
        const sse_lp *lp = c->logprobs ? (ch->lp ? ch->lp : no_tokens) : NULL;
        const char *text = ch->text.p ? ch->text.p : "";
        /* the thinking, when the choice had a block and it is returned apart */
        sse_text r = {NULL, 0};
        if (ch->thought && c->reasoning == OAI_REASONING_SPLIT)
            r = (sse_text){ch->reasoning.p ? ch->reasoning.p : "", ch->reasoning.len};
        oom |= sbuf_failed(&ch->reasoning);
        tool_call calls[TOOLS_MAX_CALLS];
        size_t content = ch->text.len, k = 0;
        bool cut = ch->finish == ENGINE_FINISH_LENGTH;
        /* the answer only, never the thinking; a cut answer keeps its whole calls */
        tool_stream *ts = c->tools && (ch->finish == ENGINE_FINISH_STOP || cut)
                              ? choice_tools(c, &c->choice[i], i)
                              : NULL;
        if (ts) {
            tool_stream_feed(ts, text, ch->text.len, NULL, NULL);
            tool_stream_end(ts, NULL, NULL);
            k = tool_stream_calls(ts, calls, TOOLS_MAX_CALLS, &content);
        }
        if (k) {
            char prefix[80];
            call_ids(c, i, prefix, sizeof prefix);
            sse_body_choice_tool_calls(b, &c->meta, i, text, content, &r, calls, k, prefix,
                                       cut ? "length" : "tool_calls", lp, ch->n_lp, s->tok);
            tools_calls_free(calls, k);
        } else {
            sse_body_choice(b, &c->meta, i, text, ch->text.len, &r, engine_finish_name(ch->finish),
                            lp, ch->n_lp, s->tok);
        }
    }
    sse_usage u = usage_of(c);
    sse_body_close(b, &c->meta, &u, &c->timings);
    if (oom || sbuf_failed(b)) {
        oai_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        server_reply_error(s, c->req, &e);
        return;
    }
    evhttp_add_header(evhttp_request_get_output_headers(c->req), "Content-Type",
                      "application/json");
    evbuffer_add(s->wbuf, b->p, b->len);
    evhttp_send_reply(c->req, 200, NULL, s->wbuf);
    evbuffer_drain(s->wbuf, evbuffer_get_length(s->wbuf));
    if (c->conn) server_conn_guard(c->slot);
}

/* ---------------------------------------------------------------------------
 * The agent dialects (Responses, Messages): one choice, written by api_write.h
 * ------------------------------------------------------------------------- */

static api_usage api_usage_of(const req_ctx *c) {
    sse_usage u = usage_of(c);
    return (api_usage){.input = u.prompt_tokens,
                       .cached = c->timings.cached_tokens,
                       .output = u.completion_tokens,
                       .reasoning = u.reasoning_tokens};
}

/* Responses with store: the conversation with this answer, and the
 * response object, kept for previous_response_id and GET. A store that
 * cannot keep it says so in the log; the answer itself is unharmed. */
static void api_store(req_ctx *c, const api_final *f, const sbuf *body) {
    char *conv = NULL;
    size_t nc = 0;
    tps_err err = {{0}};
    int rc = api_conversation(c->api, c->history, f, &conv, &nc);
    if (!rc && !sbuf_failed(body))
        rc = response_store_put(c->s->store, c->id, conv, nc, body->p, body->len, tps_now_ns(),
                                &err);
    if (rc)
        fprintf(c->s->log, "tps serve: response %s not stored: %s\n", c->id,
                err.msg[0] ? err.msg : "out of memory");
    free(conv);
}

/* The rest of a finished answer: thinking r, answer t (streamed: what was
 * held; whole: everything), read for tool calls by the choice's
 * tool_stream (streamed: it has read the rest already); the final events
 * into out, the body (not streamed, or stored) into body. */
static void api_answer(req_ctx *c, req_choice *ch, const engine_event *ev, sse_text r, sse_text t,
                       sbuf *out, sbuf *body) {
    api_stream *st = c->api;
    api_stream_delta(st, out, API_PART_REASONING, r.p, r.n);
    tool_stream *ts = c->tools ? choice_tools(c, ch, 0) : NULL;
    tool_call calls[TOOLS_MAX_CALLS];
    size_t k = 0, content = 0;
    if (ts) {
        api_tool_out o = {.st = st, .out = out};
        tool_stream_feed(ts, t.p, t.n, api_tool_event, &o);
        tool_stream_end(ts, api_tool_event, &o);
        k = tool_stream_calls(ts, calls, TOOLS_MAX_CALLS, &content);
    } else {
        api_stream_delta(st, out, API_PART_TEXT, t.p, t.n);
    }
    char prefix[80];
    call_ids(c, 0, prefix, sizeof prefix);
    api_final f = {.finish = ev->finish,
                   .calls = calls,
                   .n_calls = k,
                   .call_prefix = prefix,
                   .usage = api_usage_of(c),
                   .stop_sequence = api_stream_stop(st, ev->stop_string)};
    api_stream_end(st, out, &f);
    bool store = c->store && st->dialect == OAI_DIALECT_RESPONSES;
    if (!c->stream || store) api_body(st, body, &f);
    if (store) api_store(c, &f, body);
    tools_calls_free(calls, k);
}

/* A dialect request's DONE (its one choice): the final events and the
 * stream's end, or the whole body; an error in the dialect's shape. */
static void api_done(req_ctx *c, req_choice *ch, const engine_event *ev, sse_text r, sse_text t) {
    server *s = c->s;
    sbuf body;
    sbuf_init(&body);
    sbuf_reset(&c->out);
    oai_error e;
    if (c->failed) {
        request_error(c, &e);
        if (c->stream) api_stream_error(c->api, &c->out, &e);
    } else if (c->stream) {
        api_answer(c, ch, ev, r, t, &c->out, &body);
    } else {
        sse_text rr = {ch->reasoning.p, ch->reasoning.len}, tt = {ch->text.p, ch->text.len};
        api_answer(c, ch, ev, rr, tt, &c->out, &body);
        if (sbuf_failed(&body) || sbuf_failed(&ch->text) || sbuf_failed(&ch->reasoning)) {
            c->failed = true;
            oai_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        }
    }
    if (c->stream) {
        write_chunk(c);
        evhttp_send_reply_end(c->req);
        if (c->conn) server_conn_guard(c->slot);
    } else if (c->failed) {
        server_reply_error(s, c->req, &e);
    } else {
        server_reply_json(s, c->req, 200, &body);
    }
    sbuf_free(&body);
}

/* A choice's DONE. The request is answered and freed with the last one:
 * until then the engine still holds c as the other choices' user. */
static void on_done(req_ctx *c, const engine_event *ev) {
    server *s = c->s;
    req_choice *ch = choice_of(c, ev);
    if (!ch || ch->done) return;
    ch->done = true;
    ch->finish = ev->finish;
    merge_timings(&c->timings, &ev->timings, c->n_done == 0);
    c->timings.seed = c->seed; /* the request's: choice i replays with seed + i */
    bool last = ++c->n_done == c->n_choices;
    if (!finish_ok(ev->finish) && !c->failed) {
        c->failed = true;
        c->fail = ev->finish;
        snprintf(c->fail_msg, sizeof c->fail_msg, "%s", ev->error);
    }
    bool answering = !c->client_gone && c->req;
    if (answering && last) { /* the connection is idle again once answered */
        if (c->conn) evhttp_connection_set_closecb(c->conn, NULL, NULL);
        server_conn_busy(s, c->req, false);
    }
    split_text st;
    sse_text r, t;
    if (answering) split_event(c, ch, ev, &st, &r, &t);
    if (answering && c->api) { /* answered whole below */
        if (!c->stream) sbuf_add(&ch->reasoning, r.p, r.n);
        if (!c->stream) sbuf_add(&ch->text, t.p, t.n);
    } else if (answering && c->stream) {
        stream_done(c, ch, ev, last, r, t);
    } else if (answering) {
        sbuf_add(&ch->reasoning, r.p, r.n);
        sbuf_add(&ch->text, t.p, t.n);
    }
    if (!last) return;
    record_done(&s->h, c, ev->t_ns);
    if (answering && c->api)
        api_done(c, ch, ev, r, t);
    else if (answering && !c->stream)
        reply_whole(c);
    c->req = NULL;
    req_ctx_free(c);
    server_maybe_finish_drain(s);
}

void server_on_engine(evutil_socket_t fd, short what, void *arg) {
    server *s = arg;
    for (int turn = 0; turn < SERVER_POLLS_PER_TURN; turn++) {
        size_t n = engine_poll(s->eng, s->events, SERVER_POLL_BATCH);
        for (size_t i = 0; i < n; i++) {
            const engine_event *ev = &s->events[i];
            req_ctx *c = ev->user;
            if (!c) continue;
            if (ev->kind == ENGINE_EV_TOKEN)
                on_token(c, ev);
            else if (ev->kind == ENGINE_EV_DONE)
                on_done(c, ev);
        }
        if (n < SERVER_POLL_BATCH) break;
    }
}
