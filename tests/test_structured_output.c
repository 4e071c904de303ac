/* Structured output through tps serve on stories260K, checked by
 * independent validators, not by our grammar code: Python's jsonschema for
 * response_format json_schema / json_object, Python's re.fullmatch for
 * regex and an equivalent GBNF grammar; at temperature 0 and 1, streamed
 * and not, on both endpoints. Also the 400s: malformed schema and grammar
 * (with their location), an unsupported keyword named, two constraints at
 * once. Skips with a message when python3 or its jsonschema is missing. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/oai_client.h"
#include "support/server_fixture.h"
#include "support/test_support.h"

#define MODEL "models/stories260K.gguf"

/* The interpreter python3 resolves to, found once per test: a version
 * manager's python3 is a shell script that costs over a second a call,
 * more than the request it checks. */
static char python[1024] = "python3";

/* Runs the validator; returns its exit status (77: jsonschema missing). */
static int validate(const char *kind, const char *spec, const char *out, char *why, size_t cap) {
    return test_validate_output(python, kind, spec, out, why, cap);
}

static void require_validator(void) {
    FILE *f = popen("python3 -c 'import jsonschema, sys; print(sys.executable)' 2>/dev/null", "r");
    char exe[sizeof python] = "";
    bool got = f && fgets(exe, sizeof exe, f);
    int st = f ? pclose(f) : -1;
    exe[strcspn(exe, "\n")] = 0;
    if (!got || st != 0 || !exe[0] || strchr(exe, '\''))
        cr_skip_test("python3 with jsonschema is needed for the independent validator "
                     "(scripts/install-deps.sh installs python3-jsonschema)");
    snprintf(python, sizeof python, "%s", exe);
}

static void start(server_fixture *f) {
    REQUIRE_SHARED(MODEL);
    require_validator();
    fixture_serve(f);
}

/* One request per (endpoint, stream, temperature, seed): each output must
 * validate, unless max_tokens cut it (finish "length"). Returns how many
 * validated. */
static int run_matrix(int port, const char *constraint, const char *kind, const char *spec,
                      int min_ok) {
    static const float temps[] = {0.0f, 1.0f, 1.0f};
    int ok = 0, cut = 0;
    for (int chat = 0; chat < 2; chat++)
        for (int stream = 0; stream < 2; stream++)
            for (size_t t = 0; t < sizeof temps / sizeof temps[0]; t++) {
                char body[8192];
                snprintf(body, sizeof body,
                         "{%s,\"max_tokens\":300,\"temperature\":%g,\"seed\":%zu,"
                         "\"stream\":%s,%s}",
                         chat ? "\"messages\":[{\"role\":\"user\",\"content\":\"Tell me about "
                                "Lily.\"}]"
                              : "\"prompt\":\"Once upon a time\"",
                         temps[t], t, stream ? "true" : "false", constraint);
                oai_answer a;
                long st =
                    oai_post(port, chat ? "/v1/chat/completions" : "/v1/completions", body, &a);
                cr_assert_eq(st, 200, "%s", a.body);
                const char *text = a.choice[0].content, *finish = a.choice[0].finish;
                char why[2048];
                if (!strcmp(finish, "length")) {
                    cut++;
                    cr_assert(!strcmp(kind, "regex") || text[0] == '{', "%s", text);
                } else {
                    cr_assert_str_eq(finish, "stop", "%s", a.body);
                    int rc = validate(kind, spec, text, why, sizeof why);
                    cr_assert_eq(rc, 0, "chat %d stream %d temp %g: %s", chat, stream, temps[t],
                                 why);
                    ok++;
                }
                oai_answer_free(&a);
            }
    cr_assert_geq(ok, min_ok, "only %d of 12 outputs finished (%d cut by max_tokens)", ok, cut);
    return ok;
}

