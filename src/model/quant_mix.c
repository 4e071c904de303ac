/* llama.cpp's file types and its per-tensor type rules (quant_mix.h), read
 * from llama.cpp's src/llama-quant.cpp (llama_tensor_get_type_impl and
 * tensor_type_fallback) for a Llama-family model with no experts and no
 * importance matrix (so not Q2_K_S, which llama-quantize makes only with
 * one). tests/test_quant_mix.c compares the result with the
 * types llama-quantize wrote into reference files. */
#include "model/quant_mix.h"

#include <string.h>
#include <strings.h>

#include "base/ggml_type.h"

/* LLAMA_FTYPE_MOSTLY_* numbers (llama.h) */
enum {
    FT_F32 = 0,
    FT_F16 = 1,
    FT_Q4_0 = 2,
    FT_Q4_1 = 3,
    FT_Q8_0 = 7,
    FT_Q5_0 = 8,
    FT_Q5_1 = 9,
    FT_Q2_K = 10,
    FT_Q3_K_S = 11,
    FT_Q3_K_M = 12,
    FT_Q3_K_L = 13,
    FT_Q4_K_S = 14,
    FT_Q4_K_M = 15,
    FT_Q5_K_S = 16,
    FT_Q5_K_M = 17,
    FT_Q6_K = 18,
    FT_IQ4_NL = 25,
    FT_IQ4_XS = 30,
    FT_BF16 = 32,
};

const quant_ftype quant_ftypes[] = {
    {"f32", FT_F32, GGML_TYPE_F32},          {"f16", FT_F16, GGML_TYPE_F16},
    {"bf16", FT_BF16, GGML_TYPE_BF16},       {"q8_0", FT_Q8_0, GGML_TYPE_Q8_0},
    {"q4_0", FT_Q4_0, GGML_TYPE_Q4_0},       {"q4_1", FT_Q4_1, GGML_TYPE_Q4_1},
    {"q5_0", FT_Q5_0, GGML_TYPE_Q5_0},       {"q5_1", FT_Q5_1, GGML_TYPE_Q5_1},
    {"q2_k", FT_Q2_K, GGML_TYPE_Q2_K},       {"q3_k_s", FT_Q3_K_S, GGML_TYPE_Q3_K},
    {"q3_k_m", FT_Q3_K_M, GGML_TYPE_Q3_K},   {"q3_k_l", FT_Q3_K_L, GGML_TYPE_Q3_K},
    {"q4_k_s", FT_Q4_K_S, GGML_TYPE_Q4_K},   {"q4_k_m", FT_Q4_K_M, GGML_TYPE_Q4_K},
    {"q5_k_s", FT_Q5_K_S, GGML_TYPE_Q5_K},   {"q5_k_m", FT_Q5_K_M, GGML_TYPE_Q5_K},
    {"q6_k", FT_Q6_K, GGML_TYPE_Q6_K},       {"iq4_nl", FT_IQ4_NL, GGML_TYPE_IQ4_NL},
    {"iq4_xs", FT_IQ4_XS, GGML_TYPE_IQ4_XS}, {NULL, 0, 0},
};

const quant_ftype *quant_ftype_find(const char *name) {
    for (const quant_ftype *f = quant_ftypes; f->name; f++)
        if (!strcasecmp(f->name, name)) return f;
    return NULL;
}

const quant_ftype *quant_ftype_by_number(uint32_t ftype) {
    for (const quant_ftype *f = quant_ftypes; f->name; f++)
        if (f->ftype == ftype) return f;
    return NULL;
}

/* The tensor kinds the rules tell apart (llama-quant.cpp's categories). */
typedef enum { C_OTHER, C_OUTPUT, C_TOKEN_EMBD, C_ATTN_V, C_ATTN_OUT, C_FFN_DOWN } category;

static category category_of(const char *name) {
    if (!strcmp(name, "output.weight")) return C_OUTPUT;
    if (!strcmp(name, "token_embd.weight")) return C_TOKEN_EMBD;
    if (strstr(name, "attn_qkv.weight") || strstr(name, "attn_v.weight")) return C_ATTN_V;
    if (strstr(name, "attn_output.weight")) return C_ATTN_OUT;
    if (strstr(name, "ffn_down")) return C_FFN_DOWN;
    return C_OTHER;
}

