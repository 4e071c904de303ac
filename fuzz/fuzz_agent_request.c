/* libFuzzer harness for the agent dialects' request parsers: arbitrary
 * bytes are parsed as a /v1/responses body (api_responses.h; a lookup that
 * finds one stored conversation and misses every other id), a
 * /v1/messages and a /v1/messages/count_tokens body (api_messages.h),
 * each under both unknown-field policies. A rejection must carry a 4xx/5xx
 * status and a message; an accepted request must be a chat request with
 * messages, valid sampling, and (Responses) a history array; the
 * rendered prompt through the built-in templates must not crash. No model,
 * no engine thread. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_builtins.h"
#include "server/api/api_messages.h"
#include "server/api/api_responses.h"
#include "server/chat/chat_prompt.h"

static int lookup(void *ctx, const char *id, char **out, size_t *n, tps_err *err) {
    (void)ctx;
    static const char conv[] = "[{\"role\":\"user\",\"content\":\"Hi\"},"
                               "{\"role\":\"assistant\",\"content\":\"Hello\"}]";
    if (strcmp(id, "resp_1")) return tps_fail(err, TPS_ENOENT, "no stored response");
    *out = strdup(conv);
    *n = sizeof conv - 1;
    return *out ? 0 : TPS_ENOMEM;
}

static void accepted(oai_request *r) {
    if (r->kind != OAI_CHAT || !r->n_msgs || r->n < 1) abort();
    if (sampler_params_validate(&r->sampling, NULL, NULL)) abort();
    if (r->dialect == OAI_DIALECT_RESPONSES && !json_is_array((json_t *)r->history)) abort();
    if (strlen(r->ignored) >= OAI_IGNORED_MAX) abort();
    const chat_prompt *p = fuzz_builtins();
    chat_request rq = oai_chat_inputs(r);
    for (int t = 1; t < CHAT_TMPL_COUNT; t += 3) { /* a third of them: the chat harness has all */
        sbuf b;
        sbuf_init(&b);
        chat_error ce;
        if (chat_prompt_render(&p[t], &rq, &b, &ce) && (!ce.msg[0] || ce.status < 400)) abort();
        sbuf_free(&b);
    }
}

static void check(int rc, oai_request *r, const oai_error *e) {
    if (rc) {
        if (e->status < 400 || e->status > 599 || !e->message[0] || !e->type) abort();
        return;
    }
    accepted(r);
    oai_request_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *body = (const char *)data;
    for (int ignore = 0; ignore < 2; ignore++) {
        oai_policy pol = {.ignore_unknown = ignore};
        oai_request r;
        oai_error e;
        check(api_responses_parse(&r, body, size, &pol, lookup, NULL, &e), &r, &e);
        check(api_messages_parse(&r, body, size, false, &pol, &e), &r, &e);
        check(api_messages_parse(&r, body, size, true, &pol, &e), &r, &e);
    }
    return 0;
}
