/* The Responses API request (api_responses.h): the body's fields checked
 * against their allow-list, then a chat request built from them (messages,
 * tools, tool_choice, response_format, reasoning_effort, sampling) and
 * parsed by the one chat parser (api_chat_parse). The built request keeps
 * references into the body's JSON, never copies of large values.
 *
 * Not here: sampling, tools, schema or reasoning rules (openai*.c, written
 * once for every dialect), the store (response_store.c), the answer
 * (api_responses_write.c). */
#include "server/api/api_responses.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/api/api_dialect.h"

#define EP "/v1/responses"

/* ---------------------------------------------------------------------------
 * The allow-lists
 * ------------------------------------------------------------------------- */

#define HON OAI_FIELD_HONOURED
#define LAB OAI_FIELD_LABEL
#define REF OAI_FIELD_REFUSED
#define O   "OpenAI"
#define OV  "OpenAI, vLLM"

static const oai_field FIELDS[] = {
    {"model", 0, LAB, OV, NULL, "one model is served; responses carry its id"},
    {"input", 0, HON, OV, NULL, NULL},
    {"instructions", 0, HON, OV, NULL, "the system message (not carried to the next turn)"},
    {"previous_response_id", 0, HON, OV, NULL, "the stored conversation goes first"},
    {"store", 0, HON, OV, NULL, "default true: the answer is kept (bounded) for the next turn"},
    {"tools", 0, HON, OV, NULL, "function tools; built-in tools are a 400"},
    {"tool_choice", 0, HON, OV, NULL, NULL},
    {"parallel_tool_calls", 0, HON, OV, NULL, NULL},
    {"max_output_tokens", 0, HON, OV, NULL, NULL},
    {"temperature", 0, HON, OV, NULL, NULL},
    {"top_p", 0, HON, OV, NULL, NULL},
    {"seed", 0, HON, "vLLM", NULL, NULL},
    {"text", 0, HON, OV, NULL, "text.format: text, json_object or json_schema"},
    {"reasoning", 0, HON, OV, NULL,
     "reasoning.effort through a chat template that reads it; summary: the thinking itself, "
     "whole, as the reasoning item's summary_text (no shorter summary is written)"},
    {"stream", 0, HON, OV, NULL, NULL},
    {"stream_options", 0, REF, O, NULL, "stream_options is not supported"},
    {"include", 0, HON, O, NULL,
     "reasoning.encrypted_content: the thinking is returned in clear as reasoning_text; other "
     "values are a 400"},
    {"metadata", 0, LAB, O, NULL, "echoed in the response object"},
    {"user", 0, LAB, O, NULL, NULL},
    {"safety_identifier", 0, LAB, O, NULL, NULL},
    {"prompt_cache_key", 0, LAB, O, NULL, "prefix caching is automatic, keyed by tokens"},
    {"service_tier", 0, LAB, O, NULL, NULL},
    {"truncation", 0, REF, O, "\"disabled\"",
     "truncation \"auto\" is not supported: a prompt "
     "too long is a 400"},
    {"background", 0, REF, O, NULL, "background responses are not supported"},
    {"conversation", 0, REF, O, NULL,
     "conversation objects are not supported: use previous_response_id"},
    {"prompt", 0, REF, O, NULL, "prompt templates are not supported: send input"},
    {"max_tool_calls", 0, REF, O, NULL, "max_tool_calls is not supported"},
    {"top_logprobs", 0, REF, O, NULL, "logprobs are not supported on /v1/responses"},
    {"context_management", 0, REF, O, NULL, "context_management is not supported"},
};

const oai_field *api_responses_fields(size_t *n) {
    *n = sizeof FIELDS / sizeof FIELDS[0];
    return FIELDS;
}

