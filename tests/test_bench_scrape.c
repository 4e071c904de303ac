/* --scrape against a real `tps serve` on 127.0.0.1 (stories260K): by
 * default the bench finds the target's /metrics and records its series;
 * the server's generation-token counter grows by exactly the output tokens
 * the bench counted (the server's usage: an independent count), its
 * running-requests gauge never exceeds the concurrency, and the report
 * shows the series beside the client's curve. An explicit --scrape URL
 * that does not answer is an error; --scrape off records nothing. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/serve_proc.h"
#include "support/test_support.h"
#include "support/test_data.h"

/* tps serve of stories260K in the background, waited for until /health
 * answers (support/serve_proc.h); its port into *port. */
static pid_t serve(int *port) {
    char *model = shared_path("models/stories260K.gguf");
    serve_proc s;
    serve_proc_start(&s, model, NULL);
    free(model);
    *port = s.port;
    return s.pid;
}

static void stop(pid_t pid) {
    serve_proc s = {.pid = pid};
    serve_proc_stop(&s);
}

static const json_t *series(const json_t *m, const char *name) {
    size_t i;
    const json_t *x;
    json_array_foreach(json_object_get(m, "series"), i, x) {
        if (!strcmp(json_string_value(json_object_get(x, "name")), name)) return x;
    }
    return NULL;
}

Test(bench_scrape, the_targets_metrics_beside_the_clients_view, .timeout = 120) {
    REQUIRE_SHARED("models/stories260K.gguf");
    int port;
    pid_t pid = serve(&port);
    char dir[] = "/tmp/tps_scrapeXXXXXX";
    cr_assert(mkdtemp(dir));
    char *tok = shared_path("models/stories260K.gguf"), args[1024], *out;
    snprintf(args, sizeof args,
             "bench --url http://127.0.0.1:%d --requests 24 --concurrency 4 --input-len 16 "
             "--output-len 48 --tokenizer %s --bin 0.2 --json %s/a.json",
             port, tok, dir);
    cr_expect_eq(run_tps(args, true, &out), 0, "%s", out);
    cr_expect(strstr(out, "server metrics  http://127.0.0.1:") != NULL, "%s", out);
    cr_expect(strstr(out, "client out t/s") != NULL, "%s", out);
    free(out);
    json_t *j = test_json_load("%s/a.json", dir);
    const json_t *m = json_object_get(j, "server_metrics");
    cr_assert(json_is_object(m), "no server_metrics in the result");
    cr_expect_geq(json_integer_value(json_object_get(m, "scrapes")), 2);
    cr_expect_eq(json_integer_value(json_object_get(m, "failed")), 0);
    const json_t *gen = series(m, "tps:generation_tokens_total");
    if (!gen) gen = series(m, "tps_generation_tokens_total"); /* the renamed spelling */
    cr_assert_not_null(gen);
    cr_expect_str_eq(json_string_value(json_object_get(gen, "type")), "counter");
    /* first scrape before the first send, last after the last byte: the counter's
     * growth is every output token of the run */
    cr_expect_eq(
        json_number_value(json_object_get(gen, "increase")),
        (double)json_integer_value(json_object_get(json_object_get(j, "tokens"), "output")));
    const json_t *run = series(m, "tps:requests_running");
    if (!run) run = series(m, "tps_requests_running");
    cr_assert_not_null(run);
    size_t i;
    const json_t *v;
    json_array_foreach(json_object_get(run, "values"), i, v) {
        cr_expect_leq(json_number_value(v), 4, "running requests above the concurrency");
    }
    json_decref(j);

    snprintf(args, sizeof args,
             "bench --url http://127.0.0.1:%d --requests 2 --output-len 4 --input-len 4 "
             "--tokenizer %s --scrape off --json %s/b.json --quiet",
             port, tok, dir);
    expect_tps(args, 0, NULL);
    j = test_json_load("%s/b.json", dir);
    cr_expect_null(json_object_get(j, "server_metrics"));
    json_decref(j);

    snprintf(args, sizeof args,
             "bench --url http://127.0.0.1:%d --requests 2 --output-len 4 --input-len 4 "
             "--tokenizer %s --scrape http://127.0.0.1:%d/nothing --quiet",
             port, tok, port);
    expect_tps(args, 1, "--scrape: http://127.0.0.1:");
    free(tok);
    stop(pid);
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    cr_expect_eq(system(args), 0);
}
