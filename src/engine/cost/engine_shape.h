/* The model-shape arithmetic of a step: the K/V bytes a row reads and the
 * multiply-adds of a row, its LM head and an attended position. Pure
 * functions of the config (engine_shape.c), below the scheduler that primes
 * its step-time model with them; engine.h includes this for its callers.
 * Not here: anything measured (step_cost.h, step_fit.h). */
#ifndef TPS_ENGINE_SHAPE_H
#define TPS_ENGINE_SHAPE_H

#include <stdint.h>

#include "model/llama_config.h"

/* K and V bytes one row attending n_ctx positions reads, every layer (a
 * sliding-window layer its window's at most): what the stats count as
 * KV read, and what tps generate counts per decoded token. */
double engine_kv_bytes_attended(const llama_config *c, uint32_t kv_type, uint64_t n_ctx);
/* Multiply-adds of one token row through the layers (body), through the
 * LM head (head: only rows that sample run it), and per position a row
 * attends (QK and AV, every layer): what the stats count, and what tps
 * generate counts for a prompt. */
typedef struct engine_macs {
    double body, head, per_attended;
} engine_macs;
engine_macs engine_macs_of(const llama_config *c);

#endif
