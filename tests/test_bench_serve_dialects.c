/* tps bench measuring tps serve in each dialect both speak (chat, the
 * Responses API, the Messages API), the tps binary against a real server on
 * 127.0.0.1 (stories260K): every request completes, the output tokens the
 * bench counts equal the server's own count (/metrics
 * tps_generation_tokens_total), usage agrees with what streamed, and no
 * field that carried text went unread. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/serve_proc.h"
#include "support/test_support.h"

static bool tripped(const json_t *res, const char *check) {
    json_t *a = json_object_get(json_object_get(res, "verdict"), "tripped"), *v;
    size_t i;
    json_array_foreach(a, i, v) {
        if (!strcmp(json_string_value(v), check)) return true;
    }
    return false;
}

/* One tps bench run in dialect `endpoint`; its result. */
static json_t *bench(const serve_proc *s, const char *endpoint) {
    char path[] = "/tmp/tps-serve-dialect-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    char args[512], *out = NULL;
    snprintf(args, sizeof args,
             "bench --url %s --endpoint %s --model stories --requests 6 --concurrency 2 "
             "--input-len 16 --output-len 12 --no-progress --json %s",
             s->url, endpoint, path);
    int rc = run_tps(args, true, &out);
    json_t *res = json_load_file(path, 0, NULL);
    unlink(path);
    cr_assert(res, "%s: tps bench wrote no result (exit %d): %s", endpoint, rc, out);
    cr_expect_eq(rc, 0, "%s: exit %d: %s", endpoint, rc, out);
    free(out);
    return res;
}

Test(bench_serve_dialects, each_dialect_counts_what_the_server_generated, .timeout = 180) {
    REQUIRE_SHARED("models/stories260K.gguf");
    char *model = shared_path("models/stories260K.gguf");
    serve_proc s;
    serve_proc_start(&s, model, NULL);
    free(model);
    static const char *const EPS[] = {"chat", "responses", "messages"};
    for (size_t k = 0; k < 3; k++) {
        double before = serve_proc_metric(&s, "tps_generation_tokens_total");
        json_t *res = bench(&s, EPS[k]);
        double after = serve_proc_metric(&s, "tps_generation_tokens_total");
        json_t *tk = json_object_get(res, "tokens");
        json_int_t out = json_integer_value(json_object_get(tk, "output"));
        cr_expect_eq(
            json_integer_value(json_object_get(json_object_get(res, "requests"), "completed")), 6,
            "%s", EPS[k]);
        cr_expect(out > 0 && (double)out == after - before,
                  "%s: the bench counted %lld output tokens, the server generated %.0f", EPS[k],
                  (long long)out, after - before);
        cr_expect_eq(
            json_integer_value(json_object_get(json_object_get(tk, "count_source"), "usage")), 6,
            "%s: every request counted by the server's usage", EPS[k]);
        cr_expect(!tripped(res, "usage") && !tripped(res, "fields") && !tripped(res, "plausible"),
                  "%s: %s", EPS[k], json_dumps(json_object_get(res, "verdict"), 0));
        json_decref(res);
    }
    serve_proc_stop(&s);
}
