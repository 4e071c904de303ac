/* OpenAI response formatting (see sse_write.h). Written by hand into an sbuf
 * rather than built as a jansson tree: one event per token must not
 * allocate. Field order follows OpenAI's own responses. */
#include "server/write/sse_write.h"

#include <string.h>

#include "base/clock.h"
#include "base/utf8.h"

static double span_ms(uint64_t from, uint64_t to) {
    return from && to > from ? (double)(to - from) / (double)TPS_NS_PER_MS : 0.0;
}

void sse_timings_json(sbuf *b, const engine_timings *t) {
    sbuf_adds(b, "{\"queue_ms\":");
    sbuf_json_num(b, span_ms(t->t_queued, t->t_first_scheduled));
    sbuf_adds(b, ",\"prefill_ms\":");
    sbuf_json_num(b, span_ms(t->t_first_scheduled, t->t_first_token));
    sbuf_printf(b, ",\"prompt_tokens\":%u,\"cached_tokens\":%u,\"decode_ms\":", t->prompt_tokens,
                t->cached_tokens);
    sbuf_json_num(b, span_ms(t->t_first_token, t->t_finished));
    sbuf_printf(b, ",\"completion_tokens\":%u,\"ttft_ms\":", t->generated_tokens);
    sbuf_json_num(b, span_ms(t->t_queued, t->t_first_token));
    /* signed: a seed given as -5 reads back as -5, and replays */
    sbuf_printf(b, ",\"preemptions\":%u,\"seed\":%lld}", t->preemptions,
                (long long)(int64_t)t->seed);
}

/* The fields every response object opens with; a chat one's object is
 * chat_object, a completion's "text_completion" (streamed or not). */
static void open_object(sbuf *b, const sse_meta *m, const char *chat_object) {
    sbuf_adds(b, "{\"id\":");
    sbuf_json_str(b, m->id, strlen(m->id));
    sbuf_printf(b, ",\"object\":\"%s\"", m->kind == OAI_CHAT ? chat_object : "text_completion");
    sbuf_printf(b, ",\"created\":%lld,\"model\":", (long long)m->created);
    sbuf_json_str(b, m->model, strlen(m->model));
}

static void head(sbuf *b, const sse_meta *m) {
    open_object(b, m, "chat.completion.chunk");
}

void sse_chunk_role(sbuf *b, const sse_meta *m, uint32_t index) {
    sbuf_adds(b, "data: ");
    head(b, m);
    sbuf_printf(b,
                ",\"choices\":[{\"index\":%u,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
                "\"finish_reason\":null}]}\n\n",
                index);
}

/* ---- logprobs ---------------------------------------------------------------------------- */

/* A JSON string of s with every byte that is not part of a whole UTF-8
 * character replaced by U+FFFD. */
static void json_str_lossy(sbuf *b, const char *s, size_t n) {
    char buf[256];
    size_t o = 0;
    for (size_t i = 0; i < n && o + 4 < sizeof buf;) {
        size_t l = utf8_len((const unsigned char *)s + i, n - i);
        if (l) {
            memcpy(buf + o, s + i, l);
            o += l, i += l;
        } else {
            memcpy(buf + o, "\xef\xbf\xbd", 3);
            o += 3, i++;
        }
    }
    sbuf_json_str(b, buf, o);
}

static void token_json(sbuf *b, const tokenizer *tok, int32_t id, bool with_bytes) {
    size_t len = 0;
    const char *p = tokenizer_piece(tok, id, true, &len);
    if (!p) p = "", len = 0;
    sbuf_adds(b, "\"token\":");
    json_str_lossy(b, p, len);
    if (!with_bytes) return;
    sbuf_adds(b, ",\"bytes\":[");
    for (size_t i = 0; i < len; i++)
        sbuf_printf(b, "%s%u", i ? "," : "", (unsigned)(unsigned char)p[i]);
    sbuf_adds(b, "]");
}

/* A logprob as JSON: finite, or the most negative finite float for -inf
 * (JSON has no infinity; OpenAI reports -9999 for such tokens). */
static void lp_num(sbuf *b, float lp) {
    sbuf_printf(b, "%.9g", lp > -9999.0f ? (double)lp : -9999.0);
}

