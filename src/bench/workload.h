/* What the bench sends: a list of prepared requests, each a ready JSON body
 * for /v1/completions or /v1/chat/completions, with its intended input and
 * output length in model tokens.
 *
 * Two sources:
 *   synthetic: --input-len / --output-len distributions (load.h) in model
 *     tokens; prompts are random words after a per-request unique prefix (so
 *     no prefix cache can serve one request from another), sized by counting
 *     tokens with the model's tokenizer (--tokenizer MODEL.gguf) or the
 *     server's POST /tokenize; without either, one word per token
 *     (approximate, and the result says so);
 *   dataset: --dataset FILE.jsonl, one {"prompt": "..."} or {"messages":
 *     [...]} object per line, optional "max_tokens".
 *
 * This is the one file of the bench that uses the model's tokenizer
 * (src/model); it is also what re-tokenizes streamed text when a server
 * reports no usage. Everything is prepared before the run: the send path only
 * points libcurl at a body. Not here: sending, timing. */
#ifndef TPS_BENCH_WORKLOAD_H
#define TPS_BENCH_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench/load.h"
#include "tps_error.h"

typedef enum bench_endpoint {
    BENCH_EP_COMPLETIONS = 0, /* POST /v1/completions, "prompt" */
    BENCH_EP_CHAT = 1,        /* POST /v1/chat/completions, "messages" */
} bench_endpoint;

const char *bench_endpoint_path(bench_endpoint ep);

typedef struct workload_item {
    char *body; /* the request JSON, NUL-terminated, owned */
    size_t body_len;
    uint32_t input_tokens; /* prompt tokens as counted here; 0 if unknown */
    uint32_t input_target; /* the length asked for (synthetic), else 0 */
    uint32_t max_tokens;   /* output tokens asked for */
} workload_item;

typedef struct workload_opts {
    bench_endpoint endpoint;
    const char *model; /* "model" field; NULL omits it */
    size_t n_items;    /* synthetic prompts to prepare (>= 1) */
    uint64_t seed;
    load_dist input_len, output_len;
    bool has_output_len;        /* dataset: --output-len overrides lines without max_tokens */
    const char *dataset;        /* JSONL path, or NULL for synthetic */
    const char *tokenizer_path; /* MODEL.gguf or NULL */
    const char *tokenize_url;   /* full URL of a /tokenize endpoint to try, or NULL */
    const char *api_key;        /* for /tokenize; NULL: none */
    int ignore_eos;             /* 1 send, 0 not, -1 default (synthetic yes, dataset no) */
    bool include_usage;         /* stream_options.include_usage */
    double temperature;         /* < 0: not sent */
} workload_opts;

typedef struct workload {
    workload_item *items; /* (n,), owned */
    size_t n;
    const char
        *input_source;     /* "tokenizer", "server /tokenize", "approximate (words)", "dataset" */
    bool exact_inputs;     /* every item hit its input target exactly */
    struct tokenizer *tok; /* owned; NULL without --tokenizer */
} workload;

int workload_build(workload *w, const workload_opts *o, tps_err *e);
/* Dataset from memory (also the fuzz entry point): buf[0..len) is JSONL;
 * `name` labels errors ("FILE:LINE: ..."). Appends nothing on error. */
int workload_parse_dataset(workload *w, const char *buf, size_t len, const char *name,
                           const workload_opts *o, tps_err *e);
void workload_free(workload *w);

/* Tokens in text by the loaded tokenizer (no special tokens added), or -1
 * when the workload has none. */
int64_t workload_count_tokens(const workload *w, const char *text, size_t len);

#endif
