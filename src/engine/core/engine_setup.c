/* How an engine's parameters resolve and how its KV pool is sized
 * (engine_setup.h): shared by the engine and by tps plan, whose simulated
 * engine must hold the same pool to make the same decisions. */
#include "engine/core/engine_setup.h"

#include <stdlib.h>

void engine_params_resolve(engine_params *p) {
    if (!p->max_seqs) p->max_seqs = 64;
    if (!p->max_batch_tokens) p->max_batch_tokens = 256;
    if (!p->prefill_chunk || p->prefill_chunk > p->max_batch_tokens)
        p->prefill_chunk = p->max_batch_tokens;
    if (!p->kv_block) p->kv_block = 16;
    /* kv_type comes from engine_params_default (F16); 0 is F32, asked for */
}

/* Local-pool blocks the engine can ever hold at once: every sequence its
 * window's blocks plus one it is filling, and one step's prompt rows. */
static uint32_t local_blocks_needed(const engine_params *p, uint32_t window) {
    const uint64_t B = p->kv_block;
    uint64_t n =
        (uint64_t)p->max_seqs * ((window + B - 1) / B + 2) + (p->max_batch_tokens + B - 1) / B;
    return n > UINT32_MAX / 2 ? UINT32_MAX / 2 : (uint32_t)n;
}

uint32_t engine_recurrent_layers(const llama_config *c, uint8_t *flags) {
    uint32_t n = 0;
    for (uint32_t l = 0; l < c->n_layers; l++)
        n += flags[l] = (uint8_t)llama_config_is_recurrent(c, l);
    return n;
}

size_t engine_state_bytes(const llama_config *c) {
    uint32_t n = 0;
    for (uint32_t l = 0; l < c->n_layers; l++)
        n += (uint32_t)llama_config_is_recurrent(c, l);
    return n ? (size_t)n * llama_config_state_floats(c) * sizeof(float) : 0;
}

/* The state checkpoints a hybrid model's prefix cache keeps: 8 per
 * sequence, within ENGINE_CKPT_MEM bytes (at least one). */
static uint32_t checkpoints(const llama_config *c, const engine_params *p) {
    const size_t bytes = engine_state_bytes(c);
    if (!bytes || p->no_prefix_cache) return 0;
    uint64_t n = 8ull * p->max_seqs;
    if (n * bytes > ENGINE_CKPT_MEM) n = ENGINE_CKPT_MEM / bytes;
    return n ? (uint32_t)n : 1;
}

/* The KV pool: --kv-mem, or --kv-tokens, or by default max_seqs full
 * contexts capped at 1 GiB. Sliding-window layers get a pool of their own
 * sized by local_blocks_needed (kv_cache.h). */
int engine_kv_create(kv_cache **out, const llama_config *c, engine_params *p, bool accounting_only,
                     tps_err *err) {
    uint8_t *local = calloc(c->n_layers ? 3 * (size_t)c->n_layers : 1, 1);
    if (!local) return tps_fail(err, TPS_ENOMEM, "engine: out of memory");
    uint8_t *recurrent = local + c->n_layers, *shared = recurrent + c->n_layers;
    uint32_t n_local = 0, n_rec = engine_recurrent_layers(c, recurrent), n_shared = 0;
    for (uint32_t l = 0; l < c->n_layers; l++) {
        shared[l] = (uint8_t)(!recurrent[l] && !llama_config_stores_kv(c, l));
        n_shared += shared[l];
        local[l] = (uint8_t)llama_config_is_swa(c, l);
        n_local += local[l] && !shared[l];
    }
    const uint32_t n_kv = c->n_layers - n_rec - n_shared; /* the layers that store K/V */
    kv_cache_params kp = {.n_layers = c->n_layers,
                          .kv_dim = c->n_kv_heads * c->head_dim,
                          .head_dim = c->head_dim,
                          .block_tokens = p->kv_block,
                          .kv_type = p->kv_type,
                          .mem_bytes = p->kv_mem,
                          .prefix_cache = !p->no_prefix_cache,
                          .local_layers = local,
                          .window = c->n_swa,
                          .n_local_blocks = local_blocks_needed(p, c->n_swa),
                          .accounting_only = accounting_only,
                          .recurrent_layers = recurrent,
                          .n_state_slots = n_rec ? p->max_seqs : 0,
                          .state_bytes = engine_state_bytes(c),
                          .ckpt_every = ENGINE_CKPT_BLOCKS * p->kv_block,
                          .n_ckpt = checkpoints(c, p),
                          .k_only = c->kv_lora_rank != 0,
                          .local_kv_dim = c->head_dim_swa && c->n_kv_heads_swa
                                              ? c->n_kv_heads_swa * c->head_dim_swa
                                              : 0,
                          .local_head_dim = c->n_kv_heads_swa ? c->head_dim_swa : 0,
                          .shared_layers = shared};
    const size_t maps = kp.k_only ? 1 : 2; /* latent attention stores K only (kv_cache.h) */
    if (!kp.mem_bytes) {
        uint64_t tokens = p->kv_tokens ? p->kv_tokens : (uint64_t)p->max_seqs * c->ctx_len;
        uint64_t blocks = (tokens + kp.block_tokens - 1) / kp.block_tokens;
        if (n_local == n_kv) n_local = 0; /* kv_cache keeps them in one pool */
        /* the cap counts the global layers' blocks and as many local ones */
        size_t bb = kv_cache_block_bytes(n_kv - n_local, kp.kv_dim, kp.block_tokens, kp.kv_type) /
                    2 * maps,
               lb = kv_cache_block_bytes(n_local, kp.local_kv_dim ? kp.local_kv_dim : kp.kv_dim,
                                         kp.block_tokens, kp.kv_type) /
                    2 * maps;
        uint64_t nl = blocks < kp.n_local_blocks ? blocks : kp.n_local_blocks;
        if (!p->kv_tokens && blocks * bb + nl * lb > (1ull << 30))
            blocks = (1ull << 30) > nl * lb ? ((1ull << 30) - nl * lb) / bb : 1;
        if (blocks < 1) blocks = 1;
        kp.n_blocks = (uint32_t)blocks;
    }
    if (!p->kv_prefault) {
        /* the bound counts global blocks (the local pool is small and bounded) */
        const uint32_t n_global = n_local == n_kv ? n_kv : n_kv - n_local;
        const size_t bb =
            kv_cache_block_bytes(n_global, kp.kv_dim, kp.block_tokens, kp.kv_type) / 2 * maps;
        uint64_t pool = kp.n_blocks ? kp.n_blocks : kp.mem_bytes / bb;
        uint64_t resident = ENGINE_KV_RESIDENT_MIN / bb;
        if (resident < pool / 8) resident = pool / 8;
        kp.resident_blocks = resident < pool ? (uint32_t)resident : 0; /* 0: the whole pool */
    }
    int rc = kv_cache_create(out, &kp, err);
    free(local);
    if (!rc) p->kv_mem = maps * (*out)->map_bytes;
    return rc;
}
