/* The scrape thread and its series (scrape.h). One HTTP handle
 * (http/http_call.h), reused; a condition variable lets scrape_stop wake it
 * at once. */
#include "bench/result/scrape.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/cond.h"
#include "base/grow.h"
#include "bench/io/http_call.h"
#include "metrics/prom_read.h"

#define SCRAPE_MAX_BODY (16u << 20)

typedef struct series {
    char *name, *labels;
    prom_type type; /* counter or gauge (untyped: by its name) */
    uint64_t *t;    /* (n,) CLOCK_MONOTONIC ns */
    double *v;      /* (n,) */
    size_t n, cap;
} series;

struct scraper {
    char url[1024];
    uint64_t interval_ns;
    bool open; /* call is open */
    http_call call;
    series *s;
    size_t n_series;
    uint64_t scrapes, failed;
    char error[256];
    uint64_t now; /* this scrape's time */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
};

bool scrape_wanted(const char *name, size_t len) {
    static const char *const P[] = {"tps:", "tps_", "vllm:", "llamacpp:", "sglang:"};
    for (size_t i = 0; i < sizeof P / sizeof P[0]; i++) {
        size_t pl = strlen(P[i]);
        if (len > pl && !memcmp(name, P[i], pl)) return true;
    }
    return false;
}

static bool ends_with(const char *s, size_t n, const char *suf) {
    size_t k = strlen(suf);
    return n >= k && !memcmp(s + n - k, suf, k);
}

/* Counter, gauge, or neither (histogram and summary parts are left out). */
static prom_type kept_type(const prom_sample_view *v) {
    if (!scrape_wanted(v->name, v->name_len)) return PROM_UNTYPED;
    if (v->type == PROM_COUNTER || v->type == PROM_GAUGE) return v->type;
    if (v->type != PROM_UNTYPED || ends_with(v->name, v->name_len, "_bucket") ||
        ends_with(v->name, v->name_len, "_sum") || ends_with(v->name, v->name_len, "_count") ||
        ends_with(v->name, v->name_len, "_created"))
        return PROM_UNTYPED;
    return ends_with(v->name, v->name_len, "_total") ? PROM_COUNTER : PROM_GAUGE;
}

/* ---- HTTP ---------------------------------------------------------------------------------- */

static int setup(scraper *s, const char *url, const http_auth *auth, tps_err *e) {
    snprintf(s->url, sizeof s->url, "%s", url);
    const http_call_opts o = {
        .auth = auth, .timeout_ms = 2000, .connect_timeout_ms = 1000, .max_body = SCRAPE_MAX_BODY};
    int rc = http_call_open(&s->call, s->url, &o, e);
    s->open = rc == TPS_OK;
    return rc;
}

/* GETs the endpoint into s->call.body; 0 or an error naming the URL. */
static int get(scraper *s, tps_err *e) {
    if (http_call_do(&s->call, NULL, e))
        return s->call.over ? tps_fail(e, TPS_EIO, "%s: response over 16 MiB", s->url) : TPS_EIO;
    if (s->call.status != 200)
        return tps_fail(e, TPS_EIO, "%s: HTTP status %ld", s->url, s->call.status);
    return TPS_OK;
}

/* ---- series ------------------------------------------------------------------------------ */

static series *find(scraper *s, const prom_sample_view *v) {
    for (size_t i = 0; i < s->n_series; i++) {
        series *x = &s->s[i];
        if (strlen(x->name) == v->name_len && !memcmp(x->name, v->name, v->name_len) &&
            strlen(x->labels) == v->labels_len &&
            (!v->labels_len || !memcmp(x->labels, v->labels, v->labels_len))) /* NULL when none */
            return x;
    }
    if (s->n_series == SCRAPE_MAX_SERIES) return NULL;
    series *x = &s->s[s->n_series];
    memset(x, 0, sizeof *x);
    x->name = strndup(v->name, v->name_len);
    x->labels = strndup(v->labels ? v->labels : "", v->labels_len);
    if (!x->name || !x->labels) {
        free(x->name), free(x->labels);
        return NULL;
    }
    s->n_series++;
    return x;
}

static int on_sample(void *arg, const prom_sample_view *v) {
    scraper *s = arg;
    prom_type t = kept_type(v);
    if (t == PROM_UNTYPED) return 0;
    series *x = find(s, v);
    if (!x || x->n == SCRAPE_MAX_SAMPLES) return 0;
    x->type = t;
    /* the two arrays grow alike: x->cap moves once both have grown */
    size_t cap_t = x->cap, cap_v = x->cap;
    if (TPS_GROW(x->t, cap_t, x->n + 1, 64) || TPS_GROW(x->v, cap_v, x->n + 1, 64)) return 0;
    x->cap = cap_t;
    x->t[x->n] = s->now;
    x->v[x->n++] = v->value;
    return 0;
}

