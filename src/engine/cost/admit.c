/* The admission rule (admit.h): fits now, fits later, never fits. */
#include "engine/cost/admit.h"

uint64_t admit_blocks(const admit_pool *p, size_t n_prompt, uint32_t max_tokens, uint32_t n) {
    const uint64_t bt = p->block_tokens ? p->block_tokens : 1;
    const uint64_t all = ((uint64_t)n_prompt + max_tokens + bt - 1) / bt, shared = n_prompt / bt;
    return shared + (uint64_t)(n ? n : 1) * (all - shared);
}

uint64_t admit_room(const admit_pool *p, size_t n_prompt, uint32_t n) {
    const uint64_t bt = p->block_tokens;
    if (!bt || !p->n_blocks || n_prompt >= p->n_ctx) return 0;
    const uint64_t shared = n_prompt / bt;
    if (shared >= p->n_blocks) return 0;
    const uint64_t reach = (shared + (p->n_blocks - shared) / (n ? n : 1)) * bt;
    uint64_t room = reach > n_prompt ? reach - n_prompt : 0;
    const uint64_t ctx = p->n_ctx - n_prompt;
    return room < ctx ? room : ctx;
}

int admit_choices(const admit_pool *p, uint32_t n, tps_err *err) {
    if (n > p->max_seqs)
        return tps_fail(err, TPS_EINVAL,
                        "n = %u choices cannot run at once: the engine runs at most %u sequences "
                        "(--max-seqs)",
                        n, p->max_seqs);
    return TPS_OK;
}

int admit_request(const admit_pool *p, size_t n_prompt, uint32_t *max_tokens, uint32_t n,
                  tps_err *err) {
    if (n_prompt == 0)
        return tps_fail(err, TPS_EINVAL, "prompt is empty: it needs at least one token");
    if (n_prompt >= p->n_ctx)
        return tps_fail(err, TPS_ERANGE,
                        "prompt has %zu tokens; the model's context is %u (at most %u prompt "
                        "tokens leave room to generate)",
                        n_prompt, p->n_ctx, p->n_ctx - 1);
    if (*max_tokens == 0) *max_tokens = p->n_ctx - (uint32_t)n_prompt;
    if ((uint64_t)n_prompt + *max_tokens > p->n_ctx)
        return tps_fail(err, TPS_ERANGE,
                        "prompt (%zu tokens) + max_tokens (%u) = %llu exceeds the model's "
                        "context of %u tokens",
                        n_prompt, *max_tokens, (unsigned long long)n_prompt + *max_tokens,
                        p->n_ctx);
    if (n == 0) n = 1;
    int rc = admit_choices(p, n, err);
    if (rc) return rc;
    const uint64_t blocks = admit_blocks(p, n_prompt, *max_tokens, n);
    if (blocks <= p->n_blocks) return TPS_OK;
    if (n == 1)
        return tps_fail(err, TPS_ERANGE,
                        "prompt (%zu tokens) + max_tokens (%u) needs %llu KV blocks; the pool "
                        "has %u (raise --kv-mem or lower max_tokens)",
                        n_prompt, *max_tokens, (unsigned long long)blocks, p->n_blocks);
    return tps_fail(err, TPS_ERANGE,
                    "n = %u choices of prompt (%zu tokens) + max_tokens (%u) need %llu KV "
                    "blocks; the pool has %u (lower n or max_tokens, or raise --kv-mem)",
                    n, n_prompt, *max_tokens, (unsigned long long)blocks, p->n_blocks);
}

int admit_queue(const admit_pool *p, uint32_t waiting, tps_err *err) {
    if (p->max_queue && waiting >= p->max_queue)
        return tps_fail(err, TPS_EFULL, "queue is full (%u waiting, limit %u)", waiting,
                        p->max_queue);
    return TPS_OK;
}
