/* Stop conditions for one sequence: a set of stop token ids, and a
 * streaming matcher for stop strings on the generated TEXT.
 *
 * The matcher is fed each decoded text piece as it is produced. It releases
 * at once every byte that cannot be the start of a stop string, and holds
 * back a suffix that could still grow into one (at most STOP_MAX_LEN - 1
 * bytes), so a stop string split across any number of pieces is caught and
 * none of it is ever emitted. When a stop string completes, the text before
 * it is released and the stop string and anything after it are dropped
 * (OpenAI semantics). When generation ends for another reason (a stop token,
 * max_tokens, cancel), stop_flush releases what is held.
 *
 * Rules: the earliest full match in the text wins (generation stops at the
 * first moment any stop string is complete). If the input is valid UTF-8 and
 * the stop strings are, every release ends on a character boundary.
 *
 * Two request options (vLLM's): include_stop_str_in_output releases the
 * stop string itself too (the text is cut after it, not before), and
 * min_tokens disarms the matcher for the first tokens: a stop string that
 * completes while disarmed is not a match (its text is released), though a
 * partial one is still held, so one that completes once armed is caught
 * even when it began before.
 *
 * A stop_matcher is a fixed-size value (init into caller memory, ~4.7 KiB):
 * no allocation, ever. It will not: detokenize, decide max_tokens, or know
 * about the sampler. */
#ifndef TPS_ENGINE_STOP_H
#define TPS_ENGINE_STOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define STOP_MAX_STRINGS 16  /* stop strings per request */
#define STOP_MAX_LEN     256 /* bytes per stop string */
#define STOP_MAX_TOKENS  32  /* stop token ids per request (EOS, EOT, user's) */

typedef struct stop_matcher {
    int32_t n_tokens;
    int32_t tokens[STOP_MAX_TOKENS];
    int32_t n_strings;
    uint16_t len[STOP_MAX_STRINGS];
    char str[STOP_MAX_STRINGS][STOP_MAX_LEN];
    /* Held text, double-buffered: a release may point into the previous
     * buffer while the new held suffix is written into the other. */
    char hold[2][STOP_MAX_LEN];
    uint16_t hold_len;
    uint8_t hold_cur;
    bool matched;  /* a stop string completed; everything after is dropped */
    int16_t which; /* when matched: the index of the stop string that completed */
    bool include;  /* a match releases the stop string too (include_stop_str_in_output) */
    bool disarmed; /* full matches are not taken (the first min_tokens tokens) */
} stop_matcher;

/* What a feed or flush releases: head then tail, in that order, make the
 * bytes safe to emit now (either may be empty). head is borrowed from the
 * matcher and tail from the piece; both are valid until the next call on
 * the matcher (and, for tail, while the piece is). */
typedef struct stop_emit {
    const char *head;
    size_t head_len;
    const char *tail;
    size_t tail_len;
    bool matched; /* stop generating: a stop string completed (now or earlier) */
    int which;    /* index of the stop string that completed in this call, else -1 */
} stop_emit;

/* Validates and copies the stop strings (NUL-terminated, 1..STOP_MAX_LEN
 * bytes each, at most STOP_MAX_STRINGS) and stop token ids (at most
 * STOP_MAX_TOKENS, each in [0, n_vocab); n_vocab <= 0 skips the upper bound).
 * Returns 0 or TPS_EINVAL with a message naming the field ("stop[2] is
 * empty"); *field (if not NULL) = "stop" or "stop_token_ids". */
int stop_init(stop_matcher *m, const char *const *strings, size_t n_strings,
              const int32_t *token_ids, size_t n_token_ids, int32_t n_vocab, const char **field,
              tps_err *err);

/* include_stop_str_in_output: a match releases the stop string as well. */
static inline void stop_set_include(stop_matcher *m, bool include) {
    m->include = include;
}
/* While disarmed (min_tokens not reached), a stop string that completes is
 * released as text instead of matching. Armed after stop_init. */
static inline void stop_set_armed(stop_matcher *m, bool armed) {
    m->disarmed = !armed;
}

/* min_tokens: sets logits[id] (n_vocab,) to -inf for the matcher's stop
 * token ids and the end-of-generation ids eog[0..n_eog), so none can be
 * sampled before the sequence has its minimum length. */
void stop_mask_ids(const stop_matcher *m, const int32_t *eog, size_t n_eog, float *logits);

/* True if tok is a stop token id. The token's own text should not be fed;
 * call stop_flush to release what is held. */
bool stop_is_token(const stop_matcher *m, int32_t tok);

/* Feeds one decoded piece (len bytes, need not be NUL-terminated, may be
 * empty). Fills *out with the bytes safe to emit. After a match, further
 * feeds release nothing and report matched. */
void stop_feed(stop_matcher *m, const char *piece, size_t len, stop_emit *out);

/* End of generation: releases all held bytes (none after a match). */
void stop_flush(stop_matcher *m, stop_emit *out);

/* Bytes currently held back. */
static inline size_t stop_held(const stop_matcher *m) {
    return m->hold_len;
}

#endif
