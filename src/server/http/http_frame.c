/* HTTP/1.1 request framing, one byte at a time (see http_frame.h for the
 * grammar accepted and why it is narrow). A byte state machine rather than
 * a line parser: no line buffer, and a request split at any byte is read
 * exactly as it is whole. */
#include "server/http/http_frame.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

enum {
    S_START,      /* before a request's first byte */
    S_METHOD,     /* the method token */
    S_TARGET0,    /* the target's first byte */
    S_TARGET,     /* the rest of the target */
    S_VERSION,    /* HTTP/1.x up to CR */
    S_LINE,       /* a field line's first byte (or the CR ending the block) */
    S_NAME,       /* a field name */
    S_OWS,        /* whitespace before a field value */
    S_VALUE,      /* a field value */
    S_LF,         /* the LF after a request line or field line */
    S_END_LF,     /* the LF ending a header block or trailer */
    S_BODY,       /* Content-Length body bytes */
    S_CHUNK_SIZE, /* a chunk-size line */
    S_CHUNK_LF,   /* the LF after a chunk size */
    S_CHUNK_DATA, /* chunk data */
    S_DATA_CR,    /* the CR after chunk data */
    S_DATA_LF,    /* the LF after chunk data */
    S_DONE,       /* the request ended with its header block: END is due */
    S_ERROR,
};

/* The header fields framing depends on. */
enum { HF_OTHER, HF_CL, HF_TE, HF_HOST, HF_EXPECT };

static http_frame_ev fail(http_frame *f, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static http_frame_ev fail(http_frame *f, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->message, sizeof f->message, fmt, ap);
    va_end(ap);
    f->status = status;
    f->state = S_ERROR;
    return HTTP_FRAME_ERROR;
}

void http_frame_init(http_frame *f, size_t max_header_bytes, size_t max_body_bytes) {
    memset(f, 0, sizeof *f);
    f->max_header_bytes = max_header_bytes;
    f->max_body_bytes = max_body_bytes;
    f->state = S_START;
}

/* RFC 9110 tchar. */
static bool is_tchar(uint8_t c) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Field-value bytes: VCHAR, obs-text, SP, HTAB; never a control byte. */
static bool is_value_byte(uint8_t c) {
    return c == ' ' || c == '\t' || (c >= 0x21 && c != 0x7f);
}

