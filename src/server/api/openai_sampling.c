/* Sampling and the output's shape: n, the length fields (max_tokens,
 * max_completion_tokens, llama.cpp's n_predict, vLLM's min_tokens), the
 * sampling parameters (checked by sampler_params_validate), logit_bias,
 * logprobs, stop strings and stop_token_ids, and vLLM's output options
 * (include_stop_str_in_output, skip_special_tokens).
 *
 * Not here: which fields exist (openai_fields.c), the vocabulary bounds of
 * token ids (the server checks them against the model). */
#include "server/api/openai_internal.h"

#include "engine/sample/stop.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------
 * Choices and lengths
 * ------------------------------------------------------------------------- */

/* n: choices per request. The upper bound here only keeps the count in a
 * uint32_t; the server refuses more than its --max-n with its own 400. */
int oai_parse_n(json_t *o, oai_request *r, oai_error *e) {
    json_int_t n;
    int rc = oai_get_int(o, "n", &n, e);
    if (rc < 0) return rc;
    if (rc == 1) return 0;
    if (n < 1)
        return oai_error_set(e, 400, "invalid_request_error", "n", "invalid_value",
                             "n must be at least 1 (the number of choices); got %lld",
                             (long long)n);
    if (n > UINT32_MAX)
        return oai_error_set(e, 400, "invalid_request_error", "n", "invalid_value",
                             "n is %lld; at most %u choices per request", (long long)n, UINT32_MAX);
    r->n = (uint32_t)n;
    return 0;
}

/* The sampler prints the value it refuses with %g ("got 100" for
 * 100.0001): the message ends instead with the shortest decimal that reads
 * back as the request's number. */
static void exact_got(json_t *o, const char *field, char *msg, size_t cap) {
    json_t *v = field ? json_object_get(o, field) : NULL;
    char *got = strstr(msg, "; got ");
    char num[40];
    if (got && json_is_integer(v)) {
        snprintf(got, cap - (size_t)(got - msg), "; got %lld", (long long)json_integer_value(v));
        return;
    }
    if (!got || !json_is_real(v)) return;
    double d = json_real_value(v);
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(num, sizeof num, "%.*g", prec, d);
        if (strtod(num, NULL) == d) break;
    }
    snprintf(got, cap - (size_t)(got - msg), "; got %s", num);
}

/* Two names for one value (vLLM's and llama.cpp's): either may be given,
 * both only when they agree. */
static int get_alias_float(json_t *o, const char *a, const char *b, float *out, oai_error *e) {
    float va = 0, vb = 0;
    int ra = oai_get_float(o, a, &va, e), rb;
    if (ra < 0 || (rb = oai_get_float(o, b, &vb, e)) < 0) return -1;
    if (ra == 0 && rb == 0 && va != vb)
        return oai_error_set(e, 400, "invalid_request_error", b, "invalid_value",
                             "%s and %s are two names for one value; they disagree (%g, %g): "
                             "give one",
                             a, b, va, vb);
    if (ra == 0 || rb == 0) *out = ra == 0 ? va : vb;
    return 0;
}

static int parse_sampling(json_t *o, oai_request *r, oai_error *e) {
    sampler_params *sp = &r->sampling;
    int rc;
    if ((rc = oai_get_float(o, "temperature", &sp->temperature, e)) < 0) return rc;
    if ((rc = oai_get_float(o, "top_p", &sp->top_p, e)) < 0) return rc;
    if ((rc = oai_get_float(o, "min_p", &sp->min_p, e)) < 0) return rc;
    if ((rc = oai_get_float(o, "typical_p", &sp->typical_p, e)) < 0) return rc;
    if ((rc = oai_get_float(o, "frequency_penalty", &sp->frequency_penalty, e)) < 0) return rc;
    if ((rc = oai_get_float(o, "presence_penalty", &sp->presence_penalty, e)) < 0) return rc;
    if ((rc = get_alias_float(o, "repetition_penalty", "repeat_penalty", &sp->repetition_penalty,
                              e)) < 0)
        return rc;
    json_int_t k;
    if ((rc = oai_get_int(o, "repeat_last_n", &k, e)) < 0) return rc;
    if (rc == 0) { /* llama.cpp: 0 off, -1 the whole context */
        if (k < -1 || k > (1 << 24))
            return oai_bad(e, "repeat_last_n", "%s must be -1 (the context), 0 (off) or %s",
                           "a window of up to 16777216 tokens");
        sp->penalty_last_n = (int32_t)k;
    }
    if ((rc = oai_get_int(o, "top_k", &k, e)) < 0) return rc;
    if (rc == 0) { /* -1 and 0 both mean off (vLLM / llama.cpp) */
        if (k < -1 || k > INT32_MAX)
            return oai_bad(e, "top_k", "%s must be -1, 0 or positive%s", "");
        sp->top_k = k < 0 ? 0 : (int32_t)k;
    }
    if ((rc = oai_get_int(o, "seed", &k, e)) < 0) return rc;
    if (rc == 0) sp->seed = (uint64_t)k;
    r->seeded = rc == 0;
    if ((rc = oai_get_bool(o, "ignore_eos", &sp->ignore_eos, e)) < 0) return rc;
    const char *field = NULL;
    tps_err err = {{0}};
    if (sampler_params_validate(sp, &field, &err)) {
        exact_got(o, field, err.msg, sizeof err.msg);
        return oai_error_set(e, 400, "invalid_request_error", field, "invalid_value", "%s",
                             err.msg);
    }
    return 0;
}

