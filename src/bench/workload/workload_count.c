/* Counting a prompt's tokens as the server will (workload_internal.h): with
 * the loaded tokenizer, else the server's POST /tokenize reached as the
 * load client reaches the server, else not at all (one word per token).
 * The only place a workload meets the tokenizer's encoder. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "bench/workload/workload_internal.h"
#include "model/tokenizer.h" /* tokenizer_encode */

/* Prompt tokens as the server counts them (BOS included); -1 on failure. */
int64_t wl_count_tokens(wl_counter *c, const char *text) {
    size_t len = strlen(text);
    if (c->tok) {
        int32_t one[1];
        size_t n = 0;
        tps_err e;
        int rc = tokenizer_encode(c->tok, text, len, TOK_ENCODE_ADD_SPECIAL, one, 1, &n, &e);
        return rc == 0 || rc == TPS_ERANGE ? (int64_t)n : -1;
    }
    if (!c->server) return -1;
    json_t *req = json_pack("{s:s, s:b}", "content", text, "add_special", 1);
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    if (!body) return -1;
    tps_err e;
    int rc = http_call_do(&c->call, body, &e);
    free(body);
    if (rc || c->call.status != 200) return -1;
    json_t *j = json_loadb(c->call.body.p ? c->call.body.p : "", c->call.body.len, 0, NULL);
    json_t *toks = json_object_get(j, "tokens");
    int64_t n = json_is_array(toks) ? (int64_t)json_array_size(toks) : -1;
    json_decref(j);
    return n;
}

void wl_counter_close(wl_counter *c) {
    if (c->server) http_call_close(&c->call);
    memset(c, 0, sizeof *c);
}

/* Tries the server's /tokenize once, the way the load client reaches the
 * server (key, --header, --insecure); keeps it only if it answers. */
static bool counter_open_server(wl_counter *c, const char *url, const http_auth *auth) {
    const http_call_opts o = {
        .auth = auth, .timeout_ms = 10000, .connect_timeout_ms = 5000, .json = true};
    tps_err e;
    if (http_call_open(&c->call, url, &o, &e)) return false;
    c->server = true;
    if (wl_count_tokens(c, "hello") > 0) return true;
    wl_counter_close(c);
    return false;
}

void wl_open_counter(workload *w, wl_counter *c, const workload_opts *o) {
    if (w->tok) {
        c->tok = w->tok;
        w->input_source = "tokenizer";
    } else if (o->tokenize_url && counter_open_server(c, o->tokenize_url, &o->auth)) {
        w->input_source = "server /tokenize";
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
