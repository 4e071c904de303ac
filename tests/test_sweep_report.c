/* tps sweep, tps report and the demo script: grid lists and /metrics parsing;
 * a sweep against a fake streaming server round-trips through `tps report`
 * (the table, the SVGs and the HTML page show every point with the numbers
 * the JSON holds); scripts/demo.sh --quick runs end to end (model make ->
 * serve -> sweep -> report) in a temporary folder, and its factor report has
 * every section, part, plot and reading, each reading's numbers being cells
 * of its table; and headless Chromium renders the report pages to PNGs that
 * are not blank (decoded here with the system's zlib, loaded at run time)
 * and to a DOM holding every factor section and plot. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <dlfcn.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/experiment/bench_spec.h"
#include "bench/experiment/capacity.h"
#include "bench/report/report_set.h"
#include "bench/experiment/sweep.h"
#include "support/test_support.h"
#include "test_bench_fake.h"

/* ---- units ------------------------------------------------------------------------------- */

Test(sweep, list_splits_values_and_refuses_empty_items) {
    sweep_list l;
    tps_err e = {{0}};
    cr_assert_eq(sweep_list_parse(&l, "1,4,16", &e), 0);
    cr_expect_eq(l.n, 3);
    cr_expect_str_eq(l.v[0], "1");
    cr_expect_str_eq(l.v[2], "16");
    cr_assert_eq(sweep_list_parse(&l, "uniform:64:512", &e), 0);
    cr_expect_eq(l.n, 1);
    cr_expect_neq(sweep_list_parse(&l, "1,,2", &e), 0);
    cr_expect(strstr(e.msg, "empty") != NULL, "%s", e.msg);
    cr_expect_neq(sweep_list_parse(&l, "", &e), 0);
    cr_expect_neq(sweep_list_parse(&l, "1,", &e), 0);
}

Test(sweep, grid_counts_points_and_varying_axes) {
    sweep_opts o = {0};
    tps_err e = {{0}};
    cr_assert_eq(sweep_list_parse(&o.axis[SWEEP_CONCURRENCY], "1,4,16", &e), 0);
    cr_assert_eq(sweep_list_parse(&o.axis[SWEEP_INPUT_LEN], "32,512", &e), 0);
    cr_assert_eq(sweep_list_parse(&o.axis[SWEEP_OUTPUT_LEN], "64", &e), 0);
    cr_expect_eq(sweep_npoints(&o), 6);
    cr_expect_eq(sweep_naxes(&o), 2);
}

Test(sweep, metrics_parser_sums_the_engine_counters) {
    const char *text = "# HELP tps_steps_total engine iterations\n"
                       "# TYPE tps_steps_total counter\n"
                       "tps_steps_total 120\n"
                       "tps_prompt_tokens_total 640\n"
                       "tps_generation_tokens_total 1000\n"
                       "tps_requests_total{finish_reason=\"stop\"} 3\n"
                       "tps_preemptions_total 2\n"
                       "tps_weight_bytes_read_total 5e9\n"
                       "tps_kv_bytes_read_total 1e9\n"
                       "tps_step_seconds_total 3\n"
                       "tps_machine_read_bandwidth_bytes_per_second 4e10\n"
                       "tps_steps_total_bogus 99\n";
    sweep_counters c;
    tps_err e = {{0}};
    cr_assert_eq(sweep_parse_metrics(&c, text, &e), 0, "%s", e.msg);
    cr_expect_float_eq(c.steps, 120, 1e-9);
    cr_expect_float_eq(c.prompt_tokens, 640, 1e-9);
    cr_expect_float_eq(c.generation_tokens, 1000, 1e-9);
    cr_expect_float_eq(c.preemptions, 2, 1e-9);
    cr_expect_float_eq(c.weight_bytes, 5e9, 1);
    cr_expect_float_eq(c.kv_bytes, 1e9, 1);
    cr_expect_float_eq(c.step_seconds, 3, 1e-9);
    cr_expect_float_eq(c.machine_read_bps, 4e10, 1);
    cr_expect_eq(sweep_parse_metrics(&c, "other_metric 1\n", &e), TPS_ENOENT);
}

Test(sweep, a_points_bandwidth_is_its_bytes_over_its_step_time) {
    rset_point p = {.has_server = true,
                    .srv = {.steps = 100,
                            .generation_tokens = 1000,
                            .weight_bytes = 6e9,
                            .kv_bytes = 2e9,
                            .step_seconds = 4,
                            .machine_read_bps = 8e9}};
    cr_expect_float_eq(rset_point_gbs(&p), 2.0, 1e-12);          /* 8e9 B / 4 s */
    cr_expect_float_eq(rset_point_bw_fraction(&p), 0.25, 1e-12); /* 2 of 8 GB/s */
    cr_expect_float_eq(rset_point_mb_per_token(&p), 8.0, 1e-12); /* 8e9 B / 1000 tokens */
    p.srv.machine_read_bps = 0; /* unknown bandwidth: no fraction, GB/s still */
    cr_expect_lt(rset_point_bw_fraction(&p), 0);
    cr_expect_float_eq(rset_point_gbs(&p), 2.0, 1e-12);
    p.srv.weight_bytes = 0; /* an endpoint without the byte counters */
    cr_expect_lt(rset_point_gbs(&p), 0);
    cr_expect_lt(rset_point_mb_per_token(&p), 0);
}

