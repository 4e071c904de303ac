/* UTF-8 well-formedness (utf8.h): Unicode's table 3-7, where only the
 * second byte's range depends on the lead byte. */
#include "base/utf8.h"

/* The continuation bytes the lead byte c needs (0: c is not a lead byte
 * of a multi-byte sequence) and the range its second byte must fall in. */
static size_t lead(unsigned char c, unsigned char *lo, unsigned char *hi) {
    *lo = 0x80, *hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) return 1;
    if (c >= 0xE0 && c <= 0xEF) {
        if (c == 0xE0) *lo = 0xA0; /* overlong below U+0800 */
        if (c == 0xED) *hi = 0x9F; /* surrogates */
        return 2;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (c == 0xF0) *lo = 0x90; /* overlong below U+10000 */
        if (c == 0xF4) *hi = 0x8F; /* past U+10FFFF */
        return 3;
    }
    return 0;
}

/* The bytes of s[0..n) that match a well-formed sequence from its start:
 * need + 1 when it is whole, fewer when it stops (or is cut) early. */
static size_t matched(const unsigned char *s, size_t n, size_t *need) {
    unsigned char lo, hi;
    *need = lead(s[0], &lo, &hi);
    size_t k = 1;
    for (; *need && k <= *need && k < n; k++) {
        if (s[k] < lo || s[k] > hi) break;
        lo = 0x80, hi = 0xBF;
    }
    return k;
}

size_t utf8_len(const unsigned char *s, size_t n) {
    if (!n) return 0;
    if (s[0] < 0x80) return 1;
    size_t need, k = matched(s, n, &need);
    return need && k == need + 1 ? k : 0;
}

size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
    const size_t len = utf8_len(s, n);
    if (!len) return 0;
    uint32_t v = len == 1 ? s[0] : s[0] & (0x7Fu >> len);
    for (size_t i = 1; i < len; i++)
        v = v << 6 | (s[i] & 0x3Fu);
    *cp = v;
    return len;
}

size_t utf8_bad_len(const unsigned char *s, size_t n) {
    if (!n) return 0;
    size_t need;
    return matched(s, n, &need);
}

size_t utf8_valid_prefix(const unsigned char *s, size_t n) {
    size_t i = 0, k;
    while (i < n && (k = utf8_len(s + i, n - i)))
        i += k;
    return i;
}

size_t utf8_incomplete_tail(const unsigned char *s, size_t n) {
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        size_t need;
        const size_t got = matched(s + n - k, k, &need);
        if ((s[n - k] & 0xC0) == 0x80) continue; /* a continuation byte: look further back */
        return need && got == k && k < need + 1 ? k : 0;
    }
    return 0;
}
