/* Implementation of tests/support/server_fixture.h. */
#include "support/server_fixture.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <unistd.h>

#include "support/test_support.h"

void fixture_defaults(server_config *c, server_fixture *f) {
    server_config_default(c);
    f->model = shared_path("models/stories260K.gguf");
    f->log = getenv("TPS_TEST_LOG") ? fdopen(dup(2), "w") : fopen("/dev/null", "w");
    c->model_path = f->model;
    c->port = 0;
    c->log = f->log;
    c->engine.n_threads = 1;
}

void fixture_start(server_fixture *f, const server_config *c, bool load) {
    tps_err err = {{0}};
    cr_assert_eq(server_create(&f->s, c, &err), 0, "server_create: %s", err.msg);
    cr_assert_eq(server_start(f->s, &err), 0, "server_start: %s", err.msg);
    if (load) cr_assert_eq(server_load(f->s, &err), 0, "server_load: %s", err.msg);
    f->port = server_port(f->s);
    cr_assert_gt(f->port, 0);
}

void fixture_finish(server_fixture *f) {
    server_free(f->s);
    fclose(f->log);
    free(f->model);
}