/* ---- sweep -> JSON -> report, against the fake server ------------------------------------- */

static void rm_rf(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}

/* Runs a 3-point sweep (concurrency 1,2,4) against a fake server into dir;
 * also renders the report there (report.html, svg/). */
static void sweep_and_report(const char *dir) {
    fake_server s = {.mode = FAKE_OK, .tokens = 6, .gap_ms = 3};
    cr_assert_eq(fake_start(&s), 0);
    char args[2048], *out;
    snprintf(args, sizeof args,
             "sweep --url http://127.0.0.1:%d --concurrency 1,2,4 --requests 8 --output-len 6 "
             "--input-len 8 --json %s/sweep.json --quiet",
             s.port, dir);
    int rc = run_tps(args, true, &out);
    fake_stop(&s);
    cr_assert_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "[3/3] c=4") != NULL, "%s", out);
    free(out);
    snprintf(args, sizeof args, "report %s/sweep.json --html %s/report.html --svg %s/svg", dir, dir,
             dir);
    rc = run_tps(args, true, &out);
    cr_assert_eq(rc, 0, "%s", out);
    free(out);
}

Test(sweep_report, sweep_json_round_trips_through_report_with_every_point, .timeout = 90) {
    char dir[] = "/tmp/tps_sweep_testXXXXXX";
    cr_assert(mkdtemp(dir));
    sweep_and_report(dir);

    char path[512];
    snprintf(path, sizeof path, "%s/sweep.json", dir);
    json_t *doc = json_load_file(path, 0, NULL);
    cr_assert_not_null(doc);
    cr_expect_str_eq(json_string_value(json_object_get(doc, "schema")), SWEEP_SCHEMA);
    json_t *points = json_object_get(doc, "points");
    cr_assert_eq(json_array_size(points), 3);
    static const char *const conc[3] = {"1", "2", "4"};
    for (size_t i = 0; i < 3; i++) {
        json_t *p = json_array_get(points, i);
        cr_expect_str_eq(json_string_value(json_object_get(p, "concurrency")), conc[i]);
        json_t *r = json_object_get(p, "result");
        cr_assert(json_is_object(r), "point %zu has no result", i);
        cr_expect_str_eq(json_string_value(json_object_get(r, "schema")), BENCH_RESULT_SCHEMA);
        cr_expect_eq(
            json_integer_value(json_object_get(json_object_get(r, "requests"), "completed")), 8);
    }

    /* read back: every point, with the JSON's numbers */
    rset s;
    rset_init(&s);
    tps_err e = {{0}};
    cr_assert_eq(rset_add_file(&s, path, &e), 0, "%s", e.msg);
    rset_finish(&s);
    cr_assert_eq(s.n, 3);
    cr_expect_eq(s.xaxis, SWEEP_CONCURRENCY);
    cr_expect_eq(s.nx, 3);
    cr_expect_eq(s.ngroups, 1);
    char *table;
    size_t len;
    FILE *mem = open_memstream(&table, &len);
    rset_print(mem, &s);
    fclose(mem);
    for (size_t i = 0; i < 3; i++) {
        json_t *w = json_object_get(
            json_object_get(json_object_get(json_array_get(points, i), "result"), "windows"),
            "run");
        char label[32], row_tps[64];
        snprintf(label, sizeof label, "c=%s", conc[i]);
        snprintf(row_tps, sizeof row_tps, "%.1f",
                 json_number_value(json_object_get(w, "output_tps")));
        cr_expect_str_eq(s.p[i].label, label);
        const char *row = strstr(table, s.p[i].label);
        cr_assert_not_null(row, "point %s missing from the table:\n%s", s.p[i].label, table);
        const char *eol = strchr(row, '\n');
        cr_expect(strstr(row, row_tps) && strstr(row, row_tps) < eol,
                  "row of %s lacks its run-window tok/s %s:\n%s", s.p[i].label, row_tps, table);
        cr_expect_float_eq(s.p[i].r.run.tps.output_tps,
                           json_number_value(json_object_get(w, "output_tps")), 1e-6);
    }
    cr_expect(strstr(table, "[steady]") && strstr(table, "[run]"), "windows are not named");
    free(table);
    rset_free(&s);
    json_decref(doc);

    /* the page and the plots */
    snprintf(path, sizeof path, "%s/report.html", dir);
    char *html = read_file_all(path, &len);
    cr_assert_not_null(html);
    for (size_t i = 0; i < 3; i++) {
        char label[32];
        snprintf(label, sizeof label, ">c=%s<", conc[i]);
        cr_expect(strstr(html, label) != NULL, "%s missing from the page", label);
    }
    cr_expect(strstr(html, "data:image/svg+xml;base64,") != NULL);
    cr_expect(strstr(html, "src=\"http") == NULL, "the page must not load anything");
    free(html);
    static const char *const svgs[] = {
        "throughput.svg", "latency_throughput.svg", "cdf_ttft.svg", "cdf_itl.svg",
        "cdf_e2e.svg",    "series_01.svg",          "series_03.svg"};
    for (size_t i = 0; i < sizeof svgs / sizeof svgs[0]; i++) {
        snprintf(path, sizeof path, "%s/svg/%s", dir, svgs[i]);
        struct stat st;
        cr_expect(stat(path, &st) == 0 && st.st_size > 1000, "%s missing or empty", path);
    }
    rm_rf(dir);
}

