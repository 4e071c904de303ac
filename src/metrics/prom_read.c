/* The Prometheus text reader (prom_read.h): one pass over the lines, no
 * allocation. Not here: the writer (server/prom_write.c). */
#include "metrics/prom_read.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/name_table.h"

static bool name_char(char c, bool first) {
    return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (!first && c >= '0' && c <= '9');
}

/* The length of the metric name at p[0..n), 0 if none. */
static size_t name_len(const char *p, size_t n) {
    size_t i = 0;
    while (i < n && name_char(p[i], i == 0))
        i++;
    return i;
}

static size_t skip_blank(const char *p, size_t i, size_t n) {
    while (i < n && (p[i] == ' ' || p[i] == '\t'))
        i++;
    return i;
}

/* `# TYPE name type`: the family; other comments leave it as it is. */
static void type_line(const char *p, size_t n, const char **fam, size_t *fam_len, prom_type *type) {
    size_t i = skip_blank(p, 1, n);
    if (n - i < 5 || memcmp(p + i, "TYPE", 4) || (p[i + 4] != ' ' && p[i + 4] != '\t')) return;
    i = skip_blank(p, i + 4, n);
    size_t nl = name_len(p + i, n - i);
    if (!nl) return;
    const char *name = p + i;
    i = skip_blank(p, i + nl, n);
    size_t tl = n - i;
    while (tl && (p[i + tl - 1] == ' ' || p[i + tl - 1] == '\t'))
        tl--;
    static const tps_name_id T[] = {
        {"counter", PROM_COUNTER}, {"gauge", PROM_GAUGE},     {"histogram", PROM_HISTOGRAM},
        {"summary", PROM_SUMMARY}, {"untyped", PROM_UNTYPED}, {"gaugehistogram", PROM_HISTOGRAM},
        {"unknown", PROM_UNTYPED}};
    int t = TPS_NAME_FIND(T, p + i, tl, -1);
    if (t >= 0) *fam = name, *fam_len = nl, *type = (prom_type)t;
}

static prom_type type_of(const char *name, size_t nl, const char *fam, size_t fl, prom_type t) {
    if (!fam || nl < fl || memcmp(name, fam, fl)) return PROM_UNTYPED;
    static const char *const SUF[] = {"", "_total", "_bucket", "_sum", "_count", "_created"};
    for (size_t k = 0; k < sizeof SUF / sizeof SUF[0]; k++)
        if (nl - fl == strlen(SUF[k]) && !memcmp(name + fl, SUF[k], nl - fl)) return t;
    return PROM_UNTYPED;
}

/* The labels from p[i] == '{' to the matching '}'; returns the index after
 * it, or 0 on a malformed set. */
static size_t labels_end(const char *p, size_t i, size_t n) {
    i++;
    for (;;) {
        i = skip_blank(p, i, n);
        if (i < n && p[i] == '}') return i + 1;
        size_t ln = name_len(p + i, n - i);
        if (!ln) return 0;
        i = skip_blank(p, i + ln, n);
        if (i >= n || p[i] != '=') return 0;
        i = skip_blank(p, i + 1, n);
        if (i >= n || p[i] != '"') return 0;
        for (i++; i < n && p[i] != '"'; i++)
            if (p[i] == '\\') {
                if (i + 1 >= n || (p[i + 1] != '\\' && p[i + 1] != '"' && p[i + 1] != 'n'))
                    return 0;
                i++;
            }
        if (i >= n) return 0;
        i = skip_blank(p, i + 1, n);
        if (i < n && p[i] == ',')
            i++;
        else if (i >= n || p[i] != '}')
            return 0;
    }
}

/* A value: a Go-style float, +Inf, -Inf or NaN. */
static bool parse_value(const char *p, size_t n, double *v) {
    char buf[64];
    if (!n || n >= sizeof buf) return false;
    memcpy(buf, p, n);
    buf[n] = 0;
    if (!strcmp(buf, "+Inf") || !strcmp(buf, "Inf")) return *v = INFINITY, true;
    if (!strcmp(buf, "-Inf")) return *v = -INFINITY, true;
    if (!strcmp(buf, "NaN")) return *v = NAN, true;
    for (size_t i = 0; i < n; i++) /* strtod's own spellings (inf, nan, hex) are not the format's */
        if (!strchr("0123456789+-.eE", buf[i])) return false;
    char *end;
    *v = strtod(buf, &end);
    return end == buf + n;
}

int prom_text_parse(const char *buf, size_t len, prom_sample_fn fn, void *arg, tps_err *e) {
    const char *fam = NULL;
    size_t fam_len = 0;
    prom_type fam_type = PROM_UNTYPED;
    size_t line = 0;
    for (size_t at = 0; at < len;) {
        const char *p = buf + at;
        const char *nl = memchr(p, '\n', len - at);
        size_t n = nl ? (size_t)(nl - p) : len - at;
        at += n + (nl != NULL);
        line++;
        if (n && p[n - 1] == '\r') n--;
        size_t i = skip_blank(p, 0, n);
        if (i == n) continue;
        if (p[i] == '#') {
            type_line(p + i, n - i, &fam, &fam_len, &fam_type);
            continue;
        }
        prom_sample_view s = {.name = p + i, .name_len = name_len(p + i, n - i)};
        if (!s.name_len) return tps_fail(e, TPS_EINVAL, "line %zu: expected a metric name", line);
        i += s.name_len;
        if (i < n && p[i] == '{') {
            size_t end = labels_end(p, i, n);
            if (!end) return tps_fail(e, TPS_EINVAL, "line %zu: malformed labels", line);
            s.labels = p + i + 1;
            s.labels_len = end - i - 2;
            i = end;
        }
        size_t v0 = skip_blank(p, i, n);
        if (v0 == i || v0 == n)
            return tps_fail(e, TPS_EINVAL, "line %zu: expected a value after the name", line);
        size_t v1 = v0;
        while (v1 < n && p[v1] != ' ' && p[v1] != '\t')
            v1++;
        if (!parse_value(p + v0, v1 - v0, &s.value))
            return tps_fail(e, TPS_EINVAL, "line %zu: '%.*s' is not a sample value", line,
                            (int)(v1 - v0 > 40 ? 40 : v1 - v0), p + v0);
        size_t t0 = skip_blank(p, v1, n), t1 = t0; /* optional timestamp (ms), ignored */
        while (t1 < n && ((p[t1] >= '0' && p[t1] <= '9') || (t1 == t0 && p[t1] == '-')))
            t1++;
        if (skip_blank(p, t1, n) != n)
            return tps_fail(e, TPS_EINVAL, "line %zu: unexpected text after the value", line);
        s.type = type_of(s.name, s.name_len, fam, fam_len, fam_type);
        int rc = fn(arg, &s);
        if (rc) return rc;
    }
    return TPS_OK;
}
