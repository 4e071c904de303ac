/* GBNF grammars (grammar.h) once parsed: the checks on the whole grammar
 * (which rules match empty, left recursion), the element helpers, and the
 * reference recognizer, a plain Earley parser over code points.
 *
 * Not here: the parser (grammar_parse.c, which calls the checks here);
 * anything about tokens or logits; speed of recognition. */
#include "constrain/grammar_internal.h"

#include "base/grow.h"
#include "base/utf8.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------
 * Checks on the whole grammar
 * ------------------------------------------------------------------------- */

void grammar_compute_nullable(grammar *g, uint8_t *nullable) {
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t r = 0; r < g->n_rules; r++) {
            if (nullable[r]) continue;
            bool ok = true; /* the current alternative so far matches empty */
            for (size_t i = g->rule_start[r];; i += grammar_elem_width(&g->elems[i])) {
                const grammar_elem *e = &g->elems[i];
                if (e->op == GRAMMAR_END || e->op == GRAMMAR_ALT) {
                    if (ok) {
                        nullable[r] = 1, changed = true;
                        break;
                    }
                    if (e->op == GRAMMAR_END) break;
                    ok = true;
                } else if (e->op != GRAMMAR_REF || !nullable[e->lo]) {
                    ok = false;
                }
            }
        }
    }
}

/* Finds a cycle of left-edges (A starts, after rules that can match empty,
 * with B) by an iterative depth-first search. Returns 0 or TPS_EINVAL. */
int grammar_check_left_recursion(const grammar *g, tps_err *err) {
    uint32_t n = g->n_rules;
    uint8_t *color = calloc(n, 1);
    struct frame {
        uint32_t rule;
        size_t i;
        bool left;
    } *st = malloc(n * sizeof *st);
    if (!color || !st) {
        free(color);
        free(st);
        return tps_fail(err, TPS_ENOMEM, "grammar: out of memory");
    }
    int rc = 0;
    for (uint32_t r0 = 0; r0 < n && !rc; r0++) {
        if (color[r0]) continue;
        size_t sp = 0;
        st[sp++] = (struct frame){r0, g->rule_start[r0], true};
        color[r0] = 1;
        while (sp && !rc) {
            struct frame *f = &st[sp - 1];
            const grammar_elem *e = &g->elems[f->i];
            if (e->op == GRAMMAR_END) {
                color[f->rule] = 2;
                sp--;
                continue;
            }
            f->i += grammar_elem_width(e);
            if (e->op == GRAMMAR_ALT) {
                f->left = true;
                continue;
            }
            if (!f->left) continue;
            if (e->op != GRAMMAR_REF) {
                f->left = false;
                continue;
            }
            uint32_t b = e->lo;
            if (!g->nullable[b]) f->left = false;
            if (color[b] == 1) {
                /* the cycle is st[k..sp) where st[k].rule == b: name a user rule in it */
                size_t k = sp;
                while (k > 0 && st[k - 1].rule != b)
                    k--;
                const char *name = g->names[b];
                for (size_t j = k ? k - 1 : 0; j < sp; j++)
                    if (!strchr(g->names[st[j].rule], '~')) {
                        name = g->names[st[j].rule];
                        break;
                    }
                if (strchr(name, '~'))
                    rc = tps_fail(err, TPS_EINVAL,
                                  "grammar: rule '%.*s' is left-recursive (a repetition of "
                                  "something that can match the empty string)",
                                  (int)strcspn(name, "~"), name);
                else
                    rc = tps_fail(err, TPS_EINVAL, "grammar: rule '%s' is left-recursive", name);
            } else if (color[b] == 0) {
                color[b] = 1;
                st[sp++] = (struct frame){b, g->rule_start[b], true};
            }
        }
    }
    free(color);
    free(st);
    return rc;
}

/* ---------------------------------------------------------------------------
 * grammar_free and lookups
 * ------------------------------------------------------------------------- */

void grammar_free(grammar *g) {
    free(g);
}

int32_t grammar_find_rule(const grammar *g, const char *name) {
    for (uint32_t i = 0; i < g->n_rules; i++)
        if (!strcmp(g->names[i], name)) return (int32_t)i;
    return -1;
}

bool grammar_char_matches(const grammar *g, size_t i, uint32_t cp) {
    const grammar_elem *e = &g->elems[i];
    switch (e->op) {
    case GRAMMAR_CHAR:
        return cp == e->lo;
    case GRAMMAR_ANY:
        return true;
    case GRAMMAR_SET:
    case GRAMMAR_SET_NOT: {
        bool in = false;
        for (uint32_t k = 1; k <= e->lo && !in; k++)
            in = cp >= e[k].lo && cp <= e[k].hi;
        return e->op == GRAMMAR_SET ? in : !in;
    }
    default:
        return false;
    }
}

/* ---------------------------------------------------------------------------
 * Earley recognizer
 * ------------------------------------------------------------------------- */

typedef struct eitem {
    uint32_t rule;   /* the rule this item is in */
    uint32_t dot;    /* index of the next element in g->elems */
    uint32_t origin; /* the set where the rule started */
} eitem;

typedef struct earley {
    eitem *it;
    size_t n, cap;
    uint32_t *tab; /* hash of the current set: item index + 1, 0 = empty */
    size_t tab_cap, set_start;
    bool oom;
} earley;

static size_t item_hash(eitem x) {
    uint64_t h = ((uint64_t)x.rule * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)x.dot << 21) ^ x.origin;
    h ^= h >> 29;
    return (size_t)(h * 0xBF58476D1CE4E5B9ull >> 7);
}

