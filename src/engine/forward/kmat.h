/* The matrix the kernels multiply by, for the forward pass and the
 * experts' shared FFN: the repacked copy of a weight when there is one. */
#ifndef TPS_ENGINE_KMAT_H
#define TPS_ENGINE_KMAT_H

#include "kernels/matmul.h"
#include "model/llama_weights.h"

static inline kernel_mat kmat(float *out, const llama_mat *w) {
    if (w->packed) return (kernel_mat){out, w->packed, kernel_packed_type(w->type), w->rows};
    return (kernel_mat){out, w->data, w->type, w->rows};
}

#endif
