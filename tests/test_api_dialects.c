/* The agent dialects below the SDK tests: their parsers (what a Responses
 * or Messages body becomes, the 400s and their field names), docs/api.md
 * listing every row of their allow-lists, and through a real server
 * --unknown-fields ignore (the header and /metrics), Anthropic's error
 * shape on /v1/messages, and the response store's bound with its 404
 * reason and eviction count. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/api/api_messages.h"
#include "server/api/api_responses.h"
#include "server/write/api_write.h"
#include "support/server_fixture.h"
#include "support/test_data.h"
#include "support/test_support.h"

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *p = malloc(1 << 20);
    *len = p ? fread(p, 1, (1 << 20) - 1, f) : 0;
    if (p) p[*len] = 0;
    fclose(f);
    return p;
}

Test(api_dialects, docs_api_md_lists_every_field_of_both_allow_lists) {
    size_t len = 0, n;
    char *doc = read_all(TPS_SOURCE_DIR "/docs/api.md", &len);
    cr_assert_not_null(doc);
    const struct {
        const char *ep;
        const oai_field *t;
    } lists[] = {{"/v1/responses", api_responses_fields(&n)}, {"/v1/messages", NULL}};
    size_t counts[2] = {n, 0};
    const oai_field *mt = api_messages_fields(&counts[1]);
    for (int l = 0; l < 2; l++) {
        const oai_field *t = l ? mt : lists[0].t;
        for (size_t i = 0; i < counts[l]; i++) {
            char row[128];
            snprintf(row, sizeof row, "| `%s` | `%s` |", lists[l].ep, t[i].name);
            cr_expect(strstr(doc, row), "docs/api.md has no row %s", row);
        }
    }
    free(doc);
}

static json_t *msgs_of(const oai_request *r) {
    return json_object_get((json_t *)r->json, "messages");
}

Test(api_dialects, responses_items_become_chat_messages_with_tool_calls_and_reasoning) {
    static const char body[] =
        "{\"instructions\":\"Be brief\",\"input\":[{\"role\":\"user\",\"content\":\"Add\"},"
        "{\"type\":\"reasoning\",\"content\":[{\"type\":\"reasoning_text\",\"text\":\"hm\"}]},"
        "{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"calc\",\"arguments\":\"{}\"},"
        "{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":\"2\"}],"
        "\"tools\":[{\"type\":\"function\",\"name\":\"calc\",\"parameters\":{\"type\":\"object\"}}]"
        ","
        "\"max_output_tokens\":9,\"store\":false}";
    oai_request r;
    oai_error e;
    cr_assert_eq(api_responses_parse(&r, body, sizeof body - 1, NULL, NULL, NULL, &e), 0, "%s",
                 e.message);
    json_t *m = msgs_of(&r);
    cr_assert_eq(json_array_size(m), 4);
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(m, 0), "role")), "system");
    json_t *a = json_array_get(m, 2);
    cr_expect_str_eq(json_string_value(json_object_get(a, "reasoning_content")), "hm");
    cr_expect_eq(json_array_size(json_object_get(a, "tool_calls")), 1);
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(m, 3), "role")), "tool");
    cr_expect_eq(r.max_tokens, 9);
    cr_expect_eq(r.n_tools, 1);
    cr_expect(!r.store);
    cr_expect_eq(json_array_size((json_t *)r.history), 3,
                 "the history leaves the instructions out");
    oai_request_free(&r);
}

/* One body's 400: its param and a word of its message. */
static void refused(bool messages, const char *body, const char *param, const char *word) {
    oai_request r;
    oai_error e;
    int rc = messages ? api_messages_parse(&r, body, strlen(body), false, NULL, &e)
                      : api_responses_parse(&r, body, strlen(body), NULL, NULL, NULL, &e);
    cr_assert_neq(rc, 0, "%s was accepted", body);
    cr_expect_geq(e.status, 400);
    cr_expect_str_eq(e.param, param, "%s: param %s (%s)", body, e.param, e.message);
    cr_expect(strstr(e.message, word), "%s: %s", body, e.message);
}

