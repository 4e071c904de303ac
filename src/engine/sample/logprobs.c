/* Log-softmax and top-k of one logits row (see logprobs.h). */
#include "engine/sample/logprobs.h"

#include <math.h>

double logprobs_lse(const float *restrict x, size_t n) {
    float m = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (x[i] > m) m = x[i];
    if (!(m > -INFINITY)) return -INFINITY;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += exp((double)x[i] - (double)m);
    /* sum >= 1: the maximum contributes exp(0) (cppcheck cannot see it) */
    /* cppcheck-suppress invalidFunctionArg */
    return (double)m + log(sum);
}

size_t logprobs_top(int32_t *ids, float *lps, const float *restrict x, size_t n, uint32_t k,
                    double lse) {
    if (k > LOGPROBS_MAX_TOP) k = LOGPROBS_MAX_TOP;
    float best[LOGPROBS_MAX_TOP];
    size_t have = 0;
    for (size_t i = 0; i < n && k; i++) {
        const float v = x[i];
        if (!(v > -INFINITY)) continue; /* NaN never ranks, nor -inf: a suppressed token */
        if (have == k && !(v > best[k - 1])) continue; /* ties keep the lower id */
        size_t j = have < k ? have++ : k - 1;
        while (j > 0 && v > best[j - 1]) {
            best[j] = best[j - 1];
            ids[j] = ids[j - 1];
            j--;
        }
        best[j] = v;
        ids[j] = (int32_t)i;
    }
    for (size_t j = 0; j < have; j++)
        lps[j] = (float)((double)best[j] - lse);
    return have;
}
