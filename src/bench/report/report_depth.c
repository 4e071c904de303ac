/* The context-depth part of the factor report (report_depth.h): reading
 * tps.generate.depth documents, their cells, the reading made from those
 * cells, the text and HTML tables and the plot. A reading never holds a
 * number its table does not show: both go through cell(). */
#include "bench/report/report_depth.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/sbuf.h"

/* ---- reading the documents --------------------------------------------------------------- */

static double num(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

int depth_add_json(depth_set *d, const char *label, const char *text, const char *source,
                   tps_err *e) {
    if (d->n == DEPTH_MAX_SERIES)
        return tps_fail(e, TPS_EINVAL, "--factor depth: at most %d models", DEPTH_MAX_SERIES);
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    if (!j)
        return tps_fail(e, TPS_EINVAL, "%s: not JSON (line %d, column %d: %s)", source, je.line,
                        je.column, je.text);
    int rc = TPS_OK;
    const char *fmt = json_string_value(json_object_get(j, "format"));
    const json_t *pts = json_object_get(j, "points");
    if (!fmt || strcmp(fmt, "tps.generate.depth") || num(j, "version") != 1) {
        rc = tps_fail(e, TPS_EINVAL,
                      "%s: not a tps.generate.depth document of version 1 (tps generate --depth "
                      "D,D,... --json writes one)",
                      source);
        goto done;
    }
    size_t np = json_array_size(pts);
    if (np == 0 || np > DEPTH_MAX_POINTS) {
        rc = tps_fail(e, TPS_EINVAL, "%s: %zu depths; want 1 to %d", source, np, DEPTH_MAX_POINTS);
        goto done;
    }
    depth_series *s = &d->s[d->n];
    memset(s, 0, sizeof *s);
    const char *base = strrchr(source, '/');
    snprintf(s->source, sizeof s->source, "%s", source);
    snprintf(s->label, sizeof s->label, "%s", label && *label ? label : base ? base + 1 : source);
    const char *arch = json_string_value(json_object_get(j, "arch"));
    snprintf(s->arch, sizeof s->arch, "%s", arch ? arch : "?");
    const double layers = num(j, "layers"), rec = num(j, "recurrent_layers");
    const double threads = num(j, "threads");
    const double w = num(j, "weight_bytes_per_token"), st = num(j, "state_bytes_per_token");
    if (!(layers >= 1) || !(rec >= 0 && rec <= layers) || !(w > 0) || !(st >= 0)) {
        rc = tps_fail(e, TPS_EINVAL,
                      "%s: layers, recurrent_layers, weight_bytes_per_token and "
                      "state_bytes_per_token missing or out of range",
                      source);
        goto done;
    }
    s->layers = (unsigned)layers;
    s->recurrent = (unsigned)rec;
    s->threads = threads >= 1 ? (unsigned)threads : 0;
    for (size_t i = 0; i < np; i++) {
        const json_t *x = json_array_get(pts, i);
        depth_point *p = &s->p[i];
        p->depth = num(x, "depth");
        p->cached = num(x, "cached_tokens");
        p->prefill_s = num(x, "prefill_ms") / 1e3;
        p->decode_tps = num(x, "decode_tps");
        p->gbps = num(x, "decode_gbps");
        p->weight_mb = w / 1e6;
        p->state_mb = st / 1e6;
        p->kv_mb = num(x, "kv_bytes_per_token") / 1e6;
        p->mb = num(x, "bytes_per_token") / 1e6;
        if (!(p->depth >= 1) || (i && p->depth <= s->p[i - 1].depth) || !(p->decode_tps >= 0) ||
            !(p->kv_mb >= 0) || !(p->mb > 0)) {
            rc = tps_fail(e, TPS_EINVAL,
                          "%s: point %zu: depth (increasing), decode_tps, kv_bytes_per_token or "
                          "bytes_per_token missing or out of range",
                          source, i);
            goto done;
        }
    }
    s->n = np;
    d->n++;
done:
    json_decref(j);
    return rc;
}

int depth_add_file(depth_set *d, const char *label, const char *path, tps_err *e) {
    FILE *f = fopen(path, "rb");
    if (!f) return tps_fail(e, TPS_EIO, "cannot read '%s'", path);
    sbuf b;
    sbuf_init(&b);
    char buf[4096];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0)
        sbuf_add(&b, buf, k);
    bool bad = ferror(f) != 0;
    fclose(f);
    int rc;
    if (bad || sbuf_failed(&b) || !b.p)
        rc = tps_fail(e, TPS_EIO, "cannot read '%s'", path);
    else
        rc = depth_add_json(d, label, b.p, path, e);
    sbuf_free(&b);
    return rc;
}

