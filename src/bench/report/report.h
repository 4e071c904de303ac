/* What a person reads: the terminal summary of a bench result (every rate
 * names its window, every number has its unit) and the glossary that
 * `tps bench --help` prints. Not here: computing anything (result.c). */
#ifndef TPS_BENCH_REPORT_H
#define TPS_BENCH_REPORT_H

#include <stdio.h>

#include "bench/result/result.h"

struct verdict;
/* The summary, its verdict block from v (verdict.h: the caller's one
 * judgement, which its JSON and exit code also use). */
void report_print_judged(FILE *f, const bench_result *r, const struct verdict *v);
/* The same, the result judged here with no error allowed. */
void report_print(FILE *f, const bench_result *r);
/* What every number in the summary means and which window it covers. */
void report_print_glossary(FILE *f);

#endif
