/* Sizes the GGUF format defines: a tensor's bytes from its type and shape,
 * a metadata value's bytes from its type (one table for the reader and the
 * writer). The element types themselves are in base/ggml_type.c. */
#include <stdint.h>

#include "model/gguf.h"

size_t ggml_tensor_nbytes(uint32_t type, uint32_t n_dims, const uint64_t *ne) {
    const ggml_type_info *ti = ggml_type_get(type);
    if (!ti || n_dims == 0 || n_dims > GGUF_MAX_DIMS) return 0;
    if (ne[0] % ti->block_size != 0) return 0;
    uint64_t n = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] == 0) return 0;
        if (__builtin_mul_overflow(n, ne[d], &n)) return 0;
    }
    uint64_t bytes;
    if (__builtin_mul_overflow(n / ti->block_size, (uint64_t)ti->type_size, &bytes)) return 0;
    if (bytes > SIZE_MAX) return 0;
    return (size_t)bytes;
}

size_t gguf_value_type_size(uint32_t type) {
    switch (type) {
    case GGUF_TYPE_UINT8:
    case GGUF_TYPE_INT8:
    case GGUF_TYPE_BOOL:
        return 1;
    case GGUF_TYPE_UINT16:
    case GGUF_TYPE_INT16:
        return 2;
    case GGUF_TYPE_UINT32:
    case GGUF_TYPE_INT32:
    case GGUF_TYPE_FLOAT32:
        return 4;
    case GGUF_TYPE_UINT64:
    case GGUF_TYPE_INT64:
    case GGUF_TYPE_FLOAT64:
        return 8;
    default:
        return 0; /* string, array: variable */
    }
}
