/* The paged KV pool: allocation, release, block tables, and the block
 * moves of the prefix cache (taking cached blocks, indexing full ones,
 * forking a sequence). No attention. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "engine/kv_cache.h"
#include "kernels/quant.h" /* block_q8_0 */
#include "model/gguf.h"

size_t kv_cache_row_bytes(uint32_t kv_type, uint32_t n) {
    switch (kv_type) {
    case GGML_TYPE_F32:
        return (size_t)n * 4;
    case GGML_TYPE_F16:
        return (size_t)n * 2;
    case GGML_TYPE_Q8_0:
        return n % QK8_0 ? 0 : (size_t)n / QK8_0 * sizeof(block_q8_0);
    }
    return 0;
}

size_t kv_cache_block_bytes(uint32_t n_layers, uint32_t kv_dim, uint32_t block_tokens,
                            uint32_t kv_type) {
    return 2 * (size_t)n_layers * block_tokens * kv_cache_row_bytes(kv_type, kv_dim);
}

/* One tensor's pool (K or V): an anonymous map, zero-filled, faulted in
 * only as it is written (or warmed: kv_cache_warm). Huge pages where the
 * kernel gives them: blocks are spread over the whole pool, and with 4 KiB
 * pages a write to a block not touched for a while pays a page walk
 * through cold page tables, which cost 5-10% of a unique-prompt workload
 * once the prefix cache stopped reusing the same few warm blocks. */
static void *pool_map(size_t bytes) {
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    (void)madvise(m, bytes, MADV_HUGEPAGE); /* a hint: no THP, no harm */
    return m;
}

static void populate(uint8_t *p, size_t bytes) {
#ifdef MADV_POPULATE_WRITE
    if (madvise(p, bytes, MADV_POPULATE_WRITE) == 0 || errno != EINVAL) return;
#endif
    volatile uint8_t *b = p; /* kernels before 5.14: touch each page */
    for (size_t i = 0; i < bytes; i += 4096)
        b[i] = 0;
}

bool kv_cache_warm(kv_cache *kv, size_t bytes) {
    const size_t limit = (size_t)kv->resident_blocks * kv->block_bytes;
    if (!kv->pc || kv->warm_bytes >= limit) return false;
    if (bytes > limit - kv->warm_bytes) bytes = limit - kv->warm_bytes;
    populate(kv->k + kv->warm_bytes, bytes);
    populate(kv->v + kv->warm_bytes, bytes);
    kv->warm_bytes += bytes;
    return kv->warm_bytes < limit;
}

