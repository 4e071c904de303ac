/* OpenAI request parsing (see openai.h): the entry point, the prompt
 * (completions) and the messages (chat). Every field is read through the
 * typed getters (openai_get.c), which name the field in the 400 when its
 * type or value is wrong; null counts as absent, as in the OpenAI API. The
 * other fields' parsers live one file a concern (openai_internal.h lists
 * them).
 *
 * Not here: which fields exist (openai_fields.c), rendering messages with
 * the chat template (the server does that), HTTP. */
#include "server/api/openai.h"

#include "server/api/openai_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/free_all.h"

#define MAX_PROMPT_IDS (1u << 20) /* more ids than any context; bounds the copy */

static int bad(oai_error *e, const char *param, const char *fmt, const char *detail) {
    return oai_bad(e, param, fmt, detail);
}

/* ---------------------------------------------------------------------------
 * Messages' tool calls (chat)
 * ------------------------------------------------------------------------- */

/* An assistant message's tool_calls: each {id, type: "function",
 * function: {name, arguments: string}}. */
static int check_tool_calls(json_t *calls, size_t i, oai_error *e) {
    char param[48];
    snprintf(param, sizeof param, "messages[%zu].tool_calls", i);
    if (!json_is_array(calls)) return oai_bad_type(e, param, "an array");
    size_t k;
    json_t *c;
    json_array_foreach(calls, k, c) {
        json_t *fn = json_object_get(c, "function");
        if (!json_is_object(c) || !json_is_object(fn) ||
            !json_is_string(json_object_get(fn, "name")) ||
            !json_is_string(json_object_get(fn, "arguments")))
            return oai_error_set(e, 400, "invalid_request_error", param, "invalid_value",
                                 "%s[%zu] must be {id, type: \"function\", function: {name, "
                                 "arguments (a JSON string)}}",
                                 param, k);
    }
    return 0;
}

/* ---------------------------------------------------------------------------
 * Prompt (completions) and messages (chat)
 * ------------------------------------------------------------------------- */

static int parse_ids(json_t *arr, oai_request *r, oai_error *e) {
    size_t n = json_array_size(arr);
    if (n > MAX_PROMPT_IDS)
        return oai_error_set(e, 400, "invalid_request_error", "prompt", "invalid_value",
                             "prompt has %zu token ids; at most %u are accepted", n,
                             MAX_PROMPT_IDS);
    r->prompt_ids = malloc((n ? n : 1) * sizeof *r->prompt_ids);
    if (!r->prompt_ids) return oai_oom(e);
    int rc = oai_token_ids(arr, "prompt", "a non-negative token id", r->prompt_ids, e);
    if (rc) return rc;
    r->n_prompt_ids = n;
    r->prompt_is_ids = true;
    return 0;
}

static int parse_prompt(json_t *o, oai_request *r, oai_error *e) {
    json_t *p;
    int rc = oai_get_required(o, "prompt", &p, e);
    if (rc) return rc;
    if (json_is_string(p)) {
        r->prompt = json_string_value(p);
        r->prompt_len = json_string_length(p);
        return 0;
    }
    if (!json_is_array(p))
        return bad(e, "prompt",
                   "%s must be a string, an array of token ids, or a one-element "
                   "array of either%s",
                   "");
    json_t *first = json_array_get(p, 0);
    if (first && (json_is_string(first) || json_is_array(first))) {
        if (json_array_size(p) != 1)
            return oai_error_set(e, 400, "invalid_request_error", "prompt", "unsupported_parameter",
                                 "batched prompts (%zu) are not supported yet: send one prompt "
                                 "per request",
                                 json_array_size(p));
        if (json_is_string(first)) {
            r->prompt = json_string_value(first);
            r->prompt_len = json_string_length(first);
            return 0;
        }
        return parse_ids(first, r, e);
    }
    return parse_ids(p, r, e);
}

/* content: a string, null, or an array of {"type": "text", "text": ...}
 * parts (joined). Returns the (offset, length) in r->parts via *off and *len
 * when joined, or the borrowed string in *s. */
static int parse_content(json_t *c, size_t i, sbuf *parts, const char **s, size_t *off, size_t *len,
                         oai_error *e) {
    char param[48];
    snprintf(param, sizeof param, "messages[%zu].content", i);
    *s = NULL;
    if (!c || json_is_null(c)) {
        *s = "";
        *len = 0;
        return 0;
    }
    if (json_is_string(c)) {
        *s = json_string_value(c);
        *len = json_string_length(c);
        return 0;
    }
    if (!json_is_array(c)) return oai_bad_type(e, param, "a string or an array of content parts");
    *off = parts->len;
    size_t k;
    json_t *part;
    json_array_foreach(c, k, part) {
        json_t *type = json_object_get(part, "type");
        json_t *text = json_object_get(part, "text");
        if (!json_is_object(part) || !json_is_string(type))
            return oai_error_set(e, 400, "invalid_request_error", param, "invalid_type",
                                 "%s[%zu] must be an object with a \"type\"", param, k);
        if (strcmp(json_string_value(type), "text") != 0)
            return oai_error_set(e, 400, "invalid_request_error", param, "unsupported_parameter",
                                 "%s[%zu]: content parts of type \"%s\" are not supported "
                                 "(only \"text\")",
                                 param, k, json_string_value(type));
        if (!json_is_string(text))
            return oai_error_set(e, 400, "invalid_request_error", param, "invalid_type",
                                 "%s[%zu].text must be a string", param, k);
        sbuf_add(parts, json_string_value(text), json_string_length(text));
    }
    *len = parts->len - *off;
    return 0;
}

