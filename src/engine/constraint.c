/* Constrained decoding (constraint.h): the vocabulary trie, the interned
 * stack-set recognizer, and the per-state token mask.
 *
 * Sections: small hash map, vocabulary trie, stacks and states (interning,
 * expansion, advance by a code point), masks (the trie walk and its cache),
 * the sequence API.
 *
 * Not here: parsing GBNF (grammar.c), anything shared between sequences
 * but the read-only trie. */
#include "engine/constraint.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"

/* ---------------------------------------------------------------------------
 * u64 -> u32 open-addressing map (keys stored + 1 so that 0 marks a free
 * slot; no deletion: the recognizer's caches only grow until reset)
 * ------------------------------------------------------------------------- */

typedef struct u64map {
    uint64_t *keys; /* key + 1; 0 = free */
    uint32_t *vals;
    size_t cap, n; /* cap a power of two; n <= cap / 2 */
} u64map;

static size_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return (size_t)x;
}

static void u64map_free(u64map *m) {
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

static void u64map_clear(u64map *m) {
    if (m->keys) memset(m->keys, 0, m->cap * sizeof *m->keys);
    m->n = 0;
}

static bool u64map_get(const u64map *m, uint64_t key, uint32_t *val) {
    if (!m->cap) return false;
    for (size_t j = mix64(key) & (m->cap - 1);; j = (j + 1) & (m->cap - 1)) {
        if (!m->keys[j]) return false;
        if (m->keys[j] == key + 1) {
            *val = m->vals[j];
            return true;
        }
    }
}

/* Inserts or overwrites; false when out of memory. */
static bool u64map_put(u64map *m, uint64_t key, uint32_t val) {
    if ((m->n + 1) * 2 > m->cap) {
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
            size_t j = mix64(m->keys[i] - 1) & (cap - 1);
            while (k[j])
                j = (j + 1) & (cap - 1);
            k[j] = m->keys[i];
            v[j] = m->vals[i];
        }
        free(m->keys);
        free(m->vals);
        m->keys = k, m->vals = v, m->cap = cap;
    }
    size_t j = mix64(key) & (m->cap - 1);
    while (m->keys[j] && m->keys[j] != key + 1)
        j = (j + 1) & (m->cap - 1);
    if (!m->keys[j]) m->n++;
    m->keys[j] = key + 1;
    m->vals[j] = val;
    return true;
}

/* ---------------------------------------------------------------------------
 * Vocabulary trie
 * ------------------------------------------------------------------------- */

/* One trie node in preorder: the byte on the edge into it, its depth (the
 * root, depth 0, is implicit), the index just past its subtree, and the
 * tokens whose bytes end exactly here (ids[tok_begin .. + tok_n)). */
typedef struct trie_node {
    uint32_t end;
    uint32_t tok_begin;
    uint16_t tok_n;
    uint16_t depth;
    uint8_t byte;
} trie_node;

struct vocab_trie {
    uint32_t n_vocab;
    uint32_t n_nodes;
    uint32_t max_depth;
    trie_node *nodes; /* (n_nodes,) preorder */
    int32_t *ids;     /* token ids with bytes, sorted by their bytes */
    uint32_t n_ids;
    uint32_t *tok_off; /* (n_vocab,) each token's bytes in blob */
    uint16_t *tok_len; /* (n_vocab,) 0: no bytes */
    char *blob;
};

#define TRIE_MAX_PIECE 65535u /* longer pieces are left out (none exist in practice) */

static int cmp_piece(const void *pa, const void *pb, void *ctx) {
    const vocab_trie *t = ctx;
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    size_t la = t->tok_len[a], lb = t->tok_len[b];
    int c = memcmp(t->blob + t->tok_off[a], t->blob + t->tok_off[b], la < lb ? la : lb);
    if (c) return c;
    if (la != lb) return la < lb ? -1 : 1;
    return a < b ? -1 : a > b;
}

void vocab_trie_free(vocab_trie *t) {
    if (!t) return;
    free(t->nodes);
    free(t->ids);
    free(t->tok_off);
    free(t->tok_len);
    free(t->blob);
    free(t);
}

uint32_t vocab_trie_nodes(const vocab_trie *t) {
    return t->n_nodes;
}

