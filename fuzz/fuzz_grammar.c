/* libFuzzer harness for the GBNF parser: any bytes must parse or fail with
 * a "grammar: " message; a parsed grammar must be well formed (every rule
 * closed by GRAMMAR_END, every reference and set in bounds, root named
 * "root"), and the recognizer must run on a short input without crashing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "constrain/grammar.h"

static void check_well_formed(const grammar *g) {
    if (g->root >= g->n_rules || strcmp(g->names[g->root], "root")) abort();
    for (uint32_t r = 0; r < g->n_rules; r++) {
        size_t i = g->rule_start[r];
        for (;;) {
            if (i >= g->n_elems) abort();
            const grammar_elem *e = &g->elems[i];
            if (e->op == GRAMMAR_END) break;
            if (e->op == GRAMMAR_REF && e->lo >= g->n_rules) abort();
            if (e->op == GRAMMAR_RANGE) abort(); /* only inside a set */
            if (e->op == GRAMMAR_SET || e->op == GRAMMAR_SET_NOT) {
                for (uint32_t k = 1; k <= e->lo; k++)
                    if (i + k >= g->n_elems || e[k].op != GRAMMAR_RANGE || e[k].lo > e[k].hi)
                        abort();
                i += e->lo;
            }
            i++;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* A private copy of exactly `size` bytes so ASan catches any overread. */
    char *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    grammar *g;
    tps_err err = {{0}};
    int rc = grammar_parse(&g, buf, size, &err);
    if (rc) {
        if (g || strncmp(err.msg, "grammar: ", 9)) abort();
    } else {
        check_well_formed(g);
        /* the recognizer on the text's last bytes: bounded work */
        if (g->n_elems < 4096) {
            size_t n = size < 24 ? size : 24;
            volatile bool ok = grammar_accepts(g, buf + size - n, n);
            (void)ok;
        }
        grammar_free(g);
    }
    free(buf);
    return 0;
}
