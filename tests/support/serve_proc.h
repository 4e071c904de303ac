/* `tps serve` as a process of its own on a free 127.0.0.1 port, for the
 * tests that drive it with the tps binary or the bench library the way a
 * user would: started, waited for (bounded) until /health answers 200,
 * stopped with SIGTERM. Not in-process (support/server_fixture.h is). */
#ifndef TPS_TEST_SERVE_PROC_H
#define TPS_TEST_SERVE_PROC_H

#include <stdbool.h>
#include <sys/types.h>

typedef struct serve_proc {
    pid_t pid;
    int port;
    char url[64]; /* http://127.0.0.1:PORT */
} serve_proc;

/* A port nothing listens on now (bound, read, closed). */
int test_free_port(void);
/* Starts `tps serve -m MODEL` (model: a path) on a free port with the extra
 * arguments (NULL-ended, may be NULL) and waits up to 30 s for /health's
 * 200. Asserts (Criterion) when it exits or does not answer. */
void serve_proc_start(serve_proc *s, const char *model, const char *const *extra);
/* SIGTERM, then SIGKILL after 5 s. */
void serve_proc_stop(serve_proc *s);
/* GET path on the server: the status (0: no answer); the body (the caller
 * frees it) in *body when body is not NULL. */
long serve_proc_get(const serve_proc *s, const char *path, char **body);
/* The sum of every sample of counter or gauge `name` in the server's
 * /metrics (all its label sets); -1 when it has none or does not answer. */
double serve_proc_metric(const serve_proc *s, const char *name);
/* POST json (a small body) to path: as serve_proc_get. */
long serve_proc_post(const serve_proc *s, const char *path, const char *json, char **body);

#endif
