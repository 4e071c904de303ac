/* The end-to-end server tests' client (serve_client.h). */
#include "support/serve_client.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/test_support.h"

/* ---------------------------------------------------------------------------
 * HTTP client (libcurl)
 * ------------------------------------------------------------------------- */

size_t on_body(char *p, size_t sz, size_t n, void *ud) {
    resp *r = ud;
    size_t k = sz * n;
    if (r->len + k + 1 > r->cap) {
        r->cap = (r->len + k + 1) * 2;
        r->body = realloc(r->body, r->cap);
    }
    memcpy(r->body + r->len, p, k);
    r->len += k;
    r->body[r->len] = 0;
    if (r->abort_after && r->len >= r->abort_after) return 0;
    return k;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud) {
    resp *r = ud;
    size_t k = sz * n;
    if (r->hlen + k < sizeof r->headers) {
        memcpy(r->headers + r->hlen, p, k);
        r->hlen += k;
        r->headers[r->hlen] = 0;
    }
    return k;
}

CURL *easy(int port, const char *method, const char *path, const char *body, const char *auth,
           resp *r, struct curl_slist **hdrs) {
    CURL *h = curl_easy_init();
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    if (auth) {
        char a[256];
        snprintf(a, sizeof a, "Authorization: Bearer %s", auth);
        *hdrs = curl_slist_append(*hdrs, a);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, *hdrs);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    return h;
}