Test(sweep_report, bad_options_exit_2_before_anything_runs) {
    expect_tps("sweep --url http://127.0.0.1:9 --concurrency 1,2", 2, "--requests");
    expect_tps("sweep --url http://127.0.0.1:9 --concurrency 1,2 --rate 1,2 "
               "--input-len 1,2 --requests 1",
               2, "at most two");
    expect_tps("report", 2, NULL);
    expect_tps("report /nonexistent.json", 1, NULL);
}

Test(sweep_report, sweep_serves_a_model_itself_and_stops_it, .timeout = 120) {
    char dir[] = "/tmp/tps_sweep_serveXXXXXX";
    cr_assert(mkdtemp(dir));
    char args[2048], *out;
    snprintf(args, sizeof args, "model make --preset tiny --type q8_0 -o %s/tiny.gguf", dir);
    assert_tps_ok(args);
    snprintf(args, sizeof args,
             "sweep --serve %s/tiny.gguf --concurrency 1,2 --requests 4 --output-len 4 "
             "--input-len 8 --json %s/s.json",
             dir, dir);
    int rc = run_tps(args, true, &out);
    cr_assert_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "serving ") && strstr(out, "http://127.0.0.1:"), "%s", out);
    cr_expect(strstr(out, "stopped the server (exit status 0)") != NULL, "%s", out);
    cr_expect(strstr(out, "c=2") != NULL, "the table lacks c=2:\n%s", out);
    free(out);
    snprintf(args, sizeof args, "%s/s.json", dir);
    json_t *doc = json_load_file(args, 0, NULL);
    cr_assert_not_null(doc);
    json_t *points = json_object_get(doc, "points");
    cr_assert_eq(json_array_size(points), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *p = json_array_get(points, i);
        json_t *m = json_object_get(p, "server_metrics");
        cr_assert(json_is_object(m), "point %zu: no /metrics deltas", i);
        cr_expect_geq(json_number_value(json_object_get(m, "generation_tokens")), 16);
        cr_expect_gt(json_number_value(json_object_get(m, "steps")), 0);
        json_t *r = json_object_get(p, "result");
        cr_expect_eq(json_integer_value(json_object_get(json_object_get(r, "tokens"), "output")),
                     16);
        cr_expect_str_eq(
            json_string_value(json_object_get(json_object_get(r, "config"), "input_source")),
            "tokenizer");
    }
    json_decref(doc);
    rm_rf(dir);
}

/* ---- the page in a browser ----------------------------------------------------------------------
 */

/* Under ASan and UBSan the browser would check nothing the Release suite
 * does not: chromium is not instrumented, and the page it renders is made
 * by the same code, which its screenshot and DOM check in Release. The
 * instrumented part, tps sweep and tps report writing the page, still runs
 * under the sanitizers here (sweep_json_round_trips_..., the quick demo). */
#if defined(__SANITIZE_ADDRESS__)
#define BROWSER_CHECKS 0
#else
#define BROWSER_CHECKS 1
#endif

static const char *find_chromium(void) {
    static const char *const names[] = {"/usr/bin/chromium", "/usr/bin/chromium-browser",
                                        "/usr/bin/google-chrome"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (access(names[i], X_OK) == 0) return names[i];
    return NULL;
}

/* Headless chromium on the page, with the flags every run takes and the
 * run's own (what); its stdout into out (NULL: with its stderr into
 * dir/chromium.log). Asserts it exited 0. */
static void run_chromium(const char *chromium, const char *dir, const char *what, const char *html,
                         const char *out) {
    char cmd[4096], to[700];
    if (out)
        snprintf(to, sizeof to, "> '%s' 2> '%s/chromium.log'", out, dir);
    else
        snprintf(to, sizeof to, "> '%s/chromium.log' 2>&1", dir);
    snprintf(cmd, sizeof cmd,
             "timeout 60 '%s' --headless --no-sandbox --disable-gpu --disable-quic "
             "--no-first-run --disable-background-networking --disable-component-update "
             "--disable-sync --user-data-dir='%s/profile' %s 'file://%s' %s",
             chromium, dir, what, html, to);
    int st = system(cmd);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "chromium %s failed (see %s/chromium.log)",
              what, dir);
}

