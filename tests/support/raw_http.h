/* Raw HTTP over plain sockets on 127.0.0.1, for the tests that must write
 * bytes no HTTP library would (hostile framing, half-sent requests, clients
 * that vanish) and read exactly what the server answers. */
#ifndef TPS_TEST_RAW_HTTP_H
#define TPS_TEST_RAW_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in milliseconds. */
uint64_t raw_now_ms(void);
/* A socket listening on 127.0.0.1 at a port the kernel picks (its number in
 * *port), made with socket()'s flags (SOCK_NONBLOCK, SOCK_CLOEXEC) and
 * SO_REUSEADDR, with backlog. -1 with errno when it fails. */
int raw_listen(int flags, int backlog, int *port);
/* A connection to 127.0.0.1:port, from 127.0.0.<from> when from > 0 (any
 * loopback address works as a distinct client), else from the default
 * address. -1 with errno when it fails. */
int raw_connect(int port, int from);
/* All n bytes (retrying when a signal interrupts), or false when the peer
 * is gone. */
bool raw_send_all(int fd, const char *p, size_t n);
/* Reads until the peer closes, cap-1 bytes or timeout_ms; NUL-terminates
 * (a NUL inside stops string functions early: fine for these replies).
 * Returns the bytes read; *closed tells whether the peer closed. */
size_t raw_read_until_close(int fd, char *out, size_t cap, int timeout_ms, bool *closed);
/* The status of an "HTTP/1.x NNN" response, -1 if it is not one. */
int raw_status_of(const char *resp);

/* One exchange on a new connection from 127.0.0.<from> (0: the default
 * address): bytes[0..len) sent, the answer read into out (cap bytes, NUL-
 * terminated) until the server closes or timeout_ms. Returns the status
 * (-1: no HTTP answer; -2: no connection); *closed (may be NULL): whether
 * the server closed. */
int raw_exchange(int port, int from, const char *bytes, size_t len, int timeout_ms, char *out,
                 size_t cap, bool *closed);
/* A request with Connection: close, a JSON Content-Type and body's length
 * (body NULL: empty), extra header lines ("Name: v\r\n"...) before them;
 * malloc'ed. */
char *raw_request(const char *method, const char *path, const char *body, const char *extra);
/* raw_request on a connection of its own, the answer (1 MiB at most, 30 s)
 * in a malloc'ed *out (may be NULL: dropped); the status, -1 when none. */
int raw_call(int port, const char *method, const char *path, const char *body, const char *extra,
             char **out);
/* The value of the first sample named `name` (a suffix match: the tps: or
 * tps_ prefix may be left out) in GET /metrics; -1 when absent. */
double raw_metric(int port, const char *name);

#endif
