/* Compiler attributes used across modules, defined once (GCC and Clang). */
#ifndef TPS_BASE_COMPILER_H
#define TPS_BASE_COMPILER_H

/* For the small vector helpers of the kernels and attention: inlined even
 * at -O1 (the sanitizer builds), where a call per block costs more than the
 * block's arithmetic. */
#define ALWAYS_INLINE static inline __attribute__((always_inline))

#endif