Test(api_dialects, every_malformed_shape_is_a_400_naming_the_field_as_the_client_sent_it) {
    static const struct {
        bool messages; /* a Messages body, else a Responses one */
        const char *body, *param, *word;
    } cases[] = {
        {false, "{\"input\":\"x\",\"tools\":[{\"type\":\"web_search\"}]}", "tools[0]",
         "web_search"},
        {false, "{\"input\":\"x\",\"max_output_tokens\":-1}", "max_output_tokens",
         "max_output_tokens"},
        {false, "{\"input\":[{\"type\":\"item_reference\",\"id\":\"a\"}]}", "input[0]",
         "item_reference"},
        {false, "{\"input\":\"x\",\"previous_response_id\":\"resp_x\"}", "previous_response_id",
         "keeps no responses"},
        {false, "{\"input\":\"x\",\"foo\":1}", "foo", "not a field"},
        {false, "{\"input\":[{\"type\":\"reasoning\",\"summary\":[]}]}", "input",
         "no answer after it"},
        {true, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", "max_tokens", "required"},
        {true,
         "{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\"}]}]}",
         "messages[0].content[0]", "image"},
        {true,
         "{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":"
         "[{\"type\":\"bash_20250124\",\"name\":\"bash\"}]}",
         "tools[0]", "bash_20250124"},
        {true,
         "{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
         "\"stop_sequences\":7}",
         "stop_sequences", "stop_sequences"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        refused(cases[i].messages, cases[i].body, cases[i].param, cases[i].word);
}

Test(api_dialects, messages_blocks_become_tool_calls_tool_messages_and_reasoning) {
    static const char body[] =
        "{\"max_tokens\":8,\"system\":[{\"type\":\"text\",\"text\":\"S\"}],\"messages\":["
        "{\"role\":\"user\",\"content\":\"Add\"},{\"role\":\"assistant\",\"content\":["
        "{\"type\":\"thinking\",\"thinking\":\"hm\",\"signature\":\"\"},{\"type\":\"tool_use\","
        "\"id\":\"t1\",\"name\":\"calc\",\"input\":{\"a\":1}}]},{\"role\":\"user\",\"content\":["
        "{\"type\":\"tool_result\",\"tool_use_id\":\"t1\",\"content\":\"2\",\"is_error\":true}]}],"
        "\"tools\":[{\"name\":\"calc\",\"input_schema\":{\"type\":\"object\"}}],"
        "\"tool_choice\":{\"type\":\"any\",\"disable_parallel_tool_use\":true}}";
    oai_request r;
    oai_error e;
    cr_assert_eq(api_messages_parse(&r, body, sizeof body - 1, false, NULL, &e), 0, "%s",
                 e.message);
    json_t *m = msgs_of(&r);
    cr_assert_eq(json_array_size(m), 4);
    json_t *a = json_array_get(m, 2), *call = json_array_get(json_object_get(a, "tool_calls"), 0);
    cr_expect_str_eq(json_string_value(json_object_get(a, "reasoning_content")), "hm");
    cr_expect_str_eq(
        json_string_value(json_object_get(json_object_get(call, "function"), "arguments")),
        "{\"a\":1}");
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(m, 3), "content")),
                     "Error: 2");
    cr_expect_eq(r.tool_choice, TOOL_CHOICE_REQUIRED);
    cr_expect(!r.parallel_tool_calls);
    oai_request_free(&r);
}

Test(api_dialects, chat_takes_vllm_reasoning_on_assistant_messages_as_reasoning_content) {
    static const char body[] = "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":"
                               "\"assistant\",\"content\":\"b\",\"reasoning\":\"r\"}]}";
    oai_request r;
    oai_error e;
    cr_assert_eq(oai_parse(&r, OAI_CHAT, body, sizeof body - 1, &e), 0, "%s", e.message);
    json_t *a = json_array_get(msgs_of(&r), 1);
    cr_expect_str_eq(json_string_value(json_object_get(a, "reasoning_content")), "r");
    oai_request_free(&r);
    static const char differ[] = "{\"messages\":[{\"role\":\"assistant\",\"content\":\"b\","
                                 "\"reasoning\":\"r\",\"reasoning_content\":\"s\"}]}";
    cr_expect_neq(oai_parse(&r, OAI_CHAT, differ, sizeof differ - 1, &e), 0);
}

/* ---------------------------------------------------------------------------
 * Through a server
 * ------------------------------------------------------------------------- */

/* Skips without stories260K or the curl these tests talk through. */
static void require_model_and_curl(void) {
    REQUIRE_SHARED("models/stories260K.gguf");
    if (system("curl --version >/dev/null 2>&1")) cr_skip_test("curl is not installed");
}

/* curl's output (headers with -i) of one request. */
static void curl(int port, const char *args, char *out, size_t cap) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "curl -s -m 60 %s 2>&1", args);
    char *at = strstr(cmd, "PORT");
    if (at) { /* PORT -> the port */
        char tail[2048];
        snprintf(tail, sizeof tail, "%s", at + 4);
        snprintf(at, sizeof cmd - (size_t)(at - cmd), "%d%s", port, tail);
    }
    test_run_capture(cmd, out, cap);
}

Test(api_dialects, unknown_fields_ignore_names_them_in_a_header_and_counts_them, .timeout = 120) {
    require_model_and_curl();
    server_fixture f;
    server_config c;
    fixture_defaults(&c, &f);
    c.unknown_fields_ignore = 1;
    c.api_key = "k";
    fixture_start(&f, &c, true);
    static char out[65536];
    curl(f.port,
         "-i -H 'Authorization: Bearer k' http://127.0.0.1:PORT/v1/chat/completions -d "
         "'{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\",\"x_note\":1}],\"max_tokens\":2,"
         "\"vendor_extra\":{\"a\":1}}'",
         out, sizeof out);
    cr_expect(strstr(out, "200 OK"), "%s", out);
    cr_expect(strstr(out, "X-Tps-Ignored-Fields: messages[0].x_note,vendor_extra") ||
                  strstr(out, "X-Tps-Ignored-Fields: vendor_extra,messages[0].x_note"),
              "%s", out);
    curl(f.port,
         "-H 'x-api-key: wrong' http://127.0.0.1:PORT/v1/messages -d '{\"max_tokens\":2,"
         "\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}'",
         out, sizeof out);
    cr_expect(strstr(out, "{\"type\":\"error\",\"error\":{\"type\":\"authentication_error\""), "%s",
              out);
    curl(f.port, "http://127.0.0.1:PORT/metrics", out, sizeof out);
    cr_expect(strstr(out, "tps_ignored_fields_total 2"), "%s", out);
    cr_expect(strstr(out, "tps_http_requests_by_endpoint_total{endpoint=\"/v1/messages\"} 1"), "%s",
              out);
    fixture_finish(&f);
}

