/* Small data makers and readers the tests share: a seeded xorshift stream of
 * random numbers and floats (the inputs kernel tests compare tiers on), and
 * JSON files and the token ids of their arrays (the references under
 * tests/data, what a run wrote), the folder for data fetched once. Not here:
 * the references themselves, models (model_make), vocabularies (vocab_make). */
#ifndef TPS_TEST_DATA_H
#define TPS_TEST_DATA_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The next xorshift64 value of *s (nonzero state). */
uint64_t test_rng_next(uint64_t *s);
/* Uniform in [-1, 1), from test_rng_next. */
float test_rng_f(uint64_t *s);
/* x[0..n) uniform in [-1, 1), the stream seeded from seed (any value). */
void test_fill(float *x, size_t n, uint64_t seed);
/* The JSON file at the path fmt formats (printf-style); asserts that it
 * parses, naming the path and the parser's complaint. Caller decrefs. */
json_t *test_json_load(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A folder beside the tps binary (the build directory), where tests keep
 * what they fetch once (npm packages): its path into out; true when
 * out/probe is there to read (the fetch already happened). */
bool test_fetched_dir(char *out, size_t cap, const char *sub, const char *probe);
/* The integers of arr into out (asserts it holds at most cap); their count. */
size_t test_ids_of(json_t *arr, int32_t *out, size_t cap);

#endif
