/* libFuzzer harness for the harmony splitter (server/harmony.h), which
 * reads model output: the first byte picks a piece size, the rest is the
 * text. Checks that the parts it hands on, in order, are the text exactly
 * (nothing lost, nothing added), and that fed whole or in pieces of any
 * size the split is the same. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/harmony.h"

typedef struct out {
    uint8_t *all, *parts[4];
    size_t n_all, n[4];
} out;

static void sink(void *ctx, harmony_part part, const char *p, size_t n) {
    out *o = ctx;
    if (!n || part > HARMONY_CALL) abort();
    memcpy(o->all + o->n_all, p, n);
    o->n_all += n;
    memcpy(o->parts[part] + o->n[part], p, n);
    o->n[part] += n;
}

static void run(const uint8_t *text, size_t n, size_t step, out *o) {
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
    size_t n = size - 1, w = n + 1;
    uint8_t *buf = malloc(10 * w);
    if (!buf) return 0;
    out a = {.all = buf, .parts = {buf + w, buf + 2 * w, buf + 3 * w, buf + 4 * w}};
    out b = {.all = buf + 5 * w, .parts = {buf + 6 * w, buf + 7 * w, buf + 8 * w, buf + 9 * w}};
    run(text, n, n ? n : 1, &a);
    run(text, n, step, &b);
    if (a.n_all != n || memcmp(a.all, text, n)) abort(); /* the text, in order */
    for (int p = 0; p < 4; p++)
        if (a.n[p] != b.n[p] || memcmp(a.parts[p], b.parts[p], a.n[p])) abort();
    free(buf);
    return 0;
}
