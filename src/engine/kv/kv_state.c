/* The state pool of a hybrid model's recurrent layers (kv_cache.h): one
 * fixed-size slot per running sequence, handed out and taken back with the
 * sequence's KV blocks, and the prefix cache's checkpoints of it, attached
 * to indexed blocks. What a state holds and how a step updates it is the
 * forward pass's (linear_attn.c); here only slots and checkpoints. */
#include <stdlib.h>
#include <string.h>

#include "base/huge_map.h"
#include "engine/kv/kv_cache.h"

/* The checkpoints: none unless the prefix cache and p ask for them. */
static int ckpt_create(kv_cache *kv, const kv_cache_params *p) {
    if (!kv->pc || !p->n_ckpt || !p->ckpt_every || p->ckpt_every % kv->block_tokens) return 0;
    const uint32_t n = p->n_ckpt;
    kv->ckpt_every = p->ckpt_every;
    kv->n_ckpt = n;
    kv->ckpt_block = malloc(sizeof(uint32_t) * n);
    kv->ckpt_free = malloc(sizeof(uint32_t) * n);
    kv->ckpt_lru.prev = malloc(sizeof(uint32_t) * n);
    kv->ckpt_lru.next = malloc(sizeof(uint32_t) * n);
    kv->block_ckpt = malloc(sizeof(uint32_t) * kv->n_blocks);
    if (!kv->ckpt_block || !kv->ckpt_free || !kv->ckpt_lru.prev || !kv->ckpt_lru.next ||
        !kv->block_ckpt)
        return TPS_ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        kv->ckpt_free[i] = n - 1 - i;
        kv->ckpt_block[i] = KV_CKPT_NONE;
    }
    for (uint32_t b = 0; b < kv->n_blocks; b++)
        kv->block_ckpt[b] = KV_CKPT_NONE;
    kv->n_ckpt_free = n;
    block_lru_init(&kv->ckpt_lru);
    if (p->accounting_only || !p->state_bytes) return 0;
    kv->ckpts_map_bytes = (size_t)n * p->state_bytes;
    kv->ckpts = huge_map(kv->ckpts_map_bytes);
    return kv->ckpts ? 0 : TPS_ENOMEM;
}

int kv_state_create(kv_cache *kv, const kv_cache_params *p) {
    if (!kv->n_recurrent) return 0;
    const uint32_t n = p->n_state_slots ? p->n_state_slots : 1;
    kv->n_state_slots = n;
    kv->state_bytes = p->state_bytes;
    kv->layer_state_bytes = p->state_bytes / kv->n_recurrent;
    kv->state_free = malloc(sizeof(uint32_t) * n);
    if (!kv->state_free) return TPS_ENOMEM;
    for (uint32_t i = 0; i < n; i++) /* slot 0 on top: the few slots in use stay warm */
        kv->state_free[i] = n - 1 - i;
    kv->n_state_free = n;
    if (p->accounting_only || !p->state_bytes) return ckpt_create(kv, p);
    /* anonymous and faulted in as slots are first used: the pool's address
     * space is max_seqs slots, its memory the slots that ever ran */
    kv->states_map_bytes = (size_t)n * p->state_bytes;
    kv->states = huge_map(kv->states_map_bytes);
    return kv->states ? ckpt_create(kv, p) : TPS_ENOMEM;
}

void kv_state_free(kv_cache *kv) {
    huge_unmap(kv->states, kv->states_map_bytes);
    huge_unmap(kv->ckpts, kv->ckpts_map_bytes);
    free(kv->state_free);
    free(kv->ckpt_block);
    free(kv->ckpt_free);
    free(kv->ckpt_lru.prev);
    free(kv->ckpt_lru.next);
    free(kv->block_ckpt);
    kv->states = kv->ckpts = NULL;
    kv->state_free = kv->ckpt_block = kv->ckpt_free = kv->block_ckpt = NULL;
    kv->ckpt_lru.prev = kv->ckpt_lru.next = NULL;
}

int kv_state_take(kv_cache *kv, kv_seq *seq) {
    if (!kv->n_recurrent || seq->state) return 0;
    if (!kv->n_state_free) return TPS_EFULL;
    /* not zeroed here: the forward pass zeroes a state at its sequence's
     * position 0, and a prefix hit or a fork overwrites it whole */
    seq->state = kv->state_free[--kv->n_state_free] + 1;
    return 0;
}

void kv_state_drop(kv_cache *kv, kv_seq *seq) {
    if (!seq->state) return;
    kv->state_free[kv->n_state_free++] = seq->state - 1;
    seq->state = 0;
}

int kv_state_fork(kv_cache *kv, kv_seq *dst, const kv_seq *src) {
    if (!kv->n_recurrent || !src->state) return 0;
    int rc = kv_state_take(kv, dst);
    if (rc || !kv->states) return rc;
    memcpy(kv->states + (size_t)(dst->state - 1) * kv->state_bytes,
           kv->states + (size_t)(src->state - 1) * kv->state_bytes, kv->state_bytes);
    return 0;
}

void kv_ckpt_detach(kv_cache *kv, uint32_t b) {
    if (!kv->n_ckpt || kv->block_ckpt[b] == KV_CKPT_NONE) return;
    const uint32_t c = kv->block_ckpt[b];
    block_lru_remove(&kv->ckpt_lru, c);
    kv->ckpt_block[c] = KV_CKPT_NONE;
    kv->block_ckpt[b] = KV_CKPT_NONE;
    kv->ckpt_free[kv->n_ckpt_free++] = c;
}

uint32_t kv_ckpt_attach(kv_cache *kv, const kv_seq *seq, uint32_t n_tokens) {
    if (!kv->n_ckpt || n_tokens % kv->ckpt_every || !n_tokens) return KV_CKPT_NONE;
    const uint32_t i = n_tokens / kv->block_tokens - 1;
    if (i >= seq->n_blocks) return KV_CKPT_NONE;
    const uint32_t b = seq->blocks[i];
    uint32_t c = kv->block_ckpt[b];
    if (c != KV_CKPT_NONE) { /* the same positions again (a recompute): the same bits */
        block_lru_remove(&kv->ckpt_lru, c);
    } else {
        if (!kv->n_ckpt_free) kv_ckpt_detach(kv, kv->ckpt_block[kv->ckpt_lru.head]);
        c = kv->ckpt_free[--kv->n_ckpt_free];
        kv->ckpt_block[c] = b;
        kv->block_ckpt[b] = c;
    }
    block_lru_push(&kv->ckpt_lru, c);
    return c;
}

uint32_t kv_ckpt_restore(kv_cache *kv, kv_seq *seq, uint32_t k) {
    if (!kv->n_ckpt) return 0;
    while (k > 0 && kv->block_ckpt[seq->blocks[k - 1]] == KV_CKPT_NONE)
        k--;
    if (k == 0 || kv_state_take(kv, seq)) return 0;
    const uint32_t c = kv->block_ckpt[seq->blocks[k - 1]];
    if (kv->states && kv->ckpts)
        memcpy(kv->states + (size_t)(seq->state - 1) * kv->state_bytes,
               kv->ckpts + (size_t)c * kv->state_bytes, kv->state_bytes);
    block_lru_remove(&kv->ckpt_lru, c); /* used: the most recent now */
    block_lru_push(&kv->ckpt_lru, c);
    return k;
}
