/* The HTTP routes: dispatch by path and method, authentication, the
 * synchronous endpoints (/health, /v1/models, /metrics, /tokenize,
 * /detokenize) and the admission of completion requests into the engine.
 * Streaming the answers back is server_stream.c's.
 *
 * Not here: JSON request parsing (openai.c), response bodies (sse.c). */
#include "server/server_internal.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "metrics/clock.h"

/* ---------------------------------------------------------------------------
 * Replies
 * ------------------------------------------------------------------------- */

/* Sends body with status; the request is finished (and may be freed) after. */
static void reply(server *s, struct evhttp_request *req, int status, const char *ctype,
                  const char *body, size_t len) {
    server_conn_busy(s, req, false);
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", ctype);
    struct evbuffer *buf = evbuffer_new();
    if (buf) evbuffer_add(buf, body, len);
    evhttp_send_reply(req, status, NULL, buf);
    if (buf) evbuffer_free(buf);
}

static void reply_json(server *s, struct evhttp_request *req, int status, const sbuf *b) {
    if (sbuf_failed(b)) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":"
                                  "\"server_error\",\"param\":null,\"code\":null}}";
        reply(s, req, 500, "application/json", oom, sizeof oom - 1);
        return;
    }
    reply(s, req, status, "application/json", b->p ? b->p : "", b->len);
}

void server_reply_error(server *s, struct evhttp_request *req, const oai_error *e) {
    sbuf b;
    sbuf_init(&b);
    oai_error_json(e, &b);
    if (e->status == 429 || e->status == 503)
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
    if (e->status == 401)
        evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate", "Bearer");
    reply_json(s, req, e->status, &b);
    sbuf_free(&b);
}

static void reply_err(server *s, struct evhttp_request *req, int status, const char *type,
                      const char *param, const char *code, const char *msg) {
    oai_error e;
    oai_error_set(&e, status, type, param, code, "%s", msg);
    server_reply_error(s, req, &e);
}

/* 503 while loading or draining; true when the request was answered. */
static bool unavailable(server *s, struct evhttp_request *req) {
    if (!atomic_load(&s->ready)) {
        reply_err(s, req, 503, "unavailable_error", NULL, "model_loading",
                  "the model is still loading; retry shortly");
        return true;
    }
    if (s->draining) {
        reply_err(s, req, 503, "unavailable_error", NULL, "server_draining",
                  "the server is shutting down and accepts no new requests");
        return true;
    }
    return false;
}

/* The request body, contiguous; NULL (after a 413) when over the limit. */
static const char *body_of(server *s, struct evhttp_request *req, size_t *len) {
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    *len = evbuffer_get_length(in);
    if (*len > s->cfg.max_body_bytes) {
        oai_error e;
        oai_error_set(&e, 413, "invalid_request_error", NULL, "request_too_large",
                      "the request body has %zu bytes; this server accepts at most %zu "
                      "(--max-body-bytes)",
                      *len, s->cfg.max_body_bytes);
        server_reply_error(s, req, &e);
        return NULL;
    }
    const char *p = (const char *)evbuffer_pullup(in, -1);
    return p ? p : "";
}

/* ---------------------------------------------------------------------------
 * Synchronous endpoints
 * ------------------------------------------------------------------------- */

static void handle_health(server *s, struct evhttp_request *req) {
    if (unavailable(s, req)) return;
    static const char ok[] = "{\"status\":\"ok\"}";
    reply(s, req, 200, "application/json", ok, sizeof ok - 1);
}

static void handle_models(server *s, struct evhttp_request *req) {
    if (!atomic_load(&s->ready)) {
        unavailable(s, req);
        return;
    }
    sbuf b;
    sbuf_init(&b);
    sbuf_adds(&b, "{\"object\":\"list\",\"data\":[{\"id\":");
    sbuf_json_str(&b, s->model_id, strlen(s->model_id));
    sbuf_printf(&b,
                ",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"tps\","
                "\"meta\":{\"n_ctx\":%u,\"n_vocab\":%u,\"chat_template\":\"%s\"}}]}",
                (long long)time(NULL), s->model->cfg.ctx_len, s->model->cfg.n_vocab,
                chat_tmpl_name(s->tmpl));
    reply_json(s, req, 200, &b);
    sbuf_free(&b);
}

