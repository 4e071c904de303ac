/* Tool calls as they stream (server/tools.h's tool_stream), in every row of
 * the syntax table: a call the model writes, fed a few bytes at a time as
 * tokens come, gives its start, its arguments in more than one delta (the
 * deltas adding up to the arguments the whole answer parses to, which
 * equal the call written, compared as JSON values), and its end, complete.
 * gpt-oss's calls are fed as harmony.h hands them on (the header and the
 * body of a message to functions.NAME). And a complete call is checked
 * against its tool's schema (the full check's reference is Python's
 * jsonschema, test_json_schema_check.c). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <string.h>

#include "server/tools/tools.h"

#define ARGS  "{\"a\": 7, \"b\": -2, \"note\": \"seven minus two\"}"
#define PARAM "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
#define PARAMS                                                                                     \
    PARAM "\"b\":{\"type\":\"integer\"},\"note\":{\"type\":\"string\"}},\"required\":[\"a\","      \
          "\"b\",\"note\"]}"

typedef struct seen {
    size_t starts, deltas, dones;
    bool complete, valid;
    char name[32];
    char args[512];
} seen;

static void on_event(void *ctx, const tool_event *ev) {
    seen *s = ctx;
    switch (ev->kind) {
    case TOOL_EV_CALL_START:
        s->starts++;
        cr_assert_lt(ev->name_len, sizeof s->name);
        memcpy(s->name, ev->name, ev->name_len);
        break;
    case TOOL_EV_ARGS:
        s->deltas++;
        cr_assert_lt(strlen(s->args) + ev->n, sizeof s->args);
        strncat(s->args, ev->text, ev->n);
        break;
    case TOOL_EV_CALL_DONE:
        s->dones++;
        s->complete = ev->complete;
        s->valid = ev->valid;
        break;
    default:
        break;
    }
}

/* The call as the model writes it (for gpt-oss, what the splitter hands on). */
static void written(tool_format f, sbuf *out) {
    if (f == TOOL_FMT_HARMONY)
        sbuf_adds(out, "<|channel|>commentary to=functions.add <|constrain|>json<|message|>" ARGS);
    else
        tools_render_call(f, "add", ARGS, true, true, out);
}

static void same_json(const char *got, const char *want, const char *what) {
    json_t *a = json_loads(got, JSON_ALLOW_NUL, NULL), *b = json_loads(want, JSON_ALLOW_NUL, NULL);
    cr_assert(a && b && json_equal(a, b), "%s: arguments %s, want %s", what, got, want);
    json_decref(a);
    json_decref(b);
}

Test(tool_stream, every_row_streams_a_calls_arguments_in_several_deltas) {
    json_t *params = json_loads(PARAMS, 0, NULL);
    cr_assert_not_null(params);
    oai_tool tool = {.name = "add", .parameters = params};
    tool_set *set = tools_set_new(&tool, 1);
    for (int i = 0; i < TOOL_FMT_COUNT; i++) {
        tool_format f = (tool_format)i;
        const char *fn = tools_format_name(f);
        sbuf text;
        sbuf_init(&text);
        written(f, &text);
        seen s = {0};
        tool_stream *ts = tool_stream_new(f, set, "call_");
        cr_assert_not_null(ts);
        for (size_t at = 0; at < text.len; at += 3) /* a token is a few bytes */
            tool_stream_feed(ts, text.p + at, text.len - at < 3 ? text.len - at : 3, on_event, &s);
        tool_stream_end(ts, on_event, &s);
        tool_call calls[TOOLS_MAX_CALLS];
        size_t content;
        size_t k = tool_stream_calls(ts, calls, TOOLS_MAX_CALLS, &content);
        cr_assert_eq(k, 1, "%s: %s", fn, text.p);
        cr_assert_str_eq(calls[0].name, "add", "%s", fn);
        same_json(calls[0].arguments, ARGS, fn);
        cr_assert_eq(s.starts, 1, "%s", fn);
        cr_assert_str_eq(s.name, "add", "%s", fn);
        cr_assert_eq(s.dones, 1, "%s", fn);
        cr_assert(s.complete, "%s", fn);
        cr_assert_str_eq(s.args, calls[0].arguments, "%s: the deltas add up to the arguments", fn);
        cr_assert_gt(s.deltas, 1, "%s: the arguments came in %zu delta(s)", fn, s.deltas);
        tools_calls_free(calls, k);
        tool_stream_free(ts);
        sbuf_free(&text);
    }
    tools_set_free(set);
    json_decref(params);
}

