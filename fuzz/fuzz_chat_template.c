/* libFuzzer harness for the built-in chat templates as the server renders
 * them (chat_prompt.h): the input's first byte picks the template, the
 * rest is split at NUL bytes into role, content, role, content, ...,
 * rendered with and without the generation prompt; the whole input is
 * also fed to chat_tmpl_detect and chat_tool_format as template text.
 * Checks that rendering never fails except with a message, and that the
 * prompt holds every content byte (ASan catches reads past a message). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_builtins.h"
#include "server/chat/chat_prompt.h"
#include "server/chat/chat_template.h"

#define MAX_MSGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    chat_tmpl d = chat_tmpl_detect((const char *)data, size);
    if ((unsigned)d >= CHAT_TMPL_COUNT) abort();
    bool known;
    chat_tool_format((const char *)data, size, &known);
    if (size < 1) return 0;
    int t = 1 + data[0] % (CHAT_TMPL_COUNT - 1);
    json_t *msgs = json_array();
    size_t n = 0, content_bytes = 0, i = 1;
    while (i < size && n < MAX_MSGS) {
        const char *role = (const char *)data + i;
        size_t rl = strnlen(role, size - i);
        i += rl + 1;
        if (i > size) break;
        const char *content = (const char *)data + i;
        size_t cl = strnlen(content, size - i);
        i += cl + 1;
        json_t *m = json_pack("{s:s%,s:s%}", "role", role, rl ? rl : 1, "content", content, cl);
        if (!rl) json_object_set_new(m, "role", json_string("user"));
        if (!m || json_array_append_new(msgs, m)) break;
        content_bytes += cl;
        n++;
    }
    for (int gen = 0; gen < 2 && n; gen++) {
        chat_request rq = {.messages = msgs, .add_generation_prompt = gen};
        sbuf b;
        sbuf_init(&b);
        chat_error ce;
        if (chat_prompt_render(&fuzz_builtins()[t], &rq, &b, &ce) == 0) {
            if (b.len < content_bytes) abort();
        } else if (!ce.msg[0]) {
            abort();
        }
        sbuf_free(&b);
    }
    json_decref(msgs);
    return 0;
}
