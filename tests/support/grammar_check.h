/* What the grammar tests check of a compiled grammar (constrain/grammar.h),
 * whether written in GBNF or compiled from a JSON schema: that it accepts
 * or rejects a whole string, and that a refused input was refused the way
 * the API promises. Asserts (Criterion). Not here: the compilers. */
#ifndef TPS_TEST_GRAMMAR_CHECK_H
#define TPS_TEST_GRAMMAR_CHECK_H

#include <stdbool.h>

#include "base/error.h"
#include "constrain/grammar.h"

/* g accepts all of s. */
bool test_accepts(const grammar *g, const char *s);
#define YES(g, s) cr_expect(test_accepts(g, s), "should accept: '%s'", s)
#define NO(g, s)  cr_expect(!test_accepts(g, s), "should reject: '%s'", s)

/* A compile of input that must fail: rc TPS_EINVAL, *g cleared, and err's
 * message containing want. */
void test_expect_refused(int rc, const grammar *g, const tps_err *err, const char *input,
                         const char *want);

#endif