/* Builds the preorder nodes from the sorted ids: each token opens the nodes
 * past its common prefix with the previous one and closes those deeper. */
static int trie_link(vocab_trie *t, size_t total) {
    t->nodes = malloc((total ? total : 1) * sizeof *t->nodes);
    uint32_t *path = malloc((t->max_depth + 1) * sizeof *path);
    if (!t->nodes || !path) {
        free(path);
        return TPS_ENOMEM;
    }
    uint32_t depth = 0, n = 0;
    const char *prev = NULL;
    size_t prev_len = 0;
    for (uint32_t k = 0; k < t->n_ids; k++) {
        int32_t id = t->ids[k];
        const char *b = t->blob + t->tok_off[id];
        size_t len = t->tok_len[id], lcp = 0;
        while (prev && lcp < len && lcp < prev_len && b[lcp] == prev[lcp])
            lcp++;
        for (; depth > lcp; depth--)
            t->nodes[path[depth]].end = n;
        for (; depth < len; depth++) {
            t->nodes[n] = (trie_node){.byte = (uint8_t)b[depth], .depth = (uint16_t)(depth + 1)};
            path[depth + 1] = n++;
        }
        trie_node *nd = &t->nodes[path[len]];
        if (!nd->tok_n) nd->tok_begin = k;
        nd->tok_n++;
        prev = b, prev_len = len;
    }
    for (; depth > 0; depth--)
        t->nodes[path[depth]].end = n;
    t->n_nodes = n;
    free(path);
    return 0;
}

int vocab_trie_build(vocab_trie **out, const tokenizer *tok, uint32_t n_vocab, tps_err *err) {
    *out = NULL;
    vocab_trie *t = calloc(1, sizeof *t);
    if (!t) return tps_fail(err, TPS_ENOMEM, "constraint: out of memory");
    t->n_vocab = n_vocab;
    t->tok_off = calloc(n_vocab ? n_vocab : 1, sizeof *t->tok_off);
    t->tok_len = calloc(n_vocab ? n_vocab : 1, sizeof *t->tok_len);
    t->ids = malloc((n_vocab ? n_vocab : 1) * sizeof *t->ids);
    size_t total = 0;
    uint32_t tv = tokenizer_n_vocab(tok);
    for (uint32_t i = 0; i < n_vocab && i < tv; i++) {
        size_t len = 0;
        tokenizer_piece(tok, (int32_t)i, false, &len);
        if (len <= TRIE_MAX_PIECE) total += len;
    }
    t->blob = malloc(total ? total : 1);
    if (!t->tok_off || !t->tok_len || !t->ids || !t->blob) {
        vocab_trie_free(t);
        return tps_fail(err, TPS_ENOMEM, "constraint: out of memory for the vocabulary trie");
    }
    size_t off = 0;
    for (uint32_t i = 0; i < n_vocab && i < tv; i++) {
        size_t len = 0;
        const char *p = tokenizer_piece(tok, (int32_t)i, false, &len);
        if (!p || !len || len > TRIE_MAX_PIECE) continue;
        memcpy(t->blob + off, p, len);
        t->tok_off[i] = (uint32_t)off;
        t->tok_len[i] = (uint16_t)len;
        off += len;
        t->ids[t->n_ids++] = (int32_t)i;
        if (len > t->max_depth) t->max_depth = (uint32_t)len;
    }
    qsort_r(t->ids, t->n_ids, sizeof *t->ids, cmp_piece, t);
    if (trie_link(t, total)) {
        vocab_trie_free(t);
        return tps_fail(err, TPS_ENOMEM, "constraint: out of memory for the vocabulary trie");
    }
    *out = t;
    return 0;
}

/* ---------------------------------------------------------------------------
 * Stacks and states
 *
 * A stack is a node (parent stack, grammar position): its top position is
 * pos, the rest is parent. Node 0 is the empty stack (the grammar is
 * done). Nodes are interned by (parent, pos), so a stack has one id and
 * stacks share their lower parts. A state is a sorted set of stack ids,
 * interned too; state 0 is the dead state (no stack).
 * ------------------------------------------------------------------------- */

#define MAX_EXPAND_DEPTH 4096       /* nested rule references expanded without input */
#define RESET_NODES      (1u << 20) /* caches beyond these are dropped between tokens */
#define RESET_STATES     (1u << 18)
#define RESET_TRANS      (1u << 20)
#define TRANS_FRONT      4096 /* entries of the transition front cache (a power of two) */

