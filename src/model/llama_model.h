/* A loaded Llama model: the mapped GGUF file, its config and its weights.
 * The tokenizer is loaded beside it (model/tokenizer.h). Immutable after
 * load, so many threads may read it. */
#ifndef TPS_LLAMA_MODEL_H
#define TPS_LLAMA_MODEL_H

#include "model/gguf.h"
#include "model/llama_config.h"
#include "model/llama_weights.h"

typedef struct llama_model {
    gguf_file *file;
    llama_config cfg;
    llama_weights w;
    /* the load: wall time, and the process's peak resident memory right
     * after it (getrusage; repacking streams the file, so about its size) */
    uint64_t load_ns;
    size_t load_peak_rss;
} llama_model;

/* Load options; llama_model_load uses the defaults. */
typedef struct llama_load_opts {
    int no_repack; /* 1: borrow every matrix from the mmap; 0 (default): repack
                      quantized matrices (every block type) at load (llama_weights_repack) */
} llama_load_opts;

int llama_model_load(llama_model **out, const char *path, tps_err *err);
int llama_model_load_opts(llama_model **out, const char *path, const llama_load_opts *opts,
                          tps_err *err);
void llama_model_free(llama_model *m);

#endif
