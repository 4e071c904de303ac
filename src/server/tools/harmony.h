/* gpt-oss's harmony format, read from a chat answer as it is generated:
 * the answer is a run of messages, each a header then a body,
 *
 *   <|channel|>analysis<|message|>THINKING<|end|>
 *   <|start|>assistant<|channel|>final<|message|>ANSWER            (<|return|>)
 *   <|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>ARGS
 *                                                                  (<|call|>)
 *
 * (the generation prompt ends with "<|start|>assistant", so the first
 * header has no <|start|>; the recipient may also stand in the role part:
 * "<|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>").
 * A splitter reads the text in pieces of any size and hands every byte on
 * as one part: the analysis channel's body is reasoning; the final
 * channel's, and commentary's without a recipient (a preamble to the
 * user), content; a message to functions.* is a call (its header and body
 * as they came, for the tool-call parser, tools.h); headers and the
 * <|end|> / <|call|> / <|return|> / <|start|> markers are markers. A
 * message to another recipient (a built-in browser or python tool the
 * request did not offer) is a marker as a whole. A header is held until
 * its <|message|>, and a body's tail that may grow into a marker is held,
 * so a marker split across pieces (spelled in several tokens) is never
 * handed on as text.
 *
 * An answer that does not open with a header (a grammar held it to plain
 * JSON, or the model ignored the format) is content, all of it. The facts
 * are OpenAI's harmony format as llama.cpp's and vLLM's gpt-oss parsers
 * read it. A splitter is a small fixed-size value: no allocation.
 *
 * Not here: which models speak harmony (the server, from the template),
 * tokens, the call's JSON (tools.h). */
#ifndef TPS_SERVER_HARMONY_H
#define TPS_SERVER_HARMONY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HARMONY_MAX_HEADER 192 /* bytes a header may take before <|message|> */

typedef enum harmony_part {
    HARMONY_REASONING = 0,
    HARMONY_CONTENT = 1,
    HARMONY_MARKER = 2,
    HARMONY_CALL = 3, /* a message to functions.*: header and body as they came */
} harmony_part;

typedef enum harmony_state {
    HARMONY_HEAD = 0, /* reading a header, held until <|message|> */
    HARMONY_BODY,     /* a body, up to its closing marker */
    HARMONY_RAW,      /* not harmony: the rest is content */
} harmony_state;

/* Receives the bytes p[0..n) of one part, in output order (n > 0). */
typedef void (*harmony_sink)(void *ctx, harmony_part part, const char *p, size_t n);

typedef struct harmony_split {
    harmony_state state;
    harmony_part body; /* where the current body goes */
    bool started;      /* HEAD: a header's first marker has come (else it may be plain text) */
    bool analysed;     /* an analysis message came: the answer thought */
    uint16_t n_held;
    char held[HARMONY_MAX_HEADER];
} harmony_split;

void harmony_init(harmony_split *h);
/* Feeds p[0..n); sink gets every byte that is decided. */
void harmony_feed(harmony_split *h, const char *p, size_t n, harmony_sink sink, void *ctx);
/* End of the output: a header never finished is a marker, a held body
 * tail goes to its body's part, plain text held at the start is content. */
void harmony_flush(harmony_split *h, harmony_sink sink, void *ctx);
/* Inside an analysis body (the reasoning's tokens are counted by it). */
bool harmony_in_reasoning(const harmony_split *h);

#endif
