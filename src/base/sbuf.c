/* Growable byte buffer and JSON string escaping (see sbuf.h). */
#include "base/sbuf.h"
#include "base/utf8.h"

#include "base/grow.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sbuf_init(sbuf *b) {
    memset(b, 0, sizeof *b);
}

void sbuf_free(sbuf *b) {
    free(b->p);
    sbuf_init(b);
}

void sbuf_reset(sbuf *b) {
    b->len = 0;
    b->failed = false;
    if (b->p) b->p[0] = 0;
}

void sbuf_truncate(sbuf *b, size_t n) {
    if (n >= b->len) return;
    b->len = n;
    b->p[n] = 0;
}

/* Makes room for n more bytes plus the NUL; false (and sticky failure) when
 * memory runs out. */
static bool reserve(sbuf *b, size_t n) {
    if (b->failed) return false;
    if (n > SIZE_MAX / 2 - b->len || TPS_GROW(b->p, b->cap, b->len + n + 1, 256)) {
        b->failed = true;
        return false;
    }
    return true;
}

void sbuf_add(sbuf *b, const void *data, size_t n) {
    if (!reserve(b, n)) return;
    if (n) memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = 0;
}

void sbuf_adds(sbuf *b, const char *s) {
    sbuf_add(b, s, strlen(s));
}

void sbuf_printf(sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
        return;
    }
    if ((size_t)n < sizeof small) {
        sbuf_add(b, small, (size_t)n);
        return;
    }
    if (!reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void sbuf_json_str(sbuf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    /* Worst case 6 bytes per input byte, plus the quotes. */
    if (n > (SIZE_MAX - 8) / 6 || !reserve(b, n * 6 + 2)) {
        b->failed = true;
        return;
    }
    char *o = b->p + b->len;
    *o++ = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"':
            *o++ = '\\', *o++ = '"';
            break;
        case '\\':
            *o++ = '\\', *o++ = '\\';
            break;
        case '\n':
            *o++ = '\\', *o++ = 'n';
            break;
        case '\r':
            *o++ = '\\', *o++ = 'r';
            break;
        case '\t':
            *o++ = '\\', *o++ = 't';
            break;
        default:
            if (c < 0x20 || c == 0x7f) {
                memcpy(o, "\\u00", 4);
                o[4] = hex[c >> 4];
                o[5] = hex[c & 15];
                o += 6;
            } else if (c < 0x80) {
                *o++ = (char)c;
            } else { /* at most 3 bytes out per byte in: within the 6 reserved */
                const unsigned char *u = (const unsigned char *)s + i;
                const size_t k = utf8_len(u, n - i), bad = k ? 0 : utf8_bad_len(u, n - i);
                if (k) {
                    memcpy(o, s + i, k);
                    o += k;
                } else {
                    memcpy(o, "\xef\xbf\xbd", 3);
                    o += 3;
                }
                i += (k ? k : bad) - 1;
            }
        }
    }
    *o++ = '"';
    b->len = (size_t)(o - b->p);
    b->p[b->len] = 0;
}

void sbuf_json_str_or_null(sbuf *b, const char *s) {
    if (s && s[0])
        sbuf_json_str(b, s, strlen(s));
    else
        sbuf_adds(b, "null");
}

void sbuf_json_num(sbuf *b, double v) {
    if (!isfinite(v)) v = 0;
    if (v == floor(v) && fabs(v) < 9e15) {
        sbuf_printf(b, "%.0f", v);
        return;
    }
    char tmp[64];
    int n = snprintf(tmp, sizeof tmp, "%.6f", v);
    while (n > 1 && tmp[n - 1] == '0')
        n--; /* 1.500000 -> 1.5 */
    if (n > 1 && tmp[n - 1] == '.') n--;
    sbuf_add(b, tmp, (size_t)n);
}
