/* Token sampler (see sampler.h for the chain and its order).
 *
 * Sections: parameters, RNG, penalty window (ring + hash of counts),
 * candidate selection (greedy, top_k heap, bounded top_p gather), draw.
 * Not here: stop conditions (stop.c), text, anything shared between
 * sequences. */
#include "engine/sample/sampler.h"

#include "base/compiler.h" /* ALWAYS_INLINE */
#include "base/rng.h"
#include "kernels/ops.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A penalty-map slot: a token in the window and how often it occurs. */
typedef struct pen_slot {
    int32_t tok; /* PEN_EMPTY when free */
    int32_t count;
} pen_slot;

#define PEN_EMPTY (-1)

struct sampler {
    sampler_params p;
    sampler_vocab v;
    tps_rng rng; /* per sequence: a request's draws never depend on other requests */

    /* Penalty window: the last `window` accepted tokens, oldest at ring_head
     * once full, and their counts in an open-addressing (linear probing)
     * map of map_mask+1 slots, at most half full. */
    int32_t window;
    int32_t ring_len;
    int32_t ring_head;
    int32_t *ring;     /* (window,) */
    pen_slot *map;     /* (map_mask + 1,) */
    uint32_t map_mask; /* power of two minus one */

    sampler_cand *cand; /* (cand_cap,) scratch, one token's survivors */
    size_t cand_cap;

    sampler_bias *bias; /* (n_bias,) logit_bias, owned (its own allocation) */
    size_t n_bias;
};

/* ---------------------------------------------------------------------------
 * Parameters
 * ------------------------------------------------------------------------- */

void sampler_params_default(sampler_params *p) {
    *p = (sampler_params){
        .temperature = 1.0f,
        .top_k = 0,
        .top_p = 1.0f,
        .min_p = 0.0f,
        .typical_p = 1.0f,
        .seed = 0,
        .repetition_penalty = 1.0f,
        .frequency_penalty = 0.0f,
        .presence_penalty = 0.0f,
        .penalty_last_n = SAMPLER_DEFAULT_LAST_N,
        .ignore_eos = false,
    };
}

static int bad_field(const char **field, const char *name, tps_err *err, const char *what,
                     double got) {
    if (field) *field = name;
    return tps_fail(err, TPS_EINVAL, "%s must be %s; got %g", name, what, got);
}

