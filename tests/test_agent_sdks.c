/* The agents' official clients against tps serve on stories260K, with an
 * API key (the OpenAI clients send it as Bearer, Anthropic's as
 * x-api-key): the `openai` package's Responses API (tests/sdk/
 * responses_sdk.cjs), `@anthropic-ai/sdk`'s Messages API
 * (anthropic_sdk.cjs) and `@openai/agents`' run loop with one tool
 * (agents_sdk.cjs). The packages are installed once with npm into the
 * build folder (gitignored); each test skips with a message when node or
 * npm is missing or the install fails (no network). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "support/server_fixture.h"
#include "support/test_data.h"
#include "support/test_support.h"

#define KEY      "sk-tps-agents"
#define PACKAGES "openai@6 @anthropic-ai/sdk@0 @openai/agents@0 zod@4"

/* Runs tests/sdk/SCRIPT against a tps serve (stories260K, --api-key KEY)
 * with the packages installed in the build folder's agents-sdk; its
 * output and exit status into out and *st. */
static void run_script(const char *script, char *out, size_t cap, int *st) {
    if (system("node --version >/dev/null 2>&1") != 0)
        cr_skip_test("node is not installed: the %s check needs it", script);
    char dir[1100], cmd[3000];
    if (!test_fetched_dir(dir, sizeof dir, "agents-sdk",
                          "node_modules/@openai/agents/package.json")) {
        snprintf(cmd, sizeof cmd,
                 "mkdir -p %s && cd %s && timeout 280 npm install --no-audit --no-fund --silent "
                 "%s >/dev/null 2>&1",
                 dir, dir, PACKAGES);
        if (system(cmd) != 0)
            cr_skip_test("npm install %s into %s failed (npm missing or no network)", PACKAGES,
                         dir);
    }
    server_fixture f;
    server_config c;
    fixture_defaults(&c, &f);
    c.api_key = KEY;
    fixture_start(&f, &c, true);
    snprintf(cmd, sizeof cmd,
             "NODE_PATH=%s/node_modules timeout 240 node %s/tests/sdk/%s %d %s 2>&1", dir,
             TPS_SOURCE_DIR, script, f.port, KEY);
    *st = test_run_capture(cmd, out, cap);
    fixture_finish(&f);
}

static void check_script(const char *script, const char *last) {
    char out[8192];
    int st;
    run_script(script, out, sizeof out, &st);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s failed:\n%s", script, out);
    cr_assert(strstr(out, last), "%s", out);
}

Test(agent_sdks, openai_responses_plain_streamed_forced_round_trip_and_previous_response,
     .timeout = 300) {
    REQUIRE_SHARED("models/stories260K.gguf");
    check_script("responses_sdk.cjs", "ok: responses");
}

Test(agent_sdks, anthropic_messages_create_stream_forced_tool_use_and_tool_result, .timeout = 300) {
    REQUIRE_SHARED("models/stories260K.gguf");
    check_script("anthropic_sdk.cjs", "ok: anthropic");
}

Test(agent_sdks, openai_agents_run_loop_calls_its_tool_and_answers, .timeout = 300) {
    REQUIRE_SHARED("models/stories260K.gguf");
    check_script("agents_sdk.cjs", "ok: agents run loop");
}
