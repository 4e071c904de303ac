/* The chat prompt (chat_prompt.h): OpenAI messages and tools as template
 * values, the served templates, and rendering them with continue_final_
 * message and the BOS rule. Tools for a template that does not write them
 * are written into the messages here, before the conversion
 * (chat_tools.c). */
#include "server/chat/chat_prompt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/chat/chat_template.h"
#include "server/chat/chat_tools.h"

/* ---------------------------------------------------------------------------
 * The served templates
 * ------------------------------------------------------------------------- */

static bool has(const char *text, size_t len, const char *needle) {
    return text && memmem(text, len, needle, strlen(needle)) != NULL;
}

/* the syntax rows' detection (tools_table.c) */
tool_format chat_tool_format(const char *text, size_t len, bool *known) {
    return tools_detect(text, len, known);
}

chat_reasoning chat_reasoning_of(const char *text, size_t len) {
    if (has(text, len, "<|channel|>") && has(text, len, "<|message|>")) return CHAT_REASON_HARMONY;
    if (has(text, len, "</think>")) return CHAT_REASON_THINK;
    return CHAT_REASON_NONE;
}

static int compile(jinja_tpl **t, const char *src, size_t len, const char *what, tps_err *err) {
    tps_err e = {{0}};
    int rc = jinja_compile(t, src, len, &e);
    if (rc)
        return tps_fail(err, rc, "%s does not compile: %s%s", what, e.msg,
                        rc == TPS_EUNSUP ? " (--chat-template-file or --chat-template NAME serves "
                                           "another template)"
                                         : "");
    return 0;
}

/* ---------------------------------------------------------------------------
 * The probe at load
 * ------------------------------------------------------------------------- */

/* What one render may take: jinja_limits_default's, memory aside. */
static void render_limits(jinja_limits *lim) {
    jinja_limits_default(lim);
    lim->max_memory = CHAT_RENDER_MAX_MEMORY;
}

static const char probe_messages[] =
    "[{\"role\":\"system\",\"content\":\"You are a helpful assistant.\"},"
    "{\"role\":\"user\",\"content\":\"Hello!\"},"
    "{\"role\":\"assistant\",\"content\":\"Hi. How can I help?\"},"
    "{\"role\":\"user\",\"content\":\"What is the weather in Paris?\"}]";
