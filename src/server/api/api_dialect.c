/* The dialects' shared parts (api_dialect.h).
 *
 * Not here: any one dialect's fields. */
#include "server/api/api_dialect.h"

#include <stdio.h>
#include <string.h>

int api_at_most(json_t *arr, size_t max, const char *param, const char *units, oai_error *e) {
    if (json_array_size(arr) <= max) return 0;
    return oai_error_set(e, 400, "invalid_request_error", param, "invalid_value",
                         "%s has %zu %s; at most %zu are accepted", param, json_array_size(arr),
                         units, max);
}

int api_join_text(json_t *content, const char *param, const char *const *types, json_t **out,
                  oai_error *e) {
    if (json_is_string(content)) {
        *out = json_incref(content);
        return 0;
    }
    if (!json_is_array(content))
        return oai_error_set(e, 400, "invalid_request_error", param, "invalid_type",
                             "%s must be a string or an array of text parts", param);
    if (api_at_most(content, API_MAX_PARTS, param, "parts", e)) return TPS_EINVAL;
    sbuf b;
    sbuf_init(&b);
    size_t i;
    json_t *part;
    json_array_foreach(content, i, part) {
        const char *t = json_string_value(json_object_get(part, "type"));
        json_t *text = json_object_get(part, "text");
        bool known = false;
        for (size_t k = 0; t && types[k]; k++)
            known |= !strcmp(t, types[k]);
        if (!known || !json_is_string(text)) {
            sbuf_free(&b);
            if (!t || !json_is_object(part))
                return oai_error_set(e, 400, "invalid_request_error", param, "invalid_type",
                                     "%s[%zu] must be an object with a \"type\"", param, i);
            if (known)
                return oai_error_set(e, 400, "invalid_request_error", param, "invalid_type",
                                     "%s[%zu].text must be a string", param, i);
            return oai_error_set(e, 400, "invalid_request_error", param, "unsupported_parameter",
                                 "%s[%zu]: parts of type \"%.40s\" are not supported: only text "
                                 "(\"%s\")",
                                 param, i, t, types[0]);
        }
        sbuf_add(&b, json_string_value(text), json_string_length(text));
    }
    *out = sbuf_failed(&b) ? NULL : json_stringn(b.p ? b.p : "", b.len);
    sbuf_free(&b);
    return *out ? 0 : api_oom(e);
}

int api_build_tools(json_t *root, json_t *chat, api_tool_fn *fn, const oai_policy *p,
                    oai_request *r, oai_error *e) {
    json_t *tools = json_object_get(root, "tools");
    if (!tools || json_is_null(tools)) return 0;
    if (!json_is_array(tools))
        return oai_error_set(e, 400, "invalid_request_error", "tools", "invalid_type",
                             "tools must be an array");
    if (api_at_most(tools, API_MAX_TOOLS, "tools", "tools", e)) return TPS_EINVAL;
    json_t *out = json_array(), *t;
    if (api_set_new(chat, "tools", out, e)) return TPS_EINVAL;
    size_t i;
    json_array_foreach(tools, i, t) {
        char param[32], prefix[40];
        snprintf(param, sizeof param, "tools[%zu]", i);
        snprintf(prefix, sizeof prefix, "%s.", param);
        json_t *f = fn(t, param, prefix, p, r, e);
        if (!f ||
            api_append_new(out, json_pack("{s:s, s:o}", "type", "function", "function", f), e))
            return TPS_EINVAL;
    }
    return 0;
}

int api_oom(oai_error *e) {
    return oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
}

int api_set_new(json_t *o, const char *k, json_t *v, oai_error *e) {
    return !v || json_object_set_new(o, k, v) ? api_oom(e) : 0;
}

int api_append_new(json_t *a, json_t *v, oai_error *e) {
    return !v || json_array_append_new(a, v) ? api_oom(e) : 0;
}

int api_copy(json_t *from, const char *key, json_t *to, const char *as, oai_error *e) {
    json_t *v = json_object_get(from, key);
    return v && json_object_set(to, as, v) ? api_oom(e) : 0;
}

/* Chat field -> the dialect's name for it. */
typedef struct rename_row {
    const char *chat, *responses, *messages;
} rename_row;

static const rename_row RENAMES[] = {
    {"max_tokens", "max_output_tokens", "max_tokens"},
    {"response_format", "text.format", "response_format"},
    {"reasoning_effort", "reasoning.effort", "reasoning_effort"},
    {"messages", "input", "messages"},
    {"stop", "stop", "stop_sequences"},
    {"thinking_token_budget", "reasoning", "thinking.budget_tokens"},
    {"logprobs", "include", "logprobs"},
};

void api_error_rename(oai_error *e, oai_dialect d) {
    if (d == OAI_DIALECT_CHAT || !e->param[0]) return;
    for (size_t i = 0; i < sizeof RENAMES / sizeof RENAMES[0]; i++) {
        const rename_row *r = &RENAMES[i];
        size_t n = strlen(r->chat);
        if (strncmp(e->param, r->chat, n) ||
            (e->param[n] && e->param[n] != '[' && e->param[n] != '.'))
            continue;
        const char *to = d == OAI_DIALECT_RESPONSES ? r->responses : r->messages;
        char param[sizeof e->param], msg[sizeof e->message];
        snprintf(param, sizeof param, "%s%s", to, e->param + n);
        /* the message names the field first, as the param */
        if (!strncmp(e->message, r->chat, n))
            snprintf(msg, sizeof msg, "%s%s", to, e->message + n);
        else
            snprintf(msg, sizeof msg, "%s", e->message);
        snprintf(e->param, sizeof e->param, "%s", param);
        snprintf(e->message, sizeof e->message, "%s", msg);
        return;
    }
}

int api_chat_parse(oai_request *r, json_t *chat, oai_dialect d, oai_error *e) {
    char ignored[OAI_IGNORED_MAX]; /* oai_parse_root starts r afresh */
    snprintf(ignored, sizeof ignored, "%s", r->ignored);
    uint32_t n_ignored = r->n_ignored;
    int rc = oai_parse_root(r, chat, NULL, e);
    if (rc) {
        api_error_rename(e, d);
        return rc;
    }
    r->dialect = d;
    snprintf(r->ignored, sizeof r->ignored, "%s", ignored);
    r->n_ignored = n_ignored;
    return 0;
}

void api_error_anthropic_json(const oai_error *e, sbuf *out) {
    const char *type = e->status == 401   ? "authentication_error"
                       : e->status == 403 ? "permission_error"
                       : e->status == 404 ? "not_found_error"
                       : e->status == 413 ? "request_too_large"
                       : e->status == 429 ? "rate_limit_error"
                       : e->status == 503 ? "overloaded_error"
                       : e->status >= 500 ? "api_error"
                                          : "invalid_request_error";
    sbuf_adds(out, "{\"type\":\"error\",\"error\":{\"type\":");
    sbuf_json_str(out, type, strlen(type));
    sbuf_adds(out, ",\"message\":");
    sbuf_json_str(out, e->message, strlen(e->message));
    sbuf_adds(out, "}}");
}
