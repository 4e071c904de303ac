/* End-to-end tests of `tps serve`: no request field silently ignored. Bad
 * requests get OpenAI-shaped errors naming the field; a prompt past the
 * context is a 400 naming both numbers; the API key, a body over the limit
 * (413), a full queue (429 with Retry-After), 503 while the model loads;
 * logit_bias forces a token, bad maps are 400 and banning every token fails
 * the request by name; every field of OpenAI's
 * completions and chat request schemas is honoured or refused by name;
 * completions logprobs match the reference and have OpenAI's shape, and
 * chat logprobs agree streamed and whole. Model: ../shared/models/stories260K.gguf; a real server
 * on an ephemeral 127.0.0.1 port, driven with libcurl (support/serve_client.h). Every loop is
 * bounded; only 127.0.0.1 is used. */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/api/openai.h"
#include "server/http/server.h"
#include "support/serve_client.h"
#include "support/server_fixture.h"
#include "support/test_support.h"

/* ---------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------- */

Test(server, bad_requests_get_openai_shaped_errors, .timeout = 30) {
    FIXTURE_SERVE(f);
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
    FIXTURE_SERVE(f);
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
    FIXTURE_CONFIG(f, c);
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
    FIXTURE_CONFIG(f, c);
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
    FIXTURE_CONFIG(f, c);
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
    FIXTURE_CONFIG(f, c);
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
 * No parameter silently ignored
 * ------------------------------------------------------------------------- */

/* logit_bias is honoured: +100 on one token makes every sampled token that
 * token at temperature 1; malformed maps are a 400 naming logit_bias. */
Test(server, logit_bias_forces_a_token_and_bad_maps_are_400, .timeout = 30) {
    FIXTURE_SERVE(f);
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

/* logit_bias -100 on every token of the vocabulary leaves nothing to
 * sample: the request fails with a message saying so (it had been answered
 * with token 0, which it banned), and the server serves the next one. */
Test(server, logit_bias_banning_every_token_fails_the_request, .timeout = 30) {
    FIXTURE_SERVE(f);
    enum { N_VOCAB = 512 }; /* stories260K's */
    char *body = malloc(32 * N_VOCAB + 128);
    size_t n = (size_t)sprintf(body, "{\"prompt\":\"Once\",\"max_tokens\":4,\"logit_bias\":{");
    for (int i = 0; i < N_VOCAB; i++)
        n += (size_t)sprintf(body + n, "%s\"%d\":-100", i ? "," : "", i);
    sprintf(body + n, "}}");
    expect_status(f.port, "POST", "/v1/completions", body, NULL, 500, NULL,
                  "no token of the vocabulary can be sampled");
    free(body);
    json_t *ok = post_ok(f.port, "/v1/completions", "{\"prompt\":\"Once\",\"max_tokens\":2}");
    json_decref(ok);
    fixture_finish(&f);
}

/* Every field of OpenAI's completions and chat request schemas is honoured
 * (a 200) or refused with a 400 unsupported_parameter naming it; a field
 * asking for nothing (null, false, the neutral value) is accepted. */
Test(server, every_openai_request_field_is_honoured_or_refused_by_name, .timeout = 60) {
    FIXTURE_SERVE(f);
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
    FIXTURE_SERVE_REF(f, ref);
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
    FIXTURE_SERVE(f);
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
