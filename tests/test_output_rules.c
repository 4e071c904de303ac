/* Unit tests of the output options vLLM and llama-server users send, each
 * against a reference computed by hand (the numbers are in the comments):
 * typical_p (llama.cpp's locally typical sampling), min_tokens and
 * include_stop_str_in_output in the stop matcher, the <think> splitter fed
 * in every split of its text, the "prompt left a block open" rule on
 * Qwen3's real vocabulary, and the request parser's new fields and
 * allow-list. End-to-end checks are in test_request_fields.c and
 * test_reasoning.c. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sample/sampler.h"
#include "engine/sample/stop.h"
#include "engine/sample/think.h"
#include "model/gguf.h"
#include "model/tokenizer.h"
#include "server/api/openai.h"
#include "support/oai_refusal.h"
#include "support/test_support.h"

/* ---------------------------------------------------------------------------
 * typical_p
 * ------------------------------------------------------------------------- */

/* The survivors' ids, sorted, for logits l (n,) under p. */
static size_t survivor_ids(const sampler_params *p, const float *l, int32_t n, int32_t *ids) {
    sampler_vocab v = {.n_vocab = n, .n_ctx = 64};
    sampler *s = NULL;
    tps_err err = {{0}};
    cr_assert_eq(sampler_create(&s, p, &v, &err), 0, "%s", err.msg);
    float *row = malloc((size_t)n * sizeof *row);
    memcpy(row, l, (size_t)n * sizeof *row);
    const sampler_cand *c;
    size_t k = sampler_candidates(s, row, &c);
    for (size_t i = 0; i < k; i++)
        ids[i] = c[i].id;
    for (size_t i = 1; i < k; i++) /* insertion sort: tiny */
        for (size_t j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
            int32_t t = ids[j];
            ids[j] = ids[j - 1];
            ids[j - 1] = t;
        }
    free(row);
    sampler_free(s);
    return k;
}

/* logits {2, 1, 0, -1, -3}: p = {0.6411, 0.2359, 0.0868, 0.0319, 0.0043},
 * H = -sum p ln p = 0.9713, |-ln p - H| = {0.5268, 0.4732, 1.4732, 2.4732,
 * 4.4732}: the typical order is 1, 0, 2, 3, 4 with cumulative mass 0.2359,
 * 0.8770, 0.9638, 0.9957, 1. typical_p keeps the shortest prefix whose mass
 * exceeds it: token 1 alone (not the argmax) up to 0.2359. */
Test(typical_p, keeps_the_locally_typical_set_of_the_hand_computed_reference) {
    static const float l[5] = {2, 1, 0, -1, -3};
    static const struct {
        float typical_p;
        size_t n;
        int32_t ids[5];
    } cases[] = {{0.2f, 1, {1}},       {0.3f, 2, {0, 1}},        {0.87f, 2, {0, 1}},
                 {0.9f, 3, {0, 1, 2}}, {0.99f, 4, {0, 1, 2, 3}}, {1.0f, 5, {0, 1, 2, 3, 4}}};
    sampler_params p;
    sampler_params_default(&p);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        p.typical_p = cases[i].typical_p;
        int32_t ids[5];
        size_t n = survivor_ids(&p, l, 5, ids);
        cr_assert_eq(n, cases[i].n, "typical_p %g kept %zu", cases[i].typical_p, n);
        for (size_t k = 0; k < n; k++)
            cr_assert_eq(ids[k], cases[i].ids[k], "typical_p %g", cases[i].typical_p);
    }
    /* the temperature does not change the set: it reweights survivors only */
    p.typical_p = 0.2f;
    p.temperature = 3.0f;
    int32_t ids[5];
    cr_assert_eq(survivor_ids(&p, l, 5, ids), 1);
    cr_assert_eq(ids[0], 1);
}

