/* Tests for constrain/regex_gbnf: the grammar compiled from a regex accepts
 * exactly what PCRE2 (an independent regex engine) matches in full, over
 * hand-picked strings and seeded random ones; unsupported constructs are
 * 400-ready errors naming the column and the construct. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <criterion/criterion.h>
#include <pcre2.h>
#include <string.h>

#include "constrain/grammar.h"
#include "constrain/regex_gbnf.h"

static grammar *compile(const char *re) {
    sbuf b;
    sbuf_init(&b);
    tps_err err = {{0}};
    cr_assert_eq(regex_to_gbnf(re, strlen(re), &b, &err), 0, "%s: %s", re, err.msg);
    grammar *g = NULL;
    cr_assert_eq(grammar_parse(&g, b.p, b.len, &err), 0, "%s -> %s: %s", re, b.p, err.msg);
    sbuf_free(&b);
    return g;
}

static bool pcre_full(const char *re, const char *s) {
    int ec;
    PCRE2_SIZE off;
    /* ALT_BSUX: \\uHHHH and \\xHH as JavaScript and Python read them */
    pcre2_code *c = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_ALT_BSUX,
                                  &ec, &off, NULL);
    cr_assert(c, "pcre2 cannot compile %s", re);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(c, NULL);
    int rc =
        pcre2_match(c, (PCRE2_SPTR)s, strlen(s), 0, PCRE2_ANCHORED | PCRE2_ENDANCHORED, md, NULL);
    pcre2_match_data_free(md);
    pcre2_code_free(c);
    return rc >= 0;
}

static const char *const RES[] = {
    "(cat|dog)s? [0-9]{2,4}!",
    "^[A-Z][a-z]*(?:, [a-z]+)*\\.$",
    "\\d{3}-\\d{4}",
    "[^aeiou\\n]+x?",
    "a.c|\\w+\\s\\w*",
    "(?<word>ab|a)(b|c){0,2}?",
    "x\\.y\\\\z\\x41\\u00e9",
    "[\\]a-c-]+",
    "(a|)(b|)c",
    "",
};
static const char *const STRS[] = {
    "",         "cat 12!",     "dogs 1234!", "cats 12345!", "Abc, de.", "A.",    "a, b.",
    "123-4567", "12-3",        "bcd",        "bcdx",        "bca",      "abc",   "a c",
    "ab_ c",    "hello world", "abb",        "abcc",        "abbbb",    "ac",    "x.y\\zAé",
    "]]-",      "abc-]",       "c",          "bc",          "ac",       "abc\n", "\n"};

Test(regex_gbnf, the_grammar_accepts_what_pcre2_matches_in_full) {
    for (size_t r = 0; r < sizeof RES / sizeof RES[0]; r++) {
        grammar *g = compile(RES[r]);
        for (size_t k = 0; k < sizeof STRS / sizeof STRS[0]; k++)
            cr_expect_eq(grammar_accepts(g, STRS[k], strlen(STRS[k])), pcre_full(RES[r], STRS[k]),
                         "/%s/ on '%s': grammar %d, pcre2 %d", RES[r], STRS[k],
                         grammar_accepts(g, STRS[k], strlen(STRS[k])), pcre_full(RES[r], STRS[k]));
        /* seeded random strings over the pattern's own alphabet */
        uint64_t seed = r + 1;
        const char *alpha = "abcdxy0123 .,!-AZsé\\]";
        size_t na = strlen(alpha);
        for (int t = 0; t < 300; t++) {
            char s[16];
            size_t n = 0;
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            size_t len = (seed >> 33) % 8;
            for (size_t i = 0; i < len; i++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                char ch = alpha[(seed >> 33) % na];
                if ((unsigned char)ch >= 0x80) ch = 'a'; /* keep whole UTF-8 */
                s[n++] = ch;
            }
            s[n] = 0;
            cr_expect_eq(grammar_accepts(g, s, n), pcre_full(RES[r], s), "/%s/ on '%s'", RES[r], s);
        }
        grammar_free(g);
    }
}

static void refused(const char *re, const char *want) {
    sbuf b;
    sbuf_init(&b);
    tps_err err = {{0}};
    cr_assert_eq(regex_to_gbnf(re, strlen(re), &b, &err), TPS_EINVAL, "%s was accepted", re);
    cr_assert(strstr(err.msg, want), "%s: '%s' lacks '%s'", re, err.msg, want);
    sbuf_free(&b);
}

Test(regex_gbnf, unsupported_constructs_are_named_with_their_column) {
    refused("(a)\\1", "column 4: backreferences");
    refused("a(?=b)", "column 2: lookahead");
    refused("(?<=a)b", "lookbehind");
    refused("\\bword", "word boundaries");
    refused("a^b", "anchor '^'");
    refused("(?i)abc", "inline flags");
    refused("a*+", "possessive");
    refused("\\p{L}", "Unicode property");
    refused("(ab", "never closed");
    refused("ab)", "unmatched ')'");
    refused("[abc", "never closed");
    refused("*a", "nothing to repeat");
    refused("a{3,1}", "max below min");
    refused("a**", "cannot follow a quantifier");
}