static void screenshot(const char *chromium, const char *html, const char *png, const char *dir) {
    char what[700];
    snprintf(what, sizeof what, "--hide-scrollbars --screenshot='%s' --window-size=1200,2000", png);
    run_chromium(chromium, dir, what, html, NULL);
}

/* The DOM chromium built from the page (its --dump-dom), owned by the caller. */
static char *dump_dom(const char *chromium, const char *html, const char *dir) {
    char out[600];
    snprintf(out, sizeof out, "%s/dom.html", dir);
    run_chromium(chromium, dir, "--dump-dom", html, out);
    char *dom = read_file_all(out, NULL);
    cr_assert_not_null(dom);
    return dom;
}

typedef int (*uncompress_fn)(unsigned char *, unsigned long *, const unsigned char *,
                             unsigned long);

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int paeth(int a, int b, int c) {
    int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

/* Decodes an 8-bit RGB/RGBA non-interlaced PNG; counts distinct colours
 * (up to 4096) and pixels that are not near-white. */
static void png_stats(const char *path, size_t *colours, double *non_white) {
    void *z = dlopen("libz.so.1", RTLD_NOW);
    if (!z) cr_skip_test("libz.so.1 not found: cannot decode the screenshot");
    uncompress_fn unz = (uncompress_fn)(uintptr_t)dlsym(z, "uncompress");
    cr_assert_not_null(unz);
    size_t n;
    unsigned char *f = (unsigned char *)read_file_all(path, &n);
    cr_assert(f && n > 33 && !memcmp(f, "\x89PNG\r\n\x1a\n", 8), "%s is not a PNG", path);
    uint32_t w = be32(f + 16), h = be32(f + 20);
    int depth = f[24], ctype = f[25], interlace = f[28];
    cr_assert(depth == 8 && (ctype == 2 || ctype == 6) && !interlace,
              "unexpected PNG format: depth %d colour type %d interlace %d", depth, ctype,
              interlace);
    const size_t bpp = ctype == 6 ? 4 : 3, stride = w * bpp;
    unsigned char *idat = malloc(n);
    size_t il = 0;
    for (size_t off = 8; off + 12 <= n;) {
        uint32_t len = be32(f + off);
        if (!memcmp(f + off + 4, "IDAT", 4)) memcpy(idat + il, f + off + 8, len), il += len;
        off += 12 + len;
    }
    unsigned long raw_len = (unsigned long)(stride + 1) * h;
    unsigned char *raw = malloc(raw_len);
    cr_assert_eq(unz(raw, &raw_len, idat, il), 0, "zlib could not inflate the PNG");
    unsigned char *img = calloc(stride * h, 1);
    for (uint32_t y = 0; y < h; y++) {
        const unsigned char *src = raw + y * (stride + 1) + 1;
        int ft = raw[y * (stride + 1)];
        unsigned char *row = img + y * stride;
        const unsigned char *up = y ? row - stride : NULL;
        for (size_t x = 0; x < stride; x++) {
            int a = x >= bpp ? row[x - bpp] : 0, b = up ? up[x] : 0,
                c = up && x >= bpp ? up[x - bpp] : 0;
            int pred = ft == 1   ? a
                       : ft == 2 ? b
                       : ft == 3 ? (a + b) / 2
                       : ft == 4 ? paeth(a, b, c)
                                 : 0;
            row[x] = (unsigned char)(src[x] + pred);
        }
    }
    uint32_t *seen = calloc(4096, sizeof *seen);
    size_t nseen = 0, dark = 0;
    for (size_t i = 0; i < (size_t)w * h; i++) {
        const unsigned char *px = img + i * bpp;
        uint32_t rgb = (uint32_t)px[0] << 16 | (uint32_t)px[1] << 8 | px[2];
        if (px[0] < 235 || px[1] < 235 || px[2] < 235) dark++;
        if (nseen < 4096) {
            bool found = false;
            for (size_t k = 0; k < nseen && !found; k++)
                found = seen[k] == rgb;
            if (!found) seen[nseen++] = rgb;
        }
    }
    *colours = nseen;
    *non_white = (double)dark / ((double)w * h);
    free(seen);
    free(img);
    free(raw);
    free(idat);
    free(f);
    dlclose(z);
}

/* The page's screenshot (png) is not blank: 64 colours or more, and 3% of
 * its pixels or more not white. */
static void expect_rendered(const char *chromium, const char *html, const char *png,
                            const char *dir) {
    screenshot(chromium, html, png, dir);
    size_t colours;
    double non_white;
    png_stats(png, &colours, &non_white);
    cr_expect_geq(colours, 64, "only %zu distinct colours: the page looks blank", colours);
    cr_expect_geq(non_white, 0.03, "only %.1f%% of the pixels are not white", 100 * non_white);
}

Test(sweep_report, html_report_renders_in_headless_chromium_and_is_not_blank, .timeout = 150) {
    if (!BROWSER_CHECKS)
        cr_skip_test("the page is rendered by the Release suite's run of this test (chromium is "
                     "not instrumented; the sweep and report it renders run under ASan in "
                     "sweep_json_round_trips_through_report_with_every_point)");
    const char *chromium = find_chromium();
    if (!chromium)
        cr_skip_test("chromium is not installed (scripts/install-deps.sh installs it; make test "
                     "runs that): cannot take the report's screenshot");
    char dir[] = "/tmp/tps_shot_testXXXXXX";
    cr_assert(mkdtemp(dir));
    sweep_and_report(dir);
    char html[512], png[512];
    snprintf(html, sizeof html, "%s/report.html", dir);
    snprintf(png, sizeof png, "%s/report.png", dir);
    expect_rendered(chromium, html, png, dir);

    /* the check itself tells a blank page apart */
    snprintf(html, sizeof html, "%s/blank.html", dir);
    FILE *b = fopen(html, "w");
    cr_assert_not_null(b);
    fputs("<!doctype html><html><body></body></html>\n", b);
    fclose(b);
    snprintf(png, sizeof png, "%s/blank.png", dir);
    screenshot(chromium, html, png, dir);
    size_t colours;
    double non_white;
    png_stats(png, &colours, &non_white);
    cr_expect_lt(colours, 8, "a blank page gave %zu colours", colours);
    cr_expect_lt(non_white, 0.001);
    rm_rf(dir);
}

/* ---- the demo, reduced: every factor, in a browser too ---------------------------------- */

static const char *const FACTOR_SECTION_IDS[] = {
    "factor-batch", "factor-mix", "factor-kv", "factor-bandwidth", "factor-active", "factor-depth"};
static const char *const FACTOR_PARTS[] = {"batch", "mix",    "itl",     "prefix", "kv-type",
                                           "model", "active", "experts", "depth"};

/* The text between the first `open` after from and the next `close`
 * (borrowed into buf); NULL when absent. */
static const char *between(char *buf, size_t cap, const char *from, const char *open,
                           const char *close) {
    const char *a = strstr(from, open);
    if (!a) return NULL;
    a += strlen(open);
    const char *z = strstr(a, close);
    if (!z) return NULL;
    snprintf(buf, cap, "%.*s", (int)(z - a), a);
    return buf;
}

/* The number that ends just before p (skipping spaces, '(' and the '!' that
 * marks a share of a limit needing a word), into out. */
static bool number_before(const char *start, const char *p, char *out, size_t cap) {
    while (p > start && (p[-1] == ' ' || p[-1] == '(' || p[-1] == '!'))
        p--;
    const char *z = p;
    while (p > start && (strchr("0123456789.-", p[-1])))
        p--;
    if (p == z) return false;
    snprintf(out, cap, "%.*s", (int)(z - p), p);
    return true;
}

static bool number_after(const char *p, char *out, size_t cap) {
    while (*p == ' ')
        p++;
    size_t n = strspn(p, "0123456789.-");
    if (!n) return false;
    snprintf(out, cap, "%.*s", (int)n, p);
    return true;
}

/* Every number of a reading is a cell of its table, and every "Rx the ...
 * (A → B" ratio is B / A of those cells. Returns how many pairs it checked. */
static int check_reading(const char *part, const char *reading, const char *table) {
    static const char ARROW[] = "\xe2\x86\x92";
    int pairs = 0;
    for (const char *p = strstr(reading, ARROW); p; p = strstr(p + 1, ARROW)) {
        char a[32], b[32];
        cr_assert(number_before(reading, p, a, sizeof a) &&
                      number_after(p + strlen(ARROW), b, sizeof b),
                  "%s: no numbers around an arrow in: %s", part, reading);
        const char *const v[2] = {a, b};
        for (int k = 0; k < 2; k++) {
            if (!strchr(v[k], '.')) continue; /* concurrency: in the point's label */
            char td[48], marked[48];          /* "!": a share of the bandwidth with a note */
            snprintf(td, sizeof td, "<td>%s</td>", v[k]);
            snprintf(marked, sizeof marked, "<td>%s!</td>", v[k]);
            cr_expect(strstr(table, td) != NULL || strstr(table, marked) != NULL,
                      "%s: reading's %s is not a cell of its table\n%s\n%s", part, v[k], reading,
                      table);
        }
        pairs++;
    }
    for (const char *p = strstr(reading, "x the "); p; p = strstr(p + 1, "x the ")) {
        char r[32], a[32], b[32];
        if (!number_before(reading, p, r, sizeof r)) continue;
        const char *paren = strchr(p, '(');
        cr_assert_not_null(paren, "%s: a ratio without its numbers: %s", part, reading);
        const char *arrow = strstr(paren, ARROW);
        cr_assert(arrow && number_after(paren + 1, a, sizeof a) &&
                      number_after(arrow + strlen(ARROW), b, sizeof b),
                  "%s: a ratio without its numbers: %s", part, reading);
        double ra = atof(r), va = atof(a), vb = atof(b);
        cr_expect(va > 0 && fabs(ra - vb / va) <= 0.0051 * (1 + (ra > 100 ? ra / 100 : 0)),
                  "%s: %sx is not %s / %s in: %s", part, r, b, a, reading);
    }
    return pairs;
}

Test(demo, quick_demo_measures_every_factor_and_its_readings_match_the_tables, .timeout = 300) {
    char dir[] = "/tmp/tps_demo_testXXXXXX";
    cr_assert(mkdtemp(dir));
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s/scripts/demo.sh' '%s' --quick --out '%s/out' > '%s/log' 2>&1",
             TPS_SOURCE_DIR, TPS_BIN, dir, dir);
    int st = system(cmd);
    char path[512];
    snprintf(path, sizeof path, "%s/log", dir);
    char *log = read_file_all(path, NULL);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "demo.sh --quick failed:\n%s", log ? log : "");
    cr_expect(strstr(log, "c=16") != NULL, "the table lacks c=16:\n%s", log);
    cr_expect(strstr(log, "report.html") != NULL, "%s", log);
    cr_expect(strstr(log, "bench --url") != NULL, "%s", log);

    snprintf(path, sizeof path, "%s/out/report.html", dir);
    size_t len;
    char *html = read_file_all(path, &len);
    cr_assert(html && len > 10000, "no report page");
    cr_expect(strstr(html, "src=\"http") == NULL, "the page must not load anything");
    for (size_t i = 0; i < sizeof FACTOR_SECTION_IDS / sizeof FACTOR_SECTION_IDS[0]; i++) {
        char id[64];
        snprintf(id, sizeof id, "<section id=\"%s\">", FACTOR_SECTION_IDS[i]);
        cr_expect(strstr(html, id) != NULL, "section %s missing", FACTOR_SECTION_IDS[i]);
    }
    /* the terminal tables' heads; the experts' parts show bytes per token
     * and experts a step in place of the cache and the bandwidth share */
    static const char *const LAST[2][2] = {{"cached%", "% bw"}, {"MB/tok", "exp/lyr"}};
    for (int k = 0; k < 2; k++) {
        char heads[256];
        snprintf(heads, sizeof heads, "%-24s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s\n", "point",
                 "out t/s", "in t/s", "TTFT p50", "ITL p50", "ITL p99", "gap/arr", "multi%",
                 LAST[k][0], "GB/s", LAST[k][1]);
        cr_expect(strstr(log, heads) != NULL, "no heads %s in:\n%s", heads, log);
    }
    /* the terminal summary ends with the readings, then tps plan's
     * predictions beside the measurements: a line per factor each */
    const char *tail = strstr(log, "What moves tokens per second");
    cr_assert_not_null(tail, "the summary has no readings:\n%s", log);
    const char *pred = strstr(tail, "\nPredicted (tps plan");
    cr_assert_not_null(pred, "the demo does not end with its predictions:\n%s", tail);
    int lines = 0;
    for (const char *q = tail; q < pred; q++)
        lines += *q == '\n';
    cr_expect_eq(lines, 7, "want the heading and one line per factor:\n%s", tail);
    lines = 0;
    for (const char *q = pred + 1; *q; q++)
        lines += *q == '\n';
    cr_expect_eq(lines, 10, "want the heading and one line per factor's prediction:\n%s", pred);
    static const char *const PREDICTED[] = {"batch", "mix",    "prefix", "kv-type",
                                            "model", "active", "experts"};
    for (size_t i = 0; i < sizeof PREDICTED / sizeof PREDICTED[0]; i++) {
        char want[64];
        snprintf(want, sizeof want, "\n  %-8s ", PREDICTED[i]);
        const char *l = strstr(pred, want);
        cr_expect(l && strstr(l, "predicted,") && strstr(l, "measured ("),
                  "%s: no prediction beside its measurement:\n%s", PREDICTED[i], pred);
    }
    static char reading[4096], table[65536];
    for (size_t i = 0; i < sizeof FACTOR_PARTS / sizeof FACTOR_PARTS[0]; i++) {
        const char *part = FACTOR_PARTS[i];
        char open[64];
        snprintf(open, sizeof open, "<p class=reading id=reading-%s>", part);
        cr_assert(between(reading, sizeof reading, html, open, "</p>"), "no reading for %s", part);
        snprintf(open, sizeof open, "<table id=table-%s>", part);
        const char *t = strstr(html, open);
        cr_assert(t && between(table, sizeof table, t, open, "</table>"), "no table for %s", part);
        cr_expect(strstr(reading, "No reading") == NULL, "%s: %s", part, reading);
        cr_expect_geq(check_reading(part, reading, table), 1, "%s: a reading with no numbers: %s",
                      part, reading);
        cr_expect(strstr(tail, reading) != NULL, "%s's reading is not in the terminal summary:\n%s",
                  part, reading);
        /* its plot, inlined after the table */
        const char *fig = strstr(t, "<figure class=wide><img alt=\"");
        const char *next = strstr(t + 1, "<table id=");
        cr_expect(fig && (!next || fig < next) && strstr(fig, "data:image/svg+xml;base64,"),
                  "%s: no plot", part);
        snprintf(path, sizeof path, "%s/out/svg/factor_%s.svg", dir, part);
        struct stat sb;
        cr_expect(stat(path, &sb) == 0 && sb.st_size > 1000, "%s missing or empty", path);
    }

    /* GB/s read, against the point's own /metrics deltas */
    snprintf(path, sizeof path, "%s/out/model-big.json", dir);
    json_t *doc = json_load_file(path, 0, NULL);
    cr_assert_not_null(doc);
    json_t *m =
        json_object_get(json_array_get(json_object_get(doc, "points"), 0), "server_metrics");
    cr_assert(json_is_object(m), "the point did not record the server's /metrics deltas");
    double gbs = (json_number_value(json_object_get(m, "weight_bytes")) +
                  json_number_value(json_object_get(m, "kv_bytes"))) /
                 json_number_value(json_object_get(m, "step_seconds")) / 1e9;
    cr_expect_gt(json_number_value(json_object_get(m, "machine_read_bps")), 0);
    char want[48];
    snprintf(want, sizeof want, "<td>%.2f</td>", gbs);
    const char *mt = strstr(html, "<table id=table-model>");
    cr_expect(mt && strstr(mt, want), "the model table lacks the point's %s GB/s", want);
    json_decref(doc);
    free(html);
    free(log);

    /* the page in a browser: every section rendered, and not blank */
    const char *chromium = BROWSER_CHECKS ? find_chromium() : NULL;
    if (chromium) {
        snprintf(path, sizeof path, "%s/out/report.html", dir);
        char png[512];
        snprintf(png, sizeof png, "%s/report.png", dir);
        expect_rendered(chromium, path, png, dir);
        char *dom = dump_dom(chromium, path, dir);
        for (size_t i = 0; i < sizeof FACTOR_SECTION_IDS / sizeof FACTOR_SECTION_IDS[0]; i++)
            cr_expect(strstr(dom, FACTOR_SECTION_IDS[i]) != NULL,
                      "section %s not in the rendered DOM", FACTOR_SECTION_IDS[i]);
        size_t imgs = 0;
        for (const char *q = strstr(dom, "data:image/svg+xml"); q;
             q = strstr(q + 1, "data:image/svg+xml"))
            imgs++;
        cr_expect_eq(imgs, sizeof FACTOR_PARTS / sizeof FACTOR_PARTS[0],
                     "the rendered page has %zu plots", imgs);
        free(dom);
    }
    rm_rf(dir);
}