Test(api_dialects, the_store_evicts_the_oldest_and_a_404_says_so, .timeout = 120) {
    require_model_and_curl();
    server_fixture f;
    server_config c;
    fixture_defaults(&c, &f);
    c.response_store.max_entries = 1;
    fixture_start(&f, &c, true);
    static char out[65536];
    char first[64] = "", args[512];
    for (int i = 0; i < 2; i++) {
        curl(f.port,
             "http://127.0.0.1:PORT/v1/responses -d '{\"input\":\"Hi\",\"max_output_tokens\":2}'",
             out, sizeof out);
        json_t *j = json_loads(out, 0, NULL);
        cr_assert(json_is_string(json_object_get(j, "id")), "%s", out);
        if (!i) snprintf(first, sizeof first, "%s", json_string_value(json_object_get(j, "id")));
        json_decref(j);
    }
    snprintf(args, sizeof args,
             "http://127.0.0.1:PORT/v1/responses -d '{\"input\":\"x\",\"max_output_tokens\":2,"
             "\"previous_response_id\":\"%s\"}'",
             first);
    curl(f.port, args, out, sizeof out);
    cr_expect(strstr(out, "evicted to make room"), "%s", out);
    curl(f.port, "http://127.0.0.1:PORT/metrics", out, sizeof out);
    cr_expect(strstr(out, "tps_response_store_evictions_total{reason=\"room\"} 1"), "%s", out);
    cr_expect(strstr(out, "tps_response_store_entries 1"), "%s", out);
    fixture_finish(&f);
}

/* A Messages answer ended by one of its stop_sequences says which, whole
 * and streamed, as Anthropic's API does. */
Test(api_dialects, messages_say_which_stop_sequence_ended_the_answer, .timeout = 120) {
    require_model_and_curl();
    server_fixture f;
    fixture_serve(&f);
    static char out[65536];
    /* stories260K writes stories: an "e" comes within 64 tokens */
    const char *body = "-d '{\"max_tokens\":64,\"temperature\":0,\"stop_sequences\":[\"zq\",\"e\"],"
                       "\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}]";
    char args[512];
    snprintf(args, sizeof args, "http://127.0.0.1:PORT/v1/messages %s}'", body);
    curl(f.port, args, out, sizeof out);
    cr_expect(strstr(out, "\"stop_reason\":\"stop_sequence\",\"stop_sequence\":\"e\""), "%s", out);
    snprintf(args, sizeof args, "-N http://127.0.0.1:PORT/v1/messages %s,\"stream\":true}'", body);
    curl(f.port, args, out, sizeof out);
    cr_expect(strstr(out, "\"delta\":{\"stop_reason\":\"stop_sequence\",\"stop_sequence\":\"e\"}"),
              "%s", out);
    fixture_finish(&f);
}

/* reasoning.summary is honoured: the reasoning item's summary holds the
 * thinking; without it the summary stays empty (OpenAI's shape either way). */
Test(api_dialects, responses_reasoning_summary_fills_the_items_summary) {
    for (int asked = 0; asked < 2; asked++) {
        api_stream st;
        cr_assert_eq(api_stream_init(&st, OAI_DIALECT_RESPONSES, "resp_x", "m", 0, NULL, 3), 0);
        st.summary = asked;
        sbuf b;
        sbuf_init(&b);
        api_stream_start(&st, &b);
        api_stream_delta(&st, &b, API_PART_REASONING, "hmm", 3);
        api_stream_delta(&st, &b, API_PART_TEXT, "hi", 2);
        api_final f = {.finish = ENGINE_FINISH_STOP, .stop_sequence = NULL};
        api_stream_end(&st, &b, &f);
        sbuf_reset(&b);
        api_body(&st, &b, &f);
        json_t *j = json_loadb(b.p, b.len, 0, NULL);
        cr_assert(j, "%.*s", (int)b.len, b.p);
        json_t *item = json_array_get(json_object_get(j, "output"), 0);
        cr_expect_str_eq(json_string_value(json_object_get(item, "type")), "reasoning");
        json_t *sum = json_object_get(item, "summary");
        if (asked) {
            cr_expect_str_eq(json_string_value(json_object_get(json_array_get(sum, 0), "text")),
                             "hmm", "%.*s", (int)b.len, b.p);
        } else {
            cr_expect_eq(json_array_size(sum), 0);
        }
        json_decref(j);
        sbuf_free(&b);
        api_stream_free(&st);
    }
}
