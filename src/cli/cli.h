/* Subcommand entry points: each takes its own argv (argv[0] is the command
 * name) and returns the process exit code. */
#ifndef TPS_CLI_H
#define TPS_CLI_H

#define TPS_VERSION "0.1.0"

struct bench_spec;
struct plan_env;

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
int cli_serve(int argc, char **argv);
int cli_plan(int argc, char **argv);

/* tps plan's model, cost and server options (argv[0] a name; -m MODEL
 * defaults to model) parsed and the simulated server opened (plan_env.h),
 * for tps sweep --plan: 0, or an exit code after a message. */
int cli_plan_env_open(struct plan_env *env, const char *model, int argc, char **argv);
int cli_sweep(int argc, char **argv);
int cli_report(int argc, char **argv);
int cli_machine(int argc, char **argv);

#endif
