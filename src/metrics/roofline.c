/* The machine limits' cache file, the best-of merge of two readings of
 * them, the last-level cache's size, and the roofline arithmetic
 * (metrics/roofline.h). Nothing here measures or decides when to. */
#include "metrics/roofline.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void machine_cpu_name(char *buf, size_t cap) {
    snprintf(buf, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10)) continue;
        const char *v = strchr(line, ':');
        if (!v) break;
        v++;
        while (*v == ' ' || *v == '\t')
            v++;
        snprintf(buf, cap, "%.*s", (int)strcspn(v, "\n"), v);
        break;
    }
    fclose(f);
}

/* The cache folder, made if missing. */
static int cache_dir(char *buf, size_t cap, tps_err *err) {
    const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    int n = x && *x   ? snprintf(buf, cap, "%s/tps", x)
            : h && *h ? snprintf(buf, cap, "%s/.cache/tps", h)
                      : -1;
    if (n < 0 || (size_t)n >= cap)
        return tps_fail(err, TPS_EINVAL, "machine: no cache folder ($XDG_CACHE_HOME or $HOME)");
    for (char *p = buf + 1; *p; p++) { /* mkdir -p */
        if (*p != '/') continue;
        *p = 0;
        (void)mkdir(buf, 0755);
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return tps_fail(err, TPS_EIO, "machine: cannot make %s: %s", buf, strerror(errno));
    return 0;
}

int machine_cache_path(char *buf, size_t cap, int threads, int int8_bits, tps_err *err) {
    char dir[4096];
    int rc = cache_dir(dir, sizeof dir, err);
    if (rc) return rc;
    if ((size_t)snprintf(buf, cap, "%s/machine-%d-%d.txt", dir, threads, int8_bits) >= cap)
        return tps_fail(err, TPS_EINVAL, "machine: cache path too long");
    return 0;
}

int machine_cache_load(machine_limits *m, int threads, int int8_bits, tps_err *err) {
    char path[4200];
    int rc = machine_cache_path(path, sizeof path, threads, int8_bits, err);
    if (rc) return rc;
    FILE *f = fopen(path, "r");
    if (!f) return tps_fail(err, TPS_ENOENT, "machine: no measurement cached in %s", path);
    machine_limits got = {.threads = threads};
    char line[256];
    int seen = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "cpu ", 4)) {
            snprintf(got.cpu, sizeof got.cpu, "%.*s", (int)strcspn(line + 4, "\n"), line + 4);
            seen |= 1;
        }
        seen |= (sscanf(line, "read_gbs %lf", &got.read_gbs) == 1) << 1;
        seen |= (sscanf(line, "int8_gops %lf", &got.int8_gops) == 1) << 2;
        seen |= (sscanf(line, "fp32_gflops %lf", &got.fp32_gflops) == 1) << 3;
        seen |= (sscanf(line, "int8_bits %d", &got.int8_bits) == 1) << 4;
        unsigned long long t;
        if (sscanf(line, "measured_s %llu", &t) == 1) got.measured_s = t;
        if (!strncmp(line, "read_from ", 10))
            snprintf(got.read_from, sizeof got.read_from, "%.*s", (int)strcspn(line + 10, "\n"),
                     line + 10);
        if (!strncmp(line, "busy ", 5)) {
            got.busy = true;
            snprintf(got.busy_why, sizeof got.busy_why, "%.*s", (int)strcspn(line + 5, "\n"),
                     line + 5);
        }
    }
    fclose(f);
    char cpu[96];
    machine_cpu_name(cpu, sizeof cpu);
    if (seen != 31 || got.read_gbs <= 0 || got.int8_gops <= 0 || got.fp32_gflops <= 0)
        return tps_fail(err, TPS_EINVAL, "machine: %s does not parse; run tps machine --redo",
                        path);
    if (got.int8_bits != int8_bits)
        return tps_fail(err, TPS_EINVAL, "machine: %s holds a %d-bit measurement, not %d-bit", path,
                        got.int8_bits, int8_bits);
    if (strcmp(cpu, got.cpu))
        return tps_fail(err, TPS_EINVAL, "machine: %s was measured on '%s', this is '%s'", path,
                        got.cpu, cpu);
    *m = got;
    return 0;
}

