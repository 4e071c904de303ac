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

static void run(const void *ctx, const uint8_t *text, size_t n, size_t step, split_out *o) {
    (void)ctx;
    harmony_split h;
    harmony_init(&h);
    for (size_t i = 0; i < n; i += step)
        harmony_feed(&h, (const char *)text + i, i + step <= n ? step : n - i, sink, o);
    harmony_flush(&h, sink, o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    split_out a, b;
    free(split_out_whole_and_pieces(&a, &b, data + 1, size - 1, 1 + data[0] % 16, 4, run, NULL));
    return 0;
}
