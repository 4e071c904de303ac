/* End-to-end tests of `tps serve`: a real server on an ephemeral 127.0.0.1
 * port (in-process, or the tps binary for SIGTERM), driven with libcurl.
 * Model: ../shared/models/stories260K.gguf; greedy outputs are checked
 * against ../shared/reference/stories260K_greedy.json (llama.cpp) and
 * against `tps generate`. Every loop is bounded; only 127.0.0.1 is used. */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>

#include "server/openai.h"
#include "server/server.h"
#include "support/raw_http.h"
#include "support/server_fixture.h"
#include "support/test_support.h"

#define MODEL "models/stories260K.gguf"
#define REF   "reference/stories260K_greedy.json"

/* ---------------------------------------------------------------------------
 * HTTP client (libcurl)
 * ------------------------------------------------------------------------- */

typedef struct resp {
    long status;
    char *body;
    size_t len, cap;
    char headers[4096];
    size_t hlen;
    size_t abort_after; /* close the connection after this many body bytes (0: never) */
} resp;

static size_t on_body(char *p, size_t sz, size_t n, void *ud) {
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

static CURL *easy(int port, const char *method, const char *path, const char *body,
                  const char *auth, resp *r, struct curl_slist **hdrs) {
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

static long http(int port, const char *method, const char *path, const char *body, const char *auth,
                 resp *r) {
    struct curl_slist *hdrs = NULL;
    CURL *h = easy(port, method, path, body, auth, r, &hdrs);
    CURLcode cc = curl_easy_perform(h);
    if (cc == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_cleanup(h);
    curl_slist_free_all(hdrs);
    return cc == CURLE_OK ? r->status : -(long)cc;
}

static void resp_free(resp *r) {
    free(r->body);
    memset(r, 0, sizeof *r);
}

/* Parses body as JSON (asserting it is) */
static json_t *body_json(const resp *r) {
    json_error_t je;
    json_t *j = json_loads(r->body ? r->body : "", 0, &je);
    cr_assert(j, "response is not JSON (%s): %s", je.text, r->body ? r->body : "");
    return j;
}

/* Checks an OpenAI-shaped error and returns its message (borrowed). */
static const char *expect_error(json_t *j, const char *param) {
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

#define STREAM_CHOICES 4 /* choices a parsed stream keeps apart */

/* One choice of a stream (the chunks whose choices[0].index is its index). */
typedef struct stream_choice {
    char text[4096];
    size_t text_len, n_ids, n_finish;
    char finish[32];
    bool seen, role_first;
} stream_choice;

typedef struct stream {
    int32_t ids[1024]; /* every choice's, in arrival order */
    size_t n_ids;
    size_t n_text_events;
    char text[16384]; /* every choice's, in arrival order */
    size_t text_len;
    char finish[32]; /* the last finish_reason seen */
    bool done, role_first, has_timings;
    long usage_completion, usage_prompt, usage_cached;
    bool usage_after_finishes; /* the usage chunk came after every choice's finish */
    long timings_completion;
    stream_choice ch[STREAM_CHOICES];
} stream;

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

static size_t stream_choices_seen(const stream *st) {
    size_t n = 0;
    for (size_t i = 0; i < STREAM_CHOICES; i++)
        n += st->ch[i].seen;
    return n;
}

static void parse_stream(const char *body, oai_kind kind, stream *st) {
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

static json_t *load_ref(void) {
    char *p = shared_path(REF);
    json_error_t je;
    json_t *j = json_load_file(p, 0, &je);
    free(p);
    cr_assert(j, "cannot read %s: %s", REF, je.text);
    return j;
}

static char *completion_body(const char *prompt, int max_tokens, bool stream_, bool usage) {
    json_t *b = json_pack("{s:s, s:i, s:f, s:b, s:b}", "prompt", prompt, "max_tokens", max_tokens,
                          "temperature", 0.0, "stream", stream_, "ignore_eos", 1);
    if (usage) json_object_set_new(b, "stream_options", json_pack("{s:b}", "include_usage", 1));
    char *s = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    return s;
}

/* ---------------------------------------------------------------------------
 * Completions: exactness
 * ------------------------------------------------------------------------- */

Test(server, streamed_greedy_tokens_equal_reference_and_usage_counts_them, .timeout = 60) {
    REQUIRE_SHARED(MODEL);
    REQUIRE_SHARED(REF);
    server_fixture f;
    fixture_serve(&f);
    json_t *ref = load_ref();
    size_t i;
    json_t *cs;
    json_array_foreach(json_object_get(ref, "cases"), i, cs) {
        const char *prompt = json_string_value(json_object_get(cs, "prompt"));
        json_t *gen = json_object_get(cs, "generated_ids");
        char *body = completion_body(prompt, 64, true, true);
        resp r = {0};
        cr_assert_eq(http(f.port, "POST", "/v1/completions", body, NULL, &r), 200);
        cr_assert(strstr(r.headers, "text/event-stream"));
        stream st;
        parse_stream(r.body, OAI_COMPLETION, &st);
        cr_assert(st.done, "no [DONE]");
        cr_assert_eq(st.n_ids, json_array_size(gen), "case %zu: %zu ids", i, st.n_ids);
        for (size_t k = 0; k < st.n_ids; k++)
            cr_assert_eq(st.ids[k], json_integer_value(json_array_get(gen, k)),
                         "case %zu ('%s'): token %zu", i, prompt, k);
        cr_assert_str_eq(st.text, json_string_value(json_object_get(cs, "generated_text")));
        cr_assert_eq(st.usage_completion, (long)st.n_ids);
        cr_assert_eq(st.usage_completion, (long)st.n_text_events);
        cr_assert_eq(st.usage_prompt, (long)json_array_size(json_object_get(cs, "prompt_ids")));
        cr_assert_eq(st.timings_completion, 64);
        cr_assert_str_eq(st.finish, "length");
        free(body);
        resp_free(&r);
    }
    json_decref(ref);
    fixture_finish(&f);
}

Test(server, streamed_greedy_tokens_equal_tps_generate, .timeout = 60) {
    REQUIRE_SHARED(MODEL);
    server_fixture f;
    fixture_serve(&f);
    const char *prompt = "The little dog";
    char *mp = shared_path(MODEL);
    char args[1024];
    snprintf(args, sizeof args, "generate -m '%s' -p '%s' -n 40 --json", mp, prompt);
    char *out = NULL;
    int rc = run_tps(args, false, &out);
    free(mp);
    if (rc != 0 || !strchr(out, '{')) {
        free(out);
        fixture_finish(&f);
        cr_skip_test("tps generate --json is not available (rc %d)", rc);
    }
    json_error_t je;
    json_t *g = json_loads(strchr(out, '{'), JSON_DISABLE_EOF_CHECK, &je);
    cr_assert(g, "tps generate output is not JSON: %s", out);
    json_t *toks = json_object_get(g, "tokens");
    char *body = completion_body(prompt, 40, true, false);
    resp r = {0};
    cr_assert_eq(http(f.port, "POST", "/v1/completions", body, NULL, &r), 200);
    stream st;
    parse_stream(r.body, OAI_COMPLETION, &st);
    /* generate stops at EOS; the server was told ignore_eos: compare the prefix */
    cr_assert_geq(st.n_ids, json_array_size(toks));
    cr_assert_gt(json_array_size(toks), 0);
    for (size_t k = 0; k < json_array_size(toks); k++)
        cr_assert_eq(st.ids[k], json_integer_value(json_array_get(toks, k)), "token %zu", k);
    json_decref(g);
    free(out);
    free(body);
    resp_free(&r);
    fixture_finish(&f);
}

Test(server, non_streamed_completion_has_usage_and_timings, .timeout = 30) {
    REQUIRE_SHARED(MODEL);
    REQUIRE_SHARED(REF);
    server_fixture f;
    fixture_serve(&f);
    json_t *ref = load_ref();
    json_t *cs = json_array_get(json_object_get(ref, "cases"), 0);
    char *body =
        completion_body(json_string_value(json_object_get(cs, "prompt")), 64, false, false);
    resp r = {0};
    cr_assert_eq(http(f.port, "POST", "/v1/completions", body, NULL, &r), 200);
    json_t *j = body_json(&r);
    cr_assert_str_eq(json_string_value(json_object_get(j, "object")), "text_completion");
    json_t *c0 = json_array_get(json_object_get(j, "choices"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(c0, "text")),
                     json_string_value(json_object_get(cs, "generated_text")));
    cr_assert_str_eq(json_string_value(json_object_get(c0, "finish_reason")), "length");
    json_t *u = json_object_get(j, "usage");
    cr_assert_eq(json_integer_value(json_object_get(u, "completion_tokens")), 64);
    cr_assert_eq(json_integer_value(json_object_get(u, "total_tokens")),
                 64 + (json_int_t)json_array_size(json_object_get(cs, "prompt_ids")));
    json_t *t = json_object_get(j, "timings");
    static const char *const keys[] = {"queue_ms",   "prefill_ms",        "prompt_tokens",
                                       "decode_ms",  "completion_tokens", "ttft_ms",
                                       "preemptions"};
    for (size_t k = 0; k < 7; k++)
        cr_assert(json_is_number(json_object_get(t, keys[k])), "timings.%s missing", keys[k]);
    cr_assert_eq(json_integer_value(json_object_get(t, "completion_tokens")), 64);
    json_decref(j);
    json_decref(ref);
    free(body);
    resp_free(&r);
    fixture_finish(&f);
}

Test(server, prompt_as_token_ids_equals_prompt_as_text, .timeout = 30) {
    REQUIRE_SHARED(MODEL);
    server_fixture f;
    fixture_serve(&f);
    resp a = {0}, b = {0};
    cr_assert_eq(http(f.port, "POST", "/v1/completions",
                      "{\"prompt\":\"Once upon a time\",\"max_tokens\":12,\"temperature\":0}", NULL,
                      &a),
                 200);
    cr_assert_eq(http(f.port, "POST", "/v1/completions",
                      "{\"prompt\":[1,403,407,261,378],\"max_tokens\":12,\"temperature\":0}", NULL,
                      &b),
                 200);
    json_t *ja = body_json(&a), *jb = body_json(&b);
    cr_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(ja, "choices"), 0), "text")),
                     json_string_value(json_object_get(
                         json_array_get(json_object_get(jb, "choices"), 0), "text")));
    json_decref(ja);
    json_decref(jb);
    resp_free(&a);
    resp_free(&b);
    fixture_finish(&f);
}

Test(server, chat_streams_role_then_content_then_finish, .timeout = 30) {
    REQUIRE_SHARED(MODEL);
    server_fixture f;
    fixture_serve(&f);
    const char *body = "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                       "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hi\"}]}],"
                       "\"max_tokens\":10,\"temperature\":0,\"stream\":true,\"ignore_eos\":true,"
                       "\"stream_options\":{\"include_usage\":true}}";
    resp r = {0};
    cr_assert_eq(http(f.port, "POST", "/v1/chat/completions", body, NULL, &r), 200);
    stream st;
    parse_stream(r.body, OAI_CHAT, &st);
    cr_assert(st.done && st.role_first && st.has_timings);
    cr_assert_eq(st.n_ids, 10);
    cr_assert_eq(st.usage_completion, 10);
    cr_assert_str_eq(st.finish, "length");
    /* the same request, not streamed, gives the same text */
    const char *nb = "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                     "{\"role\":\"user\",\"content\":\"Hi\"}],\"max_completion_tokens\":10,"
                     "\"temperature\":0,\"ignore_eos\":true}";
    resp r2 = {0};
    cr_assert_eq(http(f.port, "POST", "/v1/chat/completions", nb, NULL, &r2), 200);
    json_t *j = body_json(&r2);
    json_t *msg = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "message");
    cr_assert_str_eq(json_string_value(json_object_get(msg, "role")), "assistant");
    cr_assert_str_eq(json_string_value(json_object_get(msg, "content")), st.text);
    json_decref(j);
    resp_free(&r);
    resp_free(&r2);
    fixture_finish(&f);
}

/* ---------------------------------------------------------------------------
 * Concurrency: 32 streams at once equal the same requests alone
 * ------------------------------------------------------------------------- */

#define N_CONC 32

Test(server, concurrent_32_streams_equal_solo_runs, .timeout = 60) {
    REQUIRE_SHARED(MODEL);
    server_fixture f;
    fixture_serve(&f);
    static const char *const prompts[] = {"Once upon a time", "Lily and Tom",  "The sun",
                                          "One day, a big",   "She was happy", ""};
    char *bodies[N_CONC];
    stream *solo = calloc(N_CONC, sizeof *solo);
    for (int i = 0; i < N_CONC; i++) {
        bodies[i] = completion_body(prompts[i % 6], 12 + (i * 7) % 29, true, false);
        resp r = {0};
        cr_assert_eq(http(f.port, "POST", "/v1/completions", bodies[i], NULL, &r), 200);
        parse_stream(r.body, OAI_COMPLETION, &solo[i]);
        resp_free(&r);
    }
    CURLM *m = curl_multi_init();
    CURL *hs[N_CONC];
    resp rs[N_CONC];
    struct curl_slist *hd[N_CONC];
    memset(rs, 0, sizeof rs);
    for (int i = 0; i < N_CONC; i++) {
        hs[i] = easy(f.port, "POST", "/v1/completions", bodies[i], NULL, &rs[i], &hd[i]);
        curl_multi_add_handle(m, hs[i]);
    }
    int running = 1;
    for (int it = 0; running && it < 100000; it++) {
        curl_multi_perform(m, &running);
        if (running) curl_multi_poll(m, NULL, 0, 100, NULL);
    }
    cr_assert_eq(running, 0);
    stream *st = malloc(sizeof *st);
    for (int i = 0; i < N_CONC; i++) {
        long code = 0;
        curl_easy_getinfo(hs[i], CURLINFO_RESPONSE_CODE, &code);
        cr_assert_eq(code, 200);
        parse_stream(rs[i].body, OAI_COMPLETION, st);
        cr_assert(st->done);
        cr_assert_eq(st->n_ids, solo[i].n_ids, "request %d", i);
        cr_assert_eq(memcmp(st->ids, solo[i].ids, st->n_ids * sizeof st->ids[0]), 0,
                     "request %d differs from its solo run", i);
        cr_assert_str_eq(st->text, solo[i].text);
        curl_multi_remove_handle(m, hs[i]);
        curl_easy_cleanup(hs[i]);
        curl_slist_free_all(hd[i]);
        resp_free(&rs[i]);
        free(bodies[i]);
    }
    free(st);
    free(solo);
    curl_multi_cleanup(m);
    fixture_finish(&f);
}

/* ---------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------- */

static void expect_status(int port, const char *method, const char *path, const char *body,
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

Test(server, bad_requests_get_openai_shaped_errors, .timeout = 30) {
    REQUIRE_SHARED(MODEL);
    server_fixture f;
    fixture_serve(&f);
    int p = f.port;
    expect_status(p, "POST", "/v1/completions", "{\"prompt\": \"x\",\n \"max_tokens\": }", NULL,
                  400, NULL, "line 2, column");
    expect_status(p, "POST", "/v1/completions", "[1,2]", NULL, 400, NULL, "JSON object");
    expect_status(p, "POST", "/v1/completions", "{\"prompt\":\"x\",\"temperature\":\"hot\"}", NULL,
                  400, "temperature", NULL);
    expect_status(p, "POST", "/v1/completions", "{\"prompt\":\"x\",\"top_p\":1.5}", NULL, 400,
                  "top_p", NULL);
    expect_status(p, "POST", "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":\"9\"}", NULL,
                  400, "max_tokens", NULL);
    expect_status(p, "POST", "/v1/completions", "{\"prompt\":\"x\",\"stream\":1}", NULL, 400,
                  "stream", NULL);
    expect_status(p, "POST", "/v1/completions", "{\"prompt\":\"x\",\"stop\":[1]}", NULL, 400,
                  "stop", NULL);
    expect_status(p, "POST", "/v1/completions", "{\"prompt\":{}}", NULL, 400, "prompt", NULL);
    expect_status(p, "POST", "/v1/completions", "{\"max_tokens\":3}", NULL, 400, "prompt", NULL);
    expect_status(p, "POST", "/v1/chat/completions", "{\"messages\":\"hi\"}", NULL, 400, "messages",
                  NULL);
    expect_status(p, "POST", "/v1/chat/completions", "{\"messages\":[{\"content\":\"hi\"}]}", NULL,
                  400, "messages[0].role", NULL);
    expect_status(p, "POST", "/v1/completions", "{\"prompt\":\"x\",\"best_of\":2}", NULL, 400,
                  "best_of", "not supported");
    expect_status(p, "POST", "/v1/chat/completions",
                  "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{}]}", NULL,
                  400, "tools[0]", "must be {");
    expect_status(p, "POST", "/v1/completions", "{\"prompt\":[1, 99999]}", NULL, 400, "prompt",
                  NULL);
    expect_status(p, "GET", "/v2/nothing", NULL, NULL, 404, NULL, NULL);
    expect_status(p, "GET", "/v1/completions", NULL, NULL, 405, NULL, "POST");
    expect_status(p, "POST", "/health", "{}", NULL, 405, NULL, "GET");
    /* a field tps does not know is refused by name, never ignored */
    expect_status(p, "POST", "/v1/completions",
                  "{\"prompt\":\"x\",\"max_tokens\":2,\"user\":\"u\",\"frobnicate\":[1]}", NULL,
                  400, "frobnicate", "not a field");
    fixture_finish(&f);
}

Test(server, prompt_longer_than_context_is_400_naming_both_numbers, .timeout = 30) {
    REQUIRE_SHARED(MODEL);
    server_fixture f;
    fixture_serve(&f);
    /* 600 token ids > the context of 512 */
    char *body = malloc(8192);
    size_t n = (size_t)sprintf(body, "{\"prompt\":[1");
    for (int i = 1; i < 600; i++)
        n += (size_t)sprintf(body + n, ",%d", 300 + i % 100);
    sprintf(body + n, "],\"max_tokens\":4}");
    expect_status(f.port, "POST", "/v1/completions", body, NULL, 400, "prompt", "600");
    resp r = {0};
    http(f.port, "POST", "/v1/completions", body, NULL, &r);
    cr_assert(strstr(r.body, "512"), "message lacks the context: %s", r.body);
    cr_assert(strstr(r.body, "context_length_exceeded"));
    resp_free(&r);
    free(body);
    fixture_finish(&f);
}

Test(server, api_key_is_required_when_set, .timeout = 30) {
    REQUIRE_SHARED(MODEL);
    server_fixture f;
    server_config c;
    fixture_defaults(&c, &f);
    c.api_key = "s3cret-key";
    fixture_start(&f, &c, true);
    const char *b = "{\"prompt\":\"x\",\"max_tokens\":2}";
    expect_status(f.port, "POST", "/v1/completions", b, NULL, 401, NULL, "API key");
    expect_status(f.port, "POST", "/v1/completions", b, "s3cret-kez", 401, NULL, NULL);
    expect_status(f.port, "POST", "/v1/completions", b, "s3cret-key-longer", 401, NULL, NULL);
    expect_status(f.port, "GET", "/v1/models", NULL, "wrong", 401, NULL, NULL);
    resp r = {0};
    cr_assert_eq(http(f.port, "POST", "/v1/completions", b, "s3cret-key", &r), 200);
    resp_free(&r);
    cr_assert_eq(http(f.port, "GET", "/health", NULL, NULL, &r), 200); /* open */
    resp_free(&r);
    fixture_finish(&f);
}

Test(server, body_over_the_limit_is_413, .timeout = 30) {
    REQUIRE_SHARED(MODEL);
    server_fixture f;
    server_config c;
    fixture_defaults(&c, &f);
    c.max_body_bytes = 1024;
    fixture_start(&f, &c, true);
    char *big = malloc(2000);
    memset(big, 'a', 1999);
    big[1999] = 0;
    memcpy(big, "{\"prompt\":\"", 11);
    memcpy(big + 1997, "\"}", 2);
    expect_status(f.port, "POST", "/v1/completions", big, NULL, 413, NULL, "1024");
    /* far over: evhttp refuses it before reading it; still 413 */
    char *huge = malloc(100000);
    memset(huge, 'a', 99999);
    huge[99999] = 0;
    resp r = {0};
    long st = http(f.port, "POST", "/v1/completions", huge, NULL, &r);
    cr_assert(st == 413 || st < 0, "got %ld", st); /* 413, or the connection closed on us */
    resp_free(&r);
    free(big);
    free(huge);
    fixture_finish(&f);
}

Test(server, queue_full_is_429_with_retry_after, .timeout = 30) {
    REQUIRE_SHARED(MODEL);
    server_fixture f;
    server_config c;
    fixture_defaults(&c, &f);
    c.engine.max_seqs = 1;
    c.engine.max_queue = 1;
    fixture_start(&f, &c, true);
    /* Long streams: the first runs, the second waits, later ones are refused.
     * 480 tokens (not 200): on a loaded machine the first stream could end
     * before the fourth request arrived, and nothing was refused. */
    char *body = completion_body("Once upon a time", 480, true, false);
    CURLM *m = curl_multi_init();
    enum { N = 4 };
    CURL *hs[N];
    resp rs[N];
    struct curl_slist *hd[N];
    memset(rs, 0, sizeof rs);
    int running = 0, n_429 = 0, n_200 = 0;
    for (int i = 0; i < N; i++) {
        hs[i] = easy(f.port, "POST", "/v1/completions", body, NULL, &rs[i], &hd[i]);
        curl_multi_add_handle(m, hs[i]);
        /* let request i reach the server before the next one */
        for (int it = 0; it < 20; it++) {
            curl_multi_perform(m, &running);
            curl_multi_poll(m, NULL, 0, 5, NULL);
        }
    }
    for (int it = 0; running && it < 100000; it++) {
        curl_multi_perform(m, &running);
        if (running) curl_multi_poll(m, NULL, 0, 100, NULL);
    }
    for (int i = 0; i < N; i++) {
        long code = 0;
        curl_easy_getinfo(hs[i], CURLINFO_RESPONSE_CODE, &code);
        if (code == 429) {
            n_429++;
            cr_assert(strstr(rs[i].headers, "Retry-After:"), "429 without Retry-After");
            json_t *j = body_json(&rs[i]);
            expect_error(j, NULL);
            json_decref(j);
        } else {
            cr_assert_eq(code, 200);
            n_200++;
        }
        curl_multi_remove_handle(m, hs[i]);
        curl_easy_cleanup(hs[i]);
        curl_slist_free_all(hd[i]);
        resp_free(&rs[i]);
    }
    cr_assert_geq(n_429, 1, "no request was refused");
    cr_assert_geq(n_200, 2);
    curl_multi_cleanup(m);
    free(body);
    fixture_finish(&f);
}

Test(server, health_and_completions_are_503_while_loading, .timeout = 30) {
    REQUIRE_SHARED(MODEL);
    server_fixture f;
    server_config c;
    fixture_defaults(&c, &f);
    fixture_start(&f, &c, false);
    expect_status(f.port, "GET", "/health", NULL, NULL, 503, NULL, "loading");
    expect_status(f.port, "POST", "/v1/completions", "{\"prompt\":\"x\"}", NULL, 503, NULL, NULL);
    tps_err err = {{0}};
    cr_assert_eq(server_load(f.s, &err), 0, "%s", err.msg);
    resp r = {0};
    cr_assert_eq(http(f.port, "GET", "/health", NULL, NULL, &r), 200);
    resp_free(&r);
    cr_assert_eq(http(f.port, "GET", "/v1/models", NULL, NULL, &r), 200);
    json_t *j = body_json(&r);
    cr_assert_str_eq(
        json_string_value(json_object_get(json_array_get(json_object_get(j, "data"), 0), "id")),
        "stories260K.gguf");
    json_decref(j);
    resp_free(&r);
    fixture_finish(&f);
}

/* ---------------------------------------------------------------------------
 * Disconnects free the KV cache
 * ------------------------------------------------------------------------- */

/* A request sent from a background thread. */
typedef struct bg_req {
    int port;
    char *body;
    resp r;
    long status;
} bg_req;

static void *bg_run(void *arg) {
    bg_req *b = arg;
    b->status = http(b->port, "POST", "/v1/completions", b->body, NULL, &b->r);
    return NULL;
}

/* Requests the engine has taken since st0: those it holds and those it
 * finished. Unlike running + waiting it only grows, so a wait for it ends
 * even when the first requests finish before the last arrive. */
static uint64_t taken_since(server *s, const engine_stats *st0) {
    engine_stats st;
    engine_get_stats(server_engine(s), &st);
    uint64_t n = (uint64_t)st.requests_running + st.requests_waiting;
    for (int k = 0; k < 4; k++)
        n += st.requests_total[k] - st0->requests_total[k];
    return n;
}

static bool wait_taken(server *s, const engine_stats *st0, uint64_t n) {
    for (int i = 0; i < 5000; i++) {
        if (taken_since(s, st0) >= n) return true;
        usleep(1000);
    }
    return false;
}

/* Queues n_ahead copies of ahead (one sequence slot: they run in turn),
 * then a non-streamed request whose client leaves with a reset, as a
 * killed client does, once the engine holds it. True if that request was
 * cancelled; *ahead_at_close says how many were still before it. */
static bool queued_client_leaves(server_fixture *f, const char *ahead, int n_ahead,
                                 uint32_t *ahead_at_close) {
    engine_stats st0;
    engine_get_stats(server_engine(f->s), &st0);
    bg_req *bgs = calloc((size_t)n_ahead, sizeof *bgs);
    pthread_t *th = calloc((size_t)n_ahead, sizeof *th);
    cr_assert(bgs && th);
    for (int k = 0; k < n_ahead; k++) {
        bgs[k] = (bg_req){.port = f->port, .body = (char *)ahead};
        pthread_create(&th[k], NULL, bg_run, &bgs[k]);
    }
    cr_assert(wait_taken(f->s, &st0, (uint64_t)n_ahead), "the streams ahead were not queued");
    /* The whole request is sent, and the client leaves once the engine
     * holds it (a client that gave up after a fixed 5 ms sometimes left
     * before its request was even sent, so there was nothing to cancel). */
    char *nb = completion_body("Once upon a time", 480, false, false);
    int fd = raw_connect(f->port, 0);
    cr_assert_geq(fd, 0);
    char head[256];
    int hl = snprintf(head, sizeof head,
                      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                      "application/json\r\nContent-Length: %zu\r\n\r\n",
                      strlen(nb));
    cr_assert(raw_send_all(fd, head, (size_t)hl) && raw_send_all(fd, nb, strlen(nb)));
    cr_assert(wait_taken(f->s, &st0, (uint64_t)n_ahead + 1), "the request was not queued");
    engine_stats sc;
    engine_get_stats(server_engine(f->s), &sc);
    uint32_t held = sc.requests_running + sc.requests_waiting;
    *ahead_at_close = held ? held - 1 : 0;
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
    for (int k = 0; k < n_ahead; k++) {
        pthread_join(th[k], NULL);
        cr_expect_eq(bgs[k].status, 200);
        resp_free(&bgs[k].r);
    }
    cr_assert(fixture_wait_idle(f->s, 5000, 0), "the server did not become idle");
    engine_stats st1;
    engine_get_stats(server_engine(f->s), &st1);
    free(nb);
    free(bgs);
    free(th);
    return st1.requests_total[ENGINE_FINISH_CANCELLED] >
           st0.requests_total[ENGINE_FINISH_CANCELLED];
}

Test(server, client_disconnect_mid_stream_cancels_and_frees_kv, .timeout = 30) {
    REQUIRE_SHARED(MODEL);
    server_fixture f;
    server_config c;
    fixture_defaults(&c, &f);
    c.engine.max_seqs = 1; /* so the stream cannot finish before the client leaves */
    fixture_start(&f, &c, true);
    engine_stats st0;
    engine_get_stats(server_engine(f.s), &st0);
    char *body = completion_body("Once upon a time", 480, true, false);
    resp r = {.abort_after = 600};
    long rc = http(f.port, "POST", "/v1/completions", body, NULL, &r);
    cr_assert_lt(rc, 0, "the client should have aborted");
    cr_assert(fixture_wait_idle(f.s, 5000, st0.requests_total[ENGINE_FINISH_CANCELLED] + 1),
              "KV blocks not returned after the client left");
    resp_free(&r);
    /* A non-streamed request whose client gives up while it waits in the
     * queue behind N_AHEAD 480-token streams (one slot: they run one after
     * another). */
    enum { N_AHEAD = 32, ATTEMPTS = 3 };
    bool cancelled = false;
    for (int attempt = 0; attempt < ATTEMPTS && !cancelled; attempt++) {
        uint32_t ahead_at_close = 0;
        cancelled = queued_client_leaves(&f, body, N_AHEAD, &ahead_at_close);
        /* The server looks for gone clients every SERVER_SWEEP_MS (100 ms);
         * with half the streams (hundreds of ms of work) still ahead when
         * the client left, the request cannot have had its turn first. A
         * machine too busy to close the socket before the queue ran out
         * proves nothing either way: that attempt is tried again. */
        cr_assert(cancelled || ahead_at_close < N_AHEAD / 2,
                  "non-streamed request not cancelled after its client left (%u streams were "
                  "still ahead of it)",
                  ahead_at_close);
    }
    cr_assert(cancelled, "the queue ran out before the client could leave in %d attempts",
              ATTEMPTS);
    /* the server still serves */
    resp r3 = {0};
    cr_assert_eq(
        http(f.port, "POST", "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":2}", NULL, &r3),
        200);
    resp_free(&r3);
    free(body);
    fixture_finish(&f);
}

/* ---------------------------------------------------------------------------
 * /metrics
 * ------------------------------------------------------------------------- */

/* Parses Prometheus text 0.0.4 strictly enough to catch format errors;
 * returns the value of the sample whose name+labels equal key, or -1. */
static double prom_get(const char *text, const char *key) {
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

Test(server, metrics_parse_and_counters_move_by_the_tokens_served, .timeout = 30) {
    REQUIRE_SHARED(MODEL);
    server_fixture f;
    fixture_serve(&f);
    resp m0 = {0}, m1 = {0}, r = {0};
    cr_assert_eq(http(f.port, "GET", "/metrics", NULL, NULL, &m0), 200);
    cr_assert(strstr(m0.headers, "text/plain; version=0.0.4"));
    char *body = completion_body("Once upon a time", 23, true, true);
    cr_assert_eq(http(f.port, "POST", "/v1/completions", body, NULL, &r), 200);
    stream st;
    parse_stream(r.body, OAI_COMPLETION, &st);
    cr_assert_eq(http(f.port, "GET", "/metrics", NULL, NULL, &m1), 200);
    double g0 = prom_get(m0.body, "tps_generation_tokens_total");
    double g1 = prom_get(m1.body, "tps_generation_tokens_total");
    cr_assert_eq(g1 - g0, (double)st.n_ids, "generation tokens moved by %g, served %zu", g1 - g0,
                 st.n_ids);
    cr_assert_eq(prom_get(m1.body, "tps_prompt_tokens_total") -
                     prom_get(m0.body, "tps_prompt_tokens_total"),
                 5.0);
    cr_assert_eq(prom_get(m1.body, "tps_requests_total{finish_reason=\"length\"}") -
                     prom_get(m0.body, "tps_requests_total{finish_reason=\"length\"}"),
                 1.0);
    cr_assert_eq(prom_get(m1.body, "tps_time_to_first_token_seconds_count"), 1.0);
    cr_assert_eq(prom_get(m1.body, "tps_inter_token_latency_seconds_count"), 22.0);
    cr_assert_eq(prom_get(m1.body, "tps_e2e_request_latency_seconds_count"), 1.0);
    cr_assert_eq(prom_get(m1.body, "tps_e2e_request_latency_seconds_bucket{le=\"+Inf\"}"), 1.0);
    cr_assert_geq(prom_get(m1.body, "tps_steps_total"), 23.0);
    cr_assert_geq(prom_get(m1.body, "tps_step_duration_seconds_count"), 23.0);
    cr_assert_geq(prom_get(m1.body, "tps_tokens_per_step_count"), 23.0);
    cr_assert_eq(prom_get(m1.body, "tps_requests_running"), 0.0);
    cr_assert_eq(prom_get(m1.body, "tps_kv_cache_usage_ratio"), 0.0);
    free(body);
    resp_free(&m0);
    resp_free(&m1);
    resp_free(&r);
    fixture_finish(&f);
}

/* ---------------------------------------------------------------------------
 * /tokenize, /detokenize
 * ------------------------------------------------------------------------- */

Test(server, tokenize_and_detokenize_like_llama_cpp, .timeout = 30) {
    REQUIRE_SHARED(MODEL);
    server_fixture f;
    fixture_serve(&f);
    resp r = {0};
    cr_assert_eq(http(f.port, "POST", "/tokenize",
                      "{\"content\":\"Once upon a time\",\"add_special\":true}", NULL, &r),
                 200);
    cr_assert_str_eq(r.body, "{\"tokens\":[1,403,407,261,378]}");
    resp_free(&r);
    cr_assert_eq(http(f.port, "POST", "/tokenize", "{\"content\":\"Once upon a time\"}", NULL, &r),
                 200);
    cr_assert_str_eq(r.body, "{\"tokens\":[403,407,261,378]}");
    resp_free(&r);
    cr_assert_eq(http(f.port, "POST", "/detokenize", "{\"tokens\":[403,407,261,378]}", NULL, &r),
                 200);
    cr_assert_str_eq(r.body, "{\"content\":\" Once upon a time\"}");
    resp_free(&r);
    expect_status(f.port, "POST", "/detokenize", "{\"tokens\":[100000]}", NULL, 400, "tokens",
                  NULL);
    expect_status(f.port, "POST", "/tokenize", "{\"content\":5}", NULL, 400, "content", NULL);
    fixture_finish(&f);
}

/* ---------------------------------------------------------------------------
 * Draining
 * ------------------------------------------------------------------------- */

Test(server, drain_finishes_in_flight_and_refuses_new_requests, .timeout = 60) {
    REQUIRE_SHARED(MODEL);
    server_fixture f;
    server_config c;
    fixture_defaults(&c, &f);
    c.engine.max_seqs = 1; /* the three requests run one after another */
    fixture_start(&f, &c, true);
    /* a keep-alive connection opened before the drain */
    CURL *ka = curl_easy_init();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/health", f.port);
    resp hr = {0};
    curl_easy_setopt(ka, CURLOPT_URL, url);
    curl_easy_setopt(ka, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(ka, CURLOPT_WRITEDATA, &hr);
    curl_easy_setopt(ka, CURLOPT_TIMEOUT, 10L);
    cr_assert_eq(curl_easy_perform(ka), CURLE_OK);
    resp_free(&hr);

    enum { N = 3 };
    bg_req b[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        b[i] =
            (bg_req){.port = f.port, .body = completion_body("Once upon a time", 160, true, true)};
        pthread_create(&th[i], NULL, bg_run, &b[i]);
    }
    /* wait until all three are in the engine */
    for (int i = 0; i < 500; i++) {
        engine_stats st;
        engine_get_stats(server_engine(f.s), &st);
        if (st.requests_running + st.requests_waiting == N) break;
        usleep(2000);
    }
    server_drain(f.s);
    usleep(20000);
    curl_easy_setopt(ka, CURLOPT_WRITEDATA, &hr);
    CURLcode cc = curl_easy_perform(ka);
    long code = 0;
    curl_easy_getinfo(ka, CURLINFO_RESPONSE_CODE, &code);
    cr_assert(cc != CURLE_OK || code == 503, "during the drain: %d %ld", cc, code);
    curl_easy_cleanup(ka);
    resp_free(&hr);
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(b[i].status, 200);
        stream st;
        parse_stream(b[i].r.body, OAI_COMPLETION, &st);
        cr_assert(st.done, "request %d lost its end", i);
        cr_assert_str_eq(st.finish, "length");
        cr_assert_eq(st.usage_completion, 160);
        resp_free(&b[i].r);
        free(b[i].body);
    }
    cr_assert_eq(server_wait(f.s), 0);
    /* the listening socket is closed */
    resp r = {0};
    cr_assert_lt(http(f.port, "GET", "/health", NULL, NULL, &r), 0);
    resp_free(&r);
    fixture_finish(&f);
}

/* The real binary: SIGTERM while a stream runs -> the stream completes, exit 0. */
Test(server, sigterm_drains_and_exits_zero, .timeout = 60) {
    REQUIRE_SHARED(MODEL);
    char *model = shared_path(MODEL);
    int errp[2];
    cr_assert_eq(pipe(errp), 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(errp[1], 2);
        close(errp[0]);
        execl(TPS_BIN, TPS_BIN, "serve", "-m", model, "--port", "0", "--threads", "1", "--max-seqs",
              "1", (char *)NULL);
        _exit(127);
    }
    close(errp[1]);
    char log[8192] = {0};
    size_t ll = 0;
    int port = 0;
    for (int i = 0; i < 200 && !port; i++) {
        struct pollfd pf = {.fd = errp[0], .events = POLLIN};
        if (poll(&pf, 1, 100) > 0) {
            ssize_t k = read(errp[0], log + ll, sizeof log - 1 - ll);
            if (k <= 0) break;
            ll += (size_t)k;
            const char *at = strstr(log, "listening on http://127.0.0.1:");
            if (at) port = atoi(at + strlen("listening on http://127.0.0.1:"));
        }
    }
    cr_assert_gt(port, 0, "the server did not start: %s", log);
    bg_req b = {.port = port, .body = completion_body("Once upon a time", 240, true, true)};
    bg_req b2 = {.port = port, .body = completion_body("Lily and Tom", 240, true, true)};
    pthread_t th, th2;
    pthread_create(&th, NULL, bg_run, &b);
    pthread_create(&th2, NULL, bg_run, &b2);
    /* SIGTERM once both are in the engine (one running, one waiting) */
    bool both = false;
    for (int i = 0; i < 2000 && !both; i++) {
        resp m = {0};
        if (http(port, "GET", "/metrics", NULL, NULL, &m) == 200)
            both = prom_get(m.body, "tps_requests_running") +
                       prom_get(m.body, "tps_requests_waiting") ==
                   2.0;
        resp_free(&m);
        if (!both) usleep(1000);
    }
    kill(pid, SIGTERM);
    cr_assert(both, "the two requests never reached the engine");
    pthread_join(th, NULL);
    pthread_join(th2, NULL);
    int status = 0;
    for (int i = 0; i < 1000 && waitpid(pid, &status, WNOHANG) == 0; i++)
        usleep(10000);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit status %d", status);
    bg_req *bs[2] = {&b, &b2};
    for (int i = 0; i < 2; i++) {
        /* both were in flight at the signal: both finish whole */
        cr_assert_eq(bs[i]->status, 200, "request %d: %ld", i, bs[i]->status);
        stream st;
        parse_stream(bs[i]->r.body, OAI_COMPLETION, &st);
        cr_assert(st.done);
        cr_assert_eq(st.usage_completion, 240);
        resp_free(&bs[i]->r);
        free(bs[i]->body);
    }
    close(errp[0]);
    free(model);
}

/* ---------------------------------------------------------------------------
 * Hostile clients
 * ------------------------------------------------------------------------- */

Test(server, slowloris_client_is_dropped_after_the_timeout, .timeout = 30) {
    REQUIRE_SHARED(MODEL);
    server_fixture f;
    server_config c;
    fixture_defaults(&c, &f);
    c.timeout_s = 1;
    fixture_start(&f, &c, true);
    int fd = raw_connect(f.port, 0);
    cr_assert_geq(fd, 0);
    const char *req = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    send(fd, req, strlen(req), MSG_NOSIGNAL);
    bool closed = false;
    /* one byte every 200 ms: never idle long enough for a read timeout */
    for (int i = 0; i < 20 && !closed; i++) {
        usleep(200000);
        if (send(fd, "a", 1, MSG_NOSIGNAL) < 0) closed = true;
        char buf[64];
        ssize_t k = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (k == 0) closed = true;
    }
    cr_assert(closed, "a client trickling its headers for 4 s was not dropped (timeout 1 s)");
    close(fd);
    resp r = {0};
    cr_assert_eq(http(f.port, "GET", "/health", NULL, NULL, &r), 200);
    resp_free(&r);
    fixture_finish(&f);
}

Test(server, connections_over_the_limit_shed_silent_ones_and_are_served, .timeout = 30) {
    REQUIRE_SHARED(MODEL);
    server_fixture f;
    server_config c;
    fixture_defaults(&c, &f);
    c.max_connections = 4;
    c.max_conns_per_client = 64;
    fixture_start(&f, &c, true);
    /* silent: they fill the table (4 slots and the 8 reserved for /health
     * and /metrics) but hold no class: a new connection sheds the oldest
     * of them (issue 33; before, it waited in the backlog until they closed) */
    int fds[12];
    for (int i = 0; i < 12; i++)
        cr_assert_geq(fds[i] = raw_connect(f.port, 0), 0);
    usleep(150000);
    bg_req b = {.port = f.port, .body = strdup("{\"prompt\":\"x\",\"max_tokens\":2}")};
    pthread_t th;
    pthread_create(&th, NULL, bg_run, &b);
    usleep(150000);
    for (int i = 0; i < 12; i++)
        close(fds[i]);
    pthread_join(th, NULL);
    cr_assert_eq(b.status, 200);
    resp_free(&b.r);
    free(b.body);
    fixture_finish(&f);
}

/* ---------------------------------------------------------------------------
 * Parallel sampling (n) and the prefix cache
 * ------------------------------------------------------------------------- */

/* POSTs body to path, asserts 200 and returns the parsed body. */
static json_t *post_ok(int port, const char *path, const char *body) {
    resp r = {0};
    long st = http(port, "POST", path, body, NULL, &r);
    cr_assert_eq(st, 200, "POST %s %s: %ld: %s", path, body, st, r.body ? r.body : "");
    json_t *j = body_json(&r);
    resp_free(&r);
    return j;
}

/* choices[i]'s text (completions) or message content (chat); borrowed. */
static const char *choice_text(json_t *j, size_t i) {
    json_t *c = json_array_get(json_object_get(j, "choices"), i);
    cr_assert(c, "no choices[%zu]", i);
    json_t *t = json_object_get(c, "text");
    if (!t) t = json_object_get(json_object_get(c, "message"), "content");
    cr_assert(json_is_string(t), "choices[%zu] has no text", i);
    return json_string_value(t);
}

static json_int_t usage_of(json_t *j, const char *key) {
    json_t *v = json_object_get(json_object_get(j, "usage"), key);
    cr_assert(json_is_integer(v), "usage.%s missing", key);
    return json_integer_value(v);
}

static json_int_t cached_of(json_t *j) {
    json_t *d = json_object_get(json_object_get(j, "usage"), "prompt_tokens_details");
    json_t *v = json_object_get(d, "cached_tokens");
    cr_assert(json_is_integer(v), "usage.prompt_tokens_details.cached_tokens missing");
    json_t *tv = json_object_get(json_object_get(j, "timings"), "cached_tokens");
    cr_assert(json_is_integer(tv) && json_integer_value(tv) == json_integer_value(v),
              "timings.cached_tokens differs from usage's");
    return json_integer_value(v);
}

/* A completions body with n choices; seed < 0: none. */
static char *n_body(const char *prompt, int n, int max_tokens, double temp, long seed, bool stream_,
                    bool usage) {
    json_t *b = json_pack("{s:s, s:i, s:i, s:f, s:b, s:b}", "prompt", prompt, "n", n, "max_tokens",
                          max_tokens, "temperature", temp, "stream", stream_, "ignore_eos", 1);
    if (seed >= 0) json_object_set_new(b, "seed", json_integer(seed));
    if (usage) json_object_set_new(b, "stream_options", json_pack("{s:b}", "include_usage", 1));
    char *s = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    return s;
}

Test(server, n3_non_streamed_has_three_indexed_choices_and_summed_usage, .timeout = 60) {
    REQUIRE_SHARED(MODEL);
    server_fixture f;
    fixture_serve(&f);
    char *body = n_body("Once upon a time", 3, 10, 0.8, 7, false, false);
    json_t *j = post_ok(f.port, "/v1/completions", body);
    json_t *ch = json_object_get(j, "choices");
    cr_assert_eq(json_array_size(ch), 3);
    for (size_t i = 0; i < 3; i++) {
        json_t *c = json_array_get(ch, i);
        cr_assert_eq(json_integer_value(json_object_get(c, "index")), (json_int_t)i);
        cr_assert_str_eq(json_string_value(json_object_get(c, "finish_reason")), "length");
    }
    /* the prompt once, every choice's tokens */
    cr_assert_eq(usage_of(j, "prompt_tokens"), 5);
    cr_assert_eq(usage_of(j, "completion_tokens"), 30);
    cr_assert_eq(usage_of(j, "total_tokens"), 35);
    cr_assert_eq(
        json_integer_value(json_object_get(json_object_get(j, "timings"), "completion_tokens")),
        30);
    cached_of(j);
    json_decref(j);
    free(body);
    /* chat: choices carry messages */
    j = post_ok(f.port, "/v1/chat/completions",
                "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"n\":2,\"max_tokens\":6,"
                "\"ignore_eos\":true}");
    cr_assert_eq(json_array_size(json_object_get(j, "choices")), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *c = json_array_get(json_object_get(j, "choices"), i);
        cr_assert_eq(json_integer_value(json_object_get(c, "index")), (json_int_t)i);
        cr_assert_str_eq(json_string_value(json_object_get(json_object_get(c, "message"), "role")),
                         "assistant");
    }
    cr_assert_eq(usage_of(j, "completion_tokens"), 12);
    json_decref(j);
    fixture_finish(&f);
}

Test(server, choice_i_equals_an_n1_request_with_seed_plus_i, .timeout = 60) {
    REQUIRE_SHARED(MODEL);
    server_fixture f;
    fixture_serve(&f);
    const char *prompt = "Lily and Tom";
    char *body = n_body(prompt, 3, 24, 1.0, 42, false, false);
    json_t *j = post_ok(f.port, "/v1/completions", body);
    free(body);
    for (size_t i = 0; i < 3; i++) {
        char *b1 = n_body(prompt, 1, 24, 1.0, 42 + (long)i, false, false);
        json_t *one = post_ok(f.port, "/v1/completions", b1);
        cr_assert_str_eq(choice_text(j, i), choice_text(one, 0), "choice %zu vs seed %ld", i,
                         42 + (long)i);
        json_decref(one);
        free(b1);
    }
    /* different seeds sample different texts (24 tokens at temperature 1) */
    cr_assert(strcmp(choice_text(j, 0), choice_text(j, 1)) ||
                  strcmp(choice_text(j, 1), choice_text(j, 2)),
              "three sampled choices are identical");
    json_decref(j);
    /* no seed: still seed + i per choice, so the choices differ */
    body = n_body(prompt, 3, 24, 1.0, -1, false, false);
    j = post_ok(f.port, "/v1/completions", body);
    cr_assert(strcmp(choice_text(j, 0), choice_text(j, 1)) ||
                  strcmp(choice_text(j, 1), choice_text(j, 2)),
              "without a seed the choices are identical");
    json_decref(j);
    free(body);
    fixture_finish(&f);
}

Test(server, greedy_n2_choices_equal_each_other_and_n1, .timeout = 60) {
    REQUIRE_SHARED(MODEL);
    server_fixture f;
    fixture_serve(&f);
    char *b2 = n_body("The sun", 2, 20, 0.0, -1, false, false);
    char *b1 = n_body("The sun", 1, 20, 0.0, -1, false, false);
    json_t *j2 = post_ok(f.port, "/v1/completions", b2);
    json_t *j1 = post_ok(f.port, "/v1/completions", b1);
    cr_assert_eq(json_array_size(json_object_get(j2, "choices")), 2);
    cr_assert_str_eq(choice_text(j2, 0), choice_text(j2, 1));
    cr_assert_str_eq(choice_text(j2, 0), choice_text(j1, 0));
    cr_assert_eq(json_array_size(json_object_get(j1, "choices")), 1);
    json_decref(j1);
    json_decref(j2);
    free(b1);
    free(b2);
    fixture_finish(&f);
}

Test(server, streamed_n2_tags_chunks_with_their_index_and_finishes_each, .timeout = 60) {
    REQUIRE_SHARED(MODEL);
    server_fixture f;
    fixture_serve(&f);
    char *body = n_body("Once upon a time", 2, 16, 0.9, 5, true, true);
    resp r = {0};
    cr_assert_eq(http(f.port, "POST", "/v1/completions", body, NULL, &r), 200);
    stream *st = malloc(sizeof *st);
    parse_stream(r.body, OAI_COMPLETION, st);
    cr_assert(st->done, "no [DONE]"); /* parse_stream fails on anything after it */
    cr_assert_eq(stream_choices_seen(st), 2);
    for (size_t i = 0; i < 2; i++) {
        cr_assert_eq(st->ch[i].n_ids, 16, "choice %zu has %zu tokens", i, st->ch[i].n_ids);
        cr_assert_eq(st->ch[i].n_finish, 1, "choice %zu: %zu finish chunks", i, st->ch[i].n_finish);
        cr_assert_str_eq(st->ch[i].finish, "length");
    }
    cr_assert_eq(st->usage_completion, 32);
    cr_assert_eq(st->usage_prompt, 5);
    cr_assert_geq(st->usage_cached, 0, "usage chunk lacks prompt_tokens_details.cached_tokens");
    cr_assert(st->usage_after_finishes, "the usage chunk came before a choice finished");
    resp_free(&r);
    /* the same request unstreamed: the same text per choice */
    free(body);
    body = n_body("Once upon a time", 2, 16, 0.9, 5, false, false);
    json_t *j = post_ok(f.port, "/v1/completions", body);
    for (size_t i = 0; i < 2; i++)
        cr_assert_str_eq(st->ch[i].text, choice_text(j, i), "choice %zu", i);
    json_decref(j);
    free(body);
    /* chat: each choice opens with its own role chunk */
    const char *cb = "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"n\":2,"
                     "\"max_tokens\":8,\"ignore_eos\":true,\"stream\":true,"
                     "\"stream_options\":{\"include_usage\":true}}";
    cr_assert_eq(http(f.port, "POST", "/v1/chat/completions", cb, NULL, &r), 200);
    parse_stream(r.body, OAI_CHAT, st);
    cr_assert(st->done);
    for (size_t i = 0; i < 2; i++) {
        cr_assert(st->ch[i].role_first, "chat choice %zu: no role chunk before its content", i);
        cr_assert_eq(st->ch[i].n_ids, 8);
        cr_assert_eq(st->ch[i].n_finish, 1);
    }
    cr_assert_eq(st->usage_completion, 16);
    cr_assert(st->usage_after_finishes);
    resp_free(&r);
    free(st);
    fixture_finish(&f);
}

Test(server, n_out_of_range_is_400_naming_n, .timeout = 60) {
    REQUIRE_SHARED(MODEL);
    server_fixture f;
    fixture_serve(&f);
    int p = f.port;
    expect_status(p, "POST", "/v1/completions", "{\"prompt\":\"x\",\"n\":0}", NULL, 400, "n",
                  "at least 1");
    expect_status(p, "POST", "/v1/completions", "{\"prompt\":\"x\",\"n\":-1}", NULL, 400, "n",
                  NULL);
    expect_status(p, "POST", "/v1/completions", "{\"prompt\":\"x\",\"n\":17}", NULL, 400, "n",
                  "--max-n");
    expect_status(p, "POST", "/v1/chat/completions",
                  "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":17}", NULL, 400, "n",
                  "16");
    expect_status(p, "POST", "/v1/completions", "{\"prompt\":\"x\",\"n\":2,\"best_of\":3}", NULL,
                  400, "best_of", "not supported");
    /* the default ceiling itself is served */
    json_t *j = post_ok(p, "/v1/completions", "{\"prompt\":\"x\",\"n\":16,\"max_tokens\":2}");
    cr_assert_eq(json_array_size(json_object_get(j, "choices")), 16);
    cr_assert_eq(json_integer_value(
                     json_object_get(json_array_get(json_object_get(j, "choices"), 15), "index")),
                 15);
    json_decref(j);
    fixture_finish(&f);
}

Test(server, n_over_max_n_max_seqs_or_the_kv_pool_is_400, .timeout = 60) {
    REQUIRE_SHARED(MODEL);
    server_fixture f;
    server_config c;
    fixture_defaults(&c, &f);
    c.max_n = 3;
    c.engine.max_seqs = 2;
    c.engine.kv_tokens = 256; /* 16 blocks of 16 */
    fixture_start(&f, &c, true);
    int p = f.port;
    expect_status(p, "POST", "/v1/completions", "{\"prompt\":\"x\",\"n\":4}", NULL, 400, "n",
                  "at most 3");
    expect_status(p, "POST", "/v1/completions", "{\"prompt\":\"x\",\"n\":3}", NULL, 400, "n",
                  "--max-seqs");
    /* one choice of 5 + 200 tokens fits 16 blocks; two never can */
    json_t *j = post_ok(p, "/v1/completions",
                        "{\"prompt\":\"Once upon a time\",\"max_tokens\":200,\"n\":1}");
    json_decref(j);
    resp r = {0};
    cr_assert_eq(http(p, "POST", "/v1/completions",
                      "{\"prompt\":\"Once upon a time\",\"max_tokens\":200,\"n\":2}", NULL, &r),
                 400, "%s", r.body);
    j = body_json(&r);
    const char *msg = expect_error(j, "n");
    cr_assert(strstr(msg, "KV"), "message does not say why: %s", msg);
    json_decref(j);
    resp_free(&r);
    fixture_finish(&f);
}

Test(server, client_disconnect_cancels_every_choice, .timeout = 60) {
    REQUIRE_SHARED(MODEL);
    server_fixture f;
    fixture_serve(&f);
    engine_stats st0;
    engine_get_stats(server_engine(f.s), &st0);
    /* 8 choices of 480 tokens: far more than the client reads before leaving */
    char *body = n_body("Once upon a time", 8, 480, 1.0, 1, true, false);
    resp r = {.abort_after = 1500};
    cr_assert_lt(http(f.port, "POST", "/v1/completions", body, NULL, &r), 0,
                 "the client should have aborted");
    cr_assert(fixture_wait_idle(f.s, 5000, st0.requests_total[ENGINE_FINISH_CANCELLED] + 1),
              "choices still running after the client left");
    resp_free(&r);
    /* the server still serves, and nothing in flight is left behind */
    json_t *j = post_ok(f.port, "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":2,\"n\":2}");
    json_decref(j);
    resp m = {0};
    cr_assert_eq(http(f.port, "GET", "/metrics", NULL, NULL, &m), 200);
    cr_assert_eq(prom_get(m.body, "tps_http_requests_in_flight"), 0.0);
    resp_free(&m);
    free(body);
    fixture_finish(&f);
}

/* More than two KV blocks of 16 tokens. */
#define LONG_PROMPT                                                                                \
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the "      \
    "sunshine. One day, she saw a big red ball in the park. She ran to get it, but a dog took it " \
    "first."

static char *long_body(bool stream_) {
    return n_body(LONG_PROMPT, 1, 12, 0.0, -1, stream_, stream_);
}

Test(server, repeated_long_prompt_reports_cached_tokens_and_same_text, .timeout = 60) {
    REQUIRE_SHARED(MODEL);
    server_fixture f;
    fixture_serve(&f);
    resp m0 = {0}, m1 = {0};
    cr_assert_eq(http(f.port, "GET", "/metrics", NULL, NULL, &m0), 200);
    char *body = long_body(false);
    json_t *a = post_ok(f.port, "/v1/completions", body);
    json_t *b = post_ok(f.port, "/v1/completions", body);
    json_int_t np = usage_of(a, "prompt_tokens");
    cr_assert_gt(np, 32, "the prompt has %lld tokens: not over two blocks", (long long)np);
    json_int_t ca = cached_of(a), cb = cached_of(b);
    cr_assert_eq(ca, 0, "a fresh server had %lld tokens cached", (long long)ca);
    cr_assert_gt(cb, 0, "the second identical prompt found nothing in the prefix cache");
    cr_assert_lt(cb, np);
    cr_assert_str_eq(choice_text(a, 0), choice_text(b, 0), "a cache hit changed the output");
    /* streamed: the usage chunk has it too */
    char *sbody = long_body(true);
    resp r = {0};
    cr_assert_eq(http(f.port, "POST", "/v1/completions", sbody, NULL, &r), 200);
    stream st;
    parse_stream(r.body, OAI_COMPLETION, &st);
    cr_assert_eq(st.usage_cached, (long)cb);
    cr_assert_str_eq(st.text, choice_text(a, 0));
    resp_free(&r);
    /* /metrics: vLLM's counters, in tokens */
    cr_assert_eq(http(f.port, "GET", "/metrics", NULL, NULL, &m1), 200);
    double q0 = prom_get(m0.body, "tps_prefix_cache_queries_total");
    double h0 = prom_get(m0.body, "tps_prefix_cache_hits_total");
    double q1 = prom_get(m1.body, "tps_prefix_cache_queries_total");
    double h1 = prom_get(m1.body, "tps_prefix_cache_hits_total");
    cr_assert(q0 >= 0 && h0 >= 0, "prefix cache counters missing");
    cr_assert_eq(h1 - h0, (double)(ca + 2 * cb), "hits moved by %g", h1 - h0);
    cr_assert_geq(q1 - q0, h1 - h0);
    cr_assert_gt(prom_get(m1.body, "tps_kv_cache_blocks_cached"), 0.0);
    json_decref(a);
    json_decref(b);
    free(body);
    free(sbody);
    resp_free(&m0);
    resp_free(&m1);
    fixture_finish(&f);
}

Test(server, no_prefix_cache_reports_zero_cached_tokens, .timeout = 60) {
    REQUIRE_SHARED(MODEL);
    server_fixture f;
    server_config c;
    fixture_defaults(&c, &f);
    c.engine.no_prefix_cache = true;
    fixture_start(&f, &c, true);
    char *body = long_body(false);
    json_t *a = post_ok(f.port, "/v1/completions", body);
    json_t *b = post_ok(f.port, "/v1/completions", body);
    cr_assert_eq(cached_of(a), 0);
    cr_assert_eq(cached_of(b), 0);
    cr_assert_str_eq(choice_text(a, 0), choice_text(b, 0));
    resp m = {0};
    cr_assert_eq(http(f.port, "GET", "/metrics", NULL, NULL, &m), 200);
    cr_assert_eq(prom_get(m.body, "tps_prefix_cache_hits_total"), 0.0);
    resp_free(&m);
    json_decref(a);
    json_decref(b);
    free(body);
    fixture_finish(&f);
}

Test(server, serve_help_lists_max_n_and_no_prefix_cache, .timeout = 30) {
    char *out = NULL;
    cr_assert_eq(run_tps("serve --help", false, &out), 0);
    cr_assert(strstr(out, "--max-n"), "%s", out);
    cr_assert(strstr(out, "--no-prefix-cache"), "%s", out);
    free(out);
    out = NULL;
    cr_assert_eq(run_tps("serve -m none.gguf --max-n 0", true, &out), 2, "%s", out);
    cr_assert(strstr(out, "--max-n"), "%s", out);
    free(out);
}

/* ---------------------------------------------------------------------------
 * No parameter silently ignored
 * ------------------------------------------------------------------------- */

/* logit_bias is honoured: +100 on one token makes every sampled token that
 * token at temperature 1; malformed maps are a 400 naming logit_bias. */
Test(server, logit_bias_forces_a_token_and_bad_maps_are_400, .timeout = 30) {
    REQUIRE_SHARED(MODEL);
    server_fixture f;
    fixture_serve(&f);
    int p = f.port;
    resp r = {0};
    cr_assert_eq(
        http(p, "POST", "/v1/completions",
             "{\"prompt\":\"Once upon a time\",\"max_tokens\":12,\"temperature\":1,"
             "\"seed\":3,\"ignore_eos\":true,\"stream\":true,\"logit_bias\":{\"400\":100}}",
             NULL, &r),
        200, "%s", r.body ? r.body : "");
    stream st;
    parse_stream(r.body, OAI_COMPLETION, &st);
    cr_assert_eq(st.n_ids, 12);
    for (size_t i = 0; i < st.n_ids; i++)
        cr_expect_eq(st.ids[i], 400, "token %zu is %d", i, st.ids[i]);
    resp_free(&r);
    const char *bad[] = {"\"x\"",         "[1]",           "{\"abc\":1}", "{\"5\":200}",
                         "{\"5\":\"1\"}", "{\"99999\":5}", "{\"-1\":5}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char body[128];
        snprintf(body, sizeof body, "{\"prompt\":\"x\",\"logit_bias\":%s}", bad[i]);
        expect_status(p, "POST", "/v1/completions", body, NULL, 400, "logit_bias", NULL);
    }
    fixture_finish(&f);
}

/* Every field of OpenAI's completions and chat request schemas is honoured
 * (a 200) or refused with a 400 unsupported_parameter naming it; a field
 * asking for nothing (null, false, the neutral value) is accepted. */
Test(server, every_openai_request_field_is_honoured_or_refused_by_name, .timeout = 60) {
    REQUIRE_SHARED(MODEL);
    server_fixture f;
    fixture_serve(&f);
    int p = f.port;
    /* field, a value that asks for something, refused? (chat schema unless noted) */
    static const struct {
        const char *field, *value;
        bool refused;
    } F[] = {
        {"model", "\"m\"", false},
        {"frequency_penalty", "0.5", false},
        {"presence_penalty", "0.5", false},
        {"logit_bias", "{\"5\":1}", false},
        {"logprobs", "true", false},
        {"max_tokens", "3", false},
        {"max_completion_tokens", "3", false},
        {"n", "2", false},
        {"seed", "4", false},
        {"stop", "[\"zz\"]", false},
        {"stream", "true", false},
        {"stream_options", "{\"include_usage\":true}", false},
        {"temperature", "0.5", false},
        {"top_p", "0.5", false},
        {"user", "\"u\"", false},
        {"metadata", "{\"k\":\"v\"}", false},
        {"service_tier", "\"auto\"", false},
        {"tools", "[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]", false},
        {"parallel_tool_calls", "true", false},
        {"functions", "[{\"name\":\"f\"}]", true},
        {"function_call", "\"auto\"", true},
        {"response_format", "{\"type\":\"json_object\"}", false},
        {"store", "true", false}, /* a label (docs/api.md) */
        {"audio", "{\"voice\":\"x\",\"format\":\"mp3\"}", true},
        {"modalities", "[\"text\",\"audio\"]", true},
        {"prediction", "{\"type\":\"content\",\"content\":\"x\"}", true},
        {"reasoning_effort", "\"low\"", true},
        {"web_search_options", "{\"search_context_size\":\"low\"}", true},
        {"grammar", "\"root ::= \\\"a\\\"\"", false},
        {"json_schema", "{\"type\":\"object\"}", false},
        {"regex", "\"a+\"", false},
        {"guided_json", "{\"type\":\"object\"}", false},
        {"guided_regex", "\"a+\"", false},
        {"guided_grammar", "\"root ::= \\\"a\\\"\"", false},
        {"guided_choice", "[\"a\",\"b\"]", false},
        {"verbosity", "\"low\"", true},
    };
    char body[512];
    for (size_t i = 0; i < sizeof F / sizeof F[0]; i++) {
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":2,"
                 "\"%s\":%s}",
                 F[i].field, F[i].value);
        if (!strcmp(F[i].field, "max_tokens") ||
            !strcmp(F[i].field, "max_completion_tokens")) /* not twice */
            snprintf(body, sizeof body,
                     "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":3}");
        resp r = {0};
        long st = http(p, "POST", "/v1/chat/completions", body, NULL, &r);
        if (F[i].refused) {
            cr_expect_eq(st, 400, "%s: %ld %s", F[i].field, st, r.body ? r.body : "");
            json_t *j = body_json(&r);
            const char *param =
                json_string_value(json_object_get(json_object_get(j, "error"), "param"));
            const char *code =
                json_string_value(json_object_get(json_object_get(j, "error"), "code"));
            cr_expect(param && !strcmp(param, F[i].field), "%s: param %s", F[i].field,
                      param ? param : "null");
            cr_expect(code && !strcmp(code, "unsupported_parameter"), "%s: code %s", F[i].field,
                      code ? code : "null");
            json_decref(j);
        } else {
            cr_expect_eq(st, 200, "%s: %ld %s", F[i].field, st, r.body ? r.body : "");
        }
        resp_free(&r);
    }
    /* completions-only fields */
    expect_status(p, "POST", "/v1/completions", "{\"prompt\":\"x\",\"suffix\":\"end\"}", NULL, 400,
                  "suffix", NULL);
    expect_status(p, "POST", "/v1/completions", "{\"prompt\":\"x\",\"echo\":true}", NULL, 400,
                  "echo", NULL);
    expect_status(p, "POST", "/v1/completions", "{\"prompt\":\"x\",\"best_of\":2}", NULL, 400,
                  "best_of", NULL);
    expect_status(p, "POST", "/v1/completions",
                  "{\"prompt\":\"x\",\"tools\":[{\"type\":\"function\",\"function\":{"
                  "\"name\":\"f\"}}]}",
                  NULL, 400, "tools", NULL);
    /* tool_choice without tools asks for calls nobody can make */
    expect_status(p, "POST", "/v1/chat/completions",
                  "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                  "\"tool_choice\":\"required\"}",
                  NULL, 400, "tool_choice", NULL);
    /* values that ask for nothing are accepted */
    const char *neutral[] = {"\"response_format\":{\"type\":\"text\"}",
                             "\"tool_choice\":\"none\"",
                             "\"modalities\":[\"text\"]",
                             "\"store\":false",
                             "\"parallel_tool_calls\":null",
                             "\"suffix\":\"\"",
                             "\"logprobs\":false",
                             "\"tools\":[]"};
    for (size_t i = 0; i < sizeof neutral / sizeof neutral[0]; i++) {
        snprintf(body, sizeof body, "{\"prompt\":\"x\",\"max_tokens\":2,%s}", neutral[i]);
        resp r = {0};
        cr_expect_eq(http(p, "POST", "/v1/completions", body, NULL, &r), 200, "%s: %s", neutral[i],
                     r.body ? r.body : "");
        resp_free(&r);
    }
    fixture_finish(&f);
}

/* ---------------------------------------------------------------------------
 * logprobs
 * ------------------------------------------------------------------------- */

/* Completions logprobs: 5 on the reference prompts as token ids, greedy:
 * one entry per completion token, each token's logprob within llama.cpp's
 * reference (tests/test_logprobs.c explains the bound), the top dict holds
 * at most 5 and its best is the chosen token's, text offsets increase. */
Test(server, completions_logprobs_match_the_reference_and_have_openai_shape, .timeout = 60) {
    REQUIRE_SHARED(MODEL);
    REQUIRE_SHARED(REF);
    server_fixture f;
    fixture_serve(&f);
    json_t *ref = load_ref();
    json_t *cs = json_array_get(json_object_get(ref, "cases"), 1);
    json_t *top5 = json_object_get(cs, "top5_per_position");
    json_t *body =
        json_pack("{s:O, s:i, s:f, s:i, s:b}", "prompt", json_object_get(cs, "prompt_ids"),
                  "max_tokens", 16, "temperature", 0.0, "logprobs", 5, "ignore_eos", 1);
    char *b = json_dumps(body, JSON_COMPACT);
    json_t *j = post_ok(f.port, "/v1/completions", b);
    json_t *lp = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "logprobs");
    json_t *toks = json_object_get(lp, "tokens"), *tlp = json_object_get(lp, "token_logprobs");
    json_t *top = json_object_get(lp, "top_logprobs"), *off = json_object_get(lp, "text_offset");
    cr_assert_eq(json_array_size(toks), 16, "%s", b);
    cr_assert_eq(json_array_size(tlp), 16);
    cr_assert_eq(json_array_size(top), 16);
    cr_assert_eq(json_array_size(off), 16);
    for (size_t i = 0; i < 16; i++) {
        double got = json_real_value(json_array_get(tlp, i));
        double want =
            json_real_value(json_object_get(json_array_get(json_array_get(top5, i), 0), "logprob"));
        cr_expect(fabs(got - want) <= 0.04, "token %zu: %g, llama.cpp %g", i, got, want);
        json_t *d = json_array_get(top, i);
        cr_expect(json_object_size(d) >= 1 && json_object_size(d) <= 5);
        double best = -1e30;
        const char *k;
        json_t *v;
        json_object_foreach(d, k, v) if (json_real_value(v) > best) best = json_real_value(v);
        cr_expect(fabs(best - got) < 1e-6, "greedy: the chosen token is the most likely");
        if (i)
            cr_expect_geq(json_integer_value(json_array_get(off, i)),
                          json_integer_value(json_array_get(off, i - 1)));
    }
    json_decref(j);
    free(b);
    json_decref(body);
    json_decref(ref);
    fixture_finish(&f);
}

