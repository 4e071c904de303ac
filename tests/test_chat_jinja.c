/* tps serve with Jinja chat templates, as a user runs it: the GGUF's own
 * template (a DeepSeek-R1-Distill-shaped llama file made with `tps model
 * make --chat-template-file`), --chat-template-file, and a file with none
 * (ChatML and a warning). POST /apply-template shows the prompt; each is
 * compared with what jinja2 renders for the same conversation
 * (tests/data/templates/corpus.json), BOS aside (the tokenizer adds it).
 * Also: chat_template_kwargs (enable_thinking), continue_final_message, a
 * template's raise_exception as a 400 carrying its message, a template that
 * does not compile as a startup error, tools written by the template and
 * the calls parsed in its format. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/raw_http.h"
#include "support/server_fixture.h"
#include "support/test_support.h"

#define TEMPLATES TPS_SOURCE_DIR "/tests/data/templates/"

/* POST path body -> the status, and the body parsed (NULL when not JSON). */
static int post(int port, const char *path, const char *body, json_t **out) {
    int fd = raw_connect(port, 0);
    cr_assert_geq(fd, 0);
    char head[512];
    snprintf(head, sizeof head,
             "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\nConnection: close\r\n\r\n",
             path, strlen(body));
    cr_assert(raw_send_all(fd, head, strlen(head)) && raw_send_all(fd, body, strlen(body)));
    static char resp[1 << 20];
    bool closed;
    raw_read_until_close(fd, resp, sizeof resp, 30000, &closed);
    close(fd);
    const char *b = strstr(resp, "\r\n\r\n");
    *out = b ? json_loads(b + 4, 0, NULL) : NULL;
    return raw_status_of(resp);
}

/* jinja2's rendering of a corpus pair, its BOS text cut from the front. */
static char *reference(json_t *corpus, const char *tmpl, const char *conv) {
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(corpus, "renders"), i, r) {
        if (!json_is_string(json_object_get(r, "output")) ||
            strcmp(json_string_value(json_object_get(r, "template")), tmpl) ||
            strcmp(json_string_value(json_object_get(r, "conversation")), conv))
            continue;
        const char *out = json_string_value(json_object_get(r, "output"));
        json_t *tok = json_object_get(json_object_get(corpus, "tokens"), tmpl);
        const char *bos = json_string_value(json_array_get(tok, 0));
        if (bos && *bos && !strncmp(out, bos, strlen(bos))) out += strlen(bos);
        return strdup(out);
    }
    cr_assert_fail("%s / %s is not in corpus.json", tmpl, conv);
    return NULL;
}

static json_t *corpus_load(void) {
    json_error_t je;
    json_t *c = json_load_file(TEMPLATES "corpus.json", 0, &je);
    cr_assert_not_null(c, "corpus.json: %s", je.text);
    return c;
}

/* /apply-template of a corpus conversation (with extra fields merged in)
 * -> the prompt, or NULL with *status the error's. */
static char *apply(int port, json_t *corpus, const char *conv, const char *extra, int *status) {
    json_t *body = json_deep_copy(json_object_get(json_object_get(corpus, "conversations"), conv));
    if (extra) json_object_update(body, json_loads(extra, 0, NULL));
    char *text = json_dumps(body, 0);
    json_t *resp = NULL;
    *status = post(port, "/apply-template", text, &resp);
    char *prompt = NULL;
    if (*status == 200) prompt = strdup(json_string_value(json_object_get(resp, "prompt")));
    free(text);
    json_decref(body);
    json_decref(resp);
    return prompt;
}

static void expect_prompt(int port, json_t *corpus, const char *tmpl, const char *conv,
                          const char *extra) {
    int status;
    char *got = apply(port, corpus, conv, extra, &status), *want = reference(corpus, tmpl, conv);
    cr_assert_eq(status, 200, "%s / %s", tmpl, conv);
    cr_expect_str_eq(got, want, "%s / %s", tmpl, conv);
    free(got);
    free(want);
}

