/* Tests for constrain/grammar: GBNF parsing (llama.cpp's syntax), language
 * membership through grammar_accepts, and the errors (line and column,
 * undefined rules, left recursion). */
#include <criterion/criterion.h>
#include <string.h>

#include "constrain/grammar.h"
#include "support/grammar_check.h"

/* ---------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------- */

static grammar *parse_ok(const char *text) {
    grammar *g = NULL;
    tps_err err = {{0}};
    int rc = grammar_parse(&g, text, strlen(text), &err);
    cr_assert_eq(rc, 0, "grammar_parse failed: %s\n%s", err.msg, text);
    cr_assert_not_null(g);
    return g;
}

/* Parses text, expects TPS_EINVAL and a message containing want. */
static void parse_fails(const char *text, const char *want) {
    grammar *g = (grammar *)1;
    tps_err err = {{0}};
    int rc = grammar_parse(&g, text, strlen(text), &err);
    test_expect_refused(rc, g, &err, text, want);
}

/* ---------------------------------------------------------------------------
 * Languages
 * ------------------------------------------------------------------------- */

static const char *ARITH = "# arithmetic, right-recursive as GBNF needs\n"
                           "root   ::= expr\n"
                           "expr   ::= term ([-+] term)*\n"
                           "term   ::= factor ([*/] factor)*\n"
                           "factor ::= number | \"(\" ws expr ws \")\"\n"
                           "number ::= [0-9]+\n"
                           "ws     ::= [ ]*\n";

Test(grammar, arithmetic_accepts_expressions) {
    grammar *g = parse_ok(ARITH);
    YES(g, "1");
    YES(g, "12+3*4");
    YES(g, "(1+2)*3");
    YES(g, "( 1-2 )/(3)");
    NO(g, "");
    NO(g, "1+");
    NO(g, "(1+2");
    NO(g, "a");
    NO(g, "1 + 2"); /* ws only inside parentheses */
    grammar_free(g);
}

/* llama.cpp's grammars/json.gbnf, in its layout (multi-line groups). */
static const char *JSON_GBNF =
    "root   ::= object\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "\n"
    "object ::=\n"
    "  \"{\" ws (\n"
    "            string \":\" ws value\n"
    "    (\",\" ws string \":\" ws value)*\n"
    "  )? \"}\" ws\n"
    "\n"
    "array  ::=\n"
    "  \"[\" ws (\n"
    "            value\n"
    "    (\",\" ws value)*\n"
    "  )? \"]\" ws\n"
    "\n"
    "string ::=\n"
    "  \"\\\"\" (\n"
    "    [^\"\\\\\\x7F\\x00-\\x1F] |\n"
    "    \"\\\\\" ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4}) # escapes\n"
    "  )* \"\\\"\" ws\n"
    "\n"
    "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9] "
    "[1-9]{0,15})? "
    "ws\n"
    "\n"
    "# Optional space: by convention, applied in this grammar after literal chars when allowed\n"
    "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

Test(grammar, json_gbnf_accepts_json_objects) {
    grammar *g = parse_ok(JSON_GBNF);
    YES(g, "{}");
    YES(g, "{\"a\": 1}");
    YES(g, "{\"a\":[1, 2.5, -3e5, true, null], \"b\": {\"c\": \"d\\n\\u00e9\"}}");
    YES(g, "{\"é\": \"ü\"}");
    NO(g, "[]"); /* root is an object */
    NO(g, "{\"a\" 1}");
    NO(g, "{\"a\": 01x}");
    NO(g, "{\"a\": \"\x01\"}");
    NO(g, "{\"a\": tru}");
    grammar_free(g);
}

Test(grammar, repetition_counts) {
    grammar *g = parse_ok("root ::= \"a\"{2} \"b\"{1,3} \"c\"{2,} [x]{0,2}");
    YES(g, "aabcc");
    YES(g, "aabbbccccx");
    YES(g, "aabccxx");
    NO(g, "abcc");
    NO(g, "aabbbbcc");
    NO(g, "aabc");
    NO(g, "aabccxxx");
    grammar_free(g);
}

Test(grammar, postfix_on_literals_and_groups) {
    grammar *g = parse_ok("root ::= \"ab\"* (\"x\" | \"yz\")+ \"!\"?");
    YES(g, "x");
    YES(g, "ababyzx!");
    YES(g, "abx");
    NO(g, "a");
    NO(g, "abab");
    NO(g, "x!!");
    grammar_free(g);
}

Test(grammar, classes_negation_any_and_escapes) {
    grammar *g = parse_ok("root ::= [a-c_0-9] [^a-z] . \"\\t\\x41\\u00e9\\\"\\\\\" [\\]\\-]\n");
    YES(g, "a_\xe2\x82\xac\tA\xc3\xa9\"\\]"); /* . matches a 3-byte code point */
    YES(g, "9Zq\tA\xc3\xa9\"\\-");
    NO(g, "dZq\tA\xc3\xa9\"\\-");
    NO(g, "azq\tA\xc3\xa9\"\\-");
    NO(g, "9Zq\tA\xc3\xa9\"\\x");
    NO(g, "9Z\xff\tA\xc3\xa9\"\\-"); /* invalid UTF-8 is never accepted */
    grammar_free(g);
}

