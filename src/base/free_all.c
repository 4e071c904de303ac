/* Freeing a list of arrays (free_all.h). */
#include "base/free_all.h"

#include <stdlib.h>

void tps_free_all(void *const *ptrs, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(ptrs[i]);
}
