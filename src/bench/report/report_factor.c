/* The factor report (report_factor.h): parts of points, their cells, the
 * readings made from those cells, the terminal summary, the plots and the
 * page. A reading never holds a number its table does not show: both go
 * through cell(). Not here: reading result files (report_set.c). */
#include "bench/report/report_factor.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/sbuf.h"
#include "bench/result/verdict.h" /* VERDICT_MULTI_SHARE: when several tokens an event needs a word */

/* The context-depth section, after the sweep-based ones (report_depth.h). */
#define DEPTH_SECTION_TITLE "Context depth (full attention against a hybrid stack)"
#define DEPTH_PART_TITLE    "Decode tok/s and bytes read per token against the context's depth"
#define DEPTH_SECTION_WHY                                                                          \
    "Every decoded token of a full-attention model reads the keys and values of its whole "        \
    "context, so the bytes a token reads grow with the depth and decode slows. A hybrid stack "    \
    "(Qwen3.5: three of four layers gated DeltaNet linear attention) reads K and V only in its "   \
    "attention layers; each linear layer reads and overwrites a state of fixed size, whatever "    \
    "the depth."

/* Each part's name (--parts, the files it writes, the page's anchors) and title. */
static const struct {
    const char *name, *title;
} PARTS[FP_PARTS] = {
    [FP_BATCH] = {"batch", "Output tok/s, ITL and TTFT against concurrency"},
    [FP_MIX] = {"mix", "The same tokens per request, split between prompt and output"},
    [FP_ITL] = {"itl", "Streams' inter-token latency while long prompts arrive"},
    [FP_PREFIX] = {"prefix", "Prompts sharing a prefix: the prefix cache off and on"},
    [FP_KV_TYPE] = {"kv-type", "A long context: F16 against Q8_0 KV"},
    [FP_MODEL] = {"model", "Two model sizes on one workload"},
    [FP_ACTIVE] =
        {"active",
         "A dense model and a mixture of experts of about its active size, on one workload"},
    [FP_EXPERTS] = {"experts", "The mixture of experts against concurrency: experts a step runs"},
};

static const struct {
    const char *id, *title, *why;
    int parts[2]; /* -1: none */
} SECTIONS[FACTOR_SECTIONS] = {
    {"batch",
     "Batch size (concurrency)",
     "One engine step reads the weights once for every sequence in the batch, so more "
     "streams in flight finish more tokens per step; each step gets longer, and a new request "
     "may wait for a slot.",
     {FP_BATCH, -1}},
    {"mix",
     "The prefill/decode mix",
     "Prompt tokens are computed many per step (compute-bound); output tokens one per stream "
     "per step (bandwidth-bound). The window's mix decides which rate it shows; chunked prefill "
     "and the ITL target keep long prompts from stalling the streams.",
     {FP_MIX, FP_ITL}},
    {"kv",
     "The KV cache",
     "Every output token reads the cached keys and values of its whole context; a prompt "
     "prefix already cached is not computed again, and a smaller KV type reads fewer bytes.",
     {FP_PREFIX, FP_KV_TYPE}},
    {"bandwidth",
     "Memory bandwidth and model size",
     "A decode step reads every weight once: bytes per output token over the machine's read "
     "bandwidth bounds the step rate, so a bigger model is slower in proportion to its bytes.",
     {FP_MODEL, -1}},
    {"active",
     "Active model size (mixture of experts)",
     "A mixture of experts reads, per token, only the experts its router picks: decode speed "
     "follows the active bytes, not the model's size. A step runs each expert its rows chose "
     "once, so more streams touch more distinct experts and the step reads more, up to all of "
     "them.",
     {FP_ACTIVE, FP_EXPERTS}},
};

void factor_init(factor_report *f) {
    memset(f, 0, sizeof *f);
    for (int i = 0; i < FP_PARTS; i++)
        rset_init(&f->part[i]);
}

void factor_free(factor_report *f) {
    for (int i = 0; i < FP_PARTS; i++)
        rset_free(&f->part[i]);
}

int factor_add(factor_report *f, const char *spec, tps_err *e) {
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec || !eq[1])
        return tps_fail(e, TPS_EINVAL, "--factor '%s': want PART=FILE or PART:LABEL=FILE", spec);
    const char *colon = memchr(spec, ':', (size_t)(eq - spec));
    size_t nlen = (size_t)((colon ? colon : eq) - spec);
    if (nlen == 5 && !strncmp(spec, "depth", 5)) {
        char label[128] = "";
        if (colon) snprintf(label, sizeof label, "%.*s", (int)(eq - colon - 1), colon + 1);
        return depth_add_file(&f->depth, label, eq + 1, e);
    }
    int part = -1;
    for (int i = 0; i < FP_PARTS; i++)
        if (strlen(PARTS[i].name) == nlen && !strncmp(spec, PARTS[i].name, nlen)) part = i;
    if (part < 0)
        return tps_fail(e, TPS_EINVAL,
                        "--factor '%s': unknown part (batch, mix, itl, prefix, kv-type, model, "
                        "active, experts, depth)",
                        spec);
    rset *s = &f->part[part];
    size_t n0 = s->n;
    int rc = rset_add_file(s, eq + 1, e);
    if (rc) return rc;
    if (colon && colon + 1 < eq) {
        if (f->nlabels == FACTOR_MAX_LABELS)
            return tps_fail(e, TPS_EINVAL, "--factor: at most %d labels", FACTOR_MAX_LABELS);
        factor_label *l = &f->labels[f->nlabels++];
        l->part = part;
        l->first = n0;
        l->n = s->n - n0;
        snprintf(l->label, sizeof l->label, "%.*s", (int)(eq - colon - 1), colon + 1);
    }
    return TPS_OK;
}

