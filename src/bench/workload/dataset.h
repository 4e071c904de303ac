/* Reading a --dataset file: which of three formats it is (by content, not
 * by name), and its entries, checked, with errors that name the file and
 * line (and for ShareGPT the entry). No tokenizer, no request bodies:
 * workload.c turns entries into requests (sizing trace prompts, counting
 * ShareGPT replies).
 *
 * Formats:
 *   JSONL: one {"prompt": "..."} or {"messages": [...]} object per line,
 *     optional "max_tokens" (>= 1);
 *   ShareGPT: a JSON array of {"conversations": [{"from", "value"}, ...]};
 *     an entry gives its first human turn ("human" or "user") as the prompt
 *     and the reply right after it ("gpt" or "assistant") as the text whose
 *     length becomes max_tokens. Entries without both are skipped and
 *     counted, not fatal, unless none is usable. For whole conversations
 *     (--turns) an entry also keeps every human message with the reply
 *     right after it, from the first human turn until the alternation
 *     breaks;
 *   trace (Mooncake): JSONL of {"timestamp": ms, "input_length": N,
 *     "output_length": M, "hash_ids": [...]} (hash_ids optional): each line
 *     one request of N prompt tokens, sent at its timestamp, whose prompt's
 *     DATASET_BLOCK_TOKENS-token blocks are named by hash_ids.
 *
 * Detection: the first non-space byte '[' is ShareGPT; JSONL whose first
 * object has "timestamp" and "input_length" is a trace; anything else is
 * JSONL. Not here: token counts, prompts of a trace, sending. */
#ifndef TPS_BENCH_DATASET_H
#define TPS_BENCH_DATASET_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* Tokens per hash_id block of a trace (Mooncake's block size). */
#define DATASET_BLOCK_TOKENS 512u
/* The largest input_length / output_length / max_tokens a line may ask for. */
#define DATASET_MAX_TOKENS 1000000u

typedef enum dataset_format {
    DATASET_JSONL = 0,
    DATASET_SHAREGPT = 1,
    DATASET_TRACE = 2,
} dataset_format;

const char *dataset_format_name(dataset_format f); /* "jsonl", "sharegpt", "trace" */

typedef struct dataset_entry {
    size_t line;         /* 1-based line of the file where the entry starts */
    json_t *content;     /* JSONL: the prompt string or messages array; ShareGPT: the prompt
                            string; trace: NULL. Owned (a reference) */
    json_t *reply;       /* ShareGPT: the reply string, owned; else NULL */
    json_t *turns;       /* ShareGPT: the conversation from its first human turn as an array
                            [human, reply, human, reply, ...] of strings, each human message
                            followed by its reply, up to the first message that breaks that
                            alternation (--turns); owned; else NULL */
    uint32_t max_tokens; /* JSONL: "max_tokens", 0 when absent; trace: output_length */
    uint32_t input_len;  /* trace: input_length (prompt tokens, BOS included) */
    double timestamp_ms; /* trace: "timestamp" */
    uint64_t *hash_ids;  /* trace: (n_hash_ids,) block names, owned; NULL without */
    size_t n_hash_ids;
} dataset_entry;

typedef struct dataset {
    dataset_format format;
    dataset_entry *entries; /* (n,), owned */
    size_t n;
    size_t skipped; /* ShareGPT entries without a human turn and a reply to it */
} dataset;

dataset_format dataset_detect(const char *buf, size_t len);

/* Parses buf[0..len) (detected format) into d. `name` starts every error
 * ("NAME:LINE: ...", ShareGPT "NAME:LINE: entry K: ..."); chat says whether
 * JSONL "messages" may be used (--endpoint chat). Fails when nothing is
 * usable. On error d is empty. */
int dataset_parse(dataset *d, const char *buf, size_t len, const char *name, bool chat, tps_err *e);
void dataset_free(dataset *d);

#endif
