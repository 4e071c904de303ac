/* A Mooncake trace as a workload (workload_internal.h): each hash_id's
 * block text made once and shared by every request naming it, so requests
 * share exactly the prefixes the trace says; send times from the
 * timestamps. */
#include <stdlib.h>
#include <string.h>

#include "bench/workload/dataset.h"
#include "bench/workload/workload_internal.h"

/* A trace's block texts: one per hash_id, DATASET_BLOCK_TOKENS tokens
 * (without BOS), made on first use and kept for every request naming it.
 * Open addressing, linear probing, at most half full. */
typedef struct block_cache {
    uint64_t *ids;
    char **texts; /* (cap,), owned; NULL: free slot */
    size_t cap, n;
} block_cache;

static void block_cache_free(block_cache *bc) {
    for (size_t k = 0; k < bc->cap; k++)
        free(bc->texts[k]);
    free(bc->ids);
    free(bc->texts);
    memset(bc, 0, sizeof *bc);
}

static size_t block_slot(const block_cache *bc, uint64_t id) {
    size_t k = (size_t)((id * 0x9e3779b97f4a7c15ull) >> 20) & (bc->cap - 1);
    while (bc->texts[k] && bc->ids[k] != id)
        k = (k + 1) & (bc->cap - 1);
    return k;
}

static int block_cache_grow(block_cache *bc) {
    block_cache nb = {.cap = bc->cap ? bc->cap * 2 : 64};
    nb.ids = calloc(nb.cap, sizeof *nb.ids);
    nb.texts = calloc(nb.cap, sizeof *nb.texts);
    if (!nb.ids || !nb.texts) {
        free(nb.ids);
        free(nb.texts);
        return TPS_ENOMEM;
    }
    for (size_t k = 0; k < bc->cap; k++) {
        if (!bc->texts[k]) continue;
        size_t s = block_slot(&nb, bc->ids[k]);
        nb.ids[s] = bc->ids[k];
        nb.texts[s] = bc->texts[k];
    }
    nb.n = bc->n;
    free(bc->ids);
    free(bc->texts);
    *bc = nb;
    return TPS_OK;
}

/* The text of block `id` (borrowed from the cache): "<id>" then random words
 * drawn from a generator seeded by the id, so it depends on nothing else. */
static const char *block_text(block_cache *bc, uint64_t id, int64_t bos, wl_counter *c,
                              uint64_t seed) {
    if ((bc->n + 1) * 2 > bc->cap && block_cache_grow(bc)) return NULL;
    size_t k = block_slot(bc, id);
    if (bc->texts[k]) return bc->texts[k];
    tps_rng r;
    tps_rng_seed(&r, seed ^ (id * 0xb10c5eedull + 0x51ull));
    sbuf s;
    sbuf_init(&s);
    if (wl_text(&s, 0, (size_t)id, DATASET_BLOCK_TOKENS + (uint32_t)bos, c, &r) < 0) {
        free(s.p);
        return NULL;
    }
    bc->ids[k] = id;
    bc->texts[k] = s.p;
    bc->n++;
    return s.p;
}

/* Item it from trace entry en (request number i): its shared blocks (as many
 * whole blocks of hash_ids as fit before a short own part), a space, then
 * its own part "<i> words...", sized so the whole prompt has input_length
 * tokens (BOS included, as the server counts). */
static int trace_item(workload *w, workload_item *it, const dataset_entry *en, size_t i,
                      block_cache *bc, int64_t bos, sbuf *s, wl_counter *c, tps_rng *r,
                      const workload_opts *o, tps_err *e) {
    enum { OWN_MIN = 8 }; /* tokens left for the own part at least */
    size_t blocks = 0;
    while (blocks < en->n_hash_ids &&
           (uint64_t)bos + (uint64_t)(blocks + 1) * DATASET_BLOCK_TOKENS + OWN_MIN <= en->input_len)
        blocks++;
    sbuf_reset(s);
    for (size_t b = 0; b < blocks; b++) {
        const char *t = block_text(bc, en->hash_ids[b], bos, c, o->seed);
        if (!t) return tps_fail(e, TPS_EIO, "request %zu: could not build block %zu", i, b);
        if (wl_add(s, t) || wl_add(s, " ")) return tps_fail(e, TPS_ENOMEM, "out of memory");
    }
    int64_t got = wl_text(s, s->len, i, en->input_len, c, r);
    if (got < 0)
        return tps_fail(e, TPS_EIO, "could not count the tokens of a trace prompt (%s)",
                        w->input_source);
    if (got != en->input_len) w->exact_inputs = false;
    it->input_target = en->input_len;
    it->input_tokens = wl_can_count(c) ? (uint32_t)got : 0;
    return wl_make_body(w, it, json_string(s->p), en->max_tokens, e);
}

/* The trace's items: prompts from shared blocks, send times from the
 * timestamps. */
int wl_trace_items(workload *w, const dataset *d, size_t n0, const workload_opts *o, tps_err *e) {
    const double speed = o->trace_speed > 0 ? o->trace_speed : 1;
    wl_counter c = {0};
    wl_open_counter(w, &c, o);
    w->exact_inputs = wl_can_count(&c);
    int64_t bos = wl_can_count(&c) ? wl_count_tokens(&c, "") : 0;
    if (bos < 0) bos = 0;
    block_cache bc = {0};
    sbuf s;
    sbuf_init(&s);
    tps_rng r;
    tps_rng_seed(&r, o->seed ^ 0x7ace5eedull);
    int rc = TPS_OK;
    for (size_t k = 0; k < d->n && rc == TPS_OK; k++) {
        workload_item *it = &w->items[n0 + k];
        rc = trace_item(w, it, &d->entries[k], n0 + k, &bc, bos, &s, &c, &r, o, e);
        it->send_at_s = (d->entries[k].timestamp_ms - d->entries[0].timestamp_ms) / 1e3 / speed;
        if (rc == TPS_OK && !(it->send_at_s <= WL_TRACE_MAX_S)) /* also NaN */
            rc = tps_fail(e, TPS_ERANGE,
                          "trace entry %zu is due %.6g s after the first (at --trace-speed %g): "
                          "a replay may span at most %.0f days; check the timestamps' unit (ms)",
                          k + 1, it->send_at_s, speed, WL_TRACE_MAX_S / 86400);
        if (rc == TPS_OK) w->n++;
    }
    free(s.p);
    block_cache_free(&bc);
    wl_counter_close(&c);
    if (rc == TPS_OK) w->timed = true;
    return rc;
}
