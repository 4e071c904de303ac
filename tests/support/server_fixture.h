/* An in-process `tps serve` on an ephemeral 127.0.0.1 port for the server
 * tests: the config every test starts from, start (optionally loading the
 * model) and teardown. Not a client: each test file talks HTTP its own way. */
#ifndef TPS_TEST_SERVER_FIXTURE_H
#define TPS_TEST_SERVER_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "server/http/server.h"
#include "support/test_support.h" /* REQUIRE_SHARED */

/* The model every fixture serves, under ../shared. */
#define FIXTURE_MODEL "models/stories260K.gguf"

typedef struct server_fixture {
    server *s;
    int port;
    FILE *log;   /* the server's log: /dev/null, or stderr with TPS_TEST_LOG set */
    char *model; /* ../shared/models/stories260K.gguf */
} server_fixture;

/* Defaults for tests: stories260K, port 0, one kernel thread. */
void fixture_defaults(server_config *c, server_fixture *f);
/* The start of a test that serves the model with settings of its own:
 * skips the test when ../shared lacks the model, then declares the fixture
 * f and the config c, c holding fixture_defaults; the test sets c's fields
 * and calls fixture_start. */
#define FIXTURE_CONFIG(f, c)                                                                       \
    REQUIRE_SHARED(FIXTURE_MODEL);                                                                 \
    server_fixture f;                                                                              \
    server_config c;                                                                               \
    fixture_defaults(&c, &f)
/* Creates and starts the server; with load, also loads the model. Asserts. */
void fixture_start(server_fixture *f, const server_config *c, bool load);
/* fixture_defaults, then fixture_start with the model loaded: for a test
 * that needs no other setting. */
void fixture_serve(server_fixture *f);
/* The start of a test that needs no other setting: skips the test when
 * ../shared lacks the model, then declares the fixture f and serves it. */
#define FIXTURE_SERVE(f)                                                                           \
    REQUIRE_SHARED(FIXTURE_MODEL);                                                                 \
    server_fixture f;                                                                              \
    fixture_serve(&f)
/* The start of a test of a full connection table: skips the test when
 * ../shared lacks the model, then serves it with `slots` general
 * connections, a client allowed 64 (the test's one address can take every
 * slot). */
void fixture_serve_slots(server_fixture *f, uint32_t slots);
#define FIXTURE_SERVE_SLOTS(f, slots)                                                              \
    REQUIRE_SHARED(FIXTURE_MODEL);                                                                 \
    server_fixture f;                                                                              \
    fixture_serve_slots(&f, slots)
void fixture_finish(server_fixture *f);
/* Waits up to ms until the engine holds nothing (no KV block, nothing
 * running or waiting) and has cancelled at least min_cancelled requests in
 * all; false when it did not. */
bool fixture_wait_idle(server *s, int ms, uint64_t min_cancelled);

#endif
