/* Tests for engine/sampler (the sampling chain). Exact where exactness is
 * possible; the one statistical test names its tolerance. Stop strings and
 * tokens (engine/stop) are tests/test_stop.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sample/sampler.h"

/* Empirical frequencies over FREQ_DRAWS draws must match the exact
 * probabilities within FREQ_TOL (absolute). The standard deviation of a
 * frequency is sqrt(p(1-p)/N) <= 0.0036 at N = 20000, so 0.015 is > 4 sigma;
 * the seed is fixed, so the test is deterministic anyway. */
#define FREQ_DRAWS 20000
#define FREQ_TOL   0.015

/* ---------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------- */

static sampler_vocab vocab_of(int32_t n_vocab) {
    sampler_vocab v = {.n_vocab = n_vocab, .n_ctx = 4096, .n_eog = 0};
    return v;
}

static sampler *make(const sampler_params *p, const sampler_vocab *v) {
    sampler *s = NULL;
    tps_err err = {{0}};
    int rc = sampler_create(&s, p, v, &err);
    cr_assert_eq(rc, 0, "sampler_create: %s", err.msg);
    return s;
}

/* make() over vocab_of(n_vocab): no end-of-generation ids, a 4096 context. */
static sampler *make_n(const sampler_params *p, int32_t n_vocab) {
    sampler_vocab v = vocab_of(n_vocab);
    return make(p, &v);
}

/* The defaults, for a test to change the knobs it is about. */
static sampler_params defaults(void) {
    sampler_params p;
    sampler_params_default(&p);
    return p;
}

/* Samples once from a private copy of logits (the sampler writes into it). */
static int32_t sample_copy(sampler *s, const float *logits, int32_t n, float *scratch) {
    memcpy(scratch, logits, (size_t)n * sizeof *logits);
    return sampler_sample(s, scratch);
}

/* Deterministic pseudo-random logits in [-scale, scale). */
static void fill_logits(float *l, int32_t n, uint32_t seed, float scale) {
    uint32_t x = seed * 2654435761u + 1;
    for (int32_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        l[i] = ((float)(x >> 8) / (float)(1u << 24) * 2.0f - 1.0f) * scale;
    }
}

static bool cand_has(const sampler_cand *c, size_t n, int32_t id) {
    for (size_t i = 0; i < n; i++)
        if (c[i].id == id) return true;
    return false;
}

/* ---------------------------------------------------------------------------
 * Greedy and top_k
 * ------------------------------------------------------------------------- */

Test(sampler, greedy_is_argmax_with_ties_to_lowest_id) {
    sampler_params p = defaults();
    p.temperature = 0.0f;
    sampler *s = make_n(&p, 6);
    float l1[6] = {0.1f, 3.0f, -2.0f, 2.9f, 0.0f, 1.0f};
    cr_assert_eq(sampler_sample(s, l1), 1);
    float l2[6] = {0.1f, 3.0f, -2.0f, 3.0f, 0.0f, 3.0f};
    cr_assert_eq(sampler_sample(s, l2), 1, "ties go to the lowest id");
    float l3[6] = {-1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -0.5f};
    cr_assert_eq(sampler_sample(s, l3), 5);
    float l4[6] = {NAN, -5.0f, NAN, -4.0f, -INFINITY, NAN};
    cr_assert_eq(sampler_sample(s, l4), 3, "NaN never wins");
    sampler_free(s);
}

/* Every logit -inf or NaN (logit_bias -100 on every token, or the model's
 * output not finite): nothing is sampled, greedy or not, so the engine can
 * end the request with an error instead of emitting token 0. */