static const char *PERSON =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":20},"
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":120},"
    "\"pets\":{\"type\":\"array\",\"items\":{\"enum\":[\"cat\",\"dog\",\"fish\"]},"
    "\"maxItems\":3},"
    "\"mood\":{\"anyOf\":[{\"type\":\"null\"},{\"const\":\"happy\"}]},"
    "\"born\":{\"type\":\"string\",\"format\":\"date\"},"
    "\"home\":{\"$ref\":\"#/$defs/place\"}},"
    "\"required\":[\"name\",\"age\",\"pets\",\"home\"],\"additionalProperties\":false,"
    "\"$defs\":{\"place\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\","
    "\"maxLength\":12},\"score\":{\"type\":\"number\"},\"ok\":{\"type\":\"boolean\"}},"
    "\"required\":[\"city\",\"ok\"],\"additionalProperties\":false}}}";

Test(structured, json_schema_output_validates_with_jsonschema, .timeout = 240) {
    server_fixture f;
    start(&f);
    char c[4096];
    snprintf(c, sizeof c,
             "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"person\","
             "\"strict\":true,\"schema\":%s}}",
             PERSON);
    run_matrix(f.port, c, "schema", PERSON, 9);
    fixture_finish(&f);
}

Test(structured, json_object_output_is_a_json_object, .timeout = 240) {
    server_fixture f;
    start(&f);
    /* json_object allows any object, which this small model seldom closes
     * within max_tokens: the outputs that finish must validate, the others
     * must at least have started an object */
    run_matrix(f.port, "\"response_format\":{\"type\":\"json_object\"}", "schema",
               "{\"type\":\"object\"}", 0);
    fixture_finish(&f);
}

Test(structured, regex_and_grammar_outputs_fullmatch_with_python_re, .timeout = 240) {
    server_fixture f;
    start(&f);
    const char *re = "(cat|dog|bird)s? [0-9]{1,3}(\\\\.[0-9]+)? [a-z ]{0,12}!";
    char c[512];
    snprintf(c, sizeof c, "\"regex\":\"%s\"", re);
    run_matrix(f.port, c, "regex", "(cat|dog|bird)s? [0-9]{1,3}(\\.[0-9]+)? [a-z ]{0,12}!", 9);
    const char *g = "\"grammar\":\"root ::= word (\\\", \\\" word){0,3} \\\".\\\"\\n"
                    "word ::= [a-z]{1,8}\\n\"";
    run_matrix(f.port, g, "regex", "[a-z]{1,8}(, [a-z]{1,8}){0,3}\\.", 9);
    fixture_finish(&f);
}

static void expect_400(int port, const char *body, const char *param, const char *needle) {
    oai_answer a;
    long st = oai_post(port, "/v1/chat/completions", body, &a);
    cr_assert_eq(st, 400, "%s -> %ld %s", body, st, a.body);
    cr_assert_str_eq(oai_error_param(&a), param, "%s", a.body);
    const char *msg = json_string_value(json_object_get(a.error, "message"));
    cr_assert(msg && strstr(msg, needle), "'%s' not in %s", needle, a.body);
    oai_answer_free(&a);
}

Test(structured, malformed_constraints_are_400s_that_say_where) {
    FIXTURE_SERVE(f);
#define MSG "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
    const char *sp = "response_format.json_schema.schema";
    expect_400(f.port,
               "{" MSG ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":"
               "\"x\",\"schema\":{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"number\","
               "\"multipleOf\":3}}}}}}",
               sp, "/properties/n: keyword 'multipleOf' is not supported");
    expect_400(f.port,
               "{" MSG ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":"
               "\"x\",\"schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#/$defs/"
               "missing\"}}}}}}",
               sp, "/properties/a");
    expect_400(f.port, "{" MSG ",\"response_format\":{\"type\":\"json_schema\"}}",
               "response_format.json_schema", "must be an object");
    expect_400(f.port, "{" MSG ",\"response_format\":{\"type\":\"xml\"}}", "response_format.type",
               "not supported");
    expect_400(f.port, "{" MSG ",\"grammar\":\"root ::= \\\"a\\\"\\nb ::= (\\\"x\\\"\\n\"}",
               "grammar", "line 3, column 1: expected ')'");
    expect_400(f.port, "{" MSG ",\"grammar\":\"root ::= nope\\n\"}", "grammar",
               "rule 'nope' is not defined");
    expect_400(f.port, "{" MSG ",\"regex\":\"(a)\\\\1\"}", "regex",
               "column 4: backreferences (\\1) are not supported");
    expect_400(f.port, "{" MSG ",\"regex\":\"a(?=b)\"}", "regex", "lookahead");
    expect_400(f.port, "{" MSG ",\"regex\":\"a\",\"grammar\":\"root ::= \\\"a\\\"\"}", "regex",
               "both constrain the output");
    fixture_finish(&f);
}

