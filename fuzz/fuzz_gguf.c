/* libFuzzer harness for the GGUF reader and the model loaders: any bytes
 * must open cleanly or fail with a message, every view of an opened file
 * must be readable, and a file whose config reads must bind its weights
 * (every supported architecture) or fail with a message. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "model/llama_config.h"
#include "model/llama_weights.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* A private copy of exactly `size` bytes so ASan catches any overread. */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    gguf_file *f;
    tps_err err;
    if (gguf_open_memory(&f, buf, size, &err) == 0) {
        volatile uint64_t sink = 0;
        for (uint64_t i = 0; i < f->n_kv; i++) {
            const gguf_value *v = &f->kv[i].val;
            if (v->type != GGUF_TYPE_ARRAY) continue;
            uint64_t n = v->arr.n < 16 ? v->arr.n : 16;
            for (uint64_t k = 0; k < n; k++) {
                gguf_value e;
                if (gguf_array_elem(v, k, &e) == 0) sink += e.type;
            }
            if (v->arr.type == GGUF_TYPE_STRING && v->arr.n < 100000) {
                gguf_str *s = malloc(v->arr.n * sizeof *s + 1);
                if (s && gguf_array_strings(v, s) == 0 && v->arr.n) sink += s[0].len;
                free(s);
            }
        }
        for (uint64_t i = 0; i < f->n_tensors; i++) {
            const uint8_t *d = f->tensors[i].data;
            if (f->tensors[i].nbytes) sink += d[0] + d[f->tensors[i].nbytes - 1];
        }
        llama_config cfg;
        llama_weights w;
        /* bounds that keep the owned vectors' allocation small (experts'
         * biases are n_expert x expert_ffn each) */
        if (llama_config_read(&cfg, f, &err) == 0 && cfg.n_layers <= 64 && cfg.dim <= 4096 &&
            (uint64_t)cfg.n_expert * cfg.expert_ffn <= (1u << 20) &&
            llama_weights_bind(&w, &cfg, f, &err) == 0)
            llama_weights_free(&w);
        (void)sink;
        gguf_close(f);
    }
    free(buf);
    return 0;
}
