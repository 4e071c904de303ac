/* `tps serve` as a child process for tests (serve_child.h). */
#include "support/serve_child.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/test_support.h"

static void keep(serve_child *ch, const char *p, size_t n) {
    ch->log_total += n;
    size_t room = sizeof ch->log - 1 - ch->log_len;
    if (n > room) n = room;
    memcpy(ch->log + ch->log_len, p, n);
    ch->log_len += n;
    ch->log[ch->log_len] = 0;
}

void serve_read_log(serve_child *ch) {
    char buf[16384];
    for (;;) {
        ssize_t k = read(ch->err_fd, buf, sizeof buf);
        if (k <= 0) return;
        keep(ch, buf, (size_t)k);
    }
}

void serve_spawn(serve_child *ch, const char *const *extra, long nofile) {
    char *model = shared_path(SERVE_MODEL);
    const char *bin = getenv("TPS_TEST_BIN") ? getenv("TPS_TEST_BIN") : TPS_BIN;
    const char *argv[40] = {bin, "serve", "-m", model, "--port", "0", "--threads", "1"};
    int argc = 8;
    for (; extra && *extra && argc < 38; extra++)
        argv[argc++] = *extra;
    argv[argc] = NULL;
    int errp[2];
    cr_assert_eq(pipe(errp), 0);
    memset(ch, 0, sizeof *ch);
    ch->pid = fork();
    if (ch->pid == 0) {
        /* it dies with the test (an assertion ends the test before reap),
         * and holds none of the test's output open */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 1);
        dup2(errp[1], 2);
        close(errp[0]);
        if (nofile > 0) {
            struct rlimit rl = {.rlim_cur = (rlim_t)nofile, .rlim_max = (rlim_t)nofile};
            if (setrlimit(RLIMIT_NOFILE, &rl)) _exit(126);
        }
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    free(model);
    close(errp[1]);
    ch->err_fd = errp[0];
    fcntl(ch->err_fd, F_SETFL, fcntl(ch->err_fd, F_GETFL) | O_NONBLOCK);
    const char *tag = "listening on http://";
    for (int i = 0; i < 300 && !ch->port; i++) {
        struct pollfd pf = {.fd = ch->err_fd, .events = POLLIN};
        if (poll(&pf, 1, 100) <= 0) continue;
        serve_read_log(ch);
        const char *at = strstr(ch->log, tag);
        const char *colon = at ? strchr(at + strlen(tag), ':') : NULL;
        if (colon && strchr(colon, '\n')) ch->port = atoi(colon + 1);
        if (waitpid(ch->pid, NULL, WNOHANG) == ch->pid) break;
    }
    if (ch->port <= 0) {
        kill(ch->pid, SIGKILL);
        waitpid(ch->pid, NULL, 0);
        cr_assert_fail("the server did not start: %s", ch->log);
    }
}

int serve_reap(serve_child *ch, int sig) {
    if (sig) kill(ch->pid, sig);
    int status = -1;
    for (int i = 0; i < 3000; i++) {
        serve_read_log(ch);
        if (waitpid(ch->pid, &status, WNOHANG) == ch->pid) break;
        usleep(10000);
        if (i == 2999) {
            kill(ch->pid, SIGKILL);
            waitpid(ch->pid, &status, 0);
        }
    }
    serve_read_log(ch);
    close(ch->err_fd);
    return status;
}
