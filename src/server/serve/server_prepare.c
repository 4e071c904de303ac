/* Preparing request bodies: /tokenize, /detokenize, /apply-template and
 * completions are parsed, rendered and tokenized (server_work_prepare: a
 * worker, server_work.c; no evhttp, no engine), then answered or submitted
 * to the engine on the HTTP thread (server_work_finish). A job whose
 * cancel flag is set (its client left, the server drains) stops at its
 * next phase, or within the render.
 *
 * Not here: the routes (server_http.c), the worker threads (server_work.c),
 * JSON request parsing (openai.c), streaming the answer (server_stream.c). */
#include "engine/cost/admit.h" /* the engine's admission rule, asked early */
#include "server/serve/serve.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "server/api/api_dialect.h"
#include "server/api/api_messages.h"
#include "server/api/api_responses.h"

/* ---------------------------------------------------------------------------
 * Preparing bodies (any thread: no evhttp, no engine; see server_work.c)
 * ------------------------------------------------------------------------- */

/* Parses a JSON object body for /tokenize and /detokenize; NULL with j->e
 * set on failure. */
static json_t *json_body(work_job *j, const char *body, size_t len) {
    json_t *root = oai_body_object(body, len, &j->e);
    if (!root) j->failed = true;
    return root;
}

static void job_fail(work_job *j, int status, const char *type, const char *param, const char *code,
                     const char *msg) {
    j->failed = true;
    oai_error_set(&j->e, status, type, param, code, "%s", msg);
}

/* POST /tokenize {"content": str, "add_special": bool, "parse_special": bool}
 * -> {"tokens": [ids]} (llama.cpp's defaults: add_special false,
 * parse_special true). */
static void prepare_tokenize(work_job *j, const char *body, size_t len) {
    json_t *root = json_body(j, body, len);
    if (!root) return;
    json_t *content = json_object_get(root, "content");
    json_t *add = json_object_get(root, "add_special");
    json_t *parse = json_object_get(root, "parse_special");
    if (!json_is_string(content)) {
        job_fail(j, 400, "invalid_request_error", "content", "invalid_type",
                 "content must be a string");
    } else if ((add && !json_is_boolean(add)) || (parse && !json_is_boolean(parse))) {
        job_fail(j, 400, "invalid_request_error",
                 add && !json_is_boolean(add) ? "add_special" : "parse_special", "invalid_type",
                 "add_special and parse_special must be booleans");
    } else {
        unsigned flags = (json_is_true(add) ? TOK_ENCODE_ADD_SPECIAL : 0) |
                         (!parse || json_is_true(parse) ? TOK_ENCODE_PARSE_SPECIAL : 0);
        int32_t *ids = NULL;
        size_t n = 0;
        tps_err err = {{0}};
        if (tokenizer_encode_alloc(j->s->tok, json_string_value(content),
                                   json_string_length(content), flags, &ids, &n, &err)) {
            job_fail(j, 500, "server_error", NULL, NULL, err.msg);
        } else {
            sbuf_adds(&j->reply, "{\"tokens\":[");
            for (size_t i = 0; i < n; i++)
                sbuf_printf(&j->reply, i ? ",%d" : "%d", ids[i]);
            sbuf_adds(&j->reply, "]}");
        }
        free(ids);
    }
    json_decref(root);
}

/* POST /detokenize {"tokens": [ids]} -> {"content": str}: the pieces
 * concatenated, control tokens rendered (llama.cpp's tokens_to_str). */
