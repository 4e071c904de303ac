/* Regular expression -> GBNF: the `regex` extension of the completion
 * endpoints (vLLM's guided_regex) compiled to grammar text for
 * grammar.h. The whole output must match the pattern (as Outlines
 * and vLLM do: a full match), so ^ at the very start and $ at the very end
 * are accepted and change nothing.
 *
 * Supported: literals; escapes \n \t \r \f \v \xHH \uHHHH and escaped
 * punctuation; . (any character but a newline); classes [...] and [^...]
 * with ranges and \d \w \s inside; \d \D \w \W \s \S; groups (...),
 * (?:...) and named groups (?<name>...) / (?P<name>...) (capture means
 * nothing here); alternation |; quantifiers * + ? {m} {m,} {m,n} (m, n at
 * most GRAMMAR_MAX_REPEAT), lazy forms (*? ...: the same language).
 * Refused, with TPS_EINVAL and a message naming the column and the
 * construct ("regex: column 4: backreferences (\1) are not supported"):
 * backreferences, lookaround, word boundaries \b \B, anchors elsewhere
 * than at the ends, inline flags (?i), possessive quantifiers, Unicode
 * property classes \p{...}, and malformed patterns.
 *
 * Pure function: no global state, no I/O. */
#ifndef TPS_CONSTRAIN_REGEX_GBNF_H
#define TPS_CONSTRAIN_REGEX_GBNF_H

#include <stddef.h>

#include "base/sbuf.h"
#include "base/error.h"

#define REGEX_MAX_DEPTH 64 /* nested groups */

/* Appends "root ::= ...\n" for the pattern re[0..n) (UTF-8) to out.
 * Returns 0, TPS_EINVAL (err says where and what) or TPS_ENOMEM. */
int regex_to_gbnf(const char *re, size_t n, sbuf *out, tps_err *err);

#endif
