/* Tool calls as an answer streams (tools.h's tool_stream): the answer so
 * far read again on each feed (tools_scan.c, partial), and what is new
 * since the last read reported as events: content that no marker can
 * claim any more, a call's start once its name is whole, the growth of
 * its arguments text, its end. The reader guarantees each call's
 * arguments text only grows, so a delta is the bytes past what was sent.
 *
 * Not here: SSE or any dialect's shape (the writers turn events into
 * chunks), reading the syntax (tools_scan.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/tools/json_schema_check.h"
#include "server/tools/tools_internal.h"

struct tool_stream {
    tool_format f;
    const tool_set *ts;
    char prefix[96];
    sbuf text;
    tool_scan scan;
    size_t sent;    /* content bytes reported */
    size_t started; /* calls whose CALL_START went */
    size_t whole;   /* calls whose CALL_DONE went, complete */
    size_t invalid; /* of those, calls whose arguments failed their tool's schema */
    bool ended;
    size_t args_sent[TOOLS_MAX_CALLS];
    bool done[TOOLS_MAX_CALLS];
};

tool_stream *tool_stream_new(tool_format f, const tool_set *ts, const char *id_prefix) {
    tool_stream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->f = f;
    s->ts = ts;
    snprintf(s->prefix, sizeof s->prefix, "%s", id_prefix ? id_prefix : "call_");
    sbuf_init(&s->text);
    sbuf_init(&s->scan.args);
    return s;
}

void tool_stream_free(tool_stream *s) {
    if (!s) return;
    sbuf_free(&s->text);
    sbuf_free(&s->scan.args);
    free(s);
}

static void emit(tool_event_fn *fn, void *ctx, const tool_event *ev) {
    if (fn) fn(ctx, ev);
}

static void emit_content(tool_stream *s, size_t upto, tool_event_fn *fn, void *ctx) {
    if (s->started || upto <= s->sent) return;
    tool_event ev = {.kind = TOOL_EV_CONTENT, .text = s->text.p + s->sent, .n = upto - s->sent};
    emit(fn, ctx, &ev);
    s->sent = upto;
}

/* A complete call's check (tools.h): a function the request offered, its
 * arguments an instance of its parameters schema; a check that cannot
 * decide (json_schema_check.h's bounds) does not call it invalid. Without
 * a tool set (untyped) every call passes. */
static bool call_valid(const tool_stream *s, const tool_scan_call *c) {
    if (!s->ts) return true;
    bool offered;
    const json_t *params = tools_set_params(s->ts, s->text.p + c->name_off, c->name_len, &offered);
    if (!offered) return false;
    json_t *args = /* a raw string argument may hold a NUL, written \u0000 */
        json_loadb(s->scan.args.p + c->args_off, c->args_len, JSON_ALLOW_NUL, NULL);
    bool ok = args && json_schema_check(params, args, NULL, 0) != JSON_CHECK_INVALID;
    json_decref(args);
    return ok;
}

/* Call k of the last read: its start, its new arguments bytes, its end. */
static void emit_call(tool_stream *s, size_t k, tool_event_fn *fn, void *ctx) {
    const tool_scan_call *c = &s->scan.calls[k];
    if (!c->named || k > s->started || s->done[k]) return;
    if (k == s->started) {
        char id[128];
        snprintf(id, sizeof id, "%s%zu", s->prefix, k);
        tool_event ev = {.kind = TOOL_EV_CALL_START,
                         .index = k,
                         .id = id,
                         .name = s->text.p + c->name_off,
                         .name_len = c->name_len};
        emit(fn, ctx, &ev);
        s->started++;
    }
    if (c->args_len > s->args_sent[k]) {
        tool_event ev = {.kind = TOOL_EV_ARGS,
                         .index = k,
                         .text = s->scan.args.p + c->args_off + s->args_sent[k],
                         .n = c->args_len - s->args_sent[k]};
        emit(fn, ctx, &ev);
        s->args_sent[k] = c->args_len;
    }
    if (c->complete) {
        tool_event ev = {
            .kind = TOOL_EV_CALL_DONE, .index = k, .complete = true, .valid = call_valid(s, c)};
        s->invalid += !ev.valid;
        emit(fn, ctx, &ev);
        s->done[k] = true;
        s->whole++;
    }
}

void tool_stream_feed(tool_stream *s, const char *text, size_t n, tool_event_fn *fn, void *ctx) {
    if (s->ended) return;
    sbuf_add(&s->text, text, n);
    if (!s->text.p) return;
    tools_scan(s->f, s->ts, s->text.p, s->text.len, true, &s->scan);
    emit_content(s, s->scan.content, fn, ctx);
    for (size_t k = 0; k < s->scan.n; k++)
        emit_call(s, k, fn, ctx);
}

void tool_stream_end(tool_stream *s, tool_event_fn *fn, void *ctx) {
    if (s->ended) return;
    s->ended = true;
    size_t begun = s->started;
    tools_scan(s->f, s->ts, s->text.p ? s->text.p : "", s->text.len, false, &s->scan);
    emit_content(s, s->scan.n ? s->scan.content : s->text.len, fn, ctx);
    for (size_t k = 0; k < s->scan.n; k++)
        emit_call(s, k, fn, ctx);
    for (size_t k = s->scan.n; k < begun; k++) { /* begun, never whole */
        tool_event ev = {.kind = TOOL_EV_CALL_DONE, .index = k, .complete = false};
        emit(fn, ctx, &ev);
    }
}

size_t tool_stream_calls(const tool_stream *s, tool_call *calls, size_t cap, size_t *content_len) {
    *content_len = s->text.len;
    size_t k = 0;
    for (; s->ended && k < s->scan.n && k < cap; k++) {
        const tool_scan_call *c = &s->scan.calls[k];
        calls[k].name = strndup(s->text.p + c->name_off, c->name_len);
        calls[k].arguments = strndup(s->scan.args.p + c->args_off, c->args_len);
        if (!calls[k].name || !calls[k].arguments) {
            tools_calls_free(calls, k + 1);
            return 0;
        }
    }
    if (k) *content_len = s->scan.content;
    return k;
}

size_t tool_stream_whole(const tool_stream *s) {
    return s->whole;
}

size_t tool_stream_invalid(const tool_stream *s) {
    return s->invalid;
}