/* ---- cells ---------------------------------------------------------------------------------- */

typedef enum metric {
    M_OUT_TPS,
    M_IN_TPS,
    M_TTFT50,
    M_TTFT99,
    M_ITL50,
    M_ITL99,
    M_EGAP50,
    M_MULTI,
    M_CACHED,
    M_GBS,
    M_BW,
    M_MB_TOK,
    M_EXPERTS,
    M_COUNT
} metric;

/* Each metric's column head in the HTML and CSV, its short head in the
 * terminal's 8-character columns, and its number format. */
static const struct {
    const char *head, *term, *fmt;
} METRICS[M_COUNT] = {
    [M_OUT_TPS] = {"output tok/s [run]", "out t/s", "%.1f"},
    [M_IN_TPS] = {"input tok/s [run]", "in t/s", "%.1f"},
    [M_TTFT50] = {"TTFT p50 ms", "TTFT p50", "%.1f"},
    [M_TTFT99] = {"TTFT p99 ms", "TTFT p99", "%.1f"},
    [M_ITL50] = {"ITL p50 ms", "ITL p50", "%.2f"},
    [M_ITL99] = {"ITL p99 ms", "ITL p99", "%.2f"},
    [M_EGAP50] = {"gap per arrival p50 ms", "gap/arr", "%.2f"},
    [M_MULTI] = {"multi-token arrivals %", "multi%", "%.1f"},
    [M_CACHED] = {"input from cache %", "cached%", "%.1f"},
    [M_GBS] = {"GB/s read", "GB/s", "%.2f"},
    [M_BW] = {"% of bandwidth", "% bw", "%.1f"},
    [M_MB_TOK] = {"MB read / output token", "MB/tok", "%.2f"},
    [M_EXPERTS] = {"experts a step runs / layer", "exp/lyr", "%.1f"},
};

static double pct_ms(const hist *h, double p) {
    return hist_count(h) ? hist_percentile(h, p) / 1e6 : NAN;
}

static double value(const rset_point *p, metric m) {
    if (!p->has_result) return NAN;
    const bench_result *r = &p->r;
    double v;
    switch (m) {
    case M_OUT_TPS:
        return r->run.tps.output_tps;
    case M_IN_TPS:
        return r->run.tps.input_tps;
    case M_TTFT50:
        return pct_ms(r->h[RH_TTFT], 50);
    case M_TTFT99:
        return pct_ms(r->h[RH_TTFT], 99);
    case M_ITL50:
        return pct_ms(r->h[RH_ITL], 50);
    case M_ITL99:
        return pct_ms(r->h[RH_ITL], 99);
    case M_EGAP50:
        return pct_ms(r->h[RH_ARRIVAL_GAP], 50);
    case M_MULTI:
        return r->token_arrivals ? 100 * result_multi_arrival_share(r) : NAN;
    case M_CACHED:
        v = rset_point_cached_pct(p);
        return v < 0 ? NAN : v;
    case M_GBS:
        v = rset_point_gbs(p);
        return v < 0 ? NAN : v;
    case M_BW:
        v = rset_point_bw_fraction(p);
        return v < 0 ? NAN : 100 * v;
    case M_MB_TOK:
        v = rset_point_mb_per_token(p);
        return v < 0 ? NAN : v;
    case M_EXPERTS: /* distinct experts a step ran, a layer: 0..model_experts */
        return p->has_server && p->srv.model_experts > 0 && p->srv.steps > 0
                   ? p->srv.experts / p->srv.steps / p->srv.model_layers
                   : NAN;
    default:
        return NAN;
    }
}

/* The cell's text ("-" when unknown) and, in *shown, the number it shows. */
static const char *cell(char *buf, size_t cap, const rset_point *p, metric m, double *shown) {
    const double v = value(p, m);
    rset_cell(buf, cap, METRICS[m].fmt, v, shown);
    /* a share of the bandwidth that is not the machine's own is marked;
     * the note under the table says why (rset_bw_notes) */
    size_t n = strlen(buf);
    if (m == M_BW && isfinite(v) && rset_point_bw_flag(p) && n + 1 < cap)
        buf[n] = '!', buf[n + 1] = 0;
    return buf;
}