Test(sampler, nothing_finite_samples_nothing) {
    for (int greedy = 0; greedy < 2; greedy++) {
        sampler_params p = defaults();
        p.temperature = greedy ? 0.0f : 1.0f;
        sampler *s = make_n(&p, 4);
        float banned[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
        cr_assert_eq(sampler_sample(s, banned), -1, "greedy %d", greedy);
        float nan[4] = {NAN, -INFINITY, NAN, NAN};
        cr_assert_eq(sampler_sample(s, nan), -1, "greedy %d", greedy);
        float one[4] = {-INFINITY, -INFINITY, 0.5f, -INFINITY};
        cr_assert_eq(sampler_sample(s, one), 2, "greedy %d", greedy);
        sampler_free(s);
    }
}

Test(sampler, greedy_ignores_top_k_top_p_min_p) {
    sampler_params p = defaults();
    p.temperature = 0.0f;
    p.top_k = 3;
    p.top_p = 0.1f;
    p.min_p = 0.9f;
    sampler *s = make_n(&p, 5);
    float l[5] = {1.0f, 2.0f, 5.0f, 5.0f, 4.0f};
    cr_assert_eq(sampler_sample(s, l), 2);
    sampler_free(s);
}

Test(sampler, top_k_1_equals_greedy_at_any_temperature) {
    enum { N = 32000 };
    float *logits = malloc(N * sizeof *logits), *tmp = malloc(N * sizeof *tmp);
    const float temps[] = {0.1f, 1.0f, 2.0f, 50.0f};
    for (int trial = 0; trial < 8; trial++) {
        fill_logits(logits, N, (uint32_t)trial, 4.0f);
        if (trial == 3) logits[N - 1] = logits[17] = 100.0f; /* tie: lower id wins */
        int32_t want = 0;
        for (int32_t i = 1; i < N; i++)
            if (logits[i] > logits[want]) want = i;
        for (size_t t = 0; t < sizeof temps / sizeof temps[0]; t++) {
            sampler_params p = defaults();
            p.temperature = temps[t];
            p.top_k = 1;
            p.seed = 1234 + (uint64_t)t;
            sampler *s = make_n(&p, N);
            for (int k = 0; k < 5; k++)
                cr_assert_eq(sample_copy(s, logits, N, tmp), want, "trial %d T=%g", trial,
                             temps[t]);
            sampler_free(s);
        }
    }
    free(logits);
    free(tmp);
}

Test(sampler, top_k_keeps_exactly_the_k_largest_by_partial_selection) {
    enum { N = 50000, K = 40 };
    float *logits = malloc(N * sizeof *logits), *tmp = malloc(N * sizeof *tmp);
    fill_logits(logits, N, 7, 10.0f);
    /* Reference: full sort of ids by (logit desc, id asc). */
    int32_t *ids = malloc(N * sizeof *ids);
    for (int32_t i = 0; i < N; i++)
        ids[i] = i;
    for (int32_t i = 0; i < K; i++) { /* selection of the K best, O(NK) */
        int32_t b = i;
        for (int32_t j = i + 1; j < N; j++)
            if (logits[ids[j]] > logits[ids[b]] ||
                (logits[ids[j]] == logits[ids[b]] && ids[j] < ids[b]))
                b = j;
        int32_t t = ids[i];
        ids[i] = ids[b];
        ids[b] = t;
    }
    sampler_params p = defaults();
    p.top_k = K;
    sampler *s = make_n(&p, N);
    memcpy(tmp, logits, N * sizeof *tmp);
    const sampler_cand *c;
    size_t n = sampler_candidates(s, tmp, &c);
    cr_assert_eq(n, K);
    for (int32_t i = 0; i < K; i++)
        cr_assert(cand_has(c, n, ids[i]), "missing id %d", ids[i]);
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += c[i].p;
    cr_assert_float_eq(sum, 1.0, 1e-5);
    sampler_free(s);
    free(ids);
    free(logits);
    free(tmp);
}

Test(sampler, infinite_logits_stay_within_top_k_scratch) {
    enum { N = 10 };
    sampler_params p = defaults();
    p.top_k = 2;
    sampler *s = make_n(&p, N);
    float l[N];
    for (int i = 0; i < N; i++)
        l[i] = INFINITY;
    int32_t t = sampler_sample(s, l);
    cr_assert(t == 0 || t == 1, "picked %d", t);
    sampler_free(s);
}

/* ---------------------------------------------------------------------------
 * Seeds and distribution
 * ------------------------------------------------------------------------- */

static void draw_sequence(uint64_t seed, int32_t *out, int n) {
    enum { N = 1000 };
    float logits[N], tmp[N];
    fill_logits(logits, N, 3, 1.0f);
    sampler_params p = defaults();
    p.seed = seed;
    p.temperature = 1.5f;
    sampler *s = make_n(&p, N);
    for (int i = 0; i < n; i++)
        out[i] = sample_copy(s, logits, N, tmp);
    sampler_free(s);
}

Test(sampler, same_seed_gives_same_tokens_different_seed_differs) {
    int32_t a[64], b[64], c[64];
    draw_sequence(42, a, 64);
    draw_sequence(42, b, 64);
    draw_sequence(43, c, 64);
    cr_assert_arr_eq(a, b, sizeof a, "same seed, same tokens");
    cr_assert_arr_neq(a, c, sizeof a, "different seed, different tokens");
}

Test(sampler, seeded_sequence_is_independent_of_other_samplers) {
    int32_t alone[64];
    draw_sequence(42, alone, 64);
    /* Interleave with another sequence's sampler drawing in between. */
    enum { N = 1000 };
    float logits[N], tmp[N];
    fill_logits(logits, N, 3, 1.0f);
    sampler_params p = defaults();
    p.seed = 42;
    p.temperature = 1.5f;
    sampler *s = make_n(&p, N);
    p.seed = 99;
    sampler *other = make_n(&p, N);
    for (int i = 0; i < 64; i++) {
        (void)sample_copy(other, logits, N, tmp);
        cr_assert_eq(sample_copy(s, logits, N, tmp), alone[i]);
    }
    sampler_reset(s, 42);
    for (int i = 0; i < 64; i++)
        cr_assert_eq(sample_copy(s, logits, N, tmp), alone[i], "reset re-seeds");
    sampler_free(other);
    sampler_free(s);
}

Test(sampler, frequencies_match_softmax_of_logits_over_temperature) {
    enum { N = 6 };
    const float logits[N] = {1.0f, 2.0f, 0.5f, 1.5f, -1.0f, 0.0f};
    const float temps[] = {0.7f, 1.0f, 2.0f};
    for (size_t t = 0; t < sizeof temps / sizeof temps[0]; t++) {
        const float T = temps[t];
        double want[N], z = 0.0;
        for (int i = 0; i < N; i++)
            z += (want[i] = exp((double)logits[i] / T));
        for (int i = 0; i < N; i++)
            want[i] /= z;
        sampler_params p = defaults();
        p.temperature = T;
        p.seed = 2024;
        sampler *s = make_n(&p, N);
        int count[N] = {0};
        float tmp[N];
        for (int k = 0; k < FREQ_DRAWS; k++)
            count[sample_copy(s, logits, N, tmp)]++;
        for (int i = 0; i < N; i++) {
            double got = (double)count[i] / FREQ_DRAWS;
            cr_assert(fabs(got - want[i]) <= FREQ_TOL, "T=%g id %d: freq %.4f, softmax %.4f", T, i,
                      got, want[i]);
        }
        sampler_free(s);
    }
}

/* ---------------------------------------------------------------------------
 * top_p and min_p boundaries
 * ------------------------------------------------------------------------- */

/* Probabilities 0.5, 0.25, 0.125, 0.0625, 0.0625 at temperature 1. */
static void halving_logits(float *l) {
    const double pr[5] = {0.5, 0.25, 0.125, 0.0625, 0.0625};
    for (int i = 0; i < 5; i++)
        l[i] = (float)log(pr[i]);
}

/* Runs stages 1-7 (no draw) with a fresh sampler; copies the survivors
 * into out (room for n). */
static size_t survivors(const sampler_params *p, float *l, int32_t n, sampler_cand *out) {
    sampler *s = make_n(p, n);
    const sampler_cand *c;
    size_t k = sampler_candidates(s, l, &c);
    memcpy(out, c, k * sizeof *c);
    sampler_free(s);
    return k;
}

/* survivors() of halving_logits under p: how many, copied into out (room
 * for 5). */
static size_t halving_survivors(const sampler_params *p, sampler_cand *out) {
    float l[5];
    halving_logits(l);
    return survivors(p, l, 5, out);
}

/* A value of one knob and how many of halving_logits' tokens it keeps. */
typedef struct {
    float value;
    size_t keep;
} keep_case;

/* For each case: sets *knob (a field of *p) to its value and asserts that p
 * keeps exactly the keep likeliest of halving_logits' tokens, ids 0 ..
 * keep-1; name names the knob in a failure. */
static void expect_keeps_the_top(sampler_params *p, float *knob, const char *name,
                                 const keep_case *cases, size_t n_cases) {
    for (size_t i = 0; i < n_cases; i++) {
        *knob = cases[i].value;
        sampler_cand c[5];
        size_t n = halving_survivors(p, c);
        cr_assert_eq(n, cases[i].keep, "%s %g kept %zu", name, cases[i].value, n);
        for (int32_t id = 0; id < (int32_t)cases[i].keep; id++)
            cr_assert(cand_has(c, n, id));
    }
}

Test(sampler, top_p_keeps_the_token_that_crosses_and_excludes_the_tail) {
    sampler_params p = defaults();
    sampler_cand c[5];
    /* cumulative: 0.5, 0.75, 0.875, 0.9375, 1 */
    const keep_case cases[] = {{0.4f, 1},  {0.5f, 1},  {0.6f, 2},  {0.74f, 2}, {0.76f, 3},
                               {0.87f, 3}, {0.88f, 4}, {0.93f, 4}, {0.95f, 5}, {1.0f, 5}};
    expect_keeps_the_top(&p, &p.top_p, "top_p", cases, sizeof cases / sizeof cases[0]);
    /* Survivors are renormalized: top_p 0.74 keeps {0.5, 0.25} -> {2/3, 1/3}. */
    p.top_p = 0.74f;
    size_t n = halving_survivors(&p, c);
    for (size_t i = 0; i < n; i++)
        cr_assert_float_eq(c[i].p, c[i].id == 0 ? 2.0f / 3 : 1.0f / 3, 1e-6);
}

Test(sampler, top_p_on_a_large_vocab_equals_a_full_sort_reference) {
    enum { N = 32000 };
    float *logits = malloc(N * sizeof *logits), *tmp = malloc(N * sizeof *tmp);
    sampler_cand *c = malloc(N * sizeof *c);
    const float scales[] = {1.0f, 8.0f, 30.0f}; /* flat, peaked, very peaked */
    const float tops[] = {0.5f, 0.9f, 0.99f};
    for (size_t si = 0; si < 3; si++) {
        fill_logits(logits, N, 11 + (uint32_t)si, scales[si]);
        /* Reference: the exact mass z over the whole vocab, in double. */
        float m = -INFINITY;
        for (int32_t i = 0; i < N; i++)
            m = fmaxf(m, logits[i]);
        double z = 0.0;
        for (int32_t i = 0; i < N; i++)
            z += exp((double)logits[i] - m);
        for (size_t ti = 0; ti < 3; ti++) {
            sampler_params p = defaults();
            p.top_p = tops[ti];
            memcpy(tmp, logits, N * sizeof *tmp);
            size_t n = survivors(&p, tmp, N, c);
            /* Every survivor must outrank every non-survivor, and the mass
             * without the weakest survivor must be below top_p. */
            float weakest = INFINITY, strongest_out = -INFINITY;
            double kept = 0.0;
            char *in = calloc(N, 1);
            for (size_t i = 0; i < n; i++) {
                in[c[i].id] = 1;
                weakest = fminf(weakest, c[i].logit);
                kept += exp((double)c[i].logit - m);
            }
            for (int32_t i = 0; i < N; i++)
                if (!in[i]) strongest_out = fmaxf(strongest_out, logits[i]);
            cr_assert(weakest >= strongest_out, "scale %g top_p %g: not a prefix", scales[si],
                      tops[ti]);
            cr_assert(kept / z >= tops[ti] - 1e-5, "kept mass %g < top_p", kept / z);
            cr_assert((kept - exp((double)weakest - m)) / z < tops[ti] + 1e-5,
                      "nucleus not minimal");
            free(in);
        }
    }
    free(c);
    free(logits);
    free(tmp);
}

Test(sampler, min_p_drops_tokens_below_min_p_times_max_probability) {
    sampler_params p = defaults();
    sampler_cand c[5];
    /* p / p_max: 1, 0.5, 0.25, 0.125, 0.125 */
    const keep_case cases[] = {{0.0f, 5}, {0.1f, 5}, {0.2f, 3}, {0.3f, 2}, {0.6f, 1}, {1.0f, 1}};
    expect_keeps_the_top(&p, &p.min_p, "min_p", cases, sizeof cases / sizeof cases[0]);
    /* min_p is measured at temperature 1: a high temperature keeps the same set. */
    p.min_p = 0.2f;
    p.temperature = 5.0f;
    cr_assert_eq(halving_survivors(&p, c), 3);
    /* With top_p: top_p keeps 4 (0.9), then min_p 0.2 keeps 3. */
    p.temperature = 1.0f;
    p.top_p = 0.9f;
    cr_assert_eq(halving_survivors(&p, c), 3);
    /* With top_k 2 first: min_p 0.2 cannot add back. */
    p.top_k = 2;
    cr_assert_eq(halving_survivors(&p, c), 2);
}

Test(sampler, top_p_is_computed_over_the_top_k_survivors) {
    sampler_params p = defaults();
    sampler_cand c[5];
    /* top_k 2 leaves {0.5, 0.25} -> renormalized {2/3, 1/3}: top_p 0.6 keeps 1
     * (over the whole vocab it would keep 2). */
    p.top_k = 2;
    p.top_p = 0.6f;
    cr_assert_eq(halving_survivors(&p, c), 1);
    p.top_p = 0.7f;
    cr_assert_eq(halving_survivors(&p, c), 2);
}

/* ---------------------------------------------------------------------------
 * Penalties and EOS
 * ------------------------------------------------------------------------- */

/* Accepts the n ids of hist in order, asserting each is taken. */
static void accept_all(sampler *s, const int32_t *hist, size_t n) {
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(sampler_accept(s, hist[i]), 0, "id %d", hist[i]);
}

/* The defaults but a presence penalty of 1 over the last last_n tokens:
 * penalties_of() reads -1 for an id in the window, 0 for one outside it. */
static sampler_params presence_window(int32_t last_n) {
    sampler_params p = defaults();
    p.presence_penalty = 1.0f;
    p.penalty_last_n = last_n;
    return p;
}

/* The penalties alone: sampler_apply_penalties over n zero logits, in l. */
static void penalties_of(sampler *s, float *l, size_t n) {
    memset(l, 0, n * sizeof *l);
    sampler_apply_penalties(s, l);
}

Test(sampler, penalties_change_logits_exactly_as_the_formulas) {
    enum { N = 8 };
    sampler_params p = defaults();
    p.repetition_penalty = 1.3f;
    p.frequency_penalty = 0.5f;
    p.presence_penalty = 0.25f;
    sampler *s = make_n(&p, N);
    const int32_t hist[] = {2, 5, 2, 7, 2, 5};
    accept_all(s, hist, sizeof hist / sizeof hist[0]);
    const float raw[N] = {1.0f, -1.0f, 2.0f, 0.5f, 0.0f, -3.0f, 4.0f, 0.0f};
    float l[N];
    memcpy(l, raw, sizeof l);
    sampler_apply_penalties(s, l);
    const int count[N] = {0, 0, 3, 0, 0, 2, 0, 1};
    for (int i = 0; i < N; i++) {
        float want = raw[i];
        if (count[i] > 0) {
            want = want > 0.0f ? want / 1.3f : want * 1.3f;
            want -= (float)count[i] * 0.5f + 0.25f;
        }
        cr_assert_eq(l[i], want, "id %d: got %g want %g", i, l[i], want);
    }
    cr_assert_eq(sampler_accept(s, N), TPS_ERANGE);
    cr_assert_eq(sampler_accept(s, -1), TPS_ERANGE);
    sampler_free(s);
}

Test(sampler, penalty_window_forgets_tokens_older_than_last_n) {
    enum { N = 16 };
    sampler_params p = presence_window(3);
    sampler *s = make_n(&p, N);
    /* Window after these: {4, 5, 4}. Tokens 1..3 fell out. */
    const int32_t hist[] = {1, 2, 3, 3, 4, 5, 4};
    accept_all(s, hist, sizeof hist / sizeof hist[0]);
    float l[N];
    penalties_of(s, l, N);
    for (int i = 0; i < N; i++)
        cr_assert_eq(l[i], (i == 4 || i == 5) ? -1.0f : 0.0f, "id %d: %g", i, l[i]);
    sampler_free(s);

    /* A long run through a small map exercises deletion; compare to a recount. */
    p.penalty_last_n = 5;
    p.presence_penalty = 0.0f;
    p.frequency_penalty = 1.0f;
    s = make_n(&p, N);
    int32_t seq[500];
    uint32_t x = 5;
    for (int i = 0; i < 500; i++) {
        x = x * 1664525u + 1013904223u;
        seq[i] = (int32_t)((x >> 16) % N);
        sampler_accept(s, seq[i]);
        if (i % 37 != 0) continue;
        int want[N] = {0};
        for (int j = i; j >= 0 && j > i - 5; j--)
            want[seq[j]]++;
        float z[N];
        penalties_of(s, z, N);
        for (int t = 0; t < N; t++)
            cr_assert_eq(z[t], -(float)want[t], "step %d id %d", i, t);
    }
    sampler_free(s);
}

Test(sampler, penalty_last_n_zero_disables_and_minus_one_means_context) {
    enum { N = 4 };
    sampler_params p = presence_window(0);
    sampler *s = make_n(&p, N);
    sampler_accept(s, 1);
    float l[N];
    penalties_of(s, l, N);
    cr_assert_eq(l[1], 0.0f);
    sampler_free(s);

    p.penalty_last_n = -1;
    sampler_vocab v = vocab_of(N);
    v.n_ctx = 100;
    s = make(&p, &v);
    sampler_accept(s, 1);
    for (int i = 0; i < 99; i++)
        sampler_accept(s, 2);
    penalties_of(s, l, N);
    cr_assert_eq(l[1], -1.0f, "still inside a 100-token window");
    sampler_accept(s, 2);
    penalties_of(s, l, N);
    cr_assert_eq(l[1], 0.0f, "101st token pushes it out");
    sampler_free(s);
}

Test(sampler, repetition_penalty_changes_the_greedy_choice) {
    enum { N = 3 };
    sampler_params p = defaults();
    p.temperature = 0.0f;
    p.repetition_penalty = 1.5f;
    sampler *s = make_n(&p, N);
    float l[N] = {3.0f, 2.5f, 0.0f};
    cr_assert_eq(sampler_sample(s, l), 0);
    sampler_accept(s, 0);
    float l2[N] = {3.0f, 2.5f, 0.0f};
    cr_assert_eq(sampler_sample(s, l2), 1, "3/1.5 = 2 < 2.5");
    sampler_free(s);
}

Test(sampler, ignore_eos_never_picks_eos) {
    enum { N = 4 };
    sampler_params p = defaults();
    p.ignore_eos = true;
    p.seed = 7;
    sampler_vocab v = vocab_of(N);
    v.n_eog = 2;
    v.eog_ids[0] = 2;
    v.eog_ids[1] = 3;
    sampler *s = make(&p, &v);
    const float logits[N] = {0.0f, 0.0f, 5.0f, 4.0f}; /* EOS/EOT dominate */
    float tmp[N];
    for (int k = 0; k < 2000; k++) {
        int32_t t = sample_copy(s, logits, N, tmp);
        cr_assert(t == 0 || t == 1, "picked %d", t);
    }
    sampler_free(s);
    p.temperature = 0.0f;
    s = make(&p, &v);
    cr_assert_eq(sample_copy(s, logits, N, tmp), 0, "greedy skips EOS too");
    sampler_free(s);
    p.ignore_eos = false;
    s = make(&p, &v);
    cr_assert_eq(sample_copy(s, logits, N, tmp), 2, "without the flag EOS wins");
    sampler_free(s);
}

/* ---------------------------------------------------------------------------
 * Validation
 * ------------------------------------------------------------------------- */

static void expect_bad(const sampler_params *p, const char *field) {
    const char *got = NULL;
    tps_err err = {{0}};
    cr_assert_eq(sampler_params_validate(p, &got, &err), TPS_EINVAL, "%s accepted", field);
    cr_assert_str_eq(got, field);
    cr_assert(strncmp(err.msg, field, strlen(field)) == 0, "message '%s' should name %s", err.msg,
              field);
}

Test(sampler, validation_errors_name_the_field) {
    sampler_params p, d;
    sampler_params_default(&d);
    tps_err err;
    const char *field = "x";
    cr_assert_eq(sampler_params_validate(&d, &field, &err), 0);
    cr_assert_null(field);

    p = d, p.temperature = -0.5f, expect_bad(&p, "temperature");
    p = d, p.temperature = NAN, expect_bad(&p, "temperature");
    p = d, p.temperature = INFINITY, expect_bad(&p, "temperature");
    p = d, p.top_k = -1, expect_bad(&p, "top_k");
    p = d, p.top_p = 0.0f, expect_bad(&p, "top_p");
    p = d, p.top_p = 1.5f, expect_bad(&p, "top_p");
    p = d, p.top_p = NAN, expect_bad(&p, "top_p");
    p = d, p.min_p = -0.1f, expect_bad(&p, "min_p");
    p = d, p.min_p = 2.0f, expect_bad(&p, "min_p");
    p = d, p.repetition_penalty = 0.0f, expect_bad(&p, "repetition_penalty");
    p = d, p.repetition_penalty = NAN, expect_bad(&p, "repetition_penalty");
    p = d, p.frequency_penalty = 3.0f, expect_bad(&p, "frequency_penalty");
    p = d, p.presence_penalty = -INFINITY, expect_bad(&p, "presence_penalty");
    p = d, p.penalty_last_n = -2, expect_bad(&p, "penalty_last_n");

    sampler *s = NULL;
    p = d, p.top_p = 2.0f;
    sampler_vocab v = vocab_of(10);
    cr_assert_eq(sampler_create(&s, &p, &v, &err), TPS_EINVAL);
    cr_assert_null(s);
}

/* ---------------------------------------------------------------------------
 * logit_bias
 * ------------------------------------------------------------------------- */

/* -100 bans a token (even the argmax), +100 all but forces one at any
 * temperature; bad entries are refused by name. */
Test(sampler, logit_bias_bans_and_forces_and_refuses_bad_entries) {
    sampler_params p = defaults();
    p.temperature = 0.0f;
    sampler *s = make_n(&p, 64);
    float l[64], scratch[64];
    fill_logits(l, 64, 3, 4.0f);
    int32_t top = sample_copy(s, l, 64, scratch);
    tps_err err = {{0}};
    sampler_bias ban = {.id = top, .bias = -100.0f};
    cr_assert_eq(sampler_set_logit_bias(s, &ban, 1, &err), 0, "%s", err.msg);
    cr_expect_neq(sample_copy(s, l, 64, scratch), top, "the banned argmax is not drawn");
    sampler_free(s);
    p.temperature = 1.0f;
    p.seed = 7;
    s = make_n(&p, 64);
    sampler_bias force = {.id = 17, .bias = 100.0f};
    cr_assert_eq(sampler_set_logit_bias(s, &force, 1, &err), 0, "%s", err.msg);
    for (int i = 0; i < 200; i++)
        cr_assert_eq(sample_copy(s, l, 64, scratch), 17, "draw %d", i);
    sampler_bias bad_id = {.id = 64, .bias = 1.0f}, bad_bias = {.id = 3, .bias = 101.0f};
    cr_expect_eq(sampler_set_logit_bias(s, &bad_id, 1, &err), TPS_EINVAL);
    cr_expect(strstr(err.msg, "64") && strstr(err.msg, "logit_bias"), "%s", err.msg);
    cr_expect_eq(sampler_set_logit_bias(s, &bad_bias, 1, &err), TPS_EINVAL);
    cr_expect(strstr(err.msg, "[-100, 100]"), "%s", err.msg);
    sampler_free(s);
}
