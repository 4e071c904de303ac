/* Name-to-number tables (name_table.h). */
#include "base/name_table.h"

#include <string.h>

bool tps_name_is(const char *name, const char *s, size_t n) {
    return strlen(name) == n && !memcmp(name, s, n);
}

int tps_name_find(const tps_name_id *rows, size_t n_rows, const char *s, size_t n, int dflt) {
    for (size_t i = 0; i < n_rows; i++)
        if (tps_name_is(rows[i].name, s, n)) return rows[i].id;
    return dflt;
}
