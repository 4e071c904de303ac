/* Chat template recognition and rendering (see chat_template.h). Each
 * renderer follows llama.cpp's llm_chat_apply_template for the same
 * template, without the leading BOS (the tokenizer adds it). */
#include "server/chat_template.h"

#include <string.h>
#include <strings.h>

static const char *const names[CHAT_TMPL_COUNT] = {
    [CHAT_TMPL_UNKNOWN] = "unknown",       [CHAT_TMPL_CHATML] = "chatml",
    [CHAT_TMPL_LLAMA2] = "llama2",         [CHAT_TMPL_LLAMA3] = "llama3",
    [CHAT_TMPL_MISTRAL] = "mistral",       [CHAT_TMPL_ZEPHYR] = "zephyr",
    [CHAT_TMPL_GEMMA] = "gemma",           [CHAT_TMPL_PHI3] = "phi3",
    [CHAT_TMPL_MISTRAL_V7] = "mistral-v7", [CHAT_TMPL_MISTRAL_V7_TEKKEN] = "mistral-v7-tekken",
};

static const char *const eots[CHAT_TMPL_COUNT] = {
    [CHAT_TMPL_UNKNOWN] = "<|im_end|>",  [CHAT_TMPL_CHATML] = "<|im_end|>",
    [CHAT_TMPL_LLAMA2] = "</s>",         [CHAT_TMPL_LLAMA3] = "<|eot_id|>",
    [CHAT_TMPL_MISTRAL] = "</s>",        [CHAT_TMPL_ZEPHYR] = "</s>",
    [CHAT_TMPL_GEMMA] = "<end_of_turn>", [CHAT_TMPL_PHI3] = "<|end|>",
    [CHAT_TMPL_MISTRAL_V7] = "</s>",     [CHAT_TMPL_MISTRAL_V7_TEKKEN] = "</s>",
};

const char *chat_tmpl_name(chat_tmpl t) {
    return (unsigned)t < CHAT_TMPL_COUNT ? names[t] : "unknown";
}

const char *chat_tmpl_eot(chat_tmpl t) {
    return (unsigned)t < CHAT_TMPL_COUNT ? eots[t] : eots[CHAT_TMPL_CHATML];
}

chat_tmpl chat_tmpl_from_name(const char *name) {
    static const struct {
        const char *alias;
        chat_tmpl t;
    } aliases[] = {
        {"llama-2", CHAT_TMPL_LLAMA2},     {"llama-3", CHAT_TMPL_LLAMA3}, {"phi-3", CHAT_TMPL_PHI3},
        {"mistral-v1", CHAT_TMPL_MISTRAL}, {"gemma2", CHAT_TMPL_GEMMA},
    };
    if (!name) return CHAT_TMPL_UNKNOWN;
    for (int t = 1; t < CHAT_TMPL_COUNT; t++)
        if (!strcasecmp(name, names[t])) return (chat_tmpl)t;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (!strcasecmp(name, aliases[i].alias)) return aliases[i].t;
    return CHAT_TMPL_UNKNOWN;
}

static bool has(const char *text, size_t len, const char *needle) {
    return memmem(text, len, needle, strlen(needle)) != NULL;
}

chat_tmpl chat_tmpl_detect(const char *text, size_t len) {
    if (!text || !len) return CHAT_TMPL_UNKNOWN;
    /* Most specific markers first: Phi-3 and Zephyr share <|user|>. */
    if (has(text, len, "<|im_start|>")) return CHAT_TMPL_CHATML;
    if (has(text, len, "<|start_header_id|>") && has(text, len, "<|end_header_id|>"))
        return CHAT_TMPL_LLAMA3;
    if (has(text, len, "<start_of_turn>")) return CHAT_TMPL_GEMMA;
    if (has(text, len, "<|assistant|>") && has(text, len, "<|end|>")) return CHAT_TMPL_PHI3;
    if (has(text, len, "<|user|>") && has(text, len, "</s>")) return CHAT_TMPL_ZEPHYR;
    /* v7 puts a space after each opening marker; Mistral Small 3's
     * (v7-tekken, llama.cpp detects it as v7) does not */
    if (has(text, len, "[SYSTEM_PROMPT]"))
        return has(text, len, "[SYSTEM_PROMPT] ") || has(text, len, "[INST] ")
                   ? CHAT_TMPL_MISTRAL_V7
                   : CHAT_TMPL_MISTRAL_V7_TEKKEN;
    if (has(text, len, "[INST]"))
        return has(text, len, "<<SYS>>") ? CHAT_TMPL_LLAMA2 : CHAT_TMPL_MISTRAL;
    return CHAT_TMPL_UNKNOWN;
}