struct constraint {
    const grammar *g; /* owned */
    const vocab_trie *vt;
    int32_t end_ids[CONSTRAINT_MAX_END_IDS];
    size_t n_end;
    uint32_t *alt_start; /* rule r's alternatives: alt_start[alt_idx[r] .. alt_idx[r+1]) */
    uint32_t *alt_idx;

    /* stack nodes */
    uint32_t *sn_parent, *sn_pos;
    uint32_t n_nodes, cap_nodes;
    u64map node_map; /* parent << 32 | pos -> node */

    /* states: st_data[st_off[s] .. + st_len[s]) */
    uint32_t *st_data;
    size_t n_data, cap_data;
    uint32_t *st_off, *st_len;
    uint64_t *st_hash;
    uint8_t *st_mask; /* mask slot + 1; 0: not cached */
    uint32_t n_states, cap_states;
    u64map state_map;  /* content hash -> first state with it; collisions chain below */
    uint32_t *st_next; /* next state with the same hash + 1 */

    u64map trans; /* state << 21 | code point -> next state */
    /* a small direct-mapped front of trans: a trie walk asks the same few
     * (state, byte) pairs over and over (inside a JSON string every node's
     * parent is the same state), and the big table's probes miss the cache */
    uint64_t front_key[TRANS_FRONT]; /* key + 1; 0: empty */
    uint32_t front_val[TRANS_FRONT];

    /* expansion scratch */
    uint32_t *scratch;
    size_t n_scratch, cap_scratch;
    bool overflow; /* too many stacks or too deep: the state is refused */

    /* the current position */
    uint32_t state;
    uint32_t acc, need, clen; /* a UTF-8 character in progress: bits, bytes missing, length */

    /* masks */
    size_t mask_bytes;
    uint8_t *masks; /* (CONSTRAINT_MASK_CACHE + 1, mask_bytes): the last is scratch */
    uint32_t slot_state[CONSTRAINT_MASK_CACHE];
    size_t slot_count[CONSTRAINT_MASK_CACHE];
    uint32_t next_slot;
    /* trie walk levels (max_depth + 1) */
    uint32_t *lv_state, *lv_acc;
    uint8_t *lv_need, *lv_len;
};

static size_t elem_width(const grammar_elem *e) {
    return (e->op == GRAMMAR_SET || e->op == GRAMMAR_SET_NOT) ? 1 + (size_t)e->lo : 1;
}

static bool grow(void *arrp, size_t *cap, size_t need, size_t elem) {
    return tps_grow(arrp, cap, need, elem, 256) == 0;
}

static uint32_t node_intern(constraint *c, uint32_t parent, uint32_t pos) {
    uint64_t key = (uint64_t)parent << 32 | pos;
    uint32_t id;
    if (u64map_get(&c->node_map, key, &id)) return id;
    if (c->n_nodes == c->cap_nodes) {
        size_t cap = c->cap_nodes, cap2 = c->cap_nodes;
        if (!grow(&c->sn_parent, &cap, c->n_nodes + 1, sizeof *c->sn_parent) ||
            !grow(&c->sn_pos, &cap2, c->n_nodes + 1, sizeof *c->sn_pos)) {
            c->overflow = true;
            return 0;
        }
        c->cap_nodes = (uint32_t)(cap < cap2 ? cap : cap2);
    }
    id = c->n_nodes++;
    c->sn_parent[id] = parent;
    c->sn_pos[id] = pos;
    if (!u64map_put(&c->node_map, key, id)) c->overflow = true;
    return id;
}

static void emit(constraint *c, uint32_t stack) {
    if (c->n_scratch >= 4 * CONSTRAINT_MAX_STACKS) {
        c->overflow = true;
        return;
    }
    if (!grow(&c->scratch, &c->cap_scratch, c->n_scratch + 1, sizeof *c->scratch)) {
        c->overflow = true;
        return;
    }
    c->scratch[c->n_scratch++] = stack;
}

/* Emits every stack with a terminal (or nothing) on top that the stack
 * (below, pos) reaches without reading input: a finished rule pops to the
 * position below it; a reference pushes its continuation (unless the rule
 * ends right after it: a tail call) and expands each alternative. */
