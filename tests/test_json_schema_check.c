/* The schema check of tool-call arguments (server/json_schema_check.h)
 * against Python's jsonschema (Draft 2020-12; Draft 4 for its boolean
 * exclusiveMinimum) on every (schema, value) pair below: each keyword the
 * check covers, each instance type it applies to, $ref, anyOf and oneOf,
 * numbers equal across 1 and 1.0, lengths in code points. And the bounds:
 * a $ref cycle ends undecided, never valid or invalid by accident. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "server/tools/json_schema_check.h"
#include "support/test_support.h"

static const struct {
    const char *schema, *value;
} CASES[] = {
    {"{\"type\":\"integer\"}", "7"},
    {"{\"type\":\"integer\"}", "7.0"},
    {"{\"type\":\"integer\"}", "7.5"},
    {"{\"type\":\"number\"}", "7"},
    {"{\"type\":[\"string\",\"null\"]}", "null"},
    {"{\"type\":[\"string\",\"null\"]}", "1"},
    {"{\"type\":\"boolean\"}", "0"},
    {"{\"enum\":[\"celsius\",\"fahrenheit\"]}", "\"kelvin\""},
    {"{\"enum\":[1,\"a\"]}", "1.0"},
    {"{\"const\":{\"a\":[1,2]}}", "{\"a\":[1,2]}"},
    {"{\"const\":3}", "4"},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},\"required\":[\"a\"]}",
     "{}"},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},\"required\":[\"a\"]}",
     "{\"a\":\"x\",\"b\":1}"},
    {"{\"properties\":{\"a\":{\"type\":\"string\"}},\"additionalProperties\":false}",
     "{\"a\":\"x\",\"b\":1}"},
    {"{\"additionalProperties\":{\"type\":\"integer\"}}", "{\"a\":1,\"b\":\"2\"}"},
    {"{\"additionalProperties\":{\"type\":\"integer\"}}", "{\"a\":1,\"b\":2}"},
    {"{\"properties\":{\"a\":{\"minimum\":1}}}", "\"not an object\""},
    {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2}", "[1]"},
    {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"maxItems\":2}", "[1,2,3]"},
    {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}", "[1,\"2\"]"},
    {"{\"items\":false}", "[]"},
    {"{\"items\":false}", "[1]"},
    {"{\"type\":\"string\",\"maxLength\":3}", "\"caf\\u00e9\""},
    {"{\"type\":\"string\",\"maxLength\":3}", "\"abc\""},
    {"{\"type\":\"string\",\"minLength\":2}", "\"\\u65e5\""},
    {"{\"minLength\":2}", "5"},
    {"{\"minimum\":1,\"maximum\":7}", "0"},
    {"{\"minimum\":1,\"maximum\":7}", "7"},
    {"{\"minimum\":1,\"maximum\":7}", "7.01"},
    {"{\"exclusiveMinimum\":1}", "1"},
    {"{\"exclusiveMaximum\":7}", "6.5"},
    {"{\"$schema\":\"http://json-schema.org/draft-04/schema#\",\"minimum\":1,"
     "\"exclusiveMinimum\":true}",
     "1"},
    {"{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", "1.5"},
    {"{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", "\"x\""},
    {"{\"oneOf\":[{\"type\":\"number\"},{\"type\":\"integer\"}]}", "1"},
    {"{\"oneOf\":[{\"type\":\"number\"},{\"type\":\"integer\"}]}", "1.5"},
    {"{\"$defs\":{\"pos\":{\"type\":\"integer\",\"minimum\":1}},\"type\":\"object\","
     "\"properties\":{\"n\":{\"$ref\":\"#/$defs/pos\"}}}",
     "{\"n\":0}"},
    {"{\"$defs\":{\"pos\":{\"type\":\"integer\",\"minimum\":1}},\"type\":\"object\","
     "\"properties\":{\"n\":{\"$ref\":\"#/$defs/pos\"}}}",
     "{\"n\":3}"},
    {"{\"type\":\"object\",\"properties\":{\"next\":{\"anyOf\":[{\"$ref\":\"#\"},{\"type\":"
     "\"null\"}]}},\"required\":[\"next\"]}",
     "{\"next\":{\"next\":{\"next\":null}}}"},
    {"{\"type\":\"object\",\"properties\":{\"next\":{\"anyOf\":[{\"$ref\":\"#\"},{\"type\":"
     "\"null\"}]}},\"required\":[\"next\"]}",
     "{\"next\":{\"next\":{}}}"},
    {"{\"type\":\"object\",\"properties\":{\"a/b\":{\"type\":\"string\"}}}", "{\"a/b\":1}"},
    {"{\"description\":\"any\",\"pattern\":\"^x$\"}", "\"x\""},
    {"true", "[1,{}]"},
    {"false", "1"},
};
#define N_CASES (sizeof CASES / sizeof CASES[0])

/* jsonschema's verdict per case, 1 valid / 0 not, into want; false when
 * python3 or jsonschema is missing. */
static bool reference(int *want) {
    json_t *all = json_array();
    for (size_t i = 0; i < N_CASES; i++)
        json_array_append_new(all, json_pack("[s,s]", CASES[i].schema, CASES[i].value));
    char *text = json_dumps(all, 0);
    char *path = test_temp_file(text);
    free(text);
    json_decref(all);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import json, sys\ntry:\n import jsonschema\nexcept ImportError:\n "
             "sys.exit(77)\nfor s, v in json.load(open(sys.argv[1])):\n s = json.loads(s)\n "
             "cls = jsonschema.validators.validator_for(s, default=jsonschema.Draft202012Validator)"
             "\n print(int(cls(s).is_valid(json.loads(v))))' %s",
             path);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = 0;
    while (n < N_CASES && fscanf(p, "%d", &want[n]) == 1)
        n++;
    int st = pclose(p);
    unlink(path);
    free(path);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77) return false;
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0 && n == N_CASES, "the reference failed");
    return true;
}

Test(json_schema_check, every_case_as_python_jsonschema_judges_it) {
    int want[N_CASES];
    if (!reference(want))
        cr_skip_test("python3 with jsonschema is needed (scripts/install-deps.sh)");
    for (size_t i = 0; i < N_CASES; i++) {
        json_t *s = json_loads(CASES[i].schema, JSON_DECODE_ANY, NULL);
        json_t *v = json_loads(CASES[i].value, JSON_DECODE_ANY, NULL);
        cr_assert(s && v, "case %zu", i);
        char why[128];
        json_check got = json_schema_check(s, v, why, sizeof why);
        cr_assert_neq(got, JSON_CHECK_UNDECIDED, "case %zu", i);
        cr_assert_eq(got == JSON_CHECK_VALID, want[i], "%s on %s: jsonschema says %s (%s)",
                     CASES[i].value, CASES[i].schema, want[i] ? "valid" : "invalid", why);
        if (got == JSON_CHECK_INVALID) cr_assert_neq(why[0], 0, "case %zu names a reason", i);
        json_decref(s);
        json_decref(v);
    }
}

Test(json_schema_check, a_ref_cycle_ends_undecided) {
    json_t *s = json_loads("{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"$ref\":"
                           "\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}",
                           0, NULL);
    json_t *v = json_integer(1);
    cr_assert_eq(json_schema_check(s, v, NULL, 0), JSON_CHECK_UNDECIDED);
    json_decref(s);
    json_decref(v);
}
