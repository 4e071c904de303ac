/* Shared prefixes (workload_internal.h): --prefix-dist, which prefix a
 * prompt starts with (round robin or Zipf), the prefix texts with what
 * sizing needs of each (count, anchor, ids), and a prompt sized behind its
 * prefix so a prefix cache can serve exactly the prefix. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/workload/workload_internal.h"
#include "model/tokenizer.h" /* tokenizer_encode_alloc: a prefix's ids */

int workload_prefix_dist_parse(const char *s, double *zipf, tps_err *e) {
    if (!strcmp(s, "round-robin")) {
        *zipf = 0;
        return TPS_OK;
    }
    if (!strncmp(s, "zipf:", 5)) {
        char *end;
        double v = strtod(s + 5, &end);
        if (end != s + 5 && !*end && isfinite(v) && v > 0 && v <= 100) {
            *zipf = v;
            return TPS_OK;
        }
    }
    return tps_fail(e, TPS_EINVAL,
                    "--prefix-dist '%s': expected round-robin or zipf:S with 0 < S <= 100 "
                    "(zipf:1 is classic Zipf: prefix k is used 1/k as often as the first)",
                    s);
}

int wl_picker_init(wl_picker *p, size_t k, double zipf, uint64_t seed, tps_err *e) {
    memset(p, 0, sizeof *p);
    p->k = k;
    tps_rng_seed(&p->r, seed ^ 0x9f1e5eedull);
    if (zipf <= 0) return TPS_OK;
    p->cdf = malloc(k * sizeof *p->cdf);
    if (!p->cdf) return tps_fail(e, TPS_ENOMEM, "cannot allocate %zu prefix weights", k);
    double sum = 0;
    for (size_t i = 0; i < k; i++)
        p->cdf[i] = sum += pow((double)(i + 1), -zipf);
    return TPS_OK;
}

