/* Implementation of tests/support/oai_client.h. */
#include "support/oai_client.h"

#include <criterion/criterion.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct grow {
    char *p;
    size_t n;
} grow;

static size_t on_body(char *p, size_t sz, size_t n, void *ud) {
    grow *b = ud;
    char *q = realloc(b->p, b->n + sz * n + 1);
    if (!q) return 0;
    b->p = q;
    memcpy(b->p + b->n, p, sz * n);
    b->n += sz * n;
    b->p[b->n] = 0;
    return sz * n;
}

static void append(char **dst, const char *s, size_t n) {
    size_t have = *dst ? strlen(*dst) : 0;
    char *q = realloc(*dst, have + n + 1);
    cr_assert_not_null(q);
    memcpy(q + have, s, n);
    q[have + n] = 0;
    *dst = q;
}

/* One choice object of a chunk (delta) or of a body (message / text). */
static void take_choice(oai_answer *a, json_t *c, bool stream) {
    size_t i = (size_t)json_integer_value(json_object_get(c, "index"));
    cr_assert_lt(i, OAI_ANSWER_MAX_CHOICES);
    if (i + 1 > a->n_choices) a->n_choices = i + 1;
    oai_choice_out *o = &a->choice[i];
    json_t *msg = json_object_get(c, stream ? "delta" : "message");
    json_t *text = msg ? json_object_get(msg, "content") : json_object_get(c, "text");
    json_t *reason = json_object_get(msg, "reasoning_content");
    if (!o->content) append(&o->content, "", 0);
    if (json_is_string(text))
        append(&o->content, json_string_value(text), json_string_length(text));
    if (json_is_string(reason))
        append(&o->reasoning, json_string_value(reason), json_string_length(reason));
    size_t k;
    json_t *id;
    json_array_foreach(json_object_get(c, "token_ids"), k, id) {
        if (o->n_ids < OAI_ANSWER_MAX_IDS) o->ids[o->n_ids++] = (int32_t)json_integer_value(id);
    }
    json_t *fin = json_object_get(c, "finish_reason");
    if (json_is_string(fin)) snprintf(o->finish, sizeof o->finish, "%s", json_string_value(fin));
}

static void take_object(oai_answer *a, json_t *j, bool stream) {
    size_t k;
    json_t *c;
    json_array_foreach(json_object_get(j, "choices"), k, c) take_choice(a, c, stream);
    json_t *u = json_object_get(j, "usage"), *t = json_object_get(j, "timings");
    json_t *e = json_object_get(j, "error");
    if (u) json_decref(a->usage), a->usage = json_incref(u);
    if (t) json_decref(a->timings), a->timings = json_incref(t);
    if (e) json_decref(a->error), a->error = json_incref(e);
}

static void parse_stream(oai_answer *a) {
    for (const char *p = a->body; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len > 6 && !strncmp(p, "data: ", 6) && strncmp(p, "data: [DONE]", 12)) {
            json_t *j = json_loadb(p + 6, len - 6, JSON_ALLOW_NUL, NULL);
            cr_assert_not_null(j, "not JSON: %.*s", (int)len, p);
            take_object(a, j, true);
            json_decref(j);
        }
        p = nl ? nl + 1 : NULL;
    }
}

long oai_post(int port, const char *path, const char *body, oai_answer *a) {
    memset(a, 0, sizeof *a);
    CURL *h = curl_easy_init();
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
    grow b = {0};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 120L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    a->status = -1;
    if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a->status);
    curl_easy_cleanup(h);
    curl_slist_free_all(hd);
    a->body = b.p ? b.p : strdup("");
    if (!strncmp(a->body, "data: ", 6)) {
        parse_stream(a);
    } else {
        json_t *j = json_loads(a->body, JSON_ALLOW_NUL, NULL);
        if (j) take_object(a, j, false);
        json_decref(j);
    }
    return a->status;
}

void oai_chat_ok(int port, const char *head, const char *fields, bool stream, oai_answer *a) {
    const char *tail = stream ? "true,\"stream_options\":{\"include_usage\":true}" : "false";
    size_t n = strlen(head) + strlen(fields) + strlen(tail) + 16;
    char *body = malloc(n);
    cr_assert_not_null(body);
    snprintf(body, n, "%s%s\"stream\":%s}", head, fields, tail);
    long st = oai_post(port, "/v1/chat/completions", body, a);
    cr_assert_eq(st, 200, "%s -> %ld %s", body, st, a->body);
    free(body);
}

void oai_answer_free(oai_answer *a) {
    for (size_t i = 0; i < OAI_ANSWER_MAX_CHOICES; i++) {
        free(a->choice[i].content);
        free(a->choice[i].reasoning);
    }
    json_decref(a->usage);
    json_decref(a->timings);
    json_decref(a->error);
    free(a->body);
    memset(a, 0, sizeof *a);
}

static const char *error_str(const oai_answer *a, const char *key) {
    const char *s = json_string_value(json_object_get(a->error, key));
    return s ? s : "";
}

const char *oai_error_param(const oai_answer *a) {
    return error_str(a, "param");
}

const char *oai_error_code(const oai_answer *a) {
    return error_str(a, "code");
}