/* After top_k 3 the candidates are {2, 1, 0}: p = {0.6652, 0.2447, 0.0900},
 * H = 0.8324, scores {0.4403, 0.5754, 1.5754}: order 0, 1, 2 with mass
 * 0.6652, 0.9100: typical_p 0.5 keeps {0}, 0.7 keeps {0, 1}. Then top_p and
 * min_p act on what typical_p kept, renormalized (llama.cpp's chain). */
Test(typical_p, runs_after_top_k_and_before_top_p_and_min_p) {
    static const float l[5] = {2, 1, 0, -1, -3};
    sampler_params p;
    sampler_params_default(&p);
    int32_t ids[5];
    p.top_k = 3;
    p.typical_p = 0.5f;
    cr_assert_eq(survivor_ids(&p, l, 5, ids), 1);
    cr_assert_eq(ids[0], 0);
    p.typical_p = 0.7f;
    cr_assert_eq(survivor_ids(&p, l, 5, ids), 2);
    /* {0, 1} renormalized: {0.7311, 0.2689}: top_p 0.7 keeps {0} */
    p.top_p = 0.7f;
    cr_assert_eq(survivor_ids(&p, l, 5, ids), 1);
    /* min_p 0.5 over {0, 1}: 0.2689 / 0.7311 = 0.37 < 0.5 keeps {0} */
    p.top_p = 1.0f;
    p.min_p = 0.5f;
    cr_assert_eq(survivor_ids(&p, l, 5, ids), 1);
    /* min_p's p_max is what typical_p kept: typical_p 0.2 keeps {1} alone
     * (top_k off), and min_p 0.9 cannot remove it */
    p.top_k = 0;
    p.typical_p = 0.2f;
    p.min_p = 0.9f;
    cr_assert_eq(survivor_ids(&p, l, 5, ids), 1);
    cr_assert_eq(ids[0], 1);
}

Test(typical_p, out_of_range_names_the_field) {
    sampler_params p;
    sampler_params_default(&p);
    const char *field = NULL;
    tps_err err = {{0}};
    p.typical_p = 0.0f;
    cr_assert_eq(sampler_params_validate(&p, &field, &err), TPS_EINVAL);
    cr_assert_str_eq(field, "typical_p");
    p.typical_p = 1.5f;
    cr_assert_eq(sampler_params_validate(&p, &field, &err), TPS_EINVAL);
}

/* ---------------------------------------------------------------------------
 * Stop matcher: include_stop_str_in_output, min_tokens
 * ------------------------------------------------------------------------- */

/* Feeds pieces; returns what was released, NUL-terminated. */
static void feed_all(stop_matcher *m, const char *const *pieces, size_t n, char *out,
                     bool *matched) {
    size_t len = 0;
    stop_emit em;
    *matched = false;
    for (size_t i = 0; i < n && !*matched; i++) {
        stop_feed(m, pieces[i], strlen(pieces[i]), &em);
        memcpy(out + len, em.head, em.head_len);
        len += em.head_len;
        memcpy(out + len, em.tail, em.tail_len);
        len += em.tail_len;
        *matched = em.matched;
    }
    if (!*matched) {
        stop_flush(m, &em);
        memcpy(out + len, em.head, em.head_len);
        len += em.head_len;
    }
    out[len] = 0;
}

/* m matches the one stop string s (asserted to initialise). */
static void one_stop(stop_matcher *m, const char *s) {
    tps_err err = {{0}};
    cr_assert_eq(stop_init(m, &s, 1, NULL, 0, 0, NULL, &err), 0, "%s", err.msg);
}

Test(stop, include_keeps_the_stop_string_and_cuts_after_it) {
    stop_matcher m;
    one_stop(&m, "END");
    stop_set_include(&m, true);
    const char *pieces[] = {"abc E", "N", "Dxyz", "more"};
    char out[64];
    bool matched;
    feed_all(&m, pieces, 4, out, &matched);
    cr_assert(matched);
    cr_assert_str_eq(out, "abc END");
    /* without it, the stop string is cut too (OpenAI's rule) */
    one_stop(&m, "END");
    feed_all(&m, pieces, 4, out, &matched);
    cr_assert_str_eq(out, "abc ");
}

