/* The fitted step-cost model and its calibration file (step_fit.h):
 * features, weighted normal equations with a curvature penalty, a small
 * Gaussian elimination, and the text file. */
#include "engine/cost/step_fit.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/file_write.h"
#include "base/ggml_type.h"

#define LOGIT     (STEP_FIT_KNOTS)
#define ATT       (STEP_FIT_KNOTS + 1)
#define KVR       (STEP_FIT_KNOTS + 2)
#define ATT_SCALE 1024.0 /* attended positions per feature unit: keeps the sums in range */
/* The penalty on a change of slope between segments against the data, per
 * unit of weight: small enough that segments the data pins down keep their
 * slope, large enough that the others take their neighbours'. */
#define SMOOTH 1e-3

static double knot(int i) {
    return (double)(1u << i);
}

/* The features of a shape. body(rows) = c[0] + sum over segments i of
 * c[1 + i] x (the rows of segment [knot i, knot i+1] that rows covers),
 * the last segment open-ended: c[0] is a one-row step, c[1 + i] segment
 * i's cost per row. Every coefficient is kept >= 0, so body never falls
 * as rows grow (a fit on noisy steps could otherwise zigzag between
 * knots). Then logit rows, attended / ATT_SCALE, K/V read / ATT_SCALE. */
static void features(double x[STEP_FIT_NF], const step_shape *s) {
    memset(x, 0, sizeof(double) * STEP_FIT_NF);
    double r = s->rows < 1 ? 1 : s->rows;
    x[0] = 1;
    for (int i = 0; i + 1 < STEP_FIT_KNOTS; i++) {
        double lo = knot(i), hi = i + 2 < STEP_FIT_KNOTS ? knot(i + 1) : INFINITY;
        x[1 + i] = r <= lo ? 0 : r >= hi ? hi - lo : r - lo;
    }
    x[LOGIT] = s->logit_rows;
    x[ATT] = s->attended / ATT_SCALE;
    x[KVR] = s->kv_read / ATT_SCALE;
}

void step_fit_init(step_fit *f) {
    memset(f, 0, sizeof *f);
}

/* A step's weight: about the inverse square of its size, so that small
 * and large steps count alike in relative terms, from its shape alone:
 * weighting by the measured time instead would favour the steps that ran
 * fast, and fit the median step where a busy machine's mean is what the
 * time adds up to. */
static double weight_of(const step_shape *s) {
    double scale = 1 + s->rows / 32 + s->logit_rows / 16 + s->kv_read / 2048;
    return 1.0 / (scale * scale);
}

void step_fit_add(step_fit *f, const step_shape *s, double fwd_ns, double post_ns) {
    double y = fwd_ns + post_ns;
    if (!(y > 0) || !(fwd_ns >= 0) || !(post_ns >= 0)) return;
    double x[STEP_FIT_NF], w = weight_of(s);
    features(x, s);
    for (int a = 0; a < STEP_FIT_NF; a++) {
        if (x[a] == 0) continue;
        for (int b = 0; b < STEP_FIT_NF; b++)
            f->xtx[a][b] += w * x[a] * x[b];
        f->xty[0][a] += w * x[a] * fwd_ns;
        f->xty[1][a] += w * x[a] * post_ns;
    }
    f->n++;
    f->sw += w;
    f->sy2 += w * y * y;
    if (s->rows > f->max_rows) f->max_rows = s->rows;
    f->solved = false;
}

/* Solves a x = b (n x n, destroyed) by Gaussian elimination with partial
 * pivoting; -1 when singular. */
static int gauss(int n, double a[STEP_FIT_NF][STEP_FIT_NF], double b[STEP_FIT_NF],
                 double x[STEP_FIT_NF]) {
    for (int c = 0; c < n; c++) {
        int p = c;
        for (int r = c + 1; r < n; r++)
            if (fabs(a[r][c]) > fabs(a[p][c])) p = r;
        if (!(fabs(a[p][c]) > 1e-300)) return -1;
        if (p != c) {
            for (int k = 0; k < n; k++) {
                double t = a[c][k];
                a[c][k] = a[p][k];
                a[p][k] = t;
            }
            double t = b[c];
            b[c] = b[p];
            b[p] = t;
        }
        for (int r = c + 1; r < n; r++) {
            double m = a[r][c] / a[c][c];
            for (int k = c; k < n; k++)
                a[r][k] -= m * a[c][k];
            b[r] -= m * b[c];
        }
    }
    for (int r = n - 1; r >= 0; r--) {
        double s = b[r];
        for (int k = r + 1; k < n; k++)
            s -= a[r][k] * x[k];
        x[r] = s / a[r][r];
    }
    return 0;
}

