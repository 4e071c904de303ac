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
 *   dataset: --dataset FILE, its format detected by content (dataset.h):
 *     JSONL of {"prompt": "..."} or {"messages": [...]} objects, optional
 *     "max_tokens"; ShareGPT JSON (first human turn as the prompt, the
 *     reply's length in tokens as max_tokens); or a Mooncake trace, whose
 *     lines become synthetic prompts of input_length tokens built from
 *     shared DATASET_BLOCK_TOKENS-token blocks (one text per hash_id, so
 *     requests naming the same blocks share their prefix exactly), sent at
 *     their timestamps (a timed workload: workload.timed, item.send_at_s).
 *
 * Two shapes of the synthetic source measure a prefix cache:
 *   shared prefixes (prefix_len > 0): every prompt is one of n_prefixes
 *     prefixes of prefix_len tokens, then its own part of --input-len tokens
 *     starting with the request's number, so a cache can serve exactly the
 *     prefix. Completions: prompt = prefix + " " + own part, and the
 *     tokenizer (when given) checks that the prompt's tokens start with the
 *     prefix's tokens. Chat: the prefix is the system message, the own part
 *     the user message;
 *   multi-turn (turns > 0): items[c * turns + t] holds conversation c's turn
 *     t user message; the body, which carries the earlier replies, is built
 *     at send time by workload_turn_body (the one exception to "everything
 *     prepared before the run").
 *
 * A ShareGPT dataset with turns > 0 is multi-turn too: its first
 * n_items / turns conversations in file order, turn t's user message the
 * conversation's t-th human message and its max_tokens the length of the
 * dataset's reply to it (the server's actual replies make the history). A
 * conversation with fewer human turns than `turns` has fewer turns: its
 * later items have no text (workload_conv_turns).
 *
 * The workload room is the one part of the bench that uses the model's
 * tokenizer (src/model); it is also what re-tokenizes streamed text when a
 * server reports no usage. Everything else is prepared before the run: the
 * send path only points libcurl at a body. Each shape is a file of its own
 * (workload_internal.h lists them: a new shape goes beside them). Not here:
 * sending, timing, which conversation goes next (convo.h). */
#ifndef TPS_BENCH_WORKLOAD_H
#define TPS_BENCH_WORKLOAD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench/io/http_call.h"
#include "bench/workload/load.h"
#include "base/error.h"

typedef enum bench_endpoint {
    BENCH_EP_COMPLETIONS = 0, /* POST /v1/completions, "prompt" */
    BENCH_EP_CHAT = 1,        /* POST /v1/chat/completions, "messages" */
    BENCH_EP_RESPONSES = 2,   /* POST /v1/responses (OpenAI), "input", "max_output_tokens" */
    BENCH_EP_MESSAGES = 3,    /* POST /v1/messages (Anthropic), "system" + "messages" */
    BENCH_EP_EMBEDDINGS = 4,  /* POST /v1/embeddings, "input": a batch of texts, not streamed */
} bench_endpoint;

/* The version header every Messages request carries. */
#define BENCH_ANTHROPIC_VERSION "2023-06-01"

const char *bench_endpoint_path(bench_endpoint ep);
/* Its name as --endpoint takes it ("chat", ...). */
const char *bench_endpoint_name(bench_endpoint ep);
/* Whether ep takes a conversation (messages) rather than one prompt string. */
bool bench_endpoint_chatlike(bench_endpoint ep);
/* Whether ep generates tokens (all but embeddings). */
bool bench_endpoint_generates(bench_endpoint ep);

#define WL_NO_PREFIX UINT32_MAX

typedef struct workload_item {
    char *body; /* the request JSON, NUL-terminated, owned; NULL in a multi-turn workload */
    size_t body_len;
    char *text; /* multi-turn: this turn's user message, owned; else NULL */
    size_t text_len;
    uint32_t input_tokens; /* prompt tokens as counted here (multi-turn: the user message, and
                              the shared prefix in a first turn); 0 if unknown */
    uint32_t input_target; /* the length asked for (synthetic, shared prefix included), else 0 */
    uint32_t max_tokens;   /* output tokens asked for */
    uint32_t prefix;  /* the shared prefix it starts with (workload.prefixes) or WL_NO_PREFIX */
    double send_at_s; /* timed workload (a trace): when to send, in s after the run's start
                         (trace time / trace_speed), non-decreasing; else -1 */
} workload_item;

typedef struct workload_opts {
    bench_endpoint endpoint;
    const char *model; /* "model" field; NULL omits it */
    size_t n_items;    /* synthetic prompts to prepare (>= 1) */
    uint64_t seed;
    load_dist input_len, output_len;
    bool has_output_len;        /* dataset: --output-len for JSONL lines without max_tokens;
                                   ShareGPT: instead of the reply's length; not for traces */
    const char *dataset;        /* dataset path (JSONL, ShareGPT or trace), or NULL: synthetic */
    double trace_speed;         /* trace replay: send times are trace time / trace_speed
                                   (2: twice as fast); 0 means 1; must be finite and >= 0 */
    const char *tokenizer_path; /* MODEL.gguf or NULL */
    const char *tokenize_url;   /* full URL of a /tokenize endpoint to try, or NULL */
    http_auth auth;             /* how /tokenize is reached: as the load client does */
    int ignore_eos;             /* 1 send, 0 not, -1 default (synthetic yes, dataset no) */
    bool include_usage;         /* stream_options.include_usage (chat, completions) */
    bool no_stream;             /* "stream": false: whole responses */
    uint32_t batch_size;        /* embeddings: inputs per request (0 means 1) */
    double temperature;         /* < 0: not sent */
    /* a JSON object whose fields every body also carries (--extra-body), e.g.
     * {"return_tokens": true} so llama.cpp's server streams token ids; the
     * prompt, messages and max_tokens stay the workload's. NULL: none.
     * bench_spec_check refuses one that is not an object or that names a
     * field the workload writes (workload_extra_body_check). */
    const char *extra_body;
    /* shared prefixes (synthetic only): prefix_len > 0 tokens each, n_prefixes >= 1 of
     * them, chosen round robin, or with prefix_zipf > 0 by Zipf's law (prefix k, from 0,
     * with weight 1 / (k + 1)^prefix_zipf) */
    uint32_t prefix_len;
    uint32_t n_prefixes;
    double prefix_zipf;
    /* > 0: multi-turn; n_items (a multiple of turns) user messages of --input-len
     * tokens, n_items / turns conversations; with a ShareGPT dataset, its first
     * n_items / turns conversations (an error when it has fewer) */
    uint32_t turns;
} workload_opts;

/* NULL when s is a JSON object without the fields the workload writes
 * itself (prompt, messages, max_tokens, stream, stream_options, model,
 * temperature, ignore_eos); else why not, for a message. */
const char *workload_extra_body_check(const char *s);

/* What kind of workload the options ask for, named once from the flags
 * (workload_kind_of) so the checks, the run and the result's config read
 * one value instead of testing dataset, turns and prefix_len each time.
 * Shared prefixes also shape a multi-turn run (its first turn's prefix):
 * the kind is then WL_KIND_TURNS, and prefix_len says the rest. */
typedef enum workload_kind {
    WL_KIND_SYNTHETIC = 0, /* --input-len / --output-len prompts, each its own */
    WL_KIND_PREFIX,        /* synthetic, every prompt after one of --prefixes shared prefixes */
    WL_KIND_TURNS,         /* synthetic conversations of --turns turns */
    WL_KIND_DATASET,       /* --dataset's requests (a trace's at its times) */
    WL_KIND_DATASET_TURNS, /* --dataset's ShareGPT conversations, --turns of each */
} workload_kind;

workload_kind workload_kind_of(const workload_opts *o);
/* "synthetic", "shared-prefix", "multi-turn", "dataset", "dataset-conversations":
 * the result's config.workload. */
const char *workload_kind_name(workload_kind k);
/* Whether k sends conversations (the next turn after the reply). */
bool workload_kind_turns(workload_kind k);

/* The rules on the workload options alone, which workload_build and the
 * bench spec's checks (bench_spec.h) both apply: shared prefixes are
 * synthetic, not a dataset's. TPS_EINVAL with the flag and what to change.
 * (--extra-body's fields are the spec's rule: a library caller may let the
 * workload's own prompt and max_tokens win over the same names.) */
int workload_opts_check(const workload_opts *o, tps_err *e);

typedef struct workload {
    workload_item *items; /* (n,), owned */
    size_t n;
    const char *input_source; /* "tokenizer", "tokenizer + chat template", "server /tokenize",
                                 "server /tokenize (prompt)", "approximate (words)", "dataset" */
    bool exact_inputs;        /* every item hit its input target exactly */
    struct tokenizer *tok;    /* owned; NULL without --tokenizer */
    struct wl_chat *chat;     /* the tokenizer's chat template, compiled; owned; NULL: none */
    bench_endpoint endpoint;
    json_t *common;  /* every body's fields besides its content and max_tokens; owned */
    char **prefixes; /* (n_prefixes,) shared prefix texts, owned; NULL without */
    size_t n_prefixes;
    uint32_t prefix_tokens; /* each prefix's length as counted (BOS included), or the target */
    uint32_t turns;         /* > 0: multi-turn, items[c * turns + t] */
    size_t conversations;   /* n / turns */
    const char *format;     /* dataset: "jsonl", "sharegpt" or "trace"; NULL synthetic */
    bool timed;             /* items carry send_at_s: the client replays them at those times */
    size_t skipped;         /* dataset entries that gave no request (ShareGPT without a reply) */
    char note[200];         /* for the user, e.g. how many entries were skipped and why; "" */
} workload;

/* "round-robin" (*zipf = 0) or "zipf:S" with S > 0 (--prefix-dist). */
int workload_prefix_dist_parse(const char *s, double *zipf, tps_err *e);

int workload_build(workload *w, const workload_opts *o, tps_err *e);
/* Dataset from memory (also the fuzz entry point): buf[0..len) in any of
 * the formats of dataset.h, detected by content; `name` labels errors
 * ("FILE:LINE: ..."). Uses w->tok when loaded (ShareGPT reply lengths,
 * trace prompt sizes), else counts words. Appends nothing on error. */
int workload_parse_dataset(workload *w, const char *buf, size_t len, const char *name,
                           const workload_opts *o, tps_err *e);
void workload_free(workload *w);

/* The body of conversation conv's turn `turn` (from 0) of a multi-turn
 * workload, built at send time: the conversation's shared prefix (chat: the
 * system message), every earlier user message with the server's reply to
 * it, then this turn's user message. Chat sends them as messages;
 * completions as one text, each reply appended right after the prompt it
 * continued and a space before each user message. replies[k] (reply_lens[k]
 * bytes, UTF-8) answers turn k < turn; borrowed. *body is malloc'ed and
 * NUL-terminated, the caller frees it. One JSON build; no tokenizing. */
int workload_turn_body(const workload *w, size_t conv, uint32_t turn, const char *const *replies,
                       const size_t *reply_lens, char **body, size_t *body_len, tps_err *e);

/* Turns of conversation conv of a multi-turn workload: w->turns for a
 * synthetic one, up to w->turns for a ShareGPT dataset's (whose later
 * items then have no text); 0 when there is no such conversation. */
uint32_t workload_conv_turns(const workload *w, size_t conv);

/* The format of the dataset file at path as dataset_parse would detect it
 * from its first bytes ("jsonl", "sharegpt", "trace"; static strings), or
 * NULL when it cannot be read. For checks before building. */
const char *workload_dataset_format(const char *path);

/* Tokens in text by the loaded tokenizer (no special tokens added), or -1
 * when the workload has none. */
int64_t workload_count_tokens(const workload *w, const char *text, size_t len);

#endif
