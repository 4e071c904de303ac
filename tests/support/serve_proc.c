/* `tps serve` in a process of its own (serve_proc.h). */
#include "support/serve_proc.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/grow.h"

int test_free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bind(fd, (struct sockaddr *)&a, sizeof a);
    socklen_t al = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &al);
    close(fd);
    return ntohs(a.sin_port);
}

/* A connection to the server, or -1. One that lands on its own socket does
 * not count: the port is in the ephemeral range, and while nothing listens
 * there the kernel may pick it as the probe's own source port and connect
 * the socket to itself (TCP simultaneous open). */
static int connect_to(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct sockaddr_in me;
    socklen_t ml = sizeof me;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        (getsockname(fd, (struct sockaddr *)&me, &ml) == 0 && me.sin_port == a.sin_port)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* One request (HTTP/1.0: the server closes after it): the status, the body. */
static long request(const serve_proc *s, const char *method, const char *path, const char *json,
                    char **body) {
    if (body) *body = NULL;
    int fd = connect_to(s->port);
    if (fd < 0) return 0;
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     method, path, json ? strlen(json) : 0, json ? json : "");
    size_t len = 0, cap = 0;
    char *buf = NULL;
    ssize_t k;
    if (n > 0 && (size_t)n < sizeof req && write(fd, req, (size_t)n) == n)
        while (!TPS_GROW(buf, cap, len + 2, 1 << 16) &&
               (k = read(fd, buf + len, cap - 1 - len)) > 0)
            len += (size_t)k;
    close(fd);
    if (TPS_GROW(buf, cap, len + 1, 1 << 16)) return 0;
    buf[len] = 0;
    long status = 0;
    if (!strncmp(buf, "HTTP/1.", 7) && len > 12) status = strtol(buf + 9, NULL, 10);
    const char *b = strstr(buf, "\r\n\r\n");
    if (body) *body = strdup(b ? b + 4 : "");
    free(buf);
    return status;
}

long serve_proc_get(const serve_proc *s, const char *path, char **body) {
    return request(s, "GET", path, NULL, body);
}

long serve_proc_post(const serve_proc *s, const char *path, const char *json, char **body) {
    return request(s, "POST", path, json, body);
}

void serve_proc_start(serve_proc *s, const char *model, const char *const *extra) {
    s->port = test_free_port();
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d", s->port);
    char port[16];
    snprintf(port, sizeof port, "%d", s->port);
    const char *argv[32] = {TPS_BIN, "serve", "-m", model, "--host", "127.0.0.1", "--port", port};
    size_t k = 8;
    for (size_t i = 0; extra && extra[i] && k < 31; i++)
        argv[k++] = extra[i];
    argv[k] = NULL;
    s->pid = fork();
    if (s->pid == 0) {
        freopen("/dev/null", "w", stdout);
        freopen("/dev/null", "w", stderr);
        execv(TPS_BIN, (char *const *)argv);
        _exit(127);
    }
    /* a listening port is not enough: the server answers 503 while it loads
     * (which includes measuring the machine on a fresh cache) */
    for (int i = 0; i < 300; i++) { /* up to 30 s */
        if (serve_proc_get(s, "/health", NULL) == 200) return;
        int ws;
        if (waitpid(s->pid, &ws, WNOHANG) == s->pid)
            cr_assert_fail("tps serve exited before /health answered 200");
        usleep(100 * 1000);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    cr_assert_fail("tps serve did not answer /health within 30 s");
}

void serve_proc_stop(serve_proc *s) {
    kill(s->pid, SIGTERM);
    for (int i = 0; i < 100; i++) {
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid) return;
        usleep(50 * 1000);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
}

double serve_proc_metric(const serve_proc *s, const char *name) {
    char *body = NULL;
    if (serve_proc_get(s, "/metrics", &body) != 200 || !body) {
        free(body);
        return -1;
    }
    const size_t n = strlen(name);
    double sum = -1;
    for (char *save = NULL, *line = strtok_r(body, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, name, n) || (line[n] != ' ' && line[n] != '{')) continue;
        sum = (sum < 0 ? 0 : sum) + strtod(strrchr(line, ' ') + 1, NULL);
    }
    free(body);
    return sum;
}
