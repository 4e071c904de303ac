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
        if (!llama_config_is_recurrent(c, l)) /* a recurrent layer reads its state instead */
            positions += (double)(llama_config_is_swa(c, l) && n_ctx > c->n_swa ? c->n_swa : n_ctx);
    return 2.0 * row * positions;
}

/* Multiply-adds of one row through a linear-attention layer: its five
 * projections, the conv, and per value head the delta rule's four passes
 * over the S x S state (decay, read with k, write, read with q). */
static double linear_layer_macs(const llama_config *c) {
    const double inner = (double)c->ssm_v_heads * c->ssm_state;
    const double ch = llama_config_conv_channels(c);
    const double proj = c->dim * (ch + inner + 2.0 * c->ssm_v_heads) + inner * c->dim;
    return proj + ch * c->ssm_conv + 4.0 * inner * c->ssm_state;
}

engine_macs engine_macs_of(const llama_config *c) {
    const double kv_dim = (double)c->n_kv_heads * c->head_dim;
    const double q_dim = (double)c->n_heads * c->head_dim;
    /* a hybrid stack's Q projection doubles: each head's output gate */
    const double q_rows = c->arch_info && c->arch_info->hybrid ? 2 * q_dim : q_dim;
    const double attn = c->dim * (q_rows + 2 * kv_dim) + q_dim * c->dim;
    double body = 0, attended = 0;
    for (uint32_t l = 0; l < c->n_layers; l++) {
        const int rec = llama_config_is_recurrent(c, l);
        body += (rec ? linear_layer_macs(c) : attn) + llama_config_ffn_macs(c);
        attended += rec ? 0 : 2.0 * q_dim;
    }
    return (engine_macs){
        .body = body, .head = (double)c->dim * c->n_vocab, .per_attended = attended};
}