static void prepare_detokenize(work_job *j, const char *body, size_t len) {
    json_t *root = json_body(j, body, len);
    if (!root) return;
    json_t *toks = json_object_get(root, "tokens");
    size_t n = json_is_array(toks) ? json_array_size(toks) : 0;
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    char *text = NULL;
    size_t tl = 0;
    if (!json_is_array(toks)) {
        job_fail(j, 400, "invalid_request_error", "tokens", "invalid_type",
                 "tokens must be an array of token ids");
        goto done;
    }
    if (!ids) {
        job_fail(j, 500, "server_error", NULL, NULL, "out of memory");
        goto done;
    }
    uint32_t nv = tokenizer_n_vocab(j->s->tok);
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(toks, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 ||
            json_integer_value(t) >= (json_int_t)nv) {
            j->failed = true;
            oai_error_set(&j->e, 400, "invalid_request_error", "tokens", "invalid_value",
                          "tokens[%zu] is not a token id of this vocabulary (0..%u)", i, nv - 1);
            goto done;
        }
        ids[i] = (int32_t)json_integer_value(t);
    }
    tps_err err = {{0}};
    if (tokenizer_decode_alloc(j->s->tok, ids, n, TOK_DECODE_RAW_SPACES | TOK_DECODE_RENDER_SPECIAL,
                               &text, &tl, &err)) {
        job_fail(j, 500, "server_error", NULL, NULL, err.msg);
        goto done;
    }
    sbuf_adds(&j->reply, "{\"content\":");
    sbuf_json_str(&j->reply, text ? text : "", tl);
    sbuf_adds(&j->reply, "}");
done:
    free(text);
    free(ids);
    json_decref(root);
}

/* Whether j was cancelled; checked between the phases of its preparation. */
static bool cancelled(work_job *j) {
    return atomic_load_explicit(&j->cancel, memory_order_relaxed);
}

/* The rendered chat prompt into text; 0 or the error to answer with. The
 * render is abandoned when j's cancel flag is set. */
static int render_chat(work_job *j, const oai_request *r, sbuf *text, oai_error *e) {
    server *s = j->s;
    chat_request rq = oai_chat_inputs(r);
    rq.cancel = &j->cancel;
    rq.now = s->cfg.template_now;
    chat_error ce;
    int rc = chat_prompt_render(&s->prompt, &rq, text, &ce);
    if (rc)
        oai_error_set(e, ce.status, ce.status >= 500 ? "server_error" : "invalid_request_error",
                      ce.param, ce.status >= 500 ? NULL : ce.code, "%s", ce.msg);
    return rc;
}

/* The prompt's token ids (malloc'ed) for a parsed request; a chat's
 * rendered text also says where it leaves a thinking block. */
static int build_prompt(server *s, const oai_request *r, work_job *j, oai_error *e) {
    int32_t **ids = &j->ids;
    size_t *n = &j->n_ids;
    tps_err err = {{0}};
    unsigned flags = TOK_ENCODE_ADD_SPECIAL | TOK_ENCODE_PARSE_SPECIAL;
    if (r->kind == OAI_COMPLETION) {
        if (r->prompt_is_ids) {
            *ids = malloc((r->n_prompt_ids ? r->n_prompt_ids : 1) * sizeof **ids);
            if (!*ids) return oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
            memcpy(*ids, r->prompt_ids, r->n_prompt_ids * sizeof **ids);
            *n = r->n_prompt_ids;
            return 0;
        }
        if (tokenizer_encode_alloc(s->tok, r->prompt, r->prompt_len, flags, ids, n, &err))
            return oai_error_set(e, 500, "server_error", "prompt", NULL, "%s", err.msg);
        return 0;
    }
    sbuf text;
    sbuf_init(&text);
    int rc = render_chat(j, r, &text, e);
    if (!rc && cancelled(j)) rc = TPS_EINVAL; /* answered as cancelled */
    if (!rc) j->think_text = think_text_state(text.p ? text.p : "", text.len);
    if (!rc && tokenizer_encode_alloc(s->tok, text.p ? text.p : "", text.len, flags, ids, n, &err))
        rc = oai_error_set(e, 500, "server_error", "messages", NULL, "%s", err.msg);
    sbuf_free(&text);
    return rc;
}

/* Tools offered (tool_choice not none): logprobs only whole, and under
 * required or named tool_choice the grammar of valid calls, which r owns
 * from here (oai_request_free frees it). Compiling the tools' schemas is
 * work on the body, so it is done here, off the HTTP thread. */
