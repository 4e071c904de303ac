/* Prometheus text writer (see prom_write.h). */
#include "server/write/prom_write.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

const double prom_latency_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04,  0.06,  0.08,  0.1,
                                      0.15,  0.2,    0.3,   0.4,  0.5,  0.75,  1.0,   2.5,   5.0,
                                      7.5,   10.0,   20.0,  40.0, 80.0, 160.0, 640.0, 2560.0};
const size_t prom_n_latency_bounds = sizeof prom_latency_bounds / sizeof prom_latency_bounds[0];
const double prom_count_bounds[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
const size_t prom_n_count_bounds = sizeof prom_count_bounds / sizeof prom_count_bounds[0];

void prom_family(sbuf *b, const char *name, const char *type, const char *help) {
    sbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Prometheus floats: integers exactly, others with enough digits to round
 * trip; +Inf spelled as Prometheus spells it. */
static void value(sbuf *b, double v) {
    if (isinf(v))
        sbuf_adds(b, v > 0 ? "+Inf" : "-Inf");
    else if (isnan(v))
        sbuf_adds(b, "NaN");
    else if (v == floor(v) && fabs(v) < 1e15)
        sbuf_printf(b, "%.0f", v);
    else {
        char tmp[32];
        for (int prec = 6; prec <= 17; prec++) { /* the shortest that reads back exactly */
            snprintf(tmp, sizeof tmp, "%.*g", prec, v);
            if (strtod(tmp, NULL) == v) break;
        }
        sbuf_adds(b, tmp);
    }
}

void prom_sample(sbuf *b, const char *name, const char *labels, double v) {
    sbuf_adds(b, name);
    if (labels && labels[0]) sbuf_printf(b, "{%s}", labels);
    sbuf_adds(b, " ");
    value(b, v);
    sbuf_adds(b, "\n");
}

void prom_histogram(sbuf *b, const char *name, const char *help, const hist *h, double scale,
                    const double *bounds, size_t n_bounds) {
    prom_family(b, name, "histogram", help);
    hist_iter it;
    hist_bucket bk;
    hist_iter_init(&it, h);
    bool more = hist_iter_next(&it, &bk);
    uint64_t cum = hist_underflow(h);
    for (size_t i = 0; i < n_bounds; i++) {
        while (more && (double)bk.hi * scale <= bounds[i]) {
            cum += bk.count;
            more = hist_iter_next(&it, &bk);
        }
        sbuf_printf(b, "%s_bucket{le=\"", name);
        value(b, bounds[i]);
        sbuf_printf(b, "\"} %llu\n", (unsigned long long)cum);
    }
    sbuf_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)hist_count(h));
    sbuf_printf(b, "%s_sum ", name);
    value(b, (double)hist_sum(h) * scale);
    sbuf_printf(b, "\n%s_count %llu\n", name, (unsigned long long)hist_count(h));
}
