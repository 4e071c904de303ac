/* OpenAI response formatting (see sse.h). Written by hand into an sbuf
 * rather than built as a jansson tree: one event per token must not
 * allocate. Field order follows OpenAI's own responses. */
#include "server/sse.h"

#include <string.h>

#include "metrics/clock.h"

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
    sbuf_printf(b, ",\"preemptions\":%u}", t->preemptions);
}

static void head(sbuf *b, const sse_meta *m) {
    sbuf_adds(b, "{\"id\":");
    sbuf_json_str(b, m->id, strlen(m->id));
    sbuf_adds(b, m->kind == OAI_CHAT ? ",\"object\":\"chat.completion.chunk\""
                                     : ",\"object\":\"text_completion\"");
    sbuf_printf(b, ",\"created\":%lld,\"model\":", (long long)m->created);
    sbuf_json_str(b, m->model, strlen(m->model));
}

void sse_chunk_role(sbuf *b, const sse_meta *m, uint32_t index) {
    sbuf_adds(b, "data: ");
    head(b, m);
    sbuf_printf(b,
                ",\"choices\":[{\"index\":%u,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
                "\"finish_reason\":null}]}\n\n",
                index);
}

void sse_chunk_text(sbuf *b, const sse_meta *m, uint32_t index, const char *text, size_t n,
                    int32_t token) {
    sbuf_adds(b, "data: ");
    head(b, m);
    sbuf_printf(b, ",\"choices\":[{\"index\":%u", index);
    if (m->kind == OAI_CHAT) {
        sbuf_adds(b, ",\"delta\":{\"content\":");
        sbuf_json_str(b, text, n);
        sbuf_adds(b, "}");
    } else {
        sbuf_adds(b, ",\"text\":");
        sbuf_json_str(b, text, n);
        sbuf_adds(b, ",\"logprobs\":null");
    }
    if (token >= 0) sbuf_printf(b, ",\"token_ids\":[%d]", token);
    sbuf_adds(b, ",\"finish_reason\":null}]}\n\n");
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
static void usage(sbuf *b, uint32_t prompt_tokens, uint32_t completion_tokens,
                  const engine_timings *t) {
    sbuf_printf(b,
                "\"usage\":{\"prompt_tokens\":%u,\"completion_tokens\":%u,\"total_tokens\":%u,"
                "\"prompt_tokens_details\":{\"cached_tokens\":%u}}",
                prompt_tokens, completion_tokens, prompt_tokens + completion_tokens,
                t->cached_tokens);
}

void sse_chunk_usage(sbuf *b, const sse_meta *m, uint32_t prompt_tokens, uint32_t completion_tokens,
                     const engine_timings *t) {
    sbuf_adds(b, "data: ");
    head(b, m);
    sbuf_adds(b, ",\"choices\":[],");
    usage(b, prompt_tokens, completion_tokens, t);
    sbuf_adds(b, ",\"timings\":");
    sse_timings_json(b, t);
    sbuf_adds(b, "}\n\n");
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
    sbuf_adds(b, "{\"id\":");
    sbuf_json_str(b, m->id, strlen(m->id));
    sbuf_adds(b, m->kind == OAI_CHAT ? ",\"object\":\"chat.completion\""
                                     : ",\"object\":\"text_completion\"");
    sbuf_printf(b, ",\"created\":%lld,\"model\":", (long long)m->created);
    sbuf_json_str(b, m->model, strlen(m->model));
    sbuf_adds(b, ",\"choices\":[");
}

void sse_body_choice(sbuf *b, const sse_meta *m, uint32_t index, const char *text, size_t n,
                     const char *finish_reason) {
    sbuf_printf(b, "%s{\"index\":%u", index ? "," : "", index);
    if (m->kind == OAI_CHAT) {
        sbuf_adds(b, ",\"message\":{\"role\":\"assistant\",\"content\":");
        sbuf_json_str(b, text, n);
        sbuf_adds(b, "},\"logprobs\":null");
    } else {
        sbuf_adds(b, ",\"text\":");
        sbuf_json_str(b, text, n);
        sbuf_adds(b, ",\"logprobs\":null");
    }
    sbuf_adds(b, ",\"finish_reason\":");
    sbuf_json_str(b, finish_reason, strlen(finish_reason));
    sbuf_adds(b, "}");
}

void sse_body_close(sbuf *b, uint32_t prompt_tokens, uint32_t completion_tokens,
                    const engine_timings *t) {
    sbuf_adds(b, "],");
    usage(b, prompt_tokens, completion_tokens, t);
    sbuf_adds(b, ",\"timings\":");
    sse_timings_json(b, t);
    sbuf_adds(b, "}");
}
