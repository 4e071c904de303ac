/* The synthetic workload (workload_internal.h): each item's lengths drawn,
 * its prefix picked, its text sized, then its body (single turn) or its
 * user message (multi-turn). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "bench/workload/workload_internal.h"

/* The content of single-turn item i: the prompt text s (prefix + " " +
 * own part when it has a prefix); for chat with a prefix, the prefix as
 * the system message and the own part (from byte `own`) as the user's. */
static json_t *single_content(const workload *w, const char *s, size_t own, uint32_t pfx) {
    if (!bench_endpoint_chatlike(w->endpoint) || pfx == WL_NO_PREFIX) return json_string(s);
    return json_pack("[{s:s, s:s}, {s:s, s:s}]", "role", "system", "content", w->prefixes[pfx],
                     "role", "user", "content", s + own);
}

/* Item i: its prefix, its text sized in tokens, then its body (single
 * turn) or its user message (multi-turn). */
static int build_item(workload *w, size_t i, sbuf *s, const wl_prefix *pi, wl_picker *pick,
                      wl_counter *c, tps_rng *r, const workload_opts *o, tps_err *e) {
    workload_item *it = &w->items[i];
    uint32_t in = load_dist_sample(&o->input_len, r);
    uint32_t out = load_dist_sample(&o->output_len, r);
    it->prefix = WL_NO_PREFIX;
    if (w->prefixes && w->turns)
        it->prefix = i % w->turns ? w->items[i - 1].prefix : wl_picker_next(pick, i / w->turns);
    else if (w->prefixes)
        it->prefix = wl_picker_next(pick, i);
    /* single turn: the own part follows its prefix in one text */
    const bool prefixed = it->prefix != WL_NO_PREFIX && !w->turns;
    size_t keep = 0;
    const uint32_t target = prefixed ? pi[it->prefix].tokens + in : in;
    int64_t got = 0;
    if (prefixed) {
        int rc = wl_prefixed_prompt(w, s, &keep, &got, i, it->prefix, in, &pi[it->prefix], c, r, e);
        if (rc) return rc;
    } else if ((got = wl_text(s, 0, i, in, c, r)) < 0) {
        return tps_fail(e, TPS_EIO, "could not count the tokens of a synthetic prompt (%s)",
                        w->input_source);
    }
    if (got != target) w->exact_inputs = false;
    it->input_target = target;
    it->input_tokens = wl_can_count(c) ? (uint32_t)got : 0;
    if (w->turns) {
        /* the first turn also sends the conversation's prefix: the client's estimate of
         * a turn's prompt (client.c) adds up the items and replies so far */
        if (it->prefix != WL_NO_PREFIX && i % w->turns == 0 && it->input_tokens)
            it->input_tokens += pi[it->prefix].tokens;
        it->max_tokens = out;
        it->text_len = s->len;
        if (!(it->text = strdup(s->p))) return tps_fail(e, TPS_ENOMEM, "out of memory");
        return TPS_OK;
    }
    return wl_make_body(w, it, single_content(w, s->p, keep, it->prefix), out, e);
}

int wl_build_synthetic(workload *w, const workload_opts *o, tps_err *e) {
    size_t n = o->n_items ? o->n_items : 1;
    if (o->turns && n % o->turns)
        return tps_fail(e, TPS_EINVAL, "%zu prompts are not whole conversations of %u turns", n,
                        o->turns);
    if (o->prefix_len && !o->n_prefixes)
        return tps_fail(e, TPS_EINVAL, "a shared prefix length needs at least one prefix");
    w->turns = o->turns;
    w->conversations = o->turns ? n / o->turns : 0;
    wl_counter c = {0};
    wl_open_counter(w, &c, o);
    w->exact_inputs = wl_can_count(&c);
    int rc = TPS_OK;
    wl_prefix *pi = NULL;
    wl_picker pick = {0};
    sbuf s;
    sbuf_init(&s);
    tps_rng r;
    tps_rng_seed(&r, o->seed ^ 0x5eedf00dull);
    if (!(w->items = calloc(n, sizeof *w->items))) {
        rc = tps_fail(e, TPS_ENOMEM, "cannot allocate %zu requests", n);
        goto done;
    }
    if (o->prefix_len) {
        if (!(pi = calloc(o->n_prefixes, sizeof *pi))) {
            rc = tps_fail(e, TPS_ENOMEM, "out of memory");
            goto done;
        }
        rc = wl_build_prefixes(w, pi, &c, o, e);
        if (!rc) rc = wl_picker_init(&pick, o->n_prefixes, o->prefix_zipf, o->seed, e);
        if (rc) goto done;
    }
    for (size_t i = 0; i < n && rc == TPS_OK; i++) {
        rc = build_item(w, i, &s, pi, &pick, &c, &r, o, e);
        if (rc == TPS_OK) w->n = i + 1;
    }
done:
    free(s.p);
    free(pick.cdf);
    wl_prefixes_free(pi, o->n_prefixes);
    wl_counter_close(&c);
    return rc;
}
