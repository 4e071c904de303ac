/* libFuzzer harness for the Jinja engine (src/jinja): the input up to its
 * first NUL byte is compiled as a template; one that compiles is rendered
 * with small limits (steps, depth, output, memory) over a conversation
 * with tools, and the rest of the input as one more message's content.
 * Checks that compiling and rendering end with 0 or an error carrying a
 * message, that a render never exceeds its output limit, and (ASan, UBSan)
 * that nothing reads or writes out of bounds, overflows or leaks: a hostile
 * GGUF's template must not crash, hang or exhaust the server. Seeded with
 * real templates and the red-team ones of issue 48 (deep compares, hashes
 * and changed(), truncate's leeway, long scans in a loop, unique, format
 * edges: fuzz/corpus/fuzz_template/redteam-*); the work budget is small
 * (2^22 units) so a slow input ends fast. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jinja/jinja.h"

static jinja_val template_msg(jinja_run *r, const char *role, const char *content, size_t n) {
    jinja_val m = jinja_map_new(r);
    jinja_map_set(r, m, "role", 4, jinja_str(r, role, strlen(role)));
    jinja_map_set(r, m, "content", 7, jinja_str(r, content, n));
    return m;
}

static jinja_val template_tools(jinja_run *r) {
    jinja_val fn = jinja_map_new(r), params = jinja_map_new(r), tool = jinja_map_new(r);
    jinja_map_set(r, params, "type", 4, jinja_str(r, "object", 6));
    jinja_map_set(r, params, "required", 8, jinja_list_new(r));
    jinja_map_set(r, fn, "name", 4, jinja_str(r, "get_weather", 11));
    jinja_map_set(r, fn, "description", 11, jinja_str(r, "Weather", 7));
    jinja_map_set(r, fn, "parameters", 10, params);
    jinja_map_set(r, tool, "type", 4, jinja_str(r, "function", 8));
    jinja_map_set(r, tool, "function", 8, fn);
    jinja_val list = jinja_list_new(r);
    jinja_list_push(r, list, tool);
    return list;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *src = (const char *)data;
    const char *nul = memchr(src, 0, size);
    size_t len = nul ? (size_t)(nul - src) : size;
    jinja_tpl *t = NULL;
    tps_err err = {{0}};
    if (jinja_compile(&t, src, len, &err)) {
        if (!err.msg[0]) abort();
        return 0;
    }
    jinja_limits lim = {.max_output = 1 << 16,
                        .max_memory = 8 << 20,
                        .max_steps = 20000,
                        .max_work = 1 << 22,
                        .max_depth = 100};
    jinja_run *r = jinja_run_new(&lim);
    if (!r) abort();
    jinja_val msgs = jinja_list_new(r);
    jinja_list_push(r, msgs, template_msg(r, "system", "Be brief.", 9));
    jinja_list_push(r, msgs, template_msg(r, "user", "Hi {{ x }} é", 13));
    jinja_list_push(r, msgs, template_msg(r, "assistant", "<think>a</think>b", 17));
    const char *rest = nul ? nul + 1 : "";
    size_t rest_len = nul ? size - len - 1 : 0;
    jinja_list_push(r, msgs, template_msg(r, "user", rest, rest_len));
    jinja_set(r, "messages", msgs);
    jinja_set(r, "tools", template_tools(r));
    jinja_set(r, "add_generation_prompt", jinja_bool(true));
    jinja_set(r, "bos_token", jinja_str(r, "<s>", 3));
    jinja_set(r, "eos_token", jinja_str(r, "</s>", 4));
    jinja_set(r, "enable_thinking", jinja_bool(false));
    jinja_set_time(r, 1722002400);
    sbuf out;
    sbuf_init(&out);
    jinja_error e;
    int rc = jinja_render(r, t, &out, &e);
    if (rc && !e.msg[0]) abort();
    if (!rc && out.len > lim.max_output) abort();
    if (rc && out.len) abort(); /* nothing is appended on failure */
    sbuf_free(&out);
    jinja_run_free(r);
    jinja_tpl_free(t);
    return 0;
}
