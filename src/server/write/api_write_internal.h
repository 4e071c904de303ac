/* Private to src/server/write/api_*write.c: each dialect's writer as a row of
 * functions that api_write.c calls; the generic part (which item is open,
 * what was said) is api_write.c's alone.
 *
 * Not here: anything a caller outside needs (api_write.h). */
#ifndef TPS_SERVER_API_WRITE_INTERNAL_H
#define TPS_SERVER_API_WRITE_INTERNAL_H

#include "server/write/api_write.h"

typedef struct api_writer {
    void (*start)(api_stream *st, sbuf *b);
    /* an item (block) of kind opens; st->n_out is its index (a call's id
     * and name in st) */
    void (*open)(api_stream *st, sbuf *b, api_part kind);
    void (*delta)(api_stream *st, sbuf *b, api_part kind, const char *p, size_t n);
    /* the open one closes (its text or arguments in st->part); its item
     * goes to st->items */
    void (*close)(api_stream *st, sbuf *b, api_part kind);
    void (*finish)(api_stream *st, sbuf *b, const api_final *f);
    void (*error)(api_stream *st, sbuf *b, const oai_error *e);
    void (*body)(const api_stream *st, sbuf *b, const api_final *f);
} api_writer;

extern const api_writer api_responses_writer;
extern const api_writer api_messages_writer;

/* st->items gets item (a comma first when it is not the first). */
static inline void api_item_add(api_stream *st, const sbuf *item) {
    if (st->items.len) sbuf_adds(&st->items, ",");
    sbuf_add(&st->items, item->p ? item->p : "", item->len);
}

#endif
