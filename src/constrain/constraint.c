/* The recognizer of constrained decoding (constraint.h): interned parse
 * stacks and states, their expansion and advance by a code point, the
 * UTF-8 steps, and one sequence's cursor over a compiled grammar (create,
 * accept, complete, the bound on its caches).
 *
 * Sections: stacks and states (interning, expansion, advance), UTF-8
 * steps, export and import of a state, the sequence API.
 *
 * Not here: compiling a grammar (constraint_prog.c), masks and the trie
 * walk (constraint_mask.c), the trie (vocab_trie.c). */
#include "constrain/constraint_internal.h"

#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/free_all.h"
#include "base/grow.h"

#define MAX_EXPAND_DEPTH 4096       /* nested rule references expanded without input */
#define RESET_NODES      (1u << 20) /* caches beyond these are dropped between tokens */
#define RESET_STATES     (1u << 18)
#define RESET_TRANS      (1u << 20)
#define BUDGET_TICKS     4096 /* expansion steps between two checks of the compile's budget */

/* ---------------------------------------------------------------------------
 * Compiled grammars: references (the compile itself is constraint_prog.c)
 * ------------------------------------------------------------------------- */

constraint_prog *constraint_prog_ref(constraint_prog *p) {
    atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
    return p;
}

void constraint_prog_unref(constraint_prog *p) {
    if (!p || atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1) return;
    if (p->account) atomic_fetch_sub(p->account, p->bytes);
    grammar_free(p->g);
    free(p->alt_start);
    free(p->alt_idx);
    cons_forest_free(&p->init);
    free(p);
}

bool constraint_prog_shared(const constraint_prog *p) {
    return atomic_load_explicit(&((constraint_prog *)p)->refs, memory_order_acquire) > 1;
}

size_t constraint_prog_bytes(const constraint_prog *p) {
    return p->bytes;
}

void constraint_prog_set_account(constraint_prog *p, _Atomic size_t *account) {
    p->account = account;
    if (account) atomic_fetch_add(account, p->bytes);
}

/* ---------------------------------------------------------------------------
 * Stacks and states
 * ------------------------------------------------------------------------- */

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

/* The compile's budget, every BUDGET_TICKS expansion steps: time, and the
 * caches' size. Over either, the expansion stops (as an overflow). */
static void check_budget(constraint *c) {
    if (++c->tick % BUDGET_TICKS) return;
    if (c->deadline_ns && tps_now_ns() > c->deadline_ns) c->over_time = c->overflow = true;
    if (c->max_bytes && constraint_cache_bytes(c) > c->max_bytes)
        c->over_bytes = c->overflow = true;
}

/* Emits every stack with a terminal (or nothing) on top that the stack
 * (below, pos) reaches without reading input: a finished rule pops to the
 * position below it; a reference pushes its continuation (unless the rule
 * ends right after it: a tail call) and expands each alternative. */
