/* Loading a Hugging Face tokenizer: a tokenizer.json (and, beside it, the
 * tokenizer_config.json that says which tokens are BOS/EOS, whether BOS is
 * added, and the chat template) into the same tokenizer object the GGUF
 * loader builds (tokenizer.h), so encode is shared. Counts equal Hugging
 * Face's tokenizers for the BPE files of Llama 3, Qwen3, DeepSeek V3,
 * gpt-oss, Gemma 3 and Llama 2, and for a Metaspace pipeline as Mistral
 * v0.3 writes it (tests/test_tokenizer_hf.c checks the reference ids in
 * tests/data/hf/).
 *
 * Added tokens are always matched in the text, as Hugging Face does: encode
 * with TOK_ENCODE_PARSE_SPECIAL to count as it counts. BOS is added
 * (TOK_ENCODE_ADD_SPECIAL) when tokenizer_config.json's add_bos_token says
 * so, else when the post_processor's template starts with a special token
 * (transformers' rule for Llama and Gemma tokenizers).
 *
 * Not here: WordPiece, Unigram and WordLevel models, and the normalizers,
 * pre-tokenizers and decoders these files do not use (an error names the
 * one found); the lstrip / rstrip / single_word flags of added tokens. */
#ifndef TPS_TOKENIZER_HF_H
#define TPS_TOKENIZER_HF_H

#include <stdbool.h>

#include "base/error.h"
#include "model/tokenizer.h"

/* Whether path is a directory or a file that starts as JSON ('{'): what
 * tokenizer_load_hf reads, not a GGUF. */
bool tokenizer_path_is_hf(const char *path);

/* path: a tokenizer.json, or a directory holding one. tokenizer_config.json
 * in the same directory is read when there. *chat_template (when not NULL)
 * gets its chat_template (malloc'ed; the one named "default" when it is a
 * list), or NULL. Errors name the file and what is wrong or unsupported. */
int tokenizer_load_hf(tokenizer **out, const char *path, char **chat_template, tps_err *err);

#endif