static int hex_value(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool method_has_body(const char *m) {
    return !strcmp(m, "POST") || !strcmp(m, "PUT") || !strcmp(m, "PATCH");
}

static bool method_known(const char *m) {
    static const char *const known[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(m, known[i])) return true;
    return false;
}

/* A request's first byte: everything about the previous one is forgotten. */
static void begin_request(http_frame *f) {
    size_t mh = f->max_header_bytes, mb = f->max_body_bytes;
    http_frame_init(f, mh, mb);
    f->started = true;
}

static void begin_field(http_frame *f) {
    f->tok_len = 0;
    f->val_len = 0;
    f->name[0] = 0;
    f->field = HF_OTHER;
}

/* The value of the field just read is whole (f->val holds its first bytes,
 * trailing whitespace cut by val_len; tok_len is its full length). */
static http_frame_ev end_field(http_frame *f) {
    bool whole = f->tok_len < sizeof f->val;
    size_t vl = f->val_len;
    if (f->trailer && f->field != HF_OTHER && f->field != HF_EXPECT)
        return fail(f, 400, "a chunked trailer may not hold %s", f->name);
    switch (f->field) {
    case HF_CL: {
        if (f->has_cl) return fail(f, 400, "two Content-Length headers");
        f->has_cl = true;
        if (!vl) return fail(f, 400, "an empty Content-Length");
        if (!whole || vl > 19) return fail(f, 413, "a Content-Length of more than 19 digits");
        uint64_t v = 0;
        for (size_t i = 0; i < vl; i++) {
            if (f->val[i] < '0' || f->val[i] > '9')
                return fail(f, 400, "Content-Length '%.*s' is not a number", (int)vl, f->val);
            v = v * 10 + (uint64_t)(f->val[i] - '0');
        }
        f->content_length = v;
        break;
    }
    case HF_TE:
        if (f->has_te) return fail(f, 400, "two Transfer-Encoding headers");
        f->has_te = true;
        if (!whole || vl != 7 || strncasecmp(f->val, "chunked", 7))
            return fail(f, 400, "Transfer-Encoding '%.*s' is not supported; only 'chunked' is",
                        (int)(vl < 32 ? vl : 32), f->val);
        f->chunked = true;
        break;
    case HF_HOST:
        if (f->has_host) return fail(f, 400, "two Host headers");
        f->has_host = true;
        break;
    case HF_EXPECT:
        if (!whole || vl != 12 || strncasecmp(f->val, "100-continue", 12))
            return fail(f, 417, "Expect '%.*s' is not supported; only '100-continue' is",
                        (int)(vl < 32 ? vl : 32), f->val);
        break;
    }
    return HTTP_FRAME_MORE;
}

/* The name before the colon is whole: which field is it? */
static void name_done(http_frame *f) {
    static const struct {
        const char *name;
        int field;
    } fields[] = {{"content-length", HF_CL},
                  {"transfer-encoding", HF_TE},
                  {"host", HF_HOST},
                  {"expect", HF_EXPECT}};
    f->field = HF_OTHER;
    if (f->tok_len >= sizeof f->name) return;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (!strcmp(f->name, fields[i].name)) f->field = fields[i].field;
}

/* The header block is whole: can the body be framed? */
static http_frame_ev head_done(http_frame *f) {
    if (f->has_cl && f->has_te)
        return fail(f, 400,
                    "both Content-Length and Transfer-Encoding: the body's end is ambiguous");
    if (!f->http10 && !f->has_host) return fail(f, 400, "an HTTP/1.1 request must name its Host");
    if (!method_has_body(f->method) && (f->has_te || f->content_length))
        return fail(f, 400, "a %s request has no body", f->method);
    if (f->content_length > f->max_body_bytes)
        return fail(f, 413,
                    "the request body has %llu bytes; this server accepts at most %zu "
                    "(--max-body-bytes)",
                    (unsigned long long)f->content_length, f->max_body_bytes);
    if (f->chunked) {
        f->state = S_CHUNK_SIZE;
        f->tok_len = 0;
        f->remaining = 0;
    } else if (f->content_length) {
        f->state = S_BODY;
        f->remaining = f->content_length;
    } else {
        f->state = S_DONE;
    }
    return HTTP_FRAME_HEAD;
}

static http_frame_ev end_request(http_frame *f) {
    f->state = S_START;
    f->started = false;
    return HTTP_FRAME_END;
}

/* One byte of the request line's method. */
static http_frame_ev method_byte(http_frame *f, uint8_t c) {
    if (c == ' ') {
        if (!method_known(f->method)) return fail(f, 501, "method %s is not supported", f->method);
        f->state = S_TARGET0;
        f->tok_len = 0;
    } else if (!is_tchar(c)) {
        return fail(f, 400, "the request line does not start with a method");
    } else if (f->tok_len + 1 >= sizeof f->method) {
        return fail(f, 501, "the method is not supported");
    } else {
        f->method[f->tok_len++] = (char)c;
        f->method[f->tok_len] = 0;
    }
    return HTTP_FRAME_MORE;
}

/* One byte of the request target after its leading '/': the path is kept
 * (up to HTTP_FRAME_PATH_MAX), the query is not. */
static http_frame_ev target_byte(http_frame *f, uint8_t c) {
    if (c == ' ') {
        f->state = S_VERSION;
        f->tok_len = 0;
        f->val_len = 0;
    } else if (c < 0x21 || c > 0x7e) {
        return fail(f, 400, "the request target holds a byte 0x%02x", c);
    } else if (c == '?' || f->tok_len == SIZE_MAX) {
        f->tok_len = SIZE_MAX; /* the query: not kept */
    } else if (f->tok_len + 1 < sizeof f->path) {
        f->path[f->tok_len++] = (char)c;
        f->path[f->tok_len] = 0;
    } else {
        f->path_truncated = true;
    }
    return HTTP_FRAME_MORE;
}

/* One byte of the request line's version, HTTP/1.0 or HTTP/1.1 then CR. */
static http_frame_ev version_byte(http_frame *f, uint8_t c) {
    if (c == '\r') {
        if (f->val_len == 8 && !memcmp(f->val, "HTTP/1.1", 8)) {
            f->http10 = false;
        } else if (f->val_len == 8 && !memcmp(f->val, "HTTP/1.0", 8)) {
            f->http10 = true;
        } else if (f->val_len == 8 && !memcmp(f->val, "HTTP/", 5) && f->val[6] == '.') {
            return fail(f, 505, "HTTP version %.8s is not supported; 1.0 and 1.1 are", f->val);
        } else {
            return fail(f, 400, "the request line does not end in HTTP/1.1");
        }
        f->state = S_LF;
    } else if (f->val_len >= 8 || c < 0x21 || c > 0x7e) {
        return fail(f, 400, "the request line does not end in HTTP/1.1");
    } else {
        f->val[f->val_len++] = (char)c;
    }
    return HTTP_FRAME_MORE;
}

/* A field line's first byte, or the CR of the empty line ending the block. */
static http_frame_ev line_start_byte(http_frame *f, uint8_t c) {
    if (c == '\r') {
        f->state = S_END_LF;
    } else if (c == ' ' || c == '\t') {
        return fail(f, 400, "a header line starts with whitespace (obs-fold)");
    } else if (!is_tchar(c)) {
        return fail(f, 400, "a header name holds a byte 0x%02x", c);
    } else {
        begin_field(f);
        f->state = S_NAME;
        f->name[f->tok_len++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
        f->name[f->tok_len] = 0;
    }
    return HTTP_FRAME_MORE;
}

/* One byte of a field name (kept lowercased, up to sizeof name) or its colon. */
static http_frame_ev name_byte(http_frame *f, uint8_t c) {
    if (c == ':') {
        name_done(f);
        f->state = S_OWS;
        f->tok_len = 0;
        f->val_len = 0;
    } else if (c == ' ' || c == '\t') {
        return fail(f, 400, "whitespace between a header name and its colon");
    } else if (!is_tchar(c)) {
        return fail(f, 400, "a header name holds a byte 0x%02x", c);
    } else {
        if (f->tok_len + 1 < sizeof f->name) {
            f->name[f->tok_len] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
            f->name[f->tok_len + 1] = 0;
        }
        f->tok_len++;
    }
    return HTTP_FRAME_MORE;
}

/* One byte of a field value (leading whitespace skipped, the first bytes
 * kept), or the CR ending it. */
static http_frame_ev value_byte(http_frame *f, uint8_t c) {
    if (c == '\r') {
        f->state = S_LF;
        return end_field(f);
    }
    if (!is_value_byte(c)) return fail(f, 400, "a header value holds a control byte 0x%02x", c);
    if (f->state == S_OWS && (c == ' ' || c == '\t')) return HTTP_FRAME_MORE;
    f->state = S_VALUE;
    if (f->tok_len < sizeof f->val) f->val[f->tok_len] = (char)c;
    f->tok_len++;
    if (c != ' ' && c != '\t') f->val_len = f->tok_len;
    return HTTP_FRAME_MORE;
}

/* Up to avail bytes of a Content-Length body or a chunk's data, all taken
 * at once; *took says how many. */
static http_frame_ev body_bytes(http_frame *f, size_t avail, size_t *took) {
    size_t k = avail;
    if ((uint64_t)k > f->remaining) k = (size_t)f->remaining;
    *took = k;
    f->remaining -= k;
    if (f->remaining == 0) {
        if (f->state == S_BODY) return end_request(f);
        f->state = S_DATA_CR;
    }
    return HTTP_FRAME_MORE;
}

/* One byte of a chunk-size line: hex digits up to the CR. */
static http_frame_ev chunk_size_byte(http_frame *f, uint8_t c) {
    if (c == '\r') {
        if (!f->tok_len) return fail(f, 400, "a chunk size is missing");
        f->state = S_CHUNK_LF;
    } else if (c == ';') {
        return fail(f, 400, "chunk extensions are not supported");
    } else if (hex_value(c) < 0) {
        return fail(f, 400, "a chunk size holds '%c', not a hex digit",
                    c >= 0x21 && c < 0x7f ? c : '?');
    } else if (++f->tok_len > 15) {
        return fail(f, 400, "a chunk size has more than 15 hex digits");
    } else {
        f->remaining = f->remaining * 16 + (uint64_t)hex_value(c);
    }
    return HTTP_FRAME_MORE;
}

/* The LF after a chunk size: its data follows, or for the last (empty)
 * chunk, the trailer. */
static http_frame_ev chunk_size_lf(http_frame *f, uint8_t c) {
    if (c != '\n') return fail(f, 400, "a bare CR: lines end in CRLF");
    if (f->remaining == 0) { /* the last chunk: a trailer follows */
        f->trailer = true;
        f->head_bytes = 0;
        f->state = S_LINE;
    } else if ((f->content_length += f->remaining) > f->max_body_bytes) {
        return fail(f, 413, "the chunked request body is over %zu bytes (--max-body-bytes)",
                    f->max_body_bytes);
    } else {
        f->state = S_CHUNK_DATA;
    }
    return HTTP_FRAME_MORE;
}

/* The CR after a chunk's data. */
static http_frame_ev data_cr_byte(http_frame *f, uint8_t c) {
    if (c != '\r') return fail(f, 400, "chunk data is longer than its chunk size");
    f->state = S_DATA_LF;
    return HTTP_FRAME_MORE;
}

/* The LF after a chunk's data; then the next chunk's size. */
static http_frame_ev data_lf_byte(http_frame *f, uint8_t c) {
    if (c != '\n') return fail(f, 400, "a bare CR: lines end in CRLF");
    f->state = S_CHUNK_SIZE;
    f->tok_len = 0;
    f->remaining = 0;
    return HTTP_FRAME_MORE;
}

/* The states whose byte one function reads; the rest of the request line
 * and header states are read in head_byte. */
static http_frame_ev (*const STEP[S_ERROR + 1])(http_frame *, uint8_t) = {
    [S_METHOD] = method_byte,     [S_TARGET] = target_byte,
    [S_VERSION] = version_byte,   [S_LINE] = line_start_byte,
    [S_NAME] = name_byte,         [S_OWS] = value_byte,
    [S_VALUE] = value_byte,       [S_CHUNK_SIZE] = chunk_size_byte,
    [S_CHUNK_LF] = chunk_size_lf, [S_DATA_CR] = data_cr_byte,
    [S_DATA_LF] = data_lf_byte,
};

/* One byte of a header block or trailer. */
static http_frame_ev head_byte(http_frame *f, uint8_t c) {
    if (++f->head_bytes > f->max_header_bytes)
        return fail(f, 431, "the request's headers are over %zu bytes (--max-header-bytes)",
                    f->max_header_bytes);
    if (c == '\n' && f->state != S_LF && f->state != S_END_LF)
        return fail(f, 400, "a bare LF: lines end in CRLF");
    if (STEP[f->state]) return STEP[f->state](f, c);
    switch (f->state) {
    case S_TARGET0:
        if (c != '/') return fail(f, 400, "the request target must be a path starting with /");
        f->state = S_TARGET;
        f->path[0] = '/';
        f->path[1] = 0;
        f->tok_len = 1;
        return HTTP_FRAME_MORE;
    case S_LF:
        if (c != '\n') return fail(f, 400, "a bare CR: lines end in CRLF");
        f->state = S_LINE;
        return HTTP_FRAME_MORE;
    case S_END_LF:
        if (c != '\n') return fail(f, 400, "a bare CR: lines end in CRLF");
        return f->trailer ? end_request(f) : head_done(f);
    }
    return fail(f, 500, "framing state %d", f->state);
}

http_frame_ev http_frame_feed(http_frame *f, const uint8_t *p, size_t n, size_t *used) {
    size_t i = 0;
    http_frame_ev ev = HTTP_FRAME_MORE;
    while (ev == HTTP_FRAME_MORE) {
        if (f->state == S_ERROR) {
            ev = HTTP_FRAME_ERROR;
            break;
        }
        if (f->state == S_DONE) {
            ev = end_request(f);
            break;
        }
        if (i == n) break;
        uint8_t c = p[i];
        switch (f->state) {
        case S_START:
            begin_request(f);
            if (!is_tchar(c)) {
                i++;
                ev = fail(f, 400,
                          c == '\r' || c == '\n' ? "an empty line where a request line belongs"
                                                 : "the request line does not start with a method");
                break;
            }
            f->state = S_METHOD;
            continue; /* the byte is the method's first */
        case S_BODY:
        case S_CHUNK_DATA: {
            size_t took;
            ev = body_bytes(f, n - i, &took);
            i += took;
            continue;
        }
        default:
            i++;
            ev = f->state < S_BODY ? head_byte(f, c) : STEP[f->state](f, c);
        }
    }
    *used = i;
    return ev;
}
