/* The paged KV pool: allocation, release, block tables, and the block
 * moves of the prefix cache (taking cached blocks, indexing full ones,
 * forking a sequence). No attention. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/free_all.h"
#include "base/huge_map.h"
#include "engine/kv/kv_cache.h"
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

static void populate(uint8_t *p, size_t bytes) {
#ifdef MADV_POPULATE_WRITE
    if (madvise(p, bytes, MADV_POPULATE_WRITE) == 0 || errno != EINVAL) return;
#endif
    volatile uint8_t *b = p; /* kernels before 5.14: touch each page */
    for (size_t i = 0; i < bytes; i += 4096)
        b[i] = 0;
}

/* Runs of one block in the global pool: one per (layer, kv head), each
 * region n_blocks runs long (kv_head_block_off). */
static size_t global_runs(const kv_cache *kv) {
    return kv->block_bytes / ((size_t)kv->block_tokens * kv->head_bytes);
}

bool kv_cache_warm(kv_cache *kv, size_t bytes) {
    const size_t limit = (size_t)kv->resident_blocks * kv->block_bytes;
    if (!kv->pc || kv->accounting_only || kv->warm_bytes >= limit) return false;
    if (bytes > limit - kv->warm_bytes) bytes = limit - kv->warm_bytes;
    /* the first resident blocks are the same span of every head's region */
    const size_t runs = global_runs(kv), region = (size_t)kv->n_blocks * (kv->block_bytes / runs);
    const size_t from = kv->warm_bytes / runs, to = (kv->warm_bytes + bytes) / runs;
    for (size_t r = 0; r < runs && to > from; r++) {
        populate(kv->k + r * region + from, to - from);
        if (!kv->k_only) populate(kv->v + r * region + from, to - from);
    }
    kv->warm_bytes += bytes;
    return kv->warm_bytes < limit;
}

/* Which layers go to the local pool and which keep a state instead of
 * K/V, and each layer's index among those of its kind. */
static int split_layers(kv_cache *kv, const kv_cache_params *p) {
    kv->layer_local = calloc(p->n_layers ? p->n_layers : 1, 1);
    kv->layer_recurrent = calloc(p->n_layers ? p->n_layers : 1, 1);
    kv->layer_slot = malloc(sizeof(uint32_t) * (p->n_layers ? p->n_layers : 1));
    if (!kv->layer_local || !kv->layer_recurrent || !kv->layer_slot) return TPS_ENOMEM;
    uint32_t n_local = 0, n_rec = 0, n_shared = 0;
    for (uint32_t l = 0; l < p->n_layers; l++) {
        kv->layer_recurrent[l] = p->recurrent_layers && p->recurrent_layers[l];
        const int shared = p->shared_layers && p->shared_layers[l] && !kv->layer_recurrent[l];
        n_rec += kv->layer_recurrent[l];
        n_shared += shared;
        n_local += p->local_layers && p->window && p->local_layers[l] && !kv->layer_recurrent[l] &&
                   !shared;
    }
    /* all local: one pool, nothing let go */
    if (n_local == p->n_layers - n_rec - n_shared) n_local = 0;
    uint32_t next[3] = {0, 0, 0};
    for (uint32_t l = 0; l < p->n_layers; l++) {
        if (!kv->layer_recurrent[l]) kv->layer_local[l] = n_local && p->local_layers[l];
        if (p->shared_layers && p->shared_layers[l] && !kv->layer_recurrent[l]) {
            kv->layer_slot[l] = UINT32_MAX; /* stores nothing: another layer's K/V is read */
            continue;
        }
        kv->layer_slot[l] = next[kv->layer_recurrent[l] ? 2 : kv->layer_local[l]]++;
    }
    kv->n_shared = n_shared;
    kv->n_recurrent = n_rec;
    kv->n_local_layers = n_local;
    kv->window = n_local ? p->window : 0;
    return 0;
}