Test(sweep_report, factor_specs_are_checked_before_anything_is_read) {
    expect_tps("report --factor speed=/nonexistent.json", 2, "unknown part");
    expect_tps("report --factor batch", 2, "PART=FILE");
    expect_tps("report --factor batch=/nonexistent.json", 1, NULL);
    expect_tps("report x.json --factor batch=/nonexistent.json", 2, NULL);
}

/* ---- sweep as a library call; capacity searches in the report ------------------------------- */

/* A log stream that, on every line the sweep writes, counts the sweep's
 * temporary folders in /tmp (the old way ran each point through a JSON file
 * in /tmp/tps-sweep-XXXXXX). */
static int max_tmp_dirs;

static ssize_t tmp_watch_write(void *cookie, const char *buf, size_t n) {
    (void)cookie;
    (void)buf;
    DIR *d = opendir("/tmp");
    int k = 0;
    for (struct dirent *de; d && (de = readdir(d));)
        k += !strncmp(de->d_name, "tps-sweep-", 10);
    if (d) closedir(d);
    if (k > max_tmp_dirs) max_tmp_dirs = k;
    return (ssize_t)n;
}

Test(sweep, points_run_the_bench_spec_in_memory_without_temp_files, .timeout = 60) {
    fake_server srv = {.mode = FAKE_OK, .tokens = 5, .gap_ms = 2};
    cr_assert_eq(fake_start(&srv), 0);
    tps_err e = {{0}};
    bench_spec base;
    bench_spec_init(&base);
    base.cfg.requests = 4;
    cr_assert_eq(load_dist_parse(&base.wo.input_len, "8", &e), 0);
    cr_assert_eq(load_dist_parse(&base.wo.output_len, "5", &e), 0);
    sweep_opts o = {
        .url = srv.url, .base = &base, .serve_wait_s = 10}; /* no bench callback, no argv */
    cr_assert_eq(sweep_list_parse(&o.axis[SWEEP_CONCURRENCY], "1,2", &e), 0);
    cookie_io_functions_t io = {.write = tmp_watch_write};
    max_tmp_dirs = 0;
    tmp_watch_write(NULL, "", 0);
    const int before = max_tmp_dirs;
    o.log = fopencookie(NULL, "w", io);
    cr_assert_not_null(o.log);
    setvbuf(o.log, NULL, _IONBF, 0);
    json_t *doc = NULL;
    size_t failed = 9;
    int rc = sweep_run(&doc, &failed, &o, &e);
    fclose(o.log);
    fake_stop(&srv);
    cr_assert_eq(rc, 0, "%s", e.msg);
    cr_expect_eq(failed, 0);
    cr_expect_eq(max_tmp_dirs, before, "a temporary folder appeared during the sweep");
    json_t *points = json_object_get(doc, "points");
    cr_assert_eq(json_array_size(points), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *p = json_array_get(points, i);
        cr_expect_eq(json_integer_value(json_object_get(p, "exit_status")), 0);
        json_t *r = json_object_get(p, "result");
        cr_assert(json_is_object(r), "point %zu has no result", i);
        json_t *cfg = json_object_get(r, "config");
        cr_expect_eq(json_integer_value(json_object_get(cfg, "concurrency")), (json_int_t)i + 1);
        cr_expect_str_eq(json_string_value(json_object_get(cfg, "output_len")), "5");
        cr_expect_eq(
            json_integer_value(json_object_get(json_object_get(r, "requests"), "completed")), 4);
    }
    json_decref(doc);
}

