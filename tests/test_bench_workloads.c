/* The bench's prefix-cache workloads: shared prefixes (every prompt starts
 * with one of K prefixes of P model tokens, then its own part of the asked
 * length, for real tokenizers of both families), multi-turn conversations
 * (each turn's body carries the server's actual replies, every request
 * carries X-Session-Id, think time holds between turns), the server's
 * cached prompt tokens read from usage and summed into the result, and the
 * flags that cannot go together. Small counts: this runs in `make test`. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/client/bench.h"
#include "bench/workload/convo.h"
#include "bench/result/result.h"
#include "base/clock.h"
#include "model/tokenizer.h"
#include "support/bench_workload.h"
#include "support/test_support.h"
#include "support/test_data.h"
#include "test_bench_fake.h"

static workload_opts base_opts(bench_endpoint ep, size_t n, const char *in_len, int out_len) {
    workload_opts o = {.endpoint = ep,
                       .n_items = n,
                       .seed = 11,
                       .ignore_eos = -1,
                       .include_usage = true,
                       .temperature = -1};
    tps_err e = {{0}};
    cr_assert_eq(load_dist_parse(&o.input_len, in_len, &e), 0);
    o.output_len = (load_dist){.kind = LOAD_DIST_FIXED, .a = out_len};
    return o;
}

/* Tokens of text as a server counts a prompt (BOS included); ids in *ids when asked. */
static size_t count(const workload *w, const char *text, int32_t **ids) {
    int32_t *v = NULL;
    size_t n = 0;
    tps_err e = {{0}};
    cr_assert_eq(
        tokenizer_encode_alloc(w->tok, text, strlen(text), TOK_ENCODE_ADD_SPECIAL, &v, &n, &e), 0,
        "%s", e.msg);
    if (ids)
        *ids = v;
    else
        free(v);
    return n;
}

static json_t *body_json(const workload_item *it) {
    json_t *j = json_loadb(it->body, it->body_len, 0, NULL);
    cr_assert_not_null(j, "%s", it->body);
    return j;
}

/* ---- shared prefixes ------------------------------------------------------------------------ */

/* K prefixes of P tokens round robin; each prompt = prefix + " " + own part, its ids start
 * with the prefix's ids, and it has P + input tokens. */
static void check_shared_prefixes(const char *model_rel) {
    REQUIRE_SHARED(model_rel);
    char *path = shared_path(model_rel);
    const uint32_t P = 40, K = 3, IN = 16;
    workload_opts o = base_opts(BENCH_EP_COMPLETIONS, 9, "16", 4);
    o.tokenizer_path = path;
    o.prefix_len = P;
    o.n_prefixes = K;
    workload w;
    tps_err e = {{0}};
    cr_assert_eq(workload_build(&w, &o, &e), 0, "%s: %s", model_rel, e.msg);
    cr_assert_eq(w.n_prefixes, K);
    for (uint32_t k = 0; k < K; k++) {
        cr_expect_eq(count(&w, w.prefixes[k], NULL), P, "%s: prefix %u", model_rel, k);
        for (uint32_t j = 0; j < k; j++)
            cr_expect(strcmp(w.prefixes[j], w.prefixes[k]) != 0, "prefixes differ");
    }
    size_t exact = 0;
    for (size_t i = 0; i < w.n; i++) {
        const workload_item *it = &w.items[i];
        cr_assert_eq(it->prefix, i % K, "round robin");
        json_t *j = body_json(it);
        const char *prompt = json_string_value(json_object_get(j, "prompt"));
        cr_assert_not_null(prompt);
        const char *pre = w.prefixes[it->prefix];
        size_t pl = strlen(pre);
        cr_expect(strncmp(prompt, pre, pl) == 0 && prompt[pl] == ' ',
                  "%s: item %zu starts with its prefix and a space", model_rel, i);
        int32_t *a, *b;
        size_t na = count(&w, pre, &a), nb = count(&w, prompt, &b);
        cr_expect(nb >= na && memcmp(a, b, na * sizeof *a) == 0,
                  "%s: item %zu: the prompt's tokens start with the prefix's tokens", model_rel, i);
        exact += nb == P + IN;
        cr_expect(abs((int)nb - (int)(P + IN)) <= 1, "%s: item %zu has %zu tokens, want %u",
                  model_rel, i, nb, P + IN);
        cr_expect_eq(it->input_tokens, nb);
        cr_expect_eq(it->input_target, P + IN);
        free(a);
        free(b);
        json_decref(j);
    }
    cr_expect(exact >= w.n * 7 / 10, "%s: %zu of %zu exact", model_rel, exact, w.n);
    workload_free(&w);
    free(path);
}

