/* libFuzzer harness for the regex -> GBNF compiler: any bytes must compile
 * or fail with a "regex: " message; compiled text must be GBNF that
 * grammar_parse either accepts or refuses with a "grammar: " message (a
 * regex such as (a*)* is refused there, as a repetition of something that
 * can match empty), never a crash or an overread. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "constrain/grammar.h"
#include "constrain/regex_gbnf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size ? size : 1); /* exactly size bytes: ASan sees overreads */
    if (!buf) return 0;
    memcpy(buf, data, size);
    sbuf out;
    sbuf_init(&out);
    tps_err err = {{0}};
    int rc = regex_to_gbnf(buf, size, &out, &err);
    if (rc) {
        if (rc != TPS_ENOMEM && strncmp(err.msg, "regex: ", 7)) abort();
    } else {
        grammar *g = NULL;
        rc = grammar_parse(&g, out.p, out.len, &err);
        if (rc && strncmp(err.msg, "grammar: ", 9)) abort();
        if (!rc && g->n_elems < 4096) {
            volatile bool ok = grammar_accepts(g, buf, size < 16 ? size : 16);
            (void)ok;
        }
        grammar_free(g);
    }
    sbuf_free(&out);
    free(buf);
    return 0;
}
