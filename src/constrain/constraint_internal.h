/* Private to src/constrain/constraint*.c and vocab_trie.c: the layouts of the
 * vocabulary trie, the compiled grammar and the recognizer, and the
 * functions the files call across. Calls go one way:
 *   constraint_prog.c (compile) -> constraint.c (stacks, states, cursor)
 *   constraint_mask.c (masks)   -> constraint.c
 * vocab_trie.c calls none of them. */
#ifndef TPS_CONSTRAIN_CONSTRAINT_INTERNAL_H
#define TPS_CONSTRAIN_CONSTRAINT_INTERNAL_H

#include <stdatomic.h>

#include "constrain/constraint.h"
#include "constrain/grammar_internal.h"
#include "constrain/u64map.h"

/* ---- the vocabulary trie (vocab_trie.c) --------------------------------- */

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

/* A state carried out of a recognizer's tables (cons_export): the nodes
 * its stacks reach, each a grammar position over a parent given as an
 * earlier node's index (CONS_EMPTY: the empty stack), and each stack as
 * its top node's index (CONS_EMPTY: the empty stack, the grammar may end).
 * Stacks share their lower nodes, so this is as large as the nodes, not
 * as the stacks' total depth. */
#define CONS_EMPTY UINT32_MAX
typedef struct cons_forest {
    uint32_t *parent, *pos; /* (n_nodes,) */
    uint32_t *stacks;       /* (n_stacks,) */
    uint32_t n_nodes, n_stacks;
} cons_forest;

void cons_forest_free(cons_forest *f);
static inline size_t cons_forest_bytes(const cons_forest *f) {
    return ((size_t)f->n_nodes * 2 + f->n_stacks) * sizeof(uint32_t);
}

/* ---- the compiled grammar (constraint_prog.c) --------------------------- */

struct constraint_prog {
    atomic_uint refs;
    grammar *g;          /* owned */
    uint32_t *alt_start; /* rule r's alternatives: alt_start[alt_idx[r] .. alt_idx[r+1]) */
    uint32_t *alt_idx;
    /* the start state (cons_export): its stacks' nodes, parents first */
    cons_forest init;
    size_t bytes;
    _Atomic size_t *account; /* bytes come off it when the prog is freed; NULL: none */
};

/* ---- the recognizer (constraint.c) --------------------------------------
 *
 * A stack is a node (parent stack, grammar position): its top position is
 * pos, the rest is parent. Node 0 is the empty stack (the grammar is
 * done). Nodes are interned by (parent, pos), so a stack has one id and
 * stacks share their lower parts. A state is a sorted set of stack ids,
 * interned too; state 0 is the dead state (no stack). */

#define CONSTRAINT_TRANS_FRONT 4096 /* entries of the transition front cache (a power of two) */

struct constraint {
    constraint_prog *prog; /* one reference held */
    const grammar *g;      /* prog's */
    const uint32_t *alt_start, *alt_idx;
    const vocab_trie *vt; /* NULL while compiling */
    int32_t end_ids[CONSTRAINT_MAX_END_IDS];
    size_t n_end;

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
    uint64_t front_key[CONSTRAINT_TRANS_FRONT]; /* key + 1; 0: empty */
    uint32_t front_val[CONSTRAINT_TRANS_FRONT];

    /* expansion scratch */
    uint32_t *scratch;
    size_t n_scratch, cap_scratch;
    bool overflow; /* too many stacks or too deep: the state is refused */

    /* the compile's budget (constraint_prog.c): checked while expanding */
    uint64_t deadline_ns; /* 0: none */
    size_t max_bytes;     /* constraint_cache_bytes may not pass it; 0: none */
    uint32_t tick;
    bool over_time, over_bytes;

    /* the current position */
    uint32_t state;
    uint32_t acc, need, clen; /* a UTF-8 character in progress: bits, bytes missing, length */

    /* masks (constraint_mask.c) */
    size_t mask_bytes;
    uint8_t *masks; /* (CONSTRAINT_MASK_CACHE + 1, mask_bytes): the last is scratch */
    uint32_t slot_state[CONSTRAINT_MASK_CACHE];
    size_t slot_count[CONSTRAINT_MASK_CACHE];
    uint32_t next_slot;
    /* trie walk levels (max_depth + 1) */
    uint32_t *lv_state, *lv_acc;
    uint8_t *lv_need, *lv_len;
};

/* A position inside the output: a state and a UTF-8 character in progress. */
typedef struct u8pos {
    uint32_t state, acc;
    uint8_t need, len;
} u8pos;

/* The interning tables of c, for c->g (set by the caller) and nothing
 * else: node 0 and the dead state. 0 or TPS_ENOMEM. */
int cons_tables_init(constraint *c);
/* Frees what cons_tables_init and the expansion allocated. */
void cons_tables_free(constraint *c);
/* Expands every alternative of rule r from the empty stack into the
 * scratch, then interns it: the state at the start of r. 0 on overflow. */
uint32_t cons_expand_rule(constraint *c, uint32_t r);
/* State s as a forest (out, owned by the caller: cons_forest_free). 0 or
 * TPS_ENOMEM. */
int cons_export(const constraint *c, uint32_t s, cons_forest *out);
/* The state a forest stands for, interned in c's tables: one intern per
 * node. 0 on overflow or out of memory. */
uint32_t cons_import(constraint *c, const cons_forest *f);
/* One byte from p; false when it cannot follow (the grammar or UTF-8). */
bool cons_step_byte(constraint *c, u8pos *p, uint8_t b);
/* Some stack of s is the empty one: the output so far is whole. */
bool cons_state_accepting(const constraint *c, uint32_t s);

#endif
