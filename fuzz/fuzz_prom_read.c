/* libFuzzer harness for the Prometheus text reader (src/metrics/prom_read.c),
 * which reads whatever a scraped server answers: any bytes must parse or
 * fail with a "line N: ..." message, never read outside the buffer; every
 * sample's name and labels lie inside the input, its name is a valid metric
 * name, and a second parse of the same bytes gives the same samples. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/prom_read.h"

typedef struct state {
    const uint8_t *buf;
    size_t len;
    uint64_t hash;
    size_t n;
} state;

static int check(void *arg, const prom_sample_view *s) {
    state *st = arg;
    const char *lo = (const char *)st->buf, *hi = lo + st->len;
    if (!s->name_len || s->name < lo || s->name + s->name_len > hi) abort();
    if (s->labels_len && (s->labels < lo || s->labels + s->labels_len > hi)) abort();
    for (size_t i = 0; i < s->name_len; i++) {
        char c = s->name[i];
        if (!(c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (i && c >= '0' && c <= '9')))
            abort();
    }
    uint64_t bits;
    memcpy(&bits, &s->value, sizeof bits);
    st->hash = st->hash * 1000003u ^ bits ^ (uint64_t)(s->name - lo) ^ ((uint64_t)s->type << 60);
    st->n++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    state a = {data, size, 0, 0}, b = {data, size, 0, 0};
    tps_err e1 = {{0}}, e2 = {{0}};
    int r1 = prom_text_parse((const char *)data, size, check, &a, &e1);
    int r2 = prom_text_parse((const char *)data, size, check, &b, &e2);
    if (r1 != r2 || a.hash != b.hash || a.n != b.n) abort();
    if (r1 && strncmp(e1.msg, "line ", 5)) abort();
    return 0;
}
