/* Implementation of tests/support/test_data.h. */
#include "support/test_data.h"

#include <criterion/criterion.h>
#include <stdarg.h>
#include <libgen.h>
#include <stdio.h>
#include <unistd.h>

uint64_t test_rng_next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

float test_rng_f(uint64_t *s) {
    return (float)((double)(test_rng_next(s) >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
}

void test_fill(float *x, size_t n, uint64_t seed) {
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++)
        x[i] = test_rng_f(&s);
}

json_t *test_json_load(const char *fmt, ...) {
    char path[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path, sizeof path, fmt, ap);
    va_end(ap);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    cr_assert_not_null(j, "%s: %s (line %d)", path, je.text, je.line);
    return j;
}

bool test_fetched_dir(char *out, size_t cap, const char *sub, const char *probe) {
    char bin[1024], p[2048];
    snprintf(bin, sizeof bin, "%s", TPS_BIN);
    snprintf(out, cap, "%s/%s", dirname(bin), sub);
    snprintf(p, sizeof p, "%s/%s", out, probe);
    return access(p, R_OK) == 0;
}

size_t test_ids_of(json_t *arr, int32_t *out, size_t cap) {
    size_t n = json_array_size(arr);
    cr_assert_leq(n, cap);
    for (size_t i = 0; i < n; i++)
        out[i] = (int32_t)json_integer_value(json_array_get(arr, i));
    return n;
}