/* A call the model wrote freely (tool_choice auto) is checked against its
 * tool's schema as it completes: one that fails is still the call as
 * written (vLLM's and llama-server's behaviour), marked and counted. */
static void one_call(const tool_set *set, const char *args, seen *s, size_t *invalid, char *got,
                     size_t cap) {
    sbuf text;
    sbuf_init(&text);
    tools_render_call(TOOL_FMT_HERMES, "add", args, true, true, &text);
    tool_stream *ts = tool_stream_new(TOOL_FMT_HERMES, set, "call_");
    tool_stream_feed(ts, text.p, text.len, on_event, s);
    tool_stream_end(ts, on_event, s);
    tool_call calls[TOOLS_MAX_CALLS];
    size_t content;
    size_t k = tool_stream_calls(ts, calls, TOOLS_MAX_CALLS, &content);
    cr_assert_eq(k, 1, "%s", text.p);
    snprintf(got, cap, "%s", calls[0].arguments);
    *invalid = tool_stream_invalid(ts);
    tools_calls_free(calls, k);
    tool_stream_free(ts);
    sbuf_free(&text);
}

Test(tool_stream, a_call_that_fails_its_schema_is_answered_as_written_and_counted) {
    json_t *params = json_loads(PARAMS, 0, NULL);
    oai_tool tool = {.name = "add", .parameters = params};
    tool_set *set = tools_set_new(&tool, 1);
    static const struct {
        const char *args;
        bool valid;
    } cases[] = {
        {ARGS, true},
        {"{\"a\": 7, \"b\": -2}", false},                          /* note is required */
        {"{\"a\": 7.5, \"b\": -2, \"note\": \"x\"}", false},       /* a is an integer */
        {"{\"a\": 7.0, \"b\": -2, \"note\": \"x\"}", true},        /* 7.0 is one */
        {"{\"a\": 1, \"b\": 2, \"note\": \"x\", \"c\": 3}", true}, /* no additionalProperties */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        seen s = {0};
        size_t invalid;
        char got[256];
        one_call(set, cases[i].args, &s, &invalid, got, sizeof got);
        cr_assert(s.complete, "%s", cases[i].args);
        cr_assert_eq(s.valid, cases[i].valid, "%s", cases[i].args);
        cr_assert_eq(invalid, !cases[i].valid, "%s", cases[i].args);
        same_json(got, cases[i].args, "answered as written");
    }
    tools_set_free(set);
    json_decref(params);
}

/* A string argument written raw (an XML-like row) may hold any byte; a NUL
 * is escaped as \u0000, which is JSON, so the call is checked against its
 * schema, not marked invalid as unreadable (fuzz_tools). */
Test(tool_stream, a_raw_string_argument_with_a_nul_byte_is_valid) {
    json_t *params = json_loads(PARAMS, 0, NULL);
    oai_tool tool = {.name = "add", .parameters = params};
    tool_set *set = tools_set_new(&tool, 1);
    static const char text[] = "<|tool_call>call:add{a:7,b:-2,note:<|\"|>x\0y<|\"|>}<tool_call|>";
    tool_stream *ts = tool_stream_new(TOOL_FMT_GEMMA4, set, "call_");
    seen s = {0};
    tool_stream_feed(ts, text, sizeof text - 1, on_event, &s);
    tool_stream_end(ts, on_event, &s);
    cr_assert(s.complete);
    cr_assert(s.valid, "%s", s.args);
    cr_assert_eq(tool_stream_invalid(ts), 0);
    same_json(s.args, "{\"a\": 7, \"b\": -2, \"note\": \"x\\u0000y\"}", "the NUL escaped");
    tool_stream_free(ts);
    tools_set_free(set);
    json_decref(params);
}
