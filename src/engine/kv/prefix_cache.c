/* The prefix cache index: a chained hash table keyed by (parent, tokens),
 * and the LRU list of indexed blocks that nobody holds. Every array is
 * indexed by block id and allocated once, so registering, finding and
 * evicting never allocate. */
#include <stdlib.h>
#include <string.h>

#include "base/free_all.h"
#include "engine/kv/prefix_cache.h"

int prefix_cache_create(prefix_cache **out, uint32_t n_blocks, uint32_t block_tokens,
                        tps_err *err) {
    *out = NULL;
    prefix_cache *pc = calloc(1, sizeof *pc);
    if (!pc) return tps_fail(err, TPS_ENOMEM, "prefix cache: out of memory");
    pc->n_blocks = n_blocks;
    pc->block_tokens = block_tokens;
    pc->next_gen = 1;
    pc->n_buckets = 1;
    while (pc->n_buckets < n_blocks && pc->n_buckets < (1u << 30))
        pc->n_buckets <<= 1;
    pc->gen = calloc(n_blocks, sizeof *pc->gen);
    pc->hash = calloc(n_blocks, sizeof *pc->hash);
    pc->parent = calloc(n_blocks, sizeof *pc->parent);
    pc->tokens = malloc((size_t)n_blocks * block_tokens * sizeof *pc->tokens);
    pc->hnext = malloc((size_t)n_blocks * sizeof *pc->hnext);
    pc->lru.prev = malloc((size_t)n_blocks * sizeof *pc->lru.prev);
    pc->lru.next = malloc((size_t)n_blocks * sizeof *pc->lru.next);
    pc->in_lru = calloc(n_blocks, 1);
    pc->buckets = malloc((size_t)pc->n_buckets * sizeof *pc->buckets);
    if (!pc->gen || !pc->hash || !pc->parent || !pc->tokens || !pc->hnext || !pc->lru.prev ||
        !pc->lru.next || !pc->in_lru || !pc->buckets) {
        prefix_cache_free(pc);
        return tps_fail(err, TPS_ENOMEM, "prefix cache: cannot index %u blocks", n_blocks);
    }
    for (uint32_t i = 0; i < pc->n_buckets; i++)
        pc->buckets[i] = PREFIX_NONE;
    block_lru_init(&pc->lru);
    *out = pc;
    return 0;
}

void prefix_cache_free(prefix_cache *pc) {
    if (!pc) return;
    TPS_FREE_ALL(pc->gen, pc->hash, pc->parent, pc->tokens, pc->hnext, pc->lru.prev, pc->lru.next,
                 pc->in_lru, pc->buckets, pc);
}

/* ---- index ----------------------------------------------------------------- */

static inline uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

/* Only picks the bucket: equality is decided by comparing the key. */
/* Four lanes of multiply-xor over the tokens, independent of each other
 * (one serial chain of mix() per token was the simulation's hottest
 * function: tps plan commits every block of a million requests), then
 * mixed together with the parent. */
static uint64_t key_hash(const prefix_cache *pc, prefix_ref parent, const int32_t *tokens) {
    const uint64_t k = 0x9e3779b97f4a7c15ull;
    uint64_t h[4] = {0x243f6a8885a308d3ull, 0x13198a2e03707344ull, 0xa4093822299f31d0ull,
                     0x082efa98ec4e6c89ull};
    uint32_t i = 0;
    for (; i + 4 <= pc->block_tokens; i += 4)
        for (int l = 0; l < 4; l++)
            h[l] = (h[l] ^ (uint32_t)tokens[i + l]) * k;
    for (; i < pc->block_tokens; i++)
        h[0] = (h[0] ^ (uint32_t)tokens[i]) * k;
    uint64_t r = mix(0x452821e638d01377ull, ((uint64_t)parent.block << 32) ^ parent.gen);
    for (int l = 0; l < 4; l++)
        r = mix(r, h[l]);
    return r;
}

static bool key_equal(const prefix_cache *pc, uint32_t b, uint64_t h, prefix_ref parent,
                      const int32_t *tokens) {
    return pc->hash[b] == h && pc->parent[b].block == parent.block &&
           pc->parent[b].gen == parent.gen &&
           memcmp(pc->tokens + (size_t)b * pc->block_tokens, tokens,
                  pc->block_tokens * sizeof *tokens) == 0;
}

uint32_t prefix_cache_find(const prefix_cache *pc, prefix_ref parent, const int32_t *tokens) {
    uint64_t h = key_hash(pc, parent, tokens);
    for (uint32_t b = pc->buckets[h & (pc->n_buckets - 1)]; b != PREFIX_NONE; b = pc->hnext[b])
        if (key_equal(pc, b, h, parent, tokens)) return b;
    return PREFIX_NONE;
}

prefix_ref prefix_cache_insert(prefix_cache *pc, uint32_t b, prefix_ref parent,
                               const int32_t *tokens) {
    uint64_t h = key_hash(pc, parent, tokens);
    uint32_t *head = &pc->buckets[h & (pc->n_buckets - 1)];
    pc->gen[b] = pc->next_gen++;
    pc->hash[b] = h;
    pc->parent[b] = parent;
    memcpy(pc->tokens + (size_t)b * pc->block_tokens, tokens, pc->block_tokens * sizeof *tokens);
    pc->hnext[b] = *head;
    *head = b;
    pc->n_cached++;
    return prefix_cache_ref(pc, b);
}

void prefix_cache_unindex(prefix_cache *pc, uint32_t b) {
    uint32_t *link = &pc->buckets[pc->hash[b] & (pc->n_buckets - 1)];
    while (*link != b)
        link = &pc->hnext[*link];
    *link = pc->hnext[b];
    pc->gen[b] = 0;
    pc->n_cached--;
}

/* ---- LRU ------------------------------------------------------------------- */

void prefix_cache_lru_push(prefix_cache *pc, uint32_t b) {
    block_lru_push(&pc->lru, b);
    pc->in_lru[b] = 1;
}

void prefix_cache_lru_remove(prefix_cache *pc, uint32_t b) {
    if (!pc->in_lru[b]) return;
    block_lru_remove(&pc->lru, b);
    pc->in_lru[b] = 0;
}

uint32_t prefix_cache_evict(prefix_cache *pc) {
    uint32_t b = pc->lru.head;
    if (b == PREFIX_NONE) return PREFIX_NONE;
    prefix_cache_lru_remove(pc, b);
    prefix_cache_unindex(pc, b);
    return b;
}
