/* What the ARM test programs take from tests/support/test_support.c,
 * which itself needs jansson (not installed for arm64): the one helper
 * the kernel tests call, the same definition. */
#include <math.h>
#include <stddef.h>

#include "support/test_support.h"

double test_rel_err(const float *got, const float *ref, size_t n) {
    double d = 0, t = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
        t += (double)ref[i] * ref[i];
    }
    return sqrt(d / t);
}
