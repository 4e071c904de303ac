/* Thinking blocks of reasoning models: a chat answer that opens with
 * "<think>" ... "</think>" (Qwen3, QwQ, DeepSeek-R1 and its distills) holds
 * the model's reasoning in that block and its answer after it. A splitter
 * reads the output text as it is generated, in pieces of any size, and
 * hands every byte on as reasoning, answer (content) or marker, holding
 * back a tail that may still grow into a marker, so a marker split across
 * pieces is recognised and never handed on as text.
 *
 * Rules (those of vLLM's and llama-server's reasoning parsers):
 *   - a block opens only at the start of the output: "<think>" after at
 *     most THINK_MAX_LEAD bytes of whitespace (dropped with the marker);
 *     any other first text means the answer began without thinking;
 *   - or it is open from the start, when the prompt ended inside one (the
 *     DeepSeek-R1 distills' generation prompt ends with "<think>\n");
 *   - the first "</think>" inside closes it; everything after is answer,
 *     "<think>" included.
 * The engine keeps one splitter per sequence to know when thinking ends (a
 * grammar constrains only the answer; a thinking budget closes the block);
 * the server keeps one per choice to split the text it sends into
 * reasoning_content and content. Fed the same bytes, they agree.
 *
 * The markers are a row of a table (think_kind): "<think>"/"</think>", or
 * gpt-oss's analysis channel, "<|channel|>analysis<|message|>" ...
 * "<|end|>", which the engine tracks for a thinking budget (the server
 * splits harmony's channels itself, server/harmony.h).
 *
 * A splitter is a small fixed-size value: no allocation. Not here: which
 * models think (the server decides), tokens, budgets, grammars. */
#ifndef TPS_ENGINE_THINK_H
#define TPS_ENGINE_THINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/tokenizer.h"

#define THINK_OPEN       "<think>"
#define THINK_CLOSE      "</think>"
#define THINK_MAX_LEAD   16 /* whitespace bytes a block may open after */
#define THINK_MARKER_MAX 32 /* bytes of a marker */

/* Which markers a block has (a row of think.c's table). */
typedef enum think_kind {
    THINK_TAGS = 0,    /* "<think>" ... "</think>" */
    THINK_HARMONY = 1, /* gpt-oss: "<|channel|>analysis<|message|>" ... "<|end|>" */
    THINK_N_KINDS
} think_kind;

/* A row: the markers, each at most THINK_MARKER_MAX bytes and without a
 * border (no proper prefix that is also a suffix: the splitter re-reads
 * only the byte that broke a match); in_grammar: a grammar that constrains
 * the answer describes the block too (the server's harmony call grammar
 * holds the analysis channel), so it stays on inside the block. */
typedef struct think_markers {
    const char *open, *close;
    bool in_grammar;
} think_markers;

/* The row of kind (THINK_TAGS for an unknown one); static storage. */
const think_markers *think_markers_of(think_kind kind);

typedef enum think_state {
    THINK_OFF = 0, /* no thinking expected: everything is answer */
    THINK_START,   /* only whitespace so far: "<think>" may still open a block */
    THINK_IN,      /* inside the block */
    THINK_DONE,    /* the block closed, or the answer began without one */
} think_state;

typedef enum think_part {
    THINK_PART_REASONING = 0,
    THINK_PART_CONTENT = 1,
    THINK_PART_MARKER = 2, /* "<think>" (with the whitespace before it), "</think>" */
} think_part;

/* Receives the bytes p[0..n) of one part, in output order (n > 0). */
typedef void (*think_sink)(void *ctx, think_part part, const char *p, size_t n);

typedef struct think_split {
    think_state state;
    uint8_t kind; /* think_kind */
    uint8_t n_held;
    char held[THINK_MAX_LEAD + THINK_MARKER_MAX]; /* whitespace and/or a marker's prefix */
} think_split;

/* state: THINK_OFF (no thinking), THINK_START (a block may open), or
 * THINK_IN (the prompt left one open). */
void think_init(think_split *t, think_state state);
/* The same for a block with kind's markers. */
void think_init_kind(think_split *t, think_state state, think_kind kind);

/* Feeds p[0..n); sink gets every byte that is decided. */
void think_feed(think_split *t, const char *p, size_t n, think_sink sink, void *ctx);

/* End of the output: held bytes go out as what they would have been had
 * no marker followed (reasoning inside a block, answer otherwise). */
void think_flush(think_split *t, think_sink sink, void *ctx);

/* Where a prompt leaves its output, from its last special token: walking
 * back from the end over ordinary text (normal and byte tokens), the
 * first added or control token met is
 *   open_id ("<think>")   -> THINK_IN: the prompt ends inside a block a
 *                            template opened (DeepSeek-R1's "<think>\n");
 *   close_id ("</think>") -> THINK_OFF: the template closed an empty block
 *                            to turn thinking off (Qwen3's enable_thinking
 *                            false), so the answer is all content;
 *   anything else         -> THINK_START: the output may open a block.
 * A vocabulary without those tokens (open_id or close_id < 0): THINK_START;
 * think_text_state reads the prompt's text instead. */
think_state think_prompt_state(const tokenizer *tok, const int32_t *ids, size_t n, int32_t open_id,
                               int32_t close_id);

/* The same from the prompt's text, for a vocabulary that spells the
 * markers in pieces: "<think>" or "</think>" at its end (trailing
 * whitespace aside) -> THINK_IN or THINK_OFF; else THINK_START. */
think_state think_text_state(const char *text, size_t n);

#endif
