/* The model-shape arithmetic of a step (engine.h): the K/V bytes a row
 * reads and the multiply-adds of a row, its LM head and an attended
 * position. What the engine's stats and roofline count, what tps generate
 * counts, and what the step-time model and tps plan's roofline estimate
 * are built from. Pure functions of the config; nothing measured here. */
#include "engine/engine.h"
#include "engine/kv_cache.h"

double engine_kv_bytes_attended(const llama_config *c, uint32_t kv_type, uint64_t n_ctx) {
    const double row = (double)kv_cache_row_bytes(kv_type, c->n_kv_heads * c->head_dim);
    double positions = 0;
    for (uint32_t l = 0; l < c->n_layers; l++)
        positions += (double)(llama_config_is_swa(c, l) && n_ctx > c->n_swa ? c->n_swa : n_ctx);
    return 2.0 * row * positions;
}

engine_macs engine_macs_of(const llama_config *c) {
    const double kv_dim = (double)c->n_kv_heads * c->head_dim;
    const double q_dim = (double)c->n_heads * c->head_dim;
    return (engine_macs){.body = (double)c->n_layers * (c->dim * (q_dim + 2 * kv_dim) +
                                                        q_dim * c->dim + llama_config_ffn_macs(c)),
                         .head = (double)c->dim * c->n_vocab,
                         .per_attended = (double)c->n_layers * 2.0 * q_dim};
}
