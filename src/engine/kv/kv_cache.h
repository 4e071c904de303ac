/* Paged KV cache: one preallocated pool of fixed-size blocks (vLLM's
 * PagedAttention memory layout on the CPU) and per-sequence block tables.
 *
 * A block holds `block_tokens` positions of K and V for every (global) layer:
 *   K[block][layer][kv_head][slot][head_dim], V likewise, in F32, F16 or
 * Q8_0 (head_dim / 32 blocks of 32 int8 and an F16 scale: half of F16's
 * bytes to store and to read at every decode step).
 * Head-major inside a block: attention for one KV head streams its
 * positions as one contiguous run instead of picking head_dim elements out
 * of every kv_dim-wide row (which defeats the hardware prefetcher).
 * Allocation and release are O(1). Blocks are reference counted: sequences
 * share the full blocks of a common prefix (prefix cache hits, and the n
 * choices of one prompt), and a shared block is never written again.
 *
 * With the prefix cache on, a block moves free -> owned -> cached ->
 * evicted: a full block is indexed by its token chain once its K/V are
 * computed (prefix_cache.h); when its last holder lets go it stays indexed,
 * in an LRU list, until the pool needs it. Allocation takes a never-cached
 * free block first and evicts the least recently used cached one only when
 * none is left, so the cache never holds a block the pool needs.
 *
 * Sliding-window layers (Gemma 2/3's local layers, `local_layers`) read
 * only the last `window` positions, so their K/V live in a second pool of
 * their own blocks (laid out the same, over the local layers only) and a
 * second block table per sequence: after each step (kv_seq_commit) the
 * local blocks wholly before the next row's window go back to the pool, so
 * a sequence holds at most ceil(window / B) + 1 of them between steps,
 * whatever its length. With the prefix cache, a global block that is
 * indexed keeps the local block of the same positions as its companion
 * while that one is not needed elsewhere (a second LRU); a prefix is
 * reused only up to a block whose window's companions are all still there.
 *
 * Recurrent layers (a hybrid model's linear attention, Qwen3.5's gated
 * DeltaNet: `recurrent_layers`) store no K/V at all: each sequence holds
 * one slot of a third pool instead, a fixed-size state of every such
 * layer, overwritten at every step (kv_state.c). A sequence takes its slot
 * with its first blocks (kv_seq_reserve: both or neither), gives it back
 * with them, and a fork copies it. A prefix hit would need the state at
 * the hit's last position: with the prefix cache the pool also keeps
 * checkpoints, a sequence's state at the end of each block whose end is a
 * multiple of ckpt_every positions, attached to that block while it is
 * indexed (at most n_ckpt of them, the least recently used evicted first),
 * and a hit reaches only as far as the last block with one, whose
 * checkpoint becomes the sequence's state (vLLM's hybrid prefix caching,
 * SGLang's Mamba radix cache).
 *
 * Not thread-safe: the engine thread owns it. It knows nothing of attention
 * maths. */
#ifndef TPS_KV_CACHE_H
#define TPS_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/kv/prefix_cache.h"
#include "base/error.h"

