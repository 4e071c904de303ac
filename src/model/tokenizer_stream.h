/* Streaming detokenizer: token ids in, text out as generation proceeds,
 * never half a UTF-8 character. A character split over byte tokens
 * (<0xF0><0x9F><0xA6><0x99>) is held until its last byte arrives; invalid
 * sequences become U+FFFD, so every chunk handed out is valid UTF-8 (ready
 * for JSON / SSE). The text is the plain concatenation of the pieces, as
 * llama-server streams it: no dummy-prefix strip, no space clean-up.
 *
 * Not thread-safe: one stream per sequence. It borrows the tokenizer, which
 * must outlive it. Pushing allocates only when a piece is longer than any
 * before it. */
#ifndef TPS_TOKENIZER_STREAM_H
#define TPS_TOKENIZER_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "model/tokenizer.h"

typedef struct detok_stream detok_stream;

/* flags: TOK_DECODE_RENDER_SPECIAL (control tokens as text); others ignored. */
int detok_stream_create(detok_stream **out, const tokenizer *t, unsigned flags, tps_err *err);
void detok_stream_free(detok_stream *s);

/* Appends one token. *text / *len: the bytes that became complete (may be 0),
 * borrowed until the next call on s. Out-of-range ids are TPS_ERANGE and
 * leave the stream as it was. */
int detok_stream_push(detok_stream *s, int32_t id, const char **text, size_t *len, tps_err *err);

/* End of the stream: an unfinished character comes out as U+FFFD. The
 * stream is then empty and can be reused. */
void detok_stream_flush(detok_stream *s, const char **text, size_t *len);

/* Bytes held back waiting for the rest of a character (0..3). */
size_t detok_stream_pending(const detok_stream *s);

#endif