static void handle_metrics(server *s, struct evhttp_request *req) {
    if (!atomic_load(&s->ready)) {
        unavailable(s, req);
        return;
    }
    sbuf b;
    sbuf_init(&b);
    server_metrics_render(s, &b);
    if (sbuf_failed(&b))
        reply_err(s, req, 500, "server_error", NULL, NULL, "out of memory");
    else
        reply(s, req, 200, PROM_CONTENT_TYPE, b.p ? b.p : "", b.len);
    sbuf_free(&b);
}

/* Parses a JSON object body for /tokenize and /detokenize; NULL after a 400. */
static json_t *json_body(server *s, struct evhttp_request *req) {
    size_t len;
    const char *body = body_of(s, req, &len);
    if (!body) return NULL;
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_ALLOW_NUL, &jerr);
    if (!root || !json_is_object(root)) {
        oai_error e;
        if (root)
            oai_error_set(&e, 400, "invalid_request_error", NULL, "invalid_json",
                          "the request body must be a JSON object");
        else
            oai_error_set(&e, 400, "invalid_request_error", NULL, "invalid_json",
                          "invalid JSON in the request body at line %d, column %d: %s", jerr.line,
                          jerr.column, jerr.text);
        server_reply_error(s, req, &e);
        json_decref(root);
        return NULL;
    }
    return root;
}

/* POST /tokenize {"content": str, "add_special": bool, "parse_special": bool}
 * -> {"tokens": [ids]} (llama.cpp's defaults: add_special false,
 * parse_special true). */
static void handle_tokenize(server *s, struct evhttp_request *req) {
    if (unavailable(s, req)) return;
    json_t *root = json_body(s, req);
    if (!root) return;
    json_t *content = json_object_get(root, "content");
    json_t *add = json_object_get(root, "add_special");
    json_t *parse = json_object_get(root, "parse_special");
    if (!json_is_string(content)) {
        reply_err(s, req, 400, "invalid_request_error", "content", "invalid_type",
                  "content must be a string");
    } else if ((add && !json_is_boolean(add)) || (parse && !json_is_boolean(parse))) {
        reply_err(s, req, 400, "invalid_request_error",
                  add && !json_is_boolean(add) ? "add_special" : "parse_special", "invalid_type",
                  "add_special and parse_special must be booleans");
    } else {
        unsigned flags = (json_is_true(add) ? TOK_ENCODE_ADD_SPECIAL : 0) |
                         (!parse || json_is_true(parse) ? TOK_ENCODE_PARSE_SPECIAL : 0);
        int32_t *ids = NULL;
        size_t n = 0;
        tps_err err = {{0}};
        if (tokenizer_encode_alloc(s->tok, json_string_value(content), json_string_length(content),
                                   flags, &ids, &n, &err)) {
            reply_err(s, req, 500, "server_error", NULL, NULL, err.msg);
        } else {
            sbuf b;
            sbuf_init(&b);
            sbuf_adds(&b, "{\"tokens\":[");
            for (size_t i = 0; i < n; i++)
                sbuf_printf(&b, i ? ",%d" : "%d", ids[i]);
            sbuf_adds(&b, "]}");
            reply_json(s, req, 200, &b);
            sbuf_free(&b);
        }
        free(ids);
    }
    json_decref(root);
}

/* POST /detokenize {"tokens": [ids]} -> {"content": str}: the pieces
 * concatenated, control tokens rendered (llama.cpp's tokens_to_str). */