int machine_cache_save(const machine_limits *m, tps_err *err) {
    char path[4200], tmp[4300];
    int rc = machine_cache_path(path, sizeof path, m->threads, m->int8_bits, err);
    if (rc) return rc;
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return tps_fail(err, TPS_EIO, "machine: cannot write %s: %s", tmp, strerror(errno));
    fprintf(f,
            "cpu %s\nthreads %d\nread_gbs %.3f\nint8_gops %.3f\nint8_bits %d\nfp32_gflops %.3f\n"
            "measured_s %llu\n",
            m->cpu, m->threads, m->read_gbs, m->int8_gops, m->int8_bits, m->fp32_gflops,
            (unsigned long long)m->measured_s);
    if (m->read_from[0]) fprintf(f, "read_from %s\n", m->read_from);
    if (m->busy) fprintf(f, "busy %s\n", m->busy_why[0] ? m->busy_why : "yes");
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        return tps_fail(err, TPS_EIO, "machine: cannot write %s", path);
    }
    return 0;
}

bool machine_limits_keep_best(machine_limits *into, const machine_limits *m) {
    bool rose = false;
    if (m->read_gbs > into->read_gbs) {
        into->read_gbs = m->read_gbs;
        snprintf(into->read_from, sizeof into->read_from, "%s", m->read_from);
        rose = true;
    }
    if (m->int8_gops > into->int8_gops) into->int8_gops = m->int8_gops, rose = true;
    if (m->fp32_gflops > into->fp32_gflops) into->fp32_gflops = m->fp32_gflops, rose = true;
    /* a quiet side's figures are the machine's own, and the best is at least those */
    if (into->busy && !m->busy) {
        into->busy = false;
        into->busy_why[0] = 0;
        into->measured_s = m->measured_s;
    }
    return rose;
}

/* The size of cpu0's cache at index i ("32768K"), or 0; *level its level. */
static size_t sysfs_cache(int i, int *level) {
    char path[96], line[64];
    size_t bytes = 0;
    *level = 0;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    if (fgets(line, sizeof line, f)) *level = atoi(line);
    fclose(f);
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    if (!(f = fopen(path, "r"))) return 0;
    if (fgets(line, sizeof line, f)) {
        char *end;
        bytes = (size_t)strtoull(line, &end, 10);
        bytes <<= *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
    }
    fclose(f);
    return bytes;
}

size_t machine_llc_bytes(void) {
    size_t best = 0;
    int best_level = 0;
    for (int i = 0; i < 8; i++) {
        int level;
        size_t b = sysfs_cache(i, &level);
        if (b && (level > best_level || (level == best_level && b > best)))
            best = b, best_level = level;
    }
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (!best) {
        long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
        best = l3 > 0 ? (size_t)l3 : l2 > 0 ? (size_t)l2 : 0;
    }
#endif
    return best;
}

bool roofline_dram_sized(double bytes_per_step, size_t llc_bytes) {
    return bytes_per_step > (double)(llc_bytes ? llc_bytes : ROOFLINE_DRAM_UNKNOWN_LLC);
}

double roofline_fraction(const roofline_work *w, const machine_limits *m) {
    if (!m || m->read_gbs <= 0 || m->int8_gops <= 0 || w->seconds <= 0) return 0;
    double t_bytes = (w->weight_bytes + w->kv_bytes) / (m->read_gbs * 1e9);
    double t_macs = w->macs / (m->int8_gops * 1e9);
    return (t_bytes > t_macs ? t_bytes : t_macs) / w->seconds;
}

const char *roofline_flag(double fraction, const machine_limits *m, bool bytes) {
    if (fraction > 1.0 && bytes)
        return m && m->busy ? "above the limit: measured while the machine was busy (tps machine "
                              "--redo on a quiet machine), or the data sat in the CPU's caches"
                            : "above the limit: the data sat in the CPU's caches (a model that "
                              "fits there reads faster than DRAM), or the limit is stale (tps "
                              "machine --redo on a quiet machine)";
    if (fraction > 1.0)
        return "above the limit, which no computation can be: the limit was measured while the "
               "machine was busy or is stale (tps machine --redo on a quiet machine)";
    if (m && m->busy)
        return "the limit was measured while the machine was busy, so this share is too high "
               "(tps machine --redo on a quiet machine)";
    return NULL;
}
