/* The Messages API request (api_messages.h): the body's fields checked
 * against their allow-list, then a chat request built from them and parsed
 * by the one chat parser (api_chat_parse).
 *
 * Not here: sampling, tools, schema or reasoning rules (openai*.c, written
 * once for every dialect), the answer (api_messages_write.c). */
#include "server/api/api_messages.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "server/api/api_dialect.h"

#define EP "/v1/messages"

#define HON OAI_FIELD_HONOURED
#define LAB OAI_FIELD_LABEL
#define REF OAI_FIELD_REFUSED
#define A   "Anthropic"

static const oai_field FIELDS[] = {
    {"model", 0, LAB, A, NULL, "one model is served; answers carry its id"},
    {"max_tokens", 0, HON, A, NULL, "required"},
    {"messages", 0, HON, A, NULL, NULL},
    {"system", 0, HON, A, NULL, NULL},
    {"stop_sequences", 0, HON, A, NULL, NULL},
    {"stream", 0, HON, A, NULL, NULL},
    {"temperature", 0, HON, A, NULL, NULL},
    {"top_p", 0, HON, A, NULL, NULL},
    {"top_k", 0, HON, A, NULL, NULL},
    {"tools", 0, HON, A, NULL, "custom tools (input_schema); built-in tools are a 400"},
    {"tool_choice", 0, HON, A, NULL, NULL},
    {"thinking", 0, HON, A, NULL, "enabled: the thinking budget; disabled: none asked"},
    {"metadata", 0, LAB, A, NULL, "metadata.user_id labels the request"},
    {"service_tier", 0, LAB, A, NULL, NULL},
    {"container", 0, REF, A, NULL, "containers (code execution) are not supported"},
    {"mcp_servers", 0, REF, A, NULL, "MCP servers are not supported: the client runs tools"},
    {"context_management", 0, REF, A, NULL, "context_management is not supported"},
};

const oai_field *api_messages_fields(size_t *n) {
    *n = sizeof FIELDS / sizeof FIELDS[0];
    return FIELDS;
}

static const oai_field MESSAGE[] = {
    {"role", 0, HON, A, NULL, NULL},
    {"content", 0, HON, A, NULL, NULL},
};
static const oai_field TOOL[] = {
    {"name", 0, HON, A, NULL, NULL},
    {"description", 0, HON, A, NULL, NULL},
    {"input_schema", 0, HON, A, NULL, NULL},
    {"type", 0, HON, A, "\"custom\"", "built-in tools are not supported"},
    {"cache_control", 0, LAB, A, NULL, "prefix caching is automatic"},
};

static int bad(oai_error *e, const char *param, const char *code, const char *what) {
    return oai_error_set(e, 400, "invalid_request_error", param, code, "%s %s", param, what);
}

/* ---------------------------------------------------------------------------
 * Content blocks -> chat messages
 * ------------------------------------------------------------------------- */

/* What one message's blocks add up to. */
typedef struct blocks {
    sbuf text, thinking;
    json_t *calls;   /* assistant: tool_use blocks as tool_calls */
    json_t *results; /* user: tool_result blocks as tool messages */
} blocks;

static int tool_use(blocks *b, json_t *blk, const char *param, oai_error *e) {
    json_t *id = json_object_get(blk, "id"), *name = json_object_get(blk, "name");
    json_t *input = json_object_get(blk, "input");
    if (!json_is_string(id) || !json_is_string(name) || !json_is_object(input))
        return bad(e, param, "invalid_value",
                   "must be {type: \"tool_use\", id, name, input (an object)}");
    char *args = json_dumps(input, JSON_COMPACT | JSON_SORT_KEYS);
    if (!args) return api_oom(e);
    json_t *call = json_pack("{s:O, s:s, s:{s:O, s:s}}", "id", id, "type", "function", "function",
                             "name", name, "arguments", args);
    free(args);
    if (!b->calls) b->calls = json_array();
    return api_append_new(b->calls, call, e);
}

/* A tool_result: its content (a string or text blocks); is_error true puts
 * "Error: " before it, so the model reads it as the failure it was. */
