/* What the engine benchmarks share (benchmarks only): a preset model made
 * on first use in TPS_BENCH_DIR, loading it with its tokenizer, seeded
 * prompts of token ids, an engine's parameters for a loaded model, and
 * waiting for a new engine's KV pool. */
#ifndef TPS_BENCH_MODELS_H
#define TPS_BENCH_MODELS_H

#include <stddef.h>
#include <stdint.h>

#include "model/llama_model.h"
#include "model/tokenizer.h"

typedef struct bench_model {
    llama_model *m;
    tokenizer *tok;
} bench_model;

/* TPS_BENCH_DIR, or /tmp/tps-bench; created if absent. */
const char *bench_dir(void);
/* Makes `path` from `preset` (seeded random weights, GGML type `type`)
 * unless it exists. 0, or -1 with a message on stderr. */
int bench_ensure_model(const char *path, const char *preset, uint32_t type);
/* Loads path (TPS_REPACK=0: borrow the mmapped weights). 0 or -1. */
int bench_load(bench_model *l, const char *path);
void bench_unload(bench_model *l);
#define BENCH_MAX_MODELS 8
#define BENCH_PATH_MAX   512
/* The GGUF paths of TPS_BENCH_MODELS (a comma list) into models; returns
 * how many (0 when unset). */
int bench_model_list(char models[][BENCH_PATH_MAX]);
/* The file name part of a path. */
const char *bench_model_name(const char *path);
/* Seeded prompt: BOS then ids from 3 up (no EOS, no control ids). */
void bench_prompt(int32_t *ids, size_t n, uint32_t vocab, uint32_t seed);

/* Waits (at most 60 s) until a new engine has faulted its KV pool in while
 * idle, as a server that has been up a while has: a figure then measures
 * compute, not the kernel zeroing pages on first touch (llama-bench, for
 * its part, times runs after a warm-up on a cleared cache). */
struct engine;
void bench_wait_kv_warm(struct engine *e);
/* The engine's defaults, serving l's model and tokenizer on `threads`
 * kernel threads. */
struct engine_params;
void bench_engine_params(struct engine_params *ep, const bench_model *l, int threads);

#endif
