/* The prefix cache's index over the KV pool's blocks: which blocks hold the
 * K/V of which token chain, and which of them are free but kept (LRU).
 *
 * A full block's contents are a function of its own tokens and of every
 * token before it. So a cached block is keyed by (parent, tokens): the
 * cached block before it in the chain, or PREFIX_ROOT for the first, and
 * its block_tokens token ids. The parent is named by its block id and the
 * generation it was registered under (every registration takes a new
 * generation), so a key names one exact chain of token ids from position 0:
 * a lookup compares the parent identity and every token, and a hash
 * collision costs a comparison, never a wrong hit. When a block is evicted
 * its children become unreachable (their parent generation matches nothing
 * any more) and age out of the LRU like any other free block.
 *
 * Model, KV type and block size are fixed for the pool the index lives in,
 * so they need no place in the key.
 *
 * Not here: reference counts and the plain free list (kv_cache.c owns them
 * and calls down into this file), attention, scheduling. Not thread-safe:
 * the engine thread owns it. */
#ifndef TPS_PREFIX_CACHE_H
#define TPS_PREFIX_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "engine/kv/block_lru.h"

#define PREFIX_NONE BLOCK_LRU_NONE /* no block (UINT32_MAX) */
#define PREFIX_ROOT UINT32_MAX     /* parent of a chain's first block */

/* The identity of one registered block: its id and registration. */
typedef struct prefix_ref {
    uint32_t block;
    uint64_t gen;
} prefix_ref;

static inline prefix_ref prefix_root(void) {
    return (prefix_ref){.block = PREFIX_ROOT, .gen = 0};
}

typedef struct prefix_cache {
    uint32_t n_blocks, block_tokens;
    uint64_t next_gen;
    /* per block */
    uint64_t *gen;      /* registration; 0: not indexed */
    uint64_t *hash;     /* of its key */
    prefix_ref *parent; /* its key's parent */
    int32_t *tokens;    /* (n_blocks, block_tokens): its key's tokens */
    uint32_t *hnext;    /* next block in its hash bucket */
    uint8_t *in_lru;    /* on lru */
    /* index */
    uint32_t *buckets; /* (n_buckets,) first block of each chain */
    uint32_t n_buckets;
    uint32_t n_cached; /* indexed blocks, held or not */
    block_lru lru;     /* indexed blocks nobody holds */
} prefix_cache;

int prefix_cache_create(prefix_cache **out, uint32_t n_blocks, uint32_t block_tokens, tps_err *err);
void prefix_cache_free(prefix_cache *pc);

/* The indexed block holding `tokens` (block_tokens ids) after `parent`, or
 * PREFIX_NONE. */
uint32_t prefix_cache_find(const prefix_cache *pc, prefix_ref parent, const int32_t *tokens);
/* Indexes block b (not indexed) as holding `tokens` after `parent`;
 * returns its new identity. */
prefix_ref prefix_cache_insert(prefix_cache *pc, uint32_t b, prefix_ref parent,
                               const int32_t *tokens);
static inline bool prefix_cache_has(const prefix_cache *pc, uint32_t b) {
    return pc->gen[b] != 0;
}
static inline prefix_ref prefix_cache_ref(const prefix_cache *pc, uint32_t b) {
    return (prefix_ref){.block = b, .gen = pc->gen[b]};
}

/* LRU of indexed blocks that no sequence holds (the evictable ones). */
void prefix_cache_lru_push(prefix_cache *pc, uint32_t b); /* b becomes most recent */
void prefix_cache_lru_remove(prefix_cache *pc, uint32_t b);
/* Takes the least recently used block out of the LRU and the index;
 * PREFIX_NONE when the LRU is empty. */
uint32_t prefix_cache_evict(prefix_cache *pc);
/* Takes indexed block b (one a sequence holds: not in the LRU) out of the
 * index: no lookup finds it again, and blocks indexed after it can no
 * longer be reached (their parent's registration is gone). */
void prefix_cache_unindex(prefix_cache *pc, uint32_t b);

#endif