static int tool_result(blocks *b, json_t *blk, const char *param, oai_error *e) {
    json_t *id = json_object_get(blk, "tool_use_id"), *err = json_object_get(blk, "is_error");
    if (!json_is_string(id)) return bad(e, param, "invalid_value", "must have a tool_use_id");
    if (err && !json_is_null(err) && !json_is_boolean(err))
        return bad(e, param, "invalid_type", ".is_error must be a boolean");
    json_t *c = json_object_get(blk, "content"), *text;
    static const char *const types[] = {"text", NULL};
    char cp[96];
    snprintf(cp, sizeof cp, "%s.content", param);
    if (!c || json_is_null(c))
        c = json_string("");
    else
        json_incref(c);
    int rc = api_join_text(c, cp, types, &text, e);
    json_decref(c);
    if (rc) return rc;
    if (json_is_true(err)) {
        sbuf s;
        sbuf_init(&s);
        sbuf_adds(&s, "Error: ");
        sbuf_add(&s, json_string_value(text), json_string_length(text));
        json_decref(text);
        text = sbuf_failed(&s) ? NULL : json_stringn(s.p, s.len);
        sbuf_free(&s);
        if (!text) return api_oom(e);
    }
    if (!b->results) b->results = json_array();
    return api_append_new(
        b->results,
        json_pack("{s:s, s:O, s:o}", "role", "tool", "tool_call_id", id, "content", text), e);
}

/* One block, by type; assistant: whether the message is the model's. */
static int add_block(blocks *b, json_t *blk, bool assistant, const char *param, oai_error *e) {
    const char *t = json_string_value(json_object_get(blk, "type"));
    if (!json_is_object(blk) || !t) return bad(e, param, "invalid_type", "must be a content block");
    json_t *text = json_object_get(blk, "text"), *thinking = json_object_get(blk, "thinking");
    if (!strcmp(t, "text")) {
        if (!json_is_string(text)) return bad(e, param, "invalid_type", ".text must be a string");
        sbuf_add(&b->text, json_string_value(text), json_string_length(text));
        return 0;
    }
    if (!strcmp(t, "thinking") && assistant) {
        if (!json_is_string(thinking))
            return bad(e, param, "invalid_type", ".thinking must be a string");
        sbuf_add(&b->thinking, json_string_value(thinking), json_string_length(thinking));
        return 0;
    }
    if (!strcmp(t, "tool_use") && assistant) return tool_use(b, blk, param, e);
    if (!strcmp(t, "tool_result") && !assistant) return tool_result(b, blk, param, e);
    return oai_error_set(e, 400, "invalid_request_error", param, "unsupported_parameter",
                         "%s: %s blocks of type \"%.40s\" are not supported (text, thinking "
                         "and tool_use from the assistant; text and tool_result from the user)",
                         param, assistant ? "assistant" : "user", t);
}

/* The chat messages of one message's blocks: a user's tool results first
 * (each a tool message), then its text; an assistant's text, thinking and
 * calls in one message. */
static int emit(json_t *msgs, blocks *b, bool assistant, oai_error *e) {
    if (sbuf_failed(&b->text) || sbuf_failed(&b->thinking)) return api_oom(e);
    if (b->results && json_array_extend(msgs, b->results)) return api_oom(e);
    bool text = b->text.len || (!b->results && !b->calls);
    if (!assistant && !text) return 0;
    json_t *m = json_pack("{s:s, s:s%}", "role", assistant ? "assistant" : "user", "content",
                          b->text.p ? b->text.p : "", b->text.len);
    if (!m) return api_oom(e);
    if (b->thinking.len &&
        api_set_new(m, "reasoning_content", json_stringn(b->thinking.p, b->thinking.len), e))
        return json_decref(m), TPS_EINVAL;
    if (b->calls && json_object_set(m, "tool_calls", b->calls)) return json_decref(m), api_oom(e);
    return api_append_new(msgs, m, e);
}