static void tab_insert(earley *e, size_t idx) {
    size_t j = item_hash(e->it[idx]) & (e->tab_cap - 1);
    while (e->tab[j])
        j = (j + 1) & (e->tab_cap - 1);
    e->tab[j] = (uint32_t)idx + 1;
}

/* Adds x to the current set unless it is there already. */
static void add_item(earley *e, eitem x) {
    if (e->oom) return;
    size_t in_set = e->n - e->set_start;
    if ((in_set + 1) * 2 > e->tab_cap) {
        size_t cap = e->tab_cap ? e->tab_cap * 2 : 64;
        uint32_t *t = calloc(cap, sizeof *t);
        if (!t) {
            e->oom = true;
            return;
        }
        free(e->tab);
        e->tab = t, e->tab_cap = cap;
        for (size_t i = e->set_start; i < e->n; i++)
            tab_insert(e, i);
    }
    size_t j = item_hash(x) & (e->tab_cap - 1);
    for (; e->tab[j]; j = (j + 1) & (e->tab_cap - 1)) {
        eitem y = e->it[e->tab[j] - 1];
        if (y.rule == x.rule && y.dot == x.dot && y.origin == x.origin) return;
    }
    /* item numbers live in the uint32 hash table, 0 meaning empty */
    if (e->n >= UINT32_MAX - 1 || TPS_GROW(e->it, e->cap, e->n + 1, 256)) {
        e->oom = true;
        return;
    }
    e->it[e->n] = x;
    e->tab[j] = (uint32_t)e->n + 1;
    e->n++;
}

static void new_set(earley *e) {
    e->set_start = e->n;
    if (e->tab) memset(e->tab, 0, e->tab_cap * sizeof *e->tab);
}

bool grammar_accepts(const grammar *g, const char *utf8, size_t n) {
    uint32_t *cps = malloc((n ? n : 1) * sizeof *cps);
    size_t *sets = malloc((n + 2) * sizeof *sets);               /* sets[i] = first item of set i */
    uint32_t *predicted = calloc(g->n_rules, sizeof *predicted); /* set index + 1 */
    earley e = {0};
    bool ok = false;
    size_t m = 0;
    if (!cps || !sets || !predicted) goto done;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_decode((const unsigned char *)utf8 + i, n - i, &cps[m]);
        if (!k) goto done;
        i += k, m++;
    }
    new_set(&e);
    sets[0] = 0;
    {
        uint32_t r = g->root;
        add_item(&e, (eitem){r, g->rule_start[r], 0});
        for (size_t i = g->rule_start[r]; g->elems[i].op != GRAMMAR_END;
             i += grammar_elem_width(&g->elems[i]))
            if (g->elems[i].op == GRAMMAR_ALT) add_item(&e, (eitem){r, (uint32_t)i + 1, 0});
        predicted[r] = 1;
    }
    for (size_t s = 0; s <= m; s++) {
        /* predict and complete within set s */
        for (size_t j = sets[s]; j < e.n && !e.oom; j++) {
            eitem x = e.it[j];
            const grammar_elem *el = &g->elems[x.dot];
            if (el->op == GRAMMAR_END || el->op == GRAMMAR_ALT) {
                size_t end = x.origin == s ? e.n : sets[x.origin + 1];
                for (size_t k = sets[x.origin]; k < end && !e.oom; k++) {
                    eitem y = e.it[k];
                    const grammar_elem *ey = &g->elems[y.dot];
                    if (ey->op == GRAMMAR_REF && ey->lo == x.rule)
                        add_item(&e, (eitem){y.rule, y.dot + 1, y.origin});
                }
            } else if (el->op == GRAMMAR_REF) {
                uint32_t b = el->lo;
                if (predicted[b] != s + 1) {
                    predicted[b] = (uint32_t)s + 1;
                    add_item(&e, (eitem){b, g->rule_start[b], (uint32_t)s});
                    for (size_t i = g->rule_start[b]; g->elems[i].op != GRAMMAR_END;
                         i += grammar_elem_width(&g->elems[i]))
                        if (g->elems[i].op == GRAMMAR_ALT)
                            add_item(&e, (eitem){b, (uint32_t)i + 1, (uint32_t)s});
                }
                if (g->nullable[b]) add_item(&e, (eitem){x.rule, x.dot + 1, x.origin});
            }
        }
        if (e.oom) goto done;
        if (s == m) break;
        /* scan cps[s] into set s + 1 */
        size_t end = e.n;
        sets[s + 1] = e.n;
        new_set(&e);
        for (size_t j = sets[s]; j < end && !e.oom; j++) {
            eitem x = e.it[j];
            const grammar_elem *el = &g->elems[x.dot];
            if (el->op == GRAMMAR_END || el->op == GRAMMAR_ALT || el->op == GRAMMAR_REF) continue;
            if (grammar_char_matches(g, x.dot, cps[s]))
                add_item(&e, (eitem){x.rule, x.dot + (uint32_t)grammar_elem_width(el), x.origin});
        }
        if (e.n == sets[s + 1]) goto done; /* nothing could read this character */
    }
    for (size_t j = sets[m]; j < e.n && !ok; j++) {
        eitem x = e.it[j];
        uint32_t op = g->elems[x.dot].op;
        ok = x.rule == g->root && x.origin == 0 && (op == GRAMMAR_END || op == GRAMMAR_ALT);
    }
done:
    free(e.it);
    free(e.tab);
    free(cps);
    free(sets);
    free(predicted);
    return ok && !e.oom;
}
