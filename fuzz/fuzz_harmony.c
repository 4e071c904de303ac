/* libFuzzer harness for the harmony splitter (server/harmony.h), which
 * reads model output: the first byte picks a piece size, the rest is the
 * text. Checks that the parts it hands on, in order, are the text exactly
 * (nothing lost, nothing added), and that fed whole or in pieces of any
 * size the split is the same. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_split.h"
#include "server/tools/harmony.h"

static void sink(void *ctx, harmony_part part, const char *p, size_t n) {
    if (part > HARMONY_CALL) abort();
    split_out_add(ctx, part, p, n);
}

static void run(const uint8_t *text, size_t n, size_t step, split_out *o) {
    harmony_split h;
    harmony_init(&h);
    for (size_t i = 0; i < n; i += step)
        harmony_feed(&h, (const char *)text + i, i + step <= n ? step : n - i, sink, o);
    harmony_flush(&h, sink, o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    size_t step = 1 + data[0] % 16;
    const uint8_t *text = data + 1;
    size_t n = size - 1;
    split_out a, b;
    uint8_t *buf = split_out_init(&a, &b, n, 4);
    if (!buf) return 0;
    run(text, n, n ? n : 1, &a);
    run(text, n, step, &b);
    split_out_check(&a, &b, text, n, 4);
    free(buf);
    return 0;
}
