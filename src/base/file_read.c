/* Implementation of base/file_read.h. */
#include "base/file_read.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/error.h"
#include "base/grow.h"

int tps_read_file(const char *path, size_t max, char **out, size_t *len) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return TPS_ENOENT;
    char *buf = NULL;
    size_t cap = 0, n = 0, k;
    int rc = 0;
    /* one byte past max is asked for, so that a longer file shows */
    while (!(rc = TPS_GROW(buf, cap, n + 2, 1 << 16)) &&
           (k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += k;
        if (n > max) break;
    }
    if (!rc && (ferror(f) || n > max)) rc = TPS_EIO;
    fclose(f);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return 0;
}