uint32_t wl_picker_next(wl_picker *p, size_t j) {
    if (!p->cdf) return (uint32_t)(j % p->k);
    double u = tps_rng_uniform_open(&p->r) * p->cdf[p->k - 1];
    size_t lo = 0, hi = p->k - 1; /* the first i with cdf[i] >= u */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (p->cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (uint32_t)lo;
}

void wl_prefixes_free(wl_prefix *pi, size_t k) {
    for (size_t i = 0; pi && i < k; i++)
        free(pi[i].ids);
    free(pi);
}

/* The start of text's last few words: tokenizers work locally, so the own
 * part's tokens behind these words are its tokens behind the whole prefix. */
static size_t anchor_start(const char *text) {
    size_t n = strlen(text), words = 0;
    while (n > 0 && words < 4)
        if (text[--n] == ' ') words++;
    return words < 4 ? 0 : n + 1;
}

/* Prefix k's count, anchor and (with the tokenizer) ids. */
static int prefix_describe(wl_prefix *pi, const char *text, int64_t count, wl_counter *c,
                           tps_err *e) {
    pi->tokens = (uint32_t)count;
    pi->anchor = anchor_start(text);
    int64_t a = wl_can_count(c) ? wl_count_tokens(c, text + pi->anchor) : 1;
    if (a < 0) return tps_fail(e, TPS_EIO, "could not count the tokens of a shared prefix");
    pi->anchor_count = (uint32_t)a;
    if (!c->tok) return TPS_OK;
    return tokenizer_encode_alloc(c->tok, text, strlen(text), TOK_ENCODE_ADD_SPECIAL, &pi->ids,
                                  &pi->n_ids, e);
}

/* n_prefixes texts of prefix_len tokens: "<k> words ...", so different
 * prefixes part at their first words. */
int wl_build_prefixes(workload *w, wl_prefix *pi, wl_counter *c, const workload_opts *o,
                      tps_err *e) {
    w->prefixes = calloc(o->n_prefixes, sizeof *w->prefixes);
    if (!w->prefixes) return tps_fail(e, TPS_ENOMEM, "cannot allocate %u prefixes", o->n_prefixes);
    w->n_prefixes = o->n_prefixes;
    tps_rng r;
    tps_rng_seed(&r, o->seed ^ 0x5a4ed0ull);
    sbuf s;
    sbuf_init(&s);
    int rc = TPS_OK;
    for (size_t k = 0; k < w->n_prefixes && rc == TPS_OK; k++) {
        int64_t got = wl_text(&s, 0, k, o->prefix_len, c, &r);
        if (got < 0)
            rc = tps_fail(e, TPS_EIO, "could not count the tokens of shared prefix %zu (%s)", k,
                          w->input_source);
        else if (!(w->prefixes[k] = strdup(s.p)))
            rc = tps_fail(e, TPS_ENOMEM, "cannot keep shared prefix %zu", k);
        else
            rc = prefix_describe(&pi[k], s.p, wl_can_count(c) ? got : o->prefix_len, c, e);
    }
    free(s.p);
    return rc;
}

/* Tokens of a whole prompt that starts with prefix pi; -1 when counting
 * failed. With the tokenizer, *starts_ok says whether the prompt's ids begin
 * with exactly the prefix's ids (else a prefix cache could not serve all of
 * the prefix); other counters cannot tell and say yes. */
static int64_t count_prompt(wl_counter *c, const char *text, const wl_prefix *pi, bool *starts_ok) {
    *starts_ok = true;
    if (!c->tok) return wl_count_tokens(c, text);
    int32_t *ids = NULL;
    size_t n = 0;
    tps_err e;
    if (tokenizer_encode_alloc(c->tok, text, strlen(text), TOK_ENCODE_ADD_SPECIAL, &ids, &n, &e))
        return -1;
    *starts_ok = n >= pi->n_ids && !memcmp(ids, pi->ids, pi->n_ids * sizeof *ids);
    free(ids);
    return (int64_t)n;
}

/* A single-turn prompt after shared prefix pfx into s: prefix + " " + an
 * own part of `in` tokens starting with the number i. The own part is sized
 * behind the prefix's anchor (a few re-counts of a short text), then the
 * whole prompt is counted once; if that disagrees, it is sized again
 * behind the whole prefix. *got: the whole prompt's count; *keep: where
 * the own part begins. */
int wl_prefixed_prompt(workload *w, sbuf *s, size_t *keep, int64_t *got, size_t i, uint32_t pfx,
                       uint32_t in, const wl_prefix *pi, wl_counter *c, tps_rng *r, tps_err *e) {
    const char *pre = w->prefixes[pfx], *anchor = pre + pi->anchor;
    const int64_t target = (int64_t)pi->tokens + in;
    sbuf_reset(s);
    if (wl_add(s, anchor) || wl_add(s, " ")) return tps_fail(e, TPS_ENOMEM, "out of memory");
    if (wl_text(s, s->len, i, pi->anchor_count + in, c, r) < 0) goto uncounted;
    char *own = strdup(s->p + strlen(anchor) + 1);
    sbuf_reset(s);
    int rc = !own || wl_add(s, pre) || wl_add(s, " ");
    *keep = s->len;
    rc = rc || wl_add(s, own);
    free(own);
    if (rc) return tps_fail(e, TPS_ENOMEM, "out of memory");
    bool starts_ok = true;
    *got = wl_can_count(c) ? count_prompt(c, s->p, pi, &starts_ok) : target;
    if (*got >= 0 && *got != target) { /* the anchor misled: size it in place */
        if (wl_text(s, *keep, i, (uint32_t)target, c, r) < 0) goto uncounted;
        *got = count_prompt(c, s->p, pi, &starts_ok);
    }
    if (*got < 0) goto uncounted;
    if (!starts_ok)
        return tps_fail(e, TPS_EUNSUP,
                        "request %zu: this tokenizer merges the shared prefix's last token with "
                        "the text after it, so a prefix cache could not serve the whole prefix; "
                        "try another --prefix-len or --seed",
                        i);
    return TPS_OK;
uncounted:
    return tps_fail(e, TPS_EIO, "could not count the tokens of a synthetic prompt (%s)",
                    w->input_source);
}