int kv_cache_create(kv_cache **out, const kv_cache_params *p, tps_err *err) {
    *out = NULL;
    if (p->kv_type != GGML_TYPE_F32 && p->kv_type != GGML_TYPE_F16 && p->kv_type != GGML_TYPE_Q8_0)
        return tps_fail(err, TPS_EINVAL, "kv cache: type must be f32, f16 or q8_0");
    const uint32_t head_dim = p->head_dim ? p->head_dim : p->kv_dim;
    if (p->kv_dim == 0 || p->kv_dim % head_dim)
        return tps_fail(err, TPS_EINVAL, "kv cache: kv_dim %u is not a multiple of head_dim %u",
                        p->kv_dim, head_dim);
    if (!kv_cache_row_bytes(p->kv_type, head_dim))
        return tps_fail(err, TPS_EINVAL,
                        "kv cache: q8_0 needs a head size that is a multiple of 32 (this model's "
                        "is %u); use f16",
                        head_dim);
    if (p->block_tokens == 0 || p->block_tokens > 4096)
        return tps_fail(err, TPS_EINVAL, "kv cache: block size %u must be 1..4096 tokens",
                        p->block_tokens);
    size_t bb = kv_cache_block_bytes(p->n_layers, p->kv_dim, p->block_tokens, p->kv_type);
    uint64_t n = p->n_blocks ? p->n_blocks : p->mem_bytes / bb;
    if (n == 0)
        return tps_fail(err, TPS_EINVAL,
                        "kv cache: %zu bytes hold no block (one block of %u tokens takes %zu "
                        "bytes); raise --kv-mem",
                        p->mem_bytes, p->block_tokens, bb);
    if (n > UINT32_MAX / 2) return tps_fail(err, TPS_ERANGE, "kv cache: too many blocks");
    kv_cache *kv = calloc(1, sizeof *kv);
    if (!kv) return tps_fail(err, TPS_ENOMEM, "kv cache: out of memory");
    kv->n_layers = p->n_layers;
    kv->kv_dim = p->kv_dim;
    kv->head_dim = head_dim;
    kv->n_kv_heads = p->kv_dim / head_dim;
    kv->block_tokens = p->block_tokens;
    kv->kv_type = p->kv_type;
    kv->n_blocks = (uint32_t)n;
    kv->resident_blocks =
        p->resident_blocks && p->resident_blocks < kv->n_blocks ? p->resident_blocks : kv->n_blocks;
    kv->head_bytes = kv_cache_row_bytes(p->kv_type, head_dim);
    kv->block_bytes = bb / 2;
    size_t half = bb / 2 * (size_t)n;
    kv->map_bytes = half;
    kv->k = pool_map(half);
    kv->v = pool_map(half);
    kv->free_list = malloc(sizeof(uint32_t) * n);
    kv->refs = calloc(n, sizeof *kv->refs);
    int pc_rc =
        p->prefix_cache ? prefix_cache_create(&kv->pc, (uint32_t)n, p->block_tokens, err) : 0;
    if (pc_rc) {
        kv_cache_free(kv);
        return pc_rc;
    }
    if (!kv->k || !kv->v || !kv->free_list || !kv->refs) {
        kv_cache_free(kv);
        return tps_fail(err, TPS_ENOMEM, "kv cache: cannot allocate %zu bytes for %llu blocks",
                        2 * half, (unsigned long long)n);
    }
    /* Stack order: block 0 is handed out first. */
    for (uint32_t i = 0; i < kv->n_blocks; i++)
        kv->free_list[i] = kv->n_blocks - 1 - i;
    kv->n_free = kv->n_blocks;
    *out = kv;
    return 0;
}

void kv_cache_free(kv_cache *kv) {
    if (!kv) return;
    if (kv->k) munmap(kv->k, kv->map_bytes);
    if (kv->v) munmap(kv->v, kv->map_bytes);
    free(kv->free_list);
    free(kv->refs);
    prefix_cache_free(kv->pc);
    free(kv);
}

uint32_t kv_cache_blocks_used(const kv_cache *kv) {
    return kv->n_blocks - kv_cache_available(kv);
}

/* A block for a new owner: a never-cached free one first, else the least
 * recently used cached one. Past resident_blocks, a free block never
 * touched (memory the process does not hold yet) comes last: the cache
 * then keeps what fits in the memory the load already needed, instead of
 * growing the resident set to the whole pool. Fresh blocks come off the
 * free stack in order 0, 1, ... below every freed one, so the top is
 * fresh only when no touched block is free. The caller has checked
 * kv_cache_available. */
static uint32_t take_block(kv_cache *kv) {
    uint32_t b;
    if (kv->n_free && (kv->free_list[kv->n_free - 1] < kv->n_touched ||
                       kv->n_touched < kv->resident_blocks || !kv->pc || !kv->pc->n_lru))
        b = kv->free_list[--kv->n_free];
    else
        b = prefix_cache_evict(kv->pc);
    if (b >= kv->n_touched) kv->n_touched = b + 1;
    kv->refs[b] = 1;
    return b;
}

static void drop_block(kv_cache *kv, uint32_t b) {
    if (--kv->refs[b]) return;
    if (kv->pc && prefix_cache_has(kv->pc, b))
        prefix_cache_lru_push(kv->pc, b);
    else
        kv->free_list[kv->n_free++] = b;
}

int kv_seq_init(kv_seq *seq, uint32_t cap) {
    seq->blocks = malloc(sizeof(uint32_t) * (cap ? cap : 1));
    seq->n_blocks = 0;
    seq->cap = cap;
    seq->n_chained = 0;
    seq->chain = prefix_root();
    return seq->blocks ? 0 : TPS_ENOMEM;
}

void kv_seq_destroy(kv_seq *seq) {
    free(seq->blocks);
    seq->blocks = NULL;
    seq->n_blocks = seq->cap = 0;
}

