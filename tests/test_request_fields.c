/* Each request field tps used to drop without a word, sent to a real
 * `tps serve` on 127.0.0.1 (stories260K) and checked to act as its peer
 * defines it: n_predict bounds the length (llama.cpp), stop_token_ids stop
 * at that id, min_tokens holds off an early stop, include_stop_str_in_output
 * keeps the stop text, skip_special_tokens false shows a control token's
 * text, structured_outputs.choice / guided_choice return one choice,
 * response_format json_object with a schema validates (Python's
 * jsonschema, not our grammar code), typical_p and min_p keep the sets
 * computed here from the model's own logprobs, repetition_penalty acts;
 * unknown fields are a 400 naming them; the seed: two unseeded requests
 * differ, a seeded one replays, and timings.seed replays an unseeded one.
 * docs/api.md lists every field of the allow-list. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/api/openai.h"
#include "support/oai_client.h"
#include "support/server_fixture.h"
#include "support/test_support.h"

#define MODEL  "models/stories260K.gguf"
#define PROMPT "\"prompt\":\"Once upon a time\""

static server_fixture F;

static int start(void) {
    fixture_serve(&F);
    return F.port;
}

/* A 200 answer to body on path (asserted). */
static void ok(const char *path, const char *body, oai_answer *a) {
    long st = oai_post(F.port, path, body, a);
    cr_assert_eq(st, 200, "%s -> %ld %s", body, st, a->body);
}

/* body on path is a 400 naming param, with this code (NULL: any). */
static void refused(const char *path, const char *body, const char *param, const char *code) {
    oai_answer a;
    long st = oai_post(F.port, path, body, &a);
    cr_assert_eq(st, 400, "%s -> %ld %s", body, st, a.body);
    cr_assert_str_eq(oai_error_param(&a), param);
    if (code) cr_assert_str_eq(oai_error_code(&a), code);
    oai_answer_free(&a);
}

static long usage_of(const oai_answer *a, const char *key) {
    return (long)json_integer_value(json_object_get(a->usage, key));
}

/* ---------------------------------------------------------------------------
 * Lengths and stops
 * ------------------------------------------------------------------------- */

Test(fields, n_predict_bounds_the_length_like_max_tokens, .timeout = 60) {
    REQUIRE_SHARED(MODEL);
    start();
    oai_answer a;
    ok("/v1/completions", "{" PROMPT ",\"n_predict\":50,\"ignore_eos\":true,\"temperature\":0}",
       &a);
    cr_assert_eq(usage_of(&a, "completion_tokens"), 50, "%s", a.body);
    cr_assert_str_eq(a.choice[0].finish, "length");
    oai_answer_free(&a);
    ok("/v1/completions", "{" PROMPT ",\"ignore_eos\":true}", &a); /* OpenAI's default: 16 */
    cr_assert_eq(usage_of(&a, "completion_tokens"), 16);
    oai_answer_free(&a);
    refused("/v1/completions", "{" PROMPT ",\"n_predict\":5,\"max_tokens\":6}", "n_predict", NULL);
    fixture_finish(&F);
}

/* PROMPT's first 24 greedy tokens (streamed, so their ids come too) and
 * their text. */
typedef struct greedy24 {
    int32_t ids[24];
    char text[512];
} greedy24;

static void greedy24_of(greedy24 *g) {
    oai_answer a;
    ok("/v1/completions",
       "{" PROMPT ",\"max_tokens\":24,\"ignore_eos\":true,\"temperature\":0,\"stream\":true}", &a);
    cr_assert_eq(a.choice[0].n_ids, 24);
    memcpy(g->ids, a.choice[0].ids, sizeof g->ids);
    snprintf(g->text, sizeof g->text, "%s", a.choice[0].content);
    oai_answer_free(&a);
}

/* The first position k >= 3 whose token is new in the output. */
static size_t first_new(const int32_t *ids, size_t n) {
    for (size_t k = 3; k < n; k++) {
        bool seen = false;
        for (size_t i = 0; i < k; i++)
            seen |= ids[i] == ids[k];
        if (!seen) return k;
    }
    cr_assert_fail("no new token in the greedy output");
    return 0;
}