static int parse_stop(json_t *o, oai_request *r, oai_error *e) {
    json_t *v = json_object_get(o, "stop");
    if (!v || json_is_null(v)) return 0;
    if (json_is_string(v)) {
        if (json_string_length(v) >= STOP_MAX_LEN)
            return oai_error_set(e, 400, "invalid_request_error", "stop", "invalid_value",
                                 "stop has %zu bytes; at most %d are allowed",
                                 json_string_length(v), STOP_MAX_LEN - 1);
        if (json_string_length(v)) r->stop[r->n_stop++] = json_string_value(v);
        return 0;
    }
    if (!json_is_array(v))
        return oai_bad(e, "stop", "%s must be a string or an array of strings%s", "");
    if (json_array_size(v) > OAI_MAX_STOP)
        return oai_error_set(e, 400, "invalid_request_error", "stop", "invalid_value",
                             "stop has %zu strings; at most %d are allowed", json_array_size(v),
                             OAI_MAX_STOP);
    size_t i;
    json_t *s;
    json_array_foreach(v, i, s) {
        if (!json_is_string(s))
            return oai_bad(e, "stop", "%s must be a string or an array of strings%s", "");
        if (json_string_length(s) >= STOP_MAX_LEN)
            return oai_error_set(e, 400, "invalid_request_error", "stop", "invalid_value",
                                 "stop[%zu] has %zu bytes; at most %d are allowed", i,
                                 json_string_length(s), STOP_MAX_LEN - 1);
        if (json_string_length(s)) r->stop[r->n_stop++] = json_string_value(s);
    }
    return 0;
}

/* max_completion_tokens, max_tokens and llama.cpp's n_predict (-1: no
 * limit) name one number: any of them, several only when they agree. */
static int parse_max_tokens(json_t *o, oai_request *r, oai_error *e) {
    static const char *const keys[] = {"max_completion_tokens", "max_tokens", "n_predict"};
    const char *given = NULL;
    json_int_t first = 0;
    for (size_t i = 0; i < 3; i++) {
        json_int_t n;
        int rc = oai_get_int(o, keys[i], &n, e);
        if (rc < 0) return rc;
        if (rc == 1) continue;
        bool unlimited = i == 2 && n == -1;
        if (n < 1 && !unlimited)
            return oai_error_set(e, 400, "invalid_request_error", keys[i], "invalid_value",
                                 "%s must be at least 1%s; got %lld", keys[i],
                                 i == 2 ? " (or -1: no limit)" : "", (long long)n);
        if (n > UINT32_MAX)
            return oai_error_set(e, 400, "invalid_request_error", keys[i], "invalid_value",
                                 "%s must be at most %u; got %lld", keys[i], UINT32_MAX,
                                 (long long)n);
        if (given && n != first)
            return oai_error_set(e, 400, "invalid_request_error", keys[i], "invalid_value",
                                 "%s (%lld) and %s (%lld) both bound the output's length and "
                                 "disagree: give one",
                                 given, (long long)first, keys[i], (long long)n);
        given = keys[i];
        first = n;
        r->max_tokens = unlimited ? 0 : (uint32_t)n;
    }
    return 0;
}

/* stop_token_ids (vLLM): token ids that end a choice like end-of-generation
 * (not output). Checked against the vocabulary by the server. */
static int parse_stop_ids(json_t *o, oai_request *r, oai_error *e) {
    json_t *v;
    int rc = oai_get_list(o, "stop_token_ids", false, "an array of token ids", "ids",
                          OAI_MAX_STOP_IDS, &v, e);
    if (rc) return rc < 0 ? rc : 0;
    if ((rc = oai_token_ids(v, "stop_token_ids", "a token id", r->stop_ids, e))) return rc;
    r->n_stop_ids = json_array_size(v);
    return 0;
}

/* vLLM's min_tokens, include_stop_str_in_output, skip_special_tokens and
 * spaces_between_special_tokens. */
