/* `tps serve` as a child process for the tests that need the binary itself
 * (signals, the startup log, the process's open-file limit): started on an
 * ephemeral 127.0.0.1 port with stories260K and one kernel thread, its
 * stderr read through a pipe. TPS_TEST_BIN, when set, names another tps
 * binary to run (to show a test fails against an older build). */
#ifndef TPS_TEST_SERVE_CHILD_H
#define TPS_TEST_SERVE_CHILD_H

#include <stddef.h>
#include <sys/types.h>

typedef struct serve_child {
    pid_t pid;
    int err_fd;
    int port;
    char log[65536]; /* its stderr, as much as fits */
    size_t log_len;
    size_t log_total; /* bytes it wrote, kept or not */
} serve_child;

#define SERVE_MODEL "models/stories260K.gguf"

/* Starts the server with extra arguments (NULL-terminated; may be NULL)
 * and waits for its "listening on" line (30 s at most). nofile > 0 sets
 * RLIMIT_NOFILE, soft and hard, in the child first. Asserts. */
void serve_spawn(serve_child *ch, const char *const *extra, long nofile);
/* The start of a test that needs the child and nothing else: skips the test
 * when ../shared lacks the model (test_support.h), declares ch and starts
 * it with the extra arguments given (NULL for none). */
#define SERVE_CHILD(ch, ...)                                                                       \
    REQUIRE_SHARED(SERVE_MODEL);                                                                   \
    serve_child ch;                                                                                \
    serve_spawn(&ch, (const char *const[]){__VA_ARGS__, NULL}, 0)
/* Reads what the child has logged since, without waiting. */
void serve_read_log(serve_child *ch);
/* Sends sig (0: none), waits for the exit (30 s, then SIGKILL), reads the
 * rest of the log; returns the wait status. */
int serve_reap(serve_child *ch, int sig);

#endif
