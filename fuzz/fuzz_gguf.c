/* libFuzzer harness for the GGUF reader and the model loaders: any bytes
 * must open cleanly or fail with a message, every view of an opened file
 * must be readable, and a file whose config reads must bind its weights
 * (every supported architecture) or fail with a message. Every tensor of
 * a type the kernels run goes through them as the loader would send it:
 * its first row dequantized (the embedding lookup), the first rows
 * multiplied by an activation row, and 8 rows repacked into a group and
 * multiplied again: arbitrary block bytes (scales that are NaN or inf,
 * any quants) in every block format. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "model/gguf.h"
#include "model/llama_config.h"
#include "model/llama_weights.h"

/* The kernels on tensor t: small shapes only, so a run stays fast. */
static void run_kernels(const gguf_tensor *t, kernel_ctx *ctx) {
    enum { MAX_IN = 4096, MAX_OUT = 16 };
    const size_t n_in = (size_t)t->ne[0];
    if (!kernel_type_supported(t->type) || n_in == 0 || n_in > MAX_IN) return;
    const size_t row_bytes = kernel_row_bytes(t->type, n_in);
    if (row_bytes == 0 || t->nbytes < row_bytes) return;
    static float x[MAX_IN], y[MAX_IN], out[MAX_OUT];
    for (size_t i = 0; i < n_in; i++)
        x[i] = (float)((int)(i % 7) - 3) * 0.25f;
    (void)dequantize_row(y, t->data, t->type, n_in);
    size_t rows = t->nbytes / row_bytes;
    if (rows > MAX_OUT) rows = MAX_OUT;
    (void)kernel_matmul(out, t->data, t->type, x, 1, n_in, rows, ctx);
    const uint32_t packed = kernel_packed_type(t->type);
    if (!packed || rows < 8) return;
    uint8_t *group = malloc(8 * row_bytes);
    if (group && kernel_repack(group, t->data, t->type, 8, n_in) == 0)
        (void)kernel_matmul(out, group, packed, x, 1, n_in, 8, ctx);
    free(group);
}

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
        kernel_ctx *ctx = NULL;
        tps_err kerr;
        (void)kernel_ctx_create(&ctx, 1, 1, 0, &kerr);
        for (uint64_t i = 0; i < f->n_tensors; i++) {
            const uint8_t *d = f->tensors[i].data;
            if (f->tensors[i].nbytes) sink += d[0] + d[f->tensors[i].nbytes - 1];
            if (ctx) run_kernels(&f->tensors[i], ctx);
        }
        kernel_ctx_free(ctx);
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
