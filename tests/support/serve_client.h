/* End-to-end server tests' client (tests only): HTTP through libcurl to
 * the in-process server on 127.0.0.1, OpenAI-shaped errors checked, SSE
 * streams of completions and chat parsed per choice, the reference greedy
 * outputs of stories260K, and Prometheus text read strictly. Asserts
 * (Criterion) on anything malformed. Used by tests/test_server*.c. */
#ifndef TPS_TESTS_SERVE_CLIENT_H
#define TPS_TESTS_SERVE_CLIENT_H

#include <curl/curl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/api/openai.h"

#define MODEL "models/stories260K.gguf"
#define REF   "reference/stories260K_greedy.json"

/* ---- HTTP client (libcurl) ---------------------------------------------- */

typedef struct resp {
    long status;
    char *body;
    size_t len, cap;
    char headers[4096];
    size_t hlen;
    size_t abort_after; /* close the connection after this many body bytes (0: never) */
} resp;

/* libcurl's write callback: appends to the resp ud, ending the transfer at
 * its abort_after bytes. */
size_t on_body(char *p, size_t sz, size_t n, void *ud);
/* A request to 127.0.0.1:port (body: JSON or NULL; auth: a bearer token or
 * NULL) whose body and headers go into r; the caller performs it and frees
 * the handle and *hdrs. */
CURL *easy(int port, const char *method, const char *path, const char *body, const char *auth,
           resp *r, struct curl_slist **hdrs);
/* Performs it: the HTTP status, or -(CURLcode) when the transfer failed. */
long http(int port, const char *method, const char *path, const char *body, const char *auth,
          resp *r);
void resp_free(resp *r);
/* Parses body as JSON (asserting it is). Caller decrefs. */
json_t *body_json(const resp *r);
/* Checks an OpenAI-shaped error (param, when given, is its param) and
 * returns its message (borrowed). */
const char *expect_error(json_t *j, const char *param);
/* A request that must fail with status and an OpenAI-shaped error naming
 * param, its message holding msg_has (when given). */
void expect_status(int port, const char *method, const char *path, const char *body,
                   const char *auth, long status, const char *param, const char *msg_has);
/* POSTs body to path, asserts 200 and returns the parsed body. */
json_t *post_ok(int port, const char *path, const char *body);

/* ---- SSE stream parsing -------------------------------------------------- */

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

/* Parses a completions or chat SSE body into st, asserting every event's
 * framing and shape. */
void parse_stream(const char *body, oai_kind kind, stream *st);
/* How many choices sent at least one chunk. */
size_t stream_choices_seen(const stream *st);

/* ---- reference data and bodies ------------------------------------------- */

/* ../shared's REF, parsed. Caller decrefs. */
json_t *load_ref(void);
/* The start of a test against the reference: skips the test when ../shared
 * lacks REF or the model, declares the fixture f and serves it
 * (server_fixture.h), and declares ref, REF parsed (the test decrefs it). */
#define FIXTURE_SERVE_REF(f, ref)                                                                  \
    REQUIRE_SHARED(REF);                                                                           \
    FIXTURE_SERVE(f);                                                                              \
    json_t *ref = load_ref()
/* A greedy completions body (ignore_eos), streamed or not, with
 * stream_options.include_usage when usage. Caller frees. */
char *completion_body(const char *prompt, int max_tokens, bool stream_, bool usage);

/* ---- /metrics ------------------------------------------------------------ */

/* Parses Prometheus text 0.0.4 strictly enough to catch format errors;
 * returns the value of the sample whose name+labels equal key, or -1. */
double prom_get(const char *text, const char *key);

#endif
