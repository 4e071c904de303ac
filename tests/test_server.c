/* End-to-end tests of `tps serve`: what it answers. Greedy outputs against
 * ../shared/reference/stories260K_greedy.json (llama.cpp) and against
 * `tps generate`, usage and timings, token-id prompts, chat's stream, 32
 * concurrent streams equal to the same requests alone, /metrics counters,
 * /tokenize and /detokenize; n choices (indexed, seeded, greedy-equal,
 * streamed, cancelled together) and the prefix cache's cached tokens. Model:
 * ../shared/models/stories260K.gguf; a real server on an ephemeral 127.0.0.1 port, driven with
 * libcurl (support/serve_client.h). Every loop is bounded; only 127.0.0.1 is used. What a request
 * may ask and how it is refused: test_server_requests.c; disconnects, draining and hostile clients:
 * test_server_lifecycle.c. */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/api/openai.h"
#include "server/http/server.h"
#include "support/serve_client.h"
#include "support/server_fixture.h"
#include "support/test_support.h"

/* ---------------------------------------------------------------------------
 * Completions: exactness
 * ------------------------------------------------------------------------- */

Test(server, streamed_greedy_tokens_equal_reference_and_usage_counts_them, .timeout = 60) {
    FIXTURE_SERVE_REF(f, ref);
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
    FIXTURE_SERVE(f);
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
    FIXTURE_SERVE_REF(f, ref);
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
    FIXTURE_SERVE(f);
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
    FIXTURE_SERVE(f);
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
    FIXTURE_SERVE(f);
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
 * /metrics
 * ------------------------------------------------------------------------- */

Test(server, metrics_parse_and_counters_move_by_the_tokens_served, .timeout = 30) {
    FIXTURE_SERVE(f);
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
    FIXTURE_SERVE(f);
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
 * Parallel sampling (n) and the prefix cache
 * ------------------------------------------------------------------------- */

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
    FIXTURE_SERVE(f);
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
    FIXTURE_SERVE(f);
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
    FIXTURE_SERVE(f);
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
    FIXTURE_SERVE(f);
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
    FIXTURE_SERVE(f);
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
    FIXTURE_CONFIG(f, c);
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
    FIXTURE_SERVE(f);
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
    FIXTURE_SERVE(f);
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
    FIXTURE_CONFIG(f, c);
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