int sampler_params_validate(const sampler_params *p, const char **field, tps_err *err) {
    if (field) *field = NULL;
    /* Every comparison is written so that NaN fails it. */
    if (!(p->temperature >= 0.0f && p->temperature <= SAMPLER_MAX_TEMPERATURE))
        return bad_field(field, "temperature", err, "a number in [0, 100] (0 = greedy)",
                         p->temperature);
    if (p->top_k < 0) return bad_field(field, "top_k", err, ">= 0 (0 = off)", (double)p->top_k);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return bad_field(field, "top_p", err, "a number in (0, 1] (1 = off)", p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return bad_field(field, "min_p", err, "a number in [0, 1] (0 = off)", p->min_p);
    if (!(p->typical_p > 0.0f && p->typical_p <= 1.0f))
        return bad_field(field, "typical_p", err, "a number in (0, 1] (1 = off)", p->typical_p);
    if (!(p->repetition_penalty >= SAMPLER_MIN_REP_PENALTY &&
          p->repetition_penalty <= SAMPLER_MAX_REP_PENALTY))
        return bad_field(field, "repetition_penalty", err, "a number in [0.01, 10] (1 = off)",
                         p->repetition_penalty);
    if (!(fabsf(p->frequency_penalty) <= SAMPLER_MAX_OPENAI_PENALTY))
        return bad_field(field, "frequency_penalty", err, "a number in [-2, 2] (0 = off)",
                         p->frequency_penalty);
    if (!(fabsf(p->presence_penalty) <= SAMPLER_MAX_OPENAI_PENALTY))
        return bad_field(field, "presence_penalty", err, "a number in [-2, 2] (0 = off)",
                         p->presence_penalty);
    if (p->penalty_last_n < -1)
        return bad_field(field, "penalty_last_n", err, ">= -1 (0 = off, -1 = whole context)",
                         (double)p->penalty_last_n);
    return TPS_OK;
}

/* ---------------------------------------------------------------------------
 * Create / free
 * ------------------------------------------------------------------------- */

static size_t align_up(size_t n, size_t a) {
    return (n + a - 1) / a * a;
}

int sampler_create(sampler **out, const sampler_params *p, const sampler_vocab *v, tps_err *err) {
    *out = NULL;
    int rc = sampler_params_validate(p, NULL, err);
    if (rc) return rc;
    if (v->n_vocab <= 0)
        return tps_fail(err, TPS_EINVAL, "sampler: n_vocab must be > 0; got %d", v->n_vocab);
    if (v->n_eog < 0 || v->n_eog > SAMPLER_MAX_EOG)
        return tps_fail(err, TPS_EINVAL, "sampler: %d end-of-generation ids; at most %d", v->n_eog,
                        SAMPLER_MAX_EOG);
    for (int32_t i = 0; i < v->n_eog; i++)
        if (v->eog_ids[i] < 0 || v->eog_ids[i] >= v->n_vocab)
            return tps_fail(err, TPS_EINVAL, "sampler: end-of-generation id %d outside [0, %d)",
                            v->eog_ids[i], v->n_vocab);

    int32_t window = p->penalty_last_n;
    if (window < 0) {
        if (v->n_ctx <= 0)
            return tps_fail(err, TPS_EINVAL,
                            "sampler: penalty_last_n = -1 needs the context length; got %d",
                            v->n_ctx);
        window = v->n_ctx;
    }
    if (window > (1 << 24))
        return tps_fail(err, TPS_ERANGE, "penalty_last_n %d is too large; at most %d", window,
                        1 << 24);
    uint32_t map_slots = 8;
    while (map_slots < 2u * (uint32_t)window)
        map_slots *= 2;
    size_t cand_cap = (size_t)v->n_vocab;
    if (p->top_k > 0 && p->top_k < v->n_vocab) cand_cap = (size_t)p->top_k;

    /* One allocation: struct | ring | map | candidates. */
    size_t off_ring = align_up(sizeof(sampler), 16);
    size_t off_map = align_up(off_ring + (size_t)window * sizeof(int32_t), 16);
    size_t off_cand = align_up(off_map + map_slots * sizeof(pen_slot), 16);
    size_t total = off_cand + cand_cap * sizeof(sampler_cand);
    char *mem = malloc(total);
    if (!mem)
        return tps_fail(err, TPS_ENOMEM, "sampler: cannot allocate %zu bytes (vocab %d)", total,
                        v->n_vocab);
    sampler *s = (sampler *)mem;
    memset(s, 0, sizeof *s);
    s->p = *p;
    s->v = *v;
    s->window = window;
    s->ring = (int32_t *)(mem + off_ring);
    s->map = (pen_slot *)(mem + off_map);
    s->map_mask = map_slots - 1;
    s->cand = (sampler_cand *)(mem + off_cand);
    s->cand_cap = cand_cap;
    sampler_reset(s, p->seed);
    *out = s;
    return TPS_OK;
}

void sampler_free(sampler *s) {
    if (s) free(s->bias);
    free(s);
}

int sampler_set_logit_bias(sampler *s, const sampler_bias *b, size_t n, tps_err *err) {
    if (n > SAMPLER_MAX_LOGIT_BIAS)
        return tps_fail(err, TPS_EINVAL, "logit_bias has %zu entries; at most %d", n,
                        SAMPLER_MAX_LOGIT_BIAS);
    for (size_t i = 0; i < n; i++) {
        if (b[i].id < 0 || b[i].id >= s->v.n_vocab)
            return tps_fail(err, TPS_EINVAL,
                            "logit_bias: token id %d is outside the vocabulary (0..%d)", b[i].id,
                            s->v.n_vocab - 1);
        if (!(b[i].bias >= -100.0f && b[i].bias <= 100.0f))
            return tps_fail(err, TPS_EINVAL,
                            "logit_bias: the bias of token %d must be in "
                            "[-100, 100]",
                            b[i].id);
    }
    sampler_bias *copy = n ? malloc(n * sizeof *copy) : NULL;
    if (n && !copy) return tps_fail(err, TPS_ENOMEM, "sampler: out of memory");
    if (n) memcpy(copy, b, n * sizeof *copy);
    free(s->bias);
    s->bias = copy;
    s->n_bias = n;
    return TPS_OK;
}

void sampler_reset(sampler *s, uint64_t seed) {
    tps_rng_seed(&s->rng, seed);
    s->p.seed = seed;
    s->ring_len = 0;
    s->ring_head = 0;
    for (uint32_t i = 0; i <= s->map_mask; i++)
        s->map[i] = (pen_slot){PEN_EMPTY, 0};
}

/* ---------------------------------------------------------------------------
 * Penalty window: ring of the last `window` tokens, counts in a hash map
 * (linear probing, backward-shift deletion: no tombstones, so the map never
 * degrades over a long generation).
 * ------------------------------------------------------------------------- */

static inline uint32_t pen_home(const sampler *s, int32_t tok) {
    return ((uint32_t)tok * 2654435761u) & s->map_mask;
}

static uint32_t pen_find(const sampler *s, int32_t tok) {
    uint32_t i = pen_home(s, tok);
    while (s->map[i].tok != PEN_EMPTY && s->map[i].tok != tok)
        i = (i + 1) & s->map_mask;
    return i; /* tok's slot, or the empty slot where it would go */
}

static void pen_remove_slot(sampler *s, uint32_t i) {
    uint32_t j = i;
    for (;;) {
        j = (j + 1) & s->map_mask;
        if (s->map[j].tok == PEN_EMPTY) break;
        uint32_t k = pen_home(s, s->map[j].tok);
        /* The entry at j may stay if its home k lies cyclically in (i, j]. */
        bool stays = (i <= j) ? (i < k && k <= j) : (i < k || k <= j);
        if (stays) continue;
        s->map[i] = s->map[j];
        i = j;
    }
    s->map[i] = (pen_slot){PEN_EMPTY, 0};
}

int sampler_accept(sampler *s, int32_t tok) {
    if (tok < 0 || tok >= s->v.n_vocab) return TPS_ERANGE;
    if (s->window == 0) return TPS_OK;
    if (s->ring_len == s->window) { /* evict the oldest */
        int32_t old = s->ring[s->ring_head];
        uint32_t i = pen_find(s, old);
        assert(s->map[i].tok == old && s->map[i].count > 0);
        if (--s->map[i].count == 0) pen_remove_slot(s, i);
        s->ring[s->ring_head] = tok;
        s->ring_head = (s->ring_head + 1) % s->window;
    } else {
        s->ring[(s->ring_head + s->ring_len) % s->window] = tok;
        s->ring_len++;
    }
    uint32_t i = pen_find(s, tok);
    if (s->map[i].tok == PEN_EMPTY) s->map[i] = (pen_slot){tok, 0};
    s->map[i].count++;
    return TPS_OK;
}

void sampler_apply_penalties(const sampler *s, float *logits) {
    /* logit_bias first, as OpenAI defines it: added to the model's logits;
     * -100 bans the token outright (a finite -100 could still be drawn
     * when every other logit is lower still) */
    for (size_t i = 0; i < s->n_bias; i++)
        logits[s->bias[i].id] =
            s->bias[i].bias <= -100.0f ? -INFINITY : logits[s->bias[i].id] + s->bias[i].bias;
    if (s->p.ignore_eos)
        for (int32_t i = 0; i < s->v.n_eog; i++)
            logits[s->v.eog_ids[i]] = -INFINITY;
    const float rep = s->p.repetition_penalty;
    const float freq = s->p.frequency_penalty;
    const float pres = s->p.presence_penalty;
    if (s->ring_len == 0 || (rep == 1.0f && freq == 0.0f && pres == 0.0f)) return;
    for (uint32_t i = 0; i <= s->map_mask; i++) {
        const pen_slot e = s->map[i];
        if (e.tok == PEN_EMPTY) continue;
        float *l = &logits[e.tok];
        if (rep != 1.0f) *l = *l > 0.0f ? *l / rep : *l * rep;
        *l -= (float)e.count * freq + pres;
    }
}

/* ---------------------------------------------------------------------------
 * Candidate selection
 * ------------------------------------------------------------------------- */

/* The total order every stage uses: higher logit first, then lower id. */
static inline bool cand_better(const sampler_cand *a, const sampler_cand *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int cand_cmp(const void *pa, const void *pb) {
    const sampler_cand *a = pa, *b = pb;
    if (cand_better(a, b)) return -1;
    if (cand_better(b, a)) return 1;
    return 0;
}

/* Exact argmax, ties to the lowest id; NaN and -inf never win. Returns 0 if
 * no logit is greater than -inf. */
static int32_t argmax(const float *logits, int32_t n) {
    int32_t best = 0;
    float bl = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        if (logits[i] > bl) {
            bl = logits[i];
            best = i;
        }
    return best;
}

/* Min-heap on cand_better (the worst survivor at the root). */
static void heap_sift_down(sampler_cand *h, size_t n, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && cand_better(&h[w], &h[l])) w = l;
        if (r < n && cand_better(&h[w], &h[r])) w = r;
        if (w == i) return;
        sampler_cand t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

static void heap_sift_up(sampler_cand *h, size_t i) {
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!cand_better(&h[parent], &h[i])) return;
        sampler_cand t = h[i];
        h[i] = h[parent];
        h[parent] = t;
        i = parent;
    }
}