/* ---------------------------------------------------------------------------
 * Tool calls
 * ------------------------------------------------------------------------- */

static const char *ADD_PARAMS =
    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"minimum\":-99,"
    "\"maximum\":99},\"b\":{\"type\":\"integer\",\"minimum\":-99,\"maximum\":99}},"
    "\"required\":[\"a\",\"b\"],\"additionalProperties\":false}";

/* The first tool call of a chat answer (whole or streamed): its name and
 * arguments (assembled from the deltas), and the finish_reason. */
static void first_call(const oai_answer *a, bool stream, char *name, char *args, char *finish) {
    name[0] = args[0] = finish[0] = 0;
    const char *p = a->body;
    while (p && *p) {
        const char *line = p, *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        p = nl ? nl + 1 : NULL;
        if (stream && (len < 6 || strncmp(line, "data: ", 6) || !strncmp(line, "data: [DONE]", 12)))
            continue;
        json_t *j =
            stream ? json_loadb(line + 6, len - 6, 0, NULL) : json_loadb(line, len, 0, NULL);
        cr_assert(j, "not JSON: %.*s", (int)len, line);
        json_t *c = json_array_get(json_object_get(j, "choices"), 0);
        json_t *m = json_object_get(c, stream ? "delta" : "message");
        json_t *tc = json_array_get(json_object_get(m, "tool_calls"), 0);
        json_t *fn = json_object_get(tc, "function");
        if (json_is_string(json_object_get(fn, "name"))) {
            strcpy(name, json_string_value(json_object_get(fn, "name")));
            cr_assert(json_is_string(json_object_get(tc, "id")), "a call without an id");
            cr_assert_str_eq(json_string_value(json_object_get(tc, "type")), "function");
        }
        if (json_is_string(json_object_get(fn, "arguments")))
            strcat(args, json_string_value(json_object_get(fn, "arguments")));
        if (json_is_string(json_object_get(c, "finish_reason")))
            strcpy(finish, json_string_value(json_object_get(c, "finish_reason")));
        json_decref(j);
        if (!stream) break;
    }
}

Test(structured, forced_tool_calls_have_arguments_that_validate, .timeout = 240) {
    server_fixture f;
    start(&f);
    static const char *const choices[] = {
        "\"required\"", "{\"type\":\"function\",\"function\":{\"name\":\"calc\"}}"};
    for (int k = 0; k < 2; k++)
        for (int stream = 0; stream < 2; stream++)
            for (int t = 0; t < 2; t++) {
                char body[4096];
                snprintf(
                    body, sizeof body,
                    "{\"messages\":[{\"role\":\"user\",\"content\":\"2+3?\"}],"
                    "\"max_tokens\":110,\"temperature\":%d,\"seed\":%d,\"stream\":%s,"
                    "\"parallel_tool_calls\":false,\"tool_choice\":%s,\"tools\":["
                    "{\"type\":\"function\",\"function\":{\"name\":\"calc\",\"parameters\":%s}},"
                    "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}]}",
                    t, k * 4 + stream * 2 + t, stream ? "true" : "false", choices[k], ADD_PARAMS);
                oai_answer a;
                cr_assert_eq(oai_post(f.port, "/v1/chat/completions", body, &a), 200, "%s", a.body);
                char name[64], args[2048], finish[32], why[2048];
                first_call(&a, stream, name, args, finish);
                cr_assert_str_eq(finish, "tool_calls", "%s", a.body);
                if (k == 1 || !strcmp(name, "calc")) {
                    cr_assert_str_eq(name, "calc", "%s", a.body);
                    cr_assert_eq(validate("schema", ADD_PARAMS, args, why, sizeof why), 0,
                                 "choice %d stream %d temp %d: %s", k, stream, t, why);
                } else {
                    cr_assert_str_eq(name, "now", "%s", a.body);
                    cr_assert_eq(validate("schema", "{\"type\":\"object\"}", args, why, sizeof why),
                                 0, "%s", why);
                }
                oai_answer_free(&a);
            }
    fixture_finish(&f);
}