typedef struct kv_cache_params {
    uint32_t n_layers;
    uint32_t kv_dim;       /* n_kv_heads * head_dim */
    uint32_t head_dim;     /* elements per KV head; 0 = kv_dim (one head) */
    uint32_t block_tokens; /* positions per block (default 16) */
    uint32_t kv_type;      /* GGML_TYPE_F32, GGML_TYPE_F16 or GGML_TYPE_Q8_0 */
    uint32_t n_blocks;     /* pool size; or 0 to derive from mem_bytes */
    size_t mem_bytes;      /* K+V bytes for the pool when n_blocks is 0 */
    bool prefix_cache;     /* index full blocks for reuse (kv_seq_match_prefix) */
    /* sliding-window layers: local_layers[l] = 1 when layer l reads only the
     * last `window` positions (borrowed, n_layers flags; NULL or window 0:
     * every layer global). Their K/V go to the local pool of
     * n_local_blocks blocks (0: as many as the global pool; never more). A
     * model whose every layer is local keeps them all in the one pool. */
    const uint8_t *local_layers;
    uint32_t window;
    uint32_t n_local_blocks;
    /* With the prefix cache: blocks the pool may fault in before it
     * prefers evicting a cached block nobody holds to touching a fresh one
     * (and what kv_cache_warm faults in ahead); 0: the whole pool. */
    uint32_t resident_blocks;
    /* The block accounting alone (tables, refcounts, the prefix index, the
     * LRU), with no K/V memory behind it: what a planner simulating the
     * engine moves blocks in (planner.h). Nothing may read or write K/V. */
    bool accounting_only;
    /* recurrent_layers[l] = 1 when layer l keeps a state, not K/V (borrowed,
     * n_layers flags; NULL: none). Each sequence then holds one of
     * n_state_slots slots of state_bytes: every recurrent layer's state,
     * state_bytes / (recurrent layers) each, in layer order. */
    const uint8_t *recurrent_layers;
    uint32_t n_state_slots;
    size_t state_bytes;
    /* with the prefix cache: checkpoints every ckpt_every positions (a
     * multiple of block_tokens; 0: none), at most n_ckpt kept */
    uint32_t ckpt_every, n_ckpt;
    /* V is K (multi-head latent attention, DeepSeek's MLA: the row a
     * position stores, its compressed latent and its rotated key part, is
     * read as keys, and its first elements as values): one map, no V
     * bytes; kv_v_head then points into K */
    bool k_only;
    /* The local pool's own head shape (Gemma 4's sliding layers: their own head size and
     * KV heads); 0: the global kv_dim and head_dim. */
    uint32_t local_kv_dim, local_head_dim;
    /* shared_layers[l] = 1 when layer l stores no K/V and attends to another layer's
     * (Gemma 4's last shared_kv_layers; borrowed, n_layers flags; NULL: none): no slot
     * in either pool, no bytes. The caller passes the other layer's index to read. */
    const uint8_t *shared_layers;
} kv_cache_params;

