/* Reading and writing the bench's JSON files (json_file.h). */
#include "bench/io/json_file.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/file_write.h"

void json_fields_read(void *base, const json_t *o, const json_field *f, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_object_get(o, f[i].key);
        char *dst = (char *)base + f[i].off;
        switch (f[i].kind) {
        case JF_U64:
            *(uint64_t *)dst = json_is_integer(v) && json_integer_value(v) > 0
                                   ? (uint64_t)json_integer_value(v)
                                   : 0;
            break;
        case JF_F64:
            *(double *)dst = json_is_number(v) ? json_number_value(v) : 0.0;
            break;
        case JF_BOOL:
            *(bool *)dst = json_is_true(v);
            break;
        case JF_S_TO_NS:
            *(uint64_t *)dst =
                (uint64_t)llround((json_is_number(v) ? json_number_value(v) : 0.0) * 1e9);
            break;
        }
    }
}

json_t *json_file_load(const char *path, tps_err *e) {
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j)
        tps_fail(e, TPS_EINVAL, "%s: line %d, column %d: %s", path, je.line, je.column, je.text);
    return j;
}

int json_file_write(const json_t *j, const char *path, size_t flags, tps_err *e) {
    char *text = json_dumps(j, flags);
    if (!text) return tps_fail(e, TPS_ENOMEM, "out of memory writing '%s'", path);
    int rc = file_write_all(path, text, strlen(text), e);
    free(text);
    return rc;
}