/* First and last eighth of the layers, and every third between. */
static int use_more_bits(int i, int n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

static uint32_t attn_v_type(uint32_t ft, uint32_t t, int i, int n, uint32_t gqa) {
    if (ft == FT_Q2_K) return gqa >= 4 ? GGML_TYPE_Q4_K : GGML_TYPE_Q3_K;
    if (ft == FT_Q3_K_M) return i < 2 ? GGML_TYPE_Q5_K : GGML_TYPE_Q4_K;
    if (ft == FT_Q3_K_L) return GGML_TYPE_Q5_K;
    if ((ft == FT_IQ4_NL || ft == FT_IQ4_XS) && gqa >= 4) return GGML_TYPE_Q5_K;
    if ((ft == FT_Q4_K_M || ft == FT_Q5_K_M) && use_more_bits(i, n)) return GGML_TYPE_Q6_K;
    if (ft == FT_Q4_K_S && i < 4) return GGML_TYPE_Q5_K;
    return t;
}

static uint32_t ffn_down_type(uint32_t ft, uint32_t t, int i, int n) {
    if (ft == FT_Q2_K) return GGML_TYPE_Q3_K;
    if (ft == FT_Q3_K_M) return i < n / 16 ? GGML_TYPE_Q5_K : GGML_TYPE_Q4_K;
    if (ft == FT_Q3_K_L) return GGML_TYPE_Q5_K;
    if (ft == FT_Q4_K_M) return use_more_bits(i, n) ? GGML_TYPE_Q6_K : t;
    if (i < n / 8 && (ft == FT_IQ4_NL || ft == FT_IQ4_XS)) return GGML_TYPE_Q5_K;
    if (ft == FT_Q5_K_M && use_more_bits(i, n)) return GGML_TYPE_Q6_K;
    if (ft == FT_Q4_K_S && i < n / 8) return GGML_TYPE_Q5_K;
    return t;
}

static uint32_t attn_out_type(uint32_t ft, uint32_t t) {
    if (ft == FT_Q2_K) return GGML_TYPE_Q3_K;
    if (ft == FT_Q3_K_M) return GGML_TYPE_Q4_K;
    if (ft == FT_Q3_K_L) return GGML_TYPE_Q5_K;
    return t;
}

/* A row of cols that is not whole blocks of t takes the type llama-quantize
 * falls back to, or F16 when that does not fit either. */
static uint32_t fallback(uint32_t t, uint64_t cols) {
    if (cols % ggml_type_get(t)->block_size == 0) return t;
    switch (t) {
    case GGML_TYPE_IQ4_XS:
        t = GGML_TYPE_IQ4_NL;
        break;
    case GGML_TYPE_Q2_K:
    case GGML_TYPE_Q3_K:
        t = GGML_TYPE_Q4_0;
        break;
    case GGML_TYPE_Q4_K:
        t = GGML_TYPE_Q5_0;
        break;
    case GGML_TYPE_Q5_K:
        t = GGML_TYPE_Q5_1;
        break;
    case GGML_TYPE_Q6_K:
        t = GGML_TYPE_Q8_0;
        break;
    default:
        return GGML_TYPE_F16;
    }
    return cols % ggml_type_get(t)->block_size == 0 ? t : GGML_TYPE_F16;
}

uint32_t quant_mix_type(const quant_ftype *ft, const quant_mix_model *m, const char *name,
                        uint64_t cols, uint32_t layer) {
    const uint32_t base = ft->base, f = ft->ftype;
    if (base == GGML_TYPE_F32 || base == GGML_TYPE_F16 || base == GGML_TYPE_BF16) return base;
    const category c = category_of(name);
    const int i = (int)layer, n = (int)m->n_layers;
    const uint32_t gqa = m->n_head_kv ? m->n_head / m->n_head_kv : 1;
    uint32_t t = base;
    if (c == C_OUTPUT || (m->tied && c == C_TOKEN_EMBD)) {
        if (cols % ggml_type_get(base)->block_size != 0)
            t = GGML_TYPE_Q8_0;
        else if (base != GGML_TYPE_Q8_0)
            t = GGML_TYPE_Q6_K;
    } else if (c == C_ATTN_V) {
        t = attn_v_type(f, base, i, n, gqa);
    } else if (c == C_FFN_DOWN) {
        t = ffn_down_type(f, base, i, n);
    } else if (c == C_ATTN_OUT) {
        t = attn_out_type(f, base);
    }
    return fallback(t, cols);
}
