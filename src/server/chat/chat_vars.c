/* The chat request as template values (chat_prompt.h's chat_request_vars
 * and chat_json_value): messages, tool calls and their arguments, tools,
 * the request's variables. Shared by the renderer (chat_prompt.c) and the
 * request adapters' probes (chat_adapt.c); calls neither. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/chat/chat_prompt.h"
#include "server/chat/chat_tools.h"

/* ---------------------------------------------------------------------------
 * JSON as template values
 * ------------------------------------------------------------------------- */

jinja_val chat_json_value(jinja_run *r, const json_t *j) {
    switch (json_typeof(j)) {
    case JSON_NULL:
        return jinja_none();
    case JSON_TRUE:
        return jinja_bool(true);
    case JSON_FALSE:
        return jinja_bool(false);
    case JSON_INTEGER:
        return jinja_int(json_integer_value(j));
    case JSON_REAL:
        return jinja_float(json_real_value(j));
    case JSON_STRING: /* copied: parsed arguments are freed before the render */
        return jinja_str(r, json_string_value(j), json_string_length(j));
    case JSON_ARRAY: {
        jinja_val l = jinja_list_new(r);
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v) {
            jinja_list_push(r, l, chat_json_value(r, v));
        }
        return l;
    }
    default: {
        jinja_val m = jinja_map_new(r);
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)j, k, v) {
            jinja_map_set(r, m, k, strlen(k), chat_json_value(r, v));
        }
        return m;
    }
    }
}

int chat_fail(chat_error *e, int status, const char *param, const char *fmt, const char *a,
              const char *b) {
    e->status = status;
    e->param = param;
    e->code = "invalid_value";
    snprintf(e->msg, sizeof e->msg, fmt, a, b);
    return status >= 500 ? TPS_ENOMEM : TPS_EINVAL;
}

/* {id, type, function: {name, arguments}}: keys in the order sent, the
 * arguments string parsed into the object templates expect (vLLM). */
static int call_value(jinja_run *r, const json_t *call, size_t i, size_t k, bool args_text,
                      jinja_val *out, chat_error *e) {
    jinja_val c = jinja_map_new(r);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)call, key, v) {
        if (strcmp(key, "function") || !json_is_object(v)) {
            jinja_map_set(r, c, key, strlen(key), chat_json_value(r, v));
            continue;
        }
        jinja_val fn = jinja_map_new(r);
        const char *fk;
        json_t *fv;
        json_object_foreach(v, fk, fv) {
            if (strcmp(fk, "arguments") || !json_is_string(fv) || args_text) {
                jinja_map_set(r, fn, fk, strlen(fk), chat_json_value(r, fv));
                continue;
            }
            json_error_t je;
            json_t *args =
                json_loadb(json_string_value(fv), json_string_length(fv), JSON_DECODE_ANY, &je);
            if (!args) {
                char where[96];
                snprintf(where, sizeof where, "messages[%zu].tool_calls[%zu].function.arguments", i,
                         k);
                return chat_fail(e, 400, "messages", "%s is not valid JSON: %s", where, je.text);
            }
            jinja_map_set(r, fn, fk, strlen(fk), chat_json_value(r, args));
            json_decref(args);
        }
        jinja_map_set(r, c, key, strlen(key), fn);
    }
    *out = c;
    return 0;
}

/* content: a string, null ("") or text parts joined with "\n" (vLLM) */
static jinja_val content_value(jinja_run *r, const json_t *c) {
    if (json_is_string(c)) return jinja_str(r, json_string_value(c), json_string_length(c));
    if (!json_is_array(c)) return jinja_str_ref("", 0);
    sbuf b;
    sbuf_init(&b);
    size_t k;
    json_t *part;
    json_array_foreach(c, k, part) {
        json_t *text = json_object_get(part, "text");
        if (!json_is_string(text)) continue;
        if (k) sbuf_adds(&b, "\n");
        sbuf_add(&b, json_string_value(text), json_string_length(text));
    }
    jinja_val v = jinja_str(r, b.p ? b.p : "", b.len);
    sbuf_free(&b);
    return v;
}

