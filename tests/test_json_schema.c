/* Tests for constrain/json_schema: schemas compiled to GBNF and parsed by
 * constrain/grammar accept hand-written valid instances and reject invalid
 * ones (missing required key, wrong type, extra key, too many items);
 * unsupported keywords are errors naming the keyword and its location;
 * integer bounds are exact (checked against every integer in a window). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "constrain/json_schema.h"
#include "support/grammar_check.h"

/* ---------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------- */

static grammar *compile_ok(const char *schema_json) {
    json_error_t je;
    json_t *s = json_loads(schema_json, JSON_DECODE_ANY, &je);
    cr_assert_not_null(s, "bad test schema: %s: %s", je.text, schema_json);
    grammar *g = NULL;
    tps_err err = {{0}};
    int rc = json_schema_compile(&g, s, &err);
    if (rc) {
        sbuf b;
        sbuf_init(&b);
        tps_err e2;
        json_schema_to_gbnf(s, &b, &e2);
        cr_log_error("GBNF:\n%s", b.p ? b.p : "");
        sbuf_free(&b);
    }
    json_decref(s);
    cr_assert_eq(rc, 0, "json_schema_compile: %s\n%s", err.msg, schema_json);
    return g;
}

static void compile_fails(const char *schema_json, const char *want) {
    json_t *s = json_loads(schema_json, JSON_DECODE_ANY, NULL);
    cr_assert_not_null(s, "bad test schema: %s", schema_json);
    grammar *g = (grammar *)1;
    tps_err err = {{0}};
    int rc = json_schema_compile(&g, s, &err);
    json_decref(s);
    test_expect_refused(rc, g, &err, schema_json, want);
}

/* A schema, the strings its grammar accepts and those it rejects (each list
 * NULL-ended). */
typedef struct schema_case {
    const char *schema;
    const char *yes[8];
    const char *no[8];
} schema_case;

/* Each case's schema compiled (asserted), then YES and NO on its lists. */
static void check_cases(const schema_case *cs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        grammar *g = compile_ok(cs[i].schema);
        for (const char *const *y = cs[i].yes; *y; y++)
            YES(g, *y);
        for (const char *const *no = cs[i].no; *no; no++)
            NO(g, *no);
        grammar_free(g);
    }
}

/* ---------------------------------------------------------------------------
 * Instances
 * ------------------------------------------------------------------------- */

static const char *PERSON =
    "{\"type\": \"object\","
    " \"properties\": {"
    "   \"name\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": 20},"
    "   \"age\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 150},"
    "   \"role\": {\"enum\": [\"admin\", \"user\", null]},"
    "   \"address\": {\"$ref\": \"#/$defs/address\"},"
    "   \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"maxItems\": 3},"
    "   \"id\": {\"anyOf\": [{\"type\": \"integer\"}, {\"type\": \"string\", \"format\": "
    "\"uuid\"}]}"
    " },"
    " \"required\": [\"name\", \"age\", \"address\"],"
    " \"additionalProperties\": false,"
    " \"$defs\": {\"address\": {\"type\": \"object\","
    "   \"properties\": {\"city\": {\"type\": \"string\"}, \"zip\": {\"type\": \"string\"}},"
    "   \"required\": [\"city\"]}}}";

Test(json_schema, nested_schema_accepts_valid_instances) {
    grammar *g = compile_ok(PERSON);
    YES(g, "{\"name\":\"Ann\",\"age\":31,\"address\":{\"city\":\"Oslo\"}}");
    YES(g, "{\"name\": \"Ann\", \"age\": 0, \"address\": {\"city\": \"Oslo\", \"zip\": \"0150\"}}");
    YES(g, "{\"name\":\"B\",\"age\":150,\"role\":\"admin\",\"address\":{\"city\":\"X\"},"
           "\"tags\":[\"a\",\"b\",\"c\"],\"id\":7}");
    YES(g, "{\"name\":\"B\",\"age\":9,\"role\":null,\"address\":{\"city\":\"X\"},\"tags\":[],"
           "\"id\":\"123e4567-e89b-12d3-a456-426614174000\"}");
    YES(g, "{\n  \"name\": \"\\u00e9\\n\",\n  \"age\": 42,\n  \"address\": {\"city\": \"\"}\n}");
    grammar_free(g);
}

