/* The state pool of a hybrid model's recurrent layers (kv_cache.h): one
 * fixed-size slot per running sequence, handed out and taken back with the
 * sequence's KV blocks. What a state holds and how a step updates it is the
 * forward pass's (linear_attn.c); here only slots. */
#include <stdlib.h>
#include <string.h>

#include "base/huge_map.h"
#include "engine/kv_cache.h"

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
    if (p->accounting_only || !p->state_bytes) return 0;
    /* anonymous and faulted in as slots are first used: the pool's address
     * space is max_seqs slots, its memory the slots that ever ran */
    kv->states_map_bytes = (size_t)n * p->state_bytes;
    kv->states = huge_map(kv->states_map_bytes);
    return kv->states ? 0 : TPS_ENOMEM;
}

void kv_state_free(kv_cache *kv) {
    huge_unmap(kv->states, kv->states_map_bytes);
    free(kv->state_free);
    kv->states = NULL;
    kv->state_free = NULL;
}

int kv_state_take(kv_cache *kv, kv_seq *seq) {
    if (!kv->n_recurrent || seq->state) return 0;
    if (!kv->n_state_free) return TPS_EFULL;
    const uint32_t slot = kv->state_free[--kv->n_state_free];
    seq->state = slot + 1;
    if (kv->states) memset(kv->states + (size_t)slot * kv->state_bytes, 0, kv->state_bytes);
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