int kv_seq_reserve(kv_cache *kv, kv_seq *seq, uint32_t n_tokens) {
    uint32_t need = kv_blocks_for(kv, n_tokens);
    if (need <= seq->n_blocks) return 0;
    if (need > seq->cap) return TPS_ERANGE;
    uint32_t extra = need - seq->n_blocks;
    if (extra > kv_cache_available(kv)) return TPS_EFULL;
    for (uint32_t i = 0; i < extra; i++)
        seq->blocks[seq->n_blocks++] = take_block(kv);
    return 0;
}

void kv_seq_release(kv_cache *kv, kv_seq *seq) {
    /* Released in reverse so a sequence that re-reserves gets its blocks back
     * in the same order (keeps allocation patterns reproducible). */
    while (seq->n_blocks)
        drop_block(kv, seq->blocks[--seq->n_blocks]);
    seq->n_chained = 0;
    seq->chain = prefix_root();
}

/* ---- prefix cache ---------------------------------------------------------- */

uint32_t kv_seq_match_prefix(kv_cache *kv, kv_seq *seq, const int32_t *tokens,
                             uint32_t max_blocks) {
    if (!kv->pc || seq->n_blocks) return 0;
    if (max_blocks > seq->cap) max_blocks = seq->cap;
    prefix_ref chain = prefix_root();
    uint32_t k = 0;
    for (; k < max_blocks; k++) {
        uint32_t b = prefix_cache_find(kv->pc, chain, tokens + (size_t)k * kv->block_tokens);
        if (b == PREFIX_NONE) break;
        if (kv->refs[b]++ == 0) prefix_cache_lru_remove(kv->pc, b);
        seq->blocks[seq->n_blocks++] = b;
        chain = prefix_cache_ref(kv->pc, b);
    }
    seq->n_chained = k;
    seq->chain = chain;
    return k;
}

void kv_seq_commit(kv_cache *kv, kv_seq *seq, const int32_t *tokens, uint32_t n_computed) {
    if (!kv->pc) return;
    const uint32_t bt = kv->block_tokens;
    while ((uint64_t)(seq->n_chained + 1) * bt <= n_computed && seq->n_chained < seq->n_blocks) {
        const int32_t *t = tokens + (size_t)seq->n_chained * bt;
        uint32_t mine = seq->blocks[seq->n_chained];
        uint32_t found = prefix_cache_find(kv->pc, seq->chain, t);
        if (found != PREFIX_NONE)
            seq->chain = prefix_cache_ref(kv->pc, found);
        else if (prefix_cache_has(kv->pc, mine))
            /* indexed under another chain: cannot happen for a block written
             * by this chain; leave it and stop extending */
            return;
        else
            seq->chain = prefix_cache_insert(kv->pc, mine, seq->chain, t);
        seq->n_chained++;
    }
}

int kv_seq_fork(kv_cache *kv, kv_seq *dst, const kv_seq *src, uint32_t n_tokens) {
    const uint32_t full = n_tokens / kv->block_tokens;
    const bool partial = n_tokens % kv->block_tokens != 0;
    if (dst->n_blocks || full + partial > dst->cap || full + partial > src->n_blocks)
        return TPS_ERANGE;
    if (partial && kv_cache_available(kv) == 0) return TPS_EFULL;
    for (uint32_t i = 0; i < full; i++) {
        uint32_t b = src->blocks[i];
        if (kv->refs[b]++ == 0 && kv->pc) prefix_cache_lru_remove(kv->pc, b);
        dst->blocks[dst->n_blocks++] = b;
    }
    if (partial) {
        uint32_t from = src->blocks[full], to = take_block(kv);
        memcpy(kv->k + (size_t)to * kv->block_bytes, kv->k + (size_t)from * kv->block_bytes,
               kv->block_bytes);
        memcpy(kv->v + (size_t)to * kv->block_bytes, kv->v + (size_t)from * kv->block_bytes,
               kv->block_bytes);
        dst->blocks[dst->n_blocks++] = to;
    }
    /* src indexed at most its full blocks; otherwise dst re-walks the chain
     * from its start at its next commit */
    bool same = src->n_chained <= full;
    dst->n_chained = same ? src->n_chained : 0;
    dst->chain = same ? src->chain : prefix_root();
    return 0;
}
