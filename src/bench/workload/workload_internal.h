/* What the workload room's files share (workload.h is the public side).
 * One file per concern, and a new workload shape is a file of its own
 * called from workload_build (workload.c), using these pieces:
 *   workload_tok.c      --tokenizer loaded: a GGUF or a Hugging Face tokenizer.json
 *   workload_chat.c     its chat template: a chat prompt as the server renders it
 *   workload_count.c    a prompt's tokens as the server counts them
 *   workload_body.c     request bodies as JSON
 *   workload_text.c     synthetic text of N model tokens
 *   workload_prefix.c   shared prefixes: which one, their texts, prompts behind them
 *   workload_synth.c    the synthetic workload (--input-len, --prefix-len, --turns)
 *   workload_turns.c    multi-turn bodies at send time
 *   workload_trace.c    a Mooncake trace: shared block texts, send times
 *   workload_dataset.c  JSONL and ShareGPT datasets, ShareGPT conversations
 * Calls go one way: workload.c -> synth / dataset -> prefix, trace ->
 * text -> count, and body below all of them. Not here: sending (client/). */
#ifndef TPS_BENCH_WORKLOAD_INTERNAL_H
#define TPS_BENCH_WORKLOAD_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/error.h"
#include "base/rng.h"
#include "base/sbuf.h"
#include "bench/io/http_call.h"
#include "bench/workload/workload.h"

struct tokenizer;
struct dataset;
typedef struct wl_chat wl_chat;

/* ---- counting (workload_count.c) ----------------------------------------------------- */

/* The body shapes of a server's POST /tokenize. */
enum {
    WL_TOKENIZE_CONTENT = 0, /* llama.cpp: {"content", "add_special"} -> {"tokens"} */
    WL_TOKENIZE_PROMPT = 1,  /* vLLM, SGLang: {"model", "prompt"} -> {"count", "tokens"} */
};

/* How a workload counts tokens: the loaded tokenizer (and, for a chat
 * prompt, its chat template), else an open /tokenize. */
typedef struct wl_counter {
    const struct tokenizer *tok;
    const struct wl_chat *chat; /* with tok: a text is one user message, counted rendered */
    bool server;                /* call is open on a /tokenize that answered */
    int shape;                  /* WL_TOKENIZE_*: the body that /tokenize answered */
    const char *model;          /* "model" of the prompt shape, or NULL */
    http_call call;             /* /tokenize */
} wl_counter;

static inline bool wl_can_count(const wl_counter *c) {
    return c->tok || c->server;
}
/* Picks w's way to count (and names it in w->input_source): its tokenizer,
 * else o->tokenize_url when it answers, else none. */
void wl_open_counter(workload *w, wl_counter *c, const workload_opts *o);
void wl_counter_close(wl_counter *c);
/* Prompt tokens as the server counts them (BOS included); -1 on failure. */
int64_t wl_count_tokens(wl_counter *c, const char *text);

/* ---- the chat template (workload_chat.c) ---------------------------------------------- */

/* src (Jinja) compiled, with tok's BOS / EOS texts and add-BOS rule. */
int wl_chat_new(wl_chat **out, const char *src, const struct tokenizer *tok, tps_err *e);
void wl_chat_free(wl_chat *c);
/* What a server tokenizes for one user message `text` (generation prompt
 * added, a leading BOS text dropped when the tokenizer adds BOS itself),
 * into out (emptied first). 0, or an error code. */
int wl_chat_render(const wl_chat *c, const char *text, sbuf *out);

/* The tokenizer of --tokenizer (a GGUF, a tokenizer.json or a directory
 * holding one) into w->tok, and its chat template into w->chat
 * (workload_tok.c). */
int wl_load_tokenizer(workload *w, const char *path, tps_err *e);

/* ---- bodies (workload_body.c) ------------------------------------------------------------ */

/* The fields every body of the workload carries besides its content and
 * max_tokens; NULL when out of memory. */