Test(sweep, axis_values_bench_does_not_take_are_refused_before_any_point) {
    bench_spec base;
    bench_spec_init(&base);
    base.cfg.requests = 1;
    tps_err e = {{0}};
    sweep_opts o = {.url = "http://127.0.0.1:9", .base = &base};
    cr_assert_eq(sweep_list_parse(&o.axis[SWEEP_CONCURRENCY], "1,0", &e), 0);
    json_t *doc = NULL;
    size_t failed = 0;
    cr_expect_eq(sweep_run(&doc, &failed, &o, &e), TPS_EINVAL);
    cr_expect(strstr(e.msg, "--concurrency") != NULL, "%s", e.msg);
    cr_expect_null(doc);
}

/* A 5 s probe at rate whose sent requests all completed, good of them
 * within the SLO, its TTFT p99 ttft_ms; it passes when all were good. */
static capacity_probe probe_at(double rate, uint64_t sent, uint64_t good, double ttft_ms,
                               const char *why) {
    capacity_probe p = {.rate = rate,
                        .duration_s = 5,
                        .scheduled = sent,
                        .sent = sent,
                        .completed = sent,
                        .good = good,
                        .achieved_rate = rate,
                        .good_fraction = (double)good / (double)sent,
                        .ttft_p99_ms = ttft_ms,
                        .pass = good == sent};
    snprintf(p.why, sizeof p.why, "%s", why);
    return p;
}

