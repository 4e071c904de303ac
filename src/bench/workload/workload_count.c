/* Counting a prompt's tokens as the server will (workload_internal.h): with
 * the loaded tokenizer (a chat prompt after the tokenizer's chat template,
 * workload_chat.c), else the server's POST /tokenize reached as the load
 * client reaches the server, in the body shape it answers (llama.cpp's
 * {"content"} -> {"tokens"}, else vLLM's and SGLang's {"model", "prompt"}
 * -> {"count", "tokens"}), else not at all (one word per token). The only
 * place a workload meets the tokenizer's encoder. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "bench/workload/workload_internal.h"
#include "model/tokenizer.h" /* tokenizer_encode */

/* Special tokens in the text count as the server counts them: parsed. */
#define COUNT_FLAGS (TOK_ENCODE_ADD_SPECIAL | TOK_ENCODE_PARSE_SPECIAL)

static int64_t count_local(const struct tokenizer *tok, const char *text, size_t len) {
    int32_t one[1];
    size_t n = 0;
    tps_err e;
    int rc = tokenizer_encode(tok, text, len, COUNT_FLAGS, one, 1, &n, &e);
    return rc == 0 || rc == TPS_ERANGE ? (int64_t)n : -1;
}

/* The /tokenize body in shape `shape`. */
static char *tokenize_body(const wl_counter *c, int shape, const char *text) {
    json_t *req = shape == WL_TOKENIZE_PROMPT
                      ? json_pack("{s:s, s:b}", "prompt", text, "add_special_tokens", 1)
                      : json_pack("{s:s, s:b}", "content", text, "add_special", 1);
    if (req && shape == WL_TOKENIZE_PROMPT && c->model)
        json_object_set_new(req, "model", json_string(c->model));
    char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    return body;
}

/* One /tokenize call in shape `shape`: the count, -1 on failure; *status
 * the HTTP status (0: no answer). */
static int64_t count_server_as(wl_counter *c, int shape, const char *text, long *status) {
    char *body = tokenize_body(c, shape, text);
    *status = 0;
    if (!body) return -1;
    tps_err e;
    int rc = http_call_do(&c->call, body, &e);
    free(body);
    *status = rc ? 0 : c->call.status;
    if (rc || c->call.status != 200) return -1;
    json_t *j = json_loadb(c->call.body.p ? c->call.body.p : "", c->call.body.len, 0, NULL);
    json_t *count = json_object_get(j, "count"), *toks = json_object_get(j, "tokens");
    int64_t n = json_is_integer(count) ? (int64_t)json_integer_value(count)
                : json_is_array(toks)  ? (int64_t)json_array_size(toks)
                                       : -1;
    json_decref(j);
    return n;
}

/* Prompt tokens as the server counts them (BOS included); -1 on failure. */
int64_t wl_count_tokens(wl_counter *c, const char *text) {
    if (c->tok && c->chat) {
        sbuf s;
        sbuf_init(&s);
        int64_t n =
            wl_chat_render(c->chat, text, &s) ? -1 : count_local(c->tok, s.p ? s.p : "", s.len);
        sbuf_free(&s);
        return n;
    }
    if (c->tok) return count_local(c->tok, text, strlen(text));
    if (!c->server) return -1;
    long status;
    return count_server_as(c, c->shape, text, &status);
}

void wl_counter_close(wl_counter *c) {
    if (c->server) http_call_close(&c->call);
    memset(c, 0, sizeof *c);
}

/* Tries the server's /tokenize once, the way the load client reaches the
 * server (key, --header, --insecure): llama.cpp's body, then on a 400 or
 * 422 (a server that wants another shape) vLLM's and SGLang's; keeps the
 * shape that answered. */
static bool counter_open_server(wl_counter *c, const char *url, const workload_opts *o) {
    const http_call_opts ho = {
        .auth = &o->auth, .timeout_ms = 10000, .connect_timeout_ms = 5000, .json = true};
    tps_err e;
    if (http_call_open(&c->call, url, &ho, &e)) return false;
    c->server = true;
    c->model = o->model;
    long status;
    c->shape = WL_TOKENIZE_CONTENT;
    if (count_server_as(c, c->shape, "hello", &status) > 0) return true;
    c->shape = WL_TOKENIZE_PROMPT;
    if ((status == 400 || status == 422) && count_server_as(c, c->shape, "hello", &status) > 0)
        return true;
    wl_counter_close(c);
    return false;
}

void wl_open_counter(workload *w, wl_counter *c, const workload_opts *o) {
    if (w->tok) {
        c->tok = w->tok;
        w->input_source = "tokenizer";
        /* one user message of a single-turn chat: sized after the template */
        if (w->chat && bench_endpoint_chatlike(o->endpoint) && !o->prefix_len && !o->turns &&
            !o->dataset) {
            c->chat = w->chat;
            w->input_source = "tokenizer + chat template";
        }
    } else if (o->tokenize_url && counter_open_server(c, o->tokenize_url, o)) {
        w->input_source =
            c->shape == WL_TOKENIZE_PROMPT ? "server /tokenize (prompt)" : "server /tokenize";
    } else {
        w->input_source = "approximate (words)";
    }
}

int64_t workload_count_tokens(const workload *w, const char *text, size_t len) {
    if (!w || !w->tok) return -1;
    int32_t one[1];
    size_t n = 0;
    tps_err e;
    int rc = tokenizer_encode(w->tok, text, len, 0, one, 1, &n, &e);
    return rc == 0 || rc == TPS_ERANGE ? (int64_t)n : -1;
}