typedef struct kv_cache {
    uint32_t n_layers, kv_dim, block_tokens, kv_type;
    uint32_t head_dim, n_kv_heads;
    uint32_t n_blocks;
    size_t head_bytes;                 /* one head at one position: head_dim elements of kv_type */
    uint32_t l_head_dim, l_n_kv_heads; /* the local pool's heads (the global ones unless
                                          kv_cache_params.local_kv_dim says) */
    size_t l_head_bytes;
    size_t block_bytes; /* one global block of K (or V): global layers * block_tokens * n_kv_heads
                           heads (spread over each (layer, head)'s runs: kv_head_block_off) */
    uint8_t *k, *v;     /* n_blocks * block_bytes each (anonymous maps); NULL accounting_only;
                           v == k when k_only */
    bool k_only;        /* kv_cache_params.k_only: one map */
    bool accounting_only;
    size_t map_bytes;         /* bytes of each map */
    size_t warm_bytes;        /* leading bytes of each map faulted in by kv_cache_warm */
    uint32_t resident_blocks; /* kv_cache_params.resident_blocks; n_blocks for 0 */
    uint32_t n_touched;       /* blocks 0 .. n_touched-1 were handed out at least once */
    uint32_t *free_list;      /* stack of free block ids that hold nothing cached */
    uint32_t n_free;
    uint32_t *refs;   /* per block: sequences holding it; 0 = free or cached-free */
    prefix_cache *pc; /* NULL: no prefix cache */
    /* per layer: 1 when its K/V are in the local pool; its index among the
     * layers of its pool */
    uint8_t *layer_local;
    uint32_t *layer_slot;
    /* the local pool (n_local_layers 0: none), after the global blocks in
     * each map, run-major as the global one (kv_head_block_off) */
    uint32_t window, n_local_layers, n_lblocks;
    size_t local_base, lblock_bytes;
    uint32_t *lfree, n_lfree; /* stack of free local blocks that are no companion */
    uint32_t *lrefs;          /* per local block: sequences holding it */
    uint32_t *lowner;         /* per local block: the indexed global block it is the companion of */
    uint32_t *companion;      /* per global block: its local companion, or PREFIX_NONE */
    block_lru llru;           /* companions nobody holds */
    /* the state pool (n_recurrent 0: none); a recurrent layer's layer_slot
     * is its index among them */
    uint32_t n_shared; /* layers that store no K/V (kv_cache_params.shared_layers) */
    uint32_t n_recurrent, n_state_slots;
    size_t state_bytes, layer_state_bytes; /* a slot; one layer's part of it */
    uint8_t *states;                       /* n_state_slots * state_bytes; NULL accounting_only */
    size_t states_map_bytes;
    uint32_t *state_free, n_state_free; /* stack of free slots */
    uint8_t *layer_recurrent;           /* per layer: 1 when it keeps a state, no K/V */
    /* the state's checkpoints (n_ckpt 0: none): each a slot's bytes */
    uint32_t ckpt_every, n_ckpt;
    uint8_t *ckpts; /* n_ckpt * state_bytes; NULL accounting_only */
    size_t ckpts_map_bytes;
    uint32_t *ckpt_block;             /* per checkpoint: the block it is attached to, or NONE */
    uint32_t *block_ckpt;             /* per global block: its checkpoint, or NONE */
    uint32_t *ckpt_free, n_ckpt_free; /* stack of unattached checkpoints */
    block_lru ckpt_lru;               /* attached checkpoints, least recently used first */
} kv_cache;

/* A sequence's block table: blocks[i] holds positions [i*B, (i+1)*B).
 * Its first n_chained blocks are in the prefix chain that ends at `chain`
 * (their own block or an identical one another sequence indexed first). */
typedef struct kv_seq {
    uint32_t *blocks;
    uint32_t n_blocks, cap;
    /* local pool: lblocks[i] holds the local layers' positions of blocks[i]
     * for i in [l_lo, n_blocks); the entries before l_lo were let go */
    uint32_t *lblocks;
    uint32_t l_lo;
    uint32_t n_chained;
    prefix_ref chain;
    uint32_t state; /* 1 + its state slot; 0: none */
} kv_seq;

/* Bytes of n elements of kv_type (0 if q8_0 and n is not whole blocks). */
size_t kv_cache_row_bytes(uint32_t kv_type, uint32_t n);
/* Bytes of K+V one block takes (a k_only cache's block takes half). */
size_t kv_cache_block_bytes(uint32_t n_layers, uint32_t kv_dim, uint32_t block_tokens,
                            uint32_t kv_type);
int kv_cache_create(kv_cache **out, const kv_cache_params *p, tps_err *err);
void kv_cache_free(kv_cache *kv);

/* With the prefix cache, faults in the next `bytes` of each map (the
 * blocks handed out next: the free list starts at block 0), up to the
 * first resident_blocks, so requests do not pay first-touch page faults on
 * blocks the cache hands out; the engine calls it while idle, a slice at a
 * time. True while more remains; false at once without the cache (its
 * freed blocks are reused warm). Past resident_blocks the pool grows only
 * when every block it has touched is held, one fault at a time. */
bool kv_cache_warm(kv_cache *kv, size_t bytes);

/* Blocks a reservation can take now: free ones plus cached ones nobody
 * holds (evicted on demand). The global pool's: the local pool is sized
 * by its user so that it does not run out first. */
