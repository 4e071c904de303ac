/* Running and editing models in the tests: a GGUF file copied with one
 * tensor left out (what a broken or a tied-embedding file looks like), and
 * the greedy loop every reference test runs (the prompt in one batch, then
 * one token a step, each step's logits handed to a check that says which
 * token goes next: the reference's when teacher-forcing, the argmax when
 * greedy), and the KV cache such a run uses. Asserts (Criterion) on any
 * failure of the code under test's setup. Not here: the references (tests/data), the comparisons.
 */
#ifndef TPS_TEST_MODEL_RUN_H
#define TPS_TEST_MODEL_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/forward/forward.h"
#include "model/gguf.h" /* the reader and gguf_writer */

/* Makes a model of random weights (model_make: preset and arch by name,
 * type, seed) at path, a "...XXXXXX" template it fills in. */
void test_model_make_arch(char *path, const char *preset, const char *arch, uint32_t type,
                          uint64_t seed);

struct model_preset;
/* A Q8_0 model (seed 1) of pre and arch (by name) with the vocabulary of
 * the GGUF at vocab_path and chat template tmpl (NULL: none), at path. */
void test_model_make_chat(const char *path, const struct model_preset *pre, const char *arch,
                          const char *vocab_path, const char *tmpl);

/* A writer holding every key of f and every tensor but `skip` (NULL: all):
 * the caller adds or changes what it needs, writes it, frees it. */
gguf_writer *test_gguf_copy(const gguf_file *f, const char *skip);
enum { TEST_GGUF_NAME_CAP = 96 };
/* Asked of each tensor t of f, named name (NUL-terminated, in a buffer of
 * TEST_GGUF_NAME_CAP the callback may rewrite): true when it has written
 * t its own way into w (or means to drop it), false to have it copied. */
typedef bool (*test_gguf_tensor_fn)(gguf_writer *w, const gguf_tensor *t, char *name, void *arg);
/* test_gguf_copy with fn (NULL: copy all) deciding each tensor. */
gguf_writer *test_gguf_copy_each(const gguf_file *f, test_gguf_tensor_fn fn, void *arg);

/* kv_cache_create(p), asserting that it succeeds. */
kv_cache *test_kv_create(const kv_cache_params *p);
/* The parameters of a pool for c's layers and heads, every layer alike:
 * n_blocks blocks of block_tokens positions of kv_type; the rest zero. */
kv_cache_params test_kv_params(const llama_config *c, uint32_t block_tokens, uint32_t kv_type,
                               uint32_t n_blocks);
/* A KV cache for m's layers and heads: n_blocks blocks of block_tokens
 * positions of kv_type. */
kv_cache *test_kv_for(const llama_model *m, uint32_t block_tokens, uint32_t kv_type,
                      uint32_t n_blocks);

/* Called after each forward step k (0: the prompt's last row) with the
 * logits of its one sampling row (n_vocab); returns the token to feed at
 * the next position. */
typedef int32_t (*model_step_fn)(const float *logits, size_t k, void *arg);

/* The prompt (np ids) in one batch, then ng - 1 single-token steps on one
 * sequence of kv (reserved here for np + ng positions, released after):
 * fn sees ng sets of logits. */
void test_greedy_run(fwd_state *s, const llama_model *m, kv_cache *kv, const int32_t *prompt,
                     size_t np, size_t ng, model_step_fn fn, void *arg);

#endif