/* min_tokens: a stop string that completes while the matcher is disarmed
 * is text; one that began then and completes once armed is caught. */
Test(stop, disarmed_matcher_lets_a_stop_string_through_and_holds_a_partial_one) {
    stop_matcher m;
    one_stop(&m, "ab");
    stop_set_armed(&m, false);
    stop_emit em;
    stop_feed(&m, "xab", 3, &em);
    cr_assert(!em.matched);
    cr_assert_eq(em.head_len + em.tail_len, 3, "all of 'xab' released");
    stop_feed(&m, "ya", 2, &em); /* "a" may begin "ab": held */
    cr_assert_eq(em.head_len + em.tail_len, 1);
    cr_assert_eq(stop_held(&m), 1);
    stop_set_armed(&m, true);
    stop_feed(&m, "bz", 2, &em);
    cr_assert(em.matched, "'a' + 'b' across the arming is a match");
    cr_assert_eq(em.head_len + em.tail_len, 0);
}

Test(stop, mask_ids_bans_stop_and_end_ids_only) {
    const int32_t ids[] = {3};
    const int32_t eog[] = {1, 6};
    stop_matcher m;
    tps_err err = {{0}};
    cr_assert_eq(stop_init(&m, NULL, 0, ids, 1, 8, NULL, &err), 0);
    float l[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    stop_mask_ids(&m, eog, 2, l);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(isinf(l[i]) && l[i] < 0, i == 1 || i == 3 || i == 6, "id %d", i);
}

/* ---------------------------------------------------------------------------
 * The <think> splitter
 * ------------------------------------------------------------------------- */

typedef struct parts {
    char r[256], c[256], m[256];
    size_t nr, nc, nm;
} parts;

static void sink(void *ctx, think_part part, const char *p, size_t n) {
    parts *o = ctx;
    char *dst = part == THINK_PART_REASONING ? o->r : part == THINK_PART_CONTENT ? o->c : o->m;
    size_t *len = part == THINK_PART_REASONING ? &o->nr
                  : part == THINK_PART_CONTENT ? &o->nc
                                               : &o->nm;
    cr_assert_gt(n, 0);
    cr_assert_lt(*len + n, 256);
    memcpy(dst + *len, p, n);
    *len += n;
    dst[*len] = 0;
}

/* Splits text fed in pieces of `step` bytes (0: whole). */
static parts split(think_state start, const char *text, size_t step) {
    parts o = {0};
    think_split t;
    think_init(&t, start);
    size_t n = strlen(text);
    if (!step) step = n ? n : 1;
    for (size_t i = 0; i < n; i += step)
        think_feed(&t, text + i, i + step <= n ? step : n - i, sink, &o);
    think_flush(&t, sink, &o);
    return o;
}

static void expect_split(think_state start, const char *text, const char *r, const char *c,
                         const char *m) {
    for (size_t step = 0; step <= 9; step++) { /* whole, byte by byte, and every size between */
        parts o = split(start, text, step);
        cr_assert_str_eq(o.r, r, "reasoning of '%s' in pieces of %zu", text, step);
        cr_assert_str_eq(o.c, c, "content of '%s' in pieces of %zu", text, step);
        cr_assert_str_eq(o.m, m, "markers of '%s' in pieces of %zu", text, step);
    }
}

Test(think, a_block_at_the_start_is_split_off_whatever_the_pieces) {
    expect_split(THINK_START, "<think>hmm, 2 < 3</think>\n\nYes.", "hmm, 2 < 3", "\n\nYes.",
                 "<think></think>");
    /* whitespace before the block goes with its marker */
    expect_split(THINK_START, "\n <think>a</think>b", "a", "b", "\n <think></think>");
    /* "</" and "</thin" inside the thinking are thinking */
    expect_split(THINK_START, "<think>x</y </thin</think>z", "x</y </thin", "z", "<think></think>");
    /* after the block, "<think>" is answer text */
    expect_split(THINK_START, "<think></think><think>q", "", "<think>q", "<think></think>");
}

Test(think, no_block_at_the_start_means_all_answer) {
    expect_split(THINK_START, "Hello <think>x</think>", "", "Hello <think>x</think>", "");
    expect_split(THINK_START, "<thinking>", "", "<thinking>", "");
    expect_split(THINK_START, "<th", "", "<th", ""); /* ended early: what it was */
    expect_split(THINK_OFF, "<think>a</think>b", "", "<think>a</think>b", "");
}

Test(think, a_block_the_prompt_opened_starts_inside) {
    expect_split(THINK_IN, "\nreason</think>answer", "\nreason", "answer", "</think>");
    expect_split(THINK_IN, "never closed </thi", "never closed </thi", "", "");
}

/* Where the prompt leaves the output, with Qwen3's real vocabulary, where
 * <think> and </think> are added tokens and the turn markers control
 * tokens; and the same read from the text for a vocabulary without them. */
Test(think, the_prompts_last_special_token_says_where_the_output_starts) {
    REQUIRE_SHARED("models/vocab/ggml-vocab-qwen3.gguf");
    char *path = shared_path("models/vocab/ggml-vocab-qwen3.gguf");
    gguf_file *f;
    tokenizer *tok;
    tps_err err = {{0}};
    cr_assert_eq(gguf_open(&f, path, &err), 0, "%s", err.msg);
    cr_assert_eq(tokenizer_load(&tok, f, &err), 0, "%s", err.msg);
    int32_t open = tokenizer_find(tok, THINK_OPEN, strlen(THINK_OPEN));
    int32_t close = tokenizer_find(tok, THINK_CLOSE, strlen(THINK_CLOSE));
    cr_assert_geq(open, 0);
    cr_assert_geq(close, 0);
    static const struct {
        const char *prompt;
        think_state st;
    } cases[] = {
        /* DeepSeek-R1 distills' generation prompt */
        {"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n", THINK_IN},
        /* a prefilled start of thinking is still inside */
        {"<|im_start|>assistant\n<think>\nLet me see", THINK_IN},
        /* Qwen3 with enable_thinking false closes an empty block: no thinking */
        {"<|im_start|>assistant\n<think>\n\n</think>\n\n", THINK_OFF},
        {"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", THINK_START},
        /* a user who writes <think> is followed by the turn's markers */
        {"<|im_start|>user\nwhat is <think>?<|im_end|>\n<|im_start|>assistant\n", THINK_START},
        /* an earlier turn's closed block is followed by them too */
        {"<|im_start|>assistant\n<think>a</think>b<|im_end|>\n<|im_start|>assistant\n",
         THINK_START},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int32_t *ids = NULL;
        size_t n = 0;
        cr_assert_eq(tokenizer_encode_alloc(tok, cases[i].prompt, strlen(cases[i].prompt),
                                            TOK_ENCODE_PARSE_SPECIAL, &ids, &n, &err),
                     0);
        cr_assert_eq(think_prompt_state(tok, ids, n, open, close), cases[i].st, "%s",
                     cases[i].prompt);
        free(ids);
    }
    cr_assert_eq(think_prompt_state(tok, NULL, 0, open, close), THINK_START);
    cr_assert_eq(think_prompt_state(tok, NULL, 0, -1, close), THINK_START);
    tokenizer_free(tok);
    gguf_close(f);
    free(path);
    /* from the text: only the end counts */
    cr_assert_eq(think_text_state("<｜Assistant｜><think>\n", strlen("<｜Assistant｜><think>\n")),
                 THINK_IN);
    cr_assert_eq(think_text_state("x<think>\n</think>\n\n", strlen("x<think>\n</think>\n\n")),
                 THINK_OFF);
    cr_assert_eq(think_text_state("<think>a", 8), THINK_START);
    cr_assert_eq(think_text_state("", 0), THINK_START);
}

/* ---------------------------------------------------------------------------
 * The request parser: new fields and the allow-list
 * ------------------------------------------------------------------------- */

#define CHAT(fields) "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]," fields "}"

Test(openai, length_and_output_fields_reach_the_request) {
    oai_request r;
    oai_parse_ok(&r, OAI_COMPLETION,
                 "{\"prompt\":\"x\",\"n_predict\":50,\"min_tokens\":3,"
                 "\"stop_token_ids\":[7,9],\"include_stop_str_in_output\":true,"
                 "\"skip_special_tokens\":false,\"typical_p\":0.5,\"repeat_last_n\":-1,"
                 "\"seed\":-5}");
    cr_assert_eq(r.max_tokens, 50);
    cr_assert_eq(r.min_tokens, 3);
    cr_assert_eq(r.n_stop_ids, 2);
    cr_assert_eq(r.stop_ids[1], 9);
    cr_assert(r.include_stop_str && !r.skip_special && r.seeded);
    cr_assert_float_eq(r.sampling.typical_p, 0.5f, 1e-7);
    cr_assert_eq(r.sampling.penalty_last_n, -1);
    cr_assert_eq((int64_t)r.sampling.seed, -5);
    oai_request_free(&r);
    /* defaults: special tokens skipped, no seed, no budget */
    oai_parse_ok(&r, OAI_COMPLETION, "{\"prompt\":\"x\",\"n_predict\":-1}");
    cr_assert(r.skip_special && !r.seeded && r.think_budget == -1 && r.max_tokens == 0);
    oai_request_free(&r);
    /* two names of one number must agree */
    oai_parse_ok(&r, OAI_COMPLETION, "{\"prompt\":\"x\",\"max_tokens\":5,\"n_predict\":5}");
    oai_request_free(&r);
    oai_expect_refused_code(OAI_COMPLETION, "{\"prompt\":\"x\",\"max_tokens\":5,\"n_predict\":6}",
                            "n_predict", "invalid_value");
    oai_expect_refused_code(OAI_COMPLETION,
                            "{\"prompt\":\"x\",\"repetition_penalty\":1.1,\"repeat_penalty\":1.2}",
                            "repeat_penalty", "invalid_value");
    oai_expect_refused_code(OAI_COMPLETION, "{\"prompt\":\"x\",\"max_tokens\":5,\"min_tokens\":6}",
                            "min_tokens", "invalid_value");
    oai_expect_refused_code(OAI_COMPLETION, "{\"prompt\":\"x\",\"stop_token_ids\":[-1]}",
                            "stop_token_ids", NULL);
    oai_expect_refused_code(OAI_COMPLETION, "{\"prompt\":\"x\",\"typical_p\":0}", "typical_p",
                            NULL);
    oai_expect_refused_code(OAI_COMPLETION,
                            "{\"prompt\":\"x\",\"skip_special_tokens\":false,"
                            "\"spaces_between_special_tokens\":true}",
                            "spaces_between_special_tokens", "unsupported_parameter");
}

Test(openai, structured_outputs_and_guided_choice_compile_to_one_grammar) {
    oai_request r;
    oai_error e;
    oai_parse_ok(&r, OAI_CHAT,
                 CHAT("\"structured_outputs\":{\"choice\":[\"yes\",\"n\\\"o\\\\\"]}"));
    cr_assert_str_eq(r.grammar, "root ::= \"yes\" | \"n\\\"o\\\\\"");
    oai_request_free(&r);
    oai_parse_ok(&r, OAI_COMPLETION, "{\"prompt\":\"x\",\"guided_choice\":[\"a\\nb\"]}");
    cr_assert_str_eq(r.grammar, "root ::= \"a\\x0ab\"");
    oai_request_free(&r);
    const char *ok[] = {CHAT("\"structured_outputs\":{\"regex\":\"a+\"}"),
                        CHAT("\"structured_outputs\":{\"json\":{\"type\":\"object\"}}"),
                        CHAT("\"structured_outputs\":{\"grammar\":\"root ::= \\\"a\\\"\"}"),
                        CHAT("\"structured_outputs\":{\"json_object\":true}"),
                        CHAT("\"response_format\":{\"type\":\"json_object\",\"schema\":{\"type\":"
                             "\"object\",\"required\":[\"a\"],\"properties\":{\"a\":{\"type\":"
                             "\"integer\"}}}}")};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        cr_assert_eq(test_oai_parse(&r, OAI_CHAT, ok[i], &e), 0, "%s: %s", ok[i], e.message);
        cr_assert_not_null(r.grammar, "%s", ok[i]);
        oai_request_free(&r);
    }
    /* json_object's schema is the schema's grammar, not any object's */
    oai_parse_ok(&r, OAI_CHAT, ok[4]);
    cr_assert(strstr(r.grammar, "\"\\\"a\\\"\"") || strstr(r.grammar, "a"), "%s", r.grammar);
    char *with_schema = strdup(r.grammar);
    oai_request_free(&r);
    cr_assert_eq(
        test_oai_parse(&r, OAI_CHAT, CHAT("\"response_format\":{\"type\":\"json_object\"}"), &e),
        0);
    cr_assert_str_neq(with_schema, r.grammar);
    free(with_schema);
    oai_request_free(&r);
    oai_expect_refused_code(OAI_CHAT,
                            CHAT("\"structured_outputs\":{\"choice\":[\"a\"],\"regex\":\"b\"}"),
                            "structured_outputs.regex", "invalid_value");
    oai_expect_refused_code(OAI_CHAT, CHAT("\"guided_choice\":[\"a\"],\"regex\":\"b\""),
                            "guided_choice", NULL);
    oai_expect_refused_code(OAI_CHAT, CHAT("\"structured_outputs\":{\"choice\":[]}"),
                            "structured_outputs.choice", NULL);
    oai_expect_refused_code(OAI_CHAT, CHAT("\"structured_outputs\":{\"structural_tag\":\"x\"}"),
                            "structured_outputs.structural_tag", "unsupported_parameter");
}

