/* Implementation of tests/support/server_fixture.h. */
#include "support/server_fixture.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <unistd.h>

#include "support/test_support.h"

void fixture_defaults(server_config *c, server_fixture *f) {
    server_config_default(c);
    f->model = shared_path(FIXTURE_MODEL);
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

void fixture_serve(server_fixture *f) {
    server_config c;
    fixture_defaults(&c, f);
    fixture_start(f, &c, true);
}

void fixture_serve_slots(server_fixture *f, uint32_t slots) {
    server_config c;
    fixture_defaults(&c, f);
    c.max_connections = slots;
    c.max_conns_per_client = 64;
    fixture_start(f, &c, true);
}

void fixture_finish(server_fixture *f) {
    server_free(f->s);
    fclose(f->log);
    free(f->model);
}

bool fixture_wait_idle(server *s, int ms, uint64_t min_cancelled) {
    for (int i = 0; i < ms / 10; i++) {
        engine_stats st;
        engine_get_stats(server_engine(s), &st);
        if (st.kv_blocks_used == 0 && st.requests_running == 0 && st.requests_waiting == 0 &&
            st.requests_total[ENGINE_FINISH_CANCELLED] >= min_cancelled)
            return true;
        usleep(10000);
    }
    return false;
}
