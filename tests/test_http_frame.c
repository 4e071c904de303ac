/* The request framing parser (src/server/http/http_frame.c) against the cases
 * RFC 9112 and the smuggling literature name: what it accepts is framed
 * where a strict reader frames it, and every ambiguity is refused with the
 * status a client can act on. Whole and byte-by-byte feeds agree. No
 * sockets: tests/test_reliability.c drives the same cases at a server. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "server/http/http_frame.h"

typedef struct outcome {
    int status;    /* 0: accepted */
    size_t n_end;  /* requests ended */
    size_t end[8]; /* offsets of their ends */
    char message[160];
} outcome;

static outcome run(const char *s, size_t len, size_t step) {
    http_frame f;
    http_frame_init(&f, 1024, 100);
    outcome o = {0};
    for (size_t off = 0; off < len && !o.status;) {
        size_t n = len - off < step ? len - off : step, pos = 0;
        for (;;) {
            size_t used;
            http_frame_ev ev = http_frame_feed(&f, (const uint8_t *)s + off + pos, n - pos, &used);
            pos += used;
            if (ev == HTTP_FRAME_MORE) break;
            if (ev == HTTP_FRAME_END && o.n_end < 8) o.end[o.n_end++] = off + pos;
            if (ev == HTTP_FRAME_ERROR) {
                o.status = f.status;
                memcpy(o.message, f.message, sizeof o.message);
                break;
            }
        }
        off += n;
    }
    return o;
}

/* Runs s whole and a byte at a time; both must agree; returns the outcome. */
static outcome frame(const char *s) {
    size_t len = strlen(s);
    outcome a = run(s, len, len), b = run(s, len, 1);
    cr_assert_eq(a.status, b.status, "whole %d, bytes %d: %s", a.status, b.status, s);
    cr_assert_eq(a.n_end, b.n_end, "%s", s);
    for (size_t i = 0; i < a.n_end; i++)
        cr_assert_eq(a.end[i], b.end[i], "%s", s);
    return a;
}

static void refused(const char *s, int status, const char *msg_has) {
    outcome o = frame(s);
    cr_assert_eq(o.status, status, "expected %d, got %d (%s) for: %s", status, o.status, o.message,
                 s);
    cr_assert(strstr(o.message, msg_has), "'%s' lacks '%s'", o.message, msg_has);
}

#define H "Host: 127.0.0.1\r\n"

Test(http_frame, pipelined_requests_are_framed_where_a_strict_reader_frames_them) {
    const char *s = "POST /v1/completions HTTP/1.1\r\n" H "Content-Length: 5\r\n\r\nhello"
                    "GET /health HTTP/1.1\r\n" H "\r\n"
                    "POST /tokenize HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\n\r\n"
                    "5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n"
                    "GET / HTTP/1.0\r\n\r\n";
    outcome o = frame(s);
    cr_assert_eq(o.status, 0, "%s", o.message);
    cr_assert_eq(o.n_end, 4);
    const char *second = strstr(s, "GET /health");
    cr_assert_eq(o.end[0], (size_t)(second - s));
    cr_assert_eq(o.end[1], (size_t)(strstr(s, "POST /tokenize") - s));
    cr_assert_eq(o.end[2], (size_t)(strstr(s, "GET / HTTP/1.0") - s));
    cr_assert_eq(o.end[3], strlen(s));
}