Test(bench_prefix, prompts_start_with_one_of_k_prefixes_and_have_the_right_token_counts_spm) {
    check_shared_prefixes("models/stories260K.gguf");
}

Test(bench_prefix, prompts_start_with_one_of_k_prefixes_and_have_the_right_token_counts_bpe) {
    check_shared_prefixes("models/vocab/ggml-vocab-llama3.gguf");
    check_shared_prefixes("models/vocab/ggml-vocab-gpt-2.gguf");
}

Test(bench_prefix, chat_sends_the_prefix_as_system_message_and_the_own_part_as_user_message) {
    workload_opts o = base_opts(BENCH_EP_CHAT, 4, "6", 4);
    o.prefix_len = 12;
    o.n_prefixes = 2;
    workload w;
    tps_err e = {{0}};
    cr_assert_eq(workload_build(&w, &o, &e), 0, "%s", e.msg);
    for (size_t i = 0; i < w.n; i++) {
        json_t *j = body_json(&w.items[i]);
        json_t *m = json_object_get(j, "messages");
        cr_assert_eq(json_array_size(m), 2);
        json_t *sys = json_array_get(m, 0), *user = json_array_get(m, 1);
        cr_expect_str_eq(json_string_value(json_object_get(sys, "role")), "system");
        cr_expect_str_eq(json_string_value(json_object_get(sys, "content")), w.prefixes[i % 2]);
        cr_expect_str_eq(json_string_value(json_object_get(user, "role")), "user");
        char num[32];
        snprintf(num, sizeof num, "%zu ", i);
        cr_expect(strncmp(json_string_value(json_object_get(user, "content")), num, strlen(num)) ==
                      0,
                  "the own part starts with the request's number");
        json_decref(j);
    }
    workload_free(&w);
}