/* The local pool's tables: every local block free, no companion. */
static int create_local(kv_cache *kv) {
    const uint32_t n = kv->n_lblocks, ng = kv->n_blocks;
    kv->lfree = malloc(sizeof(uint32_t) * (n ? n : 1));
    kv->lrefs = calloc(n ? n : 1, sizeof(uint32_t));
    kv->lowner = malloc(sizeof(uint32_t) * (n ? n : 1));
    kv->llru.prev = malloc(sizeof(uint32_t) * (n ? n : 1));
    kv->llru.next = malloc(sizeof(uint32_t) * (n ? n : 1));
    kv->companion = malloc(sizeof(uint32_t) * ng);
    if (!kv->lfree || !kv->lrefs || !kv->lowner || !kv->llru.prev || !kv->llru.next ||
        !kv->companion)
        return TPS_ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        kv->lfree[i] = n - 1 - i;
        kv->lowner[i] = PREFIX_NONE;
    }
    for (uint32_t i = 0; i < ng; i++)
        kv->companion[i] = PREFIX_NONE;
    kv->n_lfree = n;
    block_lru_init(&kv->llru);
    return 0;
}

/* The parameters a cache can be made of; *head_dim_out: the head size
 * (kv_dim when the parameters give none). */
static int check_params(const kv_cache_params *p, uint32_t *head_dim_out, tps_err *err) {
    if (p->kv_type != GGML_TYPE_F32 && p->kv_type != GGML_TYPE_F16 && p->kv_type != GGML_TYPE_Q8_0)
        return tps_fail(err, TPS_EINVAL, "kv cache: type must be f32, f16 or q8_0");
    const uint32_t head_dim = p->head_dim ? p->head_dim : p->kv_dim;
    *head_dim_out = head_dim;
    if (p->kv_dim == 0 || p->kv_dim % head_dim)
        return tps_fail(err, TPS_EINVAL, "kv cache: kv_dim %u is not a multiple of head_dim %u",
                        p->kv_dim, head_dim);
    if (!kv_cache_row_bytes(p->kv_type, head_dim))
        return tps_fail(err, TPS_EINVAL,
                        "kv cache: q8_0 needs a head size that is a multiple of 32 (this model's "
                        "is %u); use f16",
                        head_dim);
    const uint32_t lhd = p->local_head_dim ? p->local_head_dim : head_dim;
    const uint32_t lkv = p->local_kv_dim ? p->local_kv_dim : p->kv_dim;
    if (lkv % lhd || !kv_cache_row_bytes(p->kv_type, lhd))
        return tps_fail(err, TPS_EINVAL,
                        "kv cache: the local layers' kv_dim %u is not a multiple of their head "
                        "size %u, or q8_0 cannot hold a head of %u (use f16)",
                        lkv, lhd, lhd);
    if (p->block_tokens == 0 || p->block_tokens > 4096)
        return tps_fail(err, TPS_EINVAL, "kv cache: block size %u must be 1..4096 tokens",
                        p->block_tokens);
    return 0;
}

/* The pool's global (n) and local (nl) blocks: p->n_blocks, or what
 * p->mem_bytes holds of both (nl <= n, at most p->n_local_blocks). */
static int pool_blocks(const kv_cache_params *p, uint32_t n_local, size_t gb, size_t lb,
                       uint64_t *n_out, uint64_t *nl_out, tps_err *err) {
    uint64_t n = p->n_blocks, nl;
    if (n) {
        nl = n_local ? n : 0;
    } else { /* the budget holds n_l local and n global blocks, n_l <= n */
        nl = n_local ? p->mem_bytes / (gb + lb) : 0;
        if (n_local && p->n_local_blocks && nl > p->n_local_blocks) nl = p->n_local_blocks;
        n = p->mem_bytes >= nl * lb ? (p->mem_bytes - nl * lb) / gb : 0;
    }
    if (nl && p->n_local_blocks && nl > p->n_local_blocks) nl = p->n_local_blocks;
    if (nl > n) nl = n;
    if (n == 0)
        return tps_fail(err, TPS_EINVAL,
                        "kv cache: %zu bytes hold no block (one block of %u tokens takes %zu "
                        "bytes); raise --kv-mem",
                        p->mem_bytes, p->block_tokens, gb + lb);
    if (n > UINT32_MAX / 2) return tps_fail(err, TPS_ERANGE, "kv cache: too many blocks");
    *n_out = n;
    *nl_out = nl;
    return 0;
}

/* One map per tensor (K, V; K alone when k_only) of `bytes`, zero-filled,
 * faulted in only as it is written (or warmed: kv_cache_warm). Huge pages:
 * blocks are spread over the whole pool, and with 4 KiB pages a write to a
 * block not touched for a while pays a page walk through cold page tables,
 * which cost 5-10% of a unique-prompt workload once the prefix cache
 * stopped reusing the same few warm blocks. */