static int prepare_tools(server *s, oai_request *r, oai_error *e) {
    if (r->tool_choice == TOOL_CHOICE_NONE) return 0;
    if (r->stream && r->logprobs)
        return oai_error_set(e, 400, "invalid_request_error", "logprobs", "unsupported_parameter",
                             "logprobs with tools is supported only without stream: a streamed "
                             "answer that may hold tool calls is sent when it is complete");
    if (r->tool_choice != TOOL_CHOICE_REQUIRED && r->tool_choice != TOOL_CHOICE_NAMED) return 0;
    sbuf g;
    sbuf_init(&g);
    tps_err terr = {{0}};
    /* a named function is one call to it, as vLLM forces it: a grammar
     * allowing more lets a model that never stops repeat calls to max_tokens */
    bool parallel = r->parallel_tool_calls && r->tool_choice != TOOL_CHOICE_NAMED;
    int rc =
        tools_grammar(s->prompt.tools, r->tools, r->n_tools, r->tool_name, parallel, &g, &terr);
    if (rc) {
        sbuf_free(&g);
        return oai_error_set(e, rc == TPS_ENOMEM ? 500 : 400,
                             rc == TPS_ENOMEM ? "server_error" : "invalid_request_error", "tools",
                             "invalid_value", "tools: %s", terr.msg);
    }
    r->grammar = g.p;
    r->grammar_len = g.len;
    r->grammar_param = "tools";
    return 0;
}

/* previous_response_id's conversation, from the store (any thread). */
static int store_lookup(void *ctx, const char *id, char **out, size_t *n, tps_err *err) {
    return response_store_get(ctx, id, RESPONSE_CONVERSATION, tps_now_ns(), out, n, err);
}

/* The body parsed in its dialect into j->r; 0 or the error in j->e. */
static int parse_body(work_job *j, const char *body, size_t len) {
    server *s = j->s;
    oai_policy pol = {.ignore_unknown = s->cfg.unknown_fields_ignore};
    switch (j->kind) {
    case WORK_RESPONSES:
        if (api_responses_parse(&j->r, body, len, &pol, store_lookup, s->store, &j->e))
            return TPS_EINVAL;
        if (j->r.store && !s->cfg.response_store.max_entries) {
            j->parsed = true;
            return oai_error_set(&j->e, 400, "invalid_request_error", "store", "invalid_value",
                                 "this server keeps no responses (--response-store-entries 0): "
                                 "send store: false");
        }
        return 0;
    case WORK_MESSAGES:
    case WORK_COUNT_TOKENS:
        return api_messages_parse(&j->r, body, len, j->kind == WORK_COUNT_TOKENS, &pol, &j->e);
    default:
        return oai_parse_ex(&j->r, j->kind == WORK_COMPLETION ? OAI_COMPLETION : OAI_CHAT, body,
                            len, &pol, &j->e);
    }
}

/* Completions: parse, render, tokenize, the prompt-length limit, tools. */
static void prepare_completion(work_job *j, const char *body, size_t len) {
    server *s = j->s;
    if (parse_body(j, body, len)) {
        j->failed = true;
        return;
    }
    oai_kind kind = j->r.kind;
    j->parsed = true;
    if (cancelled(j)) return;
    if (build_prompt(s, &j->r, j, &j->e)) {
        j->failed = true;
        return;
    }
    if (s->cfg.max_prompt_tokens && j->n_ids > s->cfg.max_prompt_tokens) {
        j->failed = true;
        oai_error_set(&j->e, 400, "invalid_request_error", kind == OAI_CHAT ? "messages" : "prompt",
                      "context_length_exceeded",
                      "the prompt has %zu tokens; this server allows at most %u "
                      "(--max-prompt-tokens)",
                      j->n_ids, s->cfg.max_prompt_tokens);
        return;
    }
    if (kind == OAI_CHAT && prepare_tools(s, &j->r, &j->e)) j->failed = true;
    if (!j->failed && j->kind == WORK_COUNT_TOKENS) /* /v1/messages/count_tokens: no more */
        sbuf_printf(&j->reply, "{\"input_tokens\":%zu}", j->n_ids);
}

/* POST /apply-template {messages, tools?, chat_template_kwargs?,
 * add_generation_prompt?, continue_final_message?} -> {"prompt": text}
 * (llama-server's): the chat request's prompt, rendered as a chat
 * completion would render it, nothing run. */
static void prepare_apply(work_job *j, const char *body, size_t len) {
    if (oai_parse(&j->r, OAI_CHAT, body, len, &j->e)) {
        j->failed = true;
        return;
    }
    j->parsed = true;
    sbuf text;
    sbuf_init(&text);
    if (render_chat(j, &j->r, &text, &j->e)) {
        j->failed = true;
    } else {
        sbuf_adds(&j->reply, "{\"prompt\":");
        sbuf_json_str(&j->reply, text.p ? text.p : "", text.len);
        sbuf_adds(&j->reply, "}");
    }
    sbuf_free(&text);
}