static void chat_logprobs(sbuf *b, const tokenizer *tok, const sse_lp *recs, size_t n) {
    sbuf_adds(b, "{\"content\":[");
    for (size_t i = 0; i < n; i++) {
        sbuf_adds(b, i ? ",{" : "{");
        token_json(b, tok, recs[i].token, true);
        sbuf_adds(b, ",\"logprob\":");
        lp_num(b, recs[i].logprob);
        sbuf_adds(b, ",\"top_logprobs\":[");
        for (uint32_t k = 0; k < recs[i].n_top; k++) {
            sbuf_adds(b, k ? ",{" : "{");
            token_json(b, tok, recs[i].top_id[k], true);
            sbuf_adds(b, ",\"logprob\":");
            lp_num(b, recs[i].top_logprob[k]);
            sbuf_adds(b, "}");
        }
        sbuf_adds(b, "]}");
    }
    sbuf_adds(b, "]}");
}

/* Completions: top_logprobs maps token text to logprob; two ids that
 * spell the same text keep the first (most likely), as OpenAI's dict does. */
static void completion_logprobs(sbuf *b, const tokenizer *tok, const sse_lp *recs, size_t n) {
    sbuf_adds(b, "{\"tokens\":[");
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *p = tokenizer_piece(tok, recs[i].token, true, &len);
        if (i) sbuf_adds(b, ",");
        json_str_lossy(b, p ? p : "", p ? len : 0);
    }
    sbuf_adds(b, "],\"token_logprobs\":[");
    for (size_t i = 0; i < n; i++) {
        if (i) sbuf_adds(b, ",");
        lp_num(b, recs[i].logprob);
    }
    sbuf_adds(b, "],\"top_logprobs\":[");
    for (size_t i = 0; i < n; i++) {
        sbuf_adds(b, i ? ",{" : "{");
        for (uint32_t k = 0; k < recs[i].n_top; k++) {
            size_t len = 0, lk = 0;
            const char *p = tokenizer_piece(tok, recs[i].top_id[k], true, &len);
            bool dup = false;
            for (uint32_t j = 0; j < k && !dup; j++) {
                const char *q = tokenizer_piece(tok, recs[i].top_id[j], true, &lk);
                dup = lk == len && (!len || !memcmp(p, q, len));
            }
            if (dup) continue;
            if (b->len && b->p[b->len - 1] != '{') sbuf_adds(b, ",");
            json_str_lossy(b, p ? p : "", p ? len : 0);
            sbuf_adds(b, ":");
            lp_num(b, recs[i].top_logprob[k]);
        }
        sbuf_adds(b, "}");
    }
    sbuf_adds(b, "],\"text_offset\":[");
    for (size_t i = 0; i < n; i++)
        sbuf_printf(b, "%s%u", i ? "," : "", recs[i].text_offset);
    sbuf_adds(b, "]}");
}

void sse_logprobs_json(sbuf *b, oai_kind kind, const tokenizer *tok, const sse_lp *recs, size_t n) {
    if (kind == OAI_CHAT)
        chat_logprobs(b, tok, recs, n);
    else
        completion_logprobs(b, tok, recs, n);
}

/* ,"logprobs": and lp's n records, or null without them. */
static void logprobs_field(sbuf *b, oai_kind kind, const tokenizer *tok, const sse_lp *lp,
                           size_t n) {
    sbuf_adds(b, ",\"logprobs\":");
    if (lp)
        sse_logprobs_json(b, kind, tok, lp, n);
    else
        sbuf_adds(b, "null");
}

/* A token's chunk; chat's delta carries the text as `field` (thinking:
 * as reasoning_content, llama-server's and older vLLM's name, and as
 * reasoning, vLLM's since late 2025: clients read either). */
