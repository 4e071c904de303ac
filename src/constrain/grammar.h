/* GBNF grammars (llama.cpp's grammar syntax) parsed into a compact, owned,
 * flattened form over Unicode code points, plus a reference recognizer
 * (grammar_accepts) that says whether a whole string is in the language.
 * This is the first stage of constrained decoding: a token-level automaton
 * and the logits mask are built on top of the flattened rules.
 *
 * Syntax accepted (llama.cpp grammars/README.md):
 *   rule      ::= name "::=" alternatives   (ends at a newline outside ( ),
 *                                            unless the next line starts with '|')
 *   name      [a-zA-Z0-9_-]+; "root" must be defined
 *   alternatives: sequences separated by '|'; a sequence may be empty
 *   elements: "literal"  [class]  [^negated]  .  name  ( group )
 *   postfix:  *  +  ?  {m}  {m,}  {m,n}   (m, n <= GRAMMAR_MAX_REPEAT)
 *   escapes in literals and classes: \n \t \r \\ \" \' \[ \] \- \/
 *     \xHH \uHHHH \UHHHHHHHH;  comments: '#' to the end of the line
 * Groups and repetitions are rewritten into generated rules (all of one
 * user rule's named "parent~", which no user rule can clash with), as
 * llama.cpp does.
 *
 * Refused, with TPS_EINVAL and a message naming line and column (columns
 * count code points, both 1-based): syntax errors ("grammar: line 3, column
 * 14: expected '::='"), undefined rules ("grammar: line 2, column 9: rule
 * 'term' is not defined"), a rule defined twice, a missing root, invalid
 * UTF-8, and left recursion ("grammar: rule 'expr' is left-recursive"),
 * including the hidden kind a repetition of something that can match empty
 * creates. Sizes are bounded (GRAMMAR_MAX_ELEMS) so hostile text cannot
 * exhaust memory.
 *
 * Not here: tokens, logits, the per-token automaton, regexes. No global
 * state; a grammar is immutable after grammar_parse and may be shared by
 * any number of threads. */
#ifndef TPS_CONSTRAIN_GRAMMAR_H
#define TPS_CONSTRAIN_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define GRAMMAR_MAX_REPEAT 10000u     /* largest m or n in {m,n} */
#define GRAMMAR_MAX_ELEMS  (1u << 20) /* elements over all rules, generated ones included */
#define GRAMMAR_MAX_CP     0x10FFFFu  /* largest code point */

/* One element of a rule. A rule is its alternatives, each a run of
 * elements, separated by GRAMMAR_ALT and closed by GRAMMAR_END:
 *   a ::= "x" [0-9]+ | b      ->  CHAR 'x', REF a~1, ALT, REF b, END
 * A character set is a GRAMMAR_SET / GRAMMAR_SET_NOT header whose lo says
 * how many GRAMMAR_RANGE elements follow it; those belong to the set and
 * are not symbols of their own. */
typedef enum grammar_op {
    GRAMMAR_END = 0, /* end of the rule */
    GRAMMAR_ALT,     /* end of one alternative, start of the next */
    GRAMMAR_REF,     /* lo = rule index */
    GRAMMAR_CHAR,    /* lo = hi = the code point */
    GRAMMAR_SET,     /* one code point inside any of the lo ranges that follow */
    GRAMMAR_SET_NOT, /* one code point inside none of the lo ranges that follow */
    GRAMMAR_RANGE,   /* [lo, hi] inclusive; only after SET/SET_NOT */
    GRAMMAR_ANY,     /* any one code point ('.') */
} grammar_op;

typedef struct grammar_elem {
    uint32_t op; /* grammar_op */
    uint32_t lo;
    uint32_t hi;
} grammar_elem;

/* A parsed grammar: one allocation of `bytes`, read-only. Rule i's
 * elements start at elems[rule_start[i]]; names[i] is its name (generated
 * rules "parent~": a '~' marks them); nullable[i] says whether rule i can
 * match the empty string. */
typedef struct grammar {
    uint32_t n_rules;
    uint32_t root; /* index of "root" */
    size_t n_elems;
    size_t bytes;               /* the allocation's size */
    const uint32_t *rule_start; /* (n_rules,) */
    const uint8_t *nullable;    /* (n_rules,) 0 or 1 */
    const char *const *names;   /* (n_rules,) NUL-terminated */
    const grammar_elem *elems;  /* (n_elems,) */
} grammar;

/* Parses text[0..n) (UTF-8, need not be NUL-terminated). On success *out
 * owns a new grammar (free with grammar_free). On failure returns
 * TPS_EINVAL (TPS_ENOMEM when allocation fails) with err filled, *out NULL. */
int grammar_parse(grammar **out, const char *text, size_t n, tps_err *err);
/* What parsing one grammar may cost (grammar_parse_limited). */
typedef struct grammar_limits {
    size_t max_bytes;        /* the packed grammar's size; 0: GRAMMAR_MAX_ELEMS only */
    const char *bytes_label; /* names that limit in the refusal, e.g. "(--grammar-max-mem)" */
    uint64_t deadline_ns;    /* tps_now_ns() past it, the parse stops; 0: none */
} grammar_limits;

/* grammar_parse within limits: text whose packed grammar would take more
 * than max_bytes is refused as soon as the parser knows (before it holds
 * much more) with TPS_ERANGE and a message naming both sizes and the line
 * it had reached; past the deadline the parse stops with TPS_ERANGE too
 * (the caller, who set the deadline, says what it was). lim may be NULL. */
int grammar_parse_limited(grammar **out, const char *text, size_t n, const grammar_limits *lim,
                          tps_err *err);
void grammar_free(grammar *g);

/* Index of the rule called name, or -1. */
int32_t grammar_find_rule(const grammar *g, const char *name);

/* Whether one code point matches the character element at elems[i]
 * (GRAMMAR_CHAR, GRAMMAR_SET, GRAMMAR_SET_NOT or GRAMMAR_ANY). */
bool grammar_char_matches(const grammar *g, size_t i, uint32_t cp);

/* Whether utf8[0..n) as a whole is in the language of root. An Earley
 * recognizer over code points: correct for every grammar grammar_parse
 * accepts, meant for tests and tools, not for the decoding hot path
 * (it allocates; time is O(n^3) at worst). Invalid UTF-8 is not accepted.
 * Returns false as well when it runs out of memory. */
bool grammar_accepts(const grammar *g, const char *utf8, size_t n);

#endif
