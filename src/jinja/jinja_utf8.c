/* UTF-8 and the few Unicode properties Python's str methods need: what
 * str.isspace, str.isprintable (repr's escaping), lower/upper and
 * isalpha/isdigit answer. Case mapping and letters cover ASCII, Latin-1,
 * Latin Extended-A, Greek and Cyrillic, one code point to one (Python maps
 * a few to two, e.g. 'ß'.upper() == 'SS'; chat templates lower-case role
 * names). Not here: normalisation, full Unicode tables. */
#include "jinja/jinja_internal.h"

#include "base/utf8.h"

#include <string.h>

uint32_t utf8_next(const char *s, size_t n, size_t *i) {
    uint32_t cp;
    const size_t len = utf8_decode((const unsigned char *)s + *i, n - *i, &cp);
    *i += len ? len : 1;
    return len ? cp : 0xFFFD;
}

size_t utf8_put(uint32_t cp, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | cp >> 6);
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | cp >> 12);
        o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | cp >> 18);
    o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* 8 bytes at s hold only ASCII */
static bool ascii8(const char *s) {
    uint64_t w;
    memcpy(&w, s, sizeof w);
    return !(w & 0x8080808080808080ULL);
}

bool utf8_ascii(const char *s, size_t n) {
    size_t i = 0;
    while (i + 8 <= n && ascii8(s + i))
        i += 8;
    for (; i < n; i++)
        if ((unsigned char)s[i] >= 0x80) return false;
    return true;
}

size_t utf8_count(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        if (i + 8 <= n && ascii8(s + i)) { /* a run of ASCII: a code point a byte */
            i += 8;
            k += 8;
            continue;
        }
        utf8_next(s, n, &i);
        k++;
    }
    return k;
}

bool cp_space(uint32_t cp) {
    if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* Python's str.isprintable: not a control, format, separator (but the
 * space), surrogate, private-use or (for the common ones) unassigned code. */
bool cp_printable(uint32_t cp) {
    if (cp < 0x7F) return cp >= 0x20;
    if (cp <= 0xA0 || cp == 0xAD) return false;
    if (cp_space(cp)) return false;
    if ((cp >= 0x600 && cp <= 0x605) || cp == 0x61C || cp == 0x6DD || cp == 0x70F || cp == 0x180E)
        return false;
    if ((cp >= 0x200B && cp <= 0x200F) || (cp >= 0x202A && cp <= 0x202E) ||
        (cp >= 0x2060 && cp <= 0x206F))
        return false;
    if ((cp >= 0xD800 && cp <= 0xF8FF) || cp == 0xFEFF || (cp >= 0xFFF9 && cp <= 0xFFFB) ||
        cp == 0xFFFE || cp == 0xFFFF)
        return false;
    if (cp >= 0xF0000 || (cp >= 0xE0000 && cp <= 0xE0FFF)) return false;
    return true;
}

/* The lower-case partner of an upper-case letter and back, in the blocks
 * covered; 0 for none. */
static uint32_t to_lower(uint32_t cp) {
    if (cp >= 'A' && cp <= 'Z') return cp + 32;
    if (cp < 0xC0) return 0;
    if (cp <= 0xDE) return cp == 0xD7 ? 0 : cp + 32;
    if (cp >= 0x100 && cp <= 0x137) return cp & 1 ? 0 : cp + 1;
    if (cp >= 0x139 && cp <= 0x148) return cp & 1 ? cp + 1 : 0;
    if (cp >= 0x14A && cp <= 0x177) return cp & 1 ? 0 : cp + 1;
    if (cp == 0x178) return 0xFF;
    if (cp >= 0x179 && cp <= 0x17E) return cp & 1 ? cp + 1 : 0;
    if (cp >= 0x391 && cp <= 0x3AB && cp != 0x3A2) return cp + 32;
    if (cp >= 0x410 && cp <= 0x42F) return cp + 32;
    if (cp >= 0x400 && cp <= 0x40F) return cp + 80;
    return 0;
}

static uint32_t to_upper(uint32_t cp) {
    if (cp >= 'a' && cp <= 'z') return cp - 32;
    if (cp < 0xB5) return 0;
    if (cp == 0xB5) return 0x39C;
    if (cp >= 0xE0 && cp <= 0xFE) return cp == 0xF7 ? 0 : cp - 32;
    if (cp == 0xFF) return 0x178;
    if (cp >= 0x101 && cp <= 0x137) return cp & 1 ? cp - 1 : 0;
    if (cp >= 0x13A && cp <= 0x148) return cp & 1 ? 0 : cp - 1;
    if (cp >= 0x14B && cp <= 0x177) return cp & 1 ? cp - 1 : 0;
    if (cp >= 0x17A && cp <= 0x17E) return cp & 1 ? 0 : cp - 1;
    if (cp == 0x3C2) return 0x3A3;
    if (cp >= 0x3B1 && cp <= 0x3CB) return cp - 32;
    if (cp >= 0x430 && cp <= 0x44F) return cp - 32;
    if (cp >= 0x450 && cp <= 0x45F) return cp - 80;
    return 0;
}

uint32_t cp_lower(uint32_t cp) {
    uint32_t l = to_lower(cp);
    return l ? l : cp;
}

uint32_t cp_upper(uint32_t cp) {
    uint32_t u = to_upper(cp);
    return u ? u : cp;
}

bool cp_cased_lower(uint32_t cp) {
    return to_upper(cp) != 0 || cp == 0xDF;
}

bool cp_cased_upper(uint32_t cp) {
    return to_lower(cp) != 0;
}

bool cp_digit(uint32_t cp) {
    return cp >= '0' && cp <= '9';
}

bool cp_alpha(uint32_t cp) {
    if (cp < 0x80) return (cp | 32) >= 'a' && (cp | 32) <= 'z';
    if (cp < 0x100)
        return cp == 0xAA || cp == 0xB5 || cp == 0xBA || (cp >= 0xC0 && cp != 0xD7 && cp != 0xF7);
    if (cp_space(cp) || !cp_printable(cp)) return false;
    /* punctuation, symbols and marks of the general blocks are not letters */
    if ((cp >= 0x2000 && cp <= 0x2BFF) || (cp >= 0x3000 && cp <= 0x303F) ||
        (cp >= 0xFF00 && cp <= 0xFF20) || (cp >= 0x1F000 && cp <= 0x1FAFF) ||
        (cp >= 0x300 && cp <= 0x36F))
        return false;
    return true;
}