static void handle_detokenize(server *s, struct evhttp_request *req) {
    if (unavailable(s, req)) return;
    json_t *root = json_body(s, req);
    if (!root) return;
    json_t *toks = json_object_get(root, "tokens");
    size_t n = json_is_array(toks) ? json_array_size(toks) : 0;
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!json_is_array(toks)) {
        reply_err(s, req, 400, "invalid_request_error", "tokens", "invalid_type",
                  "tokens must be an array of token ids");
        goto done;
    }
    if (!ids) {
        reply_err(s, req, 500, "server_error", NULL, NULL, "out of memory");
        goto done;
    }
    uint32_t nv = tokenizer_n_vocab(s->tok);
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(toks, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 ||
            json_integer_value(t) >= (json_int_t)nv) {
            oai_error e;
            oai_error_set(&e, 400, "invalid_request_error", "tokens", "invalid_value",
                          "tokens[%zu] is not a token id of this vocabulary (0..%u)", i, nv - 1);
            server_reply_error(s, req, &e);
            goto done;
        }
        ids[i] = (int32_t)json_integer_value(t);
    }
    char *text = NULL;
    size_t len = 0;
    tps_err err = {{0}};
    if (tokenizer_decode_alloc(s->tok, ids, n, TOK_DECODE_RAW_SPACES | TOK_DECODE_RENDER_SPECIAL,
                               &text, &len, &err)) {
        reply_err(s, req, 500, "server_error", NULL, NULL, err.msg);
        goto done;
    }
    sbuf b;
    sbuf_init(&b);
    sbuf_adds(&b, "{\"content\":");
    sbuf_json_str(&b, text ? text : "", len);
    sbuf_adds(&b, "}");
    reply_json(s, req, 200, &b);
    sbuf_free(&b);
    free(text);
done:
    free(ids);
    json_decref(root);
}

/* ---------------------------------------------------------------------------
 * Completions: parse, build the prompt, submit
 * ------------------------------------------------------------------------- */

/* The tool format of the served template; the generic one when the model
 * file has no template (nothing says it was trained on ChatML's tools). */
static tool_format tool_fmt(const server *s) {
    return s->tmpl_guessed ? TOOL_FMT_GENERIC : tools_format(s->tmpl);
}

/* Strings a rewritten conversation owns, freed together. */
typedef struct owned_text {
    char **p;
    size_t n;
} owned_text;

static const char *keep(owned_text *o, sbuf *b) {
    char **p = realloc(o->p, (o->n + 1) * sizeof *p);
    if (!p || sbuf_failed(b)) return NULL;
    o->p = p;
    sbuf_adds(b, ""); /* a buffer even when empty */
    o->p[o->n++] = b->p;
    const char *t = b->p;
    b->p = NULL;
    sbuf_free(b);
    return t ? t : "";
}

/* The conversation with tools written in as the template's tool format
 * expects (tools.h): the tool list in the system message (or, mistral,
 * before the last user turn), earlier calls in the assistant messages, tool
 * results as the format's turns. *out is a new array (freed by the caller)
 * whose strings o owns. */
static int tool_messages(server *s, const oai_request *r, chat_msg **out, size_t *n_out,
                         owned_text *o) {
    tool_format f = tool_fmt(s);
    bool list = r->tool_choice != TOOL_CHOICE_NONE && r->n_tools;
    bool sys_list = list && f != TOOL_FMT_MISTRAL;
    bool has_sys = r->n_msgs && !strcmp(r->msgs[0].role, "system");
    chat_msg *m = calloc(r->n_msgs + 1, sizeof *m);
    if (!m) return TPS_ENOMEM;
    size_t n = 0, last_user = SIZE_MAX;
    if (sys_list && !has_sys) m[n++] = (chat_msg){.role = "system", .content = ""};
    for (size_t i = 0; i < r->n_msgs; i++) {
        m[n] = r->msgs[i];
        if (!strcmp(m[n].role, "user")) last_user = n;
        sbuf b;
        sbuf_init(&b);
        const json_t *calls = r->msg_tool_calls[i];
        if (calls && json_array_size(calls)) {
            sbuf_add(&b, m[n].content, m[n].content_len);
            if (m[n].content_len) sbuf_adds(&b, "\n");
            for (size_t k = 0; k < json_array_size(calls); k++) {
                json_t *fn = json_object_get(json_array_get(calls, k), "function");
                tools_render_call(f, json_string_value(json_object_get(fn, "name")),
                                  json_string_value(json_object_get(fn, "arguments")), k == 0,
                                  k + 1 == json_array_size(calls), &b);
            }
        } else if (!strcmp(m[n].role, "tool")) {
            m[n].role = f == TOOL_FMT_LLAMA3 ? "ipython" : "user";
            tools_render_result(f, m[n].content, m[n].content_len, &b);
        } else {
            n++;
            continue;
        }
        if (!(m[n].content = keep(o, &b))) return free(m), TPS_ENOMEM;
        m[n].content_len = strlen(m[n].content);
        n++;
    }
    if (list) {
        size_t at = sys_list ? 0 : last_user;
        if (at != SIZE_MAX) {
            sbuf b;
            sbuf_init(&b);
            if (!sys_list) tools_render_list(f, r->tools, r->n_tools, &b);
            sbuf_add(&b, m[at].content, m[at].content_len);
            if (sys_list) {
                if (m[at].content_len) sbuf_adds(&b, "\n\n");
                tools_render_list(f, r->tools, r->n_tools, &b);
            }
            if (!(m[at].content = keep(o, &b))) return free(m), TPS_ENOMEM;
            m[at].content_len = strlen(m[at].content);
        }
    }
    *out = m;
    *n_out = n;
    return 0;
}