static void map_pool(kv_cache *kv, const kv_cache_params *p, size_t bytes) {
    kv->k_only = p->k_only;
    kv->map_bytes = bytes;
    kv->accounting_only = p->accounting_only;
    if (kv->accounting_only) return;
    kv->k = huge_map(bytes);
    kv->v = kv->k_only ? kv->k : huge_map(bytes);
}

int kv_cache_create(kv_cache **out, const kv_cache_params *p, tps_err *err) {
    *out = NULL;
    uint32_t head_dim = 0;
    int rc = check_params(p, &head_dim, err);
    if (rc) return rc;
    kv_cache *kv = calloc(1, sizeof *kv);
    if (!kv) return tps_fail(err, TPS_ENOMEM, "kv cache: out of memory");
    if (split_layers(kv, p)) {
        kv_cache_free(kv);
        return tps_fail(err, TPS_ENOMEM, "kv cache: out of memory");
    }
    const uint32_t n_local = kv->n_local_layers;
    if (kv->n_recurrent + kv->n_shared == p->n_layers) {
        kv_cache_free(kv);
        return tps_fail(err, TPS_EUNSUP, "kv cache: every layer is recurrent: no attention layer");
    }
    /* K+V bytes of one global and one local block (K alone when k_only) */
    const size_t maps = p->k_only ? 1 : 2;
    const uint32_t l_kv_dim = p->local_kv_dim ? p->local_kv_dim : p->kv_dim;
    const uint32_t l_head_dim = p->local_head_dim ? p->local_head_dim : head_dim;
    size_t gb = kv_cache_block_bytes(p->n_layers - n_local - kv->n_recurrent - kv->n_shared,
                                     p->kv_dim, p->block_tokens, p->kv_type) /
                2 * maps;
    size_t lb = kv_cache_block_bytes(n_local, l_kv_dim, p->block_tokens, p->kv_type) / 2 * maps;
    uint64_t n = 0, nl = 0;
    if ((rc = pool_blocks(p, n_local, gb, lb, &n, &nl, err))) {
        kv_cache_free(kv);
        return rc;
    }
    kv->n_layers = p->n_layers;
    kv->kv_dim = p->kv_dim;
    kv->head_dim = head_dim;
    kv->n_kv_heads = p->kv_dim / head_dim;
    kv->block_tokens = p->block_tokens;
    kv->kv_type = p->kv_type;
    kv->n_blocks = (uint32_t)n;
    kv->n_lblocks = (uint32_t)nl;
    kv->resident_blocks =
        p->resident_blocks && p->resident_blocks < kv->n_blocks ? p->resident_blocks : kv->n_blocks;
    kv->head_bytes = kv_cache_row_bytes(p->kv_type, head_dim);
    kv->l_head_dim = n_local ? l_head_dim : head_dim;
    kv->l_n_kv_heads = n_local ? l_kv_dim / l_head_dim : kv->n_kv_heads;
    kv->l_head_bytes = kv_cache_row_bytes(p->kv_type, kv->l_head_dim);
    kv->block_bytes = gb / maps;
    kv->lblock_bytes = lb / maps;
    kv->local_base = gb / maps * (size_t)n;
    size_t half = kv->local_base + lb / maps * (size_t)nl;
    map_pool(kv, p, half);
    kv->free_list = malloc(sizeof(uint32_t) * n);
    kv->refs = calloc(n, sizeof *kv->refs);
    int pc_rc =
        p->prefix_cache ? prefix_cache_create(&kv->pc, (uint32_t)n, p->block_tokens, err) : 0;
    if (pc_rc) {
        kv_cache_free(kv);
        return pc_rc;
    }
    if ((!kv->accounting_only && (!kv->k || !kv->v)) || !kv->free_list || !kv->refs ||
        create_local(kv) || kv_state_create(kv, p)) {
        kv_cache_free(kv);
        return tps_fail(err, TPS_ENOMEM, "kv cache: cannot allocate %zu bytes for %llu blocks",
                        maps * half, (unsigned long long)n);
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
    if (!kv->k_only) huge_unmap(kv->v, kv->map_bytes);
    huge_unmap(kv->k, kv->map_bytes);
    prefix_cache_free(kv->pc);
    kv_state_free(kv);
    TPS_FREE_ALL(kv->free_list, kv->refs, kv->layer_local, kv->layer_slot, kv->layer_recurrent,
                 kv->lfree, kv->lrefs, kv->lowner, kv->llru.prev, kv->llru.next, kv->companion, kv);
}

uint32_t kv_cache_blocks_used(const kv_cache *kv) {
    return kv->n_blocks - kv_cache_available(kv);
}

/* ---- the local pool's companions -------------------------------------------- */

/* Global block g leaves the index (evicted): its companion is nobody's any
 * more, and free when nobody holds it. */
static void unlink_companion(kv_cache *kv, uint32_t g) {
    const uint32_t c = kv->n_local_layers ? kv->companion[g] : PREFIX_NONE;
    if (c == PREFIX_NONE) return;
    kv->companion[g] = PREFIX_NONE;
    kv->lowner[c] = PREFIX_NONE;
    if (kv->lrefs[c] == 0) {
        block_lru_remove(&kv->llru, c);
        kv->lfree[kv->n_lfree++] = c;
    }
}

/* Local block l becomes the companion of indexed global block g, when
 * neither has one. */
static void link_companion(kv_cache *kv, uint32_t g, uint32_t l) {
    if (kv->companion[g] != PREFIX_NONE || kv->lowner[l] != PREFIX_NONE) return;
    kv->companion[g] = l;
    kv->lowner[l] = g;
}

static uint32_t local_available(const kv_cache *kv) {
    return kv->n_lfree + kv->llru.n;
}

/* A local block for a new owner: a free one first, else the least
 * recently used companion nobody holds. The caller checked local_available. */
static uint32_t take_local(kv_cache *kv) {
    uint32_t b;
    if (kv->n_lfree) {
        b = kv->lfree[--kv->n_lfree];
    } else {
        b = kv->llru.head;
        block_lru_remove(&kv->llru, b);
        kv->companion[kv->lowner[b]] = PREFIX_NONE;
        kv->lowner[b] = PREFIX_NONE;
    }
    kv->lrefs[b] = 1;
    return b;
}

static void hold_local(kv_cache *kv, uint32_t b) {
    if (kv->lrefs[b]++ == 0) block_lru_remove(&kv->llru, b);
}

static void drop_local(kv_cache *kv, uint32_t b) {
    if (--kv->lrefs[b]) return;
    if (kv->lowner[b] != PREFIX_NONE)
        block_lru_push(&kv->llru, b);
    else
        kv->lfree[kv->n_lfree++] = b;
}

/* ---- blocks and tables ---------------------------------------------------- */

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
                       kv->n_touched < kv->resident_blocks || !kv->pc || !kv->pc->lru.n))
        b = kv->free_list[--kv->n_free];
    else {
        b = prefix_cache_evict(kv->pc);
        unlink_companion(kv, b);
        kv_ckpt_detach(kv, b);
    }
    if (b >= kv->n_touched) kv->n_touched = b + 1;
    kv->refs[b] = 1;
    return b;
}