/* top_k by partial selection: O(V log k), and O(V) when most logits lose to
 * the root at a glance. Leaves the k best (finite) in cand, sorted. */
static size_t select_top_k(sampler *s, const float *logits, size_t k) {
    sampler_cand *h = s->cand;
    size_t n = 0;
    for (int32_t i = 0; i < s->v.n_vocab; i++) {
        float l = logits[i];
        if (!(l > -INFINITY)) continue; /* -inf and NaN never survive */
        sampler_cand c = {i, l, 0.0f};
        if (n < k) {
            h[n] = c;
            heap_sift_up(h, n++);
        } else if (cand_better(&c, &h[0])) {
            h[0] = c;
            heap_sift_down(h, n, 0);
        }
    }
    qsort(h, n, sizeof *h, cand_cmp);
    return n;
}

/* Gathers into cand every token with logit >= tau (and > -inf). If mass is
 * not NULL, stores each weight exp(logit - m) in .p and sets *mass to their
 * sum. */
static size_t gather(sampler *s, const float *logits, float tau, float m, double *mass) {
    size_t n = 0;
    double z = 0.0;
    for (int32_t i = 0; i < s->v.n_vocab; i++) {
        float l = logits[i];
        if (l >= tau && l > -INFINITY) {
            s->cand[n++] = (sampler_cand){i, l, 0.0f};
            if (mass) {
                float w = expf(l - m);
                s->cand[n - 1].p = w;
                z += w;
            }
        }
    }
    if (mass) *mass = z;
    return n;
}