/* The prompt's token ids (malloc'ed) for a parsed request. */
static int build_prompt(server *s, const oai_request *r, int32_t **ids, size_t *n, oai_error *e) {
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
    const chat_msg *msgs = r->msgs;
    size_t n_msgs = r->n_msgs;
    chat_msg *rewritten = NULL;
    owned_text own = {0};
    bool tool_turns = r->tool_choice != TOOL_CHOICE_NONE;
    for (size_t i = 0; i < r->n_msgs && !tool_turns; i++)
        tool_turns = r->msg_tool_calls[i] || !strcmp(r->msgs[i].role, "tool");
    int rc = 0;
    if (tool_turns && tool_messages(s, r, &rewritten, &n_msgs, &own)) {
        for (size_t i = 0; i < own.n; i++)
            free(own.p[i]);
        free(own.p);
        return oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    }
    if (rewritten) msgs = rewritten;
    rc = chat_tmpl_render(s->tmpl, msgs, n_msgs, true, &text, &err);
    free(rewritten);
    for (size_t i = 0; i < own.n; i++)
        free(own.p[i]);
    free(own.p);
    if (rc)
        oai_error_set(e, rc == TPS_ENOMEM ? 500 : 400,
                      rc == TPS_ENOMEM ? "server_error" : "invalid_request_error", "messages",
                      "invalid_value", "%s", err.msg);
    else if (tokenizer_encode_alloc(s->tok, text.p ? text.p : "", text.len, flags, ids, n, &err))
        rc = oai_error_set(e, 500, "server_error", "messages", NULL, "%s", err.msg);
    sbuf_free(&text);
    return rc;
}

/* n within 1 .. --max-n (the parser checked >= 1), and within the
 * sequences the engine runs at once: every choice is a sequence, and all
 * of them must be able to run together. */