static void drop_block(kv_cache *kv, uint32_t b) {
    if (--kv->refs[b]) return;
    if (kv->pc && prefix_cache_has(kv->pc, b)) {
        prefix_cache_lru_push(kv->pc, b);
    } else {
        kv_ckpt_detach(kv, b); /* a private block's checkpoint no hit can reach */
        kv->free_list[kv->n_free++] = b;
    }
}

uint32_t kv_cache_reset_prefix(kv_cache *kv) {
    if (!kv->pc) return 0;
    uint32_t n = 0, b;
    while ((b = prefix_cache_evict(kv->pc)) != PREFIX_NONE) { /* cached, nobody holds it */
        unlink_companion(kv, b);
        kv_ckpt_detach(kv, b);
        kv->free_list[kv->n_free++] = b;
        n++;
    }
    for (b = 0; b < kv->n_blocks && kv->pc->n_cached; b++) { /* held by a running sequence */
        if (!prefix_cache_has(kv->pc, b)) continue;
        prefix_cache_unindex(kv->pc, b);
        unlink_companion(kv, b);
        kv_ckpt_detach(kv, b);
        n++;
    }
    return n;
}

int kv_seq_init(kv_seq *seq, uint32_t cap) {
    seq->blocks = malloc(sizeof(uint32_t) * (cap ? cap : 1));
    seq->lblocks = malloc(sizeof(uint32_t) * (cap ? cap : 1));
    seq->n_blocks = 0;
    seq->l_lo = 0;
    seq->cap = cap;
    seq->n_chained = 0;
    seq->chain = prefix_root();
    seq->state = 0;
    return seq->blocks && seq->lblocks ? 0 : TPS_ENOMEM;
}

