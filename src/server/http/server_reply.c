/* Answering a request whole: a body with its status, the OpenAI-shaped
 * JSON error every route answers with, the 503 while loading or draining.
 * Each reply marks its connection idle again (server_conn.c).
 *
 * Not here: streamed answers (server_stream.c), refusals before evhttp has
 * a request (server_conn.c). */
#include "server/http/http.h"

#include <stdio.h>
#include <string.h>

#include "server/api/api_dialect.h"

/* ---------------------------------------------------------------------------
 * Replies
 * ------------------------------------------------------------------------- */

/* Sends body with status; the request is finished (and may be freed) after. */
void server_reply(server *s, struct evhttp_request *req, int status, const char *ctype,
                  const char *body, size_t len) {
    conn_slot *slot = server_conn_busy(s, req, false); /* before the reply: req may go with it */
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", ctype);
    struct evbuffer *buf = evbuffer_new();
    if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {
        /* evhttp would send the body after a HEAD's headers: only its length */
        char cl[24];
        snprintf(cl, sizeof cl, "%zu", len);
        evhttp_add_header(h, "Content-Length", cl);
    } else if (buf) {
        evbuffer_add(buf, body, len);
    }
    evhttp_send_reply(req, status, NULL, buf);
    if (buf) evbuffer_free(buf);
    server_conn_guard(slot); /* a half-closed client still gets the answer */
}

void server_reply_json(server *s, struct evhttp_request *req, int status, const sbuf *b) {
    if (sbuf_failed(b)) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":"
                                  "\"server_error\",\"param\":null,\"code\":null}}";
        server_reply(s, req, 500, "application/json", oom, sizeof oom - 1);
        return;
    }
    server_reply(s, req, status, "application/json", b->p ? b->p : "", b->len);
}

/* The dialect a request's path speaks: errors of /v1/messages* take
 * Anthropic's shape, every other route OpenAI's. */
static oai_dialect dialect_of(struct evhttp_request *req) {
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    return path && !strncmp(path, "/v1/messages", 12) ? OAI_DIALECT_MESSAGES : OAI_DIALECT_CHAT;
}

void server_reply_error(server *s, struct evhttp_request *req, const oai_error *e) {
    sbuf b;
    sbuf_init(&b);
    if (dialect_of(req) == OAI_DIALECT_MESSAGES)
        api_error_anthropic_json(e, &b);
    else
        oai_error_json(e, &b);
    if (e->status == 429 || e->status == 503)
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
    if (e->status == 401)
        evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate", "Bearer");
    server_reply_json(s, req, e->status, &b);
    sbuf_free(&b);
}

void server_reply_err(server *s, struct evhttp_request *req, int status, const char *type,
                      const char *param, const char *code, const char *msg) {
    oai_error e;
    oai_error_set(&e, status, type, param, code, "%s", msg);
    server_reply_error(s, req, &e);
}

/* 503 while loading or draining; true when the request was answered. */
bool server_reply_loading(server *s, struct evhttp_request *req) {
    if (atomic_load(&s->ready)) return false;
    server_reply_err(s, req, 503, "unavailable_error", NULL, "model_loading",
                     "the model is still loading; retry shortly");
    return true;
}

bool server_reply_unavailable(server *s, struct evhttp_request *req) {
    if (server_reply_loading(s, req)) return true;
    if (s->draining) {
        server_reply_err(s, req, 503, "unavailable_error", NULL, "server_draining",
                         "the server is shutting down and accepts no new requests");
        return true;
    }
    return false;
}
