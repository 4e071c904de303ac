/* `tps model make`: filled in with the synthetic model maker (src/model/model_make). */
#include <stdio.h>

#include "cli/cli.h"

int cli_model_make(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "tps model make: not available in this build yet\n");
    return 2;
}
