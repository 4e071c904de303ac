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
    if (o->model) json_object_set_new(b, "model", json_string(o->model));
    json_object_set_new(b, "stream", json_true());
    if (o->include_usage)
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

/* common + content + max_tokens as compact JSON in *out (malloc'ed). Takes
 * ownership of content: a prompt string, a messages array, or (chat) a
 * string that becomes the one user message. */
int wl_dump_body(json_t *common, json_t *content, bench_endpoint ep, uint32_t max_tokens,
                 char **out, size_t *len, tps_err *e) {
    json_t *b = content ? json_copy(common) : NULL; /* shallow: shares the values */
    if (b && ep == BENCH_EP_CHAT && json_is_string(content)) {
        content = json_pack("[{s:s, s:o}]", "role", "user", "content", content);
    }
    if (b && content) {
        json_object_set_new(b, ep == BENCH_EP_CHAT ? "messages" : "prompt", content);
        content = NULL;
        json_object_set_new(b, "max_tokens", json_integer(max_tokens));
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
