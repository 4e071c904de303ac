/* The token mask of constrained decoding (constraint.h): a walk of the
 * vocabulary trie under the recognizer, skipping a rejected prefix and
 * everything below it at once, and the per-state cache of its result.
 *
 * Not here: the recognizer's states (constraint.c), the trie (vocab_trie.c). */
#include "constrain/constraint_internal.h"

#include <math.h>
#include <string.h>

/* Walks the trie from position start, setting the bit of every token whose
 * bytes can follow; returns how many. Subtrees under a byte that cannot
 * follow are skipped whole. */
static size_t walk(constraint *c, u8pos start, uint8_t *mask) {
    const vocab_trie *t = c->vt;
    memset(mask, 0, c->mask_bytes);
    size_t count = 0;
    c->lv_state[0] = start.state, c->lv_acc[0] = start.acc;
    c->lv_need[0] = start.need, c->lv_len[0] = start.len;
    for (uint32_t i = 0; i < t->n_nodes;) {
        const trie_node *nd = &t->nodes[i];
        uint32_t d = nd->depth;
        u8pos p = {c->lv_state[d - 1], c->lv_acc[d - 1], c->lv_need[d - 1], c->lv_len[d - 1]};
        if (!cons_step_byte(c, &p, nd->byte)) {
            i = nd->end;
            continue;
        }
        c->lv_state[d] = p.state, c->lv_acc[d] = p.acc;
        c->lv_need[d] = p.need, c->lv_len[d] = p.len;
        for (uint32_t k = 0; k < nd->tok_n; k++) {
            int32_t id = t->ids[nd->tok_begin + k];
            mask[id >> 3] |= (uint8_t)(1u << (id & 7));
            count++;
        }
        i++;
    }
    /* end ids: only where the output is whole */
    bool whole = start.need == 0 && cons_state_accepting(c, start.state);
    for (size_t k = 0; k < c->n_end; k++) {
        int32_t id = c->end_ids[k];
        bool on = mask[id >> 3] >> (id & 7) & 1;
        if (on && !whole) mask[id >> 3] &= (uint8_t) ~(1u << (id & 7)), count--;
        if (!on && whole) mask[id >> 3] |= (uint8_t)(1u << (id & 7)), count++;
    }
    return count;
}

const uint8_t *constraint_mask(constraint *c, size_t *n_allowed) {
    u8pos here = {c->state, c->acc, (uint8_t)c->need, (uint8_t)c->clen};
    uint8_t *scratch = c->masks + CONSTRAINT_MASK_CACHE * c->mask_bytes;
    if (c->need) { /* inside a character: rare, not cached */
        *n_allowed = walk(c, here, scratch);
        return scratch;
    }
    uint32_t slot = c->st_mask[c->state];
    if (slot) {
        *n_allowed = c->slot_count[slot - 1];
        return c->masks + (slot - 1) * c->mask_bytes;
    }
    slot = c->next_slot;
    c->next_slot = (c->next_slot + 1) % CONSTRAINT_MASK_CACHE;
    uint32_t old = c->slot_state[slot];
    if (old < c->n_states && c->st_mask[old] == slot + 1) c->st_mask[old] = 0;
    uint8_t *m = c->masks + slot * c->mask_bytes;
    size_t n = walk(c, here, m);
    c->slot_state[slot] = c->state;
    c->slot_count[slot] = n;
    c->st_mask[c->state] = (uint8_t)(slot + 1);
    *n_allowed = n;
    return m;
}

size_t constraint_apply(constraint *c, float *logits) {
    size_t n = 0;
    const uint8_t *m = constraint_mask(c, &n);
    const uint32_t nv = c->vt->n_vocab;
    for (uint32_t i = 0; i < nv; i += 8) {
        uint8_t bits = m[i >> 3];
        if (bits == 0xFF) continue;
        uint32_t end = i + 8 < nv ? i + 8 : nv;
        for (uint32_t k = i; k < end; k++)
            if (!(bits >> (k - i) & 1)) logits[k] = -INFINITY;
    }
    return n;
}
