/* Every block format against llama.cpp's ggml, bit for bit: tps's
 * quantizer of each type writes the blocks ggml_quantize_chunk wrote
 * (llama-quantize's path, no importance matrix) for the same floats, and
 * tps's dequantizer turns random blocks into the floats ggml's to_float
 * did. The data: tests/data/quant/<type>.bin, made by
 * tests/data/tools/quant_ref.c (tests/data/README.md names the commit);
 * the inputs: tests/support/quant_ref_input.h, shared with the generator.
 * Also: the type table names every type id llama.cpp defines. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quant.h"
#include "support/quant_ref_input.h"

typedef struct ref_file {
    uint8_t *blocks; /* ggml's quantization of qref_input() */
    float *deq;      /* ggml's dequantization of qref_blocks() */
    size_t bytes;    /* of blocks */
} ref_file;

static ref_file read_ref(const qref_layout *t) {
    char p[1024];
    snprintf(p, sizeof p, "%s/tests/data/quant/%s.bin", TPS_SOURCE_DIR, t->name);
    FILE *f = fopen(p, "rb");
    cr_assert_not_null(f, "cannot open %s", p);
    ref_file r = {.bytes = QREF_N / t->block_elems * t->block_bytes};
    r.blocks = malloc(r.bytes);
    r.deq = malloc(QREF_N * sizeof(float));
    cr_assert_eq(fread(r.blocks, 1, r.bytes, f), r.bytes, "%s: short", p);
    cr_assert_eq(fread(r.deq, sizeof(float), QREF_N, f), QREF_N, "%s: short", p);
    cr_assert_eq(fgetc(f), EOF, "%s: longer than its type's data", p);
    fclose(f);
    return r;
}

static void free_ref(ref_file *r) {
    free(r->blocks);
    free(r->deq);
}

Test(quant_ref, every_type_tps_writes_quantizes_as_llama_quantize_does) {
    float x[QREF_N];
    qref_input(x);
    for (size_t k = 0; k < QREF_N_TYPES; k++) {
        const qref_layout *t = &QREF_TYPES[k];
        ref_file r = read_ref(t);
        cr_assert_eq(kernel_row_bytes(t->type, QREF_N), r.bytes, "%s", t->name);
        uint8_t *q = malloc(r.bytes);
        memset(q, 0xa5, r.bytes);
        cr_assert_eq(quantize_row_any(t->type, q, x, QREF_N), 0, "%s", t->name);
        for (size_t b = 0; b < r.bytes / t->block_bytes; b++) {
            const size_t off = b * t->block_bytes;
            for (size_t i = 0; i < t->block_bytes; i++)
                cr_assert_eq(q[off + i], r.blocks[off + i],
                             "%s: block %zu byte %zu: tps 0x%02x, ggml 0x%02x", t->name, b, i,
                             q[off + i], r.blocks[off + i]);
        }
        free(q);
        free_ref(&r);
    }
}

Test(quant_ref, every_type_dequantizes_as_ggml_does_bit_for_bit) {
    for (size_t k = 0; k < QREF_N_TYPES; k++) {
        const qref_layout *t = &QREF_TYPES[k];
        ref_file r = read_ref(t);
        uint8_t *blocks = malloc(r.bytes);
        qref_blocks(blocks, t);
        float y[QREF_N];
        cr_assert_eq(dequantize_row(y, blocks, t->type, QREF_N), 0, "%s", t->name);
        for (size_t i = 0; i < QREF_N; i++) {
            uint32_t a, b;
            memcpy(&a, &y[i], 4);
            memcpy(&b, &r.deq[i], 4);
            cr_assert_eq(a, b, "%s: element %zu: tps %a, ggml %a", t->name, i, y[i], r.deq[i]);
        }
        free(blocks);
        free_ref(&r);
    }
}

/* llama.cpp's ggml.h (ggml_type, commit of tests/data/README.md): every id
 * it defines, with its name; ids it removed are unknown. */
Test(quant_ref, the_type_table_names_every_ggml_type_id) {
    static const char *const names[] = {
        [0] = "f32",     [1] = "f16",      [2] = "q4_0",   [3] = "q4_1",    [6] = "q5_0",
        [7] = "q5_1",    [8] = "q8_0",     [9] = "q8_1",   [10] = "q2_k",   [11] = "q3_k",
        [12] = "q4_k",   [13] = "q5_k",    [14] = "q6_k",  [15] = "q8_k",   [16] = "iq2_xxs",
        [17] = "iq2_xs", [18] = "iq3_xxs", [19] = "iq1_s", [20] = "iq4_nl", [21] = "iq3_s",
        [22] = "iq2_s",  [23] = "iq4_xs",  [24] = "i8",    [25] = "i16",    [26] = "i32",
        [27] = "i64",    [28] = "f64",     [29] = "iq1_m", [30] = "bf16",   [34] = "tq1_0",
        [35] = "tq2_0",  [39] = "mxfp4",   [40] = "nvfp4", [41] = "q1_0",
    };
    for (uint32_t id = 0; id < sizeof names / sizeof names[0]; id++) {
        const ggml_type_info *ti = ggml_type_get(id);
        if (!names[id]) {
            cr_expect_null(ti, "id %u was removed from ggml", id);
            continue;
        }
        cr_assert_not_null(ti, "id %u (%s) has no name", id, names[id]);
        cr_expect_str_eq(ti->name, names[id]);
    }
    /* the supported list in refusals names exactly the supported types */
    for (uint32_t id = 0; id < GGML_TYPE_COUNT_MAX; id++) {
        const ggml_type_info *ti = ggml_type_get(id);
        if (!ti) continue;
        char pat[32];
        snprintf(pat, sizeof pat, " %s,", ti->name);
        char list[256];
        snprintf(list, sizeof list, " %s,", kernel_supported_names());
        cr_expect_eq(strstr(list, pat) != NULL, kernel_type_supported(id), "%s", ti->name);
    }
}
