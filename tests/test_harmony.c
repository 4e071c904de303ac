/* The harmony splitter (server/harmony.h) on answers in gpt-oss's format
 * as OpenAI's harmony documentation and llama.cpp's and vLLM's gpt-oss
 * parsers describe them: analysis -> reasoning, final and commentary
 * preambles -> content, messages to functions.* -> calls (header and body),
 * every marker held back, so the same split comes out fed whole or one
 * byte at a time (a marker spelled in several tokens). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "server/tools/harmony.h"

typedef struct parts {
    char p[4][1024];
    size_t n[4];
} parts;

static void sink(void *ctx, harmony_part part, const char *p, size_t n) {
    parts *o = ctx;
    cr_assert_lt(o->n[part] + n, sizeof o->p[part]);
    memcpy(o->p[part] + o->n[part], p, n);
    o->n[part] += n;
    o->p[part][o->n[part]] = 0;
}

/* Splits text fed in pieces of step bytes (0: whole). */
static void split(const char *text, size_t step, parts *o, harmony_split *h) {
    memset(o, 0, sizeof *o);
    harmony_init(h);
    size_t n = strlen(text);
    if (!step) step = n ? n : 1;
    for (size_t i = 0; i < n; i += step)
        harmony_feed(h, text + i, i + step <= n ? step : n - i, sink, o);
    harmony_flush(h, sink, o);
}

/* The same split whole and byte by byte; checks the reasoning, content and
 * call parts. */
static void expect(const char *text, const char *reasoning, const char *content, const char *call) {
    parts whole, bytes;
    harmony_split h;
    split(text, 1, &bytes, &h);
    split(text, 0, &whole, &h);
    for (int p = 0; p < 4; p++)
        cr_assert_str_eq(whole.p[p], bytes.p[p], "part %d of %s", p, text);
    cr_assert_str_eq(whole.p[HARMONY_REASONING], reasoning, "%s", text);
    cr_assert_str_eq(whole.p[HARMONY_CONTENT], content, "%s", text);
    cr_assert_str_eq(whole.p[HARMONY_CALL], call, "%s", text);
}

Test(harmony, analysis_is_reasoning_and_final_is_content) {
    expect("<|channel|>analysis<|message|>User says hi. Reply.<|end|><|start|>assistant"
           "<|channel|>final<|message|>Hello! <b>Hi</b>",
           "User says hi. Reply.", "Hello! <b>Hi</b>", "");
    /* no analysis: the final channel straight away */
    expect("<|channel|>final<|message|>Just this.", "", "Just this.", "");
    /* <|return|> when rendered (it ends the answer) is a marker */
    expect("<|channel|>final<|message|>Done.<|return|>", "", "Done.", "");
}

Test(harmony, a_call_to_functions_is_handed_on_whole) {
    const char *hdr = "<|start|>assistant<|channel|>commentary to=functions.get_weather "
                      "<|constrain|>json<|message|>";
    char text[512], call[512];
    snprintf(text, sizeof text,
             "<|channel|>analysis<|message|>Need the weather.<|end|>%s{\"city\":\"Oslo\"}", hdr);
    snprintf(call, sizeof call, "%s{\"city\":\"Oslo\"}", hdr);
    expect(text, "Need the weather.", "", call);
    /* the recipient in the role part, as the template writes earlier calls */
    expect(" to=functions.f<|channel|>commentary json<|message|>{}<|call|>", "", "",
           " to=functions.f<|channel|>commentary json<|message|>{}");
    /* a preamble on commentary is content; a built-in tool's call is dropped */
    expect("<|channel|>commentary<|message|>Let me look.<|end|><|start|>assistant"
           "<|channel|>commentary to=browser.search <|constrain|>json<|message|>{\"q\":1}",
           "", "Let me look.", "");
}

Test(harmony, markers_never_reach_the_text) {
    parts o;
    harmony_split h;
    /* a header cut off by the length limit is not text */
    split("<|channel|>analysis<|message|>so<|end|><|start|>assistant<|chan", 1, &o, &h);
    cr_assert_str_eq(o.p[HARMONY_REASONING], "so");
    cr_assert_str_eq(o.p[HARMONY_CONTENT], "");
    cr_assert(h.analysed);
    /* a body that skips <|end|>: <|start|> still opens the next header */
    expect("<|channel|>analysis<|message|>a<b<|start|>assistant<|channel|>final<|message|>c", "a<b",
           "c", "");
    /* '<' and "<|" inside a body are text when no marker follows */
    expect("<|channel|>final<|message|>1 < 2 and <|x|> stay", "", "1 < 2 and <|x|> stay", "");
}

Test(harmony, an_answer_not_in_the_format_is_content) {
    expect("{\"answer\": 42}", "", "{\"answer\": 42}", "");
    expect("<b>bold</b>", "", "<b>bold</b>", "");
    expect("", "", "", "");
    /* a start that looked like a marker but was not */
    expect("<|chat|> hi", "", "<|chat|> hi", "");
}
