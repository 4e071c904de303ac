/* The inputs of the quantization reference data (tests/data/quant): one
 * header for the test (tests/test_quant_ref.c) and for the generator
 * linked against llama.cpp's ggml (tests/data/tools/quant_ref.c), so both
 * sides quantize the same floats and dequantize the same blocks. Integer
 * arithmetic only (splitmix64), so the values are the same on every
 * machine; changing anything here means regenerating the data. */
#ifndef TPS_TESTS_QUANT_REF_INPUT_H
#define TPS_TESTS_QUANT_REF_INPUT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* elements per type: 4 superblocks of 256, 32 blocks of 32 */
#define QREF_N 1024

static inline uint64_t qref_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1) on a grid of 2^-23. */
static inline float qref_unit(uint64_t *s) {
    return (float)((int32_t)(qref_next(s) >> 40) - (1 << 23)) / (float)(1 << 23);
}

/* x (QREF_N,): uniform values with the cases a quantizer branches on:
 * sub-blocks of very different magnitudes, an all-zero superblock (1), an
 * all-negative one (2), a block below the "all zero" threshold (3), a
 * block of exact ties on a 1/8 grid (26), one spike in zeros (30), and
 * large values (28). */
static inline void qref_input(float *x) {
    uint64_t s = 20261201;
    for (size_t i = 0; i < QREF_N; i++) {
        float v = qref_unit(&s);
        const size_t blk = i / 32;
        if (blk % 5 == 3) v *= 0.01f;
        if (i / 16 % 7 == 1) v *= 4.0f;
        if (i / 256 == 1) v = 0.0f;
        if (i / 256 == 2) v = -fabsf(v) - 0.5f;
        if (blk == 3) v *= 1e-18f;
        if (blk == 26) v = (float)(int)(v * 8.0f) / 8.0f;
        if (blk == 30) v = i % 32 == 7 ? 3.0f : 0.0f;
        if (blk == 28) v *= 1000.0f;
        x[i] = v;
    }
}

/* Where a type's fp16 fields sit in its block (bytes), so random blocks
 * get finite scales: random bytes elsewhere cover every bit pattern. */
typedef struct qref_layout {
    const char *name; /* ggml's type name, the data file's stem */
    uint32_t type;    /* ggml type id */
    size_t block_elems, block_bytes;
    int n_half;
    size_t half_off[2];
} qref_layout;

static const qref_layout QREF_TYPES[] = {
    {"q4_0", 2, 32, 18, 1, {0, 0}},      {"q4_1", 3, 32, 20, 2, {0, 2}},
    {"q5_0", 6, 32, 22, 1, {0, 0}},      {"q5_1", 7, 32, 24, 2, {0, 2}},
    {"q8_0", 8, 32, 34, 1, {0, 0}},      {"q2_k", 10, 256, 84, 2, {80, 82}},
    {"q3_k", 11, 256, 110, 1, {108, 0}}, {"q4_k", 12, 256, 144, 2, {0, 2}},
    {"q5_k", 13, 256, 176, 2, {0, 2}},   {"q6_k", 14, 256, 210, 1, {208, 0}},
    {"iq4_nl", 20, 32, 18, 1, {0, 0}},   {"iq4_xs", 23, 256, 136, 1, {0, 0}},
};
#define QREF_N_TYPES (sizeof QREF_TYPES / sizeof QREF_TYPES[0])

/* dst (QREF_N / block_elems blocks): random bytes with every fp16 field a
 * finite value of either sign between 2^-10 and 2^4. */
static inline void qref_blocks(uint8_t *dst, const qref_layout *t) {
    uint64_t s = 7000 + t->type;
    const size_t nb = QREF_N / t->block_elems;
    for (size_t b = 0; b < nb; b++) {
        uint8_t *blk = dst + b * t->block_bytes;
        for (size_t i = 0; i < t->block_bytes; i++)
            blk[i] = (uint8_t)qref_next(&s);
        for (int h = 0; h < t->n_half; h++) {
            const uint64_t r = qref_next(&s);
            const uint16_t v = (uint16_t)((r & 0x83ffu) | ((5 + (r >> 16) % 14) << 10));
            memcpy(blk + t->half_off[h], &v, sizeof v);
        }
    }
}

#endif
