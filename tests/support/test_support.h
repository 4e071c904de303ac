/* Helpers shared by the tests: where ../shared lives, skipping cleanly when it
 * is absent, running the tps binary and capturing its output. */
#ifndef TPS_TEST_SUPPORT_H
#define TPS_TEST_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>

/* Absolute path of a file under ../shared (static buffer per call site is not
 * needed: returns a malloc'ed string the caller frees). */
char *shared_path(const char *rel);
/* True when ../shared/<rel> exists. */
bool shared_has(const char *rel);
/* Writes text to a fresh temporary file under /tmp; its path, malloc'ed
 * (the caller unlinks and frees it). Asserts. */
char *test_temp_file(const char *text);
/* Runs cmd through /bin/sh, its first cap - 1 bytes of stdout into out
 * (NUL-ended). Returns pclose's wait status (WIFEXITED, WEXITSTATUS). */
int test_run_capture(const char *cmd, char *out, size_t cap);
/* Runs tests/tools/validate_output.py with the interpreter python on spec
 * and out (kind: what spec is, as the script takes it), both written to
 * temporary files removed after. Returns its exit status (0: out conforms;
 * 77: jsonschema is missing; -1: it did not exit), its output in why. */
int test_validate_output(const char *python, const char *kind, const char *spec, const char *out,
                         char *why, size_t cap);
/* Reads a whole file; NULL on failure. *len gets its size. Caller frees. */
char *read_file_all(const char *path, size_t *len);
/* jinja2's rendering of one (template file, conversation) pair of
 * tests/data/templates/corpus.json, malloc'ed; the test fails when the
 * corpus has no such output. */
char *corpus_output(const char *template_file, const char *conversation);
/* Runs `tps <args>` through /bin/sh, capturing stdout (and stderr when
 * merge_stderr). Returns the exit status (or -1); *out is malloc'ed. */
int run_tps(const char *args, bool merge_stderr, char **out);
/* Expects `tps <args>` (stderr merged) to exit with status and, when says is
 * not NULL, to print it: the check of a command line's refusal. */
void expect_tps(const char *args, int status, const char *says);
/* Asserts that `tps <args>` (stderr merged) exits 0, showing its output
 * when it does not: a step a test cannot go on without. */
void assert_tps_ok(const char *args);

struct llama_model;
/* A model's shape and multiply-adds counted from its tensors (not from the
 * engine's formula): every layer matrix once per row (body), the LM head
 * (head), and per attended position a QK dot and an AV sum per query head
 * and layer (per_pos). */
typedef struct model_shape {
    double n_layers, kv_dim;
    double body, head, per_pos;
} model_shape;
model_shape model_shape_of(const struct llama_model *m);
/* The same for a model file under ../shared (loaded and freed). */
model_shape model_shape_shared(const char *rel);

/* Skips the current Criterion test with a clear message when a shared file
 * the test needs is missing. */
#define REQUIRE_SHARED(rel)                                                                        \
    do {                                                                                           \
        if (!shared_has(rel))                                                                      \
            cr_skip_test("../shared/%s not found: this test needs the shared reference data "      \
                         "beside the checkout",                                                    \
                         rel);                                                                     \
    } while (0)

#endif
