/* libFuzzer harness for the streaming tool-call reader (tools.h's
 * tool_stream), which reads model output token by token: any bytes, fed in
 * pieces the input chooses, in every format, must give events whose
 * argument pieces add up to each complete call's final arguments, which
 * parse as a JSON object, under the name its start announced; indexes stay
 * below the calls begun; no read past what was fed. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "server/tools/tools.h"

typedef struct acc {
    char *args[TOOLS_MAX_CALLS]; /* each call's ARGS pieces, joined */
    size_t len[TOOLS_MAX_CALLS];
    char *name[TOOLS_MAX_CALLS]; /* as its CALL_START named it */
    size_t started;
} acc;

static void on_event(void *ctx, const tool_event *ev) {
    acc *a = ctx;
    if (ev->kind == TOOL_EV_CALL_START) {
        if (ev->index != a->started || !ev->id || !ev->name || !ev->name_len) abort();
        if (ev->index < TOOLS_MAX_CALLS && !(a->name[ev->index] = strndup(ev->name, ev->name_len)))
            abort();
        a->started++;
    } else if (ev->kind == TOOL_EV_ARGS) {
        if (ev->index >= a->started || ev->index >= TOOLS_MAX_CALLS) abort();
        char *g = realloc(a->args[ev->index], a->len[ev->index] + ev->n + 1);
        if (!g) abort();
        memcpy(g + a->len[ev->index], ev->text, ev->n);
        a->len[ev->index] += ev->n;
        g[a->len[ev->index]] = 0;
        a->args[ev->index] = g;
    } else if (ev->kind == TOOL_EV_CALL_DONE && ev->index >= a->started) {
        abort();
    }
}

static void check_format(tool_format f, const char *buf, size_t size, size_t step) {
    tool_stream *s = tool_stream_new(f, NULL, "call_fuzz_");
    if (!s) return;
    acc a = {0};
    for (size_t i = 0; i < size; i += step) {
        size_t n = size - i < step ? size - i : step;
        char *piece = malloc(n ? n : 1); /* exactly n bytes: ASan sees overreads */
        memcpy(piece, buf + i, n);
        tool_stream_feed(s, piece, n, on_event, &a);
        free(piece);
    }
    tool_stream_end(s, on_event, &a);
    tool_call calls[TOOLS_MAX_CALLS];
    size_t content = 0;
    size_t k = tool_stream_calls(s, calls, TOOLS_MAX_CALLS, &content);
    if (k > a.started || content > size) abort();
    for (size_t i = 0; i < k; i++) {
        json_t *j = json_loads(calls[i].arguments, JSON_ALLOW_NUL, NULL); /* \u0000 is JSON */
        if (!json_is_object(j)) abort();
        json_decref(j);
        const size_t n = strlen(calls[i].arguments);
        if (a.len[i] != n || (n && memcmp(a.args[i], calls[i].arguments, n))) abort();
        if (!a.name[i] || strcmp(a.name[i], calls[i].name)) abort();
    }
    tools_calls_free(calls, k);
    for (size_t i = 0; i < TOOLS_MAX_CALLS; i++) {
        free(a.args[i]);
        free(a.name[i]);
    }
    tool_stream_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    size_t step = 1 + data[0] % 13;
    for (int fi = 0; fi < TOOL_FMT_COUNT; fi++)
        check_format((tool_format)fi, (const char *)data + 1, size - 1, step);
    return 0;
}