/* The request's grammar compiled within the per-request limits, or found
 * in the cache, and room reserved in the server's budget for its choices'
 * recognizers; else j fails with a 400 naming the field (over a limit
 * too), or a 503 when the budget has no room now. */
static void compile_grammar(work_job *j) {
    server *s = j->s;
    const oai_request *r = &j->r;
    size_t reserve = (size_t)(r->n ? r->n : 1) * s->cursor_bytes;
    tps_err err = {{0}};
    bool hit = false;
    int rc = engine_constraints_prepare(s->eng, &err);
    if (!rc)
        rc = constrain_compile(s->grammars, r->grammar, r->grammar_len, reserve, &j->prog, &hit,
                               &err);
    if (!rc) {
        j->prog_reserve = reserve;
        return;
    }
    j->failed = true;
    if (rc == TPS_EFULL)
        oai_error_set(&j->e, 503, "unavailable_error", NULL, "constraint_memory_full", "%s",
                      err.msg);
    else
        oai_constraint_error(&j->e, rc, r->grammar_param ? r->grammar_param : "grammar", err.msg);
}

static bool needs_compile(const work_job *j) {
    return !j->failed && j->parsed && j->r.grammar && !j->prog && j->kind != WORK_COUNT_TOKENS;
}

/* Parses, renders and tokenizes the body, then frees it. */
static void prepare_body(work_job *j) {
    const char *body = (const char *)evbuffer_pullup(j->body, -1);
    size_t len = evbuffer_get_length(j->body);
    if (!body) body = "";
    static void (*const PREPARE[])(work_job *, const char *, size_t) = {
        [WORK_COMPLETION] = prepare_completion, [WORK_CHAT] = prepare_completion,
        [WORK_TOKENIZE] = prepare_tokenize,     [WORK_DETOKENIZE] = prepare_detokenize,
        [WORK_APPLY_TEMPLATE] = prepare_apply,  [WORK_RESPONSES] = prepare_completion,
        [WORK_MESSAGES] = prepare_completion,   [WORK_COUNT_TOKENS] = prepare_completion,
    };
    PREPARE[j->kind](j, body, len);
    /* the body is no longer needed: free it here, off the HTTP thread */
    evbuffer_free(j->body);
    j->body = NULL;
    j->prepared = true;
}

void server_work_prepare(work_job *j) {
    if (!j->prepared && !cancelled(j)) prepare_body(j);
    if (needs_compile(j) && !cancelled(j)) compile_grammar(j);
    if (cancelled(j)) { /* whatever it came to: only a client still there reads this */
        j->failed = true;
        oai_error_set(&j->e, 503, "unavailable_error", NULL, "cancelled",
                      "the request was cancelled before it ran: the server is shutting down");
    }
}

void server_work_job_free(work_job *j) {
    if (!j) return;
    constrain_release(j->s->grammars, j->prog, j->prog_reserve);
    if (j->body) evbuffer_free(j->body);
    if (j->parsed) oai_request_free(&j->r);
    free(j->ids);
    sbuf_free(&j->reply);
    free(j);
}

/* ---------------------------------------------------------------------------
 * Completions: submit (HTTP thread)
 * ------------------------------------------------------------------------- */

/* n within 1 .. --max-n (the parser checked >= 1), and within the
 * sequences the engine runs at once: every choice is a sequence, and all
 * of them must be able to run together. */
static int check_n(server *s, uint32_t n, oai_error *e) {
    if (n > s->cfg.max_n)
        return oai_error_set(e, 400, "invalid_request_error", "n", "invalid_value",
                             "n is %u; this server allows at most %u choices per request "
                             "(--max-n)",
                             n, s->cfg.max_n);
    admit_pool pool;
    engine_admit_pool(s->eng, &pool);
    tps_err why;
    if (admit_choices(&pool, n, &why)) /* the engine's rule, asked before the prompt is built */
        return oai_error_set(e, 400, "invalid_request_error", "n", "invalid_value", "%s", why.msg);
    return 0;
}