static const char probe_tools[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
    "\"description\":\"The weather in a city.\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}}]";

/* Renders t on the sample conversation (with tools when given) under the
 * render limits: TPS_EINVAL naming the bound when it hits one. Any other
 * failure is the template's business (one may raise_exception on a
 * conversation it does not like) and loads. */
static int probe_one(const jinja_tpl *t, const json_t *msgs, const json_t *tools, const char *what,
                     tps_err *err) {
    jinja_limits lim;
    render_limits(&lim);
    jinja_run *r = jinja_run_new(&lim);
    if (!r) return tps_fail(err, TPS_ENOMEM, "out of memory");
    chat_request rq = {.messages = msgs, .tools = tools, .add_generation_prompt = true};
    chat_error ce;
    jinja_error je = {0};
    int rc = 0;
    if (!chat_request_vars(r, &rq, "", "", &ce)) {
        sbuf text;
        sbuf_init(&text);
        if (jinja_render(r, t, &text, &je) && je.kind == JINJA_LIMIT)
            rc = tps_fail(err, TPS_EINVAL,
                          "%s exceeds a bound of the template sandbox on a sample conversation "
                          "(system, user, assistant, user%s) at line %u: %s; tps serves no "
                          "template a plain chat cannot render within its bounds "
                          "(--chat-template-file or --chat-template NAME serves another)",
                          what, tools ? ", one tool offered" : "", je.line, je.msg);
        sbuf_free(&text);
    }
    jinja_run_free(r);
    return rc;
}

/* A template that cannot render a plain chat within the bounds (nested
 * loops of 10^10 steps at its top, a walk past the depth limit) is
 * refused at load, with the bound named, rather than failing every
 * request (issue 48): without tools, and with one when the template that
 * renders with tools reads them. A template hostile only to some
 * conversations still loads; each such render is a 400 naming the bound. */
static int probe(const chat_prompt *p, tps_err *err) {
    json_t *msgs = json_loads(probe_messages, 0, NULL), *tools = json_loads(probe_tools, 0, NULL);
    char what[200];
    snprintf(what, sizeof what, "the chat template (%s)", p->name);
    int rc = msgs && tools ? probe_one(p->main, msgs, NULL, what, err)
                           : tps_fail(err, TPS_ENOMEM, "out of memory");
    if (!rc && p->template_tools) {
        if (p->tool_use) snprintf(what, sizeof what, "the chat template (%s.tool_use)", p->name);
        rc = probe_one(p->tool_use ? p->tool_use : p->main, msgs, tools, what, err);
    }
    json_decref(msgs);
    json_decref(tools);
    return rc;
}

int chat_prompt_init(chat_prompt *p, const char *src, size_t len, const char *tool_use_src,
                     size_t tool_use_len, chat_source source, const char *name, tps_err *err) {
    memset(p, 0, sizeof *p);
    p->source = source;
    snprintf(p->name, sizeof p->name, "%s", name ? name : "");
    char what[200];
    snprintf(what, sizeof what, "the chat template (%s)", p->name);
    int rc = compile(&p->main, src, len, what, err);
    if (!rc && tool_use_src) {
        snprintf(what, sizeof what, "the chat template (%s.tool_use)", p->name);
        rc = compile(&p->tool_use, tool_use_src, tool_use_len, what, err);
    }
    if (rc) {
        chat_prompt_free(p);
        return rc;
    }
    /* with tools, the tool_use variant renders: its text says the syntax */
    const char *ts = tool_use_src ? tool_use_src : src;
    size_t tl = tool_use_src ? tool_use_len : len;
    bool known;
    p->tools = chat_tool_format(ts, tl, &known);
    p->template_tools = jinja_tpl_reads(p->tool_use ? p->tool_use : p->main, "tools");
    p->template_calls = has(ts, tl, "tool_calls");
    p->tools_known = known || !p->template_tools;
    chat_tmpl fam = chat_tmpl_detect(src, len);
    p->eot = fam == CHAT_TMPL_UNKNOWN ? NULL : chat_tmpl_eot(fam);
    p->reasoning = chat_reasoning_of(src, len);
    if (p->reasoning == CHAT_REASON_NONE && tool_use_src)
        p->reasoning = chat_reasoning_of(tool_use_src, tool_use_len);
    if ((rc = probe(p, err)))
        chat_prompt_free(p);
    else
        chat_adapt_detect(p);
    return rc;
}

int chat_prompt_for_model(chat_prompt *p, const gguf_file *f, const tokenizer *tok,
                          const char *name, tps_err *err) {
    gguf_str jt = {0}, tu = {0};
    gguf_get_str(f, "tokenizer.chat_template", &jt);
    gguf_get_str(f, "tokenizer.chat_template.tool_use", &tu);
    int rc;
    if (name)
        rc = chat_prompt_builtin(p, name, CHAT_SRC_NAMED, err);
    else if (jt.len)
        rc = chat_prompt_init(p, jt.ptr, (size_t)jt.len, tu.len ? tu.ptr : NULL, (size_t)tu.len,
                              CHAT_SRC_GGUF, "tokenizer.chat_template", err);
    else
        rc = chat_prompt_builtin(p, "chatml", CHAT_SRC_DEFAULT, err);
    return rc ? rc : chat_prompt_vocab(p, tok, err);
}

int chat_prompt_vocab(chat_prompt *p, const tokenizer *tok, tps_err *err) {
    size_t bl = 0, el = 0;
    int32_t bos = tokenizer_bos(tok), eos = tokenizer_eos(tok);
    const char *bt = bos >= 0 ? tokenizer_token_text(tok, bos, &bl) : NULL;
    const char *et = eos >= 0 ? tokenizer_token_text(tok, eos, &el) : NULL;
    free(p->bos);
    free(p->eos);
    p->bos = strndup(bt ? bt : "", bt ? bl : 0);
    p->eos = strndup(et ? et : "", et ? el : 0);
    if (!p->bos || !p->eos) return tps_fail(err, TPS_ENOMEM, "out of memory");
    p->strip_bos = tokenizer_adds_bos(tok);
    return 0;
}

int chat_prompt_builtin(chat_prompt *p, const char *name, chat_source source, tps_err *err) {
    chat_tmpl t = source == CHAT_SRC_DEFAULT ? CHAT_TMPL_CHATML : chat_tmpl_from_name(name);
    if (t == CHAT_TMPL_UNKNOWN)
        return tps_fail(err, TPS_EINVAL,
                        "--chat-template '%s' is not one of chatml, llama2, llama3, mistral, "
                        "mistral-v7, mistral-v7-tekken, zephyr, gemma, phi3",
                        name);
    const char *src = chat_tmpl_source(t);
    int rc = chat_prompt_init(p, src, strlen(src), NULL, 0, source, chat_tmpl_name(t), err);
    if (rc) return rc;
    /* the tool syntax of the family; a file with no template has no known
     * tool format: the generic one (tools.h) */
    p->tools = source == CHAT_SRC_DEFAULT ? TOOL_FMT_GENERIC
               : t == CHAT_TMPL_CHATML    ? TOOL_FMT_HERMES
               : t == CHAT_TMPL_LLAMA3    ? TOOL_FMT_LLAMA3
               : t == CHAT_TMPL_MISTRAL   ? TOOL_FMT_MISTRAL
                                          : TOOL_FMT_GENERIC;
    p->tools_known = true;
    p->eot = chat_tmpl_eot(t);
    return 0;
}

void chat_prompt_free(chat_prompt *p) {
    jinja_tpl_free(p->main);
    jinja_tpl_free(p->tool_use);
    free(p->bos);
    free(p->eos);
    memset(p, 0, sizeof *p);
}

const char *chat_prompt_describe(const chat_prompt *p, char *buf, size_t cap) {
    switch (p->source) {
    case CHAT_SRC_GGUF:
        snprintf(buf, cap, "GGUF tokenizer.chat_template%s",
                 p->tool_use ? " (and .tool_use when tools are offered)" : "");
        break;
    case CHAT_SRC_FILE:
        snprintf(buf, cap, "file %s", p->name);
        break;
    case CHAT_SRC_NAMED:
        snprintf(buf, cap, "built-in %s", p->name);
        break;
    default:
        snprintf(buf, cap, "ChatML (the model file has no chat template)");
        break;
    }
    return buf;
}

/* ---------------------------------------------------------------------------
 * Rendering
 * ------------------------------------------------------------------------- */

static bool ws(char c) {
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1C && c <= 0x1F);
}

