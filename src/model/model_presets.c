/* The presets tps model make knows (model_presets: a real model's shape
 * each, the mixture-of-experts, hybrid, latent and Gemma 4 rows completed
 * by their architecture's shape tables) and their names: a preset found
 * by name, and `name`-thin, the preset `name`'s layers, heads and routing
 * at the width and vocabulary of its own row, which the shape tables of
 * model_make_gemma4.c, model_make_hybrid.c and model_make_mla.c take from
 * `name`'s row. Nothing here writes a file. */
#include <string.h>
#include <strings.h>

#include "model/model_make.h"

const model_preset model_presets[] = {
    {"tiny", "stories260K (FFN 192)", 64, 5, 8, 4, 192, 512, 512, 10000.0f},
    {"mini", "a step above tiny (the quick demo's model-size contrast)", 192, 6, 6, 6, 512, 512,
     512, 10000.0f},
    {"15M", "llama2.c stories15M", 288, 6, 6, 6, 768, 32000, 2048, 10000.0f},
    {"110M", "llama2.c stories110M", 768, 12, 12, 12, 2048, 32000, 2048, 10000.0f},
    {"q256", "a test shape with rows of whole superblocks and GQA 4", 256, 4, 8, 2, 768, 512, 512,
     10000.0f},
    {"q896", "a test shape with Qwen2.5-0.5B's dim 896", 896, 2, 14, 2, 512, 512, 512, 10000.0f},
    {"0.5B", "Qwen2.5-0.5B (dim 896: its rows are not whole superblocks)", 896, 24, 14, 2, 4864,
     151936, 32768, 1000000.0f},
    {"1B", "TinyLlama-1.1B", 2048, 22, 32, 4, 5632, 32000, 2048, 10000.0f},
    {"8B", "Llama-3-8B", 4096, 32, 32, 8, 14336, 128256, 8192, 500000.0f},
    /* mixtures of experts (model_moe_shapes has their experts) */
    {"mini-moe", "mini's active size as 16 experts, 2 a token (the demo's MoE)", 192, 6, 6, 6, 256,
     512, 512, 10000.0f},
    {"moe-2B", "a mid-size Qwen3-MoE, 0.5B active", 1024, 24, 16, 4, 4096, 32000, 4096, 1000000.0f},
    {"30B-A3B", "Qwen3-30B-A3B", 2048, 48, 32, 4, 6144, 151936, 40960, 1000000.0f},
    {"8x7B", "Mixtral-8x7B", 4096, 32, 32, 8, 14336, 32000, 32768, 1000000.0f},
    {"gpt-oss-20b", "gpt-oss-20b", 2880, 24, 64, 8, 2880, 201088, 131072, 150000.0f},
    /* hybrid stacks (model_preset_hybrid has their linear layers) */
    {"0.8B", "Qwen3.5-0.8B (--arch qwen35)", 1024, 24, 8, 2, 3584, 248320, 262144, 10000000.0f},
    {"0.8B-thin", "Qwen3.5-0.8B's 24 layers at width 256 and vocab 512 (--arch qwen35, qwen35moe)",
     256, 24, 8, 2, 128, 512, 512, 10000000.0f},
    {"9B", "Qwen3.5-9B (--arch qwen35)", 4096, 32, 16, 4, 12288, 248320, 262144, 10000000.0f},
    {"35B-A3B", "Qwen3.5-35B-A3B (--arch qwen35moe)", 2048, 40, 16, 2, 512, 248320, 262144,
     10000000.0f},
    {"106B-A12B", "GLM-4.5-Air (--arch glm4moe)", 4096, 46, 96, 8, 10944, 151552, 131072,
     1000000.0f},
    {"16B-A2.4B", "DeepSeek-V2-Lite (--arch deepseek2; its latent is one KV head)", 2048, 27, 16, 1,
     10944, 102400, 163840, 10000.0f},
    {"16B-A2.4B-thin", "DeepSeek-V2-Lite's 27 layers at width 256 and vocab 512 (--arch deepseek2)",
     256, 27, 16, 1, 128, 512, 163840, 10000.0f},
    {"E4B", "Gemma-4-E4B (--arch gemma4)", 2560, 42, 8, 2, 10240, 262144, 131072, 1000000.0f},
    {"31B", "Gemma-4-31B (--arch gemma4)", 5376, 60, 32, 16, 21504, 262144, 262144, 1000000.0f},
    {"26B-A4B", "Gemma-4-26B-A4B (--arch gemma4)", 2816, 30, 16, 8, 2112, 262144, 262144,
     1000000.0f},
    {"E4B-thin", "Gemma-4-E4B's 42 layers at width 256 and vocab 512 (--arch gemma4)", 256, 42, 8,
     2, 512, 512, 512, 1000000.0f},
    {"tiny-moe", "tiny with 8 experts of 32, 2 a token (--arch gemma4)", 64, 5, 8, 4, 192, 512, 512,
     10000.0f},
    {NULL, NULL, 0, 0, 0, 0, 0, 0, 0, 0},
};

const model_preset *model_preset_find(const char *name) {
    for (const model_preset *p = model_presets; p->name; p++)
        if (!strcasecmp(p->name, name)) return p;
    return NULL;
}

static const char THIN[] = "-thin";

int model_preset_thin(const model_preset *p) {
    const size_t n = strlen(p->name), t = sizeof THIN - 1;
    return n > t && !strcmp(p->name + n - t, THIN);
}

int model_preset_is(const model_preset *p, const char *name) {
    const size_t n = strlen(name);
    return !strncmp(p->name, name, n) && (!p->name[n] || !strcmp(p->name + n, THIN));
}