/* ---- readings -------------------------------------------------------------------------------- */

/* "2.31x the WHAT (A → B UNIT)" from the two cells; "the WHAT went A → B"
 * when the ratio is undefined. False when either cell is unknown. */
static bool ratio(sbuf *b, const char *what, const rset_point *a, const rset_point *z, metric m,
                  const char *unit) {
    char ca[32], cz[32];
    double va, vz;
    cell(ca, sizeof ca, a, m, &va);
    cell(cz, sizeof cz, z, m, &vz);
    if (!isfinite(va) || !isfinite(vz)) {
        sbuf_printf(b, "the %s (not measured)", what);
        return false;
    }
    if (va > 0)
        sbuf_printf(b, "%.2fx the %s (%s \xe2\x86\x92 %s%s)", vz / va, what, ca, cz, unit);
    else
        sbuf_printf(b, "the %s went %s \xe2\x86\x92 %s%s", what, ca, cz, unit);
    return true;
}

/* "A → B UNIT" from the two cells. */
static void span(sbuf *b, const rset_point *a, const rset_point *z, metric m, const char *unit) {
    char ca[32], cz[32];
    sbuf_printf(b, "%s \xe2\x86\x92 %s%s", cell(ca, sizeof ca, a, m, NULL),
                cell(cz, sizeof cz, z, m, NULL), unit);
}

static double shown(const rset_point *p, metric m) {
    char buf[32];
    double v;
    cell(buf, sizeof buf, p, m, &v);
    return v;
}

/* When many arrivals in a or z brought several tokens (the verdict's share
 * of events), the per-token ITL p50 counts zero gaps nobody waited: a
 * sentence naming the gap per arrival. */
static void read_multi(sbuf *b, const rset_point *a, const rset_point *z) {
    const rset_point *p = shown(z, M_MULTI) >= shown(a, M_MULTI) ? z : a;
    const double share = shown(p, M_MULTI);
    if (!(share >= 100 * VERDICT_MULTI_SHARE)) return;
    char gap[32], itl[32];
    sbuf_printf(
        b,
        " At %s %.1f%% of token arrivals brought several tokens (SSE events read together, or "
        "tokens held until they make whole UTF-8 characters, as a random-weight model's often "
        "do not), so its ITL p50 of %s ms counts zero gaps; the gap per arrival, what a reader "
        "waits between updates, was %s ms at p50.",
        p->label, share, cell(itl, sizeof itl, p, M_ITL50, NULL),
        cell(gap, sizeof gap, p, M_EGAP50, NULL));
}

/* A comparison in a reading: lead, then the ratio of metric m between the
 * two points (what: how the figure is called) or, what NULL, its span. */
typedef struct clause {
    const char *lead, *what;
    metric m;
    const char *unit;
} clause;

/* The clauses in order; whether every ratio among them was measured. */
static bool compare(sbuf *b, const rset_point *a, const rset_point *z, const clause *c, size_t n) {
    bool measured = true;
    for (size_t i = 0; i < n; i++) {
        sbuf_adds(b, c[i].lead);
        if (c[i].what)
            measured = ratio(b, c[i].what, a, z, c[i].m, c[i].unit) && measured;
        else
            span(b, a, z, c[i].m, c[i].unit);
    }
    return measured;
}
#define COMPARE(b, a, z, ...)                                                                      \
    compare((b), (a), (z), (const clause[]){__VA_ARGS__},                                          \
            sizeof((const clause[]){__VA_ARGS__}) / sizeof(clause))

/* A reading's end: ": WHY." when the figures allow a verdict (ok), else ".". */
static void conclude(sbuf *b, bool ok, const char *why) {
    if (ok)
        sbuf_printf(b, ": %s.", why);
    else
        sbuf_adds(b, ".");
}

static void read_batch(sbuf *b, const rset_point *a, const rset_point *z) {
    double ca = atof(a->axis[SWEEP_CONCURRENCY]), cz = atof(z->axis[SWEEP_CONCURRENCY]);
    if (ca > 0 && cz > 0)
        sbuf_printf(b, "%.0fx the concurrency (%s \xe2\x86\x92 %s) gave ", cz / ca,
                    a->axis[SWEEP_CONCURRENCY], z->axis[SWEEP_CONCURRENCY]);
    else
        sbuf_printf(b, "From %s to %s gave ", a->label, z->label);
    COMPARE(b, a, z, {"", "output tok/s", M_OUT_TPS, ""}, {" and ", "ITL p50", M_ITL50, " ms"},
            {"; TTFT p50 went ", NULL, M_TTFT50, " ms"});
    double t = shown(z, M_OUT_TPS) / shown(a, M_OUT_TPS);
    conclude(b, isfinite(t) && ca > 0 && cz > ca,
             t >= 0.9 * cz / ca
                 ? "batching scaled the rate with the streams (the steps are not yet full)"
             : t > 1.1 ? "batching raised the rate, by less than the streams it added"
                       : "batching did not raise the rate: the steps were already saturated");
}

