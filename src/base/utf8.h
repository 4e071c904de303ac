/* UTF-8, one rule for the whole house: a sequence is well formed as
 * Unicode's table 3-7 says (no overlong forms, no surrogates, nothing past
 * U+10FFFF). What a caller does with a byte that is not (refuse the input,
 * replace it with U+FFFD, hold it back until the rest arrives) is the
 * caller's; which bytes those are is decided here. Not here: normalisation,
 * character classes (jinja_utf8.c), a tokenizer's byte pieces. */
#ifndef TPS_BASE_UTF8_H
#define TPS_BASE_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The length (1..4) of the well-formed sequence at s[0..n), or 0 when the
 * bytes there are not one (cut short counts as not). */
size_t utf8_len(const unsigned char *s, size_t n);

/* utf8_len, with *cp the code point when the length is not 0. */
size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);

/* When utf8_len(s, n) is 0: the bytes of the maximal ill-formed subpart at
 * s (at least 1), what one U+FFFD replaces (Unicode's "substitution of
 * maximal subparts", as Python's and jansson's decoders do). */
size_t utf8_bad_len(const unsigned char *s, size_t n);

/* The offset of the first byte of s[0..n) that is not in a well-formed
 * sequence, or n when all of it is well formed. */
size_t utf8_valid_prefix(const unsigned char *s, size_t n);

/* The bytes at the end of s[0..n) that begin a sequence not yet complete
 * (0..3): what a stream holds back until the rest arrives. */
size_t utf8_incomplete_tail(const unsigned char *s, size_t n);

#endif