static int check_n(server *s, uint32_t n, oai_error *e) {
    if (n > s->cfg.max_n)
        return oai_error_set(e, 400, "invalid_request_error", "n", "invalid_value",
                             "n is %u; this server allows at most %u choices per request "
                             "(--max-n)",
                             n, s->cfg.max_n);
    uint32_t seqs = engine_get_params(s->eng)->max_seqs;
    if (n > seqs)
        return oai_error_set(e, 400, "invalid_request_error", "n", "invalid_value",
                             "n is %u; this server runs at most %u sequences at once "
                             "(--max-seqs), one per choice",
                             n, seqs);
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

static void handle_completion(server *s, struct evhttp_request *req, oai_kind kind) {
    if (unavailable(s, req)) return;
    size_t len;
    const char *body = body_of(s, req, &len);
    if (!body) return;
    oai_request r;
    oai_error e;
    if (oai_parse(&r, kind, body, len, &e)) {
        server_reply_error(s, req, &e);
        return;
    }
    int32_t *ids = NULL;
    size_t n_ids = 0;
    req_ctx *c = NULL;
    if (build_prompt(s, &r, &ids, &n_ids, &e)) goto fail;
    if (s->cfg.max_prompt_tokens && n_ids > s->cfg.max_prompt_tokens) {
        oai_error_set(&e, 400, "invalid_request_error", kind == OAI_CHAT ? "messages" : "prompt",
                      "context_length_exceeded",
                      "the prompt has %zu tokens; this server allows at most %u "
                      "(--max-prompt-tokens)",
                      n_ids, s->cfg.max_prompt_tokens);
        goto fail;
    }

    uint32_t max_tokens = r.max_tokens;
    uint32_t cap = s->cfg.max_tokens_cap;
    if (cap && max_tokens > cap) {
        oai_error_set(&e, 400, "invalid_request_error", "max_tokens", "invalid_value",
                      "max_tokens is %u; this server allows at most %u (--max-tokens-cap)",
                      max_tokens, cap);
        goto fail;
    }
    /* Not given: OpenAI's 16 for completions, the context for chat; never
     * over the cap (a request that names no max_tokens is never refused). */
    if (!max_tokens && kind == OAI_COMPLETION) max_tokens = 16;
    if (cap && (!max_tokens || max_tokens > cap)) max_tokens = cap;

    if (check_n(s, r.n, &e)) goto fail;
    bool tools = kind == OAI_CHAT && r.tool_choice != TOOL_CHOICE_NONE;
    if (tools && r.stream && r.logprobs) {
        oai_error_set(&e, 400, "invalid_request_error", "logprobs", "unsupported_parameter",
                      "logprobs with tools is supported only without stream: a streamed answer "
                      "that may hold tool calls is sent when it is complete");
        goto fail;
    }
    if (tools && (r.tool_choice == TOOL_CHOICE_REQUIRED || r.tool_choice == TOOL_CHOICE_NAMED)) {
        sbuf g;
        sbuf_init(&g);
        tps_err terr = {{0}};
        int trc = tools_grammar(tool_fmt(s), r.tools, r.n_tools, r.tool_name, r.parallel_tool_calls,
                                &g, &terr);
        if (trc) {
            sbuf_free(&g);
            oai_error_set(&e, trc == TPS_ENOMEM ? 500 : 400, "invalid_request_error", "tools",
                          "invalid_value", "tools: %s", terr.msg);
            goto fail;
        }
        r.grammar = g.p; /* r owns it from here: oai_request_free frees it */
        r.grammar_len = g.len;
    }

    const char *stops[OAI_MAX_STOP + 1];
    size_t n_stop = r.n_stop;
    memcpy(stops, r.stop, r.n_stop * sizeof *stops);
    int32_t stop_id = s->tmpl_eot_id;
    if (kind == OAI_CHAT && s->tmpl_eot_as_stop) stops[n_stop++] = chat_tmpl_eot(s->tmpl);

    for (size_t i = 0; i < r.n_logit_bias; i++)
        if ((uint32_t)r.logit_bias[i].id >= s->model->cfg.n_vocab) {
            oai_error_set(&e, 400, "invalid_request_error", "logit_bias", "invalid_value",
                          "logit_bias: token id %d is outside the vocabulary (0..%u)",
                          r.logit_bias[i].id, s->model->cfg.n_vocab - 1);
            goto fail;
        }
    if (!(c = req_ctx_new(s, req, kind, r.n))) {
        oai_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        goto fail;
    }
    c->stream = r.stream;
    c->logprobs = r.logprobs;
    c->tools = tools;
    c->tfmt = tool_fmt(s);
    c->include_usage = r.stream && r.include_usage;
    c->n_prompt = (uint32_t)n_ids;
    engine_request er = {
        .prompt = ids,
        .n_prompt = n_ids,
        .max_tokens = max_tokens,
        .sampling = r.sampling,
        .stop = stops,
        .n_stop = n_stop,
        .stop_ids = kind == OAI_CHAT && stop_id >= 0 ? &stop_id : NULL,
        .n_stop_ids = kind == OAI_CHAT && stop_id >= 0 ? 1 : 0,
        .n = r.n, /* choice i samples with seed + i: choices differ even without a seed */
        .logit_bias = r.logit_bias,
        .n_logit_bias = r.n_logit_bias,
        .logprobs = r.logprobs,
        .top_logprobs = r.top_logprobs,
        .grammar = r.grammar,
        .grammar_len = r.grammar_len,
        .user = c,
    };
    tps_err err = {{0}};
    int rc = engine_submit(s->eng, &er, &c->engine_id, &err);
    if (rc == TPS_EFULL) {
        oai_error_set(&e, 429, "rate_limit_error", NULL, "queue_full", "%s; retry after a second",
                      err.msg);
        goto fail;
    } else if (rc == TPS_ERANGE) {
        erange_error(s, &r, n_ids, max_tokens, err.msg, &e);
        goto fail;
    } else if (rc == TPS_EINVAL) {
        oai_error_set(&e, 400, "invalid_request_error", kind == OAI_CHAT ? "messages" : "prompt",
                      "invalid_value", "%s", err.msg);
        goto fail;
    } else if (rc) {
        oai_error_set(&e, 500, "server_error", NULL, NULL, "%s", err.msg);
        goto fail;
    }
    free(ids);
    oai_request_free(&r);
    req_ctx_start(c);
    return;
fail:
    if (c) {
        c->req = NULL;
        req_ctx_free(c);
    }
    free(ids);
    oai_request_free(&r);
    server_reply_error(s, req, &e);
}

/* ---------------------------------------------------------------------------
 * Dispatch
 * ------------------------------------------------------------------------- */

/* Compares in time that depends only on the key's length, never on where
 * the first difference is. */
static bool key_matches(const char *given, size_t gl, const char *key) {
    size_t kl = strlen(key);
    volatile unsigned char d = (unsigned char)(gl != kl);
    for (size_t i = 0; i < kl; i++)
        d |= (unsigned char)(key[i] ^ (i < gl ? given[i] : 0));
    return d == 0;
}

static bool authorized(server *s, struct evhttp_request *req) {
    if (!s->api_key) return true;
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0) return false;
    h += 7;
    while (*h == ' ')
        h++;
    return key_matches(h, strlen(h), s->api_key);
}

