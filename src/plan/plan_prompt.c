/* A request body to the token ids `tps serve` would make of it
 * (server_prepare.c's build_prompt for the bodies tps bench sends):
 * completions tokenize the prompt with the special tokens (BOS), chat
 * renders the request with the server's template first (chat_prompt.h).
 * Parsed and checked by the server's own parser (openai.h). */
#include <stdlib.h>
#include <string.h>

#include "plan/plan_internal.h"
#include "server/api/openai.h"
#include "base/sbuf.h"

int sim_prompt_ids(const plan_server *srv, bench_endpoint ep, const char *body, size_t len,
                   int32_t **ids, uint32_t *n, tps_err *e) {
    *ids = NULL;
    *n = 0;
    oai_request r;
    oai_error oe = {0};
    const oai_kind kind = ep == BENCH_EP_CHAT ? OAI_CHAT : OAI_COMPLETION;
    if (oai_parse(&r, kind, body, len, &oe)) return tps_fail(e, TPS_EINVAL, "%s", oe.message);
    const unsigned flags = TOK_ENCODE_ADD_SPECIAL | TOK_ENCODE_PARSE_SPECIAL;
    size_t nn = 0;
    int rc = 0;
    if (kind == OAI_COMPLETION && r.prompt_is_ids) {
        nn = r.n_prompt_ids;
        if (!(*ids = malloc((nn ? nn : 1) * sizeof **ids)))
            rc = tps_fail(e, TPS_ENOMEM, "out of memory");
        else
            memcpy(*ids, r.prompt_ids, nn * sizeof **ids);
    } else if (kind == OAI_COMPLETION) {
        rc = tokenizer_encode_alloc(srv->tok, r.prompt, r.prompt_len, flags, ids, &nn, e);
    } else {
        sbuf text;
        sbuf_init(&text);
        chat_request rq = oai_chat_inputs(&r);
        chat_error ce;
        if (chat_prompt_render(srv->prompt, &rq, &text, &ce))
            rc = tps_fail(e, ce.status >= 500 ? TPS_ENOMEM : TPS_EINVAL, "%s", ce.msg);
        if (!rc)
            rc = tokenizer_encode_alloc(srv->tok, text.p ? text.p : "", text.len, flags, ids, &nn,
                                        e);
        sbuf_free(&text);
    }
    oai_request_free(&r);
    *n = (uint32_t)nn;
    return rc;
}
