/* The paged KV pool: allocation, release and block tables. No attention. */
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
    kv->head_bytes = kv_cache_row_bytes(p->kv_type, head_dim);
    kv->block_bytes = bb / 2;
    size_t half = bb / 2 * (size_t)n;
    /* Anonymous maps are zero-filled lazily: a large pool costs resident
     * memory only as blocks are first written. */
    kv->map_bytes = half;
    void *k = mmap(NULL, half, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void *v = mmap(NULL, half, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    kv->k = k == MAP_FAILED ? NULL : k;
    kv->v = v == MAP_FAILED ? NULL : v;
    kv->free_list = malloc(sizeof(uint32_t) * n);
    kv->refs = calloc(n, sizeof(uint16_t));
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
    free(kv);
}

uint32_t kv_cache_blocks_used(const kv_cache *kv) {
    return kv->n_blocks - kv->n_free;
}

int kv_seq_init(kv_seq *seq, uint32_t cap) {
    seq->blocks = malloc(sizeof(uint32_t) * (cap ? cap : 1));
    seq->n_blocks = 0;
    seq->cap = cap;
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
    if (extra > kv->n_free) return TPS_EFULL;
    for (uint32_t i = 0; i < extra; i++) {
        uint32_t b = kv->free_list[--kv->n_free];
        kv->refs[b] = 1;
        seq->blocks[seq->n_blocks++] = b;
    }
    return 0;
}

void kv_seq_release(kv_cache *kv, kv_seq *seq) {
    /* Released in reverse so a sequence that re-reserves gets its blocks back
     * in the same order (keeps allocation patterns reproducible). */
    while (seq->n_blocks) {
        uint32_t b = seq->blocks[--seq->n_blocks];
        if (--kv->refs[b] == 0) kv->free_list[kv->n_free++] = b;
    }
}
