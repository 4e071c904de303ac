/* Tests for server/tools: each format's calls parse from the text the
 * models write (examples in each format's documented syntax: Qwen 2.5,
 * Llama 3.1, Mistral, DeepSeek, gpt-oss harmony, Kimi K2, Functionary),
 * the calls every real template of the corpus writes into a conversation's
 * history parse back in the format tps reads from that template's text, a
 * rendered call parses back to itself, and the grammar of a forced call
 * accepts valid calls and refuses wrong ones (grammar_accepts, the
 * reference recognizer). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <string.h>

#include "constrain/grammar.h"
#include "server/chat/chat_prompt.h"
#include "server/tools/tools.h"
#include "support/test_support.h"

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

/* One format's text as a model writes it, the calls it holds and the
 * content before them; NULL where a case does not check that part. */
typedef struct parse_case {
    tool_format fmt;
    const char *text;
    size_t n_calls;
    const char *content;
    const char *name[2], *args[2];
} parse_case;

static const parse_case PARSE_CASES[] = {
    {TOOL_FMT_HERMES,
     "Let me add.<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, "
     "\"b\": 2}}\n</tool_call>\n<tool_call>\n{\"name\": \"add\", "
     "\"arguments\": {\"a\": 3, \"b\": 4}}\n</tool_call>",
     2,
     "Let me add.",
     {"add", NULL},
     {"{\"a\":1,\"b\":2}", "{\"a\":3,\"b\":4}"}},
    {TOOL_FMT_LLAMA3,
     "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}",
     1,
     "",
     {"get_weather"},
     {"{\"city\":\"Oslo\"}"}},
    {TOOL_FMT_MISTRAL,
     "[TOOL_CALLS] [{\"name\": \"add\", \"arguments\": {\"a\": 5, \"b\": 6}}, "
     "{\"name\": \"neg\", \"arguments\": {\"x\": 1}}]",
     2,
     NULL,
     {NULL, "neg"},
     {NULL, "{\"x\":1}"}},
    /* DeepSeek R1's syntax (its distills' template writes calls so), two
     * calls; and V3.1's */
    {TOOL_FMT_DEEPSEEK,
     "Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>add\n"
     "```json\n{\"a\": 1, \"b\": 2}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>"
     "function<｜tool▁sep｜>neg\n```json\n{\"x\": 3}\n```<｜tool▁call▁end｜>"
     "<｜tool▁calls▁end｜>",
     2,
     "Sure.",
     {"add", "neg"},
     {"{\"a\":1,\"b\":2}", "{\"x\":3}"}},
    {TOOL_FMT_DEEPSEEK,
     "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>add<｜tool▁sep｜>{\"a\": 5}"
     "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
     1,
     NULL,
     {"add"},
     {"{\"a\":5}"}},
    /* gpt-oss: the recipient in the channel part (what the model writes)
     * after an analysis message, and in the role part */
    {TOOL_FMT_HARMONY,
     "<|channel|>commentary to=functions.add <|constrain|>json<|message|>"
     "{\"a\": 1, \"b\": 2}",
     1,
     "",
     {"add"},
     {"{\"a\":1,\"b\":2}"}},
    {TOOL_FMT_HARMONY,
     "Checking.<|start|>assistant to=functions.neg<|channel|>commentary json"
     "<|message|>{\"x\": 3}<|call|>",
     1,
     "Checking.",
     {"neg"},
     {NULL}},
    /* raw (reasoning_format none): the analysis message stays content */
    {TOOL_FMT_HARMONY,
     "<|channel|>analysis<|message|>to=functions is a hint<|end|><|start|>"
     "assistant<|channel|>commentary to=functions.add <|constrain|>json"
     "<|message|>{\"a\": 5, \"b\": 6}",
     1,
     "<|channel|>analysis<|message|>to=functions is a hint<|end|>",
     {NULL},
     {NULL}},
    {TOOL_FMT_KIMI,
     "Let me check.<|tool_calls_section_begin|><|tool_call_begin|>functions.add:0"
     "<|tool_call_argument_begin|>{\"a\": 1, \"b\": 2}<|tool_call_end|>"
     "<|tool_call_begin|>functions.neg:1<|tool_call_argument_begin|>{\"x\": 3}"
     "<|tool_call_end|><|tool_calls_section_end|>",
     2,
     "Let me check.",
     {"add", "neg"},
     {NULL, "{\"x\":3}"}},
    {TOOL_FMT_FUNCTIONARY,
     "<function=add>{\"a\": 1, \"b\": 2}</function><function=neg>{\"x\": 3}"
     "</function>",
     2,
     "",
     {NULL, "neg"},
     {"{\"a\":1,\"b\":2}", NULL}},
    /* plain answers are content; a broken call is not a call */
    {TOOL_FMT_HERMES, "Just text.", 0, "Just text.", {NULL}, {NULL}},
    {TOOL_FMT_HERMES, "<tool_call>\n{\"name\": \"add\", \"argu", 0, NULL, {NULL}, {NULL}},
    {TOOL_FMT_LLAMA3, "{\"answer\": 3}", 0, NULL, {NULL}, {NULL}},
};