/* A search of three probes: 2 and 4 requests/s pass, 8 fails. */
static void write_capacity(const char *path) {
    capacity_probe probes[3] = {probe_at(2, 10, 10, 40, "ok"), probe_at(8, 40, 20, 900, "good 50%"),
                                probe_at(4, 20, 20, 120, "ok")};
    capacity_result r = {.probes = probes,
                         .n = 3,
                         .max_rate = 4,
                         .fail_rate = 8,
                         .stop = CAP_STOP_CONVERGED,
                         .wall_s = 15};
    capacity_opts o = capacity_opts_default();
    o.slo.ttft_ns = 500000000;
    tps_err e = {{0}};
    cr_assert_eq(capacity_write_json(&r, &o, path, &e), 0, "%s", e.msg);
}

Test(sweep_report, capacity_search_json_reads_back_and_reports_probes_and_answer, .timeout = 60) {
    char dir[] = "/tmp/tps_capacity_testXXXXXX";
    cr_assert(mkdtemp(dir));
    char path[512], args[1200], *out;
    snprintf(path, sizeof path, "%s/cap.json", dir);
    write_capacity(path);

    json_t *j = json_load_file(path, 0, NULL);
    cr_assert_not_null(j);
    capacity_result r;
    capacity_opts o;
    tps_err e = {{0}};
    cr_assert_eq(capacity_from_json(&r, &o, j, &e), 0, "%s", e.msg);
    cr_expect_eq(r.n, 3);
    cr_expect_float_eq(r.max_rate, 4, 1e-9);
    cr_expect_float_eq(r.fail_rate, 8, 1e-9);
    cr_expect_eq(r.stop, CAP_STOP_CONVERGED);
    cr_expect(!r.probes[1].pass && r.probes[2].pass);
    cr_expect_eq(o.slo.ttft_ns, 500000000);
    capacity_result_free(&r);
    json_object_set_new(j, "version", json_integer(99));
    cr_expect_eq(capacity_from_json(&r, &o, j, &e), TPS_EUNSUP);
    json_decref(j);

    snprintf(args, sizeof args, "report %s --svg %s/svg", path, dir);
    int rc = run_tps(args, true, &out);
    cr_expect_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "verdict") != NULL, "no probe table: %s", out);
    cr_expect(strstr(out, "max rate within the SLO: 4.00 requests/s (8.00 failed") != NULL, "%s",
              out);
    free(out);
    if (system("command -v gnuplot >/dev/null 2>&1") == 0) {
        snprintf(path, sizeof path, "%s/svg/capacity.svg", dir);
        struct stat st;
        cr_expect(stat(path, &st) == 0 && st.st_size > 1000, "%s missing or empty", path);
    }
    rm_rf(dir);
}
