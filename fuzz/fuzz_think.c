/* libFuzzer harness for the thinking-block splitter (engine/sample/think.h), which
 * reads model output: the first byte picks the start state and the markers'
 * row ("<think>" or gpt-oss's analysis channel), the second a piece
 * size, the rest is the text. Checks that the parts it hands on, in order,
 * are the text exactly (nothing lost, nothing added), that the markers are
 * exactly the marker text, and that fed whole or in pieces of any size the
 * split is the same. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sample/think.h"
#include "fuzz_split.h"

static void sink(void *ctx, think_part part, const char *p, size_t n) {
    if (part > THINK_PART_MARKER) abort();
    split_out_add(ctx, part, p, n);
}

/* Where the splitter starts: its state and its markers' row. */
typedef struct start {
    think_state st;
    think_kind kind;
} start;

static void run(const void *ctx, const uint8_t *text, size_t n, size_t step, split_out *o) {
    const start *at = ctx;
    think_split t;
    think_init_kind(&t, at->st, at->kind);
    for (size_t i = 0; i < n; i += step)
        think_feed(&t, (const char *)text + i, i + step <= n ? step : n - i, sink, o);
    think_flush(&t, sink, o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const start at = {(think_state)(data[0] % 3), /* OFF, START, IN */
                      (think_kind)(data[0] / 3 % THINK_N_KINDS)};
    const think_markers *mk = think_markers_of(at.kind);
    size_t n = size - 2;
    split_out a, b;
    uint8_t *buf = split_out_whole_and_pieces(&a, &b, data + 2, n, 1 + data[1] % 16, 3, run, &at);
    if (!buf) return 0;
    if (at.st == THINK_OFF && a.n[THINK_PART_CONTENT] != n) abort();
    /* markers: whitespace then the open marker, and/or the close marker */
    const uint8_t *m = a.parts[THINK_PART_MARKER];
    size_t nm = a.n[THINK_PART_MARKER];
    size_t close = strlen(mk->close);
    if (nm >= close && !memcmp(m + nm - close, mk->close, close)) nm -= close;
    size_t open = strlen(mk->open);
    if (nm && (nm < open || memcmp(m + nm - open, mk->open, open))) abort();
    free(buf);
    return 0;
}
