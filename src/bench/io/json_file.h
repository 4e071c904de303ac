/* The bench's JSON files: a whole file loaded with the place of a syntax
 * error in the message, an object's fields copied into a struct from a
 * table (key, kind, offset), so a reader is one table per section instead
 * of one line per field, and a document written safely. Missing or
 * mistyped fields read as 0 (false): a file from an older tps lacks the
 * newer ones. Not here: what the fields mean (their readers and writers). */
#ifndef TPS_BENCH_JSON_FILE_H
#define TPS_BENCH_JSON_FILE_H

#include <jansson.h>
#include <stddef.h>

#include "base/error.h"

typedef enum json_field_kind {
    JF_U64,    /* uint64_t: a JSON integer above 0, else 0 */
    JF_F64,    /* double: a JSON number, else 0 */
    JF_BOOL,   /* bool: JSON true */
    JF_S_TO_NS /* uint64_t nanoseconds from a number of seconds, rounded */
} json_field_kind;

typedef struct json_field {
    const char *key;
    json_field_kind kind;
    size_t off; /* offsetof the destination in the struct */
} json_field;

/* Each of the n fields of o (may be NULL: all read as 0) into base + off. */
void json_fields_read(void *base, const json_t *o, const json_field *f, size_t n);
/* The file at path parsed, or NULL with TPS_EINVAL naming the line and
 * column of the error in e. New reference. */
json_t *json_file_load(const char *path, tps_err *e);
/* j dumped with jansson's flags into path through base/file_write.h: a
 * regular file replaced whole, /dev/stdout or a fifo written in place;
 * TPS_EIO naming the path and the reason ("cannot write 'x.json': No space
 * left on device"), TPS_ENOMEM. */
int json_file_write(const json_t *j, const char *path, size_t flags, tps_err *e);

#endif