/* expect_prompt of each conversation of convs (NULL-terminated), no extra
 * fields. */
static void expect_prompts(int port, json_t *corpus, const char *tmpl, const char *const *convs) {
    for (; *convs; convs++)
        expect_prompt(port, corpus, tmpl, *convs, NULL);
}

static void start_with_template(server_fixture *f, const char *file) {
    server_config c;
    fixture_defaults(&c, f);
    c.chat_template_file = file;
    fixture_start(f, &c, true);
}

/* Starts f on the corpus template `name` (in TEMPLATES) and checks its
 * prompts for convs (NULL-terminated) against jinja2's; returns the corpus,
 * which the caller frees. */
static json_t *start_checking_prompts(server_fixture *f, const char *name,
                                      const char *const *convs) {
    char path[512];
    snprintf(path, sizeof path, TEMPLATES "%s", name);
    start_with_template(f, path);
    json_t *corpus = corpus_load();
    expect_prompts(f->port, corpus, name, convs);
    return corpus;
}

/* start_with_template() on a temporary file holding text; returns the
 * file's path for finish_temp_template(). */
static char *start_with_temp_template(server_fixture *f, const char *text) {
    char *path = test_temp_file(text);
    start_with_template(f, path);
    return path;
}

/* Stops f and removes its template file (start_with_temp_template's path). */
static void finish_temp_template(server_fixture *f, char *path) {
    fixture_finish(f);
    unlink(path);
    free(path);
}

Test(chat_jinja, a_deepseek_r1_distill_shaped_file_gets_the_deepseek_prompt, .timeout = 120) {
    REQUIRE_SHARED("models/stories260K.gguf");
    char dir[] = "/tmp/tps-chat-jinja-XXXXXX", args[1024], *out = NULL;
    cr_assert_not_null(mkdtemp(dir));
    snprintf(args, sizeof args,
             "model make --arch llama --preset tiny --type f32 --chat-template-file "
             "'" TEMPLATES "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja' -o %s/r1.gguf",
             dir);
    assert_tps_ok(args);
    snprintf(args, sizeof args, "model info %s/r1.gguf", dir);
    cr_assert_eq(run_tps(args, true, &out), 0, "%s", out);
    cr_expect(strstr(out, "GGUF tokenizer.chat_template") && strstr(out, "deepseek"), "%s", out);
    free(out);
    server_fixture f;
    server_config c;
    fixture_defaults(&c, &f);
    char model[600];
    snprintf(model, sizeof model, "%s/r1.gguf", dir);
    c.model_path = model;
    fixture_start(&f, &c, true);
    json_t *corpus = corpus_load();
    const char *t = "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja";
    expect_prompts(f.port, corpus, t,
                   (const char *const[]){"system_user", "multi_turn", "reasoning", NULL});
    /* its template writes earlier calls itself (it reads tool_calls), so the
     * history passes as it is; it never reads `tools`, so offered tools
     * would be written into the system message (tools.h): none here */
    expect_prompt(f.port, corpus, t, "tool_round_trip", "{\"tools\":null}");
    /* and a chat completion runs on it */
    json_t *resp = NULL;
    cr_assert_eq(post(f.port, "/v1/chat/completions",
                      "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":4}",
                      &resp),
                 200);
    json_decref(resp);
    json_decref(corpus);
    fixture_finish(&f);
    snprintf(args, sizeof args, "rm -rf %s", dir);
    cr_assert_eq(system(args), 0);
}

Test(chat_jinja, enable_thinking_false_changes_a_qwen3_prompt_as_jinja2_does, .timeout = 60) {
    REQUIRE_SHARED("models/stories260K.gguf");
    server_fixture f;
    json_t *corpus =
        start_checking_prompts(&f, "Qwen-Qwen3-0.6B.jinja",
                               (const char *const[]){"no_thinking", "user", "reasoning", "tools",
                                                     "tool_round_trip", "special_text", NULL});
    int status;
    char *a = apply(f.port, corpus, "user", NULL, &status),
         *b = apply(f.port, corpus, "no_thinking", NULL, &status);
    cr_expect_str_neq(a, b, "enable_thinking: false changes the prompt");
    free(a);
    free(b);
    /* chat_template_kwargs cannot replace what the request sets */
    free(apply(f.port, corpus, "user", "{\"chat_template_kwargs\":{\"messages\":[]}}", &status));
    cr_expect_eq(status, 400);
    json_decref(corpus);
    fixture_finish(&f);
}