Test(tools, parses_each_formats_calls) {
    for (size_t i = 0; i < sizeof PARSE_CASES / sizeof PARSE_CASES[0]; i++) {
        const parse_case *k = &PARSE_CASES[i];
        tool_call c[TOOLS_MAX_CALLS];
        size_t content;
        cr_assert_eq(parse(k->fmt, k->text, c, &content), k->n_calls, "case %zu: %s", i, k->text);
        if (k->content)
            cr_assert_eq(content, strlen(k->content), "case %zu: content ends at %zu", i, content);
        for (size_t j = 0; j < k->n_calls; j++) {
            if (k->name[j]) cr_assert_str_eq(c[j].name, k->name[j], "case %zu call %zu", i, j);
            if (k->args[j]) expect_args(c[j].arguments, k->args[j]);
        }
        tools_calls_free(c, k->n_calls);
    }
}

Test(tools, a_rendered_call_parses_back_in_every_format) {
    for (int i = 0; i < TOOL_FMT_COUNT; i++) {
        tool_format f = (tool_format)i;
        sbuf b;
        sbuf_init(&b);
        tools_render_call(f, "add", "{\"a\": 7, \"b\": -2}", true, true, &b);
        tool_call c[TOOLS_MAX_CALLS];
        size_t content;
        cr_assert_eq(tools_parse(f, b.p, b.len, c, TOOLS_MAX_CALLS, &content), 1, "%s: %s",
                     tools_format_name(f), b.p);
        cr_assert_str_eq(c[0].name, "add");
        expect_args(c[0].arguments, "{\"a\":7,\"b\":-2}");
        tools_calls_free(c, 1);
        sbuf_free(&b);
    }
}

/* A call as the model writes it under the forced grammar: the rendered
 * call, but gpt-oss's in the channel form after an analysis message. */
static void generated_call(tool_format f, const char *name, const char *args, sbuf *out) {
    if (f != TOOL_FMT_HARMONY) {
        tools_render_call(f, name, args, true, true, out);
        return;
    }
    sbuf_printf(out,
                "<|channel|>analysis<|message|>I should call %s. 1 < 2.<|end|><|start|>assistant"
                "<|channel|>commentary to=functions.%s <|constrain|>json<|message|>%s",
                name, name, args);
}

static grammar *call_grammar(tool_format f, const oai_tool *tools, size_t n, const char *only,
                             bool parallel) {
    sbuf g;
    sbuf_init(&g);
    tps_err err = {{0}};
    cr_assert_eq(tools_grammar(f, tools, n, only, parallel, &g, &err), 0, "%s: %s",
                 tools_format_name(f), err.msg);
    grammar *gr = NULL;
    cr_assert_eq(grammar_parse(&gr, g.p, g.len, &err), 0, "%s\n%s", err.msg, g.p);
    sbuf_free(&g);
    return gr;
}

static bool accepts(grammar *gr, tool_format f, const char *name, const char *args) {
    sbuf b;
    sbuf_init(&b);
    generated_call(f, name, args, &b);
    bool ok = grammar_accepts(gr, b.p, b.len);
    sbuf_free(&b);
    return ok;
}

