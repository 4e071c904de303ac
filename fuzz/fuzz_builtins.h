/* The built-in chat templates compiled once for a fuzzing run, shared by
 * the harnesses that render them (fuzz_chat_template, fuzz_openai_request;
 * test_reliability_fuzz.c compiles both into one program, hence the guard). */
#ifndef TPS_FUZZ_BUILTINS_H
#define TPS_FUZZ_BUILTINS_H

#include <stdbool.h>
#include <stdlib.h>

#include "server/chat/chat_prompt.h"
#include "server/chat/chat_template.h"

static inline const chat_prompt *fuzz_builtins(void) {
    static chat_prompt p[CHAT_TMPL_COUNT];
    static bool ready;
    if (!ready) {
        for (int t = 1; t < CHAT_TMPL_COUNT; t++) {
            tps_err err = {{0}};
            if (chat_prompt_builtin(&p[t], chat_tmpl_name((chat_tmpl)t), CHAT_SRC_NAMED, &err))
                abort();
        }
        ready = true;
    }
    return p;
}

#endif
