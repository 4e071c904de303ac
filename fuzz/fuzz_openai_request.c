/* libFuzzer harness for the OpenAI request mapping: arbitrary bytes are
 * parsed as a /v1/completions and a /v1/chat/completions body; an accepted
 * request is rendered through every built-in chat template (as the server
 * renders it: chat_prompt.h) and turned into an engine_request. Checks that a rejection always
 * carries a 4xx/5xx status and a message, that an accepted request has n >= 1, that accepted
 * sampling parameters pass sampler_params_validate, and that every borrowed
 * string is readable (ASan). No model, no engine thread. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/engine.h"
#include "fuzz_builtins.h"
#include "server/chat/chat_prompt.h"
#include "server/chat/chat_template.h"
#include "server/api/openai.h"

/* The built-in templates, compiled once for the whole run. */

static void check(oai_kind kind, const uint8_t *data, size_t size) {
    oai_request r;
    oai_error e;
    if (oai_parse(&r, kind, (const char *)data, size, &e)) {
        if (e.status < 400 || e.status > 599 || !e.message[0] || !e.type) abort();
        return;
    }
    if (sampler_params_validate(&r.sampling, NULL, NULL)) abort();
    if (r.n_stop > OAI_MAX_STOP) abort();
    if (r.n_stop_ids > OAI_MAX_STOP_IDS) abort();
    if (r.max_tokens && r.min_tokens > r.max_tokens) abort();
    if (r.think_budget < -1) abort();
    if (r.n < 1) abort(); /* an accepted request has at least one choice */
    size_t total = 0;
    for (size_t i = 0; i < r.n_stop; i++)
        total += strlen(r.stop[i]);
    if (kind == OAI_CHAT) {
        if (!r.n_msgs) abort();
        const chat_prompt *p = fuzz_builtins();
        chat_request rq = oai_chat_inputs(&r);
        for (int t = 1; t < CHAT_TMPL_COUNT; t++) {
            sbuf b;
            sbuf_init(&b);
            chat_error ce;
            if (chat_prompt_render(&p[t], &rq, &b, &ce) == 0) {
                /* every message's content is in the prompt */
                for (size_t i = 0; i < r.n_msgs && !rq.continue_final_message; i++)
                    if (r.msgs[i].content_len && b.len < r.msgs[i].content_len) abort();
            } else if (!ce.msg[0] || ce.status < 400) {
                abort();
            }
            sbuf_free(&b);
        }
    } else if (r.prompt_is_ids) {
        for (size_t i = 0; i < r.n_prompt_ids; i++)
            if (r.prompt_ids[i] < 0) abort();
    } else if (!r.prompt) {
        abort();
    }
    engine_request er = {.prompt = r.prompt_ids,
                         .n_prompt = r.n_prompt_ids,
                         .max_tokens = r.max_tokens,
                         .sampling = r.sampling,
                         .stop = r.stop,
                         .n_stop = r.n_stop,
                         .n = r.n};
    (void)er;
    (void)total;
    oai_request_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check(OAI_COMPLETION, data, size);
    check(OAI_CHAT, data, size);
    return 0;
}