Test(openai, reasoning_fields) {
    oai_request r;
    oai_error e;
    static const struct {
        const char *fields;
        oai_reasoning want;
        int32_t budget;
    } cases[] = {
        {"\"reasoning_format\":\"none\"", OAI_REASONING_NONE, -1},
        {"\"reasoning_format\":\"deepseek\"", OAI_REASONING_SPLIT, -1},
        {"\"reasoning_format\":\"auto\",\"thinking_token_budget\":8", OAI_REASONING_SPLIT, 8},
        {"\"include_reasoning\":false,\"thinking_budget_tokens\":0", OAI_REASONING_HIDDEN, 0},
    };
    char body[256];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s}",
                 cases[i].fields);
        cr_assert_eq(test_oai_parse(&r, OAI_CHAT, body, &e), 0, "%s: %s", body, e.message);
        cr_assert_eq(r.reasoning, cases[i].want, "%s", body);
        cr_assert_eq(r.think_budget, cases[i].budget, "%s", body);
        oai_request_free(&r);
    }
    oai_expect_refused_code(OAI_CHAT, CHAT("\"reasoning_format\":\"deepseek-legacy\""),
                            "reasoning_format", "unsupported_parameter");
    oai_expect_refused_code(OAI_CHAT, CHAT("\"reasoning_format\":\"x\""), "reasoning_format", NULL);
    oai_expect_refused_code(OAI_CHAT,
                            CHAT("\"thinking_token_budget\":4,\"thinking_budget_tokens\":5"),
                            "thinking_budget_tokens", NULL);
    oai_expect_refused_code(OAI_COMPLETION, "{\"prompt\":\"x\",\"reasoning_format\":\"none\"}",
                            "reasoning_format", "unsupported_parameter");
}

