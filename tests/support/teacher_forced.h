/* Teacher-forced comparison of a quantized model with its f32 original
 * (tests only): both run one token at a time on the f32 model's greedy
 * tokens, and the worst normalised logit error over the positions is
 * returned. Asserts (Criterion) on any load or forward failure. */
#ifndef TPS_TESTS_TEACHER_FORCED_H
#define TPS_TESTS_TEACHER_FORCED_H

#include <stdint.h>

/* max over pos < steps of ||logits_q - logits_f32|| / ||logits_f32||, both
 * models fed the f32 model's argmax (BOS first). */
double teacher_forced_error(const char *f32_path, const char *q_path, uint32_t steps);

#endif