static void read_mix(sbuf *b, const rset_point *a, const rset_point *z) {
    sbuf_printf(b, "From %s to %s (prompt/output tokens), ", a->label, z->label);
    COMPARE(b, a, z, {"", "input tok/s", M_IN_TPS, ""}, {" and ", "output tok/s", M_OUT_TPS, ""},
            {"; TTFT p50 went ", NULL, M_TTFT50, " ms"}, {" and ITL p50 ", NULL, M_ITL50, " ms"});
    double o = shown(z, M_OUT_TPS) / shown(a, M_OUT_TPS);
    double i = shown(z, M_ITL50) - shown(a, M_ITL50);
    conclude(b, isfinite(o) && isfinite(i),
             o >= 1     ? "the output rate did not fall with the prompt share here"
             : i <= 0.5 ? "the prompt-heavy window shows less generation throughput while each "
                          "stream decodes no slower"
                        : "the prompt-heavy window shows less generation throughput, and its "
                          "prompts also slow the streams' decoding");
}

static void read_itl(sbuf *b, const rset_point *a, const rset_point *z) {
    sbuf_printf(b, "With long prompts arriving among the streams, %s against %s gave ", z->label,
                a->label);
    COMPARE(b, a, z, {"", "ITL p99", M_ITL99, " ms"}, {" and ", "output tok/s", M_OUT_TPS, ""});
    double r = shown(z, M_ITL99) / shown(a, M_ITL99);
    conclude(b, isfinite(r),
             r < 0.9   ? "the streams' worst gaps shrank"
             : r > 1.1 ? "the streams' worst gaps grew"
                       : "the streams' worst gaps barely changed");
}

static void read_prefix(sbuf *b, const rset_point *a, const rset_point *z) {
    sbuf_printf(
        b,
        "On prompts sharing a prefix, %s against %s took the share of input served from the "
        "cache ",
        z->label, a->label);
    COMPARE(b, a, z, {"", NULL, M_CACHED, " %"}, {" and gave ", "TTFT p50", M_TTFT50, " ms"},
            {" and ", "output tok/s", M_OUT_TPS, ""});
    sbuf_adds(b, ".");
}

static void read_kv_type(sbuf *b, const rset_point *a, const rset_point *z) {
    sbuf_printf(b, "%s against %s gave ", z->label, a->label);
    COMPARE(b, a, z, {"", "MB read per output token", M_MB_TOK, ""},
            {", ", "ITL p50", M_ITL50, " ms"}, {" and ", "output tok/s", M_OUT_TPS, ""});
    sbuf_adds(b, ".");
}

/* "On the same workload Z against A read <MB per token> and gave <tok/s>":
 * whether both were measured. */
static bool same_workload(sbuf *b, const rset_point *a, const rset_point *z) {
    sbuf_printf(b, "On the same workload %s against %s read ", z->label, a->label);
    return COMPARE(b, a, z, {"", "MB per output token", M_MB_TOK, ""},
                   {" and gave ", "output tok/s", M_OUT_TPS, ""});
}

static void read_model(sbuf *b, const rset_point *a, const rset_point *z) {
    bool measured = same_workload(b, a, z);
    COMPARE(b, a, z, {"; the steps read ", NULL, M_GBS, " GB/s"}, {", ", NULL, M_BW, " %"});
    sbuf_adds(b, " of the machine's read bandwidth");
    const char *flag = rset_point_bw_flag(z) ? rset_point_bw_flag(z) : rset_point_bw_flag(a);
    if (flag) sbuf_printf(b, " (! %s)", flag);
    double k = shown(z, M_OUT_TPS) / shown(a, M_OUT_TPS) * shown(z, M_MB_TOK) / shown(a, M_MB_TOK);
    /* k: the bigger model's bytes per second over the smaller's; 1 when
     * both steps stream weights at the same rate (bandwidth-bound) */
    conclude(b, measured && isfinite(k),
             k >= 0.75 && k <= 1.33 ? "decode speed follows bytes per token (both read at about "
                                      "the same GB/s)"
             : k < 0.75 ? "the bigger model lost more speed than its bytes explain: its steps "
                          "read fewer GB/s (bound by compute or overhead here)"
                        : "the bigger model lost less speed than its bytes: the smaller one's "
                          "steps do not reach the bandwidth (overhead-bound)");
}

static void read_active(sbuf *b, const rset_point *a, const rset_point *z) {
    bool measured = same_workload(b, a, z);
    char ce[32];
    sbuf_printf(b, "; its steps ran %s experts a layer (of %.0f)",
                cell(ce, sizeof ce, z, M_EXPERTS, NULL), z->srv.model_experts);
    double t = shown(z, M_OUT_TPS) / shown(a, M_OUT_TPS);
    conclude(b, measured && isfinite(t),
             t >= 0.75 ? "at about the same active size the mixture of experts decodes at about "
                         "the dense model's speed, whatever its total size"
                       : "the mixture of experts is slower than its active size alone explains: "
                         "its steps run more experts than one token's, or routing costs show");
}