/* The engine's "cannot fit" (TPS_ERANGE) as a 400 with its message. The
 * prompt is to blame when it, with max_tokens, is over the context; else,
 * with several choices, n is (their KV blocks together are over the pool). */
static void erange_error(server *s, const oai_request *r, size_t n_prompt, uint32_t max_tokens,
                         const char *msg, oai_error *e) {
    uint64_t ctx = s->model->cfg.ctx_len;
    bool fits_ctx = n_prompt < ctx && (uint64_t)n_prompt + max_tokens <= ctx;
    if (r->n > 1 && fits_ctx)
        oai_error_set(e, 400, "invalid_request_error", "n", "invalid_value", "%s", msg);
    else
        oai_error_set(e, 400, "invalid_request_error", r->kind == OAI_CHAT ? "messages" : "prompt",
                      "context_length_exceeded", "%s", msg);
}

/* The most tokens n choices of a prompt can generate with the whole KV
 * pool and the context (the engine's own rule, engine/cost/admit.h); 0 when not
 * even one fits. */
static uint64_t pool_room(server *s, size_t n_prompt, uint32_t n) {
    admit_pool pool;
    engine_admit_pool(s->eng, &pool);
    return admit_room(&pool, n_prompt, n);
}

/* engine_submit's refusal rc (message msg) as the answer. */
static void submit_error(server *s, const oai_request *r, size_t n_prompt, uint32_t max_tokens,
                         int rc, const char *msg, oai_error *e) {
    if (rc == TPS_EFULL)
        oai_error_set(e, 429, "rate_limit_error", NULL, "queue_full", "%s; retry after a second",
                      msg);
    else if (rc == TPS_ERANGE)
        erange_error(s, r, n_prompt, max_tokens, msg, e);
    else if (rc == TPS_EINVAL)
        oai_error_set(e, 400, "invalid_request_error", r->kind == OAI_CHAT ? "messages" : "prompt",
                      "invalid_value", "%s", msg);
    else
        oai_error_set(e, 500, "server_error", NULL, NULL, "%s", msg);
}

/* max_tokens as given, within --max-tokens-cap; not given: OpenAI's 16
 * for completions, the context for chat, never over the cap nor over what
 * the KV pool holds beside the prompt (a request that names no max_tokens
 * is never refused for it). */
static int max_tokens_of(server *s, const work_job *j, uint32_t *out, oai_error *e) {
    const oai_request *r = &j->r;
    uint32_t cap = s->cfg.max_tokens_cap;
    *out = r->max_tokens;
    if (cap && r->max_tokens > cap)
        return oai_error_set(e, 400, "invalid_request_error", "max_tokens", "invalid_value",
                             "max_tokens is %u; this server allows at most %u (--max-tokens-cap)",
                             r->max_tokens, cap);
    if (r->max_tokens) return 0;
    uint64_t ctx = s->model->cfg.ctx_len, room = ctx > j->n_ids ? ctx - j->n_ids : 0;
    uint64_t pool = pool_room(s, j->n_ids, r->n ? r->n : 1);
    if (r->kind == OAI_COMPLETION) room = room < 16 ? room : 16;
    if (cap && room > cap) room = cap;
    if (pool && room > pool) room = pool;
    *out = (uint32_t)room; /* 0 (no room): the engine says why */
    return 0;
}

/* Stop ids: the template's end-of-turn (chat) and the request's
 * stop_token_ids, each checked against the vocabulary, as are logit_bias's
 * ids. */
static int stop_ids_of(server *s, const oai_request *r, int32_t *ids, size_t *n, oai_error *e) {
    for (size_t i = 0; i < r->n_logit_bias; i++)
        if ((uint32_t)r->logit_bias[i].id >= s->model->cfg.n_vocab)
            return oai_error_set(e, 400, "invalid_request_error", "logit_bias", "invalid_value",
                                 "logit_bias: token id %d is outside the vocabulary (0..%u)",
                                 r->logit_bias[i].id, s->model->cfg.n_vocab - 1);
    *n = 0;
    if (r->kind == OAI_CHAT && s->tmpl_eot_id >= 0) ids[(*n)++] = s->tmpl_eot_id;
    for (size_t i = 0; i < r->n_stop_ids; i++) {
        if ((uint32_t)r->stop_ids[i] >= s->model->cfg.n_vocab)
            return oai_error_set(e, 400, "invalid_request_error", "stop_token_ids", "invalid_value",
                                 "stop_token_ids[%zu] = %d is outside the vocabulary (0..%u)", i,
                                 r->stop_ids[i], s->model->cfg.n_vocab - 1);
        ids[(*n)++] = r->stop_ids[i];
    }
    return 0;
}