static int add_message(json_t *msgs, json_t *m, size_t i, const oai_policy *p, oai_request *r,
                       oai_error *e) {
    char param[48], prefix[56];
    snprintf(param, sizeof param, "messages[%zu]", i);
    snprintf(prefix, sizeof prefix, "%s.", param);
    if (!json_is_object(m)) return bad(e, param, "invalid_type", "must be an object");
    if (oai_check_table(m, API_ROWS(MESSAGE), EP, prefix, p, r, e)) return TPS_EINVAL;
    const char *role = json_string_value(json_object_get(m, "role"));
    if (!role || (strcmp(role, "user") && strcmp(role, "assistant")))
        return bad(e, param, "invalid_value", ".role must be \"user\" or \"assistant\"");
    bool assistant = !strcmp(role, "assistant");
    json_t *c = json_object_get(m, "content");
    if (json_is_string(c))
        return api_append_new(msgs, json_pack("{s:s, s:O}", "role", role, "content", c), e);
    if (!json_is_array(c))
        return bad(e, param, "invalid_type", ".content must be a string or an array of blocks");
    if (json_array_size(c) > API_MAX_PARTS)
        return oai_error_set(e, 400, "invalid_request_error", param, "invalid_value",
                             "%s.content has %zu blocks; at most %d are accepted", param,
                             json_array_size(c), API_MAX_PARTS);
    blocks b = {0};
    sbuf_init(&b.text);
    sbuf_init(&b.thinking);
    size_t k;
    json_t *blk;
    int rc = 0;
    json_array_foreach(c, k, blk) {
        char bp[80];
        snprintf(bp, sizeof bp, "%s.content[%zu]", param, k);
        if ((rc = add_block(&b, blk, assistant, bp, e))) break;
    }
    if (!rc) rc = emit(msgs, &b, assistant, e);
    sbuf_free(&b.text);
    sbuf_free(&b.thinking);
    json_decref(b.calls);
    json_decref(b.results);
    return rc;
}

/* system (a string or text blocks), then the messages. */
static int build_messages(json_t *root, json_t *chat, const oai_policy *p, oai_request *r,
                          oai_error *e) {
    json_t *msgs = json_array(), *sys = json_object_get(root, "system");
    if (api_set_new(chat, "messages", msgs, e)) return TPS_EINVAL;
    if (sys && !json_is_null(sys)) {
        static const char *const types[] = {"text", NULL};
        json_t *text;
        if (api_join_text(sys, "system", types, &text, e)) return TPS_EINVAL;
        if (api_append_new(msgs, json_pack("{s:s, s:o}", "role", "system", "content", text), e))
            return TPS_EINVAL;
    }
    json_t *in = json_object_get(root, "messages");
    if (!json_is_array(in) || !json_array_size(in))
        return oai_error_set(e, 400, "invalid_request_error", "messages",
                             in ? "invalid_type" : "missing_required_parameter",
                             "messages must be a non-empty array of messages");
    if (api_at_most(in, API_MAX_ITEMS, "messages", "messages", e)) return TPS_EINVAL;
    size_t i;
    json_t *m;
    json_array_foreach(in, i, m) {
        if (add_message(msgs, m, i, p, r, e)) return TPS_EINVAL;
    }
    return 0;
}

/* ---------------------------------------------------------------------------
 * Tools, tool_choice, thinking, the rest
 * ------------------------------------------------------------------------- */

/* One custom tool {name, description?, input_schema} as a chat function. */
static json_t *tool_function(json_t *t, const char *param, const char *prefix, const oai_policy *p,
                             oai_request *r, oai_error *e) {
    const char *type = json_string_value(json_object_get(t, "type"));
    if (json_is_object(t) && type && strcmp(type, "custom")) {
        oai_error_set(e, 400, "invalid_request_error", param, "unsupported_parameter",
                      "%s: the built-in tool \"%.40s\" is not supported: only custom "
                      "tools (name, input_schema) run here",
                      param, type);
        return NULL;
    }
    if (!json_is_object(t) || !json_is_string(json_object_get(t, "name")) ||
        !json_is_object(json_object_get(t, "input_schema"))) {
        bad(e, param, "invalid_value", "must be {name, description?, input_schema}");
        return NULL;
    }
    if (oai_check_table(t, API_ROWS(TOOL), EP, prefix, p, r, e)) return NULL;
    json_t *fn = json_pack("{s:O, s:O}", "name", json_object_get(t, "name"), "parameters",
                           json_object_get(t, "input_schema"));
    json_t *d = json_object_get(t, "description");
    if (!fn || (d && json_object_set(fn, "description", d))) {
        json_decref(fn);
        api_oom(e);
        return NULL;
    }
    return fn;
}