/* The normal equations plus the penalties: a change of slope between
 * neighbouring segments (weighted by the rows where it happens, so it is
 * in the data's units), and a tiny ridge everywhere; a feature in `off` is
 * pinned to 0. */
static int solve_one(const step_fit *f, int target, const bool off[STEP_FIT_NF],
                     double out[STEP_FIT_NF]) {
    double a[STEP_FIT_NF][STEP_FIT_NF], b[STEP_FIT_NF];
    memcpy(a, f->xtx, sizeof a);
    memcpy(b, f->xty[target], sizeof b);
    const double y2 = f->sy2 / f->sw; /* a typical squared time: the penalty's unit */
    const double lam = SMOOTH * f->sw / y2;
    for (int i = 1; i + 1 < STEP_FIT_KNOTS; i++) { /* slopes c[i] and c[1 + i] */
        const double w = lam * knot(i) * knot(i);
        a[i][i] += w;
        a[i + 1][i + 1] += w;
        a[i][i + 1] -= w;
        a[i + 1][i] -= w;
    }
    for (int k = 0; k < STEP_FIT_NF; k++) {
        /* relative to the diagonal: two features the data never tells apart
         * (a decode-only run's rows and logit rows) share their coefficient */
        a[k][k] += 1e-7 * a[k][k] + 1e-9 * lam + (off[k] ? 1e30 : 0);
        if (off[k]) b[k] = 0;
    }
    return gauss(STEP_FIT_NF, a, b, out);
}

int step_fit_solve(step_fit *f, tps_err *err) {
    if (f->n < 2 || !(f->sw > 0))
        return tps_fail(err, TPS_EINVAL, "step fit: %llu steps observed; at least 2 are needed",
                        (unsigned long long)f->n);
    for (int t = 0; t < 2; t++) {
        /* non-negative least squares by an active set: pin the most
         * negative coefficient to 0 and solve again, until none is */
        bool off[STEP_FIT_NF] = {false};
        for (int round = 0; round < STEP_FIT_NF; round++) {
            if (solve_one(f, t, off, f->coef[t]))
                return tps_fail(err, TPS_EINVAL, "step fit: the observations do not determine it");
            int worst = -1;
            for (int k = 0; k < STEP_FIT_NF; k++)
                if (!off[k] && f->coef[t][k] < 0 &&
                    (worst < 0 || f->coef[t][k] < f->coef[t][worst]))
                    worst = k;
            if (worst < 0) break;
            off[worst] = true;
        }
        for (int k = 0; k < STEP_FIT_NF; k++)
            if (f->coef[t][k] < 0) f->coef[t][k] = 0;
    }
    f->solved = true;
    return 0;
}

static double predict(const step_fit *f, int t, const step_shape *s) {
    double x[STEP_FIT_NF], y = 0;
    features(x, s);
    for (int k = 0; k < STEP_FIT_NF; k++)
        y += f->coef[t][k] * x[k];
    return y > 0 ? y : 0;
}

double step_fit_fwd_ns(const step_fit *f, const step_shape *s) {
    return predict(f, 0, s);
}

double step_fit_post_ns(const step_fit *f, const step_shape *s) {
    return predict(f, 1, s);
}

/* ---- the calibration file --------------------------------------------------- */

void step_calib_model_of(step_calib_model *out, const llama_model *m) {
    const llama_config *c = &m->cfg;
    memset(out, 0, sizeof *out);
    snprintf(out->arch, sizeof out->arch, "%s", c->arch[0] ? c->arch : "llama");
    out->dim = c->dim;
    out->n_layers = c->n_layers;
    out->n_heads = c->n_heads;
    out->n_kv_heads = c->n_kv_heads;
    out->head_dim = c->head_dim;
    out->ffn_dim = c->ffn_dim;
    out->n_vocab = c->n_vocab;
    out->weight_bytes = m->w.bytes_per_token;
}