static int parse_output_options(json_t *o, oai_request *r, oai_error *e) {
    json_int_t k;
    int rc;
    if ((rc = oai_get_int(o, "min_tokens", &k, e)) < 0) return rc;
    if (rc == 0 && (k < 0 || k > UINT32_MAX))
        return oai_bad(e, "min_tokens", "%s must be %s", "an integer >= 0");
    if (rc == 0) r->min_tokens = (uint32_t)k;
    if (r->max_tokens && r->min_tokens > r->max_tokens)
        return oai_error_set(e, 400, "invalid_request_error", "min_tokens", "invalid_value",
                             "min_tokens (%u) must be at most max_tokens (%u)", r->min_tokens,
                             r->max_tokens);
    if ((rc = oai_get_bool(o, "include_stop_str_in_output", &r->include_stop_str, e)) < 0)
        return rc;
    if ((rc = oai_get_bool(o, "skip_special_tokens", &r->skip_special, e)) < 0) return rc;
    bool spaces = false;
    if ((rc = oai_get_bool(o, "spaces_between_special_tokens", &spaces, e)) < 0) return rc;
    if (spaces && !r->skip_special)
        return oai_error_set(e, 400, "invalid_request_error", "spaces_between_special_tokens",
                             "unsupported_parameter",
                             "special tokens' text is written as the tokens come, without "
                             "spaces between them: send spaces_between_special_tokens false");
    return 0;
}

/* logit_bias: {"token id": bias}, ids as decimal strings (OpenAI's form),
 * biases in [-100, 100]. The vocabulary bound is checked by the server
 * (it knows the model). */
static int parse_logit_bias(json_t *o, oai_request *r, oai_error *e) {
    json_t *lb;
    int rc = oai_get_list(o, "logit_bias", true, "an object mapping token ids to biases", "entries",
                          SAMPLER_MAX_LOGIT_BIAS, &lb, e);
    if (rc) return rc < 0 ? rc : 0;
    size_t n = json_object_size(lb);
    if (!n) return 0;
    r->logit_bias = calloc(n, sizeof *r->logit_bias);
    if (!r->logit_bias) return oai_oom(e);
    const char *key;
    json_t *val;
    json_object_foreach(lb, key, val) {
        char *end = NULL;
        long long id = strtoll(key, &end, 10);
        if (!*key || *end || id < 0 || id > INT32_MAX)
            return oai_error_set(e, 400, "invalid_request_error", "logit_bias", "invalid_value",
                                 "logit_bias keys are token ids (decimal integers); got '%.40s'",
                                 key);
        if (!json_is_number(val) || !(json_number_value(val) >= -100.0) ||
            !(json_number_value(val) <= 100.0))
            return oai_error_set(e, 400, "invalid_request_error", "logit_bias", "invalid_value",
                                 "logit_bias[%lld] must be a number in [-100, 100]", id);
        r->logit_bias[r->n_logit_bias++] =
            (sampler_bias){.id = (int32_t)id, .bias = (float)json_number_value(val)};
    }
    return 0;
}

/* logprobs: completions `logprobs: k` (0..20 alternatives; null: none),
 * chat `logprobs: true` with `top_logprobs: k`. */
static int parse_logprobs(json_t *o, oai_request *r, oai_error *e) {
    json_t *lp = json_object_get(o, "logprobs");
    json_int_t k = 0;
    int rc;
    if (r->kind == OAI_COMPLETION) {
        if (lp && !json_is_null(lp) && !json_is_integer(lp) && !json_is_boolean(lp))
            return oai_bad(e, "logprobs", "%s must be %s",
                           "an integer (alternatives per token) or null");
        r->logprobs = lp && (json_is_integer(lp) || json_is_true(lp));
        k = json_is_integer(lp) ? json_integer_value(lp) : 0;
        if (r->logprobs && (k < 0 || k > LOGPROBS_MAX_TOP))
            return oai_error_set(e, 400, "invalid_request_error", "logprobs", "invalid_value",
                                 "logprobs must be in [0, %d]; got %lld", LOGPROBS_MAX_TOP,
                                 (long long)k);
    } else {
        if (lp && !json_is_null(lp) && !json_is_boolean(lp))
            return oai_bad(e, "logprobs", "%s must be %s", "a boolean");
        r->logprobs = lp && json_is_true(lp);
        if ((rc = oai_get_int(o, "top_logprobs", &k, e)) < 0) return rc;
        if (rc == 0 && (k < 0 || k > LOGPROBS_MAX_TOP))
            return oai_error_set(e, 400, "invalid_request_error", "top_logprobs", "invalid_value",
                                 "top_logprobs must be in [0, %d]; got %lld", LOGPROBS_MAX_TOP,
                                 (long long)k);
        if (rc == 0 && k > 0 && !r->logprobs)
            return oai_error_set(e, 400, "invalid_request_error", "top_logprobs", "invalid_value",
                                 "top_logprobs needs logprobs: true");
    }
    r->top_logprobs = (uint32_t)k;
    return 0;
}

int oai_parse_sampling_fields(json_t *o, oai_request *r, oai_error *e) {
    int rc;
    if ((rc = parse_max_tokens(o, r, e)) || (rc = parse_sampling(o, r, e)) ||
        (rc = parse_logit_bias(o, r, e)) || (rc = parse_logprobs(o, r, e)) ||
        (rc = parse_stop(o, r, e)) || (rc = parse_stop_ids(o, r, e)) ||
        (rc = parse_output_options(o, r, e)))
        return rc;
    return 0;
}