Test(fields, stop_token_ids_stop_at_that_id_and_min_tokens_holds_it_off, .timeout = 60) {
    REQUIRE_SHARED(MODEL);
    start();
    greedy24 g;
    greedy24_of(&g);
    size_t k = first_new(g.ids, 24);
    oai_answer a;
    char body[256];
    snprintf(body, sizeof body,
             "{" PROMPT ",\"max_tokens\":24,\"temperature\":0,\"stream\":true,"
             "\"stop_token_ids\":[%d]}",
             g.ids[k]);
    ok("/v1/completions", body, &a);
    cr_assert_eq(a.choice[0].n_ids, k, "stopped at token %zu (id %d): %s", k, g.ids[k], a.body);
    cr_assert_str_eq(a.choice[0].finish, "stop");
    for (size_t i = 0; i < k; i++)
        cr_assert_eq(a.choice[0].ids[i], g.ids[i]);
    oai_answer_free(&a);
    /* min_tokens: the id is masked until k + 3 tokens are out */
    snprintf(body, sizeof body,
             "{" PROMPT ",\"max_tokens\":24,\"temperature\":0,\"stream\":true,"
             "\"stop_token_ids\":[%d],\"min_tokens\":%zu}",
             g.ids[k], k + 3);
    ok("/v1/completions", body, &a);
    cr_assert_geq(a.choice[0].n_ids, k + 3, "%s", a.body);
    for (size_t i = 0; i < k + 3 && i < a.choice[0].n_ids; i++)
        cr_assert_neq(a.choice[0].ids[i], g.ids[k], "the stop id came at %zu < min_tokens", i);
    oai_answer_free(&a);
    /* out of the vocabulary: a 400 naming the field */
    refused("/v1/completions", "{" PROMPT ",\"stop_token_ids\":[99999]}", "stop_token_ids", NULL);
    fixture_finish(&F);
}

Test(fields, include_stop_str_keeps_it_and_min_tokens_lets_an_early_one_through, .timeout = 60) {
    REQUIRE_SHARED(MODEL);
    start();
    greedy24 g;
    greedy24_of(&g);
    /* the stop string: 3 characters from the 6th on (unique in the text) */
    char stop[4] = {0};
    size_t at = 5;
    for (; at + 3 < strlen(g.text); at++) {
        memcpy(stop, g.text + at, 3);
        if (strstr(g.text, stop) == g.text + at && !strchr(stop, '"') && !strchr(stop, '\\')) break;
    }
    cr_assert_lt(at + 3, strlen(g.text), "no unique 3-byte stop string in '%s'", g.text);
    char body[256];
    oai_answer a;
    for (int include = 0; include < 2; include++) {
        snprintf(body, sizeof body,
                 "{" PROMPT ",\"max_tokens\":24,\"temperature\":0,\"stop\":\"%s\","
                 "\"include_stop_str_in_output\":%s}",
                 stop, include ? "true" : "false");
        ok("/v1/completions", body, &a);
        size_t want = at + (include ? 3 : 0);
        cr_assert_eq(strlen(a.choice[0].content), want, "'%s' (stop '%s')", a.choice[0].content,
                     stop);
        cr_assert_eq(strncmp(a.choice[0].content, g.text, want), 0);
        cr_assert_str_eq(a.choice[0].finish, "stop");
        oai_answer_free(&a);
    }
    /* min_tokens 24: the stop string is not taken before 24 tokens */
    snprintf(body, sizeof body,
             "{" PROMPT ",\"max_tokens\":24,\"temperature\":0,\"stop\":\"%s\","
             "\"min_tokens\":24,\"stream\":true}",
             stop);
    ok("/v1/completions", body, &a);
    cr_assert_eq(a.choice[0].n_ids, 24, "%s", a.body);
    cr_assert_str_eq(a.choice[0].content, g.text);
    oai_answer_free(&a);
    fixture_finish(&F);
}

/* <s> (id 1) is a control token: its text is omitted unless
 * skip_special_tokens is false (vLLM's default is to skip). */
Test(fields, skip_special_tokens_false_shows_a_control_tokens_text, .timeout = 60) {
    REQUIRE_SHARED(MODEL);
    start();
    oai_answer a;
    const char *base =
        "{" PROMPT ",\"max_tokens\":3,\"ignore_eos\":true,\"logit_bias\":{\"1\":100}";
    char body[256];
    snprintf(body, sizeof body, "%s}", base);
    ok("/v1/completions", body, &a);
    cr_assert_str_eq(a.choice[0].content, "");
    cr_assert_eq(usage_of(&a, "completion_tokens"), 3);
    oai_answer_free(&a);
    snprintf(body, sizeof body, "%s,\"skip_special_tokens\":false}", base);
    ok("/v1/completions", body, &a);
    cr_assert_str_eq(a.choice[0].content, "<s><s><s>");
    oai_answer_free(&a);
    fixture_finish(&F);
}

/* ---------------------------------------------------------------------------
 * Constrained output
 * ------------------------------------------------------------------------- */

