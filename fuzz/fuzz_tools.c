/* libFuzzer harness for the tool-call parser (tools.h), which reads model
 * output: any bytes, in every format, must give calls whose name is a
 * non-empty string and whose arguments parse as a JSON object, with the
 * content length inside the text; the streaming split must stay inside the
 * text and never pass a call's start. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "server/tools/tools.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size ? size : 1); /* exactly size bytes: ASan sees overreads */
    if (!buf) return 0;
    memcpy(buf, data, size);
    for (int fi = 0; fi < TOOL_FMT_COUNT; fi++) {
        const tool_format f = (tool_format)fi;
        tool_call calls[TOOLS_MAX_CALLS];
        size_t content = 0;
        size_t k = tools_parse(f, buf, size, calls, TOOLS_MAX_CALLS, &content);
        if (content > size || k > TOOLS_MAX_CALLS) abort();
        for (size_t i = 0; i < k; i++) {
            if (!calls[i].name || !calls[i].name[0]) abort();
            json_t *a = json_loads(calls[i].arguments, JSON_ALLOW_NUL, NULL); /* \u0000 is JSON */
            if (!json_is_object(a)) abort();
            json_decref(a);
        }
        tools_calls_free(calls, k);
        bool hold;
        size_t safe = tools_stream_safe(f, buf, size, &hold);
        if (safe > size || (k && safe > content)) abort();
    }
    free(buf);
    return 0;
}