Test(bench_prefix, zipf_uses_low_prefixes_most) {
    workload_opts o = base_opts(BENCH_EP_COMPLETIONS, 400, "2", 2);
    o.prefix_len = 4;
    o.n_prefixes = 4;
    tps_err e = {{0}};
    cr_assert_eq(workload_prefix_dist_parse("zipf:1.5", &o.prefix_zipf, &e), 0);
    workload w;
    cr_assert_eq(workload_build(&w, &o, &e), 0, "%s", e.msg);
    size_t used[4] = {0};
    for (size_t i = 0; i < w.n; i++) {
        cr_assert_lt(w.items[i].prefix, 4);
        used[w.items[i].prefix]++;
    }
    /* weights 1, 0.354, 0.192, 0.125 of 1.671: prefix 0 about 60% */
    cr_expect(used[0] > 200 && used[0] < 280, "%zu", used[0]);
    cr_expect(used[0] > used[1] && used[1] > used[3], "%zu %zu %zu %zu", used[0], used[1], used[2],
              used[3]);
    workload_free(&w);
    double z;
    const char *bad[] = {"zipf:0", "zipf:", "zipf:x", "uniform", "zipf:-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_expect_neq(workload_prefix_dist_parse(bad[i], &z, &e), 0, "'%s' accepted", bad[i]);
    cr_expect(strstr(e.msg, "round-robin or zipf:S") != NULL, "%s", e.msg);
}

Test(bench_prefix, dataset_with_a_prefix_is_refused) {
    workload_opts o = base_opts(BENCH_EP_COMPLETIONS, 1, "2", 2);
    o.dataset = "/nonexistent.jsonl";
    o.prefix_len = 8;
    o.n_prefixes = 1;
    workload w;
    tps_err e = {{0}};
    cr_expect_eq(workload_build(&w, &o, &e), TPS_EINVAL);
    cr_expect(strstr(e.msg, "--prefix-len with --dataset") != NULL, "%s", e.msg);
    /* --turns with a dataset: tests/test_bench_sharegpt_turns.c */
}

/* ---- oai: cached prompt tokens -------------------------------------------------------------- */

static bench_chunk parse(const char *s) {
    bench_chunk c;
    tps_err e = {{0}};
    cr_assert_eq(bench_chunk_parse(&c, BENCH_DIALECT_OPENAI, s, strlen(s), "", &e), 0, "%s", e.msg);
    return c;
}

Test(bench_chunk, cached_tokens_come_from_usage_details_else_timings_cache_n_else_unknown) {
    bench_chunk c = parse("{\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2,"
                          "\"prompt_tokens_details\":{\"cached_tokens\":6}}}");
    cr_expect(c.has_cached && c.cached_from_usage && c.cached_tokens == 6);
    bench_chunk_release(&c);
    c = parse("{\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2,"
              "\"prompt_tokens_details\":{\"cached_tokens\":0}}}");
    cr_expect(c.has_cached && c.cached_tokens == 0, "a reported 0 is known");
    bench_chunk_release(&c);
    c = parse("{\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2,"
              "\"prompt_tokens_details\":null}}");
    cr_expect(!c.has_cached, "null details: unknown (vLLM without prompt token details)");
    bench_chunk_release(&c);
    c = parse("{\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2}}");
    cr_expect(!c.has_cached, "absent: unknown, not zero");
    bench_chunk_release(&c);
    c = parse("{\"choices\":[],\"timings\":{\"prompt_n\":3,\"cache_n\":40}}");
    cr_expect(c.has_cached && !c.cached_from_usage && c.cached_tokens == 40, "llama.cpp");
    bench_chunk_release(&c);
    c = parse("{\"usage\":{\"prompt_tokens\":43,\"completion_tokens\":2,"
              "\"prompt_tokens_details\":{\"cached_tokens\":32}},\"timings\":{\"cache_n\":40}}");
    cr_expect(c.has_cached && c.cached_from_usage && c.cached_tokens == 32, "usage wins");
    bench_chunk_release(&c);
    c = parse("{\"choices\":[{\"delta\":{\"reasoning_content\":\"hm\"}}]}");
    cr_expect(c.text && c.reasoning, "reasoning text is marked");
    bench_chunk_release(&c);
}

/* ---- conversations --------------------------------------------------------------------------- */

Test(bench_convo, turns_go_round_robin_after_replies_and_think_time) {
    convo_set s;
    tps_err e = {{0}};
    cr_assert_eq(convo_set_init(&s, 3, 2, 0.5, "t", &e), 0);
    size_t i;
    cr_assert(convo_next(&s, 0, &i) && i == 0);
    convo_sent(&s, 0);
    cr_assert(convo_next(&s, 0, &i) && i == 1);
    convo_sent(&s, 1);
    convo_settled(&s, 0, true, "hi", 2, 10, 1000);
    cr_assert(convo_next(&s, 1000, &i) && i == 2, "round robin: 2 before 0 comes back");
    convo_sent(&s, 2);
    cr_expect(!convo_next(&s, 1000, &i), "0 is thinking, 1 and 2 are waiting for replies");
    cr_expect_eq(convo_next_ready_ns(&s), 1000 + 500000000ull);
    cr_assert(convo_next(&s, 1000 + 500000000ull, &i) && i == 0);
    cr_expect_str_eq(s.c[0].replies[0], "hi");
    convo_sent(&s, 0);
    convo_settled(&s, 0, true, "again", 5, 10, 2000);
    convo_settled(&s, 1, false, NULL, 0, 0, 2000);
    convo_settled(&s, 2, true, "x", 1, 10, 2000);
    cr_expect(!convo_all_ended(&s), "2 has a turn left");
    cr_assert(convo_next(&s, UINT64_MAX - 1, &i) && i == 2, "1 ended with its failed turn");
    convo_sent(&s, 2);
    convo_settled(&s, 2, true, "y", 1, 10, 3000);
    cr_expect(convo_all_ended(&s));
    char h[64];
    convo_session_header(&s, 2, h, sizeof h);
    cr_expect_str_eq(h, "X-Session-Id: t-2");
    convo_set_free(&s);
}

/* The captured requests of a run, split at FAKE_LOG_SEP: headers and body of each. */
typedef struct captured {
    char *session; /* X-Session-Id value, malloc'ed */
    json_t *body;
} captured;

static size_t split_log(const fake_server *s, captured *out, size_t cap) {
    size_t n = 0;
    const char *p = s->log;
    const size_t sep = strlen(FAKE_LOG_SEP);
    for (const char *q; p && (q = strstr(p, FAKE_LOG_SEP)) && n < cap; p = q + sep) {
        const char *hdr_end = strstr(p, "\r\n\r\n");
        cr_assert(hdr_end && hdr_end < q);
        const char *sid = strcasestr(p, "\r\nX-Session-Id: ");
        captured *c = &out[n++];
        c->session = NULL;
        if (sid && sid < hdr_end) {
            sid += 16;
            c->session = strndup(sid, (size_t)(strstr(sid, "\r\n") - sid));
        }
        c->body = json_loadb(hdr_end + 4, (size_t)(q - hdr_end - 4), 0, NULL);
        cr_assert_not_null(c->body, "request %zu's body is JSON", n - 1);
    }
    return n;
}

static void free_captured(captured *c, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(c[i].session);
        json_decref(c[i].body);
    }
}