Test(fields, structured_outputs_choice_and_guided_choice_return_one_choice, .timeout = 60) {
    REQUIRE_SHARED(MODEL);
    start();
    static const char *const forms[] = {"\"structured_outputs\":{\"choice\":%s}",
                                        "\"guided_choice\":%s"};
    const char *choices = "[\"red fox\",\"green\",\"blue\\\"sky\"]";
    for (size_t f = 0; f < 2; f++)
        for (int seed = 0; seed < 4; seed++) {
            char field[128], body[384];
            snprintf(field, sizeof field, forms[f], choices);
            snprintf(body, sizeof body,
                     "{\"messages\":[{\"role\":\"user\",\"content\":\"Pick a colour.\"}],"
                     "\"temperature\":1,\"seed\":%d,\"max_tokens\":20,%s}",
                     seed, field);
            oai_answer a;
            ok("/v1/chat/completions", body, &a);
            const char *c = a.choice[0].content;
            cr_assert(!strcmp(c, "red fox") || !strcmp(c, "green") || !strcmp(c, "blue\"sky"),
                      "'%s' is not a choice", c);
            cr_assert_str_eq(a.choice[0].finish, "stop");
            oai_answer_free(&a);
        }
    fixture_finish(&F);
}

/* Runs Python's jsonschema on out; skips when it is missing. */
static void validate_schema(const char *schema, const char *out) {
    char why[512] = "";
    int st = test_validate_output("python3", "schema", schema, out, why, sizeof why);
    if (st == 77) cr_skip_test("python3 with jsonschema is needed (scripts/install-deps.sh)");
    cr_assert(st == 0, "%s", why);
}

/* llama-server's response_format {"type": "json_object", "schema": ...}:
 * the schema applies, not just "any object". */
Test(fields, response_format_json_object_schema_is_obeyed, .timeout = 120) {
    REQUIRE_SHARED(MODEL);
    start();
    const char *schema = "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\","
                         "\"minimum\":3,\"maximum\":7},\"w\":{\"enum\":[\"a\",\"b\"]}},"
                         "\"required\":[\"n\",\"w\"],\"additionalProperties\":false}";
    for (int seed = 0; seed < 3; seed++) {
        char body[768];
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"JSON please.\"}],"
                 "\"temperature\":1,\"seed\":%d,\"max_tokens\":200,"
                 "\"response_format\":{\"type\":\"json_object\",\"schema\":%s}}",
                 seed, schema);
        oai_answer a;
        ok("/v1/chat/completions", body, &a);
        cr_assert_str_eq(a.choice[0].finish, "stop", "%s", a.body);
        validate_schema(schema, a.choice[0].content);
        oai_answer_free(&a);
    }
    fixture_finish(&F);
}

/* ---------------------------------------------------------------------------
 * Sampling: typical_p, min_p, repetition_penalty
 * ------------------------------------------------------------------------- */

/* Three first tokens of PROMPT of the most even raw logprobs (the
 * model's, before any sampling stage), most likely first: drawn at a high
 * temperature, which flattens the draw but not the logprobs reported; of
 * the distinct ones, the three adjacent in probability closest together. */
static void three_tokens(int32_t *out_id, double *out_lp) {
    int32_t id[16];
    double lp[16];
    oai_answer a;
    ok("/v1/completions",
       "{" PROMPT ",\"max_tokens\":1,\"temperature\":8,\"seed\":1,\"n\":16,\"stream\":true,"
       "\"logprobs\":0}",
       &a);
    size_t k = 0;
    for (const char *p = a.body; p && *p && k < 16;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        json_t *j = len > 6 && strncmp(p, "data: [", 7)
                        ? json_loadb(p + 6, len - 6, JSON_ALLOW_NUL, NULL)
                        : NULL;
        json_t *c = json_array_get(json_object_get(j, "choices"), 0);
        json_t *tid = json_array_get(json_object_get(c, "token_ids"), 0);
        json_t *tlp =
            json_array_get(json_object_get(json_object_get(c, "logprobs"), "token_logprobs"), 0);
        if (json_is_integer(tid) && json_is_number(tlp)) {
            bool seen = false;
            for (size_t i = 0; i < k; i++)
                seen |= id[i] == json_integer_value(tid);
            if (!seen) {
                id[k] = (int32_t)json_integer_value(tid);
                lp[k++] = json_number_value(tlp);
            }
        }
        json_decref(j);
        p = nl ? nl + 1 : NULL;
    }
    cr_assert_geq(k, 3, "fewer than 3 distinct tokens in 16 draws: %s", a.body);
    oai_answer_free(&a);
    for (size_t i = 0; i < k; i++) /* most likely first */
        for (size_t j = i + 1; j < k; j++)
            if (lp[j] > lp[i]) {
                double t = lp[i];
                lp[i] = lp[j];
                lp[j] = t;
                int32_t u = id[i];
                id[i] = id[j];
                id[j] = u;
            }
    size_t best = 0;
    for (size_t i = 1; i + 2 < k; i++)
        if (lp[i] - lp[i + 2] < lp[best] - lp[best + 2]) best = i;
    memcpy(out_id, id + best, 3 * sizeof *id);
    memcpy(out_lp, lp + best, 3 * sizeof *lp);
}

