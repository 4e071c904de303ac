/* The chat template a workload sizes chat prompts through
 * (workload_internal.h): the tokenizer's own template (tokenizer_config.json's
 * chat_template, a GGUF's tokenizer.chat_template) compiled once with
 * src/jinja, and one user message rendered the way a server renders it
 * (transformers' apply_chat_template variables: messages,
 * add_generation_prompt, bos_token, eos_token; tools and documents None),
 * so that the prompt's count is the count of what the server tokenizes.
 * Not here: counting (workload_count.c), the server's own renderer
 * (src/server/chat/chat_prompt.c, which bench does not link). */
#include <stdlib.h>
#include <string.h>

#include "base/free_all.h"
#include "bench/workload/workload_internal.h"
#include "jinja/jinja.h"
#include "model/tokenizer.h" /* the BOS / EOS texts */

struct wl_chat {
    jinja_tpl *tpl;
    char *bos, *eos; /* the vocabulary's BOS / EOS text, "" when none */
    bool strip_bos;  /* the tokenizer adds BOS: a rendered leading BOS text is dropped */
};

static char *token_text(const struct tokenizer *tok, int32_t id) {
    size_t n = 0;
    const char *s = id >= 0 ? tokenizer_token_text(tok, id, &n) : NULL;
    return strndup(s ? s : "", s ? n : 0);
}

int wl_chat_new(wl_chat **out, const char *src, const struct tokenizer *tok, tps_err *e) {
    *out = NULL;
    wl_chat *c = calloc(1, sizeof *c);
    if (!c) return tps_fail(e, TPS_ENOMEM, "out of memory");
    tps_err je = {{0}};
    int rc = jinja_compile(&c->tpl, src, strlen(src), &je);
    if (rc) {
        free(c);
        return tps_fail(e, rc,
                        "--tokenizer: its chat template does not compile (%s); prompts could not "
                        "be sized after the template",
                        je.msg);
    }
    c->bos = token_text(tok, tokenizer_bos(tok));
    c->eos = token_text(tok, tokenizer_eos(tok));
    c->strip_bos = tokenizer_adds_bos(tok);
    if (!c->bos || !c->eos) {
        wl_chat_free(c);
        return tps_fail(e, TPS_ENOMEM, "out of memory");
    }
    *out = c;
    return 0;
}

void wl_chat_free(wl_chat *c) {
    if (!c) return;
    jinja_tpl_free(c->tpl);
    TPS_FREE_ALL(c->bos, c->eos, c);
}

int wl_chat_render(const wl_chat *c, const char *text, sbuf *out) {
    jinja_run *r = jinja_run_new(NULL);
    if (!r) return TPS_ENOMEM;
    jinja_val msg = jinja_map_new(r), msgs = jinja_list_new(r);
    jinja_map_set(r, msg, "role", 4, jinja_str_ref("user", 4));
    jinja_map_set(r, msg, "content", 7, jinja_str_ref(text, strlen(text)));
    jinja_list_push(r, msgs, msg);
    jinja_set(r, "messages", msgs);
    jinja_set(r, "tools", jinja_none());
    jinja_set(r, "documents", jinja_none());
    jinja_set(r, "add_generation_prompt", jinja_bool(true));
    jinja_set(r, "bos_token", jinja_str_ref(c->bos, strlen(c->bos)));
    jinja_set(r, "eos_token", jinja_str_ref(c->eos, strlen(c->eos)));
    sbuf tmp;
    sbuf_init(&tmp);
    jinja_error je;
    int rc = jinja_render(r, c->tpl, &tmp, &je);
    size_t bl = strlen(c->bos), skip = 0;
    if (!rc && c->strip_bos && bl && tmp.len >= bl && !memcmp(tmp.p, c->bos, bl)) skip = bl;
    sbuf_truncate(out, 0);
    if (!rc) sbuf_add(out, tmp.p ? tmp.p + skip : "", tmp.len - skip);
    if (!rc && sbuf_failed(out)) rc = TPS_ENOMEM;
    sbuf_free(&tmp);
    jinja_run_free(r);
    return rc;
}