static void read_experts(sbuf *b, const rset_point *a, const rset_point *z) {
    double ca = atof(a->axis[SWEEP_CONCURRENCY]), cz = atof(z->axis[SWEEP_CONCURRENCY]);
    if (ca > 0 && cz > 0)
        sbuf_printf(b,
                    "%.0fx the concurrency (%s \xe2\x86\x92 %s) took the experts a step runs from ",
                    cz / ca, a->axis[SWEEP_CONCURRENCY], z->axis[SWEEP_CONCURRENCY]);
    else
        sbuf_printf(b, "From %s to %s took the experts a step runs from ", a->label, z->label);
    span(b, a, z, M_EXPERTS, "");
    sbuf_printf(b, " a layer (of %.0f) and gave ", z->srv.model_experts);
    COMPARE(b, a, z, {"", "MB read per output token", M_MB_TOK, ""},
            {" and ", "output tok/s", M_OUT_TPS, ""});
    double e = shown(z, M_EXPERTS) / shown(a, M_EXPERTS);
    conclude(b, isfinite(e) && ca > 0 && cz > ca,
             e >= 0.9 * cz / ca ? "the streams chose different experts, so each step read about "
                                  "as many more weights as it carried streams"
                                : "streams shared experts, so a step read fewer weights than its "
                                  "streams times one token's: batching still pays, less than for "
                                  "a dense model");
}

static void (*const READERS[FP_PARTS])(sbuf *, const rset_point *, const rset_point *) = {
    read_batch,   read_mix,   read_itl,    read_prefix,
    read_kv_type, read_model, read_active, read_experts};

void factor_finish(factor_report *f) {
    for (int i = 0; i < FP_PARTS; i++)
        rset_finish(&f->part[i]);
    for (size_t k = 0; k < f->nlabels; k++) {
        const factor_label *l = &f->labels[k];
        rset *s = &f->part[l->part];
        for (size_t j = l->first; j < l->first + l->n && j < s->n; j++)
            snprintf(s->p[j].label, sizeof s->p[j].label, "%s", l->label);
    }
    rset_limit_apply(f->part, FP_PARTS, &f->limit);
    for (int i = 0; i < FP_PARTS; i++) {
        const rset *s = &f->part[i];
        f->reading[i][0] = 0;
        if (s->n < 2 || !s->p[0].has_result || !s->p[s->n - 1].has_result) continue;
        sbuf b;
        sbuf_init(&b);
        READERS[i](&b, &s->p[0], &s->p[s->n - 1]);
        if (i != FP_PREFIX && i != FP_MODEL) read_multi(&b, &s->p[0], &s->p[s->n - 1]);
        snprintf(f->reading[i], sizeof f->reading[i], "%s", b.p ? b.p : "");
        sbuf_free(&b);
    }
    depth_finish(&f->depth);
}

/* ---- terminal -------------------------------------------------------------------------------- */

#define TERM_N 10
static const metric TERM_COLS[TERM_N] = {M_OUT_TPS, M_IN_TPS, M_TTFT50, M_ITL50, M_ITL99,
                                         M_EGAP50,  M_MULTI,  M_CACHED, M_GBS,   M_BW};
/* the mixture-of-experts parts: bytes per token and experts a step, not the cache */
static const metric TERM_COLS_MOE[TERM_N] = {M_OUT_TPS, M_IN_TPS, M_TTFT50, M_ITL50, M_ITL99,
                                             M_EGAP50,  M_MULTI,  M_MB_TOK, M_GBS,   M_EXPERTS};

static void print_part(FILE *out, const rset *s, int sec, int pi) {
    const int moe = pi == FP_ACTIVE || pi == FP_EXPERTS;
    const metric *cols = moe ? TERM_COLS_MOE : TERM_COLS;
    fprintf(out, "\n== %s: %s\n%-24s", SECTIONS[sec].title, PARTS[pi].title, "point");
    for (int c = 0; c < TERM_N; c++)
        fprintf(out, " %8s", METRICS[cols[c]].term);
    fputc('\n', out);
    for (size_t j = 0; j < s->n; j++) {
        fprintf(out, "%-24.24s", s->p[j].label);
        for (int c = 0; c < TERM_N; c++) {
            char buf[32];
            fprintf(out, " %8s", cell(buf, sizeof buf, &s->p[j], cols[c], NULL));
        }
        fputc('\n', out);
    }
}