static void expand(constraint *c, uint32_t below, uint32_t pos, int depth) {
    const grammar *g = c->g;
    for (;;) {
        if (depth > MAX_EXPAND_DEPTH || c->overflow) {
            c->overflow = true;
            return;
        }
        const grammar_elem *e = &g->elems[pos];
        if (e->op == GRAMMAR_END || e->op == GRAMMAR_ALT) {
            if (below == 0) {
                emit(c, 0);
                return;
            }
            pos = c->sn_pos[below];
            below = c->sn_parent[below];
            continue;
        }
        if (e->op == GRAMMAR_REF) {
            uint32_t cont = pos + 1, op = g->elems[cont].op;
            uint32_t nb =
                (op == GRAMMAR_END || op == GRAMMAR_ALT) ? below : node_intern(c, below, cont);
            for (uint32_t a = c->alt_idx[e->lo]; a < c->alt_idx[e->lo + 1]; a++)
                expand(c, nb, c->alt_start[a], depth + 1);
            return;
        }
        emit(c, node_intern(c, below, pos));
        return;
    }
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The state whose stacks are the scratch (sorted and deduplicated here);
 * 0 (dead) when there are none or on overflow. */
static uint32_t state_intern(constraint *c) {
    if (c->overflow || !c->n_scratch) return 0;
    qsort(c->scratch, c->n_scratch, sizeof *c->scratch, cmp_u32);
    size_t n = 0;
    for (size_t i = 0; i < c->n_scratch; i++)
        if (!n || c->scratch[i] != c->scratch[n - 1]) c->scratch[n++] = c->scratch[i];
    if (n > CONSTRAINT_MAX_STACKS) {
        c->overflow = true;
        return 0;
    }
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    for (size_t i = 0; i < n; i++)
        h = (h ^ c->scratch[i]) * 0x100000001B3ull;
    uint32_t s;
    if (u64map_get(&c->state_map, h, &s))
        for (; s; s = c->st_next[s] ? c->st_next[s] - 1 : 0)
            if (c->st_len[s] == n && !memcmp(c->st_data + c->st_off[s], c->scratch, n * 4))
                return s;
    if (c->n_states == c->cap_states) {
        size_t caps[5] = {c->cap_states, c->cap_states, c->cap_states, c->cap_states,
                          c->cap_states};
        size_t need = c->n_states + 1;
        if (!grow(&c->st_off, &caps[0], need, sizeof *c->st_off) ||
            !grow(&c->st_len, &caps[1], need, sizeof *c->st_len) ||
            !grow(&c->st_hash, &caps[2], need, sizeof *c->st_hash) ||
            !grow(&c->st_next, &caps[3], need, sizeof *c->st_next) ||
            !grow(&c->st_mask, &caps[4], need, sizeof *c->st_mask)) {
            c->overflow = true;
            return 0;
        }
        size_t m = caps[0];
        for (int i = 1; i < 5; i++)
            if (caps[i] < m) m = caps[i];
        c->cap_states = (uint32_t)m;
    }
    if (!grow(&c->st_data, &c->cap_data, c->n_data + n, sizeof *c->st_data)) {
        c->overflow = true;
        return 0;
    }
    s = c->n_states++;
    c->st_off[s] = (uint32_t)c->n_data;
    c->st_len[s] = (uint32_t)n;
    c->st_hash[s] = h;
    c->st_mask[s] = 0;
    memcpy(c->st_data + c->n_data, c->scratch, n * 4);
    c->n_data += n;
    uint32_t first;
    c->st_next[s] = u64map_get(&c->state_map, h, &first) ? first + 1 : 0;
    if (!u64map_put(&c->state_map, h, s)) c->overflow = true;
    return s;
}

/* The state after reading code point cp in state s (memoised); 0 when no
 * stack can read it. */
static uint32_t advance(constraint *c, uint32_t s, uint32_t cp) {
    if (s == 0) return 0;
    uint64_t key = (uint64_t)s << 21 | cp;
    size_t slot = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 52) & (TRANS_FRONT - 1);
    if (c->front_key[slot] == key + 1) return c->front_val[slot];
    uint32_t next;
    if (u64map_get(&c->trans, key, &next)) {
        c->front_key[slot] = key + 1, c->front_val[slot] = next;
        return next;
    }
    c->n_scratch = 0;
    c->overflow = false;
    const uint32_t *st = c->st_data + c->st_off[s];
    for (uint32_t i = 0; i < c->st_len[s]; i++) {
        uint32_t k = st[i];
        if (k == 0) continue;
        uint32_t pos = c->sn_pos[k];
        if (grammar_char_matches(c->g, pos, cp))
            expand(c, c->sn_parent[k], pos + (uint32_t)elem_width(&c->g->elems[pos]), 0);
    }
    next = state_intern(c);
    c->overflow = false;
    u64map_put(&c->trans, key, next);
    c->front_key[slot] = key + 1, c->front_val[slot] = next;
    return next;
}

