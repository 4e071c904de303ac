/* A least-recently-used list of KV blocks, linked through two arrays
 * indexed by block: the prefix cache keeps its indexed blocks that nobody
 * holds in one, the KV cache its local companions that nobody holds in
 * another. Push at the tail (most recent), take from the head.
 *
 * Not here: allocating the link arrays (their owner sizes and frees them),
 * whether a block is on the list (the owner knows, or keeps a flag),
 * eviction policy. */
#ifndef TPS_ENGINE_BLOCK_LRU_H
#define TPS_ENGINE_BLOCK_LRU_H

#include <stdint.h>

#define BLOCK_LRU_NONE UINT32_MAX /* no block (the same value as PREFIX_NONE) */

typedef struct block_lru {
    uint32_t *prev, *next; /* per block: its neighbours while on the list */
    uint32_t head, tail;   /* head: least recently used; BLOCK_LRU_NONE when empty */
    uint32_t n;            /* blocks on the list */
} block_lru;

static inline void block_lru_init(block_lru *l) {
    l->head = l->tail = BLOCK_LRU_NONE;
    l->n = 0;
}

/* Block b (not on the list) becomes the most recently used. */
static inline void block_lru_push(block_lru *l, uint32_t b) {
    l->prev[b] = l->tail;
    l->next[b] = BLOCK_LRU_NONE;
    if (l->tail != BLOCK_LRU_NONE)
        l->next[l->tail] = b;
    else
        l->head = b;
    l->tail = b;
    l->n++;
}

/* Block b (on the list) leaves it. */
static inline void block_lru_remove(block_lru *l, uint32_t b) {
    const uint32_t p = l->prev[b], n = l->next[b];
    if (p != BLOCK_LRU_NONE)
        l->next[p] = n;
    else
        l->head = n;
    if (n != BLOCK_LRU_NONE)
        l->prev[n] = p;
    else
        l->tail = p;
    l->n--;
}

#endif