/* Sum of exp(logit - m) over the whole vocab (temperature 1). */
static double vocab_mass(const float *logits, int32_t n, float m) {
    double z = 0.0;
    for (int32_t i = 0; i < n; i++)
        if (logits[i] > m - 40.0f) z += expf(logits[i] - m); /* below: < 4e-18 each */
    return z;
}

/* In a sorted cand[0..n), the length of the top_p prefix: the smallest whose
 * cumulative mass reaches top_p * z; the crossing token is kept. */
static size_t top_p_cut(const sampler_cand *c, size_t n, float m, double z, float top_p) {
    const double target = (double)top_p * z;
    double cum = 0.0;
    for (size_t i = 0; i < n; i++) {
        cum += expf(c[i].logit - m);
        if (cum >= target) return i + 1;
    }
    return n;
}

static inline void cand_swap(sampler_cand *a, sampler_cand *b) {
    sampler_cand t = *a;
    *a = *b;
    *b = t;
}

/* typical_p's order: |-ln p - H| ascending (kept in .p), ties in the
 * usual order. */
static inline bool typ_before(const sampler_cand *a, const sampler_cand *b) {
    return a->p < b->p || (a->p == b->p && cand_better(a, b));
}

static int typical_cmp(const void *pa, const void *pb) {
    const sampler_cand *a = pa, *b = pb;
    return typ_before(a, b) ? -1 : typ_before(b, a) ? 1 : 0;
}

