/* The official `openai` npm package against tps serve on stories260K
 * (tests/sdk/openai_sdk.cjs): json_schema at temperature 0 and 1, a forced
 * tool call, streamed tool-call deltas, a tool round trip, logprobs; and
 * LangChain JS's ChatOpenAI (tests/sdk/langchain.cjs). The packages are
 * installed once with npm into the build folder (gitignored); the test skips with a message when
 * node or npm is missing or the install fails (no network). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/server_fixture.h"
#include "support/test_data.h"
#include "support/test_support.h"

/* Installs PACKAGES with npm into the build folder's DIR (once; it is
 * gitignored) and runs the node script SCRIPT against a tps serve on
 * stories260K; skips when node is missing or the install fails (no
 * network). Returns the script's output and exit status in out/st. */
static void run_node_check(const char *dir_name, const char *packages, const char *probe,
                           const char *script, char *out, size_t cap, int *st) {
    if (system("node --version >/dev/null 2>&1") != 0)
        cr_skip_test("node is not installed: the %s check needs it", script);
    char dir[1100], cmd[3000], probe_path[256];
    snprintf(probe_path, sizeof probe_path, "node_modules/%s/package.json", probe);
    if (!test_fetched_dir(dir, sizeof dir, dir_name, probe_path)) {
        snprintf(cmd, sizeof cmd,
                 "mkdir -p %s && cd %s && timeout 240 npm install --no-audit --no-fund --silent "
                 "%s >/dev/null 2>&1",
                 dir, dir, packages);
        if (system(cmd) != 0)
            cr_skip_test("npm install %s into %s failed (npm missing or no network)", packages,
                         dir);
    }
    server_fixture f;
    fixture_serve(&f);
    snprintf(cmd, sizeof cmd, "NODE_PATH=%s/node_modules timeout 240 node %s/tests/sdk/%s %d 2>&1",
             dir, TPS_SOURCE_DIR, script, f.port);
    *st = test_run_capture(cmd, out, cap);
    fixture_finish(&f);
}

Test(openai_sdk, the_official_client_gets_structured_output_tool_calls_and_logprobs,
     .timeout = 300) {
    REQUIRE_SHARED("models/stories260K.gguf");
    char out[8192];
    int st;
    run_node_check("openai-sdk", "openai@4", "openai", "openai_sdk.cjs", out, sizeof out, &st);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "openai_sdk.cjs failed:\n%s", out);
    cr_assert(strstr(out, "ok: logprobs"), "%s", out);
}

/* LangChain JS sends fields of its own choosing (stream_options, a named
 * tool_choice with parallel_tool_calls left at its default, strict
 * schemas): a LangChain user must get answers, not 400s or lost calls. */
Test(openai_sdk, langchain_chat_openai_invokes_streams_calls_tools_and_structures, .timeout = 300) {
    REQUIRE_SHARED("models/stories260K.gguf");
    char out[8192];
    int st;
    run_node_check("langchain", "@langchain/openai@1 @langchain/core@1", "@langchain/openai",
                   "langchain.cjs", out, sizeof out, &st);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "langchain.cjs failed:\n%s", out);
    cr_assert(strstr(out, "ok: withStructuredOutput"), "%s", out);
}