Test(http_frame, smuggling_ambiguities_are_refused) {
    refused("POST / HTTP/1.1\r\n" H "Content-Length: 0\r\nContent-Length: 40\r\n\r\n", 400,
            "two Content-Length");
    refused("POST / HTTP/1.1\r\n" H "Content-Length: 4\r\nContent-Length: 4\r\n\r\nabcd", 400,
            "two Content-Length");
    refused("POST / HTTP/1.1\r\n" H "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
            "both Content-Length and Transfer-Encoding");
    refused("POST / HTTP/1.1\r\n" H "Transfer-Encoding: gzip, chunked\r\n\r\n", 400,
            "Transfer-Encoding 'gzip, chunked'");
    refused("POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"
            "\r\n",
            400, "two Transfer-Encoding");
    refused("GET / HTTP/1.1\r\n" H "X-A: 1\r\n folded\r\n\r\n", 400, "obs-fold");
    refused("GET / HTTP/1.1\n" H "\r\n", 400, "bare LF");
    refused("GET / HTTP/1.1\r\n" H "X-A: 1\n\r\n", 400, "bare LF");
    refused("GET / HTTP/1.1\r\n" H "X-A: 1\r\r\n", 400, "bare CR");
    refused("POST / HTTP/1.1\r\n" H "Content-Length : 5\r\n\r\nhello", 400,
            "whitespace between a header name and its colon");
    refused("GET / HTTP/1.1\r\n" H "Host: other\r\n\r\n", 400, "two Host");
    refused("GET / HTTP/1.1\r\n\r\n", 400, "must name its Host");
    refused("POST / HTTP/1.1\r\n" H "Content-Length: +5\r\n\r\nhello", 400, "not a number");
    refused("POST / HTTP/1.1\r\n" H "Content-Length: 5, 5\r\n\r\nhello", 400, "not a number");
    /* a body on GET: evhttp would read it as the next request */
    refused("GET / HTTP/1.1\r\n" H "Content-Length: 5\r\n\r\nhello", 400,
            "GET request has no body");
    refused("POST / HTTP/1.2\r\n" H "\r\n", 505, "HTTP version");
    refused("BREW / HTTP/1.1\r\n" H "\r\n", 501, "method BREW");
    refused("GET http://a/ HTTP/1.1\r\n" H "\r\n", 400, "starting with /");
    refused("\r\nGET / HTTP/1.1\r\n" H "\r\n", 400, "empty line");
}

Test(http_frame, control_bytes_in_header_values_are_refused) {
    const char s[] = "GET / HTTP/1.1\r\n" H "Authorization: Bearer k\0ey\r\n\r\n";
    outcome a = run(s, sizeof s - 1, sizeof s - 1), b = run(s, sizeof s - 1, 1);
    cr_assert_eq(a.status, 400);
    cr_assert_eq(b.status, 400);
    cr_assert(strstr(a.message, "control byte 0x00"), "%s", a.message);
    refused("GET / HTTP/1.1\r\n" H "X-A: a\x7f\r\n\r\n", 400, "control byte 0x7f");
    refused("GET / HTTP/1.1\r\n" H "X-A: a\x01\r\n\r\n", 400, "control byte 0x01");
    /* obs-text and tabs are allowed */
    cr_assert_eq(frame("GET / HTTP/1.1\r\n" H "X-A: caf\xc3\xa9\tb \r\n\r\n").status, 0);
}

Test(http_frame, bad_chunk_sizes_are_400_and_oversized_bodies_413) {
    const char *te = "POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\n\r\n";
    char s[512];
    const char *bad[] = {"zz\r\n", "-1\r\n", "ffffffffffffffff\r\n", "\r\n", "5;ext=1\r\n"};
    const char *why[] = {"not a hex digit", "not a hex digit", "more than 15 hex digits", "missing",
                         "extensions"};
    for (size_t i = 0; i < 5; i++) {
        snprintf(s, sizeof s, "%s%s", te, bad[i]);
        refused(s, 400, why[i]);
    }
    snprintf(s, sizeof s, "%s5\r\nhelloX\r\n", te);
    refused(s, 400, "longer than its chunk size");
    snprintf(s, sizeof s, "%s40\r\n", te); /* 64 + 64 > the limit of 100 */
    cr_assert_eq(frame(s).status, 0);
    snprintf(s, sizeof s, "%s40\r\n%064d\r\n40\r\n", te, 0);
    refused(s, 413, "over 100 bytes");
    refused("POST / HTTP/1.1\r\n" H "Content-Length: 101\r\n\r\n", 413, "at most 100");
    refused("POST / HTTP/1.1\r\n" H "Content-Length: 99999999999999999999\r\n\r\n", 413,
            "19 digits");
}

Test(http_frame, header_block_over_the_limit_is_431) {
    char s[2048];
    snprintf(s, sizeof s, "GET / HTTP/1.1\r\n" H "X-Big: %01100d\r\n\r\n", 0);
    refused(s, 431, "over 1024 bytes");
}

Test(http_frame, method_path_and_version_are_kept_for_routing) {
    http_frame f;
    http_frame_init(&f, 1024, 100);
    const char *s = "HEAD /metrics?x=1 HTTP/1.0\r\n\r\n";
    size_t used;
    cr_assert_eq(http_frame_feed(&f, (const uint8_t *)s, strlen(s), &used), HTTP_FRAME_HEAD);
    cr_assert_eq(used, strlen(s));
    cr_assert_str_eq(f.method, "HEAD");
    cr_assert_str_eq(f.path, "/metrics");
    cr_assert(f.http10);
    cr_assert_eq(http_frame_feed(&f, NULL, 0, &used), HTTP_FRAME_END);
    cr_assert_eq(used, 0);
}
