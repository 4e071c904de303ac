/* Large anonymous buffers on 2 MiB-aligned transparent huge pages where the
 * kernel gives them (THP "always" or "madvise"; elsewhere 4 KiB pages, no
 * harm). For data streamed or scattered over hundreds of MiB (repacked
 * weights, the KV pool): with 4 KiB pages every page is a TLB miss and the
 * hardware prefetchers stop at each 4 KiB boundary.
 *
 * Not here: file mappings (model/gguf.c maps the GGUF itself). */
#ifndef TPS_BASE_HUGE_MAP_H
#define TPS_BASE_HUGE_MAP_H

#include <stddef.h>

/* bytes of zero-filled memory starting on a 2 MiB boundary, or NULL. Pages
 * are faulted in on first touch. Free with huge_unmap(p, bytes). */
void *huge_map(size_t bytes);
void huge_unmap(void *p, size_t bytes);

#endif
