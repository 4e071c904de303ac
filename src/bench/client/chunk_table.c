/* The steps every reader of response events shares (chunk_table.h): the
 * OpenAI dialect's table of delta fields, taking a text, reading a count,
 * releasing a chunk. A leaf: the readers (chunk.c, chunk_scan.c,
 * chunk_dialect.c) call it, it calls none of them. */
#include "bench/client/chunk_table.h"

#include <string.h>

/* The OpenAI dialect's delta/message fields (chunk_table.h), text first in
 * the order it is taken when one event carries several. */
const chunk_field chunk_openai_fields[] = {
    {"content", PART_ANSWER},
    {"reasoning_content", PART_REASONING}, /* llama.cpp, SGLang, DeepSeek, older vLLM */
    {"reasoning", PART_REASONING},         /* vLLM since late 2025, Ollama, OpenRouter */
    {"refusal", PART_ANSWER},
    {"tool_calls", PART_TOOL},
    {"function_call", PART_TOOL},
    {"role", PART_NONE},
    {"name", PART_NONE},
    {"tool_call_id", PART_NONE},
    {"token_ids", PART_NONE},
    {"tokens", PART_NONE},
    {"annotations", PART_NONE},
    {"audio", PART_NONE},
    {"reasoning_details", PART_NONE}, /* OpenRouter: structured copies of "reasoning" */
};

const size_t chunk_openai_n_fields = sizeof chunk_openai_fields / sizeof chunk_openai_fields[0];

int chunk_openai_field(const char *k, size_t klen) {
    for (size_t i = 0; i < chunk_openai_n_fields; i++)
        if (strlen(chunk_openai_fields[i].key) == klen &&
            !memcmp(chunk_openai_fields[i].key, k, klen))
            return (int)chunk_openai_fields[i].part;
    return -1;
}

void chunk_take_text_json(bench_chunk *c, json_t *s, bool reasoning) {
    if (json_is_string(s) && json_string_length(s) > 0 && !c->text) {
        c->text = json_string_value(s);
        c->text_len = json_string_length(s);
        c->reasoning = reasoning;
    }
}

/* A non-negative integer field of o, or -1 when absent, null or not one. */
int64_t chunk_count_field(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) && json_integer_value(v) >= 0 ? (int64_t)json_integer_value(v) : -1;
}

void chunk_take_usage(bench_chunk *c, int64_t completion, int64_t prompt, int64_t reasoning,
                      int64_t cached) {
    if (completion >= 0) {
        c->has_usage = true;
        c->completion_tokens = (uint64_t)completion;
    }
    if (prompt >= 0) {
        c->has_prompt = true;
        c->prompt_tokens = (uint64_t)prompt;
    }
    if (reasoning >= 0) {
        c->has_reasoning_count = true;
        c->reasoning_tokens = (uint64_t)reasoning;
    }
    if (cached >= 0) {
        c->has_cached = c->cached_from_usage = true;
        c->cached_tokens = (uint64_t)cached;
    }
}

void bench_chunk_release(bench_chunk *c) {
    json_decref(c->root);
    c->root = NULL;
    c->text = NULL;
}