/* vLLM's name for an answer's thinking sent back (opencode sends it):
 * `reasoning` reaches the template as reasoning_content; both given must
 * agree. */
static int reasoning_alias(json_t *msg, size_t i, oai_error *e) {
    json_t *r = json_object_get(msg, "reasoning");
    if (!json_is_string(r)) return 0; /* absent or null (the type is checked before) */
    json_t *rc = json_object_get(msg, "reasoning_content");
    if (json_is_string(rc) && !json_equal(r, rc))
        return oai_error_set(e, 400, "invalid_request_error", "messages", "invalid_value",
                             "messages[%zu] has reasoning and reasoning_content that differ: "
                             "they name one thing (vLLM's and llama-server's), give one",
                             i);
    if (!json_is_string(rc) && json_object_set(msg, "reasoning_content", r)) return oai_oom(e);
    return 0;
}

static int parse_messages(json_t *o, oai_request *r, oai_error *e) {
    json_t *m;
    int rc = oai_get_required(o, "messages", &m, e);
    if (rc) return rc;
    if (!json_is_array(m) || json_array_size(m) == 0)
        return oai_bad(e, "messages", "%s must be %s", "a non-empty array");
    size_t n = json_array_size(m);
    r->msgs = calloc(n, sizeof *r->msgs);
    r->msg_tool_calls = calloc(n, sizeof *r->msg_tool_calls);
    size_t *offs = calloc(n, sizeof *offs);
    bool *joined = calloc(n, sizeof *joined);
    sbuf parts;
    sbuf_init(&parts);
    if (!r->msgs || !r->msg_tool_calls || !offs || !joined) {
        rc = oai_oom(e);
        goto done;
    }
    size_t i;
    json_t *msg;
    json_array_foreach(m, i, msg) {
        char param[48];
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(msg)) {
            rc = oai_bad_type(e, param, "an object");
            goto done;
        }
        json_t *role = json_object_get(msg, "role");
        if (!json_is_string(role) || json_string_length(role) == 0 ||
            strlen(json_string_value(role)) != json_string_length(role)) {
            snprintf(param, sizeof param, "messages[%zu].role", i);
            rc = oai_bad_type(e, param, "a non-empty string");
            goto done;
        }
        r->msgs[i].role = json_string_value(role);
        const char *s;
        if ((rc = parse_content(json_object_get(msg, "content"), i, &parts, &s, &offs[i],
                                &r->msgs[i].content_len, e)))
            goto done;
        r->msgs[i].content = s;
        joined[i] = s == NULL;
        static const char *const text_fields[] = {"name", "tool_call_id", "reasoning_content",
                                                  "reasoning"};
        for (size_t k = 0; k < 4; k++) {
            json_t *v = json_object_get(msg, text_fields[k]);
            if (v && !json_is_null(v) && !json_is_string(v)) {
                snprintf(param, sizeof param, "messages[%zu].%s", i, text_fields[k]);
                rc = oai_bad_type(e, param, "a string");
                goto done;
            }
        }
        if ((rc = reasoning_alias(msg, i, e))) goto done;
        json_t *calls = json_object_get(msg, "tool_calls");
        if (calls && !json_is_null(calls)) {
            if ((rc = check_tool_calls(calls, i, e))) goto done;
            r->msg_tool_calls[i] = calls;
        }
    }
    if (sbuf_failed(&parts)) {
        rc = oai_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        goto done;
    }
    r->n_msgs = n;
    r->parts = parts.p; /* the pointers below stay valid: no more appends */
    parts.p = NULL;
    for (i = 0; i < n; i++) /* no part at all (content []): parts stays NULL */
        if (joined[i]) r->msgs[i].content = r->parts ? r->parts + offs[i] : "";
done:
    sbuf_free(&parts);
    free(offs);
    free(joined);
    return rc;
}

/* chat_template_kwargs (an object: its keys become template variables),
 * add_generation_prompt and continue_final_message (vLLM's: both true is
 * a 400; continue_final_message alone turns the generation prompt off). */