/* logit_bias banning all but the three: the first token's distribution is
 * theirs, renormalized (bias -100 is -inf). */
static void only_three(char *out, size_t cap, const int32_t *id) {
    size_t n = (size_t)snprintf(out, cap, "\"logit_bias\":{");
    for (int t = 0, first = 1; t < 512; t++) {
        if (t == id[0] || t == id[1] || t == id[2]) continue;
        n += (size_t)snprintf(out + n, cap - n, "%s\"%d\":-100", first ? "" : ",", t);
        first = 0;
    }
    snprintf(out + n, cap - n, "}");
}

/* The first tokens of 16 choices at temperature 1 with the given sampling
 * fields and only the three tokens allowed. */
static void sample16(const int32_t *id, const char *fields, int32_t *got) {
    static char bias[8192], body[9000];
    only_three(bias, sizeof bias, id);
    snprintf(body, sizeof body,
             "{" PROMPT ",\"max_tokens\":1,\"temperature\":1,\"seed\":11,\"n\":16,\"stream\":true,"
             "%s,%s}",
             bias, fields);
    oai_answer a;
    ok("/v1/completions", body, &a);
    cr_assert_eq(a.n_choices, 16);
    for (size_t i = 0; i < 16; i++) {
        cr_assert_eq(a.choice[i].n_ids, 1, "%s", a.body);
        got[i] = a.choice[i].ids[0];
    }
    oai_answer_free(&a);
}

/* typical_p (llama.cpp): the set computed here from the three tokens'
 * probabilities p: entropy H, order by |-ln p - H|, shortest prefix whose
 * mass exceeds typical_p. min_p: p >= min_p * p_max. */
Test(fields, typical_p_and_min_p_keep_the_sets_the_reference_computes, .timeout = 60) {
    REQUIRE_SHARED(MODEL);
    start();
    int32_t id[3];
    double lp[3], p[3], z = 0, h = 0;
    three_tokens(id, lp);
    for (int i = 0; i < 3; i++)
        z += exp(lp[i]);
    for (int i = 0; i < 3; i++) {
        p[i] = exp(lp[i]) / z;
        h -= p[i] * log(p[i]);
    }
    int typ = 0; /* the most typical token */
    for (int i = 1; i < 3; i++)
        if (fabs(-log(p[i]) - h) < fabs(-log(p[typ]) - h)) typ = i;
    int32_t got[16];
    char fields[64];
    snprintf(fields, sizeof fields, "\"typical_p\":%.6f", p[typ] * 0.5);
    sample16(id, fields, got);
    for (int i = 0; i < 16; i++)
        cr_assert_eq(got[i], id[typ], "choice %d drew %d; the typical set is {%d}", i, got[i],
                     id[typ]);
    /* min_p between the second and third ratio keeps the two most likely */
    double r1 = p[1] / p[0], r2 = p[2] / p[0];
    cr_assert(r1 >= r2 && r1 <= 1.0);
    snprintf(fields, sizeof fields, "\"min_p\":%.6f", (r1 + r2) / 2);
    sample16(id, fields, got);
    for (int i = 0; i < 16; i++)
        cr_assert(got[i] == id[0] || got[i] == id[1], "choice %d drew %d, below min_p", i, got[i]);
    /* with neither, the typical token alone is not what 16 draws give */
    sample16(id, "\"top_k\":0", got);
    bool other = false;
    for (int i = 0; i < 16; i++) {
        cr_assert(got[i] == id[0] || got[i] == id[1] || got[i] == id[2]);
        other |= got[i] != id[typ];
    }
    cr_assert(other, "without typical_p every draw was still the typical token");
    fixture_finish(&F);
}

/* Tokens that repeat one of the 64 before them. */
static size_t repeats(const int32_t *ids, size_t n) {
    size_t r = 0;
    for (size_t k = 1; k < n; k++)
        for (size_t i = k > 64 ? k - 64 : 0; i < k; i++)
            if (ids[i] == ids[k]) {
                r++;
                break;
            }
    return r;
}

