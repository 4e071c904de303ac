/* Compiling a grammar for constrained decoding (constraint.h): parse the
 * GBNF within the size budget, index each rule's alternatives, expand the
 * start state within the time and size budgets, and keep its stacks as
 * plain positions, so that every constraint over the result starts from
 * them without expanding again. The result is immutable and shared.
 *
 * Not here: the recognizer's machinery (constraint.c, which this calls),
 * caching compiled grammars by content (grammar_cache.c). */
#include "constrain/constraint_internal.h"

#include <stdlib.h>
#include <string.h>

#include "base/clock.h"

/* Each rule's alternative starts, for expand. */
static int index_alternatives(constraint_prog *p) {
    const grammar *g = p->g;
    size_t n_alts = 0;
    for (uint32_t r = 0; r < g->n_rules; r++)
        for (size_t i = g->rule_start[r];; i += grammar_elem_width(&g->elems[i])) {
            if (g->elems[i].op == GRAMMAR_ALT || g->elems[i].op == GRAMMAR_END) n_alts++;
            if (g->elems[i].op == GRAMMAR_END) break;
        }
    p->alt_start = malloc(n_alts * sizeof *p->alt_start);
    p->alt_idx = malloc((g->n_rules + 1) * sizeof *p->alt_idx);
    if (!p->alt_start || !p->alt_idx) return TPS_ENOMEM;
    uint32_t k = 0;
    for (uint32_t r = 0; r < g->n_rules; r++) {
        p->alt_idx[r] = k;
        p->alt_start[k++] = g->rule_start[r];
        for (size_t i = g->rule_start[r]; g->elems[i].op != GRAMMAR_END;
             i += grammar_elem_width(&g->elems[i]))
            if (g->elems[i].op == GRAMMAR_ALT) p->alt_start[k++] = (uint32_t)i + 1;
    }
    p->alt_idx[g->n_rules] = k;
    p->bytes += n_alts * sizeof *p->alt_start + (g->n_rules + 1) * sizeof *p->alt_idx;
    return 0;
}

static const char *label_of(const char *l) {
    return l ? l : "";
}

static int over_time(tps_err *err, const constraint_limits *lim, uint64_t t0) {
    double took = (double)(tps_now_ns() - t0) / 1e6;
    return tps_fail(err, TPS_ERANGE,
                    "grammar: compiling it takes more than %.0f ms, the limit per request%s%s "
                    "(stopped after %.0f ms)",
                    (double)lim->max_ns / 1e6, lim->time_label ? " " : "",
                    label_of(lim->time_label), took);
}

static int over_bytes(tps_err *err, const constraint_limits *lim, size_t bytes) {
    return tps_fail(err, TPS_ERANGE,
                    "grammar: compiled, it takes more than %.1f MiB (%.1f MiB and growing), the "
                    "limit per request%s%s",
                    (double)lim->max_bytes / 1048576.0, (double)bytes / 1048576.0,
                    lim->bytes_label ? " " : "", label_of(lim->bytes_label));
}

/* The start state's stacks into p, expanded on a scratch recognizer under
 * the budget (deadline_ns, and what is left of max_bytes). */
static int start_state(constraint_prog *p, const constraint_limits *lim, uint64_t t0,
                       uint64_t deadline_ns, tps_err *err) {
    constraint *c = calloc(1, sizeof *c);
    if (!c) return tps_fail(err, TPS_ENOMEM, "constraint: out of memory");
    c->g = p->g;
    c->alt_start = p->alt_start;
    c->alt_idx = p->alt_idx;
    c->deadline_ns = deadline_ns;
    c->max_bytes = lim && lim->max_bytes ? lim->max_bytes - p->bytes : 0;
    int rc = cons_tables_init(c);
    uint32_t s = rc ? 0 : cons_expand_rule(c, p->g->root);
    if (rc)
        rc = tps_fail(err, TPS_ENOMEM, "constraint: out of memory");
    else if (c->over_time)
        rc = over_time(err, lim, t0);
    else if (c->over_bytes)
        rc = over_bytes(err, lim, p->bytes + constraint_cache_bytes(c));
    else if (s == 0)
        rc = tps_fail(err, TPS_EINVAL,
                      "grammar: too ambiguous to decode (more than %d parse stacks at once, or "
                      "rules nested deeper than 4096)",
                      CONSTRAINT_MAX_STACKS);
    else if (cons_export(c, s, &p->init))
        rc = tps_fail(err, TPS_ENOMEM, "constraint: out of memory");
    if (!rc) p->bytes += cons_forest_bytes(&p->init);
    cons_tables_free(c);
    free(c);
    return rc;
}

int constraint_prog_compile(constraint_prog **out, const char *gbnf, size_t len,
                            const constraint_limits *lim, tps_err *err) {
    *out = NULL;
    uint64_t t0 = tps_now_ns();
    uint64_t deadline = lim && lim->max_ns ? t0 + lim->max_ns : 0;
    grammar *g = NULL;
    grammar_limits gl = {.max_bytes = lim ? lim->max_bytes : 0,
                         .bytes_label = lim ? lim->bytes_label : NULL,
                         .deadline_ns = deadline};
    int rc = grammar_parse_limited(&g, gbnf, len, &gl, err);
    if (rc == TPS_ERANGE && deadline && tps_now_ns() > deadline) return over_time(err, lim, t0);
    if (rc) return rc;
    constraint_prog *p = calloc(1, sizeof *p);
    if (!p) {
        grammar_free(g);
        return tps_fail(err, TPS_ENOMEM, "constraint: out of memory");
    }
    atomic_init(&p->refs, 1);
    p->g = g;
    p->bytes = sizeof *p + g->bytes;
    if (index_alternatives(p))
        rc = tps_fail(err, TPS_ENOMEM, "constraint: out of memory");
    else if (lim && lim->max_bytes && p->bytes > lim->max_bytes)
        rc = over_bytes(err, lim, p->bytes);
    else if (deadline && tps_now_ns() > deadline)
        rc = over_time(err, lim, t0);
    else
        rc = start_state(p, lim, t0, deadline, err);
    if (rc) {
        constraint_prog_unref(p);
        return rc;
    }
    *out = p;
    return 0;
}

int constraint_create(constraint **out, const char *gbnf, size_t len, const vocab_trie *vt,
                      const int32_t *end_ids, size_t n_end, tps_err *err) {
    *out = NULL;
    if (n_end > CONSTRAINT_MAX_END_IDS)
        return tps_fail(err, TPS_EINVAL, "constraint: %zu end ids; at most %d", n_end,
                        CONSTRAINT_MAX_END_IDS);
    constraint_prog *p = NULL;
    int rc = constraint_prog_compile(&p, gbnf, len, NULL, err);
    if (!rc) rc = constraint_create_prog(out, p, vt, end_ids, n_end, err);
    constraint_prog_unref(p);
    return rc;
}
