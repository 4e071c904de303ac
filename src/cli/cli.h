/* Subcommand entry points: each takes its own argv (argv[0] is the command
 * name) and returns the process exit code. */
#ifndef TPS_CLI_H
#define TPS_CLI_H

#define TPS_VERSION "0.1.0"

int cli_model(int argc, char **argv);
int cli_model_make(int argc, char **argv);
int cli_generate(int argc, char **argv);
int cli_bench(int argc, char **argv);
int cli_serve(int argc, char **argv);
int cli_sweep(int argc, char **argv);
int cli_report(int argc, char **argv);

#endif
