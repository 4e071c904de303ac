/* The generators' bookkeeping shared by model_make.c and model_make_moe.c
 * (model_make_internal.h): a tensor's seed from its name, a matrix's type
 * under the plan's type or mix, appending a generator to the plan. Writes
 * nothing. */
#include <stdio.h>
#include <string.h>

#include "model/model_make_internal.h"

static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

uint32_t make_matrix_type(const make_plan *pl, const char *name, uint32_t l, uint32_t cols) {
    const uint32_t t = pl->type;
    if (t < MODEL_MAKE_FTYPE(0)) return t;
    return quant_mix_type(quant_ftype_by_number(t - MODEL_MAKE_FTYPE(0)), &pl->mix, name, cols, l);
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
