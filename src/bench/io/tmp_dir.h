/* The bench's temporary folders (a sweep's server logs, a report's plots
 * when no --svg folder is kept): made under /tmp, and removed with the
 * files the bench wrote into them. Flat: the bench never nests folders in
 * them. Not here: the files' contents. */
#ifndef TPS_BENCH_TMP_DIR_H
#define TPS_BENCH_TMP_DIR_H

#include <stdbool.h>

#include "base/error.h"

/* The folder a report writes its plots into, in *dir: keep when the user
 * named one (made when missing and make_keep), else a fresh one from tmpl
 * ("/tmp/...XXXXXX", filled in; tmp_dir_remove it after). */
int tmp_dir_pick(const char **dir, char *tmpl, const char *keep, bool make_keep, tps_err *e);
/* Removes every file in dir (not folders within it: there are none), then
 * dir; what cannot be removed stays. */
void tmp_dir_remove(const char *dir);

#endif
