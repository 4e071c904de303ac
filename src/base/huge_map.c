#include "base/huge_map.h"

#include <stdint.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)

void *huge_map(size_t bytes) {
    if (bytes == 0 || bytes > SIZE_MAX - HUGE_PAGE) return NULL;
    /* over-map by one huge page and trim both ends to a 2 MiB-aligned run */
    const size_t span = bytes + HUGE_PAGE;
    uint8_t *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    uint8_t *p = (uint8_t *)(((uintptr_t)m + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (p > m) (void)munmap(m, (size_t)(p - m));
    const size_t tail = (size_t)(m + span - (p + bytes));
    if (tail) (void)munmap(p + bytes, tail);
    (void)madvise(p, bytes, MADV_HUGEPAGE); /* a hint: no THP, no harm */
    return p;
}

void huge_unmap(void *p, size_t bytes) {
    if (p) (void)munmap(p, bytes);
}
