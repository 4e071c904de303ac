/* The official `openai` npm package against tps serve on stories260K
 * (tests/sdk/openai_sdk.cjs): json_schema at temperature 0 and 1, a forced
 * tool call, streamed tool-call deltas, a tool round trip, logprobs. The
 * package is installed once with npm into the build folder (gitignored);
 * the test skips with a message when node or npm is missing or the install
 * fails (no network). */
#include <criterion/criterion.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/server_fixture.h"
#include "support/test_support.h"

Test(openai_sdk, the_official_client_gets_structured_output_tool_calls_and_logprobs,
     .timeout = 300) {
    REQUIRE_SHARED("models/stories260K.gguf");
    if (system("node --version >/dev/null 2>&1") != 0)
        cr_skip_test("node is not installed: the openai npm package test needs it");
    char bin[1024], dir[1100], cmd[3000];
    snprintf(bin, sizeof bin, "%s", TPS_BIN);
    snprintf(dir, sizeof dir, "%s/openai-sdk", dirname(bin));
    snprintf(cmd, sizeof cmd, "%s/node_modules/openai/package.json", dir);
    if (access(cmd, R_OK) != 0) {
        snprintf(cmd, sizeof cmd,
                 "mkdir -p %s && cd %s && timeout 180 npm install --no-audit --no-fund --silent "
                 "openai@4 >/dev/null 2>&1",
                 dir, dir);
        if (system(cmd) != 0)
            cr_skip_test("npm install openai@4 into %s failed (npm missing or no network)", dir);
    }
    server_fixture f;
    server_config c;
    fixture_defaults(&c, &f);
    fixture_start(&f, &c, true);
    snprintf(cmd, sizeof cmd,
             "NODE_PATH=%s/node_modules timeout 240 node %s/tests/sdk/openai_sdk.cjs %d 2>&1", dir,
             TPS_SOURCE_DIR, f.port);
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    char out[8192];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    fixture_finish(&f);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "openai_sdk.cjs failed:\n%s", out);
    cr_assert(strstr(out, "ok: logprobs"), "%s", out);
}