typedef struct turn_run {
    fake_server srv;
    workload wl;
    bench_run_out out;
    captured req[64];
    size_t n_req;
} turn_run;

static void run_turns(turn_run *t, bench_endpoint ep, size_t conversations, uint32_t turns,
                      uint32_t concurrency, double think_s) {
    t->srv.capture = true;
    if (!t->srv.tokens) t->srv.tokens = 3; /* the reply: " w1 w2 w3" */
    cr_assert_eq(fake_start(&t->srv), 0);
    workload_opts o = base_opts(ep, conversations * turns, "6", t->srv.tokens);
    o.turns = turns;
    tps_err e = {{0}};
    cr_assert_eq(workload_build(&t->wl, &o, &e), 0, "%s", e.msg);
    cr_assert_eq(t->wl.conversations, conversations);
    bench_config cfg = {.base_url = t->srv.url,
                        .endpoint = ep,
                        .concurrency = concurrency,
                        .timeout_s = 10,
                        .idle_timeout_s = 5,
                        .connect_timeout_s = 2,
                        .think_time_s = think_s,
                        .keep_text = true};
    test_bench_run(&t->out, &cfg, &t->wl);
    fake_stop(&t->srv);
    t->n_req = split_log(&t->srv, t->req, 64);
}

static void free_turns(turn_run *t) {
    free_captured(t->req, t->n_req);
    fake_free_log(&t->srv);
    bench_run_free(&t->out);
    workload_free(&t->wl);
}

Test(bench_turns, each_turn_carries_the_servers_actual_replies_and_the_session_id) {
    turn_run t = {0};
    const size_t C = 2;
    const uint32_t T = 3;
    run_turns(&t, BENCH_EP_CHAT, C, T, 2, 0);
    cr_assert_eq(t.out.n, C * T, "conversations x turns requests");
    cr_assert_eq(t.n_req, C * T);
    for (size_t i = 0; i < t.out.n; i++)
        cr_expect_eq(t.out.recs[i].err, BENCH_OK, "%s", t.out.recs[i].err_msg);
    /* group the requests by session: a conversation's turns arrive in order */
    const char *sessions[2] = {NULL, NULL};
    size_t seen[2] = {0, 0};
    for (size_t i = 0; i < t.n_req; i++) {
        const captured *r = &t.req[i];
        cr_assert_not_null(r->session, "request %zu has X-Session-Id", i);
        size_t g = sessions[0] && strcmp(sessions[0], r->session) ? 1 : 0;
        if (!sessions[g]) sessions[g] = r->session;
        cr_assert_str_eq(sessions[g], r->session, "two conversations, two session ids");
        size_t turn = seen[g]++;
        json_t *m = json_object_get(r->body, "messages");
        cr_assert_eq(json_array_size(m), 2 * turn + 1, "turn %zu: history + the new message",
                     turn + 1);
        /* which conversation: its first user message is the workload's */
        const char *first = json_string_value(json_object_get(json_array_get(m, 0), "content"));
        size_t conv = strcmp(first, t.wl.items[0].text) == 0 ? 0 : 1;
        cr_assert_str_eq(first, t.wl.items[conv * T].text);
        for (size_t k = 0; k <= turn; k++) {
            json_t *u = json_array_get(m, 2 * k);
            cr_expect_str_eq(json_string_value(json_object_get(u, "role")), "user");
            cr_expect_str_eq(json_string_value(json_object_get(u, "content")),
                             t.wl.items[conv * T + k].text);
            if (k == turn) break;
            json_t *a = json_array_get(m, 2 * k + 1);
            cr_expect_str_eq(json_string_value(json_object_get(a, "role")), "assistant");
            cr_expect_str_eq(json_string_value(json_object_get(a, "content")), " w1 w2 w3",
                             "the reply the server streamed");
        }
    }
    cr_expect(sessions[1] && strcmp(sessions[0], sessions[1]) != 0);
    cr_expect_eq(seen[0], T);
    cr_expect_eq(seen[1], T);
    size_t turns_seen[4] = {0};
    for (size_t i = 0; i < t.out.n; i++) {
        cr_assert(t.out.recs[i].turn >= 1 && t.out.recs[i].turn <= T);
        turns_seen[t.out.recs[i].turn]++;
    }
    cr_expect(turns_seen[1] == C && turns_seen[2] == C && turns_seen[3] == C);
    free_turns(&t);
}