json_t *wl_body_common(const workload_opts *o, bool ignore_eos);
/* common + content + max_tokens as compact JSON in *out (malloc'ed). Takes
 * ownership of content: a prompt string, a messages array, or (chat) a
 * string that becomes the one user message. */
int wl_dump_body(json_t *common, json_t *content, bench_endpoint ep, uint32_t max_tokens,
                 char **out, size_t *len, tps_err *e);
/* it's body from content (owned) and max_tokens, with w's common fields. */
int wl_make_body(workload *w, workload_item *it, json_t *content, uint32_t max_tokens, tps_err *e);

/* ---- text (workload_text.c) ----------------------------------------------------------------- */

/* Appends to s: TPS_ENOMEM once any append has failed (sbuf's failure sticks). */
static inline int wl_addn(sbuf *s, const char *t, size_t n) {
    sbuf_add(s, t, n);
    return sbuf_failed(s) ? TPS_ENOMEM : TPS_OK;
}
static inline int wl_add(sbuf *s, const char *t) {
    return wl_addn(s, t, strlen(t));
}
/* Text of `target` tokens (as close as counting allows) after s's first
 * `keep` bytes: "<number>" then random words, adjusted by re-counting the
 * whole text. Returns the count reached (target when nothing can count); -1
 * when counting failed. Never removes any of the kept bytes. */
int64_t wl_text(sbuf *s, size_t keep, size_t number, uint32_t target, wl_counter *c, tps_rng *r);

/* ---- shared prefixes (workload_prefix.c) ------------------------------------------------------
 */

/* Which shared prefix the j-th prompt (or conversation) starts with. */
typedef struct wl_picker {
    size_t k;
    double *cdf; /* (k,) cumulative Zipf weights; NULL: round robin */
    tps_rng r;
} wl_picker;

int wl_picker_init(wl_picker *p, size_t k, double zipf, uint64_t seed, tps_err *e);
uint32_t wl_picker_next(wl_picker *p, size_t j);

/* What sizing prompts needs of one shared prefix. */
typedef struct wl_prefix {
    uint32_t tokens;       /* the prefix's count (BOS included) */
    size_t anchor;         /* byte where its last words, the anchor, begin */
    uint32_t anchor_count; /* the anchor's count on its own */
    int32_t *ids;          /* with the tokenizer: the prefix's ids, owned */
    size_t n_ids;
} wl_prefix;

void wl_prefixes_free(wl_prefix *pi, size_t k);
/* o->n_prefixes texts of o->prefix_len tokens into w->prefixes, described in pi. */
int wl_build_prefixes(workload *w, wl_prefix *pi, wl_counter *c, const workload_opts *o,
                      tps_err *e);
/* A single-turn prompt after shared prefix pfx into s: prefix + " " + an own
 * part of `in` tokens starting with the number i. *got: the whole prompt's
 * count; *keep: where the own part begins. */
int wl_prefixed_prompt(workload *w, sbuf *s, size_t *keep, int64_t *got, size_t i, uint32_t pfx,
                       uint32_t in, const wl_prefix *pi, wl_counter *c, tps_rng *r, tps_err *e);

/* ---- the builders (workload_synth.c, workload_trace.c, workload_dataset.c) -------------- */

int wl_build_synthetic(workload *w, const workload_opts *o, tps_err *e);
/* A trace's items into the slots from n0 on: prompts from shared blocks,
 * send times from the timestamps. */
int wl_trace_items(workload *w, const struct dataset *d, size_t n0, const workload_opts *o,
                   tps_err *e);
/* o->dataset read and parsed (workload_parse_dataset). */
/* The longest a trace replay may span (its send times stay far inside a
 * uint64 of nanoseconds): 30 days. */
#define WL_TRACE_MAX_S (30.0 * 86400)

int wl_build_dataset(workload *w, const workload_opts *o, tps_err *e);

/* Embeddings (workload_batch.c): every `batch` consecutive items (0 means
 * 1) become one request whose "input" is their texts; a last short group
 * is dropped when there are several groups. */
int wl_batch_inputs(workload *w, uint32_t batch, tps_err *e);

#endif
