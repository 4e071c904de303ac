/* Tokenizer tests' helpers (tests only): the vocabularies they load (from
 * ../shared, or made in memory from their sources: tests/data/vocab/
 * README.md), encode and decode asserting success, and id lists compared
 * with both printed on a mismatch. Asserts (Criterion) on any failure; a
 * file missing from ../shared skips the test. */
#ifndef TPS_TESTS_TOK_CHECK_H
#define TPS_TESTS_TOK_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/tokenizer.h"

#define SPM_VOCAB  "models/vocab/ggml-vocab-llama-spm.gguf"
#define GPT2_VOCAB "models/vocab/ggml-vocab-gpt-2.gguf"
#define STORIES    "models/stories260K.gguf"
/* real vocabularies (128k and 152k tokens) of Llama 3 and Qwen3 */
#define LLAMA3_VOCAB "models/vocab/ggml-vocab-llama3.gguf"
#define QWEN3_VOCAB  "models/vocab/ggml-vocab-qwen3.gguf"
/* Gemma 3's 262k SentencePiece vocabulary and Phi-3's are made by the
 * tests from their sources (support/vocab_make.h) */
#define GEMMA3_VOCAB "ggml-vocab-gemma3.gguf"
#define GPTOSS_VOCAB "ggml-vocab-gptoss.gguf"
#define PHI3_VOCAB   "ggml-vocab-phi3.gguf"

/* TPS_SHARED_DIR/rel, skipping the test when it cannot be read. Borrowed:
 * one of four buffers reused in turn. */
const char *tok_shared_path(const char *rel);
/* The tokenizer of a vocabulary: rel under ../shared, or (no '/') one of
 * the made vocabularies above. The file is closed at once: the tokenizer
 * must not borrow the map. Caller frees it with tokenizer_free. */
tokenizer *tok_load(const char *rel);
/* A whole file, asserting it reads; *len its size. Caller frees. */
char *tok_read_file(const char *path, size_t *len);
/* tokenizer_encode_alloc / tokenizer_decode_alloc, asserting success.
 * Caller frees the result. */
int32_t *tok_encode(const tokenizer *t, const char *s, size_t len, unsigned flags, size_t *n);
char *tok_decode(const tokenizer *t, const int32_t *ids, size_t n, unsigned flags, size_t *len);
/* Compares and reports (what, the text and both id lists, on a mismatch);
 * returns true on a match. */
bool tok_same_ids(const char *what, const char *text, const int32_t *got, size_t n_got,
                  const int32_t *want, size_t n_want);

#endif
