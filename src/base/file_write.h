/* Writing an output file safely (a result's JSON or CSV, a calibration, a
 * model file, a trace): the one way every command writes a file it was
 * given a path for.
 *   - A regular file, or a path that does not exist yet, is written to a
 *     temporary file beside it, flushed to disk, and renamed over the path
 *     only once every byte is in: a failed write leaves the old file as
 *     it was, and only the temporary file is removed.
 *   - Anything else (/dev/stdout, a fifo, a terminal, a device node such as
 *     /dev/null, a symbolic link) is written in place: never renamed over,
 *     never unlinked, whatever happens.
 *   - Every write, the flush and the close are checked; the error names
 *     the path and the system's reason ("cannot write 'x.csv': No space
 *     left on device").
 *
 * Not here: reading (file_read.h), directories, appending to a log. */
#ifndef TPS_BASE_FILE_WRITE_H
#define TPS_BASE_FILE_WRITE_H

#include <stdbool.h>
#include <stdio.h>

#include "base/error.h"

typedef struct file_out {
    FILE *f;    /* write here with stdio; file_out_close checks it all */
    char *path; /* the destination (a copy) */
    char *tmp;  /* the temporary file renamed over path; NULL: written in place */
} file_out;

/* Opens path for writing as above; binary mode makes no difference on
 * POSIX. TPS_EIO naming the path and the reason; TPS_ENOMEM. */
int file_out_open(file_out *o, const char *path, tps_err *err);
/* Flushes, closes and (a temporary file) renames it over the path: 0, or
 * TPS_EIO naming the path and the reason, when any write since the open
 * failed or this step does (the temporary file is then removed; the
 * destination is as it was, or, written in place, as far as it got).
 * o is empty after, either way. */
int file_out_close(file_out *o, tps_err *err);
/* Gives up: closes and removes the temporary file (the destination is
 * untouched; one written in place keeps what was written). */
void file_out_abort(file_out *o);

/* The whole of data[0..n) into path, as above. */
int file_write_all(const char *path, const void *data, size_t n, tps_err *err);

#endif
