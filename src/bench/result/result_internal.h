/* What result.c (building), result_file.c (JSON and CSV) and
 * result_merge.c (merging) share. Calls go one way: file and merge use
 * these, result.c defines them. Not for other rooms: result.h is the
 * public side. */
#ifndef TPS_BENCH_RESULT_INTERNAL_H
#define TPS_BENCH_RESULT_INTERNAL_H

#include "bench/result/result.h"

/* The names of tl_count_source in files: usage, stream_ids, retokenized, events. */
extern const char *const result_source_names[4];

/* The first-turn and later-turn TTFT histograms of a multi-turn result. */
int result_turns_alloc(result_turns *t, tps_err *e);

#endif
