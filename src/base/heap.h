/* A binary min-heap's two sifts over an array its caller owns and grows
 * (TPS_GROW), for elements of any type: before(a, b) orders them, and
 * elements neither before the other come out in no promised order. Static
 * inline so that each caller's comparison is inlined into its own copy.
 * Not here: allocation, the element type. */
#ifndef TPS_BASE_HEAP_H
#define TPS_BASE_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

typedef bool (*tps_heap_before)(const void *a, const void *b);

/* v[0..n) is a heap of size-byte elements with room for one more; x (not
 * in v) joins it: v[0..n] is a heap after. */
static inline void tps_heap_push(void *v, size_t n, const void *x, size_t size,
                                 tps_heap_before before) {
    unsigned char *a = v;
    size_t i = n;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(x, a + parent * size)) break;
        memcpy(a + i * size, a + parent * size, size);
        i = parent;
    }
    memcpy(a + i * size, x, size);
}

/* v[0..n) is a heap, n >= 1: its top is copied to top, and v[0..n-1) is a
 * heap after (v[n-1], the last element, is sifted down from the root). */
static inline void tps_heap_pop(void *v, size_t n, size_t size, tps_heap_before before, void *top) {
    unsigned char *a = v;
    memcpy(top, a, size);
    const unsigned char *last = a + --n * size; /* past the heap now: read, never written */
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && before(a + (c + 1) * size, a + c * size)) c++;
        if (!before(a + c * size, last)) break;
        memcpy(a + i * size, a + c * size, size);
        i = c;
    }
    if (n) memcpy(a + i * size, last, size);
}

#endif
