/* Intrusive doubly linked lists: the one spelling of push and unlink for a
 * list struct with `head`, `tail` and a count `n`, over elements that carry
 * `prev` and `next` pointers (the engine's sequence queues, the grammar
 * cache's LRU). Macros, so that one body serves every element type and
 * still compiles to the same inline code as the hand-written copies did.
 *
 * Arguments are evaluated more than once: pass plain lvalues (l, s), never
 * expressions with side effects. Not here: allocation, iteration helpers,
 * locking (the owner's). */
#ifndef TPS_BASE_DLIST_H
#define TPS_BASE_DLIST_H

#include <stddef.h>

/* Links e in at the list's `end` (head or tail); `out`/`in` are e's links
 * pointing away from and into the list (next/prev at the tail, prev/next at
 * the head), `other` the far end. */
#define TPS_DLIST_ADD_AT_(l, e, end, other, out, in)                                               \
    do {                                                                                           \
        (e)->out = NULL;                                                                           \
        (e)->in = (l)->end;                                                                        \
        if ((l)->end)                                                                              \
            (l)->end->out = (e);                                                                   \
        else                                                                                       \
            (l)->other = (e);                                                                      \
        (l)->end = (e);                                                                            \
        (l)->n++;                                                                                  \
    } while (0)

#define TPS_DLIST_PUSH_BACK(l, e)  TPS_DLIST_ADD_AT_(l, e, tail, head, next, prev)
#define TPS_DLIST_PUSH_FRONT(l, e) TPS_DLIST_ADD_AT_(l, e, head, tail, prev, next)

/* Unlinks e (on the list) and clears its links. */
#define TPS_DLIST_REMOVE(l, e)                                                                     \
    do {                                                                                           \
        if ((e)->prev)                                                                             \
            (e)->prev->next = (e)->next;                                                           \
        else                                                                                       \
            (l)->head = (e)->next;                                                                 \
        if ((e)->next)                                                                             \
            (e)->next->prev = (e)->prev;                                                           \
        else                                                                                       \
            (l)->tail = (e)->prev;                                                                 \
        (e)->next = (e)->prev = NULL;                                                              \
        (l)->n--;                                                                                  \
    } while (0)

#endif
