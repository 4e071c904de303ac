/* libFuzzer harness for the Prometheus text writer (src/server/write/prom_write.c): the
 * input is a program of samples (any double, NaN and infinities included)
 * and histograms (any recorded values, either bucket table, several
 * scales). Everything written is parsed back with a strict reader of text
 * format 0.0.4 and must round-trip: every value reads back as the exact
 * double written, `le` bounds are the table's, bucket counts are cumulative,
 * never decreasing, equal to a count from the histogram's buckets and within
 * the bucket width of a count from the recorded values, and +Inf equals
 * _count equals the histogram's count.
 *
 * Not here: escaping of names, labels and help text (the writer takes them
 * from the server's constants; the harness passes valid ones). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/hist.h"
#include "server/write/prom_write.h"

#define MAX_OPS    32
#define MAX_VALUES 64

typedef struct cursor {
    const uint8_t *p;
    size_t n;
} cursor;

static uint8_t take8(cursor *c) {
    if (!c->n) return 0;
    c->n--;
    return *c->p++;
}

static uint64_t take64(cursor *c) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | take8(c);
    return v;
}

/* ---------------------------------------------------------------------------
 * A strict reader for one sample line: `name{labels} value\n`
 * ------------------------------------------------------------------------- */

static int name_char(char ch, int first) {
    return ch == '_' || ch == ':' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (!first && ch >= '0' && ch <= '9');
}

/* Reads the line at *pos (which must end in '\n'); fills name (with labels)
 * and value; advances *pos. Aborts on any format error. */
static void read_sample(const char *text, size_t len, size_t *pos, char *key, size_t keycap,
                        double *v) {
    const char *line = text + *pos;
    const char *eol = memchr(line, '\n', len - *pos);
    if (!eol) abort(); /* every line ends with a newline */
    size_t n = (size_t)(eol - line);
    const char *sp = memchr(line, ' ', n);
    if (!sp || sp == line) abort();
    size_t kl = (size_t)(sp - line);
    if (kl >= keycap) abort();
    memcpy(key, line, kl);
    key[kl] = 0;
    for (size_t i = 0; i < kl && key[i] != '{'; i++)
        if (!name_char(key[i], i == 0)) abort();
    char *brace = strchr(key, '{');
    if (brace && key[kl - 1] != '}') abort();
    char val[64];
    size_t vl = n - kl - 1;
    if (vl == 0 || vl >= sizeof val) abort();
    memcpy(val, sp + 1, vl);
    val[vl] = 0;
    char *end;
    if (!strcmp(val, "+Inf"))
        *v = INFINITY;
    else if (!strcmp(val, "-Inf"))
        *v = -INFINITY;
    else if (!strcmp(val, "NaN"))
        *v = NAN;
    else {
        *v = strtod(val, &end);
        if (*end || strchr(val, 'n') || strchr(val, 'N') || strchr(val, 'i') || strchr(val, 'I'))
            abort(); /* only Prometheus' own spellings of the specials */
    }
    *pos += n + 1;
}

static void expect_comment(const char *text, size_t len, size_t *pos, const char *want) {
    size_t wl = strlen(want);
    if (len - *pos < wl || memcmp(text + *pos, want, wl)) abort();
    *pos += wl;
}

static int same_double(double a, double b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return a == b;
}

/* ---------------------------------------------------------------------------
 * Operations
 * ------------------------------------------------------------------------- */

static const char *const names[] = {"tps_x", "a", "tps_generation_tokens_total", "_:b_9", "Z:z"};

static void op_sample(sbuf *b, cursor *c) {
    const char *name = names[take8(c) % (sizeof names / sizeof names[0])];
    uint8_t lab = take8(c);
    const char *labels = lab % 3 == 0 ? NULL : lab % 3 == 1 ? "" : "finish_reason=\"stop\"";
    double v;
    uint64_t bits = take64(c);
    memcpy(&v, &bits, sizeof v);
    if (lab & 0x80) v = (double)(int64_t)bits / 1e6; /* ordinary magnitudes too */
    size_t start = b->len;
    prom_family(b, name, "gauge", "A help text.");
    prom_sample(b, name, labels, v);
    if (sbuf_failed(b)) return;

    size_t pos = start;
    char want[256], key[256];
    snprintf(want, sizeof want, "# HELP %s A help text.\n# TYPE %s gauge\n", name, name);
    expect_comment(b->p, b->len, &pos, want);
    double got;
    read_sample(b->p, b->len, &pos, key, sizeof key, &got);
    if (labels && labels[0])
        snprintf(want, sizeof want, "%s{%s}", name, labels);
    else
        snprintf(want, sizeof want, "%s", name);
    if (strcmp(key, want) || !same_double(got, v) || pos != b->len) abort();
}

