/* The bench's temporary folders (a sweep's server logs, a report's plots
 * when no --svg folder is kept): made under /tmp, and removed with the
 * files the bench wrote into them. Flat: the bench never nests folders in
 * them. Not here: the files' contents. */
#ifndef TPS_BENCH_TMP_DIR_H
#define TPS_BENCH_TMP_DIR_H

/* Removes every file in dir (not folders within it: there are none), then
 * dir; what cannot be removed stays. */
void tmp_dir_remove(const char *dir);

#endif