const char *step_calib_model_differs(const step_calib_model *a, const step_calib_model *b) {
    if (strcmp(a->arch, b->arch)) return "architecture";
    if (a->dim != b->dim || a->n_layers != b->n_layers || a->n_heads != b->n_heads ||
        a->n_kv_heads != b->n_kv_heads || a->head_dim != b->head_dim || a->ffn_dim != b->ffn_dim ||
        a->n_vocab != b->n_vocab)
        return "shape";
    if (a->weight_bytes != b->weight_bytes) return "weight bytes (another quantization)";
    return NULL;
}

const step_fit *step_calib_find(const step_calib *c, uint32_t kv_type) {
    for (uint32_t i = 0; i < c->n_kv; i++)
        if (c->kv_type[i] == kv_type && c->fit[i].solved) return &c->fit[i];
    return NULL;
}

static void write_coefs(FILE *f, const char *name, const double *v) {
    fprintf(f, "%s", name);
    for (int k = 0; k < STEP_FIT_NF; k++)
        fprintf(f, " %.9g", v[k]);
    fputc('\n', f);
}

static void write_noise(FILE *f, const char *name, const step_noise *z) {
    if (!z->n) return;
    fprintf(f, "%s steps %llu q", name, (unsigned long long)z->n);
    for (int k = 0; k < STEP_NOISE_Q; k++)
        fprintf(f, " %.4f", z->q[k]);
    fputc('\n', f);
}

/* Written through file_out (base/file_write.h): a regular file is replaced
 * whole by a rename, /dev/stdout or a device node written in place, never
 * replaced (issue 48: -o /dev/full became a regular file). */
int step_calib_write(const step_calib *c, const char *path, tps_err *err) {
    file_out out;
    tps_err oe = {{0}};
    if (file_out_open(&out, path, &oe)) return tps_fail(err, TPS_EIO, "calibration: %s", oe.msg);
    FILE *f = out.f;
    const step_calib_model *m = &c->model;
    const machine_limits *ml = &c->machine;
    fprintf(f, "%s %d\nsource %s\n", STEP_CALIB_MAGIC, STEP_CALIB_VERSION, c->source);
    fprintf(f, "model %s %u %u %u %u %u %u %u %llu\n", m->arch, m->dim, m->n_layers, m->n_heads,
            m->n_kv_heads, m->head_dim, m->ffn_dim, m->n_vocab,
            (unsigned long long)m->weight_bytes);
    fprintf(f, "threads %d\ncpu %s\nlimits %d %.3f %.3f %d %.3f\n", c->threads, ml->cpu,
            ml->threads, ml->read_gbs, ml->int8_gops, ml->int8_bits, ml->fp32_gflops);
    fprintf(f, "knots %d features %d\n", STEP_FIT_KNOTS, STEP_FIT_NF);
    for (uint32_t i = 0; i < c->n_kv; i++) {
        const step_fit *fit = &c->fit[i];
        fprintf(f, "kv %s steps %llu max_rows %.0f err_p50 %.4f\n",
                ggml_type_get(c->kv_type[i])->name, (unsigned long long)fit->n, fit->max_rows,
                fit->err_p50);
        write_coefs(f, "fwd", fit->coef[0]);
        write_coefs(f, "post", fit->coef[1]);
        write_noise(f, "noise", &fit->noise);
        write_noise(f, "noise_one", &fit->noise_one);
        if (fit->prime.n)
            fprintf(f, "prime n %u t1 %.0f tn %.0f\n", fit->prime.n, fit->prime.t1_ns,
                    fit->prime.tn_ns);
    }
    if (c->has_steal) fprintf(f, "steal %.4f\n", c->steal);
    if (c->turnaround.n) {
        fprintf(f, "turnaround steps %llu q", (unsigned long long)c->turnaround.n);
        for (int k = 0; k < STEP_NOISE_Q; k++)
            fprintf(f, " %.0f", c->turnaround.q[k]);
        fputc('\n', f);
    }
    if (file_out_close(&out, &oe)) return tps_fail(err, TPS_EIO, "calibration: %s", oe.msg);
    return 0;
}