/* The request's seed (a fresh one from the server's generator when it
 * names none: below 2^53, so every JSON reader gets it back exactly), and
 * its reasoning: a chat answer of a model that thinks in <think> blocks is
 * split, the block open from the start when the prompt left one open, and
 * no block at all when the prompt closed an empty one (thinking turned
 * off by the template, enable_thinking false). Harmony channels are split
 * by the server alone; the engine tracks the analysis channel only to
 * bound it by a thinking budget. */
static int seed_and_reasoning(server *s, work_job *j, req_ctx *c, engine_request *er,
                              oai_error *e) {
    oai_request *r = &j->r;
    if (!r->seeded) er->sampling.seed = tps_rng_next(&s->seed_rng) >> 11;
    c->seed = er->sampling.seed;
    er->think = THINK_OFF;
    er->think_budget = -1;
    bool tokens = s->think_open_id >= 0 && s->think_close_id >= 0;
    if (r->kind == OAI_CHAT && s->reasoning == CHAT_REASON_THINK)
        er->think = tokens ? think_prompt_state(s->tok, j->ids, j->n_ids, s->think_open_id,
                                                s->think_close_id)
                           : j->think_text;
    c->think = er->think;
    c->harmony = r->kind == OAI_CHAT && s->reasoning == CHAT_REASON_HARMONY;
    if (c->harmony) /* the engine bounds the analysis channel (a budget) */
        er->think = THINK_START, er->think_kind = THINK_HARMONY;
    if (r->think_budget >= 0 && er->think == THINK_OFF)
        return oai_error_set(e, 400, "invalid_request_error", "thinking_token_budget",
                             "unsupported_parameter", "%s",
                             s->reasoning == CHAT_REASON_THINK && r->kind == OAI_CHAT
                                 ? "a thinking budget needs thinking: this prompt closed the "
                                   "block (the template turned thinking off, e.g. "
                                   "enable_thinking false)"
                                 : "a thinking budget needs a model that thinks (<think> ... "
                                   "</think>, or gpt-oss's analysis channel); this one does not");
    er->think_budget = r->think_budget;
    c->reasoning = r->reasoning;
    for (uint32_t i = 0; i < c->n_choices; i++)
        reason_split_init(&c->choice[i].split, c->think, c->harmony);
    return 0;
}

/* A Responses or Messages request's writer: its id in the dialect's form
 * ("resp_...", "msg_..."), its echo, and Responses' history and store. */
static int dialect_ctx(server *s, oai_request *r, req_ctx *c) {
    if (r->dialect == OAI_DIALECT_CHAT) return 0;
    const char *dash = strchr(c->id, '-');
    char id[sizeof c->id];
    snprintf(id, sizeof id, "%s_%.40s", r->dialect == OAI_DIALECT_RESPONSES ? "resp" : "msg",
             dash ? dash + 1 : c->id);
    memcpy(c->id, id, sizeof id);
    c->api = malloc(sizeof *c->api);
    if (!c->api ||
        api_stream_init(c->api, r->dialect, c->id, s->model_id, c->meta.created, r->echo,
                        c->n_prompt) ||
        api_stream_set_stops(c->api, r->stop, r->n_stop))
        return TPS_ENOMEM;
    c->store = r->store;
    c->api->summary = r->reasoning_summary;
    c->history = r->history; /* the request's reference, moved */
    r->history = NULL;
    return 0;
}