static void expand(constraint *c, uint32_t below, uint32_t pos, int depth) {
    const grammar *g = c->g;
    for (;;) {
        if (c->deadline_ns || c->max_bytes) check_budget(c);
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

/* Room for one more state; false when out of memory. */
static bool states_grow(constraint *c) {
    if (c->n_states < c->cap_states) return true;
    size_t caps[5] = {c->cap_states, c->cap_states, c->cap_states, c->cap_states, c->cap_states};
    size_t need = c->n_states + 1;
    if (!grow(&c->st_off, &caps[0], need, sizeof *c->st_off) ||
        !grow(&c->st_len, &caps[1], need, sizeof *c->st_len) ||
        !grow(&c->st_hash, &caps[2], need, sizeof *c->st_hash) ||
        !grow(&c->st_next, &caps[3], need, sizeof *c->st_next) ||
        !grow(&c->st_mask, &caps[4], need, sizeof *c->st_mask))
        return false;
    size_t m = caps[0];
    for (int i = 1; i < 5; i++)
        if (caps[i] < m) m = caps[i];
    c->cap_states = (uint32_t)m;
    return true;
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
    if (!states_grow(c) || !grow(&c->st_data, &c->cap_data, c->n_data + n, sizeof *c->st_data)) {
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

uint32_t cons_expand_rule(constraint *c, uint32_t r) {
    c->n_scratch = 0;
    for (uint32_t a = c->alt_idx[r]; a < c->alt_idx[r + 1]; a++)
        expand(c, 0, c->alt_start[a], 0);
    return state_intern(c);
}

/* The state after reading code point cp in state s (memoised); 0 when no
 * stack can read it. */
static uint32_t advance(constraint *c, uint32_t s, uint32_t cp) {
    if (s == 0) return 0;
    uint64_t key = (uint64_t)s << 21 | cp;
    size_t slot = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 52) & (CONSTRAINT_TRANS_FRONT - 1);
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
            expand(c, c->sn_parent[k], pos + (uint32_t)grammar_elem_width(&c->g->elems[pos]), 0);
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

bool cons_state_accepting(const constraint *c, uint32_t s) {
    return s && c->st_len[s] && c->st_data[c->st_off[s]] == 0; /* sorted: 0 first */
}

/* ---------------------------------------------------------------------------
 * UTF-8 steps shared by the trie walk and accept
 * ------------------------------------------------------------------------- */

bool cons_step_byte(constraint *c, u8pos *p, uint8_t b) {
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
 * Tables, and a state carried across them (export, import)
 * ------------------------------------------------------------------------- */

int cons_tables_init(constraint *c) {
    node_intern(c, 0, UINT32_MAX); /* node 0: the empty stack */
    c->n_states = 1;               /* state 0: dead (no stack; never looked up) */
    if (c->overflow || !states_grow(c)) return TPS_ENOMEM;
    return 0;
}

void cons_tables_free(constraint *c) {
    u64map_free(&c->node_map);
    u64map_free(&c->state_map);
    u64map_free(&c->trans);
    TPS_FREE_ALL(c->sn_parent, c->sn_pos, c->st_data, c->st_off, c->st_len, c->st_hash, c->st_mask,
                 c->st_next, c->scratch);
}

void cons_forest_free(cons_forest *f) {
    free(f->parent);
    free(f->pos);
    free(f->stacks);
    memset(f, 0, sizeof *f);
}

/* Numbers node k and the nodes below it (parents first) in f; idx maps a
 * node to its number + 1 (0: not yet). */
static void forest_add(const constraint *c, uint32_t k, uint32_t *idx, cons_forest *f,
                       uint32_t *path) {
    size_t depth = 0;
    for (uint32_t x = k; x && !idx[x]; x = c->sn_parent[x])
        path[depth++] = x;
    while (depth--) { /* from the lowest new node up */
        uint32_t x = path[depth], p = c->sn_parent[x];
        f->parent[f->n_nodes] = p ? idx[p] - 1 : CONS_EMPTY;
        f->pos[f->n_nodes] = c->sn_pos[x];
        idx[x] = ++f->n_nodes;
    }
}

int cons_export(const constraint *c, uint32_t s, cons_forest *out) {
    memset(out, 0, sizeof *out);
    uint32_t n = c->st_len[s];
    const uint32_t *st = c->st_data + c->st_off[s];
    uint32_t *idx = calloc(c->n_nodes, sizeof *idx);
    uint32_t *path = malloc(c->n_nodes * sizeof *path);
    out->parent = malloc(c->n_nodes * sizeof *out->parent);
    out->pos = malloc(c->n_nodes * sizeof *out->pos);
    out->stacks = malloc((n ? n : 1) * sizeof *out->stacks);
    if (!idx || !path || !out->parent || !out->pos || !out->stacks) {
        free(idx);
        free(path);
        cons_forest_free(out);
        return TPS_ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++) {
        forest_add(c, st[i], idx, out, path);
        out->stacks[i] = st[i] ? idx[st[i]] - 1 : CONS_EMPTY;
    }
    out->n_stacks = n;
    free(idx);
    free(path);
    return 0;
}

uint32_t cons_import(constraint *c, const cons_forest *f) {
    uint32_t *id = malloc((f->n_nodes ? f->n_nodes : 1) * sizeof *id);
    if (!id) return 0;
    for (uint32_t i = 0; i < f->n_nodes; i++)
        id[i] = node_intern(c, f->parent[i] == CONS_EMPTY ? 0 : id[f->parent[i]], f->pos[i]);
    c->n_scratch = 0;
    for (uint32_t i = 0; i < f->n_stacks; i++)
        emit(c, f->stacks[i] == CONS_EMPTY ? 0 : id[f->stacks[i]]);
    free(id);
    uint32_t s = state_intern(c);
    c->overflow = false;
    return s;
}

/* Drops every cache and re-interns the current state alone: the caches
 * then stay bounded over a long generation. Same results either way. */
static void caches_reset(constraint *c) {
    cons_forest f;
    if (cons_export(c, c->state, &f))
        return; /* out of memory: keep the big caches: correct, only larger */
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
    c->state = cons_import(c, &f);
    cons_forest_free(&f);
}

/* ---------------------------------------------------------------------------
 * Sequence API
 * ------------------------------------------------------------------------- */

static bool is_end_id(const constraint *c, int32_t tok) {
    for (size_t k = 0; k < c->n_end; k++)
        if (c->end_ids[k] == tok) return true;
    return false;
}

int constraint_accept(constraint *c, int32_t tok) {
    if (is_end_id(c, tok)) return 0;
    if (tok < 0 || (uint32_t)tok >= c->vt->n_vocab || !c->vt->tok_len[tok]) return TPS_EINVAL;
    u8pos p = {c->state, c->acc, (uint8_t)c->need, (uint8_t)c->clen};
    const uint8_t *b = (const uint8_t *)c->vt->blob + c->vt->tok_off[tok];
    for (size_t i = 0; i < c->vt->tok_len[tok]; i++)
        if (!cons_step_byte(c, &p, b[i])) return TPS_EINVAL;
    c->state = p.state, c->acc = p.acc, c->need = p.need, c->clen = p.len;
    if (c->n_nodes > RESET_NODES || c->n_states > RESET_STATES || c->trans.n > RESET_TRANS ||
        constraint_cache_bytes(c) > CONSTRAINT_CACHE_MAX_BYTES)
        caches_reset(c);
    return 0;
}

bool constraint_complete(const constraint *c) {
    return c->need == 0 && cons_state_accepting(c, c->state);
}

bool constraint_finished(const constraint *c) {
    return constraint_complete(c) && c->st_len[c->state] == 1;
}

size_t constraint_cache_bytes(const constraint *c) {
    return (size_t)c->cap_nodes * 8 + c->node_map.cap * 12 + c->cap_data * 4 +
           (size_t)c->cap_states * 25 + c->state_map.cap * 12 + c->trans.cap * 12 +
           (CONSTRAINT_MASK_CACHE + 1) * c->mask_bytes;
}

size_t constraint_cursor_bytes(uint32_t n_vocab) {
    size_t mask = ((size_t)n_vocab + 7) / 8;
    return sizeof(constraint) + (CONSTRAINT_MASK_CACHE + 1) * mask + 256 * 25 + 256 * 4;
}

void constraint_free(constraint *c) {
    if (!c) return;
    cons_tables_free(c);
    constraint_prog_unref(c->prog);
    TPS_FREE_ALL(c->masks, c->lv_state, c->lv_acc, c->lv_need, c->lv_len, c);
}

int constraint_create_prog(constraint **out, constraint_prog *prog, const vocab_trie *vt,
                           const int32_t *end_ids, size_t n_end, tps_err *err) {
    *out = NULL;
    if (n_end > CONSTRAINT_MAX_END_IDS)
        return tps_fail(err, TPS_EINVAL, "constraint: %zu end ids; at most %d", n_end,
                        CONSTRAINT_MAX_END_IDS);
    constraint *c = calloc(1, sizeof *c);
    if (!c) return tps_fail(err, TPS_ENOMEM, "constraint: out of memory");
    c->prog = constraint_prog_ref(prog);
    c->g = prog->g;
    c->alt_start = prog->alt_start;
    c->alt_idx = prog->alt_idx;
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
        cons_tables_init(c) || !(c->state = cons_import(c, &prog->init))) {
        constraint_free(c);
        return tps_fail(err, TPS_ENOMEM, "constraint: out of memory");
    }
    *out = c;
    return 0;
}