/* ---- cells ------------------------------------------------------------------------------- */

typedef enum dcol { D_DEPTH, D_TPS, D_SHARE, D_W, D_KV, D_STATE, D_MB, D_GBS, D_PREFILL, D_N } dcol;

static const struct {
    const char *head, *term, *fmt;
} COLS[D_N] = {
    [D_DEPTH] = {"depth (tokens)", "depth", "%.0f"},
    [D_TPS] = {"decode tok/s", "dec t/s", "%.2f"},
    [D_SHARE] = {"of the first depth's speed", "share", "%.2fx"},
    [D_W] = {"weights MB / token", "wts MB", "%.1f"},
    [D_KV] = {"KV MB / token", "KV MB", "%.1f"},
    [D_STATE] = {"state MB / token", "state MB", "%.2f"},
    [D_MB] = {"MB read / token", "MB/tok", "%.1f"},
    [D_GBS] = {"GB/s read", "GB/s", "%.2f"},
    [D_PREFILL] = {"prefill s (from cache)", "prefill s", "%.1f"},
};

static double raw(const depth_series *s, size_t i, dcol c) {
    const depth_point *p = &s->p[i];
    switch (c) {
    case D_DEPTH:
        return p->depth;
    case D_TPS:
        return p->decode_tps > 0 ? p->decode_tps : NAN;
    case D_SHARE:
        return depth_share(s, i);
    case D_W:
        return p->weight_mb;
    case D_KV:
        return p->kv_mb;
    case D_STATE:
        return p->state_mb;
    case D_MB:
        return p->mb;
    case D_GBS:
        return p->gbps > 0 ? p->gbps : NAN;
    case D_PREFILL:
        return p->prefill_s;
    default:
        return NAN;
    }
}

/* The cell's text ("-" when unknown) and, in *shown, the number it shows. */
static const char *cell(char *buf, size_t cap, const depth_series *s, size_t i, dcol c,
                        double *shown) {
    return rset_cell(buf, cap, COLS[c].fmt, raw(s, i, c), shown);
}

static double shown(const depth_series *s, size_t i, dcol c) {
    char buf[32];
    double v;
    cell(buf, sizeof buf, s, i, c, &v);
    return v;
}

double depth_share(const depth_series *s, size_t i) {
    if (i >= s->n) return NAN;
    const double a = shown(s, 0, D_TPS), z = shown(s, i, D_TPS);
    return a > 0 && isfinite(z) ? z / a : NAN;
}

/* ---- the reading ------------------------------------------------------------------------- */

/* What the series is, in words: "full attention" or "hybrid: 18 of 24 layers linear". */
static void kind(sbuf *b, const depth_series *s) {
    if (s->recurrent)
        sbuf_printf(b, "the hybrid %s (%u of %u layers linear attention)", s->label, s->recurrent,
                    s->layers);
    else
        sbuf_printf(b, "the full-attention %s", s->label);
}

/* "kept 0.98x of its decode speed at 8192 and 0.93x at 32768 (A → B
 * tok/s) as the bytes a token reads went A → B MB (bytes alone would keep
 * A / B)" */
static void kept(sbuf *b, const depth_series *s) {
    char c0[32], cz[32], m0[32], mz[32];
    sbuf_adds(b, " kept");
    for (size_t i = 1; i < s->n; i++) {
        char sh[32], dp[32];
        sbuf_printf(b, "%s%s%s at %s",
                    i == 1          ? " "
                    : i + 1 == s->n ? " and "
                                    : ", ",
                    cell(sh, sizeof sh, s, i, D_SHARE, NULL), i == 1 ? " of its decode speed" : "",
                    cell(dp, sizeof dp, s, i, D_DEPTH, NULL));
    }
    const size_t z = s->n - 1;
    sbuf_printf(b,
                " (%s \xe2\x86\x92 %s tok/s) as the bytes a token reads went %s \xe2\x86\x92 %s MB",
                cell(c0, sizeof c0, s, 0, D_TPS, NULL), cell(cz, sizeof cz, s, z, D_TPS, NULL),
                cell(m0, sizeof m0, s, 0, D_MB, NULL), cell(mz, sizeof mz, s, z, D_MB, NULL));
    /* a bandwidth-bound decode's speed falls as its bytes grow */
    const double m0v = strtod(m0, NULL), mzv = strtod(mz, NULL);
    sbuf_adds(b, " (");
    if (m0v > 0 && mzv > 0) sbuf_printf(b, "bytes alone would keep %.2fx", m0v / mzv);
    if (s->recurrent) {
        char st[32];
        sbuf_printf(b, "%sa fixed %s MB state in its linear layers, K and V in its %u others",
                    m0v > 0 && mzv > 0 ? "; " : "", cell(st, sizeof st, s, 0, D_STATE, NULL),
                    s->layers - s->recurrent);
    }
    sbuf_adds(b, ")");
}

