/* llama.cpp reference outputs (tests/data/<dir>/reference.json and
 * .logits.f32, made by tests/data/tools/dump_ref.c) and the teacher-forced
 * check of a tps model against them, for the tests that compare whole
 * models with llama.cpp (test_arch_reference.c, test_quant_reference.c).
 * Asserts with Criterion. */
#ifndef TPS_TESTS_LLAMA_REF_H
#define TPS_TESTS_LLAMA_REF_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/forward/forward.h"

typedef struct llama_ref {
    json_t *j;
    float *logits; /* (n_logit_cases, n_generated, n_vocab) */
    size_t n_vocab, n_gen, n_logit_cases;
} llama_ref;

/* Reads tests/data/<dir>/reference.json and reference.logits.f32. */
void llama_ref_load(llama_ref *r, const char *dir);
void llama_ref_free(llama_ref *r);

/* A forward state and an F32 KV cache for one model on one kernel tier. */
typedef struct ref_rig {
    kv_cache *kv;
    fwd_state *s;
} ref_rig;
void ref_rig_open(ref_rig *g, const llama_model *m, kernel_tier tier);
void ref_rig_close(ref_rig *g);

/* The integers of a JSON array into out (at most cap); returns the count. */
size_t ref_ids_of(json_t *arr, int32_t *out, size_t cap);

/* What one teacher-forced run saw. */
typedef struct llama_ref_stats {
    size_t positions; /* compared with llama.cpp's logits */
    size_t exact;     /* of those, normalised logit error <= LLAMA_REF_EXACT */
    size_t near_ties; /* llama.cpp's top-2 margin within twice our largest deviation there */
    double worst, worst_exact_run; /* worst error; worst over the exact positions */
} llama_ref_stats;

/* A position whose logits equal llama.cpp's to float rounding. */
#define LLAMA_REF_EXACT 1e-5

/* Every case: prefill, then llama.cpp's greedy ids fed one at a time
 * (teacher forcing). strict: each argmax must be llama.cpp's (asserted,
 * label in the message). Not strict (quantized activations): where
 * llama.cpp's logits are recorded, the argmax must be llama.cpp's unless
 * its top-2 margin there is within twice the largest deviation of our
 * logits from its (then the order is not determined by the file; counted
 * as a near tie). Returns the worst ||ours - llama.cpp|| / ||llama.cpp||
 * over the logit cases' positions; st (may be NULL) gets the counts. */
double llama_ref_teacher_forced(const llama_ref *r, const llama_model *m, kernel_tier tier,
                                const char *label, int strict, llama_ref_stats *st);

#endif
