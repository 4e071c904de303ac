/* ggml's MXFP4 dequantizer and reference quantizer on fixed inputs, for
 * tests/test_moe_kernels.c (tests/data/README.md says how it was run).
 * usage: dump_mxfp4 OUT_DIR writes
 *   blocks.bin    N_DQ blocks of 17 bytes: every E8M0 exponent 0..255 once
 *                 with every code in both nibbles, then pseudo-random blocks
 *   dequant.f32   ggml's to_float of those blocks (N_DQ * 32 floats)
 *   quant_in.f32  N_Q * 32 floats: blocks of varied scale (10^-30..10^6),
 *                 zeros, ties between codes and sign changes
 *   quant_out.bin ggml's from_float_ref of them (N_Q blocks of 17 bytes) */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"

#define N_DQ 512
#define N_Q  256

static uint64_t st = 0x243f6a8885a308d3ull;
static uint64_t next(void) {
    st ^= st << 13;
    st ^= st >> 7;
    st ^= st << 17;
    return st;
}

static FILE *open_in(const char *dir, const char *name) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f) {
        perror(p);
        exit(1);
    }
    return f;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: dump_mxfp4 OUT_DIR\n");
        return 2;
    }
    const struct ggml_type_traits *tt = ggml_get_type_traits(GGML_TYPE_MXFP4);
    static uint8_t blocks[N_DQ * 17];
    for (int b = 0; b < N_DQ; b++) {
        uint8_t *p = blocks + b * 17;
        p[0] = b < 256 ? (uint8_t)b : (uint8_t)next();
        for (int j = 0; j < 16; j++)
            p[1 + j] = b < 256 ? (uint8_t)(j | ((j + b) & 15) << 4) : (uint8_t)next();
    }
    static float dq[N_DQ * 32];
    tt->to_float(blocks, dq, N_DQ * 32);
    static float qin[N_Q * 32];
    for (int b = 0; b < N_Q; b++) {
        const double scale = pow(10.0, -30.0 + 36.0 * (double)(next() % 1000) / 1000.0);
        for (int j = 0; j < 32; j++) {
            float v = (float)(((double)(next() % 2000001) / 1000000.0 - 1.0) * scale);
            if (b % 8 == 1) v = 0.0f;
            if (b % 8 == 2 && j > 0) /* midpoints between codes at the block's scale */
                v = (float)((j % 8) + 0.5) * qin[b * 32] / 7.0f;
            if (b % 8 == 3) v = j % 2 ? -v : v;
            qin[b * 32 + j] = v;
        }
        if (b % 8 == 2) qin[b * 32] = (float)scale;
    }
    static uint8_t qout[N_Q * 17];
    tt->from_float_ref(qin, qout, N_Q * 32);
    FILE *f = open_in(argv[1], "blocks.bin");
    fwrite(blocks, 1, sizeof blocks, f);
    fclose(f);
    f = open_in(argv[1], "dequant.f32");
    fwrite(dq, sizeof(float), N_DQ * 32, f);
    fclose(f);
    f = open_in(argv[1], "quant_in.f32");
    fwrite(qin, sizeof(float), N_Q * 32, f);
    fclose(f);
    f = open_in(argv[1], "quant_out.bin");
    fwrite(qout, 1, sizeof qout, f);
    fclose(f);
    return 0;
}