static void chunk_text(sbuf *b, const sse_meta *m, uint32_t index, const char *field,
                       const char *text, size_t n, int32_t token, const sse_lp *lp,
                       const tokenizer *tok) {
    sbuf_adds(b, "data: ");
    head(b, m);
    sbuf_printf(b, ",\"choices\":[{\"index\":%u", index);
    if (m->kind == OAI_CHAT) {
        sbuf_printf(b, ",\"delta\":{\"%s\":", field);
        sbuf_json_str(b, text, n);
        if (!strcmp(field, "reasoning_content")) {
            sbuf_adds(b, ",\"reasoning\":");
            sbuf_json_str(b, text, n);
        }
        sbuf_adds(b, "}");
        if (lp) {
            sbuf_adds(b, ",\"logprobs\":");
            sse_logprobs_json(b, m->kind, tok, lp, 1);
        }
    } else {
        sbuf_adds(b, ",\"text\":");
        sbuf_json_str(b, text, n);
        logprobs_field(b, m->kind, tok, lp, 1);
    }
    if (token >= 0)
        sbuf_printf(b, ",\"token_ids\":[%d]", token);
    else
        sbuf_adds(b, ",\"token_ids\":[]"); /* held text: no token arrives with it */
    sbuf_adds(b, ",\"finish_reason\":null}]}\n\n");
}

void sse_chunk_text(sbuf *b, const sse_meta *m, uint32_t index, const char *text, size_t n,
                    int32_t token, const sse_lp *lp, const tokenizer *tok) {
    chunk_text(b, m, index, "content", text, n, token, lp, tok);
}

void sse_chunk_reasoning(sbuf *b, const sse_meta *m, uint32_t index, const char *text, size_t n,
                         int32_t token, const sse_lp *lp, const tokenizer *tok) {
    chunk_text(b, m, index, "reasoning_content", text, n, token, lp, tok);
}

void sse_chunk_finish(sbuf *b, const sse_meta *m, uint32_t index, const char *finish_reason,
                      const engine_timings *t) {
    sbuf_adds(b, "data: ");
    head(b, m);
    sbuf_printf(b, ",\"choices\":[{\"index\":%u", index);
    sbuf_adds(b, m->kind == OAI_CHAT ? ",\"delta\":{}" : ",\"text\":\"\",\"logprobs\":null");
    sbuf_adds(b, ",\"finish_reason\":");
    sbuf_json_str(b, finish_reason, strlen(finish_reason));
    sbuf_adds(b, "}],\"timings\":");
    sse_timings_json(b, t);
    sbuf_adds(b, "}\n\n");
}

/* OpenAI's usage object; prompt_tokens_details.cached_tokens is theirs too
 * (prompt tokens served from the prefix cache). */
static void usage(sbuf *b, const sse_meta *m, const sse_usage *u, const engine_timings *t) {
    sbuf_printf(b,
                "\"usage\":{\"prompt_tokens\":%u,\"completion_tokens\":%u,\"total_tokens\":%u,"
                "\"prompt_tokens_details\":{\"cached_tokens\":%u}",
                u->prompt_tokens, u->completion_tokens, u->prompt_tokens + u->completion_tokens,
                t->cached_tokens);
    if (m->kind == OAI_CHAT)
        sbuf_printf(b, ",\"completion_tokens_details\":{\"reasoning_tokens\":%u}",
                    u->reasoning_tokens);
    sbuf_adds(b, "}");
}

void sse_chunk_usage(sbuf *b, const sse_meta *m, const sse_usage *u, const engine_timings *t) {
    sbuf_adds(b, "data: ");
    head(b, m);
    sbuf_adds(b, ",\"choices\":[],");
    usage(b, m, u, t);
    sbuf_adds(b, ",\"timings\":");
    sse_timings_json(b, t);
    sbuf_adds(b, "}\n\n");
}

static void call_json(sbuf *b, const char *id, const tool_call *c, bool args) {
    if (id) {
        sbuf_adds(b, "\"id\":");
        sbuf_json_str(b, id, strlen(id));
        sbuf_adds(b, ",\"type\":\"function\",");
    }
    sbuf_adds(b, "\"function\":{");
    if (id) {
        sbuf_adds(b, "\"name\":");
        sbuf_json_str(b, c->name, strlen(c->name));
        sbuf_adds(b, ",");
    }
    sbuf_adds(b, "\"arguments\":");
    if (args)
        sbuf_json_str(b, c->arguments, strlen(c->arguments));
    else
        sbuf_adds(b, "\"\"");
    sbuf_adds(b, "}");
}

