/* Request adapters (chat_prompt.h's chat_adapt): how a template that does
 * not take OpenAI's shapes is fed, found at load by rendering sample
 * conversations, the way llama.cpp's minja finds a template's
 * capabilities (a system turn, tools, tool-call arguments as an object)
 * by trying them. A probe that fails both ways changes nothing: the
 * template's own error reaches the request as it would have.
 *
 * Not here: applying them (chat_prompt.c's variables, chat_tools.c's
 * list), the tool-call syntax (tools_table.c). */
#include <string.h>

#include "server/chat/chat_prompt.h"

static const char probe_user[] = "[{\"role\":\"user\",\"content\":\"What is the weather in "
                                 "Paris?\"}]";
static const char probe_system[] =
    "[{\"role\":\"system\",\"content\":\"You are a helpful assistant.\"},"
    "{\"role\":\"user\",\"content\":\"What is the weather in Paris?\"}]";
/* one call with a 9-character id (Mistral's rule), its result, a user turn */
static const char probe_call[] =
    "[{\"role\":\"user\",\"content\":\"What is the weather in Paris?\"},"
    "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"a1b2c3d4e\","
    "\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
    "\"arguments\":\"{\\\"city\\\": \\\"Paris\\\"}\"}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"a1b2c3d4e\",\"name\":\"get_weather\","
    "\"content\":\"7 degrees\"}]";
static const char probe_tools[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
    "\"description\":\"The weather in a city.\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\",\"description\":\"The city.\"}},"
    "\"required\":[\"city\"]}}}]";

/* Renders t on the conversation msgs (JSON text) with the tools (NULL:
 * none) as adapter a feeds them: whether it rendered. */
static bool renders(const jinja_tpl *t, const char *msgs, const char *tools, const chat_adapt *a) {
    json_t *m = json_loads(msgs, 0, NULL), *tl = tools ? json_loads(tools, 0, NULL) : NULL;
    jinja_limits lim;
    jinja_limits_default(&lim);
    lim.max_memory = CHAT_RENDER_MAX_MEMORY;
    jinja_run *r = m ? jinja_run_new(&lim) : NULL;
    chat_request rq = {.messages = m, .tools = tl, .add_generation_prompt = true, .adapt = a};
    chat_error ce;
    bool ok = false;
    if (r && !chat_request_vars(r, &rq, "", "", &ce)) {
        sbuf out;
        sbuf_init(&out);
        jinja_error je;
        ok = !jinja_render(r, t, &out, &je) && !sbuf_failed(&out);
        sbuf_free(&out);
    }
    jinja_run_free(r);
    json_decref(m);
    json_decref(tl);
    return ok;
}

/* Which shape of `tools` the template writes: OpenAI's, FireFunction's
 * `functions` text, or none it can (it fails with a tool, not without). */
static void detect_tools(chat_prompt *p, const jinja_tpl *t) {
    chat_adapt *a = &p->adapt;
    if (jinja_tpl_reads(t, "functions") && !jinja_tpl_reads(t, "tools")) {
        a->functions_var = true;
        p->template_tools = true;
    } else if (p->template_tools && !renders(t, probe_user, probe_tools, a) &&
               renders(t, probe_user, NULL, a)) {
        a->tools_unrendered = true;
        p->template_tools = false;
    }
}

void chat_adapt_detect(chat_prompt *p) {
    chat_adapt *a = &p->adapt;
    memset(a, 0, sizeof *a);
    const jinja_tpl *t = p->tool_use ? p->tool_use : p->main;
    a->system_in_user =
        !renders(p->main, probe_system, NULL, a) && renders(p->main, probe_user, NULL, a);
    detect_tools(p, t);
    if (!p->template_calls) return;
    const char *tools = p->template_tools ? probe_tools : NULL;
    if (renders(t, probe_call, tools, a)) return;
    a->args_text = true;
    if (!renders(t, probe_call, tools, a)) a->args_text = false;
}
