/* Quantization reference data from llama.cpp's ggml for
 * tests/test_quant_ref.c. usage: quant_ref OUT_DIR
 * writes OUT_DIR/<type>.bin for every type of quant_ref_input.h: first the
 * blocks ggml_quantize_chunk makes of qref_input()'s QREF_N floats as one
 * row with no importance matrix (what llama-quantize writes), then the
 * QREF_N floats ggml's to_float makes of qref_blocks()'s random blocks.
 * Built by hand against a llama.cpp build (tests/data/README.md), never by
 * CMake. */
#include <stdio.h>
#include <stdlib.h>

#include "ggml.h"
#include "quant_ref_input.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: quant_ref OUT_DIR\n");
        return 2;
    }
    float x[QREF_N], y[QREF_N];
    qref_input(x);
    for (size_t k = 0; k < QREF_N_TYPES; k++) {
        const qref_layout *t = &QREF_TYPES[k];
        const enum ggml_type type = (enum ggml_type)t->type;
        const size_t bytes = QREF_N / t->block_elems * t->block_bytes;
        if (ggml_row_size(type, QREF_N) != bytes) {
            fprintf(stderr, "%s: ggml's row is %zu bytes, the layout says %zu\n", t->name,
                    ggml_row_size(type, QREF_N), bytes);
            return 1;
        }
        uint8_t *q = malloc(bytes), *r = malloc(bytes);
        ggml_quantize_init(type);
        ggml_quantize_chunk(type, x, q, 0, 1, QREF_N, NULL);
        qref_blocks(r, t);
        ggml_get_type_traits(type)->to_float(r, y, QREF_N);
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.bin", argv[1], t->name);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(q, 1, bytes, f) != bytes ||
            fwrite(y, sizeof(float), QREF_N, f) != QREF_N || fclose(f) != 0) {
            fprintf(stderr, "cannot write %s\n", path);
            return 1;
        }
        free(q);
        free(r);
    }
    return 0;
}