void factor_print(FILE *out, const factor_report *f) {
    for (int sec = 0; sec < FACTOR_SECTIONS; sec++)
        for (int k = 0; k < 2; k++) {
            int pi = SECTIONS[sec].parts[k];
            if (pi < 0 || f->part[pi].n == 0) continue;
            print_part(out, &f->part[pi], sec, pi);
            rset_bw_notes(out, &f->part[pi], false);
        }
    if (f->depth.n) {
        fprintf(out, "\n== %s: %s\n", DEPTH_SECTION_TITLE, DEPTH_PART_TITLE);
        depth_print(out, &f->depth);
    }
    char limit[640];
    rset_limit_describe(limit, sizeof limit, f->part, FP_PARTS, &f->limit);
    if (limit[0]) fprintf(out, "\n%s.\n", limit);
    fputs("\nWhat moves tokens per second, in this run's numbers (docs/metrics.md):\n", out);
    for (int sec = 0; sec < FACTOR_SECTIONS; sec++) {
        fprintf(out, "  %s:", SECTIONS[sec].title);
        bool any = false;
        for (int k = 0; k < 2; k++) {
            int pi = SECTIONS[sec].parts[k];
            if (pi < 0 || !f->reading[pi][0]) continue;
            fprintf(out, " %s", f->reading[pi]);
            any = true;
        }
        fputs(any ? "\n" : " not measured (fewer than two points with results)\n", out);
    }
    if (f->depth.n)
        fprintf(out, "  %s: %s\n", DEPTH_SECTION_TITLE,
                f->depth.reading[0] ? f->depth.reading : "not measured (fewer than two depths)");
}

/* ---- plots ----------------------------------------------------------------------------------- */

/* What each part's plot shows: bars on the left axis, lines on the right. */
static const struct {
    metric bars[2], lines[2]; /* M_COUNT: none */
    const char *y1, *y2;
} PLOTS[FP_PARTS] = {
    [FP_BATCH] = {{M_OUT_TPS, M_COUNT}, {M_TTFT50, M_ITL50}, "output tok/s [run]", "ms"},
    [FP_MIX] = {{M_IN_TPS, M_OUT_TPS}, {M_TTFT50, M_COUNT}, "tok/s [run]", "ms"},
    [FP_ITL] = {{M_ITL50, M_ITL99}, {M_OUT_TPS, M_COUNT}, "ms", "output tok/s [run]"},
    [FP_PREFIX] = {{M_TTFT50, M_TTFT99}, {M_CACHED, M_COUNT}, "ms", "% of input from cache"},
    [FP_KV_TYPE] = {{M_OUT_TPS, M_COUNT},
                    {M_ITL50, M_MB_TOK},
                    "output tok/s [run]",
                    "ms; MB / token"},
    [FP_MODEL] = {{M_OUT_TPS, M_COUNT}, {M_GBS, M_BW}, "output tok/s [run]", "GB/s; % of bw"},
    [FP_ACTIVE] = {{M_OUT_TPS, M_COUNT},
                   {M_MB_TOK, M_EXPERTS},
                   "output tok/s [run]",
                   "MB / token; experts / layer"},
    [FP_EXPERTS] = {{M_OUT_TPS, M_COUNT},
                    {M_EXPERTS, M_MB_TOK},
                    "output tok/s [run]",
                    "experts / layer; MB / token"},
};

static int plot_part(const factor_report *f, int pi, const char *dir, rplot *out, tps_err *e) {
    const rset *s = &f->part[pi];
    char name[32];
    snprintf(name, sizeof name, "factor_%s", PARTS[pi].name);
    FILE *g = rplot_script_open(dir, name, 1000, 400, e);
    if (!g) return TPS_EIO;
    fputs("$d << EOD\n", g);
    for (size_t j = 0; j < s->n; j++) {
        char lab[300];
        rplot_gp_str(lab, sizeof lab, s->p[j].label);
        fprintf(g, "\"%s\"", lab);
        for (int c = 0; c < 2; c++)
            for (int k = 0; k < 2; k++) {
                metric m = c ? PLOTS[pi].lines[k] : PLOTS[pi].bars[k];
                char buf[32];
                double v = NAN;
                if (m != M_COUNT) cell(buf, sizeof buf, &s->p[j], m, &v);
                if (isfinite(v))
                    fprintf(g, " %s", buf);
                else
                    fputs(" ?", g);
            }
        fputc('\n', g);
    }
    fprintf(g,
            "EOD\nset style data histograms\nset style histogram clustered gap 1\n"
            "set style fill solid 0.75 border -1\nset boxwidth 0.9\nset yrange [0:*]\n"
            "set ylabel \"%s\"\nset y2label \"%s\"\nset y2range [0:*]\nset ytics nomirror\n"
            "set y2tics\nset key outside bottom center horizontal\nset xtics noenhanced\n"
            "set offsets 0.5, 0.5, 0, 0\n",
            PLOTS[pi].y1, PLOTS[pi].y2);
    fprintf(g, "plot ");
    static const char *const colours[2][2] = {{"#3b6fb6", "#8fb3e6"}, {"#c0392b", "#e67e22"}};
    bool first = true;
    for (int k = 0; k < 2; k++) {
        metric m = PLOTS[pi].bars[k];
        if (m == M_COUNT) continue;
        fprintf(g, "%s$d using %d:xtic(1) title \"%s\" lc rgb '%s'", first ? "" : ", ", 2 + k,
                METRICS[m].head, colours[0][k]);
        first = false;
    }
    for (int k = 0; k < 2; k++) {
        metric m = PLOTS[pi].lines[k];
        if (m == M_COUNT) continue;
        /* clustered histograms centre cluster j at x = j: the lines run through the clusters */
        fprintf(g,
                ", $d using 0:%d axes x1y2 with linespoints lw 2 pt 7 ps 1.2 lc rgb '%s' "
                "title \"%s (right)\"",
                4 + k, colours[1][k], METRICS[m].head);
    }
    fputc('\n', g);
    int rc = rplot_script_run(g, dir, name, e);
    if (rc) return rc;
    snprintf(out->file, sizeof out->file, "%s.svg", name);
    snprintf(out->title, sizeof out->title, "%s", PARTS[pi].title);
    snprintf(out->caption, sizeof out->caption,
             "Bars (left axis) and lines (right axis) are the table's cells; rates over each "
             "point's run window (first send to last byte).");
    return TPS_OK;
}