static const oai_field MESSAGE_ITEM[] = {
    {"type", 0, HON, O, NULL, NULL},    {"role", 0, HON, O, NULL, NULL},
    {"content", 0, HON, O, NULL, NULL}, {"id", 0, LAB, O, NULL, NULL},
    {"status", 0, LAB, O, NULL, NULL},
};
static const oai_field CALL_ITEM[] = {
    {"type", 0, HON, O, NULL, NULL},
    {"call_id", 0, HON, O, NULL, NULL},
    {"name", 0, HON, O, NULL, NULL},
    {"arguments", 0, HON, O, NULL, NULL},
    {"id", 0, LAB, O, NULL, NULL},
    {"status", 0, LAB, O, NULL, NULL},
    {"namespace", 0, REF, O, NULL, "tool namespaces are not supported"},
};
static const oai_field OUTPUT_ITEM[] = {
    {"type", 0, HON, O, NULL, NULL},   {"call_id", 0, HON, O, NULL, NULL},
    {"output", 0, HON, O, NULL, NULL}, {"id", 0, LAB, O, NULL, NULL},
    {"status", 0, LAB, O, NULL, NULL},
};
static const oai_field REASONING_ITEM[] = {
    {"type", 0, HON, O, NULL, NULL},
    {"content", 0, HON, OV, NULL, NULL},
    {"summary", 0, HON, O, NULL, "used when content is absent"},
    {"id", 0, LAB, O, NULL, NULL},
    {"status", 0, LAB, O, NULL, NULL},
    {"encrypted_content", 0, REF, O, NULL,
     "encrypted reasoning is not supported: send the reasoning item as tps returned it"},
};
static const oai_field FUNCTION_TOOL[] = {
    {"type", 0, HON, O, NULL, NULL},        {"name", 0, HON, O, NULL, NULL},
    {"description", 0, HON, O, NULL, NULL}, {"parameters", 0, HON, O, NULL, NULL},
    {"strict", 0, HON, O, NULL, NULL},
};

/* ---------------------------------------------------------------------------
 * Input items -> chat messages
 * ------------------------------------------------------------------------- */

typedef struct conv {
    json_t *msgs;      /* the chat messages being built */
    json_t *reasoning; /* a reasoning item's text waiting for the answer it led to */
    size_t reasoning_at;
    const oai_policy *p;
    oai_request *r; /* ignored names */
} conv;

static int need_string(json_t *o, const char *key, const char *param, json_t **out, oai_error *e) {
    *out = json_object_get(o, key);
    if (json_is_string(*out)) return 0;
    return oai_error_set(e, 400, "invalid_request_error", param, "invalid_type",
                         "%s.%s must be a string", param, key);
}

/* The assistant message an answer item (message, function_call) goes in:
 * the last one when it is an assistant's, else a new one; a waiting
 * reasoning item's text becomes its reasoning_content. */
static json_t *assistant_msg(conv *c, bool fresh, oai_error *e) {
    json_t *last = json_array_get(c->msgs, json_array_size(c->msgs) - 1);
    const char *role = json_string_value(json_object_get(last, "role"));
    json_t *m = last;
    if (fresh || !role || strcmp(role, "assistant")) {
        m = json_pack("{s:s, s:s}", "role", "assistant", "content", "");
        if (api_append_new(c->msgs, m, e)) return NULL;
    }
    if (c->reasoning && api_set_new(m, "reasoning_content", c->reasoning, e)) return NULL;
    c->reasoning = NULL;
    return m;
}

static int add_message(conv *c, json_t *it, const char *param, oai_error *e) {
    json_t *role;
    if (need_string(it, "role", param, &role, e)) return TPS_EINVAL;
    const char *rs = json_string_value(role);
    static const char *const parts[] = {"input_text", "output_text", "text", NULL};
    char cp[64];
    snprintf(cp, sizeof cp, "%s.content", param);
    json_t *text;
    if (api_join_text(json_object_get(it, "content"), cp, parts, &text, e)) return TPS_EINVAL;
    if (!strcmp(rs, "assistant")) {
        json_t *m = assistant_msg(c, true, e);
        return m ? api_set_new(m, "content", text, e) : (json_decref(text), TPS_EINVAL);
    }
    if (strcmp(rs, "user") && strcmp(rs, "system") && strcmp(rs, "developer")) {
        json_decref(text);
        return oai_error_set(e, 400, "invalid_request_error", param, "invalid_value",
                             "%s.role must be \"user\", \"assistant\", \"system\" or "
                             "\"developer\"",
                             param);
    }
    json_t *m =
        json_pack("{s:s, s:o}", "role", strcmp(rs, "developer") ? rs : "system", "content", text);
    return api_append_new(c->msgs, m, e);
}