void sse_chunk_tool_start(sbuf *b, const sse_meta *m, uint32_t index, uint32_t call_index,
                          const char *id, const char *name, size_t name_len) {
    sbuf_adds(b, "data: ");
    head(b, m);
    sbuf_printf(b, ",\"choices\":[{\"index\":%u,\"delta\":{\"tool_calls\":[{\"index\":%u,\"id\":",
                index, call_index);
    sbuf_json_str(b, id, strlen(id));
    sbuf_adds(b, ",\"type\":\"function\",\"function\":{\"name\":");
    sbuf_json_str(b, name, name_len);
    sbuf_adds(b, ",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n");
}

void sse_chunk_tool_args(sbuf *b, const sse_meta *m, uint32_t index, uint32_t call_index,
                         const char *args, size_t n) {
    sbuf_adds(b, "data: ");
    head(b, m);
    sbuf_printf(b,
                ",\"choices\":[{\"index\":%u,\"delta\":{\"tool_calls\":[{\"index\":%u,"
                "\"function\":{\"arguments\":",
                index, call_index);
    sbuf_json_str(b, args, n);
    sbuf_adds(b, "}}]},\"finish_reason\":null}]}\n\n");
}

/* A chat message's reasoning_content and reasoning (the same text under
 * both names), when the choice has one. */
static void reasoning(sbuf *b, const sse_text *r) {
    if (!r || !r->p) return;
    sbuf_adds(b, ",\"reasoning_content\":");
    sbuf_json_str(b, r->p, r->n);
    sbuf_adds(b, ",\"reasoning\":");
    sbuf_json_str(b, r->p, r->n);
}

void sse_body_choice_tool_calls(sbuf *b, const sse_meta *m, uint32_t index, const char *content,
                                size_t n, const sse_text *reasoning_content, const tool_call *calls,
                                size_t n_calls, const char *ids_prefix, const char *finish_reason,
                                const sse_lp *lp, size_t n_lp, const tokenizer *tok) {
    sbuf_printf(b, "%s{\"index\":%u,\"message\":{\"role\":\"assistant\",\"content\":",
                index ? "," : "", index);
    if (n)
        sbuf_json_str(b, content, n);
    else
        sbuf_adds(b, "null");
    reasoning(b, reasoning_content);
    sbuf_adds(b, ",\"tool_calls\":[");
    for (size_t k = 0; k < n_calls; k++) {
        char id[112];
        snprintf(id, sizeof id, "%s%zu", ids_prefix, k);
        sbuf_adds(b, k ? ",{" : "{");
        call_json(b, id, &calls[k], true);
        sbuf_adds(b, "}");
    }
    sbuf_adds(b, "]}");
    logprobs_field(b, m->kind, tok, lp, n_lp);
    sbuf_printf(b, ",\"finish_reason\":\"%s\"}", finish_reason);
}

void sse_error(sbuf *b, const oai_error *e) {
    sbuf_adds(b, "data: ");
    oai_error_json(e, b);
    sbuf_adds(b, "\n\n");
}

void sse_done(sbuf *b) {
    sbuf_adds(b, "data: [DONE]\n\n");
}

void sse_body_open(sbuf *b, const sse_meta *m) {
    open_object(b, m, "chat.completion");
    sbuf_adds(b, ",\"choices\":[");
}

void sse_body_choice(sbuf *b, const sse_meta *m, uint32_t index, const char *text, size_t n,
                     const sse_text *reasoning_content, const char *finish_reason, const sse_lp *lp,
                     size_t n_lp, const tokenizer *tok) {
    sbuf_printf(b, "%s{\"index\":%u", index ? "," : "", index);
    if (m->kind == OAI_CHAT) {
        sbuf_adds(b, ",\"message\":{\"role\":\"assistant\",\"content\":");
        sbuf_json_str(b, text, n);
        reasoning(b, reasoning_content);
        sbuf_adds(b, "}");
    } else {
        sbuf_adds(b, ",\"text\":");
        sbuf_json_str(b, text, n);
    }
    logprobs_field(b, m->kind, tok, lp, n_lp);
    sbuf_adds(b, ",\"finish_reason\":");
    sbuf_json_str(b, finish_reason, strlen(finish_reason));
    sbuf_adds(b, "}");
}

void sse_body_close(sbuf *b, const sse_meta *m, const sse_usage *u, const engine_timings *t) {
    sbuf_adds(b, "],");
    usage(b, m, u, t);
    sbuf_adds(b, ",\"timings\":");
    sse_timings_json(b, t);
    sbuf_adds(b, "}");
}