Test(bench_turns, completions_append_each_reply_to_the_prompt_it_continued) {
    turn_run t = {0};
    run_turns(&t, BENCH_EP_COMPLETIONS, 1, 2, 1, 0);
    cr_assert_eq(t.n_req, 2);
    const char *p1 = json_string_value(json_object_get(t.req[0].body, "prompt"));
    const char *p2 = json_string_value(json_object_get(t.req[1].body, "prompt"));
    cr_assert_str_eq(p1, t.wl.items[0].text);
    char want[1024];
    snprintf(want, sizeof want, "%s w1 w2 w3 %s", t.wl.items[0].text, t.wl.items[1].text);
    cr_expect_str_eq(p2, want);
    free_turns(&t);
}

Test(bench_turns, think_time_holds_between_a_reply_and_the_next_turn) {
    turn_run t = {0};
    run_turns(&t, BENCH_EP_CHAT, 1, 3, 1, 0.05);
    cr_assert_eq(t.out.n, 3);
    for (size_t k = 1; k < 3; k++) {
        const timeline *a = &t.out.recs[k - 1].tl, *b = &t.out.recs[k].tl;
        cr_expect_geq(b->t_sent - a->t_end, 50 * TPS_NS_PER_MS, "turn %zu went %.1f ms after", k,
                      (double)(b->t_sent - a->t_end) / 1e6);
    }
    free_turns(&t);
}

/* ---- results ----------------------------------------------------------------------------------
 */

/* The result of t's records, timed from the run's start. */
static void turns_result(bench_result *res, const turn_run *t) {
    result_opts ro = {.origin_ns = t->out.t_start_ns};
    test_result_build(res, t->out.recs, t->out.n, &ro);
}

/* j (a result's JSON) read back into *back, asserted to succeed. */
static void result_back(bench_result *back, json_t *j) {
    tps_err e = {{0}};
    cr_assert_eq(result_from_json(back, j, &e), 0, "%s", e.msg);
}

Test(bench_turns, result_has_cached_input_and_turn_1_against_later_turns) {
    turn_run t = {.srv = {.mode = FAKE_OK, .tokens = 2, .cached_tokens = 5}};
    run_turns(&t, BENCH_EP_CHAT, 2, 3, 2, 0);
    bench_result res;
    turns_result(&res, &t);
    cr_expect_eq(res.cached.requests, 6);
    cr_expect_eq(res.cached.tokens, 30, "5 cached tokens x 6 requests");
    cr_expect_eq(res.cached.prompt, 42, "7 prompt tokens x 6 requests");
    cr_expect_eq(res.turns.turns, 3);
    cr_expect_eq(res.turns.conversations, 2);
    cr_expect_eq(hist_count(res.turns.first.ttft), 2);
    cr_expect_eq(hist_count(res.turns.later.ttft), 4);
    json_t *j = result_to_json(&res);
    json_t *tk = json_object_get(j, "tokens");
    cr_expect_eq(json_integer_value(json_object_get(tk, "cached_input")), 30);
    cr_expect(fabs(json_real_value(json_object_get(tk, "cached_input_fraction")) - 5.0 / 7) < 1e-9);
    json_t *tu = json_object_get(j, "turns");
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(tu, "later"), "completed")), 4);
    cr_expect(json_object_get(json_object_get(json_object_get(tu, "first"), "ttft"), "p99"));
    /* round trip and merge keep both */
    bench_result back;
    result_back(&back, j);
    tps_err e = {{0}};
    cr_assert_eq(result_merge(&back, &res, &e), 0, "%s", e.msg);
    cr_expect_eq(back.cached.tokens, 60);
    cr_expect_eq(back.turns.conversations, 4);
    cr_expect_eq(hist_count(back.turns.later.ttft), 8);
    result_free(&back);
    json_decref(j);
    result_free(&res);
    free_turns(&t);
}