static int add_call(conv *c, json_t *it, const char *param, oai_error *e) {
    json_t *id, *name, *args;
    if (need_string(it, "call_id", param, &id, e) || need_string(it, "name", param, &name, e) ||
        need_string(it, "arguments", param, &args, e))
        return TPS_EINVAL;
    json_t *m = assistant_msg(c, false, e);
    if (!m) return TPS_EINVAL;
    json_t *calls = json_object_get(m, "tool_calls");
    if (!calls && api_set_new(m, "tool_calls", calls = json_array(), e)) return TPS_EINVAL;
    json_t *call = json_pack("{s:O, s:s, s:{s:O, s:O}}", "id", id, "type", "function", "function",
                             "name", name, "arguments", args);
    return api_append_new(calls, call, e);
}

static int add_output(conv *c, json_t *it, const char *param, oai_error *e) {
    json_t *id, *text;
    if (need_string(it, "call_id", param, &id, e)) return TPS_EINVAL;
    static const char *const parts[] = {"input_text", "output_text", "text", NULL};
    char op[64];
    snprintf(op, sizeof op, "%s.output", param);
    if (api_join_text(json_object_get(it, "output"), op, parts, &text, e)) return TPS_EINVAL;
    json_t *m = json_pack("{s:s, s:O, s:o}", "role", "tool", "tool_call_id", id, "content", text);
    return api_append_new(c->msgs, m, e);
}

/* A reasoning item: its content's reasoning_text (else its summary's
 * summary_text) waits for the answer that follows it. */
static int add_reasoning(conv *c, json_t *it, const char *param, size_t i, oai_error *e) {
    json_t *content = json_object_get(it, "content");
    bool has = content && !json_is_null(content) && json_array_size(content);
    json_t *parts = has ? content : json_object_get(it, "summary");
    static const char *const rt[] = {"reasoning_text", NULL}, *const st[] = {"summary_text", NULL};
    char pp[64];
    snprintf(pp, sizeof pp, "%s.%s", param, has ? "content" : "summary");
    json_t *text;
    if (!parts || json_is_null(parts))
        parts = json_array();
    else
        json_incref(parts);
    int rc = api_join_text(parts, pp, has ? rt : st, &text, e);
    json_decref(parts);
    if (rc) return rc;
    json_decref(c->reasoning);
    c->reasoning = text;
    c->reasoning_at = i;
    return 0;
}

/* One input item, by type (a message when it has a role and no type). */
static int add_item(conv *c, json_t *it, size_t i, oai_error *e) {
    char param[48];
    snprintf(param, sizeof param, "input[%zu]", i);
    if (!json_is_object(it))
        return oai_error_set(e, 400, "invalid_request_error", param, "invalid_type",
                             "%s must be an object (an input item)", param);
    json_t *tv = json_object_get(it, "type");
    const char *t = json_is_string(tv) ? json_string_value(tv) : tv ? "" : "message";
    char prefix[56];
    snprintf(prefix, sizeof prefix, "%s.", param);
    const struct {
        const char *type;
        const oai_field *rows;
        size_t n;
    } kinds[] = {{"message", API_ROWS(MESSAGE_ITEM)},
                 {"function_call", API_ROWS(CALL_ITEM)},
                 {"function_call_output", API_ROWS(OUTPUT_ITEM)},
                 {"reasoning", API_ROWS(REASONING_ITEM)}};
    for (size_t k = 0; k < 4; k++) {
        if (strcmp(t, kinds[k].type)) continue;
        if (oai_check_table(it, kinds[k].rows, kinds[k].n, EP, prefix, c->p, c->r, e))
            return TPS_EINVAL;
        if (k == 0) return add_message(c, it, param, e);
        if (k == 1) return add_call(c, it, param, e);
        if (k == 2) return add_output(c, it, param, e);
        return add_reasoning(c, it, param, i, e);
    }
    return oai_error_set(e, 400, "invalid_request_error", param, "unsupported_parameter",
                         "%s: input items of type \"%.40s\" are not supported (message, "
                         "function_call, function_call_output and reasoning are; item_reference: "
                         "use previous_response_id)",
                         param, t);
}

