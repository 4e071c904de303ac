/* The CPU counters of /proc and what others did between two readings
 * (cpu_load.h). */
#include "metrics/cpu_load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The aggregate "cpu " line: user nice system idle iowait irq softirq steal. */
static bool parse_cpu_line(cpu_sample *s, const char *t) {
    const char *p = strstr(t, "cpu ");
    if (p != t && (!p || p[-1] != '\n')) return false;
    unsigned long long v[8] = {0};
    int n = sscanf(p + 4, "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]);
    if (n < 4) return false;
    s->total = 0;
    for (int k = 0; k < 8; k++)
        s->total += v[k];
    s->busy = v[0] + v[1] + v[2] + v[5] + v[6];
    s->steal = v[7];
    return true;
}

/* utime and stime: fields 14 and 15, counted after the command's ')'. */
static bool parse_self(cpu_sample *s, const char *t) {
    const char *p = strrchr(t, ')');
    if (!p) return false;
    unsigned long long ut, st;
    if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return false;
    s->own = ut + st;
    return true;
}

bool cpu_sample_parse(cpu_sample *s, const char *proc_stat, const char *self_stat) {
    memset(s, 0, sizeof *s);
    const char *r = strstr(proc_stat, "\nprocs_running ");
    unsigned running = 0;
    s->ok = parse_cpu_line(s, proc_stat) && parse_self(s, self_stat) && r &&
            sscanf(r + 15, "%u", &running) == 1;
    s->running = running;
    return s->ok;
}

/* The whole of a small /proc file into buf; false when unreadable. */
static bool read_small(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = 0;
    return n > 0;
}

void cpu_sample_take(cpu_sample *s) {
    char stat[16384], self[1024];
    memset(s, 0, sizeof *s);
    if (read_small("/proc/stat", stat, sizeof stat) &&
        read_small("/proc/self/stat", self, sizeof self))
        (void)cpu_sample_parse(s, stat, self);
}

cpu_contention cpu_contention_between(const cpu_sample *a, const cpu_sample *b) {
    cpu_contention c = {0};
    if (!a->ok || !b->ok || b->total <= a->total) return c;
    const double total = (double)(b->total - a->total);
    const double busy = b->busy > a->busy ? (double)(b->busy - a->busy) : 0;
    const double own = b->own > a->own ? (double)(b->own - a->own) : 0;
    c.known = true;
    c.others = busy > own ? (busy - own) / total : 0;
    c.steal = b->steal > a->steal ? (double)(b->steal - a->steal) / total : 0;
    return c;
}

/* Counter c of the readings at time x (inside them), linear between two. */
static double at(const cpu_tick *t, size_t n, uint64_t x, bool steal) {
    size_t k = 1;
    while (k + 1 < n && t[k].t_ns < x)
        k++;
    const cpu_tick *p = &t[k - 1], *q = &t[k];
    const double vp = (double)(steal ? p->steal : p->total),
                 vq = (double)(steal ? q->steal : q->total);
    if (q->t_ns <= p->t_ns) return vq;
    return vp + (vq - vp) * (double)(x - p->t_ns) / (double)(q->t_ns - p->t_ns);
}

double cpu_ticks_steal(const cpu_tick *t, size_t n, uint64_t a, uint64_t b) {
    if (n < 2 || b <= a || a < t[0].t_ns || b > t[n - 1].t_ns) return -1;
    const double total = at(t, n, b, false) - at(t, n, a, false);
    if (!(total >= CPU_TICKS_MIN)) return -1;
    const double s = (at(t, n, b, true) - at(t, n, a, true)) / total;
    return s < 0 ? 0 : s > 1 ? 1 : s;
}

uint32_t cpu_runnable_others(void) {
    uint32_t least = UINT32_MAX;
    for (int k = 0; k < 3; k++) {
        cpu_sample s;
        cpu_sample_take(&s);
        if (!s.ok) return 0;
        if (s.running < least) least = s.running;
        nanosleep(&(struct timespec){0, 2000000}, NULL);
    }
    return least > 1 ? least - 1 : 0;
}

bool cpu_contention_busy(const cpu_contention *c, char *why, size_t cap) {
    size_t n = 0;
    if (cap) why[0] = 0;
    if (c->known && c->others > 0.10)
        n += (size_t)snprintf(why + n, cap > n ? cap - n : 0,
                              "other processes used %.0f%% of the CPUs", 100 * c->others);
    if (c->known && c->steal > 0.03)
        n += (size_t)snprintf(why + n, cap > n ? cap - n : 0, "%sthe hypervisor stole %.0f%%",
                              n ? "; " : "", 100 * c->steal);
    if (c->runnable)
        n += (size_t)snprintf(why + n, cap > n ? cap - n : 0,
                              "%s%u thread%s of other processes waiting to run", n ? "; " : "",
                              c->runnable, c->runnable == 1 ? "" : "s");
    return n > 0;
}