Test(tools, the_forced_call_grammar_accepts_valid_calls_only) {
    json_t *params = json_loads(ADD_PARAMS, 0, NULL);
    oai_tool tools[] = {{.name = "add", .parameters = params}, {.name = "now", .parameters = NULL}};
    for (int i = 0; i < TOOL_FMT_COUNT; i++) {
        tool_format f = (tool_format)i;
        const char *fn = tools_format_name(f);
        grammar *gr = call_grammar(f, tools, 2, NULL, false);
        cr_assert(accepts(gr, f, "add", "{\"a\":1,\"b\":2}"), "%s", fn);
        cr_assert(accepts(gr, f, "now", "{}"), "%s", fn);
        cr_assert_not(accepts(gr, f, "add", "{\"a\":\"x\",\"b\":2}"), "%s", fn);
        cr_assert_not(accepts(gr, f, "sub", "{\"a\":1,\"b\":2}"), "%s", fn);
        grammar_free(gr);
        /* a named function: only its calls */
        gr = call_grammar(f, tools, 2, "now", false);
        cr_assert(accepts(gr, f, "now", "{}"), "%s", fn);
        cr_assert_not(accepts(gr, f, "add", "{\"a\":1,\"b\":2}"), "%s", fn);
        grammar_free(gr);
    }
    /* several calls where the format writes several in one answer */
    grammar *gr = call_grammar(TOOL_FMT_DEEPSEEK, tools, 2, NULL, true);
    sbuf two;
    sbuf_init(&two);
    tools_render_call(TOOL_FMT_DEEPSEEK, "add", "{\"a\":1,\"b\":2}", true, false, &two);
    tools_render_call(TOOL_FMT_DEEPSEEK, "now", "{}", false, true, &two);
    cr_assert(grammar_accepts(gr, two.p, two.len), "%s", two.p);
    grammar_free(gr);
    sbuf_free(&two);
    sbuf g;
    sbuf_init(&g);
    tps_err err = {{0}};
    cr_assert_eq(tools_grammar(TOOL_FMT_HERMES, tools, 2, "missing", false, &g, &err), TPS_EINVAL);
    cr_assert_eq(tools_grammar(TOOL_FMT_KIMI, tools, 2, "missing", false, &g, &err), TPS_EINVAL);
    sbuf_free(&g);
    json_decref(params);
}

/* Every template of the corpus that tps reads a call syntax from, and that
 * wrote the calls of the tool round trip into its history (jinja2's
 * rendering): those calls parse back, in that syntax, to the calls sent
 * (gpt-oss's template writes only the first call of a message). */
Test(tools, calls_each_template_writes_parse_back_in_its_format) {
    json_error_t je;
    json_t *corpus = json_load_file(TPS_SOURCE_DIR "/tests/data/templates/corpus.json", 0, &je);
    cr_assert_not_null(corpus, "%s", je.text);
    size_t i, checked = 0;
    json_t *row;
    json_array_foreach(json_object_get(corpus, "renders"), i, row) {
        const char *conv = json_string_value(json_object_get(row, "conversation"));
        const char *out = json_string_value(json_object_get(row, "output"));
        const char *name = json_string_value(json_object_get(row, "template"));
        if (!conv || strcmp(conv, "tool_round_trip") || !out) continue;
        char path[512];
        snprintf(path, sizeof path, TPS_SOURCE_DIR "/tests/data/templates/%s", name);
        size_t len;
        char *src = read_file_all(path, &len);
        bool known;
        tool_format f = chat_tool_format(src, len, &known);
        free(src);
        const char *from = strstr(out, "Weather and time in Oslo?");
        if (!known || f == TOOL_FMT_GENERIC || !from || !strstr(from, "get_weather")) continue;
        tool_call c[TOOLS_MAX_CALLS];
        size_t content, k = tools_parse(f, from, strlen(from), c, TOOLS_MAX_CALLS, &content);
        /* gpt-oss's and GigaChat's templates write a message's first call only */
        bool one = f == TOOL_FMT_HARMONY || f == TOOL_FMT_GIGACHAT3 || f == TOOL_FMT_GIGACHAT31;
        cr_assert_geq(k, one ? 1 : 2, "%s (%s): %s", name, tools_format_name(f), from);
        cr_assert_str_eq(c[0].name, "get_weather", "%s", name);
        expect_args(c[0].arguments, "{\"city\":\"Oslo\",\"unit\":\"celsius\"}");
        if (k > 1) {
            cr_assert_str_eq(c[1].name, "get_time", "%s", name);
            expect_args(c[1].arguments, "{\"zone\":\"Europe/Oslo\",\"offset\":1.5}");
        }
        tools_calls_free(c, k);
        printf("  %s: %zu call(s) in %s\n", name, k, tools_format_name(f));
        checked++;
    }
    printf("tools: %zu templates' written calls parsed back\n", checked);
    cr_assert_geq(checked, 18);
    json_decref(corpus);
}