static void op_histogram(sbuf *b, cursor *c, hist *lat, hist *cnt) {
    uint8_t sel = take8(c);
    int counts = sel & 1;
    hist *h = counts ? cnt : lat;
    static const double scales[] = {1e-9, 1.0, 1e-6, 1e-3};
    double scale = scales[(sel >> 1) % 4];
    const double *bounds = counts ? prom_count_bounds : prom_latency_bounds;
    size_t nb = counts ? prom_n_count_bounds : prom_n_latency_bounds;
    hist_reset(h);
    uint64_t values[MAX_VALUES];
    size_t nv = take8(c) % (MAX_VALUES + 1);
    for (size_t i = 0; i < nv; i++) {
        uint8_t shift = take8(c) % 64;
        uint64_t v = take64(c) >> shift; /* every magnitude, small ones often */
        values[i] = v;
        hist_record(h, v);
    }
    /* The expected `le` counts, two ways. Exactly, from h's buckets by the
     * rule prom_write.h states (a bucket counts toward le when all of it is at or
     * below le). And bounded, from the values alone: a value's bucket ends
     * at or above it and at most 1/M of it (+1) beyond, so the count lies
     * between the values that end well below le and those at or below it. */
    uint64_t expect[32] = {0}, lo[32] = {0}, hi[32] = {0};
    if (nb > 32) abort();
    hist_iter it;
    hist_bucket bk;
    hist_iter_init(&it, h);
    while (hist_iter_next(&it, &bk))
        for (size_t k = 0; k < nb; k++)
            if ((double)bk.hi * scale <= bounds[k]) expect[k] += bk.count;
    double width = 2 * hist_error_bound(h);
    uint64_t top = hist_get_config(h).highest;
    for (size_t i = 0; i < nv; i++)
        for (size_t k = 0; k < nb; k++) {
            if (values[i] > top) continue; /* overflow: only in +Inf */
            double v = (double)values[i];
            if ((v + v * width + 1) * scale * (1 + 1e-12) <= bounds[k]) lo[k]++;
            if (v * scale <= bounds[k] * (1 + 1e-12)) hi[k]++;
        }
    for (size_t k = 0; k < nb; k++)
        if (expect[k] < lo[k] || expect[k] > hi[k]) abort();

    size_t start = b->len;
    prom_histogram(b, "tps_h_seconds", "A histogram.", h, scale, bounds, nb);
    if (sbuf_failed(b)) return;
    size_t pos = start;
    expect_comment(b->p, b->len, &pos,
                   "# HELP tps_h_seconds A histogram.\n# TYPE tps_h_seconds histogram\n");
    char key[256];
    double got, prev = 0;
    for (size_t k = 0; k < nb; k++) {
        read_sample(b->p, b->len, &pos, key, sizeof key, &got);
        if (strncmp(key, "tps_h_seconds_bucket{le=\"", 25)) abort();
        double le = strtod(key + 25, NULL);
        if (le != bounds[k]) abort(); /* the bound reads back exactly */
        if (got < prev || got != (double)expect[k]) abort();
        prev = got;
    }
    read_sample(b->p, b->len, &pos, key, sizeof key, &got);
    if (strcmp(key, "tps_h_seconds_bucket{le=\"+Inf\"}") || got != (double)hist_count(h) ||
        got < prev)
        abort();
    read_sample(b->p, b->len, &pos, key, sizeof key, &got);
    if (strcmp(key, "tps_h_seconds_sum") || !same_double(got, (double)hist_sum(h) * scale)) abort();
    read_sample(b->p, b->len, &pos, key, sizeof key, &got);
    if (strcmp(key, "tps_h_seconds_count") || got != (double)nv) abort();
    if (pos != b->len) abort();
}

static hist *lat, *cnt;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    hist_config l = HIST_CONFIG_LATENCY_NS;
    hist_config k = {.lowest = 0, .highest = 1u << 20, .sig_digits = 2};
    tps_err e;
    if (hist_create(&lat, &l, &e) || hist_create(&cnt, &k, &e)) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cursor c = {data, size};
    sbuf b;
    sbuf_init(&b);
    for (int i = 0; i < MAX_OPS && c.n; i++) {
        if (take8(&c) & 1)
            op_histogram(&b, &c, lat, cnt);
        else
            op_sample(&b, &c);
    }
    sbuf_free(&b);
    return 0;
}
