/* Subcommand entry points: each takes its own argv (argv[0] is the command
 * name) and returns the process exit code. */
#ifndef TPS_CLI_H
#define TPS_CLI_H

#include <stdbool.h>

#include "plan/plan.h"

#define TPS_VERSION "0.1.0"

struct bench_spec;

int cli_model(int argc, char **argv);
int cli_model_make(int argc, char **argv);
int cli_generate(int argc, char **argv);
int cli_bench(int argc, char **argv);
/* Parses `tps bench` options (argv[0] is "bench") into *out with the bench
 * option table, defaults and checks, for runs through bench_spec_run (tps
 * sweep). Options that are about one run's output (--json, --csv) or that
 * are not one run (--find-max-rate) are refused. 0, or the exit code after
 * a message on stderr (2: bad options or --help). */
int cli_bench_parse_spec(struct bench_spec *out, int argc, char **argv);
/* The checks tps bench makes across its options (workload flags that do
 * not go together, what --find-max-rate and --goodput-target need, the
 * spec's own checks), for any command parsing bench's rows into a spec
 * (tps plan): 0, or 2 after a message on stderr starting with prog. Sets
 * the capacity probes' in-flight cap. */
int cli_bench_check(struct bench_spec *s, bool find_max_rate, bool goodput_target,
                    const char *prog);
int cli_serve(int argc, char **argv);
int cli_plan(int argc, char **argv);

/* What tps plan simulates with (cli_plan.c), for tps sweep --plan: the
 * model, the cost model and the simulated server. */
typedef struct cli_plan_env {
    struct llama_model *m;
    struct tokenizer *tok;
    plan_cost cost;
    chat_prompt prompt; /* the chat template tps serve would use */
    plan_server srv;
    struct json_t *config; /* the result's config.plan */
    double *steal_bins;    /* --steal-series: the run's steal per bin (cost borrows it) */
} cli_plan_env;
/* From tps plan's model, cost and server options (argv[0] a name; -m
 * MODEL defaults to model): 0, or an exit code after a message. */
int cli_plan_env_open(cli_plan_env *env, const char *model, int argc, char **argv);
void cli_plan_env_close(cli_plan_env *env);
/* Makes spec s run on the simulated server: a prediction, not a request. */
void cli_plan_env_spec(cli_plan_env *env, struct bench_spec *s, const char *model);
int cli_sweep(int argc, char **argv);
int cli_report(int argc, char **argv);
int cli_machine(int argc, char **argv);

#endif
