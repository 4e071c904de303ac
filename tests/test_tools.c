/* Tests for server/tools: each format's calls parse from the text the
 * models write (examples in Qwen 2.5, Llama 3.1 and Mistral's documented
 * syntax), a rendered call parses back to itself, and the grammar of a
 * forced call accepts the rendered calls and refuses wrong ones
 * (grammar_accepts, the reference recognizer). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <string.h>

#include "engine/grammar.h"
#include "server/tools.h"

static const char *ADD_PARAMS = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
                                "\"b\":{\"type\":\"integer\"}},\"required\":[\"a\",\"b\"],"
                                "\"additionalProperties\":false}";

static size_t parse(tool_format f, const char *text, tool_call *calls, size_t *content) {
    return tools_parse(f, text, strlen(text), calls, TOOLS_MAX_CALLS, content);
}

static void expect_args(const char *got, const char *want) {
    json_t *a = json_loads(got, 0, NULL), *b = json_loads(want, 0, NULL);
    cr_assert(a && b && json_equal(a, b), "arguments %s, want %s", got, want);
    json_decref(a);
    json_decref(b);
}

Test(tools, parses_each_formats_calls) {
    tool_call c[TOOLS_MAX_CALLS];
    size_t content;
    const char *hermes = "Let me add.<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, "
                         "\"b\": 2}}\n</tool_call>\n<tool_call>\n{\"name\": \"add\", "
                         "\"arguments\": {\"a\": 3, \"b\": 4}}\n</tool_call>";
    cr_assert_eq(parse(TOOL_FMT_HERMES, hermes, c, &content), 2);
    cr_assert_eq(content, strlen("Let me add."));
    cr_assert_str_eq(c[0].name, "add");
    expect_args(c[0].arguments, "{\"a\":1,\"b\":2}");
    expect_args(c[1].arguments, "{\"a\":3,\"b\":4}");
    tools_calls_free(c, 2);

    const char *llama = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}";
    cr_assert_eq(parse(TOOL_FMT_LLAMA3, llama, c, &content), 1);
    cr_assert_str_eq(c[0].name, "get_weather");
    expect_args(c[0].arguments, "{\"city\":\"Oslo\"}");
    cr_assert_eq(content, 0);
    tools_calls_free(c, 1);

    const char *mistral = "[TOOL_CALLS] [{\"name\": \"add\", \"arguments\": {\"a\": 5, \"b\": 6}}, "
                          "{\"name\": \"neg\", \"arguments\": {\"x\": 1}}]";
    cr_assert_eq(parse(TOOL_FMT_MISTRAL, mistral, c, &content), 2);
    cr_assert_str_eq(c[1].name, "neg");
    expect_args(c[1].arguments, "{\"x\":1}");
    tools_calls_free(c, 2);

    /* DeepSeek R1's syntax (its distills' template writes calls so), two
     * calls; and V3.1's */
    const char *r1 = "Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>add\n"
                     "```json\n{\"a\": 1, \"b\": 2}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>"
                     "function<｜tool▁sep｜>neg\n```json\n{\"x\": 3}\n```<｜tool▁call▁end｜>"
                     "<｜tool▁calls▁end｜>";
    cr_assert_eq(parse(TOOL_FMT_DEEPSEEK, r1, c, &content), 2);
    cr_assert_eq(content, strlen("Sure."));
    cr_assert_str_eq(c[0].name, "add");
    expect_args(c[0].arguments, "{\"a\":1,\"b\":2}");
    cr_assert_str_eq(c[1].name, "neg");
    expect_args(c[1].arguments, "{\"x\":3}");
    tools_calls_free(c, 2);
    const char *v31 = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>add<｜tool▁sep｜>{\"a\": 5}"
                      "<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    cr_assert_eq(parse(TOOL_FMT_DEEPSEEK, v31, c, &content), 1);
    cr_assert_str_eq(c[0].name, "add");
    expect_args(c[0].arguments, "{\"a\":5}");
    tools_calls_free(c, 1);

    /* plain answers are content; a broken call is not a call */
    cr_assert_eq(parse(TOOL_FMT_HERMES, "Just text.", c, &content), 0);
    cr_assert_eq(content, strlen("Just text."));
    cr_assert_eq(parse(TOOL_FMT_HERMES, "<tool_call>\n{\"name\": \"add\", \"argu", c, &content), 0);
    cr_assert_eq(parse(TOOL_FMT_LLAMA3, "{\"answer\": 3}", c, &content), 0);
}

