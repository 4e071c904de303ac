/* Reading a whole small file into memory (a chat template, a dataset, a
 * vocabulary list): the one copy of the fopen-fread-grow loop, which also
 * works on pipes and /proc files whose size is not known up front.
 *
 * Not here: model files (model/gguf maps them), streaming, messages (the
 * caller knows what the file was for and says so). */
#ifndef TPS_BASE_FILE_READ_H
#define TPS_BASE_FILE_READ_H

#include <stddef.h>

/* The file at path, whole and NUL-terminated, malloc'ed into *out (the
 * caller frees it); its size into *len (may be NULL). A file longer than
 * max bytes is refused. 0; TPS_ENOENT when it cannot be opened (errno says
 * why); TPS_EIO on a read error or over max; TPS_ENOMEM. *out is NULL on
 * any failure. */
int tps_read_file(const char *path, size_t max, char **out, size_t *len);

#endif
