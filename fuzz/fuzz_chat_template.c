/* libFuzzer harness for chat templates: the input's first byte picks the
 * template, the rest is split at NUL bytes into role, content, role,
 * content, ... and rendered with and without the assistant opening; the
 * whole input is also fed to chat_tmpl_detect as Jinja text. Checks that
 * rendering never fails except with a message, and that the prompt holds
 * every content byte (ASan catches reads past a message). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/chat_template.h"

#define MAX_MSGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    chat_tmpl d = chat_tmpl_detect((const char *)data, size);
    if ((unsigned)d >= CHAT_TMPL_COUNT) abort();
    if (size < 1) return 0;
    chat_tmpl t = (chat_tmpl)(data[0] % CHAT_TMPL_COUNT);
    /* NUL-terminated copies: roles are C strings */
    char *buf = malloc(size + 1);
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = 0;
    chat_msg msgs[MAX_MSGS];
    size_t n = 0, content_bytes = 0;
    char *p = buf, *end = buf + size - 1;
    while (p < end && n < MAX_MSGS) {
        char *role = p;
        p += strlen(p) + 1;
        if (p > end) break;
        char *content = p;
        size_t cl = strlen(p);
        p += cl + 1;
        msgs[n++] = (chat_msg){.role = role, .content = content, .content_len = cl};
        content_bytes += cl;
    }
    for (int gen = 0; gen < 2; gen++) {
        sbuf b;
        sbuf_init(&b);
        tps_err err = {{0}};
        if (chat_tmpl_render(t, msgs, n, gen, &b, &err) == 0) {
            if (b.len < content_bytes) abort();
        } else if (!err.msg[0]) {
            abort();
        }
        sbuf_free(&b);
    }
    free(buf);
    return 0;
}
