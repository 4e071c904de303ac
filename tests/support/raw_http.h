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
/* A connection to 127.0.0.1:port, from 127.0.0.<from> when from > 0 (any
 * loopback address works as a distinct client), else from the default
 * address. -1 with errno when it fails. */
int raw_connect(int port, int from);
/* All n bytes, or false when the peer is gone. */
bool raw_send_all(int fd, const char *p, size_t n);
/* Reads until the peer closes, cap-1 bytes or timeout_ms; NUL-terminates
 * (a NUL inside stops string functions early: fine for these replies).
 * Returns the bytes read; *closed tells whether the peer closed. */
size_t raw_read_until_close(int fd, char *out, size_t cap, int timeout_ms, bool *closed);
/* The status of an "HTTP/1.x NNN" response, -1 if it is not one. */
int raw_status_of(const char *resp);

#endif
