/* Greedy ids and teacher-forced logits from llama.cpp for tps's
 * per-architecture and per-file-type reference tests.
 * usage: dump_ref MODEL.gguf OUT_PREFIX [N_LOGIT_CASES (default 2)]
 * writes OUT_PREFIX.json (prompts, prompt ids, 16 greedy ids each, smallest
 * top1-top2 margin) and OUT_PREFIX.logits.f32 (the first N_LOGIT_CASES
 * prompts: 16 x n_vocab little-endian floats each, the logits each greedy
 * id was chosen from). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "llama.h"

#define N_GEN                 16
#define N_LOGIT_CASES_DEFAULT 2
static const char *PROMPTS[5] = {"Once upon a time", "The quick brown fox", "", "1 2 3 4 5",
                                 "Hello, world! How are you today?"};

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

int main(int argc, char **argv) {
    const int N_LOGIT_CASES = argc == 4 ? atoi(argv[3]) : N_LOGIT_CASES_DEFAULT;
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: dump_ref MODEL OUT_PREFIX [N_LOGIT_CASES]\n");
        return 2;
    }
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) return 1;
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int nv = llama_vocab_n_tokens(vocab);
    char path[1024];
    snprintf(path, sizeof path, "%s.json", argv[2]);
    FILE *js = fopen(path, "w");
    snprintf(path, sizeof path, "%s.logits.f32", argv[2]);
    FILE *lf = fopen(path, "wb");
    fprintf(js, "{\"n_vocab\": %d, \"n_generated\": %d, \"n_logit_cases\": %d, \"cases\": [\n", nv,
            N_GEN, N_LOGIT_CASES);
    for (int c = 0; c < 5; c++) {
        struct llama_context_params cp = llama_context_default_params();
        cp.n_ctx = 512;
        cp.n_batch = 512;
        cp.n_ubatch = 512;
        cp.n_threads = 2;
        cp.n_threads_batch = 2;
        cp.type_k = GGML_TYPE_F32;
        cp.type_v = GGML_TYPE_F32;
        cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
        cp.no_perf = true;
        struct llama_context *ctx = llama_init_from_model(model, cp);
        if (!ctx) return 1;
        llama_token ids[256];
        int n = llama_tokenize(vocab, PROMPTS[c], (int)strlen(PROMPTS[c]), ids, 256, true, false);
        if (n <= 0) {
            fprintf(stderr, "prompt %d: no tokens\n", c);
            return 1;
        }
        fprintf(js, "  {\"prompt\": ");
        json_str(js, PROMPTS[c]);
        fprintf(js, ", \"prompt_ids\": [");
        for (int i = 0; i < n; i++)
            fprintf(js, "%s%d", i ? ", " : "", ids[i]);
        fprintf(js, "], \"greedy_ids\": [");
        llama_token tok[256];
        memcpy(tok, ids, sizeof(llama_token) * n);
        struct llama_batch b = llama_batch_get_one(tok, n);
        double min_margin = 1e30;
        for (int g = 0; g < N_GEN; g++) {
            if (llama_decode(ctx, b)) {
                fprintf(stderr, "decode failed\n");
                return 1;
            }
            const float *lg = llama_get_logits_ith(ctx, -1);
            int best = 0, second = -1;
            for (int i = 1; i < nv; i++)
                if (lg[i] > lg[best]) best = i;
            for (int i = 0; i < nv; i++)
                if (i != best && (second < 0 || lg[i] > lg[second])) second = i;
            if (lg[best] - lg[second] < min_margin) min_margin = lg[best] - lg[second];
            if (c < N_LOGIT_CASES) fwrite(lg, sizeof(float), nv, lf);
            fprintf(js, "%s%d", g ? ", " : "", best);
            tok[n + g] = best;
            b = llama_batch_get_one(&tok[n + g], 1);
        }
        fprintf(js, "], \"min_top2_margin\": %.6g}%s\n", min_margin, c < 4 ? "," : "");
        llama_free(ctx);
    }
    fprintf(js, "]}\n");
    fclose(js);
    fclose(lf);
    llama_model_free(model);
    return 0;
}
