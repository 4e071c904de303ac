/* The read bandwidth a report's shares are read against (report_set.h,
 * rset_limit_apply): the given figure or each point's server's, raised to
 * what a point too big for the caches was seen to read when that was more.
 * Not here: computing a point's GB/s or share (report_set.c), printing
 * (report_factor.c, report_html.c), measuring anything. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench/report/report_set.h"
#include "metrics/roofline.h" /* roofline_dram_sized: too big for the caches */

/* The limit p is read against before any raise: given, else its server's;
 * 0 when neither is known. */
static double base_bps(const rset_point *p, const rset_limit *l) {
    return l->read_bps > 0               ? l->read_bps
           : p->srv.machine_read_bps > 0 ? p->srv.machine_read_bps
                                         : 0;
}

static bool same_figure(double a, double b) {
    return fabs(a - b) <= 1e-9 * fmax(a, b);
}

/* The fastest point too big for the caches among those read against base
 * (its GB/s in *gbs), or NULL when none read faster than base. */
static const rset_point *fastest_dram(const rset *sets, size_t n, const rset_limit *l, double base,
                                      double *gbs) {
    const rset_point *best = NULL;
    *gbs = base / 1e9;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < sets[i].n; j++) {
            const rset_point *q = &sets[i].p[j];
            const double g = rset_point_gbs(q);
            if (g <= *gbs || q->srv.steps <= 0 || !same_figure(base_bps(q, l), base)) continue;
            const double per_step = (q->srv.weight_bytes + q->srv.kv_bytes) / q->srv.steps;
            if (!roofline_dram_sized(per_step, l->llc_bytes)) continue;
            best = q;
            *gbs = g;
        }
    return best;
}

void rset_limit_apply(rset *sets, size_t n, const rset_limit *l) {
    const double llc_mib =
        (double)(l->llc_bytes ? l->llc_bytes : ROOFLINE_DRAM_UNKNOWN_LLC) / 1048576.0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < sets[i].n; j++) {
            rset_point *p = &sets[i].p[j];
            const double base = base_bps(p, l);
            p->limit_bps = base;
            p->limit_busy = l->read_bps > 0 ? false : p->srv.machine_busy > 0;
            p->limit_note[0] = 0;
            double gbs;
            const rset_point *q = base > 0 ? fastest_dram(sets, n, l, base, &gbs) : NULL;
            if (!q) continue;
            p->limit_bps = gbs * 1e9;
            p->limit_busy = false;
            snprintf(
                p->limit_note, sizeof p->limit_note,
                "read against %.1f GB/s, what the steps of %.100s (%.160s) read from more bytes a "
                "step than the %.0f MiB last-level cache holds: the measured %.1f GB/s "
                "(%.200s) " RSET_LIMIT_RAISED " (tps machine on a quiet machine measures again)",
                gbs, q->label, q->source, llc_mib, base / 1e9,
                l->read_bps > 0 && l->from ? l->from : "tps machine's, on the server");
        }
}

void rset_limit_describe(char *out, size_t cap, const rset *sets, size_t n, const rset_limit *l) {
    double base = 0, top = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < sets[i].n; j++) {
            const rset_point *p = &sets[i].p[j];
            if (!base) base = base_bps(p, l);
            if (p->limit_bps > top) top = p->limit_bps;
        }
    out[0] = 0;
    if (base <= 0) return;
    int k = snprintf(out, cap, "%% of bandwidth is read against %.1f GB/s (%s)", base / 1e9,
                     l->read_bps > 0 ? (l->from ? l->from : "given: tps report --read-gbs")
                                     : "tps machine's figure on the server, from its /metrics");
    if (k > 0 && (size_t)k < cap && top > base && !same_figure(top, base))
        snprintf(out + k, cap - (size_t)k,
                 ", raised to %.1f GB/s where a point too big for the caches read that much "
                 "(noted under its table)",
                 top / 1e9);
}