/* Which syntax each real template's text implies: the ones tps parses,
 * and those it refuses rather than misread (GLM's <arg_key>s and
 * Qwen3-Coder's <parameter=K> inside <tool_call>). */
Test(tools, each_templates_call_syntax_is_read_from_its_text) {
    static const struct {
        const char *file;
        tool_format f;
        bool known;
    } cases[] = {
        {"openai-gpt-oss-120b.jinja", TOOL_FMT_HARMONY, true},
        {"moonshotai-Kimi-K2.jinja", TOOL_FMT_KIMI, true},
        {"Kimi-K2-Thinking.jinja", TOOL_FMT_KIMI, true},
        {"meetkai-functionary-medium-v3.1.jinja", TOOL_FMT_FUNCTIONARY, true},
        {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", TOOL_FMT_DEEPSEEK, true},
        {"deepseek-ai-DeepSeek-V3.1.jinja", TOOL_FMT_DEEPSEEK_V31, true},
        {"Qwen-Qwen3-0.6B.jinja", TOOL_FMT_HERMES, true},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", TOOL_FMT_LLAMA3, true},
        {"Mistral-Small-3.2-24B-Instruct-2506.jinja", TOOL_FMT_MISTRAL_V11, true},
        {"mistralai-Mistral-Nemo-Instruct-2407.jinja", TOOL_FMT_MISTRAL, true},
        {"unsloth-Apriel-1.5.jinja", TOOL_FMT_APRIEL, true},
        {"GLM-4.6.jinja", TOOL_FMT_GLM, true},
        {"GLM-4.7-Flash.jinja", TOOL_FMT_GLM, true},
        {"Qwen3-Coder.jinja", TOOL_FMT_QWEN3_CODER, true},
        {"Qwen3.5-4B.jinja", TOOL_FMT_QWEN3_CODER, true},
        {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", TOOL_FMT_QWEN3_CODER, true},
        {"stepfun-ai-Step-3.5-Flash.jinja", TOOL_FMT_QWEN3_CODER, true},
        {"ByteDance-Seed-OSS.jinja", TOOL_FMT_SEED_OSS, true},
        {"MiniMax-M2.jinja", TOOL_FMT_MINIMAX, true},
        {"deepseek-ai-DeepSeek-V3.2.jinja", TOOL_FMT_DEEPSEEK_V32, true},
        {"NVIDIA-Nemotron-Nano-v2.jinja", TOOL_FMT_NEMOTRON_V2, true},
        {"Apertus-8B-Instruct.jinja", TOOL_FMT_APERTUS, true},
        {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", TOOL_FMT_COMMAND_R7B, true},
        {"CohereForAI-c4ai-command-r-plus-tool_use.jinja", TOOL_FMT_COMMAND_R_PLUS, true},
        {"ibm-granite-granite-3.3-2B-Instruct.jinja", TOOL_FMT_GRANITE, true},
        {"LFM2-8B-A1B.jinja", TOOL_FMT_LFM2, true},
        {"LFM2.5-Instruct.jinja", TOOL_FMT_LFM2, true},
        {"GigaChat3-10B-A1.8B.jinja", TOOL_FMT_GIGACHAT3, true},
        {"GigaChat3.1-10B-A1.8B.jinja", TOOL_FMT_GIGACHAT31, true},
        {"upstage-Solar-Open-100B.jinja", TOOL_FMT_SOLAR_OPEN, true},
        {"meetkai-functionary-medium-v3.2.jinja", TOOL_FMT_FUNCTIONARY_V32, true},
        {"fireworks-ai-llama-3-firefunction-v2.jinja", TOOL_FMT_FIREFUNCTION, true},
        {"google-gemma-4-31B-it.jinja", TOOL_FMT_GEMMA4, true},
        {"llama-cpp-deepseek-r1.jinja", TOOL_FMT_DEEPSEEK, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, TPS_SOURCE_DIR "/tests/data/templates/%s", cases[i].file);
        size_t len;
        char *src = read_file_all(path, &len);
        cr_assert_not_null(src, "%s", path);
        bool known;
        tool_format f = chat_tool_format(src, len, &known);
        free(src);
        cr_assert_eq(known, cases[i].known, "%s", cases[i].file);
        if (known) cr_assert_eq(f, cases[i].f, "%s: %s", cases[i].file, tools_format_name(f));
    }
}

Test(tools, a_streamed_answer_sends_content_up_to_a_possible_call) {
    /* the text so far, what of it may be sent now, and whether the rest is
     * held back as a possible call (-1: not asked) */
    static const struct {
        tool_format f;
        const char *t, *sent;
        int hold;
    } cases[] = {
        {TOOL_FMT_HERMES, "Sure. <tool_ca", "Sure. ", 0},
        {TOOL_FMT_HERMES, "Sure. <tool_call>\n{\"na", "Sure. ", 1},
        {TOOL_FMT_GENERIC, "No call <tool at all", "No call <tool at all", -1},
        {TOOL_FMT_LLAMA3, "  {\"name\"", "", 1},
        {TOOL_FMT_LLAMA3, "  The answer", "  The answer", -1},
        {TOOL_FMT_MISTRAL, "ok [TOOL_CALLS] [", "ok ", 1},
        {TOOL_FMT_DEEPSEEK, "ok<｜tool▁calls▁begin｜><｜tool", "ok", 1},
        /* gpt-oss: content up to a call's header (harmony.h hands it on whole) */
        {TOOL_FMT_HARMONY,
         "Sure.<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json", "Sure.",
         1},
        {TOOL_FMT_HARMONY, "Sure. <|cha", "Sure. ", 0},
        {TOOL_FMT_KIMI, "Hi<|tool_calls_section_begin|>", "Hi", -1},
        {TOOL_FMT_FUNCTIONARY, "Hi <function", "Hi ", 0},
    };
    bool hold;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *t = cases[i].t;
        cr_assert_eq(tools_stream_safe(cases[i].f, t, strlen(t), &hold), strlen(cases[i].sent),
                     "%s", t);
        if (cases[i].hold >= 0) cr_assert_eq(hold, cases[i].hold == 1, "%s", t);
    }
    /* a recipient the parser reads without a header or a space before it
     * (fuzz_tools found the stream sending it as content) */
    const char *t = "Sure.<|meto=functions.f<|message|>{\"a\": 0}";
    tool_call c[TOOLS_MAX_CALLS];
    size_t content, k = tools_parse(TOOL_FMT_HARMONY, t, strlen(t), c, TOOLS_MAX_CALLS, &content);
    cr_assert_eq(k, 1);
    tools_calls_free(c, k);
    cr_assert_leq(tools_stream_safe(TOOL_FMT_HARMONY, t, strlen(t), &hold), content);
    cr_assert(hold);
    /* Mistral's two forms: the other form's call earlier in the answer is
     * what the final parse keeps when this form's call never completes, so
     * the stream must not send it as content (fuzz_tools) */
    t = "ok [TOOL_CALLS]add[ARGS]{\"a\": 1} then [TOOL_CALLS] [{\"name\": \"f\", \"ar";
    k = tools_parse(TOOL_FMT_MISTRAL, t, strlen(t), c, TOOLS_MAX_CALLS, &content);
    cr_assert_eq(k, 1);
    cr_assert_str_eq(c[0].name, "add");
    tools_calls_free(c, k);
    cr_assert_eq(content, 3);
    cr_assert_eq(tools_stream_safe(TOOL_FMT_MISTRAL, t, strlen(t), &hold), 3);
    cr_assert(hold);
    /* a name with a NUL byte is no call (it came out empty: fuzz_tools) */
    static const char nul[] = "<|channel|>commentary to=functions.\0f<|message|>{}";
    cr_assert_eq(tools_parse(TOOL_FMT_HARMONY, nul, sizeof nul - 1, c, TOOLS_MAX_CALLS, &content),
                 0);
    static const char nul_json[] = "<tool_call>{\"name\": \"\\u0000f\", \"arguments\": {}}";
    cr_assert_eq(
        tools_parse(TOOL_FMT_HERMES, nul_json, sizeof nul_json - 1, c, TOOLS_MAX_CALLS, &content),
        0);
}
