/* Lists a GGUF's tensors as llama.cpp's gguf reader sees them: one line
 * per tensor, sorted by name, "name type bytes fnv1a64-of-data", so two
 * files, one written by `tps model make` and one by llama-quantize,
 * compare with diff: same names, types and bytes means the same
 * quantization (tests/data/README.md; tests/test_quant_reference.c hashes
 * tps's tensors the same way). usage: gguf_tensors FILE.gguf; with
 * --data-offset, only the byte offset of the file's tensor data (where its
 * header, metadata and tensor infos end). Built by hand against a
 * llama.cpp build, never by CMake. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "gguf.h"

typedef struct row {
    char line[512];
} row;

static int cmp_row(const void *a, const void *b) {
    return strcmp(((const row *)a)->line, ((const row *)b)->line);
}

int main(int argc, char **argv) {
    const int offset_only = argc == 3 && !strcmp(argv[1], "--data-offset");
    if (argc != 2 && !offset_only) {
        fprintf(stderr, "usage: gguf_tensors [--data-offset] FILE.gguf\n");
        return 2;
    }
    const char *path = argv[argc - 1];
    struct gguf_init_params ip = {.no_alloc = true, .ctx = NULL};
    struct gguf_context *g = gguf_init_from_file(path, ip);
    FILE *f = fopen(path, "rb");
    if (!g || !f) return 1;
    if (offset_only) {
        printf("%zu\n", gguf_get_data_offset(g));
        return 0;
    }
    const int64_t n = gguf_get_n_tensors(g);
    row *rows = calloc((size_t)n, sizeof *rows);
    for (int64_t i = 0; i < n; i++) {
        const size_t size = gguf_get_tensor_size(g, i);
        unsigned char *buf = malloc(size);
        fseek(f, (long)(gguf_get_data_offset(g) + gguf_get_tensor_offset(g, i)), SEEK_SET);
        if (fread(buf, 1, size, f) != size) return 1;
        uint64_t h = 1469598103934665603ull; /* FNV-1a, 64 bits */
        for (size_t k = 0; k < size; k++)
            h = (h ^ buf[k]) * 1099511628211ull;
        free(buf);
        snprintf(rows[i].line, sizeof rows[i].line, "%s %s %zu %016llx", gguf_get_tensor_name(g, i),
                 ggml_type_name(gguf_get_tensor_type(g, i)), size, (unsigned long long)h);
    }
    qsort(rows, (size_t)n, sizeof *rows, cmp_row);
    for (int64_t i = 0; i < n; i++)
        printf("%s\n", rows[i].line);
    free(rows);
    fclose(f);
    gguf_free(g);
    return 0;
}