/* A candidate's probability at temperature 1: exp(logit - m) / z. */
static inline double typ_mass(const sampler_cand *c, float m, double inv_z) {
    return (double)expf(c->logit - m) * inv_z;
}

/* The shortest prefix of c[0..n) in an order whose mass passes target, by
 * quickselect, without sorting: reorders c so that it is c[0..r), and
 * returns r. Expected O(n): each round partitions around a median-of-three
 * pivot and keeps only the side that holds the boundary. typ 0: the
 * nucleus, in the cand_better order, the weight exp(logit - m) in .p, a
 * prefix whose mass reaches target; typ 1: the typical set, in
 * typ_before's order, the mass typ_mass(m, inv_z), a prefix whose mass
 * exceeds target. typ is a constant, so each caller gets its own loop. */
ALWAYS_INLINE size_t prefix_select(sampler_cand *c, size_t n, double target, const int typ, float m,
                                   double inv_z) {
#define BEFORE(x, y) (typ ? typ_before(x, y) : cand_better(x, y))
#define MASS(x)      (typ ? typ_mass(x, m, inv_z) : (double)(x)->p)
#define PASSES(v)    (typ ? (v) > target : (v) >= target)
    size_t lo = 0, hi = n;
    double acc = 0.0; /* mass of c[0..lo), all before c[lo..hi); short of target */
    while (hi - lo > 16) {
        size_t mid = lo + (hi - lo) / 2, last = hi - 1;
        /* Median of c[lo], c[mid], c[last] into c[last] (the pivot). */
        if (BEFORE(&c[mid], &c[lo])) cand_swap(&c[mid], &c[lo]);
        if (BEFORE(&c[last], &c[lo])) cand_swap(&c[last], &c[lo]);
        if (BEFORE(&c[mid], &c[last])) cand_swap(&c[mid], &c[last]);
        const sampler_cand pv = c[last];
        size_t store = lo;
        double before = 0.0; /* mass of the elements before the pivot */
        for (size_t i = lo; i < last; i++)
            if (BEFORE(&c[i], &pv)) {
                before += MASS(&c[i]);
                cand_swap(&c[i], &c[store++]);
            }
        cand_swap(&c[store], &c[last]);
        const double pm = MASS(&c[store]);
        if (PASSES(acc + before)) {
            hi = store;
        } else if (PASSES(acc + before + pm)) {
            return store + 1;
        } else {
            acc += before + pm;
            lo = store + 1;
        }
    }
    qsort(c + lo, hi - lo, sizeof *c, typ ? typical_cmp : cand_cmp);
    for (size_t i = lo; i < hi; i++) {
        acc += MASS(&c[i]);
        if (PASSES(acc)) return i + 1;
    }
    return hi; /* rounding: the boundary is the last of the range */
#undef BEFORE
#undef MASS
#undef PASSES
}

