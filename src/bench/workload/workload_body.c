/* Request bodies (workload_internal.h): the fields every body carries, the
 * --extra-body check, and one body as compact JSON. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "bench/workload/workload_internal.h"

/* The fields every body of the workload carries besides its content and
 * max_tokens (kept in the workload: multi-turn bodies are built at send
 * time, when the options are gone). */
json_t *wl_body_common(const workload_opts *o, bool ignore_eos) {
    json_t *b = json_object();
    if (!b) return NULL;
    const bench_endpoint ep = o->endpoint;
    const bool oai = ep == BENCH_EP_CHAT || ep == BENCH_EP_COMPLETIONS;
    if (o->model) json_object_set_new(b, "model", json_string(o->model));
    if (bench_endpoint_generates(ep)) json_object_set_new(b, "stream", json_boolean(!o->no_stream));
    /* usage comes by itself in the Responses and Messages streams */
    if (o->include_usage && oai && !o->no_stream)
        json_object_set_new(b, "stream_options", json_pack("{s:b}", "include_usage", 1));
    if (ignore_eos) json_object_set_new(b, "ignore_eos", json_true());
    if (o->temperature >= 0) json_object_set_new(b, "temperature", json_real(o->temperature));
    if (o->extra_body) {
        json_t *x = json_loads(o->extra_body, JSON_REJECT_DUPLICATES, NULL);
        if (json_is_object(x)) json_object_update(b, x);
        json_decref(x);
    }
    return b;
}

const char *workload_extra_body_check(const char *s) {
    /* fields the workload writes itself: in --extra-body they would be
     * overridden or break the stream, so they are refused, naming the way */
    static const char *const OWN[][2] = {
        {"prompt", "has \"prompt\": the workload writes it (--input-len, --dataset)"},
        {"messages", "has \"messages\": the workload writes it (--endpoint chat)"},
        {"max_tokens", "has \"max_tokens\": the workload writes it (--output-len)"},
        {"max_output_tokens", "has \"max_output_tokens\": the workload writes it (--output-len)"},
        {"input", "has \"input\": the workload writes it (--endpoint responses, embeddings)"},
        {"system", "has \"system\": the workload writes it from a dataset's system messages"},
        {"stream", "has \"stream\": the bench always streams"},
        {"stream_options", "has \"stream_options\": the bench sets include_usage itself"},
        {"model", "has \"model\": use --model"},
        {"temperature", "has \"temperature\": use --temperature"},
        {"ignore_eos", "has \"ignore_eos\": use --ignore-eos / --no-ignore-eos"},
    };
    json_error_t je;
    json_t *x = json_loads(s, JSON_REJECT_DUPLICATES, &je);
    const char *why = !x ? "is not JSON" : !json_is_object(x) ? "is not a JSON object" : NULL;
    for (size_t i = 0; !why && i < sizeof OWN / sizeof OWN[0]; i++)
        if (json_object_get(x, OWN[i][0])) why = OWN[i][1];
    json_decref(x);
    return why;
}

/* Messages: the conversation's system messages become the top-level
 * "system" (the API takes no system role in messages). Takes msgs. */
static json_t *messages_split_system(json_t *b, json_t *msgs) {
    json_t *rest = json_array(), *m;
    char *sys = NULL;
    size_t i, n = 0;
    json_array_foreach(msgs, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        const char *text = json_string_value(json_object_get(m, "content"));
        if (!role || strcmp(role, "system") || !text) {
            json_array_append(rest, m);
            continue;
        }
        size_t k = strlen(text);
        char *g = realloc(sys, n + k + 2);
        if (!g) break;
        sys = g;
        if (n) sys[n++] = '\n';
        memcpy(sys + n, text, k + 1);
        n += k;
    }
    if (sys) json_object_set_new(b, "system", json_stringn(sys, n));
    free(sys);
    json_decref(msgs);
    return rest;
}

/* Where each endpoint puts the content and the output limit. */
static void set_content(json_t *b, json_t *content, bench_endpoint ep, uint32_t max_tokens) {
    switch (ep) {
    case BENCH_EP_CHAT:
        json_object_set_new(b, "messages", content);
        json_object_set_new(b, "max_tokens", json_integer(max_tokens));
        break;
    case BENCH_EP_RESPONSES: /* input items: {role, content} messages, system among them */
        json_object_set_new(b, "input", content);
        json_object_set_new(b, "max_output_tokens", json_integer(max_tokens));
        break;
    case BENCH_EP_MESSAGES:
        json_object_set_new(b, "messages", messages_split_system(b, content));
        json_object_set_new(b, "max_tokens", json_integer(max_tokens));
        break;
    case BENCH_EP_EMBEDDINGS: /* a batch: an array of texts (workload_batch.c) */
        json_object_set_new(b, "input", content);
        break;
    default:
        json_object_set_new(b, "prompt", content);
        json_object_set_new(b, "max_tokens", json_integer(max_tokens));
    }
}

/* common + content + max_tokens as compact JSON in *out (malloc'ed), in
 * the endpoint's shape. Takes ownership of content: a prompt string, a
 * messages array, or (a chat-like endpoint) a string that becomes the one
 * user message. */
int wl_dump_body(json_t *common, json_t *content, bench_endpoint ep, uint32_t max_tokens,
                 char **out, size_t *len, tps_err *e) {
    json_t *b = content ? json_copy(common) : NULL; /* shallow: shares the values */
    if (b && bench_endpoint_chatlike(ep) && json_is_string(content)) {
        content = json_pack("[{s:s, s:o}]", "role", "user", "content", content);
    }
    if (b && content) {
        set_content(b, content, ep, max_tokens);
        content = NULL;
        *out = json_dumps(b, JSON_COMPACT);
    } else {
        *out = NULL;
    }
    json_decref(content);
    json_decref(b);
    if (!*out) return tps_fail(e, TPS_ENOMEM, "cannot build a request body");
    *len = strlen(*out);
    return TPS_OK;
}

int wl_make_body(workload *w, workload_item *it, json_t *content, uint32_t max_tokens, tps_err *e) {
    it->max_tokens = max_tokens;
    return wl_dump_body(w->common, content, w->endpoint, max_tokens, &it->body, &it->body_len, e);
}
