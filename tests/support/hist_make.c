/* make_hist for the histogram and per-request metrics tests (hist_make.h). */
#include "support/hist_make.h"

#include <criterion/criterion.h>

hist *make_hist(uint64_t lowest, uint64_t highest, int digits) {
    hist *h = NULL;
    tps_err e = {{0}};
    hist_config c = {.lowest = lowest, .highest = highest, .sig_digits = digits};
    cr_assert_eq(hist_create(&h, &c, &e), TPS_OK, "%s", e.msg);
    return h;
}