static int parse_template_fields(json_t *o, oai_request *r, oai_error *e) {
    json_t *kw = json_object_get(o, "chat_template_kwargs");
    if (kw && !json_is_null(kw)) {
        if (!json_is_object(kw))
            return bad(e, "chat_template_kwargs", "%s must be an object%s", "");
        r->template_kwargs = kw;
    }
    bool gen = true, given_gen = false;
    int rc;
    if ((rc = oai_get_bool(o, "add_generation_prompt", &gen, e)) < 0) return rc;
    given_gen = rc == 0;
    if ((rc = oai_get_bool(o, "continue_final_message", &r->continue_final_message, e)) < 0)
        return rc;
    if (r->continue_final_message && gen && given_gen)
        return oai_error_set(e, 400, "invalid_request_error", "continue_final_message",
                             "invalid_value",
                             "continue_final_message and add_generation_prompt cannot both be "
                             "true: the last message is continued, no new one is opened");
    r->add_generation_prompt = gen && !r->continue_final_message;
    return 0;
}

/* ---------------------------------------------------------------------------
 * Entry point
 * ------------------------------------------------------------------------- */

chat_request oai_chat_inputs(const oai_request *r) {
    json_t *root = r->json;
    return (chat_request){
        .messages = json_object_get(root, "messages"),
        .tools = r->tool_choice != TOOL_CHOICE_NONE ? json_object_get(root, "tools") : NULL,
        .kwargs = r->template_kwargs,
        .add_generation_prompt = r->add_generation_prompt,
        .continue_final_message = r->continue_final_message,
        .reasoning_effort = r->reasoning_effort,
    };
}

void oai_request_free(oai_request *r) {
    if (!r) return;
    TPS_FREE_ALL(r->prompt_ids, r->logit_bias, r->grammar, r->msgs, r->msg_tool_calls, r->tools,
                 r->parts, r->echo);
    if (r->history) json_decref((json_t *)r->history);
    if (r->json) json_decref((json_t *)r->json);
    memset(r, 0, sizeof *r);
}

/* The stream fields: stream, stream_options {include_usage}. */
static int parse_stream(json_t *root, oai_request *r, oai_error *e) {
    int rc;
    if ((rc = oai_get_bool(root, "stream", &r->stream, e)) < 0) return rc;
    json_t *so = json_object_get(root, "stream_options");
    if (!so || json_is_null(so)) return 0;
    if (!json_is_object(so)) return bad(e, "stream_options", "%s must be an object%s", "");
    if ((rc = oai_get_bool(so, "include_usage", &r->include_usage, e)) < 0) {
        snprintf(e->param, sizeof e->param, "stream_options.include_usage");
        return rc;
    }
    return 0;
}

/* Every field of root, r->kind's, into r (set up by the caller). */
static int parse_fields(json_t *root, oai_request *r, const oai_policy *p, oai_error *e) {
    oai_kind kind = r->kind;
    json_t *model = json_object_get(root, "model");
    if (model && !json_is_null(model)) {
        if (!json_is_string(model)) return bad(e, "model", "%s must be a string%s", "");
        r->model = json_string_value(model);
    }
    int rc;
    if ((rc = oai_check_fields(root, kind, p, r, e))) return rc;
    if ((rc = oai_parse_n(root, r, e))) return rc;
    if ((rc = kind == OAI_CHAT ? parse_messages(root, r, e) : parse_prompt(root, r, e))) return rc;
    if ((rc = oai_parse_sampling_fields(root, r, e))) return rc;
    if ((rc = oai_parse_constraint(root, r, e))) return rc;
    if (kind == OAI_CHAT && (rc = oai_parse_tools(root, r, e))) return rc;
    if (kind == OAI_CHAT && (rc = oai_parse_reasoning(root, r, e))) return rc;
    if (kind == OAI_CHAT && (rc = parse_template_fields(root, r, e))) return rc;
    if (r->grammar &&
        (r->tool_choice == TOOL_CHOICE_REQUIRED || r->tool_choice == TOOL_CHOICE_NAMED))
        return oai_error_set(e, 400, "invalid_request_error", "tool_choice", "invalid_value",
                             "tool_choice \"required\" or a named function constrains the output "
                             "to tool calls; it cannot be combined with response_format, grammar "
                             "or regex");
    return parse_stream(root, r, e);
}

static void request_init(oai_request *r, oai_kind kind) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->n = 1;
    r->skip_special = true;
    r->think_budget = -1;
    sampler_params_default(&r->sampling);
}

static int parse_owned(oai_request *r, oai_kind kind, json_t *root, const oai_policy *p,
                       oai_error *e) {
    request_init(r, kind);
    r->json = root;
    if (!parse_fields(root, r, p, e)) return 0;
    oai_request_free(r);
    r->kind = kind;
    return TPS_EINVAL;
}

int oai_parse_root(oai_request *r, struct json_t *root, const oai_policy *p, oai_error *e) {
    return parse_owned(r, OAI_CHAT, root, p, e);
}

int oai_parse_ex(oai_request *r, oai_kind kind, const char *body, size_t len, const oai_policy *p,
                 oai_error *e) {
    request_init(r, kind);
    json_t *root = oai_body_object(body, len, e);
    return root ? parse_owned(r, kind, root, p, e) : TPS_EINVAL;
}

int oai_parse(oai_request *r, oai_kind kind, const char *body, size_t len, oai_error *e) {
    return oai_parse_ex(r, kind, body, len, NULL, e);
}