Test(grammar, empty_alternatives_and_comments) {
    grammar *g = parse_ok("# a comment\n"
                          "root ::= item ws # trailing comment\n"
                          "   | \"none\"\n"
                          "item ::= \"i\" | \n"
                          "ws ::= | \" \"\n");
    YES(g, "");
    YES(g, "i");
    YES(g, "i ");
    YES(g, " ");
    YES(g, "none");
    NO(g, "none ");
    cr_expect(g->nullable[g->root]);
    cr_expect_eq(strcmp(g->names[g->root], "root"), 0);
    cr_expect_geq(grammar_find_rule(g, "ws"), 0);
    cr_expect_eq(grammar_find_rule(g, "nope"), -1);
    grammar_free(g);
}

Test(grammar, right_recursion_and_forward_references) {
    grammar *g = parse_ok("root ::= list\n"
                          "list ::= \"[\" items? \"]\"\n"
                          "items ::= list | list \",\" items | [0-9]\n");
    YES(g, "[]");
    YES(g, "[[],[[]],[5]]");
    NO(g, "[[]");
    NO(g, "[,]");
    grammar_free(g);
}

Test(grammar, flattened_form) {
    grammar *g = parse_ok("root ::= \"x\" [0-9a] | other\nother ::= .");
    const grammar_elem *e = &g->elems[g->rule_start[g->root]];
    cr_assert_eq(e[0].op, GRAMMAR_CHAR);
    cr_assert_eq(e[0].lo, 'x');
    cr_assert_eq(e[1].op, GRAMMAR_SET);
    cr_assert_eq(e[1].lo, 2);
    cr_assert_eq(e[2].op, GRAMMAR_RANGE);
    cr_assert_eq(e[2].lo, '0');
    cr_assert_eq(e[2].hi, '9');
    cr_assert_eq(e[3].op, GRAMMAR_RANGE);
    cr_assert_eq(e[4].op, GRAMMAR_ALT);
    cr_assert_eq(e[5].op, GRAMMAR_REF);
    cr_assert_eq(strcmp(g->names[e[5].lo], "other"), 0);
    cr_assert_eq(e[6].op, GRAMMAR_END);
    cr_assert(grammar_char_matches(g, g->rule_start[g->root] + 1, 'a'));
    cr_assert(!grammar_char_matches(g, g->rule_start[g->root] + 1, 'b'));
    grammar_free(g);
}

/* ---------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------- */

Test(grammar, errors_name_line_and_column) {
    parse_fails("root ::= a\n"
                "a ::= \"x\"\n"
                "b \"y\"\n",
                "line 3, column 3: expected '::='");
    parse_fails("root ::= \"abc", "line 1, column 10: unterminated string literal");
    parse_fails("root ::= [a-", "line 1, column 10: unterminated character class");
    parse_fails("root ::= (\"a\" | \"b\"\n", "expected ')'");
    parse_fails("root ::= \"a\" )", "line 1, column 14: unexpected ')'");
    parse_fails("root ::= \"\\q\"", "line 1, column 11: unknown escape '\\q'");
    parse_fails("root ::= [z-a]", "line 1, column 11: character range is reversed");
    parse_fails("root ::= \"a\"{3,2}", "minimum above its maximum");
    parse_fails("root ::= \"a\"{99999}", "larger than 10000");
    parse_fails("root ::= \"\xc3\x28\"", "line 1, column 11: invalid UTF-8");
    parse_fails("root ::= \"a\" b ::= \"c\"", "expected a newline before the rule 'b'");
    parse_fails("::= \"a\"", "line 1, column 1: expected a rule name");
}

Test(grammar, undefined_duplicate_and_missing_root) {
    parse_fails("root ::= expr\nexpr ::= \"1\" | term\n",
                "line 2, column 16: rule 'term' is not defined");
    parse_fails("root ::= \"a\"\nroot ::= \"b\"\n",
                "line 2, column 1: rule 'root' is defined twice");
    parse_fails("expr ::= \"a\"\n", "there is no rule 'root'");
    parse_fails("", "there is no rule 'root'");
}

Test(grammar, left_recursion_is_refused) {
    parse_fails("root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]\n",
                "rule 'expr' is left-recursive");
    /* through a group and a rule that can match empty */
    parse_fails("root ::= expr\nexpr ::= (ws expr \"+\") | \"1\"\nws ::= \" \"?\n",
                "rule 'expr' is left-recursive");
    /* indirect */
    parse_fails("root ::= a\na ::= b \"x\"\nb ::= a | \"y\"\n", "left-recursive");
    /* a repetition of something that can match empty */
    parse_fails("root ::= (\"a\"?)*\n", "rule 'root' is left-recursive (a repetition");
    /* right recursion and recursion after a non-empty prefix are fine */
    grammar *g = parse_ok("root ::= \"(\" root \")\" | \"\"\n");
    YES(g, "(())");
    NO(g, "(()");
    grammar_free(g);
}

Test(grammar, size_is_bounded) {
    /* a 200-character literal repeated 10000 times: 2M elements */
    char text[512] = "root ::= \"";
    memset(text + strlen(text), 'a', 200);
    strcpy(text + 10 + 200, "\"{10000}");
    parse_fails(text, "too large");
}
