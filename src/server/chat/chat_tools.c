/* Writing tools into the messages of a template that does not (see
 * chat_tools.h). */
#include "server/chat/chat_tools.h"

#include <stdlib.h>
#include <string.h>

/* A message's content as text: a string, or its text parts joined with
 * "\n" (vLLM's rule, as chat_prompt.c converts it). */
static void content_text(const json_t *m, sbuf *b) {
    json_t *c = json_object_get(m, "content");
    if (json_is_string(c)) {
        sbuf_add(b, json_string_value(c), json_string_length(c));
        return;
    }
    size_t k;
    json_t *part;
    json_array_foreach(c, k, part) {
        json_t *t = json_object_get(part, "text");
        if (!json_is_string(t)) continue;
        if (k) sbuf_adds(b, "\n");
        sbuf_add(b, json_string_value(t), json_string_length(t));
    }
}

static bool role_is(const json_t *m, const char *role) {
    json_t *r = json_object_get(m, "role");
    return json_is_string(r) && !strcmp(json_string_value(r), role);
}

static void set_content(json_t *m, sbuf *b) {
    json_object_set_new(m, "content", json_stringn(b->p ? b->p : "", b->len));
}

/* An assistant message's calls appended to its content; a tool result as
 * the format's turn (when results). */
static void rewrite_turn(json_t *m, tool_format f, bool results) {
    json_t *calls = json_object_get(m, "tool_calls");
    sbuf b;
    sbuf_init(&b);
    content_text(m, &b);
    if (json_array_size(calls)) {
        if (b.len) sbuf_adds(&b, "\n");
        for (size_t k = 0; k < json_array_size(calls); k++) {
            json_t *fn = json_object_get(json_array_get(calls, k), "function");
            const char *name = json_string_value(json_object_get(fn, "name"));
            tools_render_call(f, name ? name : "",
                              json_string_value(json_object_get(fn, "arguments")), k == 0,
                              k + 1 == json_array_size(calls), &b);
        }
        set_content(m, &b);
        json_object_del(m, "tool_calls");
    } else if (results && role_is(m, "tool")) {
        sbuf r;
        sbuf_init(&r);
        tools_render_result(f, b.p ? b.p : "", b.len, &r);
        set_content(m, &r);
        json_object_set_new(m, "role", json_string(tools_result_role(f)));
        sbuf_free(&r);
    }
    sbuf_free(&b);
}

/* The request's tools as oai_tool rows (strings borrowed from tools). */
static oai_tool *tool_rows(const json_t *tools, size_t *n) {
    oai_tool *t = calloc(json_array_size(tools) + 1, sizeof *t);
    if (!t) return NULL;
    size_t i;
    json_t *v;
    *n = 0;
    json_array_foreach(tools, i, v) {
        json_t *fn = json_object_get(v, "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        if (!name) continue;
        json_t *params = json_object_get(fn, "parameters");
        t[(*n)++] = (oai_tool){.name = name,
                               .description = json_string_value(json_object_get(fn, "description")),
                               .parameters = json_is_object(params) ? params : NULL};
    }
    return t;
}

/* Where the list goes in its turn: after the system text (a blank line
 * between), before the user's (Mistral's [AVAILABLE_TOOLS], no blank), or
 * before it with a blank line (a system turn folded into the user's). */
typedef enum { LIST_AFTER = 0, LIST_BEFORE, LIST_BEFORE_PARA } list_at;

/* The tool list into messages[at]. */
static bool add_list(json_t *msgs, size_t at, const json_t *tools, tool_format f, list_at where) {
    size_t n = 0;
    oai_tool *rows = tool_rows(tools, &n);
    if (!rows) return false;
    json_t *m = json_array_get(msgs, at);
    sbuf b, list;
    sbuf_init(&b);
    sbuf_init(&list);
    content_text(m, &b);
    tools_render_list(f, rows, n, &list);
    sbuf out;
    sbuf_init(&out);
    if (where == LIST_AFTER) {
        sbuf_add(&out, b.p, b.len);
        if (b.len) sbuf_adds(&out, "\n\n");
        sbuf_add(&out, list.p, list.len);
    } else {
        sbuf_add(&out, list.p, list.len);
        if (where == LIST_BEFORE_PARA && b.len) sbuf_adds(&out, "\n\n");
        sbuf_add(&out, b.p, b.len);
    }
    bool ok = !sbuf_failed(&out);
    set_content(m, &out);
    sbuf_free(&b);
    sbuf_free(&list);
    sbuf_free(&out);
    free(rows);
    return ok;
}

json_t *chat_tools_inject(const json_t *messages, const json_t *tools, tool_format f, bool history,
                          bool results, bool system_ok, tps_err *err) {
    json_t *out = json_array();
    if (!out) return tps_fail(err, TPS_ENOMEM, "out of memory"), NULL;
    bool sys_list = tools && system_ok && !tools_list_before_user(f);
    if (sys_list && !role_is(json_array_get(messages, 0), "system"))
        json_array_append_new(out, json_pack("{s:s,s:s}", "role", "system", "content", ""));
    size_t i, last_user = SIZE_MAX, first_user = SIZE_MAX;
    json_t *m;
    json_array_foreach(messages, i, m) {
        json_t *c = json_copy((json_t *)m);
        if (!c) break;
        if (history) rewrite_turn(c, f, results);
        if (role_is(c, "user")) last_user = json_array_size(out);
        if (role_is(c, "user") && first_user == SIZE_MAX) first_user = last_user;
        json_array_append_new(out, c);
    }
    list_at where = sys_list ? LIST_AFTER : system_ok ? LIST_BEFORE : LIST_BEFORE_PARA;
    size_t at = sys_list ? 0 : system_ok ? last_user : first_user;
    if (json_array_size(out) < json_array_size(messages) ||
        (tools && at != SIZE_MAX && !add_list(out, at, tools, f, where))) {
        json_decref(out);
        return tps_fail(err, TPS_ENOMEM, "out of memory writing the tools into the prompt"), NULL;
    }
    return out;
}
