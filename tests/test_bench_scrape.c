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

#include "support/test_support.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bind(fd, (struct sockaddr *)&a, sizeof a);
    socklen_t al = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &al);
    close(fd);
    return ntohs(a.sin_port);
}

/* Whether the server on connected socket fd answers GET /health with 200. */
static int health_ok(int fd) {
    static const char req[] = "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (write(fd, req, sizeof req - 1) != (ssize_t)(sizeof req - 1)) return 0;
    char line[64] = {0};
    size_t n = 0;
    ssize_t k;
    while (n < sizeof line - 1 && (k = read(fd, line + n, sizeof line - 1 - n)) > 0)
        n += (size_t)k;
    return strncmp(line, "HTTP/1.1 200", 12) == 0 || strncmp(line, "HTTP/1.0 200", 12) == 0;
}

/* tps serve in the background; waits (bounded) until a bench can use it.
 * A connect that lands on our own socket does not count: port is in the
 * ephemeral range, and while nothing listens there the kernel may pick it
 * as the probe's own source port and connect the socket to itself (TCP
 * simultaneous open). The bench then met a closed port: 24 of 24 requests
 * refused in 5 ms, once in a ctest -j2 run. Nor does a listening port: the
 * server answers 503 while it loads, which includes measuring the machine
 * on a fresh cache (24 of 24 requests 503 in a fresh CI run); /health says
 * when it is ready. */
static pid_t serve(int port) {
    char p[16], *model = shared_path("models/stories260K.gguf");
    snprintf(p, sizeof p, "%d", port);
    pid_t pid = fork();
    if (pid == 0) {
        freopen("/dev/null", "w", stdout);
        freopen("/dev/null", "w", stderr);
        execl(TPS_BIN, TPS_BIN, "serve", "-m", model, "--host", "127.0.0.1", "--port", p,
              (char *)NULL);
        _exit(127);
    }
    free(model);
    for (int i = 0; i < 300; i++) { /* up to 30 s */
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
        struct sockaddr_in me;
        socklen_t ml = sizeof me;
        if (ok && getsockname(fd, (struct sockaddr *)&me, &ml) == 0 && me.sin_port == a.sin_port)
            ok = 0;
        if (ok) ok = health_ok(fd);
        close(fd);
        int ws;
        if (!ok && waitpid(pid, &ws, WNOHANG) == pid)
            cr_assert_fail("tps serve exited before it listened on port %d", port);
        if (ok) return pid;
        usleep(100 * 1000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    cr_assert_fail("tps serve did not listen within 30 s");
    return -1;
}

static void stop(pid_t pid) {
    kill(pid, SIGTERM);
    for (int i = 0; i < 100; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid) return;
        usleep(50 * 1000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
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
    const int port = free_port();
    pid_t pid = serve(port);
    char dir[] = "/tmp/tps_scrapeXXXXXX";
    cr_assert(mkdtemp(dir));
    char *tok = shared_path("models/stories260K.gguf"), args[1024], path[128], *out;
    snprintf(args, sizeof args,
             "bench --url http://127.0.0.1:%d --requests 24 --concurrency 4 --input-len 16 "
             "--output-len 48 --tokenizer %s --bin 0.2 --json %s/a.json",
             port, tok, dir);
    cr_expect_eq(run_tps(args, true, &out), 0, "%s", out);
    cr_expect(strstr(out, "server metrics  http://127.0.0.1:") != NULL, "%s", out);
    cr_expect(strstr(out, "client out t/s") != NULL, "%s", out);
    free(out);
    snprintf(path, sizeof path, "%s/a.json", dir);
    json_t *j = json_load_file(path, 0, NULL);
    cr_assert_not_null(j);
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
    cr_expect_eq(run_tps(args, true, &out), 0, "%s", out);
    free(out);
    snprintf(path, sizeof path, "%s/b.json", dir);
    j = json_load_file(path, 0, NULL);
    cr_expect_null(json_object_get(j, "server_metrics"));
    json_decref(j);

    snprintf(args, sizeof args,
             "bench --url http://127.0.0.1:%d --requests 2 --output-len 4 --input-len 4 "
             "--tokenizer %s --scrape http://127.0.0.1:%d/nothing --quiet",
             port, tok, port);
    cr_expect_eq(run_tps(args, true, &out), 1, "%s", out);
    cr_expect(strstr(out, "--scrape: http://127.0.0.1:") != NULL, "%s", out);
    free(out);
    free(tok);
    stop(pid);
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    cr_expect_eq(system(args), 0);
}