long http(int port, const char *method, const char *path, const char *body, const char *auth,
          resp *r) {
    struct curl_slist *hdrs = NULL;
    CURL *h = easy(port, method, path, body, auth, r, &hdrs);
    CURLcode cc = curl_easy_perform(h);
    if (cc == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_cleanup(h);
    curl_slist_free_all(hdrs);
    return cc == CURLE_OK ? r->status : -(long)cc;
}

void resp_free(resp *r) {
    free(r->body);
    memset(r, 0, sizeof *r);
}

/* Parses body as JSON (asserting it is) */
json_t *body_json(const resp *r) {
    json_error_t je;
    json_t *j = json_loads(r->body ? r->body : "", 0, &je);
    cr_assert(j, "response is not JSON (%s): %s", je.text, r->body ? r->body : "");
    return j;
}

/* Checks an OpenAI-shaped error and returns its message (borrowed). */
const char *expect_error(json_t *j, const char *param) {
    json_t *e = json_object_get(j, "error");
    cr_assert(json_is_object(e), "no error object");
    cr_assert(json_is_string(json_object_get(e, "message")));
    cr_assert(json_is_string(json_object_get(e, "type")));
    cr_assert(json_object_get(e, "param") && json_object_get(e, "code"));
    if (param) {
        json_t *p = json_object_get(e, "param");
        cr_assert(json_is_string(p) && !strcmp(json_string_value(p), param),
                  "param is %s, expected %s", json_is_string(p) ? json_string_value(p) : "null",
                  param);
    }
    return json_string_value(json_object_get(e, "message"));
}

/* ---------------------------------------------------------------------------
 * SSE stream parsing
 * ------------------------------------------------------------------------- */

static void add_text(char *buf, size_t cap, size_t *len, const char *s, size_t n) {
    cr_assert(*len + n < cap, "stream text over %zu bytes", cap);
    memcpy(buf + *len, s, n);
    *len += n;
    buf[*len] = 0;
}

/* Counts one choice chunk c0 into its choice's record. */
static void parse_choice(json_t *c0, oai_kind kind, stream *st) {
    json_int_t idx = json_integer_value(json_object_get(c0, "index"));
    cr_assert(json_is_integer(json_object_get(c0, "index")), "choice chunk without an index");
    cr_assert(idx >= 0 && idx < STREAM_CHOICES, "choice index %lld", (long long)idx);
    stream_choice *c = &st->ch[idx];
    c->seen = true;
    json_t *fr = json_object_get(c0, "finish_reason");
    json_t *delta = json_object_get(c0, "delta");
    if (kind == OAI_CHAT && json_object_get(delta, "role")) {
        if (c->n_ids == 0 && c->text_len == 0) c->role_first = true;
        return;
    }
    if (json_is_string(fr)) {
        c->n_finish++;
        snprintf(c->finish, sizeof c->finish, "%s", json_string_value(fr));
    }
    json_t *txt =
        kind == OAI_CHAT ? json_object_get(delta, "content") : json_object_get(c0, "text");
    if (json_is_string(txt))
        add_text(c->text, sizeof c->text, &c->text_len, json_string_value(txt),
                 json_string_length(txt));
    c->n_ids += json_array_size(json_object_get(c0, "token_ids"));
}

static size_t stream_finishes(const stream *st) {
    size_t n = 0;
    for (size_t i = 0; i < STREAM_CHOICES; i++)
        n += st->ch[i].n_finish;
    return n;
}

size_t stream_choices_seen(const stream *st) {
    size_t n = 0;
    for (size_t i = 0; i < STREAM_CHOICES; i++)
        n += st->ch[i].seen;
    return n;
}

void parse_stream(const char *body, oai_kind kind, stream *st) {
    memset(st, 0, sizeof *st);
    st->usage_completion = st->usage_prompt = st->usage_cached = -1;
    const char *p = body;
    int n = 0;
    while (p && *p && n++ < 4096) {
        const char *end = strstr(p, "\n\n");
        cr_assert(end, "event without its blank line: %s", p);
        cr_assert(!strncmp(p, "data: ", 6), "event is not 'data: ': %.40s", p);
        const char *d = p + 6;
        size_t dl = (size_t)(end - d);
        p = end + 2;
        cr_assert(!st->done, "event after [DONE]");
        if (dl == 6 && !memcmp(d, "[DONE]", 6)) {
            st->done = true;
            continue;
        }
        json_error_t je;
        json_t *j = json_loadb(d, dl, 0, &je);
        cr_assert(j, "event is not JSON: %.*s", (int)dl, d);
        cr_assert_str_eq(json_string_value(json_object_get(j, "object")),
                         kind == OAI_CHAT ? "chat.completion.chunk" : "text_completion");
        json_t *ch = json_object_get(j, "choices");
        cr_assert(json_is_array(ch));
        json_t *u = json_object_get(j, "usage");
        if (u) {
            cr_assert_eq(json_array_size(ch), 0);
            st->usage_completion =
                (long)json_integer_value(json_object_get(u, "completion_tokens"));
            st->usage_prompt = (long)json_integer_value(json_object_get(u, "prompt_tokens"));
            json_t *cached =
                json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens");
            if (json_is_integer(cached)) st->usage_cached = (long)json_integer_value(cached);
            st->usage_after_finishes = stream_finishes(st) == stream_choices_seen(st);
        }
        json_t *tm = json_object_get(j, "timings");
        if (tm) {
            st->has_timings = true;
            st->timings_completion =
                (long)json_integer_value(json_object_get(tm, "completion_tokens"));
        }
        cr_assert_leq(json_array_size(ch), 1, "a chunk carries one choice");
        json_t *c0 = json_array_get(ch, 0);
        if (c0) parse_choice(c0, kind, st);
        if (c0) {
            json_t *fr = json_object_get(c0, "finish_reason");
            if (json_is_string(fr))
                snprintf(st->finish, sizeof st->finish, "%s", json_string_value(fr));
            json_t *txt = kind == OAI_CHAT
                              ? json_object_get(json_object_get(c0, "delta"), "content")
                              : json_object_get(c0, "text");
            if (kind == OAI_CHAT && json_object_get(json_object_get(c0, "delta"), "role")) {
                if (st->n_ids == 0 && st->n_text_events == 0) st->role_first = true;
            } else if (json_is_string(txt)) {
                size_t l = json_string_length(txt);
                cr_assert(st->text_len + l < sizeof st->text);
                memcpy(st->text + st->text_len, json_string_value(txt), l);
                st->text_len += l;
                st->text[st->text_len] = 0;
                if (!json_is_string(fr)) st->n_text_events++;
            }
            json_t *ids = json_object_get(c0, "token_ids");
            size_t i;
            json_t *id;
            json_array_foreach(ids, i, id) {
                cr_assert(st->n_ids < 1024);
                st->ids[st->n_ids++] = (int32_t)json_integer_value(id);
            }
        }
        json_decref(j);
    }
}

/* ---------------------------------------------------------------------------
 * Reference data
 * ------------------------------------------------------------------------- */

json_t *load_ref(void) {
    char *p = shared_path(REF);
    json_error_t je;
    json_t *j = json_load_file(p, 0, &je);
    free(p);
    cr_assert(j, "cannot read %s: %s", REF, je.text);
    return j;
}

char *completion_body(const char *prompt, int max_tokens, bool stream_, bool usage) {
    json_t *b = json_pack("{s:s, s:i, s:f, s:b, s:b}", "prompt", prompt, "max_tokens", max_tokens,
                          "temperature", 0.0, "stream", stream_, "ignore_eos", 1);
    if (usage) json_object_set_new(b, "stream_options", json_pack("{s:b}", "include_usage", 1));
    char *s = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    return s;
}

/* ---------------------------------------------------------------------------
 * Errors, /metrics, a POST that must succeed
 * ------------------------------------------------------------------------- */

void expect_status(int port, const char *method, const char *path, const char *body,
                   const char *auth, long status, const char *param, const char *msg_has) {
    resp r = {0};
    cr_assert_eq(http(port, method, path, body, auth, &r), status, "%s %s: got %ld: %s", method,
                 path, r.status, r.body ? r.body : "");
    json_t *j = body_json(&r);
    const char *m = expect_error(j, param);
    if (msg_has) cr_assert(strstr(m, msg_has), "message '%s' lacks '%s'", m, msg_has);
    json_decref(j);
    resp_free(&r);
}

/* Parses Prometheus text 0.0.4 strictly enough to catch format errors;
 * returns the value of the sample whose name+labels equal key, or -1. */
double prom_get(const char *text, const char *key) {
    double found = -1;
    const char *p = text;
    int lines = 0;
    while (*p && lines++ < 100000) {
        const char *eol = strchr(p, '\n');
        cr_assert(eol, "metrics text must end with a newline");
        size_t n = (size_t)(eol - p);
        char line[512];
        cr_assert_lt(n, sizeof line);
        memcpy(line, p, n);
        line[n] = 0;
        p = eol + 1;
        if (line[0] == '#') {
            cr_assert(!strncmp(line, "# HELP ", 7) || !strncmp(line, "# TYPE ", 7), "%s", line);
            continue;
        }
        char *sp = strrchr(line, ' ');
        cr_assert(sp, "sample without a value: %s", line);
        *sp = 0;
        char *end;
        double v = strtod(sp + 1, &end);
        cr_assert(*end == 0 || !strcmp(sp + 1, "+Inf"), "bad value in '%s'", line);
        for (char *c = line; *c && *c != '{'; c++)
            cr_assert(*c == ':' || *c == '_' || (*c >= 'a' && *c <= 'z') ||
                          (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9'),
                      "bad metric name '%s'", line);
        if (!strcmp(line, key)) found = v;
    }
    return found;
}

/* POSTs body to path, asserts 200 and returns the parsed body. */
json_t *post_ok(int port, const char *path, const char *body) {
    resp r = {0};
    long st = http(port, "POST", path, body, NULL, &r);
    cr_assert_eq(st, 200, "POST %s %s: %ld: %s", path, body, st, r.body ? r.body : "");
    json_t *j = body_json(&r);
    resp_free(&r);
    return j;
}
