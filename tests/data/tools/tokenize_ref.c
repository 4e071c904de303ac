/* llama.cpp's tokenization of a test-tokenizer-0 file, for tps's tokenizer
 * tests. usage: tokenize_ref VOCAB.gguf TEXTS.inp [special] > IDS.out
 * TEXTS.inp holds cases separated by "\n__ggml_vocab_test__\n" (llama.cpp's
 * tests/test-tokenizer-0 format); each output line is one case's ids,
 * each preceded by a space, as test-tokenizer-0's .out files: add_special
 * and parse_special off, or both on with `special`. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "llama.h"

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: tokenize_ref VOCAB TEXTS.inp [special]\n");
        return 2;
    }
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) return 1;
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    FILE *f = fopen(argv[2], "rb");
    if (!f) return 1;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    static const char sep[] = "\n__ggml_vocab_test__\n";
    static llama_token ids[1 << 16];
    for (char *p = buf; *p;) {
        char *e = strstr(p, sep);
        if (!e) break;
        const bool special = argc == 4;
        int k = llama_tokenize(vocab, p, (int)(e - p), ids, 1 << 16, special, special);
        if (k < 0) return 1;
        for (int i = 0; i < k; i++)
            printf(" %d", ids[i]);
        printf("\n");
        p = e + sizeof sep - 1;
    }
    llama_model_free(model);
    return 0;
}