enum { R_COMPLETIONS, R_CHAT, R_MODELS, R_HEALTH, R_METRICS, R_TOKENIZE, R_DETOKENIZE };

static const struct route {
    const char *path;
    enum evhttp_cmd_type method;
    int id;
    bool open; /* no API key needed */
} routes[] = {
    {"/v1/completions", EVHTTP_REQ_POST, R_COMPLETIONS, false},
    {"/v1/chat/completions", EVHTTP_REQ_POST, R_CHAT, false},
    {"/v1/models", EVHTTP_REQ_GET, R_MODELS, false},
    {"/health", EVHTTP_REQ_GET, R_HEALTH, true},
    {"/metrics", EVHTTP_REQ_GET, R_METRICS, true},
    {"/tokenize", EVHTTP_REQ_POST, R_TOKENIZE, false},
    {"/detokenize", EVHTTP_REQ_POST, R_DETOKENIZE, false},
};

void server_http_route(struct evhttp_request *req, void *arg) {
    server *s = arg;
    server_conn_busy(s, req, true);
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    if (!path || !path[0]) path = "/";
    const struct route *rt = NULL;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (!strcmp(path, routes[i].path)) rt = &routes[i];
    if (!rt) {
        oai_error e;
        oai_error_set(&e, 404, "not_found_error", NULL, "not_found",
                      "no route %.200s; see docs/api.md for the endpoints", path);
        server_reply_error(s, req, &e);
        return;
    }
    if (evhttp_request_get_command(req) != rt->method) {
        const char *m = rt->method == EVHTTP_REQ_POST ? "POST" : "GET";
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", m);
        oai_error e;
        oai_error_set(&e, 405, "invalid_request_error", NULL, "method_not_allowed",
                      "%s accepts only %s", rt->path, m);
        server_reply_error(s, req, &e);
        return;
    }
    if (!rt->open && !authorized(s, req)) {
        reply_err(s, req, 401, "authentication_error", NULL, "invalid_api_key",
                  "missing or wrong API key: send the header 'Authorization: Bearer KEY'");
        return;
    }
    switch (rt->id) {
    case R_COMPLETIONS:
        handle_completion(s, req, OAI_COMPLETION);
        break;
    case R_CHAT:
        handle_completion(s, req, OAI_CHAT);
        break;
    case R_MODELS:
        handle_models(s, req);
        break;
    case R_HEALTH:
        handle_health(s, req);
        break;
    case R_METRICS:
        handle_metrics(s, req);
        break;
    case R_TOKENIZE:
        handle_tokenize(s, req);
        break;
    case R_DETOKENIZE:
        handle_detokenize(s, req);
        break;
    }
}
