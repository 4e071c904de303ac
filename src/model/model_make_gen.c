/* The generators' bookkeeping shared by model_make.c and model_make_moe.c
 * (model_make_internal.h): a tensor's seed from its name, the Q4_K_M mix's
 * type of a matrix, appending a generator to the plan. Writes nothing. */
#include <stdio.h>
#include <string.h>

#include "model/model_make_internal.h"

static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* The mix's "more bits" layers: first and last eighth, every third between. */
static int more_bits_layer(uint32_t l, uint32_t n) {
    return l < n / 8 || l >= 7 * n / 8 || (l >= n / 8 && (l - n / 8) % 3 == 2);
}

/* Type of a matrix under opts type t: t itself, except in the Q4_K_M mix. */
uint32_t make_matrix_type(uint32_t t, const char *kind, uint32_t l, uint32_t n_layers) {
    if (t != MODEL_MAKE_Q4_K_M) return t;
    if (!strcmp(kind, "output")) return GGML_TYPE_Q6_K;
    if ((!strcmp(kind, "attn_v") || !strcmp(kind, "ffn_down")) && more_bits_layer(l, n_layers))
        return GGML_TYPE_Q6_K;
    return GGML_TYPE_Q4_K;
}

/* Appends the generator of one tensor: uniform with the given std (0: all
 * ones), seeded by (seed, name). The caller may set offset or values. */
tensor_gen *make_add_gen(make_plan *pl, const char *name, uint32_t type, uint32_t rows,
                         uint32_t cols, float std) {
    const float u = 1.7320508f; /* uniform [-a,a] has std a/sqrt(3) */
    tensor_gen *g = &pl->gens[pl->n_gens++];
    snprintf(g->name, sizeof g->name, "%s", name);
    g->type = type, g->rows = rows, g->cols = cols, g->scale = std * u;
    g->seed = pl->o->seed * 0x9e3779b97f4a7c15ull ^ hash_name(g->name);
    return g;
}

/* add_gen for "blk.<l>.<suffix>". */
tensor_gen *make_add_layer_gen(make_plan *pl, uint32_t l, const char *suffix, uint32_t type,
                               uint32_t rows, uint32_t cols, float std) {
    char nm[64];
    snprintf(nm, sizeof nm, "blk.%u.%s", l, suffix);
    return make_add_gen(pl, nm, type, rows, cols, std);
}