/* {type: auto | any | tool (name) | none, disable_parallel_tool_use}. */
static int build_tool_choice(json_t *root, json_t *chat, oai_error *e) {
    json_t *tc = json_object_get(root, "tool_choice");
    if (!tc || json_is_null(tc)) return 0;
    const char *t = json_string_value(json_object_get(tc, "type"));
    json_t *name = json_object_get(tc, "name"),
           *dp = json_object_get(tc, "disable_parallel_tool_use");
    const char *key;
    json_t *v;
    json_object_foreach(tc, key, v) {
        if (strcmp(key, "type") && strcmp(key, "name") && strcmp(key, "disable_parallel_tool_use"))
            return oai_error_set(e, 400, "invalid_request_error", "tool_choice",
                                 "unknown_parameter",
                                 "tool_choice.%.40s is not a field tps "
                                 "takes",
                                 key);
    }
    if (dp && !json_is_null(dp) && !json_is_boolean(dp))
        return bad(e, "tool_choice", "invalid_type",
                   ".disable_parallel_tool_use must be a boolean");
    if (json_is_true(dp) && api_set_new(chat, "parallel_tool_calls", json_false(), e))
        return TPS_EINVAL;
    if (!t) return bad(e, "tool_choice", "invalid_type", "must be an object with a \"type\"");
    if (!strcmp(t, "auto") || !strcmp(t, "none"))
        return api_set_new(chat, "tool_choice", json_string(t), e);
    if (!strcmp(t, "any")) return api_set_new(chat, "tool_choice", json_string("required"), e);
    if (!strcmp(t, "tool") && json_is_string(name))
        return api_set_new(
            chat, "tool_choice",
            json_pack("{s:s, s:{s:O}}", "type", "function", "function", "name", name), e);
    return bad(e, "tool_choice", "invalid_value",
               "must be {type: \"auto\" | \"any\" | \"none\"} or {type: \"tool\", name}");
}

/* thinking: {type: "enabled", budget_tokens} -> the thinking budget and
 * enable_thinking for templates that read it; {type: "disabled"} -> off. */
static int build_thinking(json_t *root, json_t *chat, oai_error *e) {
    json_t *th = json_object_get(root, "thinking");
    if (!th || json_is_null(th)) return 0;
    const char *t = json_string_value(json_object_get(th, "type"));
    json_t *budget = json_object_get(th, "budget_tokens");
    bool on = t && !strcmp(t, "enabled");
    if (!json_is_object(th) || !t || (!on && strcmp(t, "disabled")))
        return bad(e, "thinking", "invalid_value",
                   "must be {type: \"enabled\", budget_tokens} or {type: \"disabled\"}");
    if (on && !json_is_integer(budget))
        return bad(e, "thinking.budget_tokens", "invalid_type", "must be an integer");
    if (api_set_new(chat, "chat_template_kwargs", json_pack("{s:b}", "enable_thinking", on), e))
        return TPS_EINVAL;
    return on ? (json_object_set(chat, "thinking_token_budget", budget) ? api_oom(e) : 0) : 0;
}

static int copy_same(json_t *root, json_t *chat, bool counting, oai_error *e) {
    static const char *const same[] = {"model", "temperature", "top_p", "top_k", "stream"};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        if (api_copy(root, same[i], chat, same[i], e)) return TPS_EINVAL;
    json_t *max = json_object_get(root, "max_tokens");
    if (!counting && (!max || json_is_null(max)))
        return oai_error_set(e, 400, "invalid_request_error", "max_tokens",
                             "missing_required_parameter", "max_tokens is required");
    if (counting && json_is_true(json_object_get(root, "stream")))
        return bad(e, "stream", "invalid_value", "is not taken by /v1/messages/count_tokens");
    if (api_copy(root, "max_tokens", chat, "max_tokens", e)) return TPS_EINVAL;
    return api_copy(root, "stop_sequences", chat, "stop", e);
}

int api_messages_parse(oai_request *r, const char *body, size_t len, bool counting,
                       const oai_policy *p, oai_error *e) {
    memset(r, 0, sizeof *r);
    json_t *root = oai_body_object(body, len, e);
    if (!root) return TPS_EINVAL;
    json_t *chat = json_object();
    int rc = TPS_EINVAL;
    if (!chat) {
        api_oom(e);
    } else if (!oai_check_table(root, API_ROWS(FIELDS), EP, "", p, r, e) &&
               !build_messages(root, chat, p, r, e) && !copy_same(root, chat, counting, e) &&
               !api_build_tools(root, chat, tool_function, p, r, e) &&
               !build_tool_choice(root, chat, e) && !build_thinking(root, chat, e)) {
        rc = api_chat_parse(r, chat, OAI_DIALECT_MESSAGES, e);
        chat = NULL; /* taken */
    }
    json_decref(chat);
    json_decref(root);
    return rc;
}
