/* A histogram for the metrics tests (tests only): hist_create with the
 * given range and significant digits, asserting (Criterion) that it
 * succeeds. The caller frees it with hist_free. */
#ifndef TPS_TESTS_HIST_MAKE_H
#define TPS_TESTS_HIST_MAKE_H

#include <stdint.h>

#include "metrics/hist.h"

hist *make_hist(uint64_t lowest, uint64_t highest, int digits);

#endif