/* Whether some stack of s can read a code point in [lo, hi] (a UTF-8
 * character of which only the first bytes are known). A negated set counts
 * as able unless one of its ranges covers [lo, hi] whole. */
static bool partial_ok(const constraint *c, uint32_t s, uint32_t lo, uint32_t hi) {
    const uint32_t *st = c->st_data + c->st_off[s];
    for (uint32_t i = 0; i < c->st_len[s]; i++) {
        if (st[i] == 0) continue;
        const grammar_elem *e = &c->g->elems[c->sn_pos[st[i]]];
        switch (e->op) {
        case GRAMMAR_ANY:
            return true;
        case GRAMMAR_CHAR:
            if (e->lo >= lo && e->lo <= hi) return true;
            break;
        case GRAMMAR_SET:
            for (uint32_t k = 1; k <= e->lo; k++)
                if (e[k].lo <= hi && e[k].hi >= lo) return true;
            break;
        case GRAMMAR_SET_NOT: {
            bool covered = false;
            for (uint32_t k = 1; k <= e->lo && !covered; k++)
                covered = e[k].lo <= lo && e[k].hi >= hi;
            if (!covered) return true;
            break;
        }
        default:
            break;
        }
    }
    return false;
}

static bool state_accepting(const constraint *c, uint32_t s) {
    return s && c->st_len[s] && c->st_data[c->st_off[s]] == 0; /* sorted: 0 first */
}

/* ---------------------------------------------------------------------------
 * UTF-8 steps shared by the trie walk and accept
 * ------------------------------------------------------------------------- */

typedef struct u8pos {
    uint32_t state, acc;
    uint8_t need, len;
} u8pos;

/* One byte from p; false when it cannot follow (the grammar or UTF-8). */
static bool step_byte(constraint *c, u8pos *p, uint8_t b) {
    if (p->need == 0) {
        if (b < 0x80) {
            p->state = advance(c, p->state, b);
            return p->state != 0;
        }
        if (b < 0xC2 || b > 0xF4) return false;
        p->len = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
        p->need = p->len - 1;
        p->acc = b & (0x7Fu >> p->len);
    } else {
        if ((b & 0xC0) != 0x80) return false;
        p->acc = p->acc << 6 | (b & 0x3F);
        if (--p->need == 0) {
            static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
            uint32_t cp = p->acc;
            if (cp < min[p->len] || cp > GRAMMAR_MAX_CP || (cp >= 0xD800 && cp <= 0xDFFF))
                return false;
            p->state = advance(c, p->state, cp);
            return p->state != 0;
        }
    }
    /* the code points this character can still become (never overlong) */
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    uint32_t shift = 6u * p->need;
    uint32_t lo = p->acc << shift, hi = lo | ((1u << shift) - 1);
    if (lo < min_cp[p->len]) lo = min_cp[p->len];
    if (hi > GRAMMAR_MAX_CP) hi = GRAMMAR_MAX_CP;
    return lo <= hi && partial_ok(c, p->state, lo, hi);
}