/* Where p[0..m) last occurs in t[0..n), or NULL; *nomem when the table
 * could not be had. One pass from the end (Knuth-Morris-Pratt over both
 * strings reversed), linear in n + m: finding the last match by calling
 * memmem again from each match cost O(n * m) on a repetitive message
 * (issue 48: 0.66 s for a 63 KB body, minutes for 1.6 MB). */
static const char *find_last(const char *t, size_t n, const char *p, size_t m, bool *nomem) {
    if (!m || m > n) return NULL;
    size_t *fail = malloc(m * sizeof *fail); /* over the reversed pattern */
    if (!fail) {
        *nomem = true;
        return NULL;
    }
    const char *pe = p + m - 1; /* the reversed pattern's byte i is pe[0 - i] */
    fail[0] = 0;
    for (size_t i = 1, k = 0; i < m; i++) {
        while (k && *(pe - i) != *(pe - k))
            k = fail[k - 1];
        if (*(pe - i) == *(pe - k)) k++;
        fail[i] = k;
    }
    const char *at = NULL;
    for (size_t i = 0, k = 0; i < n && !at; i++) {
        char c = t[n - 1 - i];
        while (k && c != *(pe - k))
            k = fail[k - 1];
        if (c == *(pe - k)) k++;
        if (k == m) at = t + (n - 1 - i);
    }
    free(fail);
    return at;
}

/* transformers' continue_final_message: the text is cut right after the
 * last message's content (its leading blanks aside), or after its
 * stripped content when the template trimmed the trailing blanks. */
static int continue_final(const json_t *messages, const char *text, size_t *len, chat_error *e) {
    json_t *last = json_array_get(messages, json_array_size(messages) - 1);
    json_t *c = json_object_get(last, "content");
    sbuf joined;
    sbuf_init(&joined);
    if (json_is_array(c)) { /* the last text part, as transformers takes it */
        for (size_t k = json_array_size(c); k-- > 0;) {
            json_t *t = json_object_get(json_array_get(c, k), "text");
            if (!json_is_string(t)) continue;
            sbuf_add(&joined, json_string_value(t), json_string_length(t));
            break;
        }
    } else if (json_is_string(c)) {
        sbuf_add(&joined, json_string_value(c), json_string_length(c));
    }
    const char *m = joined.p ? joined.p : "";
    size_t lo = 0, hi = joined.len;
    while (lo < hi && ws(m[lo]))
        lo++;
    while (hi > lo && ws(m[hi - 1]))
        hi--;
    bool nomem = false;
    const char *at = find_last(text, *len, m + lo, hi - lo, &nomem);
    if (nomem) {
        sbuf_free(&joined);
        return chat_fail(e, 500, NULL, "out of memory%s%s", "", "");
    }
    if (!at && hi > lo) {
        sbuf_free(&joined);
        return chat_fail(
            e, 400, "continue_final_message",
            "continue_final_message is set but the final message does not appear in the "
            "chat after applying the chat template%s%s",
            "", "");
    }
    size_t keep = at ? (size_t)(at - text) : *len;
    /* Python compares text[loc:loc + len(m.lstrip())] with all of m: only
     * a message without leading blanks can match */
    if (at && lo == 0 && keep + joined.len <= *len && !memcmp(at, m, joined.len))
        keep += joined.len;
    else if (at)
        keep += hi - lo;
    *len = keep;
    sbuf_free(&joined);
    return 0;
}

