/* Reasoning output's request fields (chat): how a reasoning model's
 * thinking is returned - llama-server's reasoning_format ("auto" and
 * "deepseek": in reasoning_content, apart from content; "none": inline in
 * content, markers and all) and vLLM's include_reasoning (false: the
 * thinking is dropped from the answer) - and the thinking budget, vLLM's
 * thinking_token_budget or llama-server's thinking_budget_tokens (the same
 * number: tokens the thinking block may hold before "</think>", or
 * gpt-oss's "<|end|>", is forced;
 * -1: no limit) - and reasoning_effort (OpenAI's; "low", "medium" or
 * "high", handed to the chat template, which decides: gpt-oss's writes
 * "Reasoning: <effort>" into its system message).
 *
 * Not here: whether the model thinks (the server knows its vocabulary),
 * splitting the text (engine/sample/think.h). */
#include "server/api/openai_internal.h"

#include <string.h>

static int parse_format(json_t *o, oai_request *r, oai_error *e) {
    json_t *v = json_object_get(o, "reasoning_format");
    if (!v || json_is_null(v)) return 0;
    const char *f = json_is_string(v) ? json_string_value(v) : "";
    if (!strcmp(f, "none"))
        r->reasoning = OAI_REASONING_NONE;
    else if (!strcmp(f, "auto") || !strcmp(f, "deepseek"))
        r->reasoning = OAI_REASONING_SPLIT;
    else if (!strcmp(f, "deepseek-legacy"))
        return oai_error_set(e, 400, "invalid_request_error", "reasoning_format",
                             "unsupported_parameter",
                             "reasoning_format \"deepseek-legacy\" (thinking both in "
                             "reasoning_content and inline) is not supported: use \"deepseek\" "
                             "or \"none\"");
    else
        return oai_bad(e, "reasoning_format", "%s must be %s",
                       "\"auto\", \"deepseek\" (thinking in reasoning_content) or \"none\" "
                       "(thinking inline in content)");
    return 0;
}

static int parse_budget(json_t *o, oai_request *r, oai_error *e) {
    static const char *const keys[] = {"thinking_token_budget", "thinking_budget_tokens"};
    const char *given = NULL;
    for (size_t i = 0; i < 2; i++) {
        json_int_t n;
        int rc = oai_get_int(o, keys[i], &n, e);
        if (rc < 0) return rc;
        if (rc == 1) continue;
        if (n < -1 || n > INT32_MAX)
            return oai_bad(e, keys[i], "%s must be %s",
                           "-1 (no limit) or the most tokens the thinking may take");
        if (given && n != r->think_budget)
            return oai_error_set(e, 400, "invalid_request_error", keys[i], "invalid_value",
                                 "%s and %s name one budget and disagree: give one", given,
                                 keys[i]);
        given = keys[i];
        r->think_budget = (int32_t)n;
    }
    return 0;
}

static int parse_effort(json_t *o, oai_request *r, oai_error *e) {
    json_t *v = json_object_get(o, "reasoning_effort");
    if (!v || json_is_null(v)) return 0;
    const char *s = json_is_string(v) ? json_string_value(v) : "";
    if (strcmp(s, "low") && strcmp(s, "medium") && strcmp(s, "high"))
        return oai_bad(e, "reasoning_effort", "%s must be %s", "\"low\", \"medium\" or \"high\"");
    r->reasoning_effort = s;
    return 0;
}

int oai_parse_reasoning(json_t *o, oai_request *r, oai_error *e) {
    int rc;
    if ((rc = parse_format(o, r, e)) || (rc = parse_budget(o, r, e)) ||
        (rc = parse_effort(o, r, e)))
        return rc;
    bool include = true;
    if ((rc = oai_get_bool(o, "include_reasoning", &include, e)) < 0) return rc;
    if (!include && r->reasoning == OAI_REASONING_NONE)
        return oai_error_set(e, 400, "invalid_request_error", "include_reasoning", "invalid_value",
                             "include_reasoning false drops the thinking, reasoning_format "
                             "\"none\" keeps it inline: give one");
    if (!include) r->reasoning = OAI_REASONING_HIDDEN;
    return 0;
}