/* The nucleus: the smallest top prefix of c[0..n) (weight exp(logit - m)
 * in .p), in the cand_better order, whose mass reaches target. */
static size_t nucleus_select(sampler_cand *c, size_t n, double target) {
    return prefix_select(c, n, target, 0, 0.0f, 0.0);
}

/* The shortest prefix of c[0..n) in typical order whose mass exceeds
 * target (expected O(n), no full sort): reorders c so that it is c[0..k),
 * and returns k (n when rounding leaves the total at or below target). */
static size_t typical_select(sampler_cand *c, size_t n, double target, float m, double inv_z) {
    return prefix_select(c, n, target, 1, m, inv_z);
}

/* Stage 5 on cand[0..n) (finite logits): the locally typical set, left in
 * cand[0..k) in no particular order; returns k. One pass of exponentials gives
 * z = sum e^(l-m) and the entropy, H = ln z - sum e^(l-m) (l-m) / z; the
 * scores need none: -ln p - H = ln z - (l - m) - H. */
static size_t typical_cut(sampler_cand *c, size_t n, float typical_p) {
    float m = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (c[i].logit > m) m = c[i].logit;
    double z = 0.0, zl = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double w = expf(c[i].logit - m);
        z += w;
        zl += w * (double)(c[i].logit - m);
    }
    if (z < 1.0) z = 1.0; /* the max alone gives e^0 = 1; this only tells the linter */
    const double log_z = log(z), h = log_z - zl / z;
    for (size_t i = 0; i < n; i++)
        c[i].p = (float)fabs(log_z - (double)(c[i].logit - m) - h);
    return typical_select(c, n, typical_p, m, 1.0 / z);
}

/* The chain with typical_p: top_k (or every finite logit), typical_p,
 * then top_p and min_p over what typical_p kept, each renormalized over
 * its input as llama.cpp's samplers are. Nothing is fully sorted: the
 * typical set and then the nucleus are found by quickselect, so the cost
 * is a few passes over the candidates. */
static size_t filter_typical(sampler *s, const float *logits, float *max_out) {
    const sampler_params *p = &s->p;
    sampler_cand *c = s->cand;
    size_t n;
    if (p->top_k > 0 && p->top_k < s->v.n_vocab)
        n = select_top_k(s, logits, (size_t)p->top_k);
    else
        n = gather(s, logits, -INFINITY, 0.0f, NULL);
    if (n == 0) return 0;
    n = typical_cut(c, n, p->typical_p);
    float m = -INFINITY; /* the survivors' max: typical_p may drop the argmax */
    for (size_t i = 0; i < n; i++)
        if (c[i].logit > m) m = c[i].logit;
    *max_out = m;
    if (p->top_p < 1.0f) {
        double z = 0.0;
        for (size_t i = 0; i < n; i++)
            z += c[i].p = expf(c[i].logit - m);
        n = nucleus_select(c, n, (double)p->top_p * z);
    }
    if (p->min_p <= 0.0f) return n;
    const float tau_min = m + logf(p->min_p);
    size_t keep = 0;
    for (size_t i = 0; i < n; i++)
        if (c[i].logit >= tau_min) c[keep++] = c[i];
    return keep;
}

