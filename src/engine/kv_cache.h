/* Paged KV cache: one preallocated pool of fixed-size blocks (vLLM's
 * PagedAttention memory layout on the CPU) and per-sequence block tables.
 *
 * A block holds `block_tokens` positions of K and V for every layer:
 *   K[block][layer][kv_head][slot][head_dim], V likewise, in F32, F16 or
 * Q8_0 (head_dim / 32 blocks of 32 int8 and an F16 scale: half of F16's
 * bytes to store and to read at every decode step).
 * Head-major inside a block: attention for one KV head streams its
 * positions as one contiguous run instead of picking head_dim elements out
 * of every kv_dim-wide row (which defeats the hardware prefetcher).
 * Allocation and release are O(1) through a free list; reference counts are
 * kept per block so prefix sharing can come later. Not thread-safe: the
 * engine thread owns it. It knows nothing of attention maths. */
#ifndef TPS_KV_CACHE_H
#define TPS_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "tps_error.h"

typedef struct kv_cache_params {
    uint32_t n_layers;
    uint32_t kv_dim;       /* n_kv_heads * head_dim */
    uint32_t head_dim;     /* elements per KV head; 0 = kv_dim (one head) */
    uint32_t block_tokens; /* positions per block (default 16) */
    uint32_t kv_type;      /* GGML_TYPE_F32, GGML_TYPE_F16 or GGML_TYPE_Q8_0 */
    uint32_t n_blocks;     /* pool size; or 0 to derive from mem_bytes */
    size_t mem_bytes;      /* K+V bytes for the pool when n_blocks is 0 */
} kv_cache_params;

typedef struct kv_cache {
    uint32_t n_layers, kv_dim, block_tokens, kv_type;
    uint32_t head_dim, n_kv_heads;
    uint32_t n_blocks;
    size_t head_bytes; /* one head at one position: head_dim elements of kv_type */
    size_t
        block_bytes;  /* one block of one tensor (K or V): n_layers*block_tokens*n_kv_heads heads */
    uint8_t *k, *v;   /* n_blocks * block_bytes each (anonymous maps) */
    size_t map_bytes; /* bytes of each map */
    uint32_t *free_list; /* stack of free block ids */
    uint32_t n_free;
    uint16_t *refs; /* per block: 0 = free */
} kv_cache;

/* A sequence's block table: blocks[i] holds positions [i*B, (i+1)*B). */
typedef struct kv_seq {
    uint32_t *blocks;
    uint32_t n_blocks, cap;
} kv_seq;

/* Bytes of n elements of kv_type (0 if q8_0 and n is not whole blocks). */
size_t kv_cache_row_bytes(uint32_t kv_type, uint32_t n);
/* Bytes of K+V one block takes. */
size_t kv_cache_block_bytes(uint32_t n_layers, uint32_t kv_dim, uint32_t block_tokens,
                            uint32_t kv_type);
int kv_cache_create(kv_cache **out, const kv_cache_params *p, tps_err *err);
void kv_cache_free(kv_cache *kv);

uint32_t kv_cache_blocks_used(const kv_cache *kv);

/* Blocks needed to hold n_tokens positions. */
static inline uint32_t kv_blocks_for(const kv_cache *kv, uint32_t n_tokens) {
    return (n_tokens + kv->block_tokens - 1) / kv->block_tokens;
}

/* seq must be zeroed before first use; cap is the most blocks it may hold. */
int kv_seq_init(kv_seq *seq, uint32_t cap);
void kv_seq_destroy(kv_seq *seq); /* frees the table (blocks must be released first) */

/* Grows seq so it holds n_tokens positions: all blocks or none.
 * TPS_EFULL when the pool lacks free blocks (nothing changed then). */
int kv_seq_reserve(kv_cache *kv, kv_seq *seq, uint32_t n_tokens);
/* Returns every block of seq to the pool. */
void kv_seq_release(kv_cache *kv, kv_seq *seq);

/* Byte offset of block table entry blk's first slot for (layer, kv head);
 * the block's next slots follow head_bytes apart. */
static inline size_t kv_head_block_off(const kv_cache *kv, const kv_seq *seq, uint32_t layer,
                                       uint32_t blk, uint32_t kvh) {
    return (size_t)seq->blocks[blk] * kv->block_bytes +
           ((size_t)layer * kv->n_kv_heads + kvh) * kv->block_tokens * kv->head_bytes;
}

/* K (or V) of one KV head at a position: head_bytes bytes. */
static inline size_t kv_head_off(const kv_cache *kv, const kv_seq *seq, uint32_t layer,
                                 uint32_t pos, uint32_t kvh) {
    return kv_head_block_off(kv, seq, layer, pos / kv->block_tokens, kvh) +
           (size_t)(pos % kv->block_tokens) * kv->head_bytes;
}
static inline void *kv_k_head(const kv_cache *kv, const kv_seq *seq, uint32_t layer, uint32_t pos,
                              uint32_t kvh) {
    return kv->k + kv_head_off(kv, seq, layer, pos, kvh);
}
static inline void *kv_v_head(const kv_cache *kv, const kv_seq *seq, uint32_t layer, uint32_t pos,
                              uint32_t kvh) {
    return kv->v + kv_head_off(kv, seq, layer, pos, kvh);
}

#endif
