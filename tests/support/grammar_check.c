/* Implementation of tests/support/grammar_check.h. */
#include "support/grammar_check.h"

#include <criterion/criterion.h>
#include <string.h>

bool test_accepts(const grammar *g, const char *s) {
    return grammar_accepts(g, s, strlen(s));
}

void test_expect_refused(int rc, const grammar *g, const tps_err *err, const char *input,
                         const char *want) {
    cr_assert_eq(rc, TPS_EINVAL, "expected a failure for:\n%s", input);
    cr_assert_null(g);
    cr_assert(strstr(err->msg, want), "message '%s' does not contain '%s'", err->msg, want);
}