static bool role_is(const chat_msg *m, const char *r) {
    return m->role && !strcmp(m->role, r);
}

static void add_content(sbuf *o, const chat_msg *m) {
    sbuf_add(o, m->content ? m->content : "", m->content ? m->content_len : 0);
}

/* ---------------------------------------------------------------------------
 * Renderers
 * ------------------------------------------------------------------------- */

static void render_chatml(const chat_msg *m, size_t n, bool gen, sbuf *o) {
    for (size_t i = 0; i < n; i++) {
        sbuf_adds(o, "<|im_start|>");
        sbuf_adds(o, m[i].role);
        sbuf_adds(o, "\n");
        add_content(o, &m[i]);
        sbuf_adds(o, "<|im_end|>\n");
    }
    if (gen) sbuf_adds(o, "<|im_start|>assistant\n");
}

static void render_llama3(const chat_msg *m, size_t n, bool gen, sbuf *o) {
    for (size_t i = 0; i < n; i++) {
        sbuf_adds(o, "<|start_header_id|>");
        sbuf_adds(o, m[i].role);
        sbuf_adds(o, "<|end_header_id|>\n\n");
        add_content(o, &m[i]);
        sbuf_adds(o, "<|eot_id|>");
    }
    if (gen) sbuf_adds(o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* Llama 2: [INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant}</s><s>[INST] ...
 * Mistral: the same turns, the system text prefixed to the first user turn. */
static int render_inst(const chat_msg *m, size_t n, bool llama2, sbuf *o, tps_err *err) {
    bool in_inst = false, pending_sys = false;
    for (size_t i = 0; i < n; i++) {
        if (role_is(&m[i], "system")) {
            if (!in_inst) sbuf_adds(o, "[INST] ");
            in_inst = true;
            if (llama2) {
                sbuf_adds(o, "<<SYS>>\n");
                add_content(o, &m[i]);
                sbuf_adds(o, "\n<</SYS>>\n\n");
            } else {
                add_content(o, &m[i]);
                sbuf_adds(o, "\n\n");
            }
            pending_sys = true;
        } else if (role_is(&m[i], "user")) {
            if (!in_inst) sbuf_adds(o, "[INST] ");
            in_inst = false;
            pending_sys = false;
            add_content(o, &m[i]);
            sbuf_adds(o, " [/INST]");
        } else if (role_is(&m[i], "assistant")) {
            if (in_inst) {
                return tps_fail(err, TPS_EINVAL,
                                "messages[%zu]: an assistant message cannot follow a system "
                                "message directly in the %s template",
                                i, llama2 ? "llama2" : "mistral");
            }
            sbuf_adds(o, " ");
            add_content(o, &m[i]);
            sbuf_adds(o, "</s>");
            if (i + 1 < n) sbuf_adds(o, "<s>");
        } else {
            return tps_fail(err, TPS_EINVAL,
                            "messages[%zu].role '%s' is not supported by the %s template", i,
                            m[i].role, llama2 ? "llama2" : "mistral");
        }
    }
    if (pending_sys) sbuf_adds(o, " [/INST]");
    return 0;
}

static void render_zephyr(const chat_msg *m, size_t n, bool gen, sbuf *o) {
    for (size_t i = 0; i < n; i++) {
        sbuf_adds(o, "<|");
        sbuf_adds(o, m[i].role);
        sbuf_adds(o, "|>\n");
        add_content(o, &m[i]);
        sbuf_adds(o, "</s>\n");
    }
    if (gen) sbuf_adds(o, "<|assistant|>\n");
}

static void render_phi3(const chat_msg *m, size_t n, bool gen, sbuf *o) {
    for (size_t i = 0; i < n; i++) {
        sbuf_adds(o, "<|");
        sbuf_adds(o, m[i].role);
        sbuf_adds(o, "|>\n");
        add_content(o, &m[i]);
        sbuf_adds(o, "<|end|>\n");
    }
    if (gen) sbuf_adds(o, "<|assistant|>\n");
}

/* Gemma has no system role: the system messages since the last user turn
 * are concatenated and open the next user turn (llama.cpp does the same). */
static bool add_systems(const chat_msg *m, size_t from, size_t to, sbuf *o) {
    bool any = false;
    for (size_t k = from; k < to; k++) {
        if (!role_is(&m[k], "system")) continue;
        add_content(o, &m[k]);
        any = true;
    }
    return any;
}

static void render_gemma(const chat_msg *m, size_t n, bool gen, sbuf *o) {
    size_t pend = 0; /* first system message not yet placed */
    for (size_t i = 0; i < n; i++) {
        if (role_is(&m[i], "system")) continue;
        bool asst = role_is(&m[i], "assistant");
        sbuf_adds(o, "<start_of_turn>");
        sbuf_adds(o, asst ? "model" : m[i].role);
        sbuf_adds(o, "\n");
        if (!asst) {
            if (add_systems(m, pend, i, o)) sbuf_adds(o, "\n\n");
            pend = i + 1;
        }
        add_content(o, &m[i]);
        sbuf_adds(o, "<end_of_turn>\n");
    }
    bool tail = false;
    for (size_t k = pend; k < n; k++)
        tail |= role_is(&m[k], "system");
    if (tail) { /* system text with no user turn after it */
        sbuf_adds(o, "<start_of_turn>user\n");
        add_systems(m, pend, n, o);
        sbuf_adds(o, "<end_of_turn>\n");
    }
    if (gen) sbuf_adds(o, "<start_of_turn>model\n");
}

/* Mistral's v7 template: every turn keeps its own markers, with the one
 * space llama.cpp's "mistral-v7" puts after each opening (sp " ") or none
 * ("mistral-v7-tekken", sp "": Mistral Small 3's own template). */
static void render_mistral_v7(const chat_msg *m, size_t n, const char *sp, sbuf *o) {
    for (size_t i = 0; i < n; i++) {
        if (role_is(&m[i], "system")) {
            sbuf_adds(o, "[SYSTEM_PROMPT]");
            sbuf_adds(o, sp);
            add_content(o, &m[i]);
            sbuf_adds(o, "[/SYSTEM_PROMPT]");
        } else if (role_is(&m[i], "user")) {
            sbuf_adds(o, "[INST]");
            sbuf_adds(o, sp);
            add_content(o, &m[i]);
            sbuf_adds(o, "[/INST]");
        } else {
            sbuf_adds(o, sp);
            add_content(o, &m[i]);
            sbuf_adds(o, "</s>");
        }
    }
}

int chat_tmpl_render(chat_tmpl t, const chat_msg *msgs, size_t n, bool add_assistant, sbuf *out,
                     tps_err *err) {
    for (size_t i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].role[0])
            return tps_fail(err, TPS_EINVAL, "messages[%zu].role is empty", i);
    int rc = 0;
    switch (t) {
    case CHAT_TMPL_LLAMA3:
        render_llama3(msgs, n, add_assistant, out);
        break;
    case CHAT_TMPL_LLAMA2:
        rc = render_inst(msgs, n, true, out, err);
        break;
    case CHAT_TMPL_MISTRAL:
        rc = render_inst(msgs, n, false, out, err);
        break;
    case CHAT_TMPL_ZEPHYR:
        render_zephyr(msgs, n, add_assistant, out);
        break;
    case CHAT_TMPL_GEMMA:
        render_gemma(msgs, n, add_assistant, out);
        break;
    case CHAT_TMPL_PHI3:
        render_phi3(msgs, n, add_assistant, out);
        break;
    case CHAT_TMPL_MISTRAL_V7:
        render_mistral_v7(msgs, n, " ", out);
        break;
    case CHAT_TMPL_MISTRAL_V7_TEKKEN:
        render_mistral_v7(msgs, n, "", out);
        break;
    case CHAT_TMPL_CHATML:
    case CHAT_TMPL_UNKNOWN:
    default:
        render_chatml(msgs, n, add_assistant, out);
        break;
    }
    if (rc) return rc;
    if (sbuf_failed(out)) return tps_fail(err, TPS_ENOMEM, "out of memory rendering the chat");
    return 0;
}
