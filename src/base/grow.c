/* Array doubling (grow.h). */
#include "base/grow.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

int tps_grow_slow(void *arrp, size_t *cap, size_t need, size_t elem, size_t first) {
    if (elem == 0 || need > SIZE_MAX / elem) return TPS_ENOMEM;
    size_t c = *cap > first ? *cap : (first ? first : 1);
    while (c < need)
        c = c > SIZE_MAX / 2 ? need : 2 * c;
    if (c > SIZE_MAX / elem) c = need;
    void *old;
    memcpy(&old, arrp, sizeof old); /* the caller's T *, without aliasing it as void * */
    void *p = realloc(old, c * elem);
    if (!p) return TPS_ENOMEM;
    memcpy(arrp, &p, sizeof p);
    *cap = c;
    return 0;
}
