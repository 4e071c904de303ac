/* ShareGPT whole conversations (--dataset FILE --turns T): each entry's
 * human messages become the turns of one conversation, the server's actual
 * replies make the history, each turn's max_tokens is the length of the
 * dataset's reply; conversations end at their own last human turn; a JSONL
 * or trace dataset with --turns is refused, by the library and the CLI.
 * Against the fake server of test_bench_fake.h. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/client/bench.h"
#include "bench/workload/workload.h"
#include "support/bench_workload.h"
#include "support/test_support.h"
#include "test_bench_fake.h"

/* Two conversations: three human turns (replies of 2, 3 and 4 words) and one
 * (a reply of 5 words, then a human message without a reply, not a turn);
 * then an entry that is skipped (no reply). */
static const char *const CONVS =
    "[\n"
    " {\"conversations\": [\n"
    "   {\"from\": \"system\", \"value\": \"be brief\"},\n"
    "   {\"from\": \"human\", \"value\": \"first question\"},\n"
    "   {\"from\": \"gpt\", \"value\": \"two words\"},\n"
    "   {\"from\": \"human\", \"value\": \"second question\"},\n"
    "   {\"from\": \"gpt\", \"value\": \"now three words\"},\n"
    "   {\"from\": \"user\", \"value\": \"third question\"},\n"
    "   {\"from\": \"assistant\", \"value\": \"and now four words\"}]},\n"
    " {\"conversations\": [\n"
    "   {\"from\": \"human\", \"value\": \"only question\"},\n"
    "   {\"from\": \"gpt\", \"value\": \"a reply of five words\"},\n"
    "   {\"from\": \"human\", \"value\": \"unanswered\"}]},\n"
    " {\"conversations\": [{\"from\": \"human\", \"value\": \"no reply\"}]}\n"
    "]\n";

static workload_opts opts(bench_endpoint ep, size_t conversations, uint32_t turns) {
    return (workload_opts){.endpoint = ep,
                           .seed = 5,
                           .ignore_eos = -1,
                           .include_usage = true,
                           .temperature = -1,
                           .n_items = conversations * turns,
                           .turns = turns};
}

static int build(workload *w, const char *text, workload_opts *o, tps_err *e) {
    char *path = test_temp_file(text);
    o->dataset = path;
    int rc = workload_build(w, o, e);
    unlink(path);
    free(path);
    o->dataset = NULL;
    return rc;
}

Test(bench_sharegpt_turns, conversations_keep_their_human_turns_and_reply_lengths) {
    workload w;
    workload_opts o = opts(BENCH_EP_CHAT, 2, 3);
    tps_err e = {{0}};
    cr_assert_eq(build(&w, CONVS, &o, &e), 0, "%s", e.msg);
    cr_expect_eq(w.turns, 3);
    cr_expect_eq(w.conversations, 2);
    cr_expect_eq(w.skipped, 1);
    cr_expect_str_eq(w.format, "sharegpt");
    cr_expect_eq(workload_conv_turns(&w, 0), 3);
    cr_expect_eq(workload_conv_turns(&w, 1), 1, "the unanswered message is no turn");
    cr_expect_str_eq(w.items[0].text, "first question");
    cr_expect_str_eq(w.items[2].text, "third question", "\"user\" is a human turn");
    const uint32_t want[] = {2, 3, 4, 5};
    const size_t at[] = {0, 1, 2, 3};
    for (size_t k = 0; k < 4; k++)
        cr_expect_eq(w.items[at[k]].max_tokens, want[k], "item %zu", at[k]);
    cr_expect_null(w.items[4].text);
    char *body = NULL;
    size_t len = 0;
    cr_expect_neq(workload_turn_body(&w, 1, 1, NULL, NULL, &body, &len, &e), 0);
    cr_expect(strstr(e.msg, "has 1 turns") != NULL, "%s", e.msg);
    workload_free(&w);

    /* more conversations than the file holds: an error that says how many it has */
    o = opts(BENCH_EP_CHAT, 3, 2);
    cr_expect_neq(build(&w, CONVS, &o, &e), 0);
    cr_expect(strstr(e.msg, "has 2 usable ShareGPT conversations") != NULL, "%s", e.msg);
    cr_expect(strstr(e.msg, "--conversations 2 or fewer") != NULL, "%s", e.msg);
}

Test(bench_sharegpt_turns, turns_is_refused_for_jsonl_and_traces) {
    workload w;
    workload_opts o = opts(BENCH_EP_COMPLETIONS, 1, 2);
    tps_err e = {{0}};
    cr_expect_eq(build(&w, "{\"prompt\": \"hi\"}\n", &o, &e), TPS_EINVAL);
    cr_expect(strstr(e.msg, "--turns with a jsonl dataset") != NULL, "%s", e.msg);
    cr_expect_eq(
        build(&w, "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 2}\n", &o, &e),
        TPS_EINVAL);
    cr_expect(strstr(e.msg, "--turns with a trace dataset") != NULL, "%s", e.msg);
}

Test(bench_sharegpt_turns, cli_refuses_turns_with_a_jsonl_dataset) {
    char *path = test_temp_file("{\"prompt\": \"hi\"}\n");
    char args[256], *out = NULL;
    snprintf(args, sizeof args, "bench --url http://127.0.0.1:9 --dataset %s --turns 2", path);
    cr_expect_eq(run_tps(args, true, &out), 2, "%s", out);
    cr_expect(strstr(out, "--turns with a JSONL dataset") != NULL, "%s", out);
    cr_expect(strstr(out, "ShareGPT") != NULL, "%s", out);
    free(out);
    unlink(path);
    free(path);
}

/* The captured requests, split at FAKE_LOG_SEP: each one's session id and body. */
typedef struct captured {
    char session[64];
    json_t *body;
} captured;