Test(chat_jinja, a_templates_raise_exception_is_a_400_with_its_message, .timeout = 60) {
    REQUIRE_SHARED("models/stories260K.gguf");
    server_fixture f;
    json_t *corpus = start_checking_prompts(&f, "google-gemma-2-2b-it.jinja",
                                            (const char *const[]){"user", NULL});
    json_t *resp = NULL;
    int status = post(f.port, "/v1/chat/completions",
                      "{\"messages\":[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\","
                      "\"content\":\"U\"}],\"max_tokens\":2}",
                      &resp);
    cr_assert_eq(status, 400);
    json_t *err = json_object_get(resp, "error");
    cr_expect_str_eq(json_string_value(json_object_get(err, "message")),
                     "System role not supported");
    cr_expect_str_eq(json_string_value(json_object_get(err, "param")), "messages");
    json_decref(resp);
    json_decref(corpus);
    fixture_finish(&f);
}

Test(chat_jinja, continue_final_message_leaves_the_last_message_open, .timeout = 60) {
    REQUIRE_SHARED("models/stories260K.gguf");
    server_fixture f;
    start_with_template(&f, TEMPLATES "Qwen-Qwen2.5-7B-Instruct.jinja");
    const char *msgs = "{\"messages\":[{\"role\":\"user\",\"content\":\"Count\"},{\"role\":"
                       "\"assistant\",\"content\":\"1, 2, \"}]";
    char body[512];
    snprintf(body, sizeof body, "%s,\"continue_final_message\":true}", msgs);
    json_t *resp = NULL;
    cr_assert_eq(post(f.port, "/apply-template", body, &resp), 200);
    /* transformers keeps the message's trailing blank when the template
     * kept it: the prompt ends right after "1, 2, " */
    const char *p = json_string_value(json_object_get(resp, "prompt"));
    cr_expect(p && strlen(p) > 6 && !strcmp(p + strlen(p) - 6, "1, 2, "), "%s", p);
    cr_expect(p && !strstr(p, "<|im_start|>assistant\n1, 2, <|im_end|>"), "%s", p);
    json_decref(resp);
    snprintf(body, sizeof body,
             "%s,\"continue_final_message\":true,\"add_generation_prompt\":true}", msgs);
    cr_expect_eq(post(f.port, "/apply-template", body, &resp), 400);
    json_decref(resp);
    fixture_finish(&f);
}

Test(chat_jinja, tools_are_written_by_the_template_as_jinja2_writes_them, .timeout = 120) {
    REQUIRE_SHARED("models/stories260K.gguf");
    server_fixture f;
    json_t *corpus =
        start_checking_prompts(&f, "Qwen-Qwen2.5-7B-Instruct.jinja",
                               (const char *const[]){"tools", "tool_round_trip", NULL});
    /* arguments that are not JSON are a 400 naming them */
    json_t *resp = NULL;
    cr_expect_eq(post(f.port, "/apply-template",
                      "{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{"
                      "\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\","
                      "\"arguments\":\"{nope\"}}]}]}",
                      &resp),
                 400);
    cr_expect(strstr(json_string_value(json_object_get(json_object_get(resp, "error"), "message")),
                     "tool_calls[0].function.arguments"));
    json_decref(resp);
    json_decref(corpus);
    fixture_finish(&f);
}

/* A forced call through a template that writes the tools itself in the
 * Hermes syntax (short: stories260K's context is 512 tokens): the grammar
 * of that format holds the answer to a call, parsed back into tool_calls. */
