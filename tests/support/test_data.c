/* Implementation of tests/support/test_data.h. */
#include "support/test_data.h"

#include <criterion/criterion.h>
#include <stdarg.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

json_t *test_json_load(const char *fmt, ...) {
    char path[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path, sizeof path, fmt, ap);
    va_end(ap);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    cr_assert_not_null(j, "%s: %s (line %d)", path, je.text, je.line);
    return j;
}

bool test_fetched_dir(char *out, size_t cap, const char *sub, const char *probe) {
    char bin[1024], p[2048];
    const char *shared = getenv("TPS_FETCH_DIR");
    snprintf(bin, sizeof bin, "%s", TPS_BIN);
    snprintf(out, cap, "%s/%s", shared && *shared ? shared : dirname(bin), sub);
    snprintf(p, sizeof p, "%s/%s", out, probe);
    return access(p, R_OK) == 0;
}
