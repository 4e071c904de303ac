/* Runs of output text by part, for the streaming splitters that sort a
 * model's text into parts as it arrives (engine/sample/think.c: reasoning and
 * answer; server/harmony.c: harmony's channels): consecutive bytes of one
 * part within the piece being fed go to the sink in one call, and bytes a
 * splitter held back (a marker's possible prefix) go out before them.
 *
 * Parts are the splitter's own enum, carried as int; TEXT_RUN_TYPED makes
 * the adapter to a sink that takes the enum. Not here: the state machines
 * that decide a byte's part, holding bytes back (each splitter keeps its
 * own held buffer), allocation. */
#ifndef TPS_BASE_TEXT_RUN_H
#define TPS_BASE_TEXT_RUN_H

#include <stddef.h>

/* Receives the bytes p[0..n) of one part, in output order (n > 0). */
typedef void (*text_run_sink)(void *ctx, int part, const char *p, size_t n);

/* A run of one part within the piece being fed: p[0..n). */
typedef struct text_run {
    text_run_sink sink;
    void *ctx;
    int part;
    const char *p;
    size_t n;
} text_run;

static inline void text_run_flush(text_run *r) {
    if (r->n) r->sink(r->ctx, r->part, r->p, r->n);
    r->n = 0;
}

/* Adds the piece's byte at p to the run of part (a new run when the part
 * changes or p does not follow the run). */
static inline void text_run_add(text_run *r, int part, const char *p) {
    if (r->n && (r->part != part || r->p + r->n != p)) text_run_flush(r);
    if (!r->n) {
        r->part = part;
        r->p = p;
    }
    r->n++;
}

/* The piece's bytes p[0..n) (n > 0), all of one part: the rest of it once
 * the splitter has nothing left to decide. */
static inline void text_run_rest(text_run *r, int part, const char *p, size_t n) {
    text_run_add(r, part, p);
    r->n += n - 1;
}

/* Held bytes held[0..n) go out as part, after the run so far. */
static inline void text_run_held(text_run *r, int part, const char *held, size_t n) {
    text_run_flush(r);
    if (n) r->sink(r->ctx, part, held, n);
}

/* Defines `static void name(void *ctx, int part, const char *p, size_t n)`,
 * a text_run_sink that hands the run to the sink_t in a name_to (its ctx):
 *
 *     TEXT_RUN_TYPED(think_emit, think_sink, think_part)
 *     think_emit_to to = {sink, ctx};
 *     text_run r = {.sink = think_emit, .ctx = &to}; */
#define TEXT_RUN_TYPED(name, sink_t, part_t)                                                       \
    typedef struct name##_to {                                                                     \
        sink_t sink;                                                                               \
        void *ctx;                                                                                 \
    } name##_to;                                                                                   \
    static void name(void *ctx, int part, const char *p, size_t n) {                               \
        const name##_to *to = ctx;                                                                 \
        to->sink(to->ctx, (part_t)part, p, n);                                                     \
    }

#endif