static int render_error(const jinja_error *je, chat_error *e) {
    e->param = "messages";
    e->code = "invalid_value";
    e->status = je->kind == JINJA_NOMEM ? 500 : 400;
    if (je->kind == JINJA_RAISED)
        snprintf(e->msg, sizeof e->msg, "%s", je->msg);
    else
        snprintf(e->msg, sizeof e->msg, "the chat template failed at line %u: %.400s", je->line,
                 je->msg);
    return je->kind == JINJA_NOMEM ? TPS_ENOMEM : TPS_EINVAL;
}

static bool tool_turns(const json_t *messages) {
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m) {
        json_t *role = json_object_get(m, "role"), *calls = json_object_get(m, "tool_calls");
        if ((json_is_string(role) && !strcmp(json_string_value(role), "tool")) ||
            json_array_size(calls))
            return true;
    }
    return false;
}

int chat_prompt_render(const chat_prompt *p, const chat_request *rq, sbuf *out, chat_error *err) {
    memset(err, 0, sizeof *err);
    const json_t *tools = json_array_size(rq->tools) ? rq->tools : NULL;
    if (tools && !p->tools_known)
        return chat_fail(
            err, 400, "tools",
            "tools: the model's chat template asks for tool calls in a syntax tps does "
            "not parse yet (src/server/tools/tools_table.c lists the syntaxes it reads); "
            "--chat-template-file can serve another%s%s",
            "", "");
    chat_request local = *rq;
    json_t *rewritten = NULL;
    const jinja_tpl *t = tools && p->tool_use ? p->tool_use : p->main;
    if (rq->reasoning_effort && !jinja_tpl_reads(t, "reasoning_effort")) {
        int rc =
            chat_fail(err, 400, "reasoning_effort", "%s%s",
                      "reasoning_effort: this model's chat template does not read it (gpt-oss's "
                      "does); use chat_template_kwargs.enable_thinking",
                      " or thinking_token_budget");
        err->code = "unsupported_parameter";
        return rc;
    }
    local.adapt = &p->adapt;
    bool list = tools && !p->template_tools;
    bool history = !p->template_calls && tool_turns(rq->messages);
    if (list) local.tools = NULL; /* written into the messages instead */
    if (list || history) {
        tps_err te = {{0}};
        rewritten = chat_tools_inject(rq->messages, list ? tools : NULL, p->tools, history,
                                      !p->template_tools, !p->adapt.system_in_user, &te);
        if (!rewritten) return chat_fail(err, 500, NULL, "%s%s", te.msg, "");
        local.messages = rewritten;
    }
    jinja_limits lim;
    render_limits(&lim);
    jinja_run *r = jinja_run_new(&lim);
    sbuf text;
    sbuf_init(&text);
    int rc = r ? chat_request_vars(r, &local, p->bos, p->eos, err)
               : chat_fail(err, 500, NULL, "out of memory%s%s", "", "");
    if (!rc) {
        jinja_error je;
        if (rq->now) jinja_set_time(r, rq->now);
        if (rq->cancel) jinja_set_cancel(r, rq->cancel);
        rc = jinja_render(r, t, &text, &je);
        if (rc) render_error(&je, err);
    }
    size_t len = text.len, skip = 0;
    if (!rc && rq->continue_final_message) rc = continue_final(local.messages, text.p, &len, err);
    size_t bl = p->bos ? strlen(p->bos) : 0;
    if (!rc && p->strip_bos && bl && len >= bl && !memcmp(text.p, p->bos, bl)) skip = bl;
    if (!rc) sbuf_add(out, text.p ? text.p + skip : "", len - skip);
    if (!rc && sbuf_failed(out)) rc = chat_fail(err, 500, NULL, "out of memory%s%s", "", "");
    sbuf_free(&text);
    jinja_run_free(r);
    json_decref(rewritten);
    return rc;
}