void kv_seq_destroy(kv_seq *seq) {
    free(seq->blocks);
    free(seq->lblocks);
    seq->blocks = seq->lblocks = NULL;
    seq->n_blocks = seq->cap = 0;
}

int kv_seq_reserve(kv_cache *kv, kv_seq *seq, uint32_t n_tokens) {
    uint32_t need = kv_blocks_for(kv, n_tokens);
    if (need <= seq->n_blocks) return 0;
    if (need > seq->cap) return TPS_ERANGE;
    uint32_t extra = need - seq->n_blocks;
    if (extra > kv_cache_available(kv)) return TPS_EFULL;
    if (kv->n_local_layers && extra > local_available(kv)) return TPS_EFULL;
    if (kv_state_take(kv, seq)) return TPS_EFULL; /* the last check: nothing taken before */
    for (uint32_t i = 0; i < extra; i++) {
        if (kv->n_local_layers) seq->lblocks[seq->n_blocks] = take_local(kv);
        seq->blocks[seq->n_blocks++] = take_block(kv);
    }
    return 0;
}

void kv_seq_release(kv_cache *kv, kv_seq *seq) {
    /* Released in reverse so a sequence that re-reserves gets its blocks back
     * in the same order (keeps allocation patterns reproducible). */
    while (seq->n_blocks) {
        --seq->n_blocks;
        if (kv->n_local_layers && seq->n_blocks >= seq->l_lo)
            drop_local(kv, seq->lblocks[seq->n_blocks]);
        drop_block(kv, seq->blocks[seq->n_blocks]);
    }
    seq->l_lo = 0;
    seq->n_chained = 0;
    seq->chain = prefix_root();
    kv_state_drop(kv, seq);
}

/* ---- prefix cache ---------------------------------------------------------- */

/* First local block the row at position n reads. */
static uint32_t window_block(const kv_cache *kv, uint32_t n) {
    return n + 1 > kv->window ? (n + 1 - kv->window) / kv->block_tokens : 0;
}

/* seq holds m matched global blocks: keeps the most, k, whose window (the
 * row at k * B reads local blocks [window_block, k)) still has every
 * companion, takes those companions, and lets the rest go. Returns k. */
static uint32_t take_local_prefix(kv_cache *kv, kv_seq *seq, uint32_t m) {
    uint32_t k = m;
    for (; k > 0; k--) {
        uint32_t j = window_block(kv, k * kv->block_tokens);
        while (j < k && kv->companion[seq->blocks[j]] != PREFIX_NONE)
            j++;
        if (j == k) break;
    }
    while (seq->n_blocks > k)
        drop_block(kv, seq->blocks[--seq->n_blocks]);
    seq->l_lo = window_block(kv, k * kv->block_tokens);
    for (uint32_t j = seq->l_lo; j < k; j++) {
        seq->lblocks[j] = kv->companion[seq->blocks[j]];
        hold_local(kv, seq->lblocks[j]);
    }
    return k;
}

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
    if (kv->n_local_layers) k = take_local_prefix(kv, seq, k);
    if (kv->n_recurrent) { /* only as far as a checkpoint of the state reaches */
        k = kv_ckpt_restore(kv, seq, k);
        while (seq->n_blocks > k)
            drop_block(kv, seq->blocks[--seq->n_blocks]);
    }
    seq->n_chained = k;
    seq->chain = k ? prefix_cache_ref(kv->pc, seq->blocks[k - 1]) : prefix_root();
    return k;
}

/* Lets go of seq's local blocks wholly before the window of the row at
 * position n. */
static void slide_window(kv_cache *kv, kv_seq *seq, uint32_t n) {
    const uint32_t lo = window_block(kv, n);
    for (; seq->l_lo < lo && seq->l_lo < seq->n_blocks; seq->l_lo++)
        drop_local(kv, seq->lblocks[seq->l_lo]);
}