/* A named tool_choice forces one call to that function, as vLLM does,
 * whatever parallel_tool_calls says: clients such as LangChain's bindTools
 * name the function and leave parallel_tool_calls at its default (true),
 * and a grammar that allowed call after call let a model that does not stop
 * run to max_tokens with no call parsed (found by tests/sdk/langchain.cjs). */
Test(structured, a_named_tool_choice_is_one_call_by_default, .timeout = 120) {
    server_fixture f;
    start(&f);
    for (int stream = 0; stream < 2; stream++) {
        char body[4096];
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"Add two numbers.\"}],"
                 "\"max_tokens\":150,\"temperature\":1,\"seed\":11,\"stream\":%s,"
                 "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"calc\"}},"
                 "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"calc\","
                 "\"parameters\":%s}}]}",
                 stream ? "true" : "false", ADD_PARAMS);
        oai_answer a;
        cr_assert_eq(oai_post(f.port, "/v1/chat/completions", body, &a), 200, "%s", a.body);
        char name[64], args[2048], finish[32], why[2048];
        first_call(&a, stream, name, args, finish);
        cr_assert_str_eq(finish, "tool_calls", "stream %d: %s", stream, a.body);
        cr_assert_str_eq(name, "calc", "%s", a.body);
        cr_assert_eq(validate("schema", ADD_PARAMS, args, why, sizeof why), 0, "%s", why);
        const char *once = strstr(a.body, "\"name\":\"calc\"");
        cr_assert(once && !strstr(once + 1, "\"name\":\"calc\""), "not one call: %s", a.body);
        oai_answer_free(&a);
    }
    fixture_finish(&f);
}

/* A body over 64 KB is prepared on the worker pool, not inline (issue 19):
 * there too the tools reach the prompt and the forced call's grammar, so at
 * temperature 0 the call is the one the same request gets in a small body,
 * and a bad tool is the same 400. The padding is JSON whitespace. */
Test(structured, a_large_body_gets_the_same_forced_call, .timeout = 120) {
    server_fixture f;
    start(&f);
    static const char *const fmt =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"2+3?\"}],%s"
        "\"max_tokens\":110,\"temperature\":0,\"seed\":7,\"tool_choice\":\"required\","
        "\"parallel_tool_calls\":false,\"tools\":[{\"type\":\"function\",\"function\":"
        "{\"name\":\"calc\",\"parameters\":%s}}]}";
    size_t pad_len = 70000;
    char *pad = malloc(pad_len + 1);
    cr_assert(pad);
    memset(pad, ' ', pad_len);
    pad[pad_len] = 0;
    char name[2][64], args[2][2048], finish[2][32];
    for (int large = 0; large < 2; large++) {
        size_t cap = strlen(fmt) + strlen(ADD_PARAMS) + pad_len + 1;
        char *body = malloc(cap);
        cr_assert(body);
        snprintf(body, cap, fmt, large ? pad : "", ADD_PARAMS);
        oai_answer a;
        cr_assert_eq(oai_post(f.port, "/v1/chat/completions", body, &a), 200, "%s", a.body);
        first_call(&a, false, name[large], args[large], finish[large]);
        cr_assert_str_eq(finish[large], "tool_calls", "%s", a.body);
        oai_answer_free(&a);
        free(body);
    }
    cr_assert_str_eq(name[1], name[0]);
    cr_assert_str_eq(args[1], args[0]);
    char why[2048];
    cr_assert_eq(validate("schema", ADD_PARAMS, args[1], why, sizeof why), 0, "%s", why);
    size_t cap = pad_len + 512;
    char *bad = malloc(cap);
    cr_assert(bad);
    snprintf(bad, cap,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],%s\"tools\":[{\"type\":"
             "\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
             "\"properties\":{\"x\":{\"type\":\"string\",\"pattern\":\"^a\"}}}}}],"
             "\"tool_choice\":\"required\"}",
             pad);
    expect_400(f.port, bad, "tools", "pattern");
    free(bad);
    free(pad);
    fixture_finish(&f);
}