static int message_value(jinja_run *r, const json_t *m, size_t i, bool args_text, jinja_val *out,
                         chat_error *e) {
    jinja_val t = jinja_map_new(r);
    json_t *role = json_object_get(m, "role");
    jinja_map_set(r, t, "role", 4, chat_json_value(r, role ? role : json_null()));
    jinja_map_set(r, t, "content", 7, content_value(r, json_object_get(m, "content")));
    static const char *const keys[] = {"reasoning_content", "name", "tool_call_id"};
    for (size_t k = 0; k < 3; k++) {
        json_t *v = json_object_get(m, keys[k]);
        if (json_is_string(v)) jinja_map_set(r, t, keys[k], strlen(keys[k]), chat_json_value(r, v));
    }
    json_t *calls = json_object_get(m, "tool_calls");
    if (json_is_array(calls) && json_array_size(calls)) {
        jinja_val l = jinja_list_new(r);
        size_t k;
        json_t *call;
        json_array_foreach(calls, k, call) {
            jinja_val c;
            if (!json_is_object(call)) continue;
            if (call_value(r, call, i, k, args_text, &c, e)) return TPS_EINVAL;
            jinja_list_push(r, l, c);
        }
        jinja_map_set(r, t, "tool_calls", 10, l);
    }
    *out = t;
    return 0;
}

/* ---------------------------------------------------------------------------
 * The variables of a render
 * ------------------------------------------------------------------------- */

/* `tools` as the template takes it (chat_adapt): FireFunction's
 * `functions` and `datetime` beside it, as llama.cpp passes them (the
 * tools' JSON with indent 2, "" without tools; "%b %d %Y %H:%M:%S GMT"). */
static jinja_val tools_value(jinja_run *r, const chat_request *rq) {
    const chat_adapt *a = rq->adapt;
    if (a && a->functions_var) {
        char *s = rq->tools ? json_dumps(rq->tools, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        jinja_set(r, "functions", jinja_str(r, s ? s : "", s ? strlen(s) : 0));
        free(s);
        char when[64];
        time_t now = rq->now ? rq->now : time(NULL);
        struct tm tm;
        strftime(when, sizeof when, "%b %d %Y %H:%M:%S GMT", gmtime_r(&now, &tm));
        jinja_set(r, "datetime", jinja_str(r, when, strlen(when)));
        return jinja_none();
    }
    return rq->tools ? chat_json_value(r, rq->tools) : jinja_none();
}

int chat_request_vars(jinja_run *r, const chat_request *rq, const char *bos, const char *eos,
                      chat_error *err) {
    jinja_val msgs = jinja_list_new(r);
    size_t i;
    json_t *m;
    json_array_foreach(rq->messages, i, m) {
        jinja_val v;
        if (message_value(r, m, i, rq->adapt && rq->adapt->args_text, &v, err)) return TPS_EINVAL;
        jinja_list_push(r, msgs, v);
    }
    jinja_set(r, "messages", msgs);
    jinja_set(r, "tools", tools_value(r, rq));
    jinja_set(r, "documents", jinja_none());
    jinja_set(r, "add_generation_prompt", jinja_bool(rq->add_generation_prompt));
    if (rq->reasoning_effort)
        jinja_set(r, "reasoning_effort",
                  jinja_str(r, rq->reasoning_effort, strlen(rq->reasoning_effort)));
    jinja_set(r, "bos_token", jinja_str(r, bos ? bos : "", bos ? strlen(bos) : 0));
    jinja_set(r, "eos_token", jinja_str(r, eos ? eos : "", eos ? strlen(eos) : 0));
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)rq->kwargs, k, v) {
        static const char *const reserved[] = {"messages", "tools", "documents",
                                               "add_generation_prompt", NULL};
        for (size_t q = 0; reserved[q]; q++)
            if (!strcmp(k, reserved[q]))
                return chat_fail(err, 400, "chat_template_kwargs",
                                 "chat_template_kwargs.%s: %s is set by the request itself", k,
                                 reserved[q]);
        jinja_set(r, k, chat_json_value(r, v));
    }
    return 0;
}