Test(tools, a_rendered_call_parses_back_in_every_format) {
    static const tool_format fmts[] = {TOOL_FMT_HERMES, TOOL_FMT_LLAMA3, TOOL_FMT_MISTRAL,
                                       TOOL_FMT_GENERIC, TOOL_FMT_DEEPSEEK};
    for (size_t i = 0; i < 5; i++) {
        sbuf b;
        sbuf_init(&b);
        tools_render_call(fmts[i], "add", "{\"a\": 7, \"b\": -2}", true, true, &b);
        tool_call c[TOOLS_MAX_CALLS];
        size_t content;
        cr_assert_eq(tools_parse(fmts[i], b.p, b.len, c, TOOLS_MAX_CALLS, &content), 1, "%s: %s",
                     tools_format_name(fmts[i]), b.p);
        cr_assert_str_eq(c[0].name, "add");
        expect_args(c[0].arguments, "{\"a\":7,\"b\":-2}");
        tools_calls_free(c, 1);
        sbuf_free(&b);
    }
}

Test(tools, the_forced_call_grammar_accepts_valid_calls_only) {
    json_t *params = json_loads(ADD_PARAMS, 0, NULL);
    oai_tool tools[] = {{.name = "add", .parameters = params}, {.name = "now", .parameters = NULL}};
    static const tool_format fmts[] = {TOOL_FMT_HERMES, TOOL_FMT_LLAMA3, TOOL_FMT_MISTRAL,
                                       TOOL_FMT_GENERIC};
    for (size_t i = 0; i < 4; i++) {
        sbuf g;
        sbuf_init(&g);
        tps_err err = {{0}};
        cr_assert_eq(tools_grammar(fmts[i], tools, 2, NULL, false, &g, &err), 0, "%s", err.msg);
        grammar *gr = NULL;
        cr_assert_eq(grammar_parse(&gr, g.p, g.len, &err), 0, "%s\n%s", err.msg, g.p);
        sbuf ok, bad_args, unknown;
        sbuf_init(&ok);
        sbuf_init(&bad_args);
        sbuf_init(&unknown);
        tools_render_call(fmts[i], "add", "{\"a\":1,\"b\":2}", true, true, &ok);
        tools_render_call(fmts[i], "add", "{\"a\":\"x\",\"b\":2}", true, true, &bad_args);
        tools_render_call(fmts[i], "sub", "{\"a\":1,\"b\":2}", true, true, &unknown);
        cr_assert(grammar_accepts(gr, ok.p, ok.len), "%s: %s", tools_format_name(fmts[i]), ok.p);
        cr_assert_not(grammar_accepts(gr, bad_args.p, bad_args.len), "%s", bad_args.p);
        cr_assert_not(grammar_accepts(gr, unknown.p, unknown.len), "%s", unknown.p);
        grammar_free(gr);
        sbuf_free(&ok);
        sbuf_free(&bad_args);
        sbuf_free(&unknown);
        sbuf_free(&g);
    }
    sbuf g;
    sbuf_init(&g);
    tps_err err = {{0}};
    cr_assert_eq(tools_grammar(TOOL_FMT_HERMES, tools, 2, "missing", false, &g, &err), TPS_EINVAL);
    /* DeepSeek's calls have no grammar yet: a forced call is refused, named */
    cr_assert_eq(tools_grammar(TOOL_FMT_DEEPSEEK, tools, 2, NULL, false, &g, &err), TPS_EUNSUP);
    cr_assert(strstr(err.msg, "DeepSeek"), "%s", err.msg);
    sbuf_free(&g);
    json_decref(params);
}

Test(tools, a_streamed_answer_sends_content_up_to_a_possible_call) {
    bool hold;
    const char *t = "Sure. <tool_ca";
    cr_assert_eq(tools_stream_safe(TOOL_FMT_HERMES, t, strlen(t), &hold), strlen("Sure. "));
    cr_assert_not(hold);
    t = "Sure. <tool_call>\n{\"na";
    cr_assert_eq(tools_stream_safe(TOOL_FMT_HERMES, t, strlen(t), &hold), strlen("Sure. "));
    cr_assert(hold);
    t = "No call <tool at all";
    cr_assert_eq(tools_stream_safe(TOOL_FMT_GENERIC, t, strlen(t), &hold), strlen(t));
    t = "  {\"name\"";
    cr_assert_eq(tools_stream_safe(TOOL_FMT_LLAMA3, t, strlen(t), &hold), 0);
    cr_assert(hold);
    t = "  The answer";
    cr_assert_eq(tools_stream_safe(TOOL_FMT_LLAMA3, t, strlen(t), &hold), strlen(t));
    t = "ok [TOOL_CALLS] [";
    cr_assert_eq(tools_stream_safe(TOOL_FMT_MISTRAL, t, strlen(t), &hold), 3);
    cr_assert(hold);
    t = "ok<｜tool▁calls▁begin｜><｜tool";
    cr_assert_eq(tools_stream_safe(TOOL_FMT_DEEPSEEK, t, strlen(t), &hold), 2);
    cr_assert(hold);
}
