/* Where the OpenAI dialect puts text in a choice's delta (or message): the
 * one table both readers of that dialect (chunk.c, chunk_scan.c) consult,
 * so a field is read, or named as unread, the same way by each. The typed
 * dialects' tables are in chunk_dialect.c. Not here: parsing. */
#ifndef TPS_BENCH_CHUNK_TABLE_H
#define TPS_BENCH_CHUNK_TABLE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "bench/client/chunk.h"

typedef enum chunk_part {
    PART_NONE = 0,  /* a known field that carries no generated text (role, ids, ..) */
    PART_ANSWER,    /* the reply's text */
    PART_REASONING, /* the thinking before it */
    PART_TOOL,      /* tool-call arguments: generated, part of the answer */
} chunk_part;

/* The OpenAI dialect's delta/message members, in the order their text is
 * taken when one event carries several (chunk_table.c). */
typedef struct chunk_field {
    const char *key;
    chunk_part part;
} chunk_field;
extern const chunk_field chunk_openai_fields[];
extern const size_t chunk_openai_n_fields;

/* The part the delta/message member k (klen bytes) carries, or -1 when the
 * dialect's table has no row for it. */
int chunk_openai_field(const char *k, size_t klen);

/* Of two unread field names, the one to report: the smaller in byte
 * order (both readers then agree whatever order the members came in). */
static inline int chunk_unread_before(const char *a, size_t alen, const char *b, size_t blen) {
    for (size_t i = 0; i < alen && i < blen; i++)
        if (a[i] != b[i]) return (unsigned char)a[i] < (unsigned char)b[i];
    return alen < blen;
}

/* The jansson readers' shared steps (chunk_table.c): s as the chunk's text when
 * it is a non-empty string and no text was taken yet; a non-negative
 * integer member of o, or -1. */
void chunk_take_text_json(bench_chunk *c, json_t *s, bool reasoning);
int64_t chunk_count_field(json_t *o, const char *k);

/* The counts a reader found in usage, into c, each -1 where the server
 * did not send it (it stays unknown, has_* false, never 0): the generated
 * tokens, the prompt's, of the generated the thinking, and of the prompt
 * those the prefix cache served. */
void chunk_take_usage(bench_chunk *c, int64_t completion, int64_t prompt, int64_t reasoning,
                      int64_t cached);

#endif
