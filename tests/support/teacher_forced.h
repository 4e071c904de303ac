/* Teacher-forced comparison of a quantized model with its f32 original
 * (tests only): both run one token at a time on the f32 model's greedy
 * tokens, and the worst normalised logit error over the positions is
 * returned; or the same for several types made from one preset, and the
 * making of those models. Asserts (Criterion) on any load or
 * forward failure. */
#ifndef TPS_TESTS_TEACHER_FORCED_H
#define TPS_TESTS_TEACHER_FORCED_H

#include <stddef.h>
#include <stdint.h>

/* max over pos < steps of ||logits_q - logits_f32|| / ||logits_f32||, both
 * models fed the f32 model's argmax (BOS first). */
double teacher_forced_error(const char *f32_path, const char *q_path, uint32_t steps);

/* The preset made (model_make, this seed) in f32 and in each of types[0..n)
 * in a temporary folder (removed after); err[i] the teacher_forced_error of
 * types[i] against the f32 one. */
struct model_preset;
struct llama_model;
/* The preset made at path (model_make, this type and seed); asserts. */
void test_model_make(const char *path, const struct model_preset *pre, uint32_t type,
                     uint64_t seed);
/* The same into a fresh file from tmpl ("...XXXXXX", filled in; the caller
 * unlinks it), loaded. */
struct llama_model *test_model_made(char *tmpl, const struct model_preset *pre, uint32_t type,
                                    uint64_t seed);
void teacher_forced_errors(const struct model_preset *pre, uint64_t seed, const uint32_t *types,
                           size_t n, uint32_t steps, double *err);

/* A type made from the preset, its name in messages, and the bound on its
 * teacher_forced_error. */
typedef struct tf_case {
    uint32_t type;
    const char *name;
    double tol;
} tf_case;
/* teacher_forced_errors for cases[0..n) (n <= 8): each error logged and
 * expected within its case's bound; err[i] for the caller's comparisons. */
void teacher_forced_check(const struct model_preset *pre, uint64_t seed, const tf_case *cases,
                          size_t n, uint32_t steps, double *err);

#endif