void kv_seq_commit(kv_cache *kv, kv_seq *seq, const int32_t *tokens, uint32_t n_computed) {
    const uint32_t bt = kv->block_tokens;
    while (kv->pc && (uint64_t)(seq->n_chained + 1) * bt <= n_computed &&
           seq->n_chained < seq->n_blocks) {
        const int32_t *t = tokens + (size_t)seq->n_chained * bt;
        uint32_t mine = seq->blocks[seq->n_chained];
        uint32_t found = prefix_cache_find(kv->pc, seq->chain, t);
        if (found != PREFIX_NONE)
            seq->chain = prefix_cache_ref(kv->pc, found);
        else if (prefix_cache_has(kv->pc, mine))
            /* indexed under another chain: cannot happen for a block written
             * by this chain; leave it and stop extending */
            break;
        else
            seq->chain = prefix_cache_insert(kv->pc, mine, seq->chain, t);
        if (kv->n_local_layers && seq->n_chained >= seq->l_lo)
            link_companion(kv, seq->chain.block, seq->lblocks[seq->n_chained]);
        seq->n_chained++;
    }
    if (kv->n_local_layers) slide_window(kv, seq, n_computed);
}

/* Block `from`'s K/V into block `to` in the pool at base whose blocks
 * are block_bytes each, spread over runs of run bytes in regions of
 * n_blocks runs (kv_head_block_off). */
static void copy_runs(kv_cache *kv, size_t base, size_t block_bytes, size_t run, uint32_t n_blocks,
                      uint32_t from, uint32_t to) {
    const size_t region = (size_t)n_blocks * run;
    for (size_t r = 0; r < block_bytes / run; r++) {
        const size_t f = base + r * region + (size_t)from * run,
                     t = base + r * region + (size_t)to * run;
        memcpy(kv->k + t, kv->k + f, run);
        if (!kv->k_only) memcpy(kv->v + t, kv->v + f, run);
    }
}

int kv_seq_fork(kv_cache *kv, kv_seq *dst, const kv_seq *src, uint32_t n_tokens) {
    const uint32_t full = n_tokens / kv->block_tokens;
    const bool partial = n_tokens % kv->block_tokens != 0;
    if (dst->n_blocks || full + partial > dst->cap || full + partial > src->n_blocks)
        return TPS_ERANGE;
    const bool local = kv->n_local_layers != 0;
    if (partial && (kv_cache_available(kv) == 0 || (local && local_available(kv) == 0)))
        return TPS_EFULL;
    if (kv_state_fork(kv, dst, src)) return TPS_EFULL; /* the last check: nothing taken before */
    dst->l_lo = local ? src->l_lo : 0;
    for (uint32_t i = 0; i < full; i++) {
        uint32_t b = src->blocks[i];
        if (kv->refs[b]++ == 0 && kv->pc) prefix_cache_lru_remove(kv->pc, b);
        if (local && i >= src->l_lo) hold_local(kv, dst->lblocks[i] = src->lblocks[i]);
        dst->blocks[dst->n_blocks++] = b;
    }
    if (partial && kv->accounting_only) { /* the same blocks taken, nothing copied */
        uint32_t to = take_block(kv);
        if (local) dst->lblocks[full] = take_local(kv);
        dst->blocks[dst->n_blocks++] = to;
    } else if (partial) {
        uint32_t from = src->blocks[full], to = take_block(kv);
        copy_runs(kv, 0, kv->block_bytes, (size_t)kv->block_tokens * kv->head_bytes, kv->n_blocks,
                  from, to);
        if (local) {
            const uint32_t lt = take_local(kv);
            copy_runs(kv, kv->local_base, kv->lblock_bytes,
                      (size_t)kv->block_tokens * kv->l_head_bytes, kv->n_lblocks,
                      src->lblocks[full], lt);
            dst->lblocks[full] = lt;
        }
        dst->blocks[dst->n_blocks++] = to;
    }
    /* src indexed at most its full blocks; otherwise dst re-walks the chain
     * from its start at its next commit */
    bool same = src->n_chained <= full;
    dst->n_chained = same ? src->n_chained : 0;
    dst->chain = same ? src->chain : prefix_root();
    return 0;
}