static int build_input(conv *c, json_t *root, oai_error *e) {
    json_t *in = json_object_get(root, "input");
    if (!in || json_is_null(in))
        return oai_error_set(e, 400, "invalid_request_error", "input", "missing_required_parameter",
                             "input is required");
    if (json_is_string(in))
        return api_append_new(c->msgs, json_pack("{s:s, s:O}", "role", "user", "content", in), e);
    if (!json_is_array(in))
        return oai_error_set(e, 400, "invalid_request_error", "input", "invalid_type",
                             "input must be a string or an array of input items");
    if (api_at_most(in, API_MAX_ITEMS, "input", "items", e)) return TPS_EINVAL;
    size_t i;
    json_t *it;
    json_array_foreach(in, i, it) {
        if (add_item(c, it, i, e)) return TPS_EINVAL;
    }
    if (c->reasoning)
        return oai_error_set(e, 400, "invalid_request_error", "input", "invalid_value",
                             "input[%zu] is a reasoning item with no answer after it: send the "
                             "assistant message or function_call it led to next",
                             c->reasoning_at);
    return 0;
}

/* previous_response_id: the stored conversation, first. */
static int build_previous(conv *c, json_t *root, api_lookup_fn lookup, void *ctx, oai_error *e) {
    json_t *id = json_object_get(root, "previous_response_id");
    if (!id || json_is_null(id)) return 0;
    if (!json_is_string(id))
        return oai_error_set(e, 400, "invalid_request_error", "previous_response_id",
                             "invalid_type", "previous_response_id must be a string");
    char *text = NULL;
    size_t n = 0;
    tps_err err = {{0}};
    int rc = lookup ? lookup(ctx, json_string_value(id), &text, &n, &err)
                    : tps_fail(&err, TPS_ENOENT, "this server keeps no responses");
    if (rc)
        return oai_error_set(e, rc == TPS_ENOENT ? 404 : 500,
                             rc == TPS_ENOENT ? "invalid_request_error" : "server_error",
                             "previous_response_id", rc == TPS_ENOENT ? "not_found" : NULL,
                             "previous_response_id: %s", err.msg);
    json_t *prev = json_loadb(text, n, 0, NULL);
    free(text);
    if (!json_is_array(prev) || json_array_extend(c->msgs, prev)) {
        json_decref(prev);
        return oai_error_set(e, 500, "server_error", "previous_response_id", NULL,
                             "the stored conversation could not be read");
    }
    json_decref(prev);
    return 0;
}

/* ---------------------------------------------------------------------------
 * Tools, formats, reasoning
 * ------------------------------------------------------------------------- */

/* One function tool {type: "function", name, description?, parameters,
 * strict?} as a chat function. */
static json_t *tool_function(json_t *t, const char *param, const char *prefix, const oai_policy *p,
                             oai_request *r, oai_error *e) {
    const char *type = json_string_value(json_object_get(t, "type"));
    if (!json_is_object(t) || !type) {
        oai_error_set(e, 400, "invalid_request_error", param, "invalid_type",
                      "%s must be an object with a \"type\"", param);
        return NULL;
    }
    if (strcmp(type, "function")) {
        oai_error_set(e, 400, "invalid_request_error", param, "unsupported_parameter",
                      "%s: the built-in tool \"%.40s\" is not supported: only function "
                      "tools run here (the client runs them)",
                      param, type);
        return NULL;
    }
    if (oai_check_table(t, API_ROWS(FUNCTION_TOOL), EP, prefix, p, r, e)) return NULL;
    json_t *fn = json_object();
    if (!fn) return api_oom(e), NULL;
    const char *keys[] = {"name", "description", "parameters", "strict"};
    for (size_t k = 0; k < 4; k++)
        if (api_copy(t, keys[k], fn, keys[k], e)) return json_decref(fn), NULL;
    return fn;
}

/* "auto" | "none" | "required" | {"type": "function", "name"}. */
static int build_tool_choice(json_t *root, json_t *chat, oai_error *e) {
    json_t *tc = json_object_get(root, "tool_choice");
    if (!tc || json_is_null(tc)) return 0;
    if (json_is_string(tc)) return json_object_set(chat, "tool_choice", tc) ? TPS_EINVAL : 0;
    const char *type = json_string_value(json_object_get(tc, "type"));
    json_t *name = json_object_get(tc, "name");
    if (type && !strcmp(type, "function") && json_is_string(name))
        return api_set_new(
            chat, "tool_choice",
            json_pack("{s:s, s:{s:O}}", "type", "function", "function", "name", name), e);
    return oai_error_set(e, 400, "invalid_request_error", "tool_choice", "unsupported_parameter",
                         "tool_choice must be \"auto\", \"none\", \"required\" or {\"type\": "
                         "\"function\", \"name\": ...}; built-in and allowed_tools choices are "
                         "not supported");
}

