/* Multi-turn bodies, built at send time (workload.h): the conversation's
 * history with the server's own replies, as messages (chat) or one text
 * (completions). The one thing a workload makes after the run started. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "bench/workload/workload_internal.h"

/* {"role": role, "content": text}; NULL when text is not UTF-8. */
static json_t *message(const char *role, const char *text, size_t len) {
    json_t *s = json_stringn(text, len);
    return s ? json_pack("{s:s, s:o}", "role", role, "content", s) : NULL;
}

static json_t *turn_messages(const workload_item *its, const char *prefix, uint32_t turn,
                             const char *const *replies, const size_t *reply_lens) {
    json_t *a = json_array();
    bool ok = a != NULL;
    if (ok && prefix) ok = json_array_append_new(a, message("system", prefix, strlen(prefix))) == 0;
    for (uint32_t k = 0; ok && k <= turn; k++) {
        ok = json_array_append_new(a, message("user", its[k].text, its[k].text_len)) == 0;
        if (ok && k < turn)
            ok = json_array_append_new(a, message("assistant", replies[k], reply_lens[k])) == 0;
    }
    if (ok) return a;
    json_decref(a);
    return NULL;
}

/* Completions: the text the model has seen so far, each reply right after
 * the prompt it continued, so every turn's prompt starts with the last one's
 * prompt and reply (what a prefix cache can serve). */
static json_t *turn_text(const workload_item *its, const char *prefix, uint32_t turn,
                         const char *const *replies, const size_t *reply_lens) {
    sbuf s;
    sbuf_init(&s);
    int rc = prefix ? wl_add(&s, prefix) : TPS_OK;
    for (uint32_t k = 0; rc == TPS_OK && k <= turn; k++) {
        if (s.len) rc = wl_add(&s, " ");
        if (!rc) rc = wl_addn(&s, its[k].text, its[k].text_len);
        if (!rc && k < turn) rc = wl_addn(&s, replies[k], reply_lens[k]);
    }
    json_t *j = rc == TPS_OK ? json_stringn(s.p, s.len) : NULL;
    free(s.p);
    return j;
}

int workload_turn_body(const workload *w, size_t conv, uint32_t turn, const char *const *replies,
                       const size_t *reply_lens, char **body, size_t *body_len, tps_err *e) {
    if (!w->turns || conv >= w->conversations || turn >= w->turns)
        return tps_fail(e, TPS_EINVAL, "no turn %u of conversation %zu in this workload", turn,
                        conv);
    const workload_item *its = &w->items[conv * w->turns];
    if (!its[turn].text)
        return tps_fail(e, TPS_EINVAL, "conversation %zu has %u turns, not %u", conv,
                        workload_conv_turns(w, conv), turn + 1);
    const char *prefix = its[0].prefix != WL_NO_PREFIX ? w->prefixes[its[0].prefix] : NULL;
    json_t *content = bench_endpoint_chatlike(w->endpoint)
                          ? turn_messages(its, prefix, turn, replies, reply_lens)
                          : turn_text(its, prefix, turn, replies, reply_lens);
    if (!content)
        return tps_fail(e, TPS_EINVAL,
                        "cannot build turn %u of conversation %zu: a reply is not valid UTF-8 "
                        "(or out of memory)",
                        turn + 1, conv);
    return wl_dump_body(w->common, content, w->endpoint, its[turn].max_tokens, body, body_len, e);
}

uint32_t workload_conv_turns(const workload *w, size_t conv) {
    if (!w->turns || conv >= w->conversations) return 0;
    const workload_item *its = &w->items[conv * w->turns];
    uint32_t t = 0;
    while (t < w->turns && its[t].text)
        t++;
    return t;
}