Test(bench_turns, cached_input_is_unknown_when_the_server_does_not_say) {
    turn_run t = {0};
    run_turns(&t, BENCH_EP_CHAT, 1, 1, 1, 0);
    bench_result res;
    turns_result(&res, &t);
    cr_expect_eq(res.cached.requests, 0);
    json_t *j = result_to_json(&res);
    json_t *tk = json_object_get(j, "tokens");
    cr_expect(json_is_null(json_object_get(tk, "cached_input")), "unknown is null, not 0");
    cr_expect(json_is_null(json_object_get(tk, "cached_input_fraction")));
    bench_result back;
    result_back(&back, j);
    cr_expect_eq(back.cached.requests, 0, "still unknown after a round trip");
    result_free(&back);
    json_decref(j);
    result_free(&res);
    free_turns(&t);
}

/* ---- the CLI ----------------------------------------------------------------------------------
 */

Test(bench_cli, turns_and_prefixes_run_and_report, .timeout = 60) {
    fake_server s = {.mode = FAKE_OK, .tokens = 3, .cached_tokens = 4};
    cr_assert_eq(fake_start(&s), 0);
    char dir[] = "/tmp/tps_bench_turnsXXXXXX";
    cr_assert(mkdtemp(dir));
    char args[1024], *out;
    snprintf(args, sizeof args,
             "bench --url http://127.0.0.1:%d --endpoint chat --turns 3 --conversations 2 "
             "--concurrency 2 --input-len 6 --output-len 3 --prefix-len 10 --prefixes 2 "
             "--json %s/t.json",
             s.port, dir);
    int rc = run_tps(args, true, &out);
    cr_expect_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "turns 2..3") && strstr(out, "turn 1"), "%s", out);
    cr_expect(strstr(out, "cached input (prefix cache): 24 of 42 prompt tokens") != NULL, "%s",
              out);
    cr_expect(strstr(out, "shared prefixes: 2 of 10 tokens") != NULL, "%s", out);
    free(out);
    json_t *j = test_json_load("%s/t.json", dir);
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(j, "requests"), "completed")),
                 6);
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(j, "config"), "turns")), 3);
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(j, "tokens"), "cached_input")),
                 24);
    cr_expect(json_is_object(json_object_get(j, "turns")));
    json_decref(j);
    fake_stop(&s);
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    cr_expect_eq(system(args), 0);
}

Test(bench_cli, workload_flags_that_cannot_go_together_exit_2_with_what_to_do) {
    static const struct {
        const char *args, *says;
    } cases[] = {
        {"bench --requests 2 --prefix-len 8 --dataset d.jsonl", "--prefix-len with --dataset"},
        {"bench --requests 2 --prefixes 3", "need --prefix-len"},
        {"bench --requests 2 --prefix-len 8 --prefix-dist zipf:0", "zipf:S"},
        {"bench --turns 2 --rate 3", "closed loop"},
        {"bench --turns 2 --requests 4", "give --conversations instead"},
        {"bench --requests 2 --think-time 1", "need --turns"},
        {"bench --requests 2 --conversations 4", "need --turns"},
    };
    /* --turns with a JSONL dataset: tests/test_bench_sharegpt_turns.c (a real file) */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out;
        cr_expect_eq(run_tps(cases[i].args, true, &out), 2, "%s", cases[i].args);
        cr_expect(strstr(out, cases[i].says) != NULL, "%s: %s", cases[i].args, out);
        free(out);
    }
    char *out;
    cr_expect_eq(run_tps("bench --help", false, &out), 0);
    cr_expect(strstr(out, "--prefix-len") && strstr(out, "--turns") &&
              strstr(out, "--think-time") && strstr(out, "cached input"));
    free(out);
}

/* --extra-body: its fields reach every body; the workload's own prompt and
 * max_tokens win over the same names in it (the CLI refuses those names:
 * workload_extra_body_check); a non-object is refused. */