/* ---- page ------------------------------------------------------------------------------------ */

static void part_table(FILE *h, const rset *s, int pi) {
    fprintf(h, "<table id=table-%s><thead><tr><th>point</th><th>requests<br>ok / failed</th>",
            PARTS[pi].name);
    for (int m = 0; m < M_COUNT; m++) {
        fputs("<th>", h);
        rhtml_esc(h, METRICS[m].head);
        fputs("</th>", h);
    }
    fputs("</tr></thead><tbody>\n", h);
    for (size_t j = 0; j < s->n; j++) {
        const rset_point *p = &s->p[j];
        if (!rhtml_row_head(h, p, M_COUNT + 1)) continue;
        for (int m = 0; m < M_COUNT; m++) {
            char buf[32];
            fprintf(h, "<td>%s</td>", cell(buf, sizeof buf, p, (metric)m, NULL));
        }
        fputs("</tr>\n", h);
    }
    fputs("</tbody></table>\n", h);
    rset_bw_notes(h, s, true);
}

static void page_head(FILE *h, const factor_report *f, const char *plot_note) {
    char when[64];
    rhtml_when(when, sizeof when);
    fprintf(h,
            "<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
            "<meta name=viewport content=\"width=device-width,initial-scale=1\">"
            "<title>tps report: what moves tokens per second</title><style>%s"
            "p.reading{background:#eef6ee;border-left:4px solid #3a9a4a;padding:6px 10px}"
            "h3{font-size:16px;margin:18px 0 6px}</style></head><body>\n"
            "<h1>tps report: what moves tokens per second</h1>\n<p class=meta>",
            rhtml_css);
    for (size_t j = 0; j < f->part[FP_BATCH].n && j < 1; j++)
        if (f->part[FP_BATCH].p[j].has_result) {
            const char *url =
                json_string_value(json_object_get(f->part[FP_BATCH].p[j].r.config, "url"));
            if (url) {
                fputs("endpoint ", h);
                rhtml_esc(h, url);
                fputs("; ", h);
            }
        }
    char limit[640];
    rset_limit_describe(limit, sizeof limit, f->part, FP_PARTS, &f->limit);
    if (limit[0]) {
        rhtml_esc(h, limit);
        fputs("; ", h);
    }
    fprintf(h,
            "rendered %s. Each factor the seed names has a section: its points, a plot, and "
            "a reading made from the table's numbers.</p>\n",
            when);
    fputs("<nav><ul>", h);
    for (int sec = 0; sec < FACTOR_SECTIONS; sec++) {
        fprintf(h, "<li><a href=\"#factor-%s\">", SECTIONS[sec].id);
        rhtml_esc(h, SECTIONS[sec].title);
        fputs("</a></li>", h);
    }
    if (f->depth.n) fputs("<li><a href=\"#factor-depth\">" DEPTH_SECTION_TITLE "</a></li>", h);
    fputs("</ul></nav>\n", h);
    if (plot_note) {
        fputs("<p class=note>No plots: ", h);
        rhtml_esc(h, plot_note);
        fputs("</p>\n", h);
    }
}

