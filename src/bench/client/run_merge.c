/* Event loops' outputs of one run -> one output (run_merge.h). */
#include "bench/client/run_merge.h"

#include <stdlib.h>
#include <string.h>

static int by_seq(const void *a, const void *b) {
    uint64_t x = ((const bench_record *)a)->seq, y = ((const bench_record *)b)->seq;
    return x < y ? -1 : x > y;
}

int bench_run_merge(bench_run_out *out, bench_run_out *parts, size_t n, tps_err *e) {
    memset(out, 0, sizeof *out);
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += parts[i].n;
    bench_record *recs = malloc((total ? total : 1) * sizeof *recs);
    if (!recs) return tps_fail(e, TPS_ENOMEM, "cannot allocate %zu request records", total);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const bench_run_out *p = &parts[i];
        if (p->n) memcpy(recs + at, p->recs, p->n * sizeof *recs);
        at += p->n;
        if (i == 0 || p->t_stop_ns > out->t_stop_ns) out->t_stop_ns = p->t_stop_ns;
        out->client_cpu_s += p->client_cpu_s;
        out->client_loops += p->client_loops ? p->client_loops : 1;
        if (p->client_loop_cpu_max_s > out->client_loop_cpu_max_s)
            out->client_loop_cpu_max_s = p->client_loop_cpu_max_s;
        out->bytes_received += p->bytes_received;
        out->events_received += p->events_received;
        out->hit_deadline |= p->hit_deadline;
    }
    qsort(recs, total, sizeof *recs, by_seq);
    out->recs = recs;
    out->n = total;
    out->t_start_ns = n ? parts[0].t_start_ns : 0;
    out->t_start_unix_ns = n ? parts[0].t_start_unix_ns : 0;
    for (size_t i = 0; i < n; i++) {
        free(parts[i].recs);
        parts[i].recs = NULL;
        parts[i].n = 0;
    }
    return TPS_OK;
}