/* ---------------------------------------------------------------------------
 * Masks
 * ------------------------------------------------------------------------- */

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
        if (!step_byte(c, &p, nd->byte)) {
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
    bool whole = start.need == 0 && state_accepting(c, start.state);
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

/* ---------------------------------------------------------------------------
 * Sequence API
 * ------------------------------------------------------------------------- */

static bool is_end_id(const constraint *c, int32_t tok) {
    for (size_t k = 0; k < c->n_end; k++)
        if (c->end_ids[k] == tok) return true;
    return false;
}

/* Drops every cache and re-interns the current state alone: the caches
 * then stay bounded over a long generation. Same results either way. */
static void caches_reset(constraint *c) {
    uint32_t n = c->st_len[c->state];
    uint32_t *stacks = NULL, *lens = NULL;
    size_t total = 0;
    const uint32_t *st = c->st_data + c->st_off[c->state];
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t k = st[i]; k; k = c->sn_parent[k])
            total++;
    stacks = malloc((total ? total : 1) * sizeof *stacks);
    lens = malloc((n ? n : 1) * sizeof *lens);
    if (!stacks || !lens) {
        free(stacks);
        free(lens);
        return; /* keep the big caches: correct, only larger */
    }
    size_t o = 0;
    for (uint32_t i = 0; i < n; i++) { /* each stack bottom first */
        size_t begin = o;
        for (uint32_t k = st[i]; k; k = c->sn_parent[k])
            stacks[o++] = c->sn_pos[k];
        lens[i] = (uint32_t)(o - begin);
        for (size_t a = begin, b = o; a + 1 < b; a++, b--) {
            uint32_t x = stacks[a];
            stacks[a] = stacks[b - 1];
            stacks[b - 1] = x;
        }
    }
    u64map_clear(&c->node_map);
    u64map_clear(&c->state_map);
    u64map_clear(&c->trans);
    memset(c->front_key, 0, sizeof c->front_key);
    c->n_nodes = 1; /* node 0: the empty stack */
    c->n_states = 1;
    c->n_data = 0;
    c->next_slot = 0;
    for (size_t i = 0; i < CONSTRAINT_MASK_CACHE; i++)
        c->slot_state[i] = 0;
    c->n_scratch = 0;
    o = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t k = 0;
        for (uint32_t j = 0; j < lens[i]; j++)
            k = node_intern(c, k, stacks[o++]);
        emit(c, k);
    }
    c->state = state_intern(c);
    c->overflow = false;
    free(stacks);
    free(lens);
}

int constraint_accept(constraint *c, int32_t tok) {
    if (is_end_id(c, tok)) return 0;
    if (tok < 0 || (uint32_t)tok >= c->vt->n_vocab || !c->vt->tok_len[tok]) return TPS_EINVAL;
    u8pos p = {c->state, c->acc, (uint8_t)c->need, (uint8_t)c->clen};
    const uint8_t *b = (const uint8_t *)c->vt->blob + c->vt->tok_off[tok];
    for (size_t i = 0; i < c->vt->tok_len[tok]; i++)
        if (!step_byte(c, &p, b[i])) return TPS_EINVAL;
    c->state = p.state, c->acc = p.acc, c->need = p.need, c->clen = p.len;
    if (c->n_nodes > RESET_NODES || c->n_states > RESET_STATES || c->trans.n > RESET_TRANS)
        caches_reset(c);
    return 0;
}

bool constraint_complete(const constraint *c) {
    return c->need == 0 && state_accepting(c, c->state);
}

bool constraint_finished(const constraint *c) {
    return constraint_complete(c) && c->st_len[c->state] == 1;
}

size_t constraint_cache_bytes(const constraint *c) {
    return (size_t)c->cap_nodes * 8 + c->node_map.cap * 12 + c->cap_data * 4 +
           (size_t)c->cap_states * 25 + c->state_map.cap * 12 + c->trans.cap * 12 +
           (CONSTRAINT_MASK_CACHE + 1) * c->mask_bytes;
}

void constraint_free(constraint *c) {
    if (!c) return;
    grammar_free((grammar *)c->g);
    free(c->alt_start);
    free(c->alt_idx);
    free(c->sn_parent);
    free(c->sn_pos);
    u64map_free(&c->node_map);
    free(c->st_data);
    free(c->st_off);
    free(c->st_len);
    free(c->st_hash);
    free(c->st_mask);
    free(c->st_next);
    u64map_free(&c->state_map);
    u64map_free(&c->trans);
    free(c->scratch);
    free(c->masks);
    free(c->lv_state);
    free(c->lv_acc);
    free(c->lv_need);
    free(c->lv_len);
    free(c);
}