/* Chat logprobs, streamed and not: content entries with token, logprob,
 * bytes and top_logprobs of the asked length; the stream carries one entry
 * per token chunk; both give the same logprobs for the same greedy run. */
Test(server, chat_logprobs_streamed_and_whole_agree, .timeout = 60) {
    REQUIRE_SHARED(MODEL);
    server_fixture f;
    fixture_serve(&f);
    const char *whole = "{\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}],"
                        "\"max_tokens\":8,\"temperature\":0,\"ignore_eos\":true,"
                        "\"logprobs\":true,\"top_logprobs\":3}";
    json_t *j = post_ok(f.port, "/v1/chat/completions", whole);
    json_t *content = json_object_get(
        json_object_get(json_array_get(json_object_get(j, "choices"), 0), "logprobs"), "content");
    cr_assert_eq(json_array_size(content), 8);
    double lps[8];
    for (size_t i = 0; i < 8; i++) {
        json_t *e = json_array_get(content, i);
        cr_expect(json_is_string(json_object_get(e, "token")));
        cr_expect(json_is_array(json_object_get(e, "bytes")));
        cr_expect_eq(json_array_size(json_object_get(e, "top_logprobs")), 3);
        lps[i] = json_real_value(json_object_get(e, "logprob"));
        cr_expect_leq(lps[i], 0.0);
    }
    json_decref(j);
    char streamed[512];
    snprintf(streamed, sizeof streamed, "%.*s,\"stream\":true}", (int)strlen(whole) - 1, whole);
    resp r = {0};
    cr_assert_eq(http(f.port, "POST", "/v1/chat/completions", streamed, NULL, &r), 200);
    size_t n = 0;
    for (const char *p = r.body; (p = strstr(p, "data: {")); p += 6) {
        const char *end = strstr(p, "\n\n");
        json_t *c = json_loadb(p + 6, (size_t)(end - p - 6), 0, NULL);
        json_t *ct = json_object_get(
            json_object_get(json_array_get(json_object_get(c, "choices"), 0), "logprobs"),
            "content");
        if (json_array_size(ct) == 1) {
            cr_assert_lt(n, 8);
            cr_expect(fabs(json_real_value(json_object_get(json_array_get(ct, 0), "logprob")) -
                           lps[n]) < 1e-6,
                      "token %zu", n);
            n++;
        }
        json_decref(c);
    }
    cr_expect_eq(n, 8, "one logprobs entry per token chunk");
    resp_free(&r);
    fixture_finish(&f);
}