/* The index of depth v in s, or s->n. */
static size_t find_depth(const depth_series *s, double v) {
    for (size_t i = 0; i < s->n; i++)
        if (s->p[i].depth == v) return i;
    return s->n;
}

void depth_finish(depth_set *d) {
    d->reading[0] = 0;
    const depth_series *att = NULL, *hyb = NULL;
    for (size_t k = 0; k < d->n; k++) {
        if (!d->s[k].recurrent && !att) att = &d->s[k];
        if (d->s[k].recurrent && !hyb) hyb = &d->s[k];
    }
    sbuf b;
    sbuf_init(&b);
    bool any = false;
    for (size_t k = 0; k < d->n; k++) {
        const depth_series *s = &d->s[k];
        if (s->n < 2 || !isfinite(depth_share(s, s->n - 1))) continue;
        char a[32], z[32];
        if (!any)
            sbuf_printf(&b, "From depth %s to %s ", cell(a, sizeof a, s, 0, D_DEPTH, NULL),
                        cell(z, sizeof z, s, s->n - 1, D_DEPTH, NULL));
        else
            sbuf_adds(&b, "; ");
        kind(&b, s);
        kept(&b, s);
        any = true;
    }
    if (any) sbuf_adds(&b, ".");
    /* the deepest depth both the attention model and the hybrid reached,
     * each measured from the same first depth */
    size_t ia = 0, ih = 0;
    if (att && hyb && att->p[0].depth == hyb->p[0].depth)
        for (size_t i = att->n; i-- > 1;)
            if ((ih = find_depth(hyb, att->p[i].depth)) < hyb->n) {
                ia = i;
                break;
            }
    const double sa = ia ? depth_share(att, ia) : NAN, sh = ia ? depth_share(hyb, ih) : NAN;
    if (isfinite(sa) && isfinite(sh)) {
        /* losses in whole percent, as printed; their ratio from those */
        const double la = round(100 * (1 - sa)), lh = round(100 * (1 - sh));
        char dp[32], d0[32];
        sbuf_printf(&b,
                    " By depth %s the hybrid had lost %.0f%% of its depth-%s speed, the "
                    "attention model %.0f%%",
                    cell(dp, sizeof dp, att, ia, D_DEPTH, NULL), lh,
                    cell(d0, sizeof d0, att, 0, D_DEPTH, NULL), la);
        if (la > 0 && lh >= 0) sbuf_printf(&b, " (%.2fx its loss)", lh / la);
        char ta[32], th[32];
        const double va = shown(att, ia, D_TPS), vh = shown(hyb, ih, D_TPS);
        if (va > 0 && vh > 0)
            sbuf_printf(&b,
                        ", and decoded %sx as fast as the attention model there (%s against %s "
                        "tok/s)",
                        (snprintf(ta, sizeof ta, "%.2f", vh / va), ta),
                        cell(th, sizeof th, hyb, ih, D_TPS, NULL),
                        cell(dp, sizeof dp, att, ia, D_TPS, NULL));
        sbuf_printf(
            &b, ": %s.",
            la < 0 || lh < 0
                ? "a deeper context decoded faster here, so these steps are bound by overhead or "
                  "noise rather than by the bytes they read (a bigger shape shows the factor)"
            : la < 10
                ? "at these depths the K and V are small beside the weights, so neither model "
                  "loses much (deeper contexts show the difference)"
            : lh <= la / 2
                ? "a linear layer reads a state that does not grow with the context, so only the "
                  "hybrid's few attention layers slow it down"
            : lh < la ? "the hybrid kept more of its speed but lost more than half the attention "
                        "model's share: its attention layers still read and attend over a growing "
                        "context (and one decode window moves with the machine's load: compare "
                        "the bytes)"
                      : "the hybrid lost as much as the attention model or more: depth did not "
                        "set its speed in this run (the machine's load, or costs that are not "
                        "bytes)");
    }
    if (!sbuf_failed(&b) && b.p) snprintf(d->reading, sizeof d->reading, "%s", b.p);
    sbuf_free(&b);
}

