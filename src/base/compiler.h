/* Compiler attributes used across modules, defined once (GCC and Clang). */
#ifndef TPS_BASE_COMPILER_H
#define TPS_BASE_COMPILER_H

/* For the small vector helpers of the kernels and attention: inlined even
 * at -O1 (the sanitizer builds), where a call per block costs more than the
 * block's arithmetic. */
#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* Makes the vector variable v live in a register at this point, for no
 * instruction: GCC can then neither fold its load into each instruction that
 * reads it (a load per use) nor reassociate a chain of adds through it. The
 * kernels' chain_pin and attention's reg_ps are this. */
#define KEEP_IN_REGISTER(v) __asm__("" : "+x"(v))

#endif
