/* Tool calling's request fields (chat): tools (each {"type": "function",
 * "function": {name, description, parameters, strict}}), tool_choice and
 * parallel_tool_calls. The schemas are kept as given; the server compiles
 * them to a grammar when tool_choice asks for a call.
 *
 * Not here: the calls in earlier messages (openai.c), writing tools into
 * the prompt and parsing calls out of the answer (tools.c). */
#include "server/api/openai_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool tool_name_ok(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 64) return false;
    for (size_t i = 0; i < n; i++)
        if (!(s[i] == '_' || s[i] == '-' || (s[i] >= 'a' && s[i] <= 'z') ||
              (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9')))
            return false;
    return true;
}

/* tools[i]: {"type": "function", "function": {name, description,
 * parameters, strict}}, appended to r->tools (room for it allocated). */
static int parse_tool(json_t *t, size_t i, oai_request *r, oai_error *e) {
    char param[48];
    snprintf(param, sizeof param, "tools[%zu]", i);
    json_t *fn = json_object_get(t, "function");
    json_t *type = json_object_get(t, "type");
    if (!json_is_object(t) || !json_is_string(type) ||
        strcmp(json_string_value(type), "function") || !json_is_object(fn))
        return oai_error_set(e, 400, "invalid_request_error", param, "invalid_value",
                             "%s must be {\"type\": \"function\", \"function\": "
                             "{name, description, parameters}}",
                             param);
    json_t *name = json_object_get(fn, "name"), *desc = json_object_get(fn, "description");
    json_t *params = json_object_get(fn, "parameters"), *strict = json_object_get(fn, "strict");
    if (!json_is_string(name) || !tool_name_ok(json_string_value(name)))
        return oai_error_set(e, 400, "invalid_request_error", param, "invalid_value",
                             "%s.function.name must be 1 to 64 letters, digits, _ or -", param);
    for (size_t k = 0; k < r->n_tools; k++)
        if (!strcmp(r->tools[k].name, json_string_value(name)))
            return oai_error_set(e, 400, "invalid_request_error", param, "invalid_value",
                                 "%s: the function '%s' is defined twice", param,
                                 json_string_value(name));
    if ((desc && !json_is_null(desc) && !json_is_string(desc)) ||
        (params && !json_is_null(params) && !json_is_object(params)) ||
        (strict && !json_is_null(strict) && !json_is_boolean(strict)))
        return oai_error_set(e, 400, "invalid_request_error", param, "invalid_type",
                             "%s.function: description must be a string, parameters a "
                             "JSON schema object, strict a boolean",
                             param);
    r->tools[r->n_tools++] =
        (oai_tool){.name = json_string_value(name),
                   .description = json_is_string(desc) ? json_string_value(desc) : NULL,
                   .parameters = json_is_object(params) ? params : NULL};
    return 0;
}

/* tool_choice: "none", "auto", "required" or a named function in tools. */
static int parse_tool_choice(json_t *o, oai_request *r, oai_error *e) {
    json_t *tc = json_object_get(o, "tool_choice");
    r->tool_choice = r->n_tools ? TOOL_CHOICE_AUTO : TOOL_CHOICE_NONE;
    if (!tc || json_is_null(tc)) return 0;
    if (json_is_string(tc)) {
        const char *v = json_string_value(tc);
        if (!strcmp(v, "none")) {
            r->tool_choice = TOOL_CHOICE_NONE;
            return 0;
        }
        if (!strcmp(v, "auto"))
            r->tool_choice = TOOL_CHOICE_AUTO;
        else if (!strcmp(v, "required"))
            r->tool_choice = TOOL_CHOICE_REQUIRED;
        else
            return oai_bad(e, "tool_choice", "%s must be \"none\", \"auto\", \"required\" or %s",
                           "{\"type\": \"function\", \"function\": {\"name\": ...}}");
    } else {
        json_t *fn = json_object_get(tc, "function");
        json_t *name = json_object_get(fn, "name");
        if (!json_is_object(tc) || !json_is_string(name))
            return oai_bad(e, "tool_choice", "%s must be \"none\", \"auto\", \"required\" or %s",
                           "{\"type\": \"function\", \"function\": {\"name\": ...}}");
        r->tool_choice = TOOL_CHOICE_NAMED;
        r->tool_name = json_string_value(name);
        bool found = false;
        for (size_t k = 0; k < r->n_tools && !found; k++)
            found = !strcmp(r->tools[k].name, r->tool_name);
        if (!found)
            return oai_error_set(e, 400, "invalid_request_error", "tool_choice", "invalid_value",
                                 "tool_choice names '%.64s', which is not in tools", r->tool_name);
    }
    if (!r->n_tools)
        return oai_error_set(e, 400, "invalid_request_error", "tool_choice", "invalid_value",
                             "tool_choice asks for tool calls but tools is empty");
    return 0;
}

int oai_parse_tools(json_t *o, oai_request *r, oai_error *e) {
    json_t *tools = json_object_get(o, "tools");
    r->parallel_tool_calls = true;
    int rc;
    if (tools && !json_is_null(tools)) {
        if (!json_is_array(tools)) return oai_bad(e, "tools", "%s must be an array of tools%s", "");
        if (json_array_size(tools) > TOOLS_MAX)
            return oai_error_set(e, 400, "invalid_request_error", "tools", "invalid_value",
                                 "tools has %zu entries; at most %d", json_array_size(tools),
                                 TOOLS_MAX);
        r->tools = calloc(json_array_size(tools) + 1, sizeof *r->tools);
        if (!r->tools) return oai_oom(e);
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t) {
            if ((rc = parse_tool(t, i, r, e))) return rc;
        }
    }
    if ((rc = oai_get_bool(o, "parallel_tool_calls", &r->parallel_tool_calls, e)) < 0) return rc;
    return parse_tool_choice(o, r, e);
}