Test(fields, repetition_penalty_cuts_repeats_in_greedy_output, .timeout = 60) {
    REQUIRE_SHARED(MODEL);
    start();
    size_t r[2];
    for (int k = 0; k < 2; k++) {
        char body[256];
        snprintf(body, sizeof body,
                 "{" PROMPT ",\"max_tokens\":64,\"temperature\":0,\"ignore_eos\":true,"
                 "\"stream\":true,\"repetition_penalty\":%s}",
                 k ? "10" : "1");
        oai_answer a;
        ok("/v1/completions", body, &a);
        cr_assert_eq(a.choice[0].n_ids, 64);
        r[k] = repeats(a.choice[0].ids, 64);
        oai_answer_free(&a);
    }
    cr_assert_lt(r[1], r[0], "repeats: %zu without the penalty, %zu with", r[0], r[1]);
    fixture_finish(&F);
}

/* ---------------------------------------------------------------------------
 * Seeds
 * ------------------------------------------------------------------------- */

Test(fields, unseeded_requests_differ_seeded_ones_replay_and_timings_name_the_seed, .timeout = 60) {
    REQUIRE_SHARED(MODEL);
    start();
    const char *unseeded = "{" PROMPT ",\"max_tokens\":24,\"temperature\":1,\"ignore_eos\":true}";
    oai_answer a, b;
    ok("/v1/completions", unseeded, &a);
    ok("/v1/completions", unseeded, &b);
    cr_assert_str_neq(a.choice[0].content, b.choice[0].content,
                      "two unseeded requests gave the same text");
    json_t *seed = json_object_get(a.timings, "seed");
    cr_assert(json_is_integer(seed), "%s", a.body);
    char body[256];
    snprintf(body, sizeof body,
             "{" PROMPT ",\"max_tokens\":24,\"temperature\":1,\"ignore_eos\":true,\"seed\":%lld}",
             (long long)json_integer_value(seed));
    oai_answer c;
    ok("/v1/completions", body, &c);
    cr_assert_str_eq(c.choice[0].content, a.choice[0].content, "timings.seed does not replay");
    cr_assert(json_equal(json_object_get(c.timings, "seed"), seed));
    oai_answer_free(&a);
    oai_answer_free(&b);
    oai_answer_free(&c);
    const char *seeded = "{" PROMPT ",\"max_tokens\":24,\"temperature\":1,\"seed\":-3,\"n\":2}";
    ok("/v1/completions", seeded, &a);
    ok("/v1/completions", seeded, &b);
    for (int i = 0; i < 2; i++)
        cr_assert_str_eq(a.choice[i].content, b.choice[i].content);
    cr_assert_eq(json_integer_value(json_object_get(a.timings, "seed")), -3);
    oai_answer_free(&a);
    oai_answer_free(&b);
    fixture_finish(&F);
}

/* ---------------------------------------------------------------------------
 * Unknown fields and the docs
 * ------------------------------------------------------------------------- */

Test(fields, unknown_and_unsupported_fields_are_a_400_naming_them, .timeout = 30) {
    REQUIRE_SHARED(MODEL);
    start();
    oai_answer a;
    refused("/v1/completions", "{" PROMPT ",\"foo_bar\":1}", "foo_bar", "unknown_parameter");
    refused("/v1/chat/completions",
            "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
            "\"verbosity\":\"low\"}",
            "verbosity", "unsupported_parameter");
    /* a thinking budget asks for a model that thinks; stories260K does not */
    refused("/v1/chat/completions",
            "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
            "\"thinking_token_budget\":8}",
            "thinking_token_budget", NULL);
    /* how thinking is returned asks nothing of a model that has none */
    ok("/v1/chat/completions",
       "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":2,"
       "\"reasoning_format\":\"none\",\"include_reasoning\":true}",
       &a);
    oai_answer_free(&a);
    fixture_finish(&F);
}

Test(fields, docs_api_md_lists_every_field_of_the_allow_list) {
    size_t len = 0;
    char *doc = read_file_all(TPS_SOURCE_DIR "/docs/api.md", &len);
    cr_assert_not_null(doc);
    size_t n;
    const oai_field *t = oai_fields(&n);
    for (size_t i = 0; i < n; i++) {
        char row[96];
        snprintf(row, sizeof row, "| `%s` |", t[i].name);
        cr_expect(strstr(doc, row), "docs/api.md has no table row for `%s`", t[i].name);
    }
    free(doc);
}