Test(json_schema, nested_schema_rejects_invalid_instances) {
    grammar *g = compile_ok(PERSON);
    /* missing required */
    NO(g, "{\"name\":\"Ann\",\"address\":{\"city\":\"Oslo\"}}");
    NO(g, "{\"name\":\"Ann\",\"age\":3,\"address\":{\"zip\":\"1\"}}");
    /* wrong type */
    NO(g, "{\"name\":\"Ann\",\"age\":\"31\",\"address\":{\"city\":\"Oslo\"}}");
    NO(g, "{\"name\":\"Ann\",\"age\":31.5,\"address\":{\"city\":\"Oslo\"}}");
    NO(g, "{\"name\":5,\"age\":31,\"address\":{\"city\":\"Oslo\"}}");
    /* out of range, too short */
    NO(g, "{\"name\":\"Ann\",\"age\":151,\"address\":{\"city\":\"Oslo\"}}");
    NO(g, "{\"name\":\"Ann\",\"age\":-1,\"address\":{\"city\":\"Oslo\"}}");
    NO(g, "{\"name\":\"\",\"age\":1,\"address\":{\"city\":\"Oslo\"}}");
    /* extra property, additionalProperties false */
    NO(g, "{\"name\":\"Ann\",\"age\":31,\"address\":{\"city\":\"Oslo\"},\"x\":1}");
    /* enum, anyOf, format */
    NO(g, "{\"name\":\"A\",\"age\":1,\"role\":\"root\",\"address\":{\"city\":\"O\"}}");
    NO(g, "{\"name\":\"A\",\"age\":1,\"address\":{\"city\":\"O\"},\"id\":true}");
    NO(g, "{\"name\":\"A\",\"age\":1,\"address\":{\"city\":\"O\"},\"id\":\"not-a-uuid\"}");
    /* array too long, wrong item type */
    NO(g, "{\"name\":\"A\",\"age\":1,\"address\":{\"city\":\"O\"},\"tags\":[\"a\",\"b\",\"c\","
          "\"d\"]}");
    NO(g, "{\"name\":\"A\",\"age\":1,\"address\":{\"city\":\"O\"},\"tags\":[1]}");
    /* declared order */
    NO(g, "{\"age\":31,\"name\":\"Ann\",\"address\":{\"city\":\"Oslo\"}}");
    /* not JSON */
    NO(g, "{\"name\":\"Ann\",\"age\":31,\"address\":{\"city\":\"Oslo\"},}");
    NO(g, "");
    grammar_free(g);
}

/* Objects (optional properties in any subset, in order; any object; any
 * value), arrays (minItems, maxItems), strings (formats, const, type
 * lists): each schema accepts and rejects as written. */
Test(json_schema, objects_arrays_and_strings_accept_and_reject_as_written) {
    static const schema_case cases[] = {
        /* optional properties: any subset, in order */
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
         "\"b\":{\"type\":\"integer\"},\"c\":{\"type\":\"integer\"}},"
         "\"required\":[\"b\"]}",
         {"{\"b\":1}", "{\"a\":1,\"b\":2}", "{\"b\":2,\"c\":3}", "{\"a\":1,\"b\":2,\"c\":3}", NULL},
         {"{}", "{\"a\":1}", "{\"a\":1,\"c\":3}", "{,\"b\":1}", "{\"b\":1,}", NULL}},
        {"{\"properties\":{\"x\":{\"type\":\"boolean\"},\"y\":{\"type\":\"null\"}}}",
         {"{}", "{\"x\":true}", "{\"y\":null}", "{\"x\":false,\"y\":null}", NULL},
         {"{\"y\":null,\"x\":false}", "{\"x\":false,}", NULL}},
        /* any object, any value */
        {"{\"type\":\"object\"}",
         {"{}", "{\"a\": [1, {\"b\": null}], \"c\": \"d\"}", NULL},
         {"[]", "\"x\"", NULL}},
        {"{}", {"[1, 2.5e3, \"x\", true, null, {}]", "-0.5", NULL}, {"tru", NULL}},
        {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}",
         {"{\"a\": 1, \"b\": -2}", NULL},
         {"{\"a\": \"1\"}", NULL}},
        /* arrays: minItems, maxItems */
        {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,"
         "\"maxItems\":3}",
         {"[1, 2]", "[1,2,3]", NULL},
         {"[]", "[1]", "[1,2,3,4]", NULL}},
        {"{\"type\":\"array\",\"maxItems\":0}", {"[]", NULL}, {"[1]", NULL}},
        {"{\"type\":\"array\",\"minItems\":1}", {"[1, \"a\", [true]]", NULL}, {"[]", NULL}},
        /* strings: formats, const, type lists */
        {"{\"type\":\"string\",\"format\":\"date-time\"}",
         {"\"2024-02-29T13:05:00Z\"", "\"2024-02-29T13:05:00.123+01:00\"", NULL},
         {"\"2024-13-01T00:00:00Z\"", "\"yesterday\"", NULL}},
        {"{\"const\": {\"a\": [1, \"x\"]}}", {"{\"a\":[1,\"x\"]}", NULL}, {"{\"a\":[1]}", NULL}},
        {"{\"type\": [\"string\", \"null\"], \"maxLength\": 2}",
         {"null", "\"ab\"", NULL},
         {"\"abc\"", "1", NULL}},
        {"{\"type\": \"string\", \"enum\": [\"a\\\"b\", 3, \"\\u00e9\"]}",
         {"\"a\\\"b\"", "\"\xc3\xa9\"", NULL},
         {"3", NULL}}, /* 3: filtered out by type */
    };
    check_cases(cases, sizeof cases / sizeof cases[0]);
}

