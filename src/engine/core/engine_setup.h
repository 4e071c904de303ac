/* What an engine is built from, before it runs: parameters with their
 * defaults resolved, and the KV pool they size. The engine calls these at
 * create; tps plan calls them to build the same scheduling state (a pool
 * of block accounting only) for its simulated engine, so the two hold the
 * same blocks and the planner makes the same decisions. Not here: the
 * warm-up's priming of the step-time model (planner.h, sched_prime). */
#ifndef TPS_ENGINE_SETUP_H
#define TPS_ENGINE_SETUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/core/engine.h"
#include "engine/kv/kv_cache.h"
#include "model/llama_config.h"

/* Fills the defaults engine_create applies (max_seqs 64, max_batch_tokens
 * 256, prefill_chunk at most max_batch_tokens, kv_block 16). */
void engine_params_resolve(engine_params *p);

/* A hybrid model's prefix cache checkpoints its state every this many KV
 * blocks (64 positions with 16-position blocks: a shared prompt is reused
 * up to its last multiple of 64), keeping at most ENGINE_CKPT_MEM bytes of
 * them. */
#define ENGINE_CKPT_BLOCKS 4
#define ENGINE_CKPT_MEM    (1ull << 30)

/* flags[l] = 1 for each recurrent (linear-attention) layer of c, which
 * keeps a state instead of K/V (n_layers flags); returns their count. */
uint32_t engine_recurrent_layers(const llama_config *c, uint8_t *flags);
/* Bytes of one sequence's recurrent state: every recurrent layer's (0 for
 * a model without). */
size_t engine_state_bytes(const llama_config *c);

/* The KV pool for model config c under p (resolved): --kv-mem, or
 * --kv-tokens, or by default max_seqs full contexts capped at 1 GiB;
 * sliding-window layers in a pool of their own; with the prefix cache and
 * without kv_prefault, the resident bound. accounting_only: the block
 * accounting without K/V memory (kv_cache.h). Sets p->kv_mem to the bytes
 * the pool holds. */
int engine_kv_create(kv_cache **out, const llama_config *c, engine_params *p, bool accounting_only,
                     tps_err *err);

#endif
