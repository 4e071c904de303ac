/* Growing an array by doubling: the one copy of the realloc dance that
 * every module used to write for itself. Capacities count elements.
 *
 *     if (TPS_GROW(list->v, list->cap, list->n + 1, 64)) return TPS_ENOMEM;
 *     list->v[list->n++] = x;
 *
 * Not here: text (base/sbuf.h builds strings), aligned scratch that may
 * drop its contents (kernels/matmul.c), limits (callers check their own
 * maximum before growing). */
#ifndef TPS_BASE_GROW_H
#define TPS_BASE_GROW_H

#include <stddef.h>

/* Makes room for `need` elements of `elem` bytes in the array whose address
 * is arrp (a T ** passed as void *), capacity *cap: the capacity doubles,
 * starting from `first`, until it holds need. 0, or TPS_ENOMEM with the
 * array and *cap unchanged (still the caller's to free). */
int tps_grow_slow(void *arrp, size_t *cap, size_t need, size_t elem, size_t first);

static inline int tps_grow(void *arrp, size_t *cap, size_t need, size_t elem, size_t first) {
    return need <= *cap ? 0 : tps_grow_slow(arrp, cap, need, elem, first);
}

/* TPS_GROW(ptr, cap, need, first) for a T *ptr and size_t cap (lvalues). */
#define TPS_GROW(ptr, cap, need, first) tps_grow(&(ptr), &(cap), (need), sizeof *(ptr), (first))

#endif