/* tool_choice forces a call ("required", a named function): the answer is
 * calls, no text, so text.format asks nothing of it (the Agents SDK sends
 * both: a structured final answer, a forced first tool call). */
static bool forces_call(json_t *root) {
    json_t *tc = json_object_get(root, "tool_choice");
    return json_is_object(tc) || (json_is_string(tc) && !strcmp(json_string_value(tc), "required"));
}

/* text: {"format": {"type": "text" | "json_object" | "json_schema", ...}}. */
static int build_text(json_t *root, json_t *chat, oai_error *e) {
    json_t *text = json_object_get(root, "text");
    if (!text || json_is_null(text)) return 0;
    const char *key;
    json_t *v;
    json_object_foreach(text, key, v) {
        if (strcmp(key, "format") && !json_is_null(v))
            return oai_error_set(e, 400, "invalid_request_error", "text", "unsupported_parameter",
                                 "text.%.40s is not supported (text.format is)", key);
    }
    json_t *f = json_object_get(text, "format");
    if (!f || json_is_null(f)) return 0;
    const char *type = json_string_value(json_object_get(f, "type"));
    if (!json_is_object(f) || !type)
        return oai_error_set(e, 400, "invalid_request_error", "text.format", "invalid_type",
                             "text.format must be an object with a \"type\"");
    if (forces_call(root)) return 0;
    if (strcmp(type, "json_schema"))
        return api_set_new(chat, "response_format", json_pack("{s:s}", "type", type), e);
    json_t *js = json_object();
    json_object_foreach(f, key, v) {
        if (strcmp(key, "type")) json_object_set(js, key, v);
    }
    return api_set_new(chat, "response_format",
                       json_pack("{s:s, s:o}", "type", type, "json_schema", js), e);
}

static int build_reasoning(json_t *root, json_t *chat, oai_error *e) {
    json_t *rs = json_object_get(root, "reasoning");
    if (!rs || json_is_null(rs)) return 0;
    if (!json_is_object(rs))
        return oai_error_set(e, 400, "invalid_request_error", "reasoning", "invalid_type",
                             "reasoning must be an object");
    const char *key;
    json_t *v;
    json_object_foreach(rs, key, v) {
        if (strcmp(key, "effort") && strcmp(key, "summary") && strcmp(key, "generate_summary"))
            return oai_error_set(e, 400, "invalid_request_error", "reasoning", "unknown_parameter",
                                 "reasoning.%.40s is not a field tps takes", key);
    }
    json_t *effort = json_object_get(rs, "effort");
    if (effort && !json_is_null(effort) && json_object_set(chat, "reasoning_effort", effort))
        return api_oom(e);
    return 0;
}

/* include: only reasoning.encrypted_content (answered in clear). */
static int check_include(json_t *root, oai_error *e) {
    json_t *inc = json_object_get(root, "include");
    if (!inc || json_is_null(inc)) return 0;
    if (!json_is_array(inc))
        return oai_error_set(e, 400, "invalid_request_error", "include", "invalid_type",
                             "include must be an array");
    size_t i;
    json_t *v;
    json_array_foreach(inc, i, v) {
        const char *s = json_string_value(v);
        if (!s || strcmp(s, "reasoning.encrypted_content"))
            return oai_error_set(e, 400, "invalid_request_error", "include",
                                 "unsupported_parameter",
                                 "include[%zu]: only \"reasoning.encrypted_content\" is "
                                 "supported (the thinking comes back in clear)",
                                 i);
    }
    return 0;
}

/* Fields that keep their chat name and meaning. */
static int copy_same(json_t *root, json_t *chat, oai_error *e) {
    static const char *const same[] = {"model", "temperature",         "top_p",
                                       "seed",  "parallel_tool_calls", "stream"};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        if (api_copy(root, same[i], chat, same[i], e)) return TPS_EINVAL;
    return api_copy(root, "max_output_tokens", chat, "max_tokens", e);
}