static int read_coefs(const char *line, const char *name, double *v) {
    size_t n = strlen(name);
    if (strncmp(line, name, n) || line[n] != ' ') return -1;
    const char *p = line + n;
    for (int k = 0; k < STEP_FIT_NF; k++) {
        char *end;
        v[k] = strtod(p, &end);
        if (end == p || !isfinite(v[k])) return -1;
        p = end;
    }
    return 0;
}

/* A noise or turnaround line's values: at least 16 observations,
 * quantiles in (lo, hi) and in order; -1 otherwise. */
static int read_noise(step_noise *z, const char *p, double lo, double hi) {
    unsigned long long n;
    int used = 0;
    if (sscanf(p, "steps %llu q%n", &n, &used) != 1 || !used || n < 16) return -1;
    p += used;
    for (int k = 0; k < STEP_NOISE_Q; k++) {
        char *end;
        z->q[k] = strtod(p, &end);
        if (end == p || !(z->q[k] > lo) || !(z->q[k] < hi) || (k && z->q[k] < z->q[k - 1]))
            return -1;
        p = end;
    }
    z->n = n;
    return 0;
}

bool step_prime_ok(const step_prime *p) {
    return p->n >= 2 && p->t1_ns > 0 && p->t1_ns < 60e9 && p->tn_ns > 0 && p->tn_ns < 60e9;
}

/* A prime line (step_prime_ok); -1 otherwise. */
static int read_prime(step_prime *p, const char *s) {
    int used = 0;
    if (sscanf(s, "n %u t1 %lf tn %lf%n", &p->n, &p->t1_ns, &p->tn_ns, &used) != 3 || !used ||
        !step_prime_ok(p)) {
        memset(p, 0, sizeof *p);
        return -1;
    }
    return 0;
}

/* One line of the file into c; -1 when it does not parse. */
static int read_line(step_calib *c, const char *line) {
    step_calib_model *m = &c->model;
    machine_limits *ml = &c->machine;
    unsigned long long wb, steps;
    int knots, nf;
    char name[16];
    step_fit *fit = c->n_kv ? &c->fit[c->n_kv - 1] : NULL;
    if (!strncmp(line, "source ", 7)) return sscanf(line + 7, "%31s", c->source) == 1 ? 0 : -1;
    if (!strncmp(line, "model ", 6)) {
        int n = sscanf(line + 6, "%31s %u %u %u %u %u %u %u %llu", m->arch, &m->dim, &m->n_layers,
                       &m->n_heads, &m->n_kv_heads, &m->head_dim, &m->ffn_dim, &m->n_vocab, &wb);
        m->weight_bytes = wb;
        return n == 9 ? 0 : -1;
    }
    if (!strncmp(line, "threads ", 8)) return sscanf(line + 8, "%d", &c->threads) == 1 ? 0 : -1;
    if (!strncmp(line, "cpu ", 4)) {
        size_t n = strlen(line + 4);
        if (n >= sizeof ml->cpu) n = sizeof ml->cpu - 1;
        memcpy(ml->cpu, line + 4, n);
        ml->cpu[n] = 0;
        return 0;
    }
    if (!strncmp(line, "limits ", 7))
        return sscanf(line + 7, "%d %lf %lf %d %lf", &ml->threads, &ml->read_gbs, &ml->int8_gops,
                      &ml->int8_bits, &ml->fp32_gflops) == 5
                   ? 0
                   : -1;
    if (!strncmp(line, "knots ", 6))
        return sscanf(line + 6, "%d features %d", &knots, &nf) == 2 && knots == STEP_FIT_KNOTS &&
                       nf == STEP_FIT_NF
                   ? 0
                   : -1;
    if (!strncmp(line, "kv ", 3)) {
        if (c->n_kv == STEP_CALIB_MAX_KV) return -1;
        fit = &c->fit[c->n_kv];
        step_fit_init(fit);
        if (sscanf(line + 3, "%15s steps %llu max_rows %lf err_p50 %lf", name, &steps,
                   &fit->max_rows, &fit->err_p50) != 4)
            return -1;
        fit->n = steps;
        int t = ggml_type_from_name(name);
        if (t != GGML_TYPE_F16 && t != GGML_TYPE_F32 && t != GGML_TYPE_Q8_0) return -1;
        c->kv_type[c->n_kv++] = (uint32_t)t;
        fit->solved = true;
        return 0;
    }
    /* a step's time over the fit: a ratio; a turnaround: ns, under a minute */
    if (fit && !strncmp(line, "noise ", 6)) return read_noise(&fit->noise, line + 6, 0, 1e3);
    if (fit && !strncmp(line, "noise_one ", 10))
        return read_noise(&fit->noise_one, line + 10, 0, 1e3);
    if (!strncmp(line, "turnaround ", 11)) return read_noise(&c->turnaround, line + 11, -1, 60e9);
    if (!strncmp(line, "steal ", 6)) {
        c->has_steal = sscanf(line + 6, "%lf", &c->steal) == 1 && c->steal >= 0 && c->steal <= 1;
        return c->has_steal ? 0 : -1;
    }
    if (fit && !strncmp(line, "prime ", 6)) return read_prime(&fit->prime, line + 6);
    if (fit && !read_coefs(line, "fwd", fit->coef[0])) return 0;
    if (fit && !read_coefs(line, "post", fit->coef[1])) return 0;
    return -1;
}