static void sample_once(scraper *s) {
    tps_err e = {{0}};
    s->now = tps_now_ns();
    s->scrapes++;
    if (!get(s, &e))
        prom_text_parse(s->call.body.p ? s->call.body.p : "", s->call.body.len, on_sample, s, &e);
    if (e.msg[0]) {
        s->failed++;
        snprintf(s->error, sizeof s->error, "%.250s", e.msg);
    }
}

static void *loop(void *arg) {
    scraper *s = arg;
    pthread_mutex_lock(&s->mu);
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    while (!s->stop) {
        uint64_t ns = (uint64_t)until.tv_nsec + s->interval_ns;
        until.tv_sec += (time_t)(ns / 1000000000u);
        until.tv_nsec = (long)(ns % 1000000000u);
        int w = 0;
        while (!s->stop && w == 0)
            w = pthread_cond_timedwait(&s->cv, &s->mu, &until);
        if (s->stop) break;
        pthread_mutex_unlock(&s->mu);
        sample_once(s);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    sample_once(s); /* the state at the run's end */
    return NULL;
}

static void scraper_free(scraper *s) {
    for (size_t i = 0; i < s->n_series; i++)
        free(s->s[i].name), free(s->s[i].labels), free(s->s[i].t), free(s->s[i].v);
    free(s->s);
    if (s->open) http_call_close(&s->call);
    free(s);
}

/* ---- probe, start, stop ------------------------------------------------------------------- */

int scrape_probe(const char *url, const http_auth *auth, tps_err *e) {
    scraper *s = calloc(1, sizeof *s);
    if (!s) return tps_fail(e, TPS_ENOMEM, "out of memory");
    s->s = calloc(SCRAPE_MAX_SERIES, sizeof *s->s);
    int rc = s->s ? setup(s, url, auth, e) : tps_fail(e, TPS_ENOMEM, "out of memory");
    if (!rc) rc = get(s, e);
    if (!rc)
        rc = prom_text_parse(s->call.body.p ? s->call.body.p : "", s->call.body.len, on_sample, s,
                             e);
    if (rc) {
        char m[sizeof e->msg];
        snprintf(m, sizeof m, "%s", e->msg);
        if (!strstr(m, url)) tps_fail(e, rc, "%s: not Prometheus text: %s", url, m);
    } else if (!s->n_series) {
        rc = tps_fail(e, TPS_EINVAL,
                      "%s: no gauge or counter named tps:, tps_, vllm:, llamacpp: or sglang:", url);
    }
    scraper_free(s);
    return rc;
}

int scrape_start(scraper **out, const char *url, const http_auth *auth, double interval_s,
                 tps_err *e) {
    *out = NULL;
    scraper *s = calloc(1, sizeof *s);
    if (!s) return tps_fail(e, TPS_ENOMEM, "out of memory");
    s->s = calloc(SCRAPE_MAX_SERIES, sizeof *s->s);
    s->interval_ns = (uint64_t)((interval_s > 0 ? interval_s : 1.0) * 1e9);
    int rc = s->s ? setup(s, url, auth, e) : tps_fail(e, TPS_ENOMEM, "out of memory");
    if (rc) {
        scraper_free(s);
        return rc;
    }
    tps_cond_init_monotonic(&s->cv);
    pthread_mutex_init(&s->mu, NULL);
    sample_once(s); /* before the run's first send: counters' growth is the run's */
    if (pthread_create(&s->thread, NULL, loop, s)) {
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        scraper_free(s);
        return tps_fail(e, TPS_ENOMEM, "cannot start the scrape thread");
    }
    *out = s;
    return TPS_OK;
}

static json_t *series_json(const series *x, uint64_t origin) {
    json_t *t = json_array(), *v = json_array();
    const bool counter = x->type == PROM_COUNTER;
    for (size_t i = counter ? 1 : 0; i < x->n; i++) {
        double dt = (double)(int64_t)(x->t[i] - origin) / 1e9;
        json_array_append_new(t, json_real(dt));
        double val = x->v[i];
        if (counter) { /* per second since the previous scrape; a reset reads as no rate */
            double span = (double)(x->t[i] - x->t[i - 1]) / 1e9;
            val = span > 0 && x->v[i] >= x->v[i - 1] ? (x->v[i] - x->v[i - 1]) / span : 0;
        }
        json_array_append_new(v, isfinite(val) ? json_real(val) : json_null());
    }
    json_t *o =
        json_pack("{s:s, s:s, s:s, s:o, s:o}", "name", x->name, "labels", x->labels, "type",
                  counter ? "counter" : "gauge", "t_s", t, counter ? "rate_per_s" : "values", v);
    if (counter && x->n) json_object_set_new(o, "increase", json_real(x->v[x->n - 1] - x->v[0]));
    return o;
}

json_t *scrape_stop(scraper *s, uint64_t origin_ns) {
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    json_t *ser = json_array();
    for (size_t i = 0; i < s->n_series; i++)
        json_array_append_new(ser, series_json(&s->s[i], origin_ns));
    json_t *o = json_pack("{s:s, s:f, s:I, s:I, s:o}", "url", s->url, "interval_s",
                          (double)s->interval_ns / 1e9, "scrapes", (json_int_t)s->scrapes, "failed",
                          (json_int_t)s->failed, "series", ser);
    if (s->error[0]) json_object_set_new(o, "last_error", json_string(s->error));
    scraper_free(s);
    return o;
}

/* ---- printing ------------------------------------------------------------------------------ */

static const json_t *values_of(const json_t *x) {
    const json_t *v = json_object_get(x, "values");
    return v ? v : json_object_get(x, "rate_per_s");
}

/* The series a column shows: the first whose name holds key, an unlabelled
 * one before any labelled one. */
static const json_t *pick(const json_t *ser, const char *key) {
    for (int pass = 0; pass < 2; pass++) {
        size_t i;
        const json_t *x;
        json_array_foreach(ser, i, x) {
            const char *n = json_string_value(json_object_get(x, "name"));
            const char *l = json_string_value(json_object_get(x, "labels"));
            if (n && strstr(n, key) && (pass || !l || !l[0])) return x;
        }
    }
    return NULL;
}

/* The series' value at time t: its last sample at or before t; NAN if none. */
static double at(const json_t *x, double t) {
    const json_t *ts = json_object_get(x, "t_s"), *vs = values_of(x);
    double v = NAN;
    for (size_t i = 0; i < json_array_size(ts); i++) {
        if (json_number_value(json_array_get(ts, i)) > t + 1e-9) break;
        const json_t *y = json_array_get(vs, i);
        v = json_is_number(y) ? json_number_value(y) : NAN;
    }
    return v;
}

void scrape_print(FILE *f, const json_t *m, const uint64_t *series_out, size_t nbins, double bin_s,
                  double run_t0_s) {
    if (!m) return;
    const json_t *ser = json_object_get(m, "series");
    fprintf(f,
            "\nserver metrics  %s  (%lld scrapes every %.3g s, %lld failed; gauges as sampled, "
            "counters as rates)\n",
            json_string_value(json_object_get(m, "url")),
            (long long)json_integer_value(json_object_get(m, "scrapes")),
            json_number_value(json_object_get(m, "interval_s")),
            (long long)json_integer_value(json_object_get(m, "failed")));
    const char *err = json_string_value(json_object_get(m, "last_error"));
    if (err) fprintf(f, "  last failure: %s\n", err);
    fprintf(f, "  %-58s %12s %12s\n", "series", "mean", "max");
    size_t i;
    const json_t *x;
    json_array_foreach(ser, i, x) {
        const json_t *vs = values_of(x);
        double sum = 0, mx = -INFINITY;
        size_t n = 0;
        for (size_t k = 0; k < json_array_size(vs); k++) {
            const json_t *y = json_array_get(vs, k);
            if (!json_is_number(y)) continue;
            double v = json_number_value(y);
            sum += v, n++;
            if (v > mx) mx = v;
        }
        char name[160];
        const char *l = json_string_value(json_object_get(x, "labels"));
        snprintf(name, sizeof name, "%s%s%s%s%s", json_string_value(json_object_get(x, "name")),
                 l && l[0] ? "{" : "", l ? l : "", l && l[0] ? "}" : "",
                 json_object_get(x, "rate_per_s") ? " /s" : "");
        if (n)
            fprintf(f, "  %-58s %12.4g %12.4g\n", name, sum / (double)n, mx);
        else
            fprintf(f, "  %-58s %12s %12s\n", name, "-", "-");
    }
    /* the client's curve with the server's state under it */
    static const char *const KEYS[] = {"running", "waiting", "usage", "generation_tokens"};
    static const char *const HEAD[] = {"srv running", "srv waiting", "srv KV use", "srv gen t/s"};
    const json_t *col[4];
    int ncol = 0;
    for (int k = 0; k < 4; k++)
        if ((col[k] = pick(ser, KEYS[k]))) ncol++;
    if (!ncol || !nbins || !(bin_s > 0)) return;
    fprintf(f, "  %8s %14s", "t (s)", "client out t/s");
    for (int k = 0; k < 4; k++)
        if (col[k]) fprintf(f, " %12s", HEAD[k]);
    fprintf(f, "\n");
    const size_t step = nbins > 30 ? (nbins + 29) / 30 : 1; /* at most ~30 rows */
    for (size_t b = 0; b < nbins; b += step) {
        double t1 = run_t0_s + (double)(b + 1) * bin_s;
        fprintf(f, "  %8.2f %14.1f", t1, (double)series_out[b] / bin_s);
        for (int k = 0; k < 4; k++) {
            if (!col[k]) continue;
            double v = at(col[k], t1);
            if (isnan(v))
                fprintf(f, " %12s", "-");
            else
                fprintf(f, " %12.4g", v);
        }
        fprintf(f, "\n");
    }
}
