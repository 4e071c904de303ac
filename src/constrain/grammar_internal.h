/* Private to src/constrain/grammar*.c: what the parser (grammar_parse.c)
 * needs from the checks and the recognizer (grammar.c). Calls go one way:
 * grammar_parse.c -> grammar.c. */
#ifndef TPS_CONSTRAIN_GRAMMAR_INTERNAL_H
#define TPS_CONSTRAIN_GRAMMAR_INTERNAL_H

#include "constrain/grammar.h"

/* Elements an element spans: a set's header and its ranges, else 1. */
static inline size_t grammar_elem_width(const grammar_elem *e) {
    return (e->op == GRAMMAR_SET || e->op == GRAMMAR_SET_NOT) ? 1 + (size_t)e->lo : 1;
}

/* Which rules can match the empty string (fills nullable, (n_rules,)). */
void grammar_compute_nullable(grammar *g, uint8_t *nullable);
/* 0, or TPS_EINVAL naming a left-recursive rule (TPS_ENOMEM). */
int grammar_check_left_recursion(const grammar *g, tps_err *err);

#endif