/* ---------------------------------------------------------------------------
 * Entry point
 * ------------------------------------------------------------------------- */

/* The settings the response object repeats, as JSON members. */
static char *echo_of(json_t *root, bool store) {
    json_t *o = json_object();
    static const char *const keys[] = {
        "instructions",         "metadata",    "tools",     "tool_choice",
        "parallel_tool_calls",  "temperature", "top_p",     "max_output_tokens",
        "previous_response_id", "text",        "reasoning", "user"};
    static const char *const dflt[] = {"null",
                                       "{}",
                                       "[]",
                                       "\"auto\"",
                                       "true",
                                       "1",
                                       "1",
                                       "null",
                                       "null",
                                       "{\"format\":{\"type\":\"text\"}}",
                                       "{\"effort\":null,\"summary\":null}",
                                       "null"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *v = json_object_get(root, keys[i]);
        if (!v || json_is_null(v))
            json_object_set_new(o, keys[i], json_loads(dflt[i], JSON_DECODE_ANY, NULL));
        else
            json_object_set(o, keys[i], v);
    }
    json_object_set_new(o, "store", json_boolean(store));
    json_object_set_new(o, "truncation", json_string("disabled"));
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!s) return NULL;
    size_t n = strlen(s); /* the members without the braces */
    memmove(s, s + 1, n - 2);
    s[n - 2] = 0;
    return s;
}

static int build_chat(conv *c, json_t *root, json_t *chat, api_lookup_fn lookup, void *ctx,
                      oai_error *e) {
    json_t *instr = json_object_get(root, "instructions");
    if (instr && !json_is_null(instr) && !json_is_string(instr))
        return oai_error_set(e, 400, "invalid_request_error", "instructions", "invalid_type",
                             "instructions must be a string");
    if (build_previous(c, root, lookup, ctx, e) || build_input(c, root, e)) return TPS_EINVAL;
    json_t *msgs = json_array();
    if (json_is_string(instr) &&
        api_append_new(msgs, json_pack("{s:s, s:O}", "role", "system", "content", instr), e)) {
        json_decref(msgs);
        return TPS_EINVAL;
    }
    json_array_extend(msgs, c->msgs);
    if (api_set_new(chat, "messages", msgs, e) || copy_same(root, chat, e) ||
        api_build_tools(root, chat, tool_function, c->p, c->r, e) ||
        build_tool_choice(root, chat, e) || build_text(root, chat, e) ||
        build_reasoning(root, chat, e) || check_include(root, e))
        return TPS_EINVAL;
    return 0;
}

int api_responses_parse(oai_request *r, const char *body, size_t len, const oai_policy *p,
                        api_lookup_fn lookup, void *lookup_ctx, oai_error *e) {
    memset(r, 0, sizeof *r);
    json_t *root = oai_body_object(body, len, e), *chat = NULL;
    conv c = {.msgs = json_array(), .p = p, .r = r};
    int rc = TPS_EINVAL;
    bool store = true;
    if (!root) goto done;
    json_t *st = json_object_get(root, "store");
    if (st && !json_is_null(st) && !json_is_boolean(st)) {
        oai_error_set(e, 400, "invalid_request_error", "store", "invalid_type",
                      "store must be a boolean");
        goto done;
    }
    store = !json_is_false(st);
    chat = json_object();
    if (!chat || !c.msgs) {
        api_oom(e);
        goto done;
    }
    if (oai_check_table(root, API_ROWS(FIELDS), EP, "", p, r, e) ||
        build_chat(&c, root, chat, lookup, lookup_ctx, e))
        goto done;
    rc = api_chat_parse(r, chat, OAI_DIALECT_RESPONSES, e);
    chat = NULL; /* taken */
    if (rc) goto done;
    r->store = store;
    json_t *summary = json_object_get(json_object_get(root, "reasoning"), "summary");
    r->reasoning_summary = summary && !json_is_null(summary);
    r->history = json_incref(c.msgs);
    r->echo = echo_of(root, store);
    if (!r->echo) {
        oai_request_free(r);
        rc = api_oom(e);
    }
done:
    json_decref(c.reasoning);
    json_decref(c.msgs);
    json_decref(chat);
    json_decref(root);
    return rc;
}