static inline uint32_t kv_cache_available(const kv_cache *kv) {
    return kv->n_free + (kv->pc ? kv->pc->lru.n : 0);
}
/* Blocks some sequence holds. */
uint32_t kv_cache_blocks_used(const kv_cache *kv);
/* Local-pool blocks some sequence holds (0 without sliding-window layers). */
static inline uint32_t kv_cache_local_blocks_used(const kv_cache *kv) {
    return kv->n_lblocks - kv->n_lfree - kv->llru.n;
}
/* Blocks whose contents are indexed (held or not); 0 without the cache. */
static inline uint32_t kv_cache_blocks_cached(const kv_cache *kv) {
    return kv->pc ? kv->pc->n_cached : 0;
}

/* State slots some sequence holds (0 without recurrent layers). */
static inline uint32_t kv_cache_states_used(const kv_cache *kv) {
    return kv->n_state_slots - kv->n_state_free;
}

/* Layer `layer`'s recurrent state of seq (which holds a slot): the conv's
 * inputs then the heads' matrices (llama_config_state_floats), F32. */
static inline float *kv_state(const kv_cache *kv, const kv_seq *seq, uint32_t layer) {
    return (float *)(kv->states + (size_t)(seq->state - 1) * kv->state_bytes +
                     (size_t)kv->layer_slot[layer] * kv->layer_state_bytes);
}

/* kv_state.c, for kv_cache.c: the state pool of p (none without recurrent
 * layers); a slot for seq when the pool has one and seq holds none
 * (not zeroed: linear_attn.c zeroes it at position 0), TPS_EFULL when none
 * is free;
 * seq's slot back; dst (holding none) takes a copy of src's. */
int kv_state_create(kv_cache *kv, const kv_cache_params *p);
void kv_state_free(kv_cache *kv);
int kv_state_take(kv_cache *kv, kv_seq *seq);
void kv_state_drop(kv_cache *kv, kv_seq *seq);
int kv_state_fork(kv_cache *kv, kv_seq *dst, const kv_seq *src);
/* Checkpoints (kv_state.c). kv_ckpt_detach: block b's checkpoint (if any)
 * is dropped, b leaving the index or the pool. kv_ckpt_restore: of seq's k
 * matched blocks, the most k' <= k whose block k' - 1 has a checkpoint;
 * seq takes a state slot holding it; returns k' (0: no checkpoint or no
 * slot, nothing taken). */
void kv_ckpt_detach(kv_cache *kv, uint32_t b);
uint32_t kv_ckpt_restore(kv_cache *kv, kv_seq *seq, uint32_t k);

/* For the forward pass: the checkpoint to fill with seq's state once its
 * first n_tokens positions are folded in (n_tokens a multiple of
 * ckpt_every, its last block held by seq), attached to that block now;
 * KV_CKPT_NONE when the cache keeps none. */
#define KV_CKPT_NONE UINT32_MAX
uint32_t kv_ckpt_attach(kv_cache *kv, const kv_seq *seq, uint32_t n_tokens);
/* Layer `layer`'s part of checkpoint ckpt (laid out as a slot). */
static inline float *kv_ckpt_state(const kv_cache *kv, uint32_t ckpt, uint32_t layer) {
    return (float *)(kv->ckpts + (size_t)ckpt * kv->state_bytes +
                     (size_t)kv->layer_slot[layer] * kv->layer_state_bytes);
}

/* Blocks needed to hold n_tokens positions. */
static inline uint32_t kv_blocks_for(const kv_cache *kv, uint32_t n_tokens) {
    return (n_tokens + kv->block_tokens - 1) / kv->block_tokens;
}

/* seq must be zeroed before first use; cap is the most blocks it may hold. */
/* Empties the prefix cache (POST /reset_prefix_cache): every cached block
 * nobody holds goes back to the free list, and the blocks running
 * sequences hold leave the index (they are freed, not kept, when released).
 * What runs is untouched: its K/V stay where they are. Returns the blocks
 * that left the index. Engine thread only, between steps. */
uint32_t kv_cache_reset_prefix(kv_cache *kv);

