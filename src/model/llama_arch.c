/* The table of supported architectures. Adding one means a row here, its
 * tensors in llama_weights and, if it computes something new, a step in the
 * forward pass switched on by a field of this row, never a second copy of
 * the pass. Facts as llama.cpp's src/models/<arch>.cpp has them. */
#include <string.h>

#include "model/llama_arch.h"

static const llama_arch archs[] = {
    {LLAMA_ARCH_LLAMA, "llama", 0, 0, .moe_norm_w = 1,
     .specifics = "RMSNorm, SwiGLU, RoPE on adjacent pairs; optional Q/K/V biases, rope_freqs "
                  "(Llama 3.1 RoPE scaling) and tied embeddings; with expert_count, Mixtral's "
                  "experts (softmax router, top k renormalised)"},
    {LLAMA_ARCH_QWEN2, "qwen2", 1, 0,
     .specifics = "Llama with Q/K/V biases and NeoX-order RoPE; optional tied embeddings"},
    {LLAMA_ARCH_QWEN3, "qwen3", 1, 1,
     .specifics = "Llama with per-head Q/K RMSNorm before NeoX-order RoPE; head size from "
                  "attention.key_length; optional tied embeddings"},
    {LLAMA_ARCH_GEMMA2, "gemma2", 1, 0, .q_prescale = 1, .gemma = 1, .swa_period = 2,
     .swa_window = 4096, .attn_softcap = 50.0f, .final_softcap = 30.0f,
     .specifics = "embeddings x sqrt(dim), GeGLU, pre- and post-norms, attention and final "
                  "logit soft-capping, sliding window on alternate layers, NeoX RoPE"},
    {LLAMA_ARCH_GEMMA3, "gemma3", 1, 1, .q_prescale = 1, .gemma = 1, .swa_period = 6,
     .rope_swa_base_10k = 1,
     .specifics = "Gemma 2 without soft-capping, with per-head Q/K RMSNorm; local (sliding-window, "
                  "own RoPE base) and global layers, 5 to 1 unless the file says"},
    {LLAMA_ARCH_PHI3, "phi3", 1, 0, .q_prescale = 1,
     .specifics = "Llama with fused attn_qkv and gate|up (ffn_up of 2 x ffn) tensors, NeoX "
                  "RoPE; LongRoPE short/long factors (rope_factors_short/long) chosen by the "
                  "served context"},
    {LLAMA_ARCH_MISTRAL3, "mistral3", 0, 0,
     .specifics = "Llama layout (adjacent-pair RoPE, head size from attention.key_length); "
                  "YaRN and attention temperature scaling are refused"},
    {LLAMA_ARCH_QWEN3MOE, "qwen3moe", 1, 1, .moe = 1, .moe_norm_w = 1,
     .specifics = "Qwen3 attention (per-head Q/K RMSNorm, NeoX RoPE) with a mixture of experts: "
                  "softmax router, top k (8 of 128) renormalised; expert_feed_forward_length"},
    {LLAMA_ARCH_GPT_OSS, "gpt-oss", 1, 0, .swa_period = 2, .swa_window = 128, .moe = 1,
     .gating = LLAMA_GATING_SOFTMAX_WEIGHT, .oai = 1,
     .specifics = "attention sinks, Q/K/V/output biases, sliding window (128) on alternate "
                  "layers, YaRN RoPE; experts (usually MXFP4) with biases, top k logits "
                  "softmaxed, SwiGLU clamped at 7 (alpha 1.702)"},
    {LLAMA_ARCH_QWEN35, "qwen35", 1, 1, .hybrid = 1,
     .specifics = "gated DeltaNet linear attention (causal conv, delta-rule state per head, "
                  "gated RMSNorm) on all layers but every full_attention_interval-th (4 in "
                  "Qwen3.5), full attention there with a sigmoid output gate, Q/K norm and "
                  "M-RoPE on part of each head; MTP layers loaded, not run"},
    {LLAMA_ARCH_QWEN35MOE, "qwen35moe", 1, 1, .hybrid = 1, .moe = 1, .moe_norm_w = 1, .shexp = 1,
     .specifics = "qwen35's stack with a mixture of experts on every layer: softmax router, top "
                  "k (8 of 256) renormalised, and a shared expert scaled by a sigmoid gate per "
                  "token; MTP layers loaded, not run"},
    {LLAMA_ARCH_GLM4MOE, "glm4moe", 1, 0, .moe = 1, .gating = LLAMA_GATING_SIGMOID,
     .moe_file_rules = 1, .qk_norm_opt = 1,
     .specifics = "Q/K/V biases, NeoX RoPE on part of each head, Q/K norm where the "
                  "file has it; leading dense layers, then experts: sigmoid router with a "
                  "selection bias, top k (8 of 128), weights renormalised and scaled as the "
                  "file says, plus shared experts; MTP layers loaded, not run"},
    {LLAMA_ARCH_DEEPSEEK2, "deepseek2", 0, 0, .moe = 1, .moe_file_rules = 1, .mla = 1,
     .specifics = "multi-head latent attention: the cache holds one latent row a position "
                  "(kv_lora_rank + the RoPE part), Q absorbed per head into it for every step; "
                  "YaRN with DeepSeek's mscale; leading dense layers, then experts routed as the "
                  "file says (softmax or sigmoid with a selection bias, expert groups) plus "
                  "ungated shared experts"},
    {LLAMA_ARCH_GEMMA4, "gemma4", 1, 1, .gemma = 1, .swa_period = 6, .rope_swa_base_10k = 1,
     .final_softcap = 30.0f, .gemma4 = 1, .moe_norm_w = 1,
     .specifics = "Gemma 3's block with sliding and global layers of their own head sizes, KV "
                  "heads and RoPE (partial on global layers through rope_freqs), V normed, "
                  "attention scale 1, the last layers reading earlier layers' K/V (storing "
                  "none), per-layer input embeddings, a layer output scale, final soft-cap; "
                  "where the file has experts (26B-A4B) they run beside the dense FFN: a "
                  "softmax router on the scaled, normed residual, top k (8 of 128) "
                  "renormalised, a scale per expert, each half with its own norms"},
};

const llama_arch *llama_arch_find(const char *name) {
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (!strcmp(archs[i].name, name)) return &archs[i];
    return NULL;
}

const char *llama_arch_names(void) {
    return "llama, qwen2, qwen3, gemma2, gemma3, phi3, mistral3, qwen3moe, gpt-oss, qwen35, "
           "qwen35moe, glm4moe, deepseek2, gemma4";
}
