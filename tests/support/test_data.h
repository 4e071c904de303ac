/* Data readers the tests share: a JSON file loaded or the test failed
 * saying why, and the folder where tests keep data they fetch once. Not
 * here: random inputs (kernel_check.h), the llama.cpp references
 * (llama_ref.h), models (model_make), vocabularies (vocab_make). */
#ifndef TPS_TEST_DATA_H
#define TPS_TEST_DATA_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The JSON file at the path fmt formats (printf-style); asserts that it
 * parses, naming the path and the parser's complaint. Caller decrefs. */
json_t *test_json_load(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A folder beside the tps binary (the build directory), where tests keep
 * what they fetch once (npm packages), or in $TPS_FETCH_DIR when set (make
 * test points the ASan suite at the Release build's, so each package is
 * fetched once, not once a build; the packages are JavaScript and JSON, the
 * same for every build): its path into out; true when out/probe is there
 * to read (the fetch already happened). */
bool test_fetched_dir(char *out, size_t cap, const char *sub, const char *probe);

#endif