static size_t split_log(const fake_server *s, captured *out, size_t cap) {
    size_t n = 0;
    const size_t sep = strlen(FAKE_LOG_SEP);
    for (const char *p = s->log, *q; p && (q = strstr(p, FAKE_LOG_SEP)) && n < cap; p = q + sep) {
        const char *hdr_end = strstr(p, "\r\n\r\n");
        cr_assert(hdr_end && hdr_end < q);
        const char *sid = strcasestr(p, "\r\nX-Session-Id: ");
        captured *c = &out[n++];
        c->session[0] = 0;
        if (sid && sid < hdr_end) {
            sid += 16;
            snprintf(c->session, sizeof c->session, "%.*s", (int)(strstr(sid, "\r\n") - sid), sid);
        }
        c->body = json_loadb(hdr_end + 4, (size_t)(q - hdr_end - 4), 0, NULL);
        cr_assert_not_null(c->body, "request %zu's body is JSON", n - 1);
    }
    return n;
}

/* A run of the two conversations and what the fake server captured. */
typedef struct turns_run {
    fake_server srv;
    workload w;
    bench_run_out out;
    captured req[16];
    size_t n_req;
} turns_run;

/* Runs the two conversations with --turns 3 against the fake server (whose
 * reply is always " w1 w2 w3"); its captured requests, in arrival order. */
static void run(bench_endpoint ep, turns_run *r) {
    fake_server *srv = &r->srv;
    *srv = (fake_server){.mode = FAKE_OK, .tokens = 3, .per_event = 1, .capture = true};
    cr_assert_eq(fake_start(srv), 0);
    workload_opts o = opts(ep, 2, 3);
    tps_err e = {{0}};
    cr_assert_eq(build(&r->w, CONVS, &o, &e), 0, "%s", e.msg);
    bench_config cfg = {.base_url = srv->url,
                        .endpoint = ep,
                        .concurrency = 2,
                        .timeout_s = 10,
                        .idle_timeout_s = 5,
                        .connect_timeout_s = 2,
                        .keep_text = true};
    test_bench_run(&r->out, &cfg, &r->w);
    fake_stop(srv);
    r->n_req = split_log(srv, r->req, 16);
}

static void run_free(turns_run *r) {
    for (size_t i = 0; i < r->n_req; i++)
        json_decref(r->req[i].body);
    fake_free_log(&r->srv);
    bench_run_free(&r->out);
    workload_free(&r->w);
}

Test(bench_sharegpt_turns, chat_turns_carry_the_servers_actual_replies) {
    turns_run r;
    run(BENCH_EP_CHAT, &r);
    cr_assert_eq(r.out.n, 4, "3 + 1 turns");
    cr_assert_eq(r.n_req, 4);
    for (size_t i = 0; i < r.out.n; i++)
        cr_expect_eq(r.out.recs[i].err, BENCH_OK, "request %zu", i);
    /* conversation 0's session: the one that starts with its first question;
     * its requests arrive in order */
    const char *s0 = NULL;
    for (size_t i = 0; i < r.n_req && !s0; i++) {
        json_t *first = json_array_get(json_object_get(r.req[i].body, "messages"), 0);
        if (!strcmp(json_string_value(json_object_get(first, "content")), "first question"))
            s0 = r.req[i].session;
    }
    cr_assert_not_null(s0);
    size_t turn = 0, others = 0;
    const uint32_t want_max[] = {2, 3, 4};
    for (size_t i = 0; i < r.n_req; i++) {
        json_t *m = json_object_get(r.req[i].body, "messages");
        if (strcmp(r.req[i].session, s0)) {
            others++;
            cr_expect_eq(json_array_size(m), 1);
            cr_expect_str_eq(json_string_value(json_object_get(json_array_get(m, 0), "content")),
                             "only question");
            cr_expect_eq(json_integer_value(json_object_get(r.req[i].body, "max_tokens")), 5);
            continue;
        }
        cr_assert_lt(turn, 3);
        cr_expect_eq(json_integer_value(json_object_get(r.req[i].body, "max_tokens")),
                     want_max[turn], "turn %zu", turn + 1);
        cr_assert_eq(json_array_size(m), 2 * turn + 1, "turn %zu", turn + 1);
        if (turn == 1) {
            const char *want[][2] = {{"user", "first question"},
                                     {"assistant", " w1 w2 w3"},
                                     {"user", "second question"}};
            for (size_t k = 0; k < 3; k++) {
                json_t *msg = json_array_get(m, k);
                cr_expect_str_eq(json_string_value(json_object_get(msg, "role")), want[k][0]);
                cr_expect_str_eq(json_string_value(json_object_get(msg, "content")), want[k][1],
                                 "message %zu", k);
            }
        }
        turn++;
    }
    cr_expect_eq(turn, 3);
    cr_expect_eq(others, 1);
    run_free(&r);
}

Test(bench_sharegpt_turns, completions_turns_concatenate_the_history) {
    turns_run r;
    run(BENCH_EP_COMPLETIONS, &r);
    cr_assert_eq(r.n_req, 4, "3 + 1 turns");
    size_t found = 0;
    for (size_t i = 0; i < r.n_req; i++) {
        const char *p = json_string_value(json_object_get(r.req[i].body, "prompt"));
        cr_assert_not_null(p);
        if (!strcmp(p, "first question w1 w2 w3 second question")) {
            found++;
            cr_expect_eq(json_integer_value(json_object_get(r.req[i].body, "max_tokens")), 3);
        }
        if (!strcmp(p, "first question w1 w2 w3 second question w1 w2 w3 third question")) found++;
    }
    cr_expect_eq(found, 2, "turns 2 and 3 of the first conversation");
    run_free(&r);
}