/* Stages 3-7: leaves the survivors in cand, returns how many. */
static size_t filter(sampler *s, const float *logits, float *max_out) {
    const sampler_params *p = &s->p;
    const int32_t nv = s->v.n_vocab;
    float m = -INFINITY;
    for (int32_t i = 0; i < nv; i++)
        if (logits[i] > m) m = logits[i];
    *max_out = m;
    if (!(m > -INFINITY)) return 0;
    if (isinf(m)) { /* +inf logits: they alone survive, equally likely (at most cand_cap) */
        size_t n = 0;
        for (int32_t i = 0; i < nv && n < s->cand_cap; i++)
            if (logits[i] == m) s->cand[n++] = (sampler_cand){i, 0.0f, 0.0f};
        *max_out = 0.0f;
        return n;
    }
    if (p->typical_p < 1.0f) return filter_typical(s, logits, max_out);
    /* min_p threshold at temperature 1; the max always passes it. */
    const float tau_min = p->min_p > 0.0f ? m + logf(p->min_p) : -INFINITY;
    const bool use_top_p = p->top_p < 1.0f;

    if (p->top_k > 0 && p->top_k < nv) {
        size_t n = select_top_k(s, logits, (size_t)p->top_k);
        if (use_top_p) {
            double z = 0.0;
            for (size_t i = 0; i < n; i++)
                z += expf(s->cand[i].logit - m);
            n = top_p_cut(s->cand, n, m, z, p->top_p);
        }
        size_t keep = 0; /* sorted: min_p cuts a suffix */
        while (keep < n && s->cand[keep].logit >= tau_min)
            keep++;
        return keep;
    }

    if (!use_top_p) return gather(s, logits, tau_min, m, NULL);

    /* top_p without top_k: the nucleus is a prefix of the sorted vocab, so
     * gather a bounded prefix {logit >= m - delta}; if its mass already
     * reaches top_p * Z, the nucleus lies inside it and is found there by
     * quickselect. Otherwise widen. If the min_p bound is the binding one
     * and the nucleus is larger, min_p's set is the answer. */
    const double z = vocab_mass(logits, nv, m);
    static const float deltas[] = {8.0f, 16.0f, 32.0f, INFINITY};
    for (size_t d = 0; d < sizeof deltas / sizeof deltas[0]; d++) {
        float tau = m - deltas[d];
        bool min_p_binds = tau_min >= tau;
        if (min_p_binds) tau = tau_min;
        double mass;
        size_t n = gather(s, logits, tau, m, &mass);
        if (mass >= (double)p->top_p * z) return nucleus_select(s->cand, n, (double)p->top_p * z);
        if (min_p_binds || isinf(deltas[d])) return n;
    }
    return 0; /* unreachable: the last delta returns */
}

/* ---------------------------------------------------------------------------
 * Chain
 * ------------------------------------------------------------------------- */

size_t sampler_candidates(sampler *s, float *logits, const sampler_cand **out) {
    sampler_apply_penalties(s, logits);
    *out = s->cand;
    if (s->p.temperature == 0.0f) {
        int32_t id = argmax(logits, s->v.n_vocab);
        if (!(logits[id] > -INFINITY)) return 0;
        s->cand[0] = (sampler_cand){id, logits[id], 1.0f};
        return 1;
    }
    float m;
    size_t n = filter(s, logits, &m);
    /* Temperature and softmax over the survivors, through the kernels'
     * vector softmax (a full-vocabulary draw is 32000+ exps), with the
     * logits row, no longer needed, as its scratch. */
    if (n == 0) return 0;
    const float inv_t = 1.0f / s->p.temperature;
    for (size_t i = 0; i < n; i++)
        logits[i] = (s->cand[i].logit - m) * inv_t;
    kernel_softmax(logits, n);
    for (size_t i = 0; i < n; i++)
        s->cand[i].p = logits[i];
    return n;
}

int32_t sampler_sample(sampler *s, float *logits) {
    const sampler_cand *c;
    size_t n = sampler_candidates(s, logits, &c);
    if (n == 0) return -1; /* emitting token 0 instead answered a request that banned it */
    if (s->p.temperature == 0.0f || n == 1) {
        if (s->p.temperature != 0.0f) (void)tps_rng_next(&s->rng); /* one draw per sampled token */
        return c[0].id;
    }
    /* Inverse CDF over the survivors in their (deterministic) order. */
    double target = tps_rng_uniform(&s->rng);
    double cum = 0.0;
    for (size_t i = 0; i < n; i++) {
        cum += c[i].p;
        if (target < cum) return c[i].id;
    }
    return c[n - 1].id; /* rounding left target just above the total */
}
