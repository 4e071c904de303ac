/* Option rows shared between subcommands (opt.h, OPT_ROWS_AT), so that
 * an option means exactly the same wherever it is taken: tps plan takes
 * tps bench's load, workload and report options and tps serve's engine
 * options from the tables those commands parse with.
 *
 * Each table's offsets count from the struct it names; ended by {0}. */
#ifndef TPS_CLI_ROWS_H
#define TPS_CLI_ROWS_H

#include "cli/opt.h"

/* cli_bench.c, over a bench_spec (bench/bench_spec.h) */
extern const opt_row bench_endpoint_rows[]; /* --endpoint */
extern const opt_row bench_load_rows[];     /* --concurrency, --rate, --arrival, ..., --seed */
extern const opt_row bench_workload_rows[]; /* --input-len, --output-len, --dataset, ... */
extern const opt_row bench_shape_rows[];    /* --prefix-len ..., --turns, --think-time */
extern const opt_row bench_limit_rows[];    /* --timeout, --idle-timeout */
extern const opt_row bench_report_rows[];   /* --warmup, --cooldown, --window, --slo, --bin, ... */

/* cli_bench.c, over a result_out_opts: what a command that ends in a bench
 * result (tps bench, bench merge, plan) does with it besides --json */
typedef struct result_out_opts {
    const char *csv_out;
    bool quiet;
} result_out_opts;
extern const opt_row result_out_rows[]; /* --csv, --quiet */

/* cli_serve.c, over an engine_params (engine/core/engine.h) */
extern const opt_row serve_engine_rows[]; /* --max-seqs ... --kv-prefault */

#endif
