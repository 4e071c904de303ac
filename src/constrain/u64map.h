/* A u64 -> u32 open-addressing map for the constrained decoder's caches
 * (constraint*.c): keys are stored + 1 so that 0 marks a free slot; there
 * is no deletion, since the caches only grow until they are cleared whole.
 *
 * Not here: a general-purpose hash table (no removal, no iteration). */
#ifndef TPS_CONSTRAIN_U64MAP_H
#define TPS_CONSTRAIN_U64MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct u64map {
    uint64_t *keys; /* key + 1; 0 = free */
    uint32_t *vals;
    size_t cap, n; /* cap a power of two; n <= cap / 2 */
} u64map;

static inline size_t u64map_mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return (size_t)x;
}

static inline void u64map_free(u64map *m) {
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

static inline void u64map_clear(u64map *m) {
    if (m->keys) memset(m->keys, 0, m->cap * sizeof *m->keys);
    m->n = 0;
}

static inline bool u64map_get(const u64map *m, uint64_t key, uint32_t *val) {
    if (!m->cap) return false;
    for (size_t j = u64map_mix(key) & (m->cap - 1);; j = (j + 1) & (m->cap - 1)) {
        if (!m->keys[j]) return false;
        if (m->keys[j] == key + 1) {
            *val = m->vals[j];
            return true;
        }
    }
}

/* Doubles the table; false when out of memory (the map is unchanged). */
static inline bool u64map_grow(u64map *m) {
    size_t cap = m->cap ? m->cap * 2 : 1024;
    uint64_t *k = calloc(cap, sizeof *k);
    uint32_t *v = malloc(cap * sizeof *v);
    if (!k || !v) {
        free(k);
        free(v);
        return false;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        size_t j = u64map_mix(m->keys[i] - 1) & (cap - 1);
        while (k[j])
            j = (j + 1) & (cap - 1);
        k[j] = m->keys[i];
        v[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = k, m->vals = v, m->cap = cap;
    return true;
}

/* Inserts or overwrites; false when out of memory. */
static inline bool u64map_put(u64map *m, uint64_t key, uint32_t val) {
    if ((m->n + 1) * 2 > m->cap && !u64map_grow(m)) return false;
    size_t j = u64map_mix(key) & (m->cap - 1);
    while (m->keys[j] && m->keys[j] != key + 1)
        j = (j + 1) & (m->cap - 1);
    if (!m->keys[j]) m->n++;
    m->keys[j] = key + 1;
    m->vals[j] = val;
    return true;
}

#endif