Test(json_schema, recursive_refs) {
    grammar *g = compile_ok("{\"$ref\": \"#/definitions/node\", \"definitions\": {\"node\": "
                            "{\"type\": \"object\", \"properties\": {\"v\": {\"type\": "
                            "\"integer\"}, \"kids\": {\"type\": \"array\", \"items\": {\"$ref\": "
                            "\"#/definitions/node\"}}}, \"required\": [\"v\"]}}}");
    YES(g, "{\"v\":1}");
    YES(g, "{\"v\":1,\"kids\":[{\"v\":2},{\"v\":3,\"kids\":[]}]}");
    NO(g, "{\"v\":1,\"kids\":[{}]}");
    grammar_free(g);
}

/* Every integer in [-1200, 1200] is accepted exactly when it lies in the
 * bounds: the digit patterns are exact, not approximate. */
static void check_int_range(const char *bounds, long lo, long hi) {
    char schema[160];
    snprintf(schema, sizeof schema, "{\"type\":\"integer\",%s}", bounds);
    grammar *g = compile_ok(schema);
    for (long v = -1200; v <= 1200; v++) {
        char s[32];
        snprintf(s, sizeof s, "%ld", v);
        bool in = v >= lo && v <= hi;
        cr_assert_eq(test_accepts(g, s), in, "%s: %ld %s", schema, v, in ? "rejected" : "accepted");
    }
    grammar_free(g);
}

Test(json_schema, integer_bounds_are_exact) {
    check_int_range("\"minimum\": 0, \"maximum\": 150", 0, 150);
    check_int_range("\"minimum\": 7, \"maximum\": 1093", 7, 1093);
    check_int_range("\"minimum\": -345, \"maximum\": 28", -345, 28);
    check_int_range("\"minimum\": -999, \"maximum\": -10", -999, -10);
    check_int_range("\"exclusiveMinimum\": 19, \"exclusiveMaximum\": 101", 20, 100);
    check_int_range("\"minimum\": 1.5, \"maximum\": 3.5", 2, 3);
    check_int_range("\"minimum\": 42", 42, 1L << 40);
    check_int_range("\"minimum\": -17", -17, 1L << 40);
    check_int_range("\"maximum\": 305", -(1L << 40), 305);
    check_int_range("\"maximum\": -88", -(1L << 40), -88);
}

/* ---------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------- */

Test(json_schema, unsupported_keywords_name_their_location) {
    compile_fails("{\"type\":\"object\",\"properties\":{\"age\":{\"type\":\"integer\","
                  "\"multipleOf\":2}}}",
                  "json_schema: /properties/age: keyword 'multipleOf' is not supported");
    compile_fails("{\"type\":\"array\",\"items\":{\"allOf\":[]}}",
                  "json_schema: /items: keyword 'allOf' is not supported");
    compile_fails("{\"type\":\"number\",\"minimum\":0}",
                  "json_schema: /: keyword 'minimum' is not supported for type 'number' (only "
                  "for integer)");
    compile_fails("{\"type\":\"string\",\"pattern\":\"^[a-z]+$\"}",
                  "/: keyword 'pattern' is supported only when it matches everything");
    compile_fails("{\"type\":\"string\",\"format\":\"email\"}", "format 'email' is not supported");
    compile_fails("{\"$ref\":\"#/$defs/a\",\"$defs\":{\"a\":{\"type\":\"string\",\"foo\":1}}}",
                  "json_schema: /$defs/a: keyword 'foo' is not supported");
    compile_fails("{\"properties\":{\"a/b\":{\"type\":\"wat\"}}}",
                  "/properties/a~1b: type 'wat' is not a JSON schema type");
    compile_fails("{\"type\":\"object\",\"properties\":{\"a\":{}},\"additionalProperties\":true}",
                  "'additionalProperties' is supported only as false");
}

Test(json_schema, invalid_schemas) {
    compile_fails("{\"$ref\":\"http://x/y\"}", "only local references");
    compile_fails("{\"$ref\":\"#/$defs/nope\"}", "$ref '#/$defs/nope' does not resolve");
    compile_fails("{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":[\"b\"]}",
                  "required property 'b' is not in 'properties'");
    compile_fails("{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "minimum is larger");
    compile_fails("{\"type\":\"string\",\"maxLength\":100000}", "at most 10000 is supported");
    compile_fails("{\"type\":\"integer\",\"maximum\":1e300}", "within -10^15..10^15");
    compile_fails("{\"enum\":[]}", "'enum' must be a non-empty array");
    compile_fails("false", "matches nothing");
    compile_fails("3", "must be an object or a boolean");
    /* a $ref loop that consumes nothing is left recursion in the grammar */
    compile_fails("{\"$ref\":\"#\"}", "left-recursive");
}