/* Each rule's alternative starts, for expand. */
static int index_alternatives(constraint *c) {
    const grammar *g = c->g;
    size_t n_alts = 0;
    for (uint32_t r = 0; r < g->n_rules; r++)
        for (size_t i = g->rule_start[r];; i += elem_width(&g->elems[i])) {
            if (g->elems[i].op == GRAMMAR_ALT || g->elems[i].op == GRAMMAR_END) n_alts++;
            if (g->elems[i].op == GRAMMAR_END) break;
        }
    c->alt_start = malloc(n_alts * sizeof *c->alt_start);
    c->alt_idx = malloc((g->n_rules + 1) * sizeof *c->alt_idx);
    if (!c->alt_start || !c->alt_idx) return TPS_ENOMEM;
    uint32_t k = 0;
    for (uint32_t r = 0; r < g->n_rules; r++) {
        c->alt_idx[r] = k;
        c->alt_start[k++] = g->rule_start[r];
        for (size_t i = g->rule_start[r]; g->elems[i].op != GRAMMAR_END;
             i += elem_width(&g->elems[i]))
            if (g->elems[i].op == GRAMMAR_ALT) c->alt_start[k++] = (uint32_t)i + 1;
    }
    c->alt_idx[g->n_rules] = k;
    return 0;
}

int constraint_create(constraint **out, const char *gbnf, size_t len, const vocab_trie *vt,
                      const int32_t *end_ids, size_t n_end, tps_err *err) {
    *out = NULL;
    if (n_end > CONSTRAINT_MAX_END_IDS)
        return tps_fail(err, TPS_EINVAL, "constraint: %zu end ids; at most %d", n_end,
                        CONSTRAINT_MAX_END_IDS);
    grammar *g = NULL;
    int rc = grammar_parse(&g, gbnf, len, err);
    if (rc) return rc;
    constraint *c = calloc(1, sizeof *c);
    if (!c) {
        grammar_free(g);
        return tps_fail(err, TPS_ENOMEM, "constraint: out of memory");
    }
    c->g = g;
    c->vt = vt;
    for (size_t k = 0; k < n_end; k++)
        if (end_ids[k] >= 0 && (uint32_t)end_ids[k] < vt->n_vocab)
            c->end_ids[c->n_end++] = end_ids[k];
    c->mask_bytes = (vt->n_vocab + 7) / 8;
    c->masks = malloc((CONSTRAINT_MASK_CACHE + 1) * c->mask_bytes);
    size_t lv = vt->max_depth + 1;
    c->lv_state = malloc(lv * sizeof *c->lv_state);
    c->lv_acc = malloc(lv * sizeof *c->lv_acc);
    c->lv_need = malloc(lv);
    c->lv_len = malloc(lv);
    if (!c->masks || !c->lv_state || !c->lv_acc || !c->lv_need || !c->lv_len ||
        index_alternatives(c)) {
        constraint_free(c);
        return tps_fail(err, TPS_ENOMEM, "constraint: out of memory");
    }
    node_intern(c, 0, UINT32_MAX); /* node 0: the empty stack */
    c->n_states = 1;               /* state 0: dead (no stack; never looked up) */
    c->st_off = calloc(256, sizeof *c->st_off);
    c->st_len = calloc(256, sizeof *c->st_len);
    c->st_hash = calloc(256, sizeof *c->st_hash);
    c->st_next = calloc(256, sizeof *c->st_next);
    c->st_mask = calloc(256, 1);
    c->cap_states = 256;
    if (!c->st_off || !c->st_len || !c->st_hash || !c->st_next || !c->st_mask) {
        constraint_free(c);
        return tps_fail(err, TPS_ENOMEM, "constraint: out of memory");
    }
    uint32_t root = g->root;
    for (uint32_t a = c->alt_idx[root]; a < c->alt_idx[root + 1]; a++)
        expand(c, 0, c->alt_start[a], 0);
    bool overflow = c->overflow;
    c->state = state_intern(c);
    if (overflow || c->overflow || c->state == 0) {
        constraint_free(c);
        return tps_fail(err, TPS_EINVAL,
                        "grammar: too ambiguous to decode (more than %d parse stacks at once, or "
                        "rules nested deeper than %d)",
                        CONSTRAINT_MAX_STACKS, MAX_EXPAND_DEPTH);
    }
    *out = c;
    return 0;
}
