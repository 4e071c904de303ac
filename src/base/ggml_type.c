/* The ggml type table (ggml_type.h). */
#include "base/ggml_type.h"

#include <strings.h>

static const ggml_type_info type_table[GGML_TYPE_COUNT_MAX] = {
    [GGML_TYPE_F32] = {"f32", 1, 4},       [GGML_TYPE_F16] = {"f16", 1, 2},
    [GGML_TYPE_Q4_0] = {"q4_0", 32, 18},   [GGML_TYPE_Q4_1] = {"q4_1", 32, 20},
    [GGML_TYPE_Q5_0] = {"q5_0", 32, 22},   [GGML_TYPE_Q5_1] = {"q5_1", 32, 24},
    [GGML_TYPE_Q8_0] = {"q8_0", 32, 34},   [GGML_TYPE_Q8_1] = {"q8_1", 32, 36},
    [GGML_TYPE_Q2_K] = {"q2_k", 256, 84},  [GGML_TYPE_Q3_K] = {"q3_k", 256, 110},
    [GGML_TYPE_Q4_K] = {"q4_k", 256, 144}, [GGML_TYPE_Q5_K] = {"q5_k", 256, 176},
    [GGML_TYPE_Q6_K] = {"q6_k", 256, 210}, [GGML_TYPE_Q8_K] = {"q8_k", 256, 292},
    [GGML_TYPE_I8] = {"i8", 1, 1},         [GGML_TYPE_I16] = {"i16", 1, 2},
    [GGML_TYPE_I32] = {"i32", 1, 4},       [GGML_TYPE_I64] = {"i64", 1, 8},
    [GGML_TYPE_F64] = {"f64", 1, 8},       [GGML_TYPE_BF16] = {"bf16", 1, 2},
    [GGML_TYPE_MXFP4] = {"mxfp4", 32, 17},
};

const ggml_type_info *ggml_type_get(uint32_t type) {
    if (type >= GGML_TYPE_COUNT_MAX || type_table[type].name == NULL) return NULL;
    return &type_table[type];
}

int ggml_type_from_name(const char *name) {
    for (int t = 0; t < GGML_TYPE_COUNT_MAX; t++)
        if (type_table[t].name && !strcasecmp(type_table[t].name, name)) return t;
    return -1;
}
