/* The model-shape arithmetic of a step (engine_shape.h): the K/V bytes a row
 * reads and the multiply-adds of a row, its LM head and an attended
 * position. What the engine's stats and roofline count, what tps generate
 * counts, and what the step-time model and tps plan's roofline estimate
 * are built from. Pure functions of the config; nothing measured here. */
#include "engine/cost/engine_shape.h"
#include "engine/kv/kv_cache.h"

double engine_kv_bytes_attended(const llama_config *c, uint32_t kv_type, uint64_t n_ctx) {
    /* K and V, or latent attention's one latent row (keys and values both), of each layer's
     * own head shape; a layer sharing another's K/V (Gemma 4) reads them too */
    const double maps = c->kv_lora_rank ? 1 : 2;
    double bytes = 0;
    for (uint32_t l = 0; l < c->n_layers; l++) {
        if (llama_config_is_recurrent(c, l)) continue; /* it reads its state instead */
        const double row = (double)kv_cache_row_bytes(kv_type, llama_config_kv_heads(c, l) *
                                                                   llama_config_head_dim(c, l));
        bytes +=
            maps * row * (double)(llama_config_is_swa(c, l) && n_ctx > c->n_swa ? c->n_swa : n_ctx);
    }
    return bytes;
}

/* Multiply-adds of one row through a latent attention layer's projections:
 * Q (through its bottleneck or not), the latent row, Q absorbed per head,
 * each head's values out of the latent, the output. */
static double mla_layer_macs(const llama_config *c) {
    const double H = c->n_heads, kvr = c->kv_lora_rank, nope = c->mla_k - c->rope_dim;
    const double q = c->q_lora_rank
                         ? (double)c->dim * c->q_lora_rank + c->q_lora_rank * H * c->mla_k
                         : (double)c->dim * H * c->mla_k;
    return q + (double)c->dim * c->head_dim + H * nope * kvr + H * kvr * c->mla_v +
           H * c->mla_v * c->dim;
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

/* Multiply-adds of one row through attention layer l's projections: Q (a
 * hybrid stack's doubled: each head's output gate), K and V where the
 * layer stores its own (not one of Gemma 4's shared layers), the output;
 * each with the layer's head shape. */
static double attn_layer_macs(const llama_config *c, uint32_t l) {
    if (c->kv_lora_rank) return mla_layer_macs(c);
    const double hd = llama_config_head_dim(c, l);
    const double q_dim = c->n_heads * hd, kv_dim = llama_config_kv_heads(c, l) * hd;
    const double q_rows = c->arch_info && c->arch_info->hybrid ? 2 * q_dim : q_dim;
    const double kv = llama_config_stores_kv(c, l) ? 2 * kv_dim : 0;
    return c->dim * (q_rows + kv) + q_dim * c->dim;
}

engine_macs engine_macs_of(const llama_config *c) {
    double body = 0, attended = 0;
    for (uint32_t l = 0; l < c->n_layers; l++) {
        const int rec = llama_config_is_recurrent(c, l);
        body += (rec ? linear_layer_macs(c) : attn_layer_macs(c, l)) + llama_config_ffn_macs(c, l);
        attended += rec ? 0 : 2.0 * c->n_heads * llama_config_head_dim(c, l);
    }
    return (engine_macs){
        .body = body, .head = (double)c->dim * c->n_vocab, .per_attended = attended};
}
