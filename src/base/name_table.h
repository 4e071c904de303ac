/* Tables from a name to a number: a template filter's id, a Prometheus
 * TYPE, a JSON Schema keyword's types. One row type and one lookup, by a
 * name that need not end in NUL (a token of a template, a word in a line).
 *
 *     static const tps_name_id T[] = {{"counter", PROM_COUNTER}, ...};
 *     int t = TPS_NAME_FIND(T, word, len, -1);
 *
 * Not here: tables from an enum to its name (an array indexed by the enum
 * says that best), case folding, prefixes. */
#ifndef TPS_BASE_NAME_TABLE_H
#define TPS_BASE_NAME_TABLE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct tps_name_id {
    const char *name; /* NUL-terminated */
    int id;
} tps_name_id;

/* s[0..n) is name, all of it. */
bool tps_name_is(const char *name, const char *s, size_t n);

/* The id of the first of rows[0..n_rows) named s[0..n), else dflt. */
int tps_name_find(const tps_name_id *rows, size_t n_rows, const char *s, size_t n, int dflt);

/* tps_name_find over a whole array (not a pointer to one). */
#define TPS_NAME_FIND(rows, s, n, dflt)                                                            \
    tps_name_find((rows), sizeof(rows) / sizeof(rows)[0], (s), (n), (dflt))

#endif