Test(bench_body, extra_body_fields_reach_every_request_and_the_workload_keeps_its_own) {
    workload_opts o = base_opts(BENCH_EP_COMPLETIONS, 4, "16", 7);
    o.extra_body =
        "{\"return_tokens\": true, \"top_k\": 1, \"max_tokens\": 999, \"prompt\": \"x\"}";
    workload w;
    tps_err e = {{0}};
    cr_assert_eq(workload_build(&w, &o, &e), 0, "%s", e.msg);
    for (size_t i = 0; i < w.n; i++) {
        json_t *j = body_json(&w.items[i]);
        cr_expect(json_is_true(json_object_get(j, "return_tokens")));
        cr_expect_eq(json_integer_value(json_object_get(j, "top_k")), 1);
        cr_expect_eq(json_integer_value(json_object_get(j, "max_tokens")), 7, "max_tokens is ours");
        cr_expect_str_neq(json_string_value(json_object_get(j, "prompt")), "x",
                          "the prompt is ours");
        json_decref(j);
    }
    workload_free(&w);
    cr_expect_not_null(workload_extra_body_check("[1]"));
    cr_expect_not_null(workload_extra_body_check("{"));
    cr_expect_null(workload_extra_body_check("{}"));
    cr_expect_null(workload_extra_body_check("{\"return_tokens\": true}"));
    /* what the workload writes itself is refused, not silently overridden */
    const char *own[] = {"prompt",         "messages", "max_tokens",  "stream",
                         "stream_options", "model",    "temperature", "ignore_eos"};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
        char j[64];
        snprintf(j, sizeof j, "{\"%s\": 1}", own[i]);
        const char *why = workload_extra_body_check(j);
        cr_expect(why && strstr(why, own[i]), "%s: refused naming it (%s)", j, why ? why : "null");
    }
}

/* ---- the /tokenize call goes as the streams go ------------------------------------ */

/* Starts tests/tools/https_endpoint.py in dir (a self-signed HTTPS endpoint
 * that answers only requests with X-Tenant: t1); returns its port, its pid
 * in *pid. Skips without python3 or openssl. */
static int https_endpoint(const char *dir, pid_t *pid) {
    if (system("command -v openssl >/dev/null && command -v python3 >/dev/null") != 0)
        cr_skip_test("needs python3 and openssl for an HTTPS endpoint");
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    *pid = fork();
    if (*pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        execlp("python3", "python3", TPS_SOURCE_DIR "/tests/tools/https_endpoint.py", dir,
               "X-Tenant", "t1", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char line[32] = "";
    FILE *f = fdopen(fds[0], "r");
    bool got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    cr_assert(got && atoi(line) > 0, "the HTTPS endpoint did not start");
    return atoi(line);
}

/* config.input_source of a tps bench run against port (args added), and
 * whether it exited 0. */
static bool run_against(int port, const char *args, char *source, size_t cap) {
    char cmd[1024], *out, file[] = "/tmp/tps-https-XXXXXX";
    int fd = mkstemp(file);
    cr_assert_geq(fd, 0);
    close(fd);
    snprintf(cmd, sizeof cmd,
             "bench --url https://127.0.0.1:%d %s --requests 2 --input-len 16 --output-len 2 "
             "--timeout 10 --no-progress --quiet --json %s",
             port, args, file);
    int rc = run_tps(cmd, true, &out);
    free(out);
    json_t *j = json_load_file(file, 0, NULL);
    unlink(file);
    const char *s =
        json_string_value(json_object_get(json_object_get(j, "config"), "input_source"));
    snprintf(source, cap, "%s", s ? s : "(no result)");
    json_decref(j);
    return rc == 0;
}

/* Behind a private CA and a gateway that wants a header, the prompts are
 * sized by the server's /tokenize only when --header and --insecure reach
 * that call too (before, they reached the streams and the scraper, and the
 * count fell back to words without a word said). */
Test(bench_cli, tokenize_carries_the_header_and_insecure_of_the_streams, .timeout = 60) {
    char dir[] = "/tmp/tps-https-endpoint-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    pid_t pid;
    int port = https_endpoint(dir, &pid);
    char source[64];
    bool ok = run_against(port, "--insecure --header 'X-Tenant: t1'", source, sizeof source);
    cr_expect(ok, "the run against the endpoint failed");
    cr_expect_str_eq(source, "server /tokenize");
    run_against(port, "--insecure", source, sizeof source);
    cr_expect_str_eq(source, "approximate (words)", "without the header the endpoint says 401");
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    char log[4200];
    snprintf(log, sizeof log, "%s/requests.log", dir);
    size_t len = 0;
    char *text = read_file_all(log, &len);
    cr_assert_not_null(text);
    cr_expect(strstr(text, "POST /tokenize header") != NULL, "%s", text);
    free(text);
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}