/* Returns false when a drawn plot's SVG could not be read back into the page. */
static bool page_section(FILE *h, const factor_report *f, int sec, const rplot *plots,
                         const bool *drawn, const char *svg_dir) {
    bool ok = true;
    fprintf(h, "<section id=\"factor-%s\"><h2>", SECTIONS[sec].id);
    rhtml_esc(h, SECTIONS[sec].title);
    fputs("</h2>\n<p class=meta>", h);
    rhtml_esc(h, SECTIONS[sec].why);
    fputs("</p>\n", h);
    for (int k = 0; k < 2; k++) {
        int pi = SECTIONS[sec].parts[k];
        if (pi < 0) continue;
        fputs("<h3>", h);
        rhtml_esc(h, PARTS[pi].title);
        fputs("</h3>\n", h);
        if (f->part[pi].n == 0) {
            fputs("<p class=note>Not measured in this run.</p>\n", h);
            continue;
        }
        fprintf(h, "<p class=reading id=reading-%s>", PARTS[pi].name);
        rhtml_esc(h, f->reading[pi][0] ? f->reading[pi]
                                       : "No reading: fewer than two points have results.");
        fputs("</p>\n", h);
        part_table(h, &f->part[pi], pi);
        if (drawn[pi]) ok &= rhtml_figure(h, &plots[pi], svg_dir, "wide");
    }
    fputs("</section>\n", h);
    return ok;
}

/* The context-depth section (drawn: its plot is in svg_dir); false when a
 * drawn plot's SVG could not be read back into the page. */
static bool page_depth(FILE *h, const depth_set *d, const rplot *plot, bool drawn,
                       const char *svg_dir) {
    fputs("<section id=\"factor-depth\"><h2>" DEPTH_SECTION_TITLE "</h2>\n<p class=meta>", h);
    rhtml_esc(h, DEPTH_SECTION_WHY);
    fputs("</p>\n<h3>" DEPTH_PART_TITLE "</h3>\n<p class=reading id=reading-depth>", h);
    rhtml_esc(h, d->reading[0] ? d->reading : "No reading: fewer than two depths.");
    fputs("</p>\n", h);
    depth_html(h, d);
    fputs("<p class=meta>One stream, offline (tps generate --depth): each depth's prompt extends "
          "the one before, so its prefill starts from the prefix cache (the tokens in "
          "brackets); decode tok/s over the depth's decode window. Bytes a token reads, counted "
          "from the model's shape: every weight, the K and V of its context in the attention "
          "layers, and each linear layer's state (read, then written back: counted once).</p>\n",
          h);
    bool ok = !drawn || rhtml_figure(h, plot, svg_dir, "wide");
    fputs("</section>\n", h);
    return ok;
}

static int write_page(const factor_report *f, const rplot *plots, const bool *drawn,
                      const char *svg_dir, const char *plot_note, const char *path, tps_err *e) {
    file_out out;
    int rc = file_out_open(&out, path, e);
    if (rc) return rc;
    FILE *h = out.f;
    page_head(h, f, plot_note);
    bool missing = false;
    for (int sec = 0; sec < FACTOR_SECTIONS; sec++)
        missing |= !page_section(h, f, sec, plots, drawn, svg_dir);
    if (f->depth.n)
        missing |= !page_depth(h, &f->depth, &plots[FP_PARTS], drawn[FP_PARTS], svg_dir);
    fputs("<h2>Definitions</h2>\n<p class=meta>Rates are over each point's run window (first "
          "send &rarr; last byte); latencies over completed requests, from the scheduled start. "
          "GB/s read: the server's weight and KV bytes read by its steps over the point / the "
          "steps' time; % of bandwidth: that over the machine's read bandwidth (tps machine's, "
          "or what a point too big for the caches was seen to read when that was more); MB per "
          "output token: those bytes / the tokens generated. docs/metrics.md has the glossary "
          "from the seed's terms to these fields.</p>\n</body></html>\n",
          h);
    return rhtml_close(&out, missing, svg_dir, e);
}

typedef struct factor_render_ctx {
    const factor_report *f;
    rplot plots[FP_PARTS + 1]; /* the last: the context-depth plot */
    bool drawn[FP_PARTS + 1];
} factor_render_ctx;

static int factor_plots(void *ctx, const char *dir, tps_err *e) {
    factor_render_ctx *c = ctx;
    const factor_report *f = c->f;
    int rc = TPS_OK;
    for (int i = 0; i < FP_PARTS && !rc; i++) {
        bool any = false;
        for (size_t j = 0; j < f->part[i].n; j++)
            any = any || f->part[i].p[j].has_result;
        if (!any) continue;
        rc = plot_part(f, i, dir, &c->plots[i], e);
        c->drawn[i] = !rc;
    }
    if (!rc && f->depth.n) {
        rc = depth_plot(&f->depth, dir, &c->plots[FP_PARTS], e);
        c->drawn[FP_PARTS] = !rc;
    }
    return rc;
}

static int factor_page(void *ctx, const char *dir, const char *plot_err, const char *html_path,
                       tps_err *e) {
    const factor_render_ctx *c = ctx;
    return write_page(c->f, c->plots, c->drawn, dir, plot_err, html_path, e);
}

int factor_render(const factor_report *f, const char *html_path, const char *svg_dir, tps_err *e) {
    factor_render_ctx c = {.f = f};
    char tmp[] = "/tmp/tps-factor-XXXXXX";
    return rhtml_render(tmp, svg_dir, true, factor_plots, factor_page, &c, html_path, e);
}