/* ---- tables and the plot ----------------------------------------------------------------- */

void depth_print(FILE *out, const depth_set *d) {
    fprintf(out, "%-24s", "model");
    for (int c = 0; c < D_N; c++)
        fprintf(out, " %9s", COLS[c].term);
    fputc('\n', out);
    for (size_t k = 0; k < d->n; k++)
        for (size_t i = 0; i < d->s[k].n; i++) {
            fprintf(out, "%-24.24s", d->s[k].label);
            for (int c = 0; c < D_N; c++) {
                char buf[32];
                fprintf(out, " %9s", cell(buf, sizeof buf, &d->s[k], i, (dcol)c, NULL));
            }
            fputc('\n', out);
        }
}

void depth_html(FILE *h, const depth_set *d) {
    fputs("<table id=table-depth><thead><tr><th>model</th><th>layers: linear / all</th>", h);
    for (int c = 0; c < D_N; c++) {
        fputs("<th>", h);
        rhtml_esc(h, COLS[c].head);
        fputs("</th>", h);
    }
    fputs("</tr></thead><tbody>\n", h);
    for (size_t k = 0; k < d->n; k++)
        for (size_t i = 0; i < d->s[k].n; i++) {
            const depth_series *s = &d->s[k];
            fputs("<tr><td>", h);
            rhtml_esc(h, s->label);
            fprintf(h, "</td><td>%u / %u</td>", s->recurrent, s->layers);
            for (int c = 0; c < D_N; c++) {
                char buf[32];
                fprintf(h, "<td>%s", cell(buf, sizeof buf, s, i, (dcol)c, NULL));
                if (c == D_PREFILL && s->p[i].cached > 0) fprintf(h, " (%.0f)", s->p[i].cached);
                fputs("</td>", h);
            }
            fputs("</tr>\n", h);
        }
    fputs("</tbody></table>\n", h);
}

int depth_plot(const depth_set *d, const char *dir, rplot *out, tps_err *e) {
    static const char name[] = "factor_depth";
    FILE *g = rplot_script_open(dir, name, 1000, 420, e);
    if (!g) return TPS_EIO;
    for (size_t k = 0; k < d->n; k++) {
        fprintf(g, "$s%zu << EOD\n", k);
        for (size_t i = 0; i < d->s[k].n; i++) {
            char a[32], b[32], c[32];
            fprintf(g, "%s %s %s\n", cell(a, sizeof a, &d->s[k], i, D_DEPTH, NULL),
                    cell(b, sizeof b, &d->s[k], i, D_TPS, NULL),
                    cell(c, sizeof c, &d->s[k], i, D_MB, NULL));
        }
        fputs("EOD\n", g);
    }
    fputs("set datafile missing '-'\nset logscale x 2\nset xlabel 'context depth (tokens)'\n"
          "set ylabel 'decode tok/s'\nset y2label 'MB read / token'\nset yrange [0:*]\n"
          "set y2range [0:*]\nset ytics nomirror\nset y2tics\n"
          "set key outside bottom center horizontal\nplot ",
          g);
    static const char *const colours[DEPTH_MAX_SERIES] = {"#3b6fb6", "#c0392b", "#3a9a4a",
                                                          "#8e44ad"};
    for (size_t k = 0; k < d->n; k++) {
        char lab[300];
        rplot_gp_str(lab, sizeof lab, d->s[k].label);
        fprintf(g,
                "%s$s%zu using 1:2 with linespoints lw 2 pt 7 ps 1.2 lc rgb '%s' title \"%s "
                "decode tok/s\", $s%zu using 1:3 axes x1y2 with linespoints lw 1 dt 2 pt 6 lc "
                "rgb '%s' title \"%s MB / token (right)\"",
                k ? ", " : "", k, colours[k], lab, k, colours[k], lab);
    }
    fputc('\n', g);
    int rc = rplot_script_run(g, dir, name, e);
    if (rc) return rc;
    snprintf(out->file, sizeof out->file, "%s.svg", name);
    snprintf(out->title, sizeof out->title, "Decode against context depth");
    snprintf(out->caption, sizeof out->caption,
             "Solid: decode tok/s over each depth's decode window (tps generate --depth, one "
             "stream); dashed: the bytes a decoded token reads (weights, K and V of the attention "
             "layers, a linear layer's state), counted from the model's shape.");
    return TPS_OK;
}