Test(chat_jinja, a_forced_call_follows_the_templates_format, .timeout = 120) {
    REQUIRE_SHARED("models/stories260K.gguf");
    server_fixture f;
    char *path = start_with_temp_template(
        &f, "{%- if tools %}<tools>{{ tools|tojson }}</tools> Call: <tool_call>"
            "{\"name\": N, \"arguments\": {}}</tool_call>\n{% endif -%}\n"
            "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
            "<|im_end|>\n{% endfor %}<|im_start|>assistant\n");
    const char *text = "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"tools\":["
                       "{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{"
                       "\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},"
                       "\"required\":[\"a\"]}}}],\"tool_choice\":\"required\","
                       "\"parallel_tool_calls\":false,\"max_tokens\":200}";
    json_t *resp = NULL;
    int status = post(f.port, "/v1/chat/completions", text, &resp);
    cr_assert_eq(status, 200, "%s -> %s", text, json_dumps(resp, 0));
    json_t *msg = json_object_get(json_array_get(json_object_get(resp, "choices"), 0), "message");
    json_t *call = json_array_get(json_object_get(msg, "tool_calls"), 0);
    const char *name =
        json_string_value(json_object_get(json_object_get(call, "function"), "name"));
    cr_expect(name && !strcmp(name, "f"), "%s", json_dumps(resp, 0));
    json_decref(resp);
    finish_temp_template(&f, path);
}

/* A template that reads tools but writes calls in no syntax of the table
 * (src/server/tools/tools_table.c): refused, not misread. */
Test(chat_jinja, tools_for_a_template_whose_call_syntax_is_not_parsed_are_a_400, .timeout = 60) {
    REQUIRE_SHARED("models/stories260K.gguf");
    server_fixture f;
    char *path = start_with_temp_template(
        &f, "{%- if tools %}Call with @@CALL name args@@: {{ tools|tojson }}\n{% endif -%}"
            "{%- for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}");
    json_t *corpus = corpus_load(), *resp = NULL;
    json_t *body =
        json_deep_copy(json_object_get(json_object_get(corpus, "conversations"), "tools"));
    char *text = json_dumps(body, 0);
    cr_expect_eq(post(f.port, "/v1/chat/completions", text, &resp), 400);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(resp, "error"), "param")),
                     "tools");
    free(text);
    json_decref(body);
    json_decref(resp);
    json_decref(corpus);
    finish_temp_template(&f, path);
}

Test(chat_jinja, a_file_with_no_template_gets_chatml_and_a_warning, .timeout = 60) {
    REQUIRE_SHARED("models/stories260K.gguf");
    server_fixture f;
    server_config c;
    fixture_defaults(&c, &f);
    FILE *log = tmpfile();
    c.log = log;
    fixture_start(&f, &c, true);
    json_t *resp = NULL;
    cr_assert_eq(post(f.port, "/apply-template",
                      "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}", &resp),
                 200);
    cr_expect_str_eq(json_string_value(json_object_get(resp, "prompt")),
                     "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    json_decref(resp);
    fixture_finish(&f);
    char text[4096] = {0};
    rewind(log);
    size_t n = fread(text, 1, sizeof text - 1, log);
    text[n] = 0;
    fclose(log);
    cr_expect(strstr(text, "has no chat template") && strstr(text, "ChatML"), "%s", text);
}

Test(chat_jinja, a_template_that_does_not_compile_stops_the_server_naming_it, .timeout = 60) {
    REQUIRE_SHARED("models/stories260K.gguf");
    char *path = test_temp_file("{{ bos_token }}\n{% include 'other.jinja' %}\n");
    server_fixture f;
    server_config c;
    fixture_defaults(&c, &f);
    c.chat_template_file = path;
    tps_err err = {{0}};
    cr_assert_eq(server_create(&f.s, &c, &err), 0, "%s", err.msg);
    cr_assert_neq(server_load(f.s, &err), 0);
    cr_expect(strstr(err.msg, "include") && strstr(err.msg, "line 2"), "%s", err.msg);
    server_free(f.s);
    fclose(f.log);
    free(f.model);
    unlink(path);
    free(path);
}