/* Bounds a parsed file must keep: what any machine and model tps runs could
 * have measured, so a hand-edited or hostile file is refused instead of
 * planning from 1e300 ns coefficients or -2147483648 threads (issue 48). */
#define CALIB_MAX_THREADS 65536
#define CALIB_MAX_COEF_NS 1e11 /* 100 s per unit of any feature */
#define CALIB_MAX_STEAL   0.95 /* a machine losing more to its neighbours plans nothing */
#define CALIB_MAX_RATE    1e7  /* GB/s, GOP/s, GFLOP/s */
#define CALIB_MAX_DIM     (1u << 24)

static bool within(double v, double lo, double hi) {
    return isfinite(v) && v >= lo && v <= hi;
}

/* The machine, model and steal lines within bounds; 0 or TPS_ERANGE. */
static int plausible_setup(const step_calib *c, const char *name, tps_err *err) {
    const machine_limits *ml = &c->machine;
    const step_calib_model *m = &c->model;
    if (c->threads < 1 || c->threads > CALIB_MAX_THREADS)
        return tps_fail(err, TPS_ERANGE,
                        "calibration: %s: threads %d is not a thread count (1..%d)", name,
                        c->threads, CALIB_MAX_THREADS);
    if (c->has_steal && !within(c->steal, 0, CALIB_MAX_STEAL))
        return tps_fail(err, TPS_ERANGE,
                        "calibration: %s: steal %g: a machine losing that share of its time to "
                        "neighbours predicts nothing (0 <= steal <= %.2f)",
                        name, c->steal, CALIB_MAX_STEAL);
    if (ml->threads < 0 || ml->threads > CALIB_MAX_THREADS || ml->int8_bits < 0 ||
        ml->int8_bits > 4096 || !within(ml->read_gbs, 0, CALIB_MAX_RATE) ||
        !within(ml->int8_gops, 0, CALIB_MAX_RATE) || !within(ml->fp32_gflops, 0, CALIB_MAX_RATE))
        return tps_fail(err, TPS_ERANGE,
                        "calibration: %s: the machine's limits (threads %d, %g GB/s, %g int8 "
                        "GOP/s, %d bits, %g GFLOP/s) are not a machine's (each >= 0, rates <= %g)",
                        name, ml->threads, ml->read_gbs, ml->int8_gops, ml->int8_bits,
                        ml->fp32_gflops, CALIB_MAX_RATE);
    const uint32_t dims[] = {m->dim,      m->n_layers, m->n_heads, m->n_kv_heads,
                             m->head_dim, m->ffn_dim,  m->n_vocab};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i] > CALIB_MAX_DIM)
            return tps_fail(err, TPS_ERANGE,
                            "calibration: %s: the model line has %u, over %u: not a model's shape",
                            name, dims[i], CALIB_MAX_DIM);
    return 0;
}