/* A value that asks for something, for any field of the table. */
static const char *asking(const oai_field *f) {
    if (!strcmp(f->name, "modalities")) return "[\"text\",\"audio\"]";
    if (!strcmp(f->name, "function_call") || !strcmp(f->name, "tool_choice")) return "\"auto\"";
    if (!strcmp(f->name, "min_keep")) return "5";
    return "7";
}

/* Every row of the allow-list: a refused field asking for something is a
 * 400 unsupported_parameter naming it; asking for nothing (null) it is
 * accepted; a label is accepted with any value; a field the table lacks is
 * a 400 unknown_parameter naming it, at the top level and in a message. */
Test(openai, every_field_of_the_table_is_honoured_labelled_or_refused_by_name) {
    size_t n;
    const oai_field *t = oai_fields(&n);
    cr_assert_gt(n, 100);
    char body[256];
    oai_request r;
    oai_error e;
    for (size_t i = 0; i < n; i++) {
        for (int k = OAI_COMPLETION; k <= OAI_CHAT; k++) {
            const char *base = k == OAI_CHAT
                                   ? "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]"
                                   : "{\"prompt\":\"x\"";
            if (!strcmp(t[i].name, "messages") || !strcmp(t[i].name, "prompt")) continue;
            snprintf(body, sizeof body, "%s,\"%s\":null}", base, t[i].name);
            cr_assert_eq(test_oai_parse(&r, (oai_kind)k, body, &e), 0, "%s: %s", body, e.message);
            oai_request_free(&r);
            if (t[i].kind == OAI_FIELD_REFUSED && (t[i].endpoints & k)) {
                snprintf(body, sizeof body, "%s,\"%s\":%s}", base, t[i].name, asking(&t[i]));
                oai_expect_refused_code((oai_kind)k, body, t[i].name, "unsupported_parameter");
            }
            if (t[i].kind == OAI_FIELD_LABEL) {
                snprintf(body, sizeof body, "%s,\"%s\":\"label\"}", base, t[i].name);
                cr_assert_eq(test_oai_parse(&r, (oai_kind)k, body, &e), 0, "%s: %s", body,
                             e.message);
                oai_request_free(&r);
            }
        }
        cr_assert(t[i].peer && t[i].peer[0], "%s has no peer", t[i].name);
        cr_assert(t[i].kind != OAI_FIELD_REFUSED || t[i].why, "%s: no reason", t[i].name);
    }
    oai_expect_refused_code(OAI_COMPLETION, "{\"prompt\":\"x\",\"foo_bar\":1}", "foo_bar",
                            "unknown_parameter");
    oai_expect_refused_code(OAI_CHAT, CHAT("\"foo_bar\":null"), "foo_bar", "unknown_parameter");
    oai_expect_refused_code(OAI_CHAT,
                            "{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"foo\":1}]}",
                            "messages[0].foo", "unknown_parameter");
    oai_expect_refused_code(
        OAI_CHAT, "{\"messages\":[{\"role\":\"assistant\",\"content\":\"x\",\"refusal\":\"no\"}]}",
        "messages[0].refusal", "unsupported_parameter");
    oai_expect_refused_code(OAI_CHAT, CHAT("\"stream_options\":{\"continuous_usage_stats\":true}"),
                            "stream_options.continuous_usage_stats", "unsupported_parameter");
    /* what SDKs send, and an answer echoed back, are accepted */
    cr_assert_eq(
        test_oai_parse(
            &r, OAI_CHAT,
            "{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"name\":\"u\"},"
            "{\"role\":\"assistant\",\"content\":\"y\",\"refusal\":null,\"reasoning_content\":"
            "\"r\",\"tool_calls\":[]},{\"role\":\"tool\",\"content\":\"z\",\"tool_call_id\":"
            "\"c\"}],\"stream\":true,\"stream_options\":{\"include_usage\":true},"
            "\"parallel_tool_calls\":true,\"user\":\"u\",\"store\":false,\"metadata\":{}}",
            &e),
        0, "%s", e.message);
    oai_request_free(&r);
}
