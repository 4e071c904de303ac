/* --tokenizer loaded (workload_internal.h): a GGUF's vocabulary, or a
 * Hugging Face tokenizer.json (the file, or a directory holding it and its
 * tokenizer_config.json), told apart by content; and the chat template
 * that comes with it (tokenizer.chat_template, chat_template), compiled for
 * sizing chat prompts (one that does not compile leaves a note and text
 * sizing). Not here: counting (workload_count.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/workload/workload_internal.h"
#include "model/gguf.h"         /* gguf_open: a GGUF's vocabulary */
#include "model/tokenizer.h"    /* tokenizer_load */
#include "model/tokenizer_hf.h" /* tokenizer_load_hf */

/* The GGUF at path: its tokenizer, and its chat template (malloc'ed) or NULL. */
static int load_gguf(workload *w, const char *path, char **tmpl, tps_err *e) {
    gguf_file *f = NULL;
    int rc = gguf_open(&f, path, e);
    if (rc) return rc;
    rc = tokenizer_load(&w->tok, f, e);
    gguf_str s = {0};
    if (!rc && gguf_get_str(f, "tokenizer.chat_template", &s) == 0 && s.len &&
        !(*tmpl = strndup(s.ptr, (size_t)s.len)))
        rc = tps_fail(e, TPS_ENOMEM, "out of memory");
    gguf_close(f);
    return rc;
}

int wl_load_tokenizer(workload *w, const char *path, tps_err *e) {
    char *tmpl = NULL;
    int rc = tokenizer_path_is_hf(path) ? tokenizer_load_hf(&w->tok, path, &tmpl, e)
                                        : load_gguf(w, path, &tmpl, e);
    /* a template this engine cannot compile costs the sizing, not the run */
    tps_err te = {{0}};
    if (!rc && tmpl && wl_chat_new(&w->chat, tmpl, w->tok, &te) == TPS_ENOMEM)
        rc = tps_fail(e, TPS_ENOMEM, "out of memory");
    else if (!rc && tmpl && !w->chat)
        snprintf(w->note, sizeof w->note, "%.150s; chat prompts are sized by their text", te.msg);
    free(tmpl);
    return rc;
}
