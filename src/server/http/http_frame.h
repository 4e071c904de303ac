/* The framing decision for HTTP/1.1 requests on one connection, made by us
 * before libevent's evhttp sees a byte: where each request's header block
 * and body end, and whether the bytes are unambiguous enough to pass on.
 * A request smuggling attack is two parsers that disagree on a boundary;
 * so this parser accepts only the narrow grammar on which every reader
 * agrees (RFC 9112 without its tolerances) and refuses the rest with a
 * status and a message:
 *   - CRLF only: a bare LF or CR is refused (400);
 *   - header names are tokens, right before the colon (no whitespace);
 *     no obs-fold (a line starting with SP or HTAB); values hold no control
 *     bytes (NUL, DEL, ...);
 *   - one Content-Length (digits only), one Host, at most one
 *     Transfer-Encoding and only "chunked"; never both CL and TE; a body
 *     only on POST, PUT and PATCH (evhttp ignores the body of the others,
 *     which would frame it as the next request);
 *   - chunk sizes are 1 to 15 hex digits and CRLF (no extensions: evhttp
 *     refuses them), each chunk's data ends in CRLF, trailers are header
 *     lines;
 *   - the request line is METHOD SP /target SP HTTP/1.0|1.1; the method is
 *     one the server routes (others 501), other versions 505;
 *   - the header block and the body are within their limits (431, 413).
 * HTTP/1.1 requests must name a Host (400).
 *
 * Pure and incremental: bytes may arrive split at any point and the
 * answer is the same (fuzz/fuzz_http_frame.c checks exactly that). No
 * allocation, no I/O.
 *
 * Not here: what the server does with a refusal (server_conn.c), routing,
 * and header values other than the few framing depends on. */
#ifndef TPS_SERVER_HTTP_FRAME_H
#define TPS_SERVER_HTTP_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_FRAME_PATH_MAX 64 /* the path prefix kept (routing decisions on /health) */

typedef enum http_frame_ev {
    HTTP_FRAME_MORE,  /* every byte given was consumed; a request is under way or none started */
    HTTP_FRAME_HEAD,  /* a request's header block ended (the method and path are set) */
    HTTP_FRAME_END,   /* a request's body ended: the next byte starts a new request */
    HTTP_FRAME_ERROR, /* refused: status and message are set; feed nothing more */
} http_frame_ev;

typedef struct http_frame {
    /* limits (set by http_frame_init) */
    size_t max_header_bytes, max_body_bytes;
    /* the current request: valid from HEAD until the next request starts */
    char method[16];
    char path[HTTP_FRAME_PATH_MAX]; /* the target up to '?' (truncated when longer) */
    bool path_truncated;
    bool http10;
    uint64_t content_length; /* the body's bytes (chunked: the sum so far) */
    bool chunked, has_cl, has_te, has_host;
    bool started; /* a request's first byte has arrived and it has not ended */
    /* the refusal */
    int status;
    char message[160];
    /* private */
    int state;
    size_t head_bytes;  /* bytes of this header block (or trailer) so far */
    size_t tok_len;     /* bytes of the current method / target / version / name / value */
    uint64_t remaining; /* body or chunk bytes left */
    int field;          /* the header being read (HF_* in http_frame.c) */
    char name[24];      /* a header name's prefix, lowercased */
    char val[40];       /* an interesting header value's prefix */
    size_t val_len;     /* without trailing whitespace */
    bool trailer;       /* the fields being read are a chunked body's trailer */
} http_frame;

void http_frame_init(http_frame *f, size_t max_header_bytes, size_t max_body_bytes);

/* Consumes bytes p[0..n) up to and including the next event; *used says
 * how many (HEAD and END are reported at the byte that completes them;
 * a request with no body gives HEAD, then END with *used 0). After
 * HTTP_FRAME_ERROR, status and message say why. */
http_frame_ev http_frame_feed(http_frame *f, const uint8_t *p, size_t n, size_t *used);

#endif
