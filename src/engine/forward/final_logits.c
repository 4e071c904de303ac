/* Final soft-cap and suppressed tokens of the logits rows (final_logits.h). */
#include "engine/forward/final_logits.h"

#include <math.h>

void final_logits_apply(const llama_config *c, float *logits, size_t n_rows) {
    const size_t nv = c->n_vocab;
    if (c->final_softcap > 0) { /* Gemma 2: as ggml, scale by 1/cap, tanh, scale by cap */
        const float cap = c->final_softcap, inv = 1.0f / cap;
        for (size_t i = 0; i < n_rows * nv; i++)
            logits[i] = tanhf(logits[i] * inv) * cap;
    }
    /* ids checked < n_vocab at load (llama_config.c read_suppress) */
    for (size_t r = 0; r < n_rows; r++)
        for (uint32_t i = 0; i < c->n_suppress; i++)
            logits[r * nv + llama_config_suppressed(c, i)] = -INFINITY;
}