/* Every fit's coefficients and figures finite and within bounds. */
static int plausible_fits(const step_calib *c, const char *name, tps_err *err) {
    static const char *const part[] = {"fwd", "post"};
    for (uint32_t i = 0; i < c->n_kv; i++) {
        const step_fit *f = &c->fit[i];
        if (!within(f->max_rows, 0, 1e9) || !within(f->err_p50, 0, 1e3))
            return tps_fail(err, TPS_ERANGE,
                            "calibration: %s: fit %u: max_rows %g or err_p50 %g out of range", name,
                            i + 1, f->max_rows, f->err_p50);
        for (int p = 0; p < 2; p++)
            for (int k = 0; k < STEP_FIT_NF; k++)
                if (!within(f->coef[p][k], -CALIB_MAX_COEF_NS, CALIB_MAX_COEF_NS))
                    return tps_fail(err, TPS_ERANGE,
                                    "calibration: %s: fit %u: %s coefficient %d is %g ns, not a "
                                    "cost a step could have (|c| <= %g ns)",
                                    name, i + 1, part[p], k, f->coef[p][k], CALIB_MAX_COEF_NS);
    }
    return 0;
}

int step_calib_parse(step_calib *c, const char *buf, size_t len, const char *name, tps_err *err) {
    memset(c, 0, sizeof *c);
    char line[512];
    int ver = 0, rc = 0, no = 1;
    char magic[32] = "";
    for (size_t at = 0; !rc && at < len; no++) {
        const char *nl = memchr(buf + at, '\n', len - at);
        size_t n = nl ? (size_t)(nl - (buf + at)) : len - at;
        if (n >= sizeof line || memchr(buf + at, 0, n)) {
            rc = tps_fail(err, TPS_EINVAL, "calibration: %s:%d is not a line of text", name, no);
            break;
        }
        memcpy(line, buf + at, n);
        line[n] = 0;
        at += n + (nl != NULL);
        if (no == 1) {
            if (sscanf(line, "%31s %d", magic, &ver) != 2 || strcmp(magic, STEP_CALIB_MAGIC))
                rc = tps_fail(err, TPS_EINVAL, "calibration: %s is not a tps calibration file",
                              name);
            else if (ver != STEP_CALIB_VERSION)
                rc = tps_fail(err, TPS_EINVAL,
                              "calibration: %s is version %d; this tps reads version %d "
                              "(calibrate again)",
                              name, ver, STEP_CALIB_VERSION);
        } else if (line[0] && read_line(c, line)) {
            rc = tps_fail(err, TPS_EINVAL, "calibration: %s:%d does not parse: '%.60s'", name, no,
                          line);
        }
    }
    if (!rc && no == 1) rc = tps_fail(err, TPS_EINVAL, "calibration: %s is empty", name);
    if (!rc && (!c->n_kv || !c->model.dim))
        rc = tps_fail(err, TPS_EINVAL, "calibration: %s holds no model or no fit", name);
    if (!rc) rc = plausible_setup(c, name, err);
    if (!rc) rc = plausible_fits(c, name, err);
    const step_shape one = {1, 1, 1, 1, 1};
    for (uint32_t i = 0; !rc && i < c->n_kv; i++)
        if (!(step_fit_fwd_ns(&c->fit[i], &one) > 0))
            rc = tps_fail(err, TPS_EINVAL, "calibration: %s: fit %u predicts no time for a step",
                          name, i + 1);
    return rc;
}

int step_calib_read(step_calib *c, const char *path, tps_err *err) {
    memset(c, 0, sizeof *c);
    FILE *f = fopen(path, "r");
    if (!f) return tps_fail(err, TPS_EIO, "calibration: cannot read %s: %s", path, strerror(errno));
    char *buf = malloc(1 << 16);
    size_t n = buf ? fread(buf, 1, 1 << 16, f) : 0;
    bool more = buf && n == (1 << 16) && fgetc(f) != EOF;
    fclose(f);
    int rc;
    if (!buf)
        rc = tps_fail(err, TPS_ENOMEM, "out of memory");
    else if (more)
        rc = tps_fail(err, TPS_EINVAL, "calibration: %s is over 64 KiB: not a calibration", path);
    else
        rc = step_calib_parse(c, buf, n, path, err);
    free(buf);
    return rc;
}