/* The prompt's size for a conversation: usage.prompt_tokens of a 1-token answer. */
static long prompt_tokens(int port, const char *messages) {
    char body[4096];
    snprintf(body, sizeof body, "{\"messages\":%s,\"max_tokens\":1,\"temperature\":0}", messages);
    oai_answer a;
    cr_assert_eq(oai_post(port, "/v1/chat/completions", body, &a), 200, "%s", a.body);
    long n = (long)json_integer_value(json_object_get(a.usage, "prompt_tokens"));
    oai_answer_free(&a);
    return n;
}

Test(structured, tool_calls_and_results_are_rendered_back_into_the_prompt) {
    FIXTURE_SERVE(f);
    long plain = prompt_tokens(f.port, "[{\"role\":\"user\",\"content\":\"2+3?\"},"
                                       "{\"role\":\"assistant\",\"content\":null}]");
    long with_call =
        prompt_tokens(f.port, "[{\"role\":\"user\",\"content\":\"2+3?\"},{\"role\":\"assistant\","
                              "\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":"
                              "\"function\",\"function\":{\"name\":\"calc\",\"arguments\":"
                              "\"{\\\"a\\\":2,\\\"b\\\":3}\"}}]}]");
    long with_result = prompt_tokens(
        f.port, "[{\"role\":\"user\",\"content\":\"2+3?\"},{\"role\":\"assistant\",\"content\":"
                "null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":"
                "\"calc\",\"arguments\":\"{\\\"a\\\":2,\\\"b\\\":3}\"}}]},{\"role\":\"tool\","
                "\"tool_call_id\":\"c1\",\"content\":\"5\"}]");
    /* the call's text (<tool_call> {"name": "calc", ...}) and then the result's
     * (<tool_response> 5 </tool_response> in a user turn) are in the prompt */
    cr_assert_gt(with_call, plain + 20, "call: %ld tokens, without: %ld", with_call, plain);
    cr_assert_gt(with_result, with_call + 20, "result: %ld, call: %ld", with_result, with_call);
    expect_400(f.port,
               "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\","
               "\"tool_calls\":[{\"id\":\"c1\",\"function\":{\"name\":\"calc\"}}]}]}",
               "messages[1].tool_calls", "arguments");
    expect_400(f.port,
               "{" MSG ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
               "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"g\"}}}",
               "tool_choice", "'g', which is not in tools");
    expect_400(f.port,
               "{" MSG ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
               "\"parameters\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"string\","
               "\"pattern\":\"^a\"}}}}}],\"tool_choice\":\"required\"}",
               "tools", "pattern");
    fixture_finish(&f);
}

/* tool_choice auto on a model that answers in prose: streamed, the content
 * comes in many chunks as it is generated, and assembles to the same text
 * as the whole answer; no tool_calls. */
Test(structured, auto_tool_choice_streams_plain_answers_as_they_come, .timeout = 120) {
    FIXTURE_SERVE(f);
    const char *req = "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":40,"
                      "\"temperature\":0,\"tools\":[{\"type\":\"function\",\"function\":{"
                      "\"name\":\"f\"}}],\"stream\":%s}";
    char body[512];
    snprintf(body, sizeof body, req, "false");
    oai_answer whole, streamed;
    cr_assert_eq(oai_post(f.port, "/v1/chat/completions", body, &whole), 200, "%s", whole.body);
    snprintf(body, sizeof body, req, "true");
    cr_assert_eq(oai_post(f.port, "/v1/chat/completions", body, &streamed), 200, "%s",
                 streamed.body);
    cr_assert_str_eq(whole.choice[0].content, streamed.choice[0].content);
    cr_assert_str_eq(whole.choice[0].finish, streamed.choice[0].finish);
    cr_assert_str_eq(whole.choice[0].finish, "length");
    int chunks = 0;
    for (const char *p = streamed.body; (p = strstr(p, "\"content\":\"")); p++)
        chunks++;
    cr_assert_gt(chunks, 10, "content came in %d chunks", chunks);
    cr_assert_null(strstr(whole.body, "tool_calls"));
    oai_answer_free(&whole);
    oai_answer_free(&streamed);
    fixture_finish(&f);
}