int kv_seq_init(kv_seq *seq, uint32_t cap);
void kv_seq_destroy(kv_seq *seq); /* frees the table (blocks must be released first) */

/* Grows seq so it holds n_tokens positions: all blocks or none, evicting
 * cached blocks only when no free one is left. TPS_EFULL when the pool
 * lacks blocks (nothing changed then). */
int kv_seq_reserve(kv_cache *kv, kv_seq *seq, uint32_t n_tokens);
/* Lets go of every block of seq: a block nobody else holds becomes free,
 * or, when indexed, the most recently used cached block (the table's last
 * block first, so a chain's tail is evicted before its head). */
void kv_seq_release(kv_cache *kv, kv_seq *seq);

/* Prefix cache: seq (holding no block) takes the indexed blocks that hold
 * tokens[0 .. k*B) for the largest k <= max_blocks, shared and refcounted.
 * Returns k (0 without the cache). */
uint32_t kv_seq_match_prefix(kv_cache *kv, kv_seq *seq, const int32_t *tokens, uint32_t max_blocks);
/* Indexes seq's blocks that are full once positions [0, n_computed) hold
 * K/V, then lets go of the local blocks wholly before the window of the
 * row at n_computed: call after every step that computed rows of seq.
 * Where another block already holds the same chain, seq's own stays
 * private. */
void kv_seq_commit(kv_cache *kv, kv_seq *seq, const int32_t *tokens, uint32_t n_computed);
/* dst (holding no block) takes src's K/V for positions [0, n_tokens):
 * full blocks shared, the last partial block copied into a block of its
 * own (copy on write). TPS_EFULL (dst unchanged) when no block is left for
 * the copy. */
int kv_seq_fork(kv_cache *kv, kv_seq *dst, const kv_seq *src, uint32_t n_tokens);

/* Byte offset of block table entry blk's first slot for (layer, kv head);
 * the block's next slots follow head_bytes apart. Each pool is run-major:
 * a (layer, kv head) pair's runs of block_tokens slots lie together, block
 * after block, so a sequence whose blocks were taken in order reads each
 * head's K (or V) as one stream. Block-major, a head's 4-8 KiB runs lay a
 * whole block of every layer apart (decode at depth 8k on qwen35 0.8B: 6%
 * faster run-major). */
static inline size_t kv_head_block_off(const kv_cache *kv, const kv_seq *seq, uint32_t layer,
                                       uint32_t blk, uint32_t kvh) {
    if (kv->layer_local[layer]) {
        const size_t run = (size_t)kv->block_tokens * kv->l_head_bytes;
        return kv->local_base +
               (((size_t)kv->layer_slot[layer] * kv->l_n_kv_heads + kvh) * kv->n_lblocks +
                seq->lblocks[blk]) *
                   run;
    }
    const size_t run = (size_t)kv->block_tokens * kv->head_bytes;
    return (((size_t)kv->layer_slot[layer] * kv->n_kv_heads + kvh) * kv->n_blocks +
            seq->blocks[blk]) *
           run;
}

/* Bytes of one head at one position of layer `layer` (its pool's head size). */
static inline size_t kv_layer_head_bytes(const kv_cache *kv, uint32_t layer) {
    return kv->layer_local[layer] ? kv->l_head_bytes : kv->head_bytes;
}

/* Elements of one head of layer `layer`. */
static inline uint32_t kv_layer_head_dim(const kv_cache *kv, uint32_t layer) {
    return kv->layer_local[layer] ? kv->l_head_dim : kv->head_dim;
}

/* K (or V) of one KV head at a position: head_bytes bytes. */
static inline size_t kv_head_off(const kv_cache *kv, const kv_seq *seq, uint32_t layer,
                                 uint32_t pos, uint32_t kvh) {
    return kv_head_block_off(kv, seq, layer, pos / kv->block_tokens, kvh) +
           (size_t)(pos % kv->block_tokens) * kv_layer_head_bytes(kv, layer);
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
