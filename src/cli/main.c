/* tps: entry point. Dispatches to one file per subcommand; the only place
 * that may exit(). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static void usage(FILE *out) {
    fprintf(out,
            "tps: serve Llama-family GGUF models and measure tokens per second\n"
            "\n"
            "usage: tps <command> [options]   (tps <command> --help for details)\n"
            "\n"
            "commands:\n"
            "  model info FILE   inspect a GGUF file (architecture, shapes, types, tokenizer)\n"
            "  model make ...    write a Llama GGUF of a preset shape with seeded random weights\n"
            "  generate ...      one prompt offline: prefill and decode tokens/s of the engine\n"
            "  serve ...         OpenAI-compatible streaming server with continuous batching\n"
            "  bench ...         drive an endpoint; TPS over named windows, TTFT, ITL, E2E\n"
            "  sweep ...         bench over a grid (concurrency, rate, lengths, models)\n"
            "  plan ...          predict what bench would measure, without running the model\n"
            "  report FILE...    tables, SVG plots and one HTML page from saved results\n"
            "  machine           this machine's limits (bandwidth, peak rates), cached\n"
            "  version           print the version\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("tps %s\n", TPS_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "model")) return cli_model(argc - 1, argv + 1);
    if (!strcmp(cmd, "serve")) return cli_serve(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return cli_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "sweep")) return cli_sweep(argc - 1, argv + 1);
    if (!strcmp(cmd, "plan")) return cli_plan(argc - 1, argv + 1);
    if (!strcmp(cmd, "report")) return cli_report(argc - 1, argv + 1);
    if (!strcmp(cmd, "generate")) return cli_generate(argc - 1, argv + 1);
    if (!strcmp(cmd, "machine")) return cli_machine(argc - 1, argv + 1);
    fprintf(stderr, "tps: unknown command '%s' (see tps --help)\n", cmd);
    return 2;
}