/* The prepared request into the engine; 0, or the error to answer with. */
static int submit_completion(server *s, struct evhttp_request *req, work_job *j, oai_error *e) {
    oai_request *r = &j->r;
    oai_kind kind = r->kind;
    uint32_t max_tokens;
    if (max_tokens_of(s, j, &max_tokens, e) || check_n(s, r->n, e)) return TPS_EINVAL;

    const char *stops[OAI_MAX_STOP + 1];
    size_t n_stop = r->n_stop, n_stop_ids = 0;
    memcpy(stops, r->stop, r->n_stop * sizeof *stops);
    int32_t stop_ids[OAI_MAX_STOP_IDS + 1];
    if (kind == OAI_CHAT && s->tmpl_eot_as_stop) stops[n_stop++] = s->prompt.eot;
    if (stop_ids_of(s, r, stop_ids, &n_stop_ids, e)) return TPS_EINVAL;
    if (r->grammar && !j->prog) /* compile_grammar either compiled it or failed the job */
        return oai_error_set(e, 500, "server_error", NULL, NULL, "the grammar was not compiled");
    req_ctx *c = req_ctx_new(s, req, kind, r->n);
    if (!c) return oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    c->stream = r->stream;
    c->logprobs = r->logprobs;
    c->tools = kind == OAI_CHAT && r->tool_choice != TOOL_CHOICE_NONE;
    c->tfmt = s->prompt.tools;
    c->tset = c->tools ? tools_set_new(r->tools, r->n_tools) : NULL;
    c->include_usage = r->stream && r->include_usage;
    c->n_prompt = (uint32_t)j->n_ids;
    if (dialect_ctx(s, r, c)) {
        c->req = NULL;
        req_ctx_free(c);
        return oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    }
    engine_request er = {
        .prompt = j->ids,
        .n_prompt = j->n_ids,
        .max_tokens = max_tokens,
        .sampling = r->sampling,
        .stop = stops,
        .n_stop = n_stop,
        .stop_ids = n_stop_ids ? stop_ids : NULL,
        .n_stop_ids = n_stop_ids,
        .n = r->n, /* choice i samples with seed + i: choices differ */
        .logit_bias = r->logit_bias,
        .n_logit_bias = r->n_logit_bias,
        .logprobs = r->logprobs,
        .top_logprobs = r->top_logprobs,
        .min_tokens = r->min_tokens,
        .include_stop_str = r->include_stop_str,
        .render_special = !r->skip_special,
        .grammar_prog = j->prog, /* compiled off this thread (compile_grammar) */
        .user = c,
    };
    if (seed_and_reasoning(s, j, c, &er, e)) {
        c->req = NULL;
        req_ctx_free(c);
        return TPS_EINVAL;
    }
    tps_err err = {{0}};
    int rc = engine_submit(s->eng, &er, &c->engine_id, &err);
    if (rc == 0) {
        c->prog = j->prog; /* the request holds it (and its reservation) from here */
        c->prog_reserve = j->prog_reserve;
        j->prog = NULL;
        req_ctx_start(c);
        return 0;
    }
    c->req = NULL;
    req_ctx_free(c);
    submit_error(s, r, j->n_ids, max_tokens, rc, err.msg, e);
    return rc;
}

/* A prepared job, already detached from its connection by the caller:
 * answered, or submitted to the engine (HTTP thread). */
void server_work_finish(work_job *j) {
    server *s = j->s;
    struct evhttp_request *req = j->req;
    if (!req) { /* the client left while its body was prepared */
        server_work_job_free(j);
        return;
    }
    oai_error e;
    oai_dialect d = j->kind == WORK_RESPONSES ? OAI_DIALECT_RESPONSES
                    : j->kind == WORK_MESSAGES || j->kind == WORK_COUNT_TOKENS
                        ? OAI_DIALECT_MESSAGES
                        : OAI_DIALECT_CHAT;
    if (j->parsed && j->r.n_ignored) { /* --unknown-fields ignore dropped some */
        evhttp_add_header(evhttp_request_get_output_headers(req), "X-Tps-Ignored-Fields",
                          j->r.ignored);
        s->ignored_fields += j->r.n_ignored;
        s->ignored_requests++;
    }
    if (j->failed) {
        api_error_rename(&j->e, d);
        server_reply_error(s, req, &j->e);
    } else if (s->draining) {
        server_reply_unavailable(s, req);
    } else if (j->kind == WORK_TOKENIZE || j->kind == WORK_DETOKENIZE ||
               j->kind == WORK_APPLY_TEMPLATE || j->kind == WORK_COUNT_TOKENS) {
        server_reply_json(s, req, 200, &j->reply);
    } else if (submit_completion(s, req, j, &e)) {
        api_error_rename(&e, d);
        server_reply_error(s, req, &e);
    }
    server_work_job_free(j);
}
