/* libFuzzer harness for the JSON schema compiler: arbitrary bytes that parse
 * as JSON are compiled to GBNF. A refusal must carry a "json_schema: "
 * message; GBNF text the compiler produced must parse, except for what it
 * leaves to the grammar ($refs that loop without consuming input, which are
 * left-recursive, or a grammar over the size limit). An accepted grammar
 * runs the recognizer on a few short JSON texts. Every schema is also the
 * tool-argument check's (json_schema_check.h) on those texts: a verdict in
 * range, a reason with every INVALID, within its bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "constrain/json_schema.h"
#include "server/tools/json_schema_check.h"

static const char *const probes[] = {"{}",    "null", "[1, \"a\"]",
                                     "\"x\"", "-12",  "{\"a\": {\"b\": [1.5, true]}}"};

static void check_probes(const json_t *schema) {
    for (size_t i = 0; i < sizeof probes / sizeof *probes; i++) {
        json_t *v = json_loads(probes[i], JSON_DECODE_ANY, NULL);
        char why[64];
        json_check c = json_schema_check(schema, v, why, sizeof why);
        if (c > JSON_CHECK_UNDECIDED || (c == JSON_CHECK_INVALID && !why[0])) abort();
        json_decref(v);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_t *schema = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!schema) return 0;
    check_probes(schema);
    sbuf text;
    sbuf_init(&text);
    tps_err err = {{0}};
    if (json_schema_to_gbnf(schema, &text, &err)) {
        if (strncmp(err.msg, "json_schema: ", 13)) abort();
    } else {
        grammar *g;
        int rc = grammar_parse(&g, text.p, text.len, &err);
        if (rc) {
            /* the compiler wrote GBNF the parser does not accept */
            if (strncmp(err.msg, "grammar: rule '", 15) && !strstr(err.msg, "too large")) abort();
            if (!strstr(err.msg, "too large") && !strstr(err.msg, "' is left-recursive")) abort();
        } else {
            for (size_t i = 0; i < sizeof probes / sizeof *probes; i++) {
                volatile bool ok = grammar_accepts(g, probes[i], strlen(probes[i]));
                (void)ok;
            }
            grammar_free(g);
        }
    }
    sbuf_free(&text);
    json_decref(schema);
    return 0;
}
